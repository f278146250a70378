"""What the support catalogue's outputs say about a site or a person, found by its label
(pure, stdlib only): the patterns and value rules ``ibdiag.bundle.redact.Redactor`` uses for
the kinds ``serials``, ``users`` and ``paths``, and for the labelled bare MAC of ``mstflint q``.

A serial number has no shape of its own (``MT2340J88735``, ``1562521008218``, ``CWJH05025502589``),
so it is found where a tool labels it, as each tool prints it:

- ``devlink dev info``: ``serial_number``, ``board.serial_number``, ``function.uid`` (the board
  serial with a suffix: the whole value is replaced), and the same keys in ``devlink -j``'s JSON;
- ``lspci -vvv`` VPD: ``[SN] Serial number: MT2340J88735``, ``[VU] Vendor specific:`` (the
  function UID again), and any ``[Vx] Vendor specific:`` that is 16-64 hex digits (a ConnectX's
  ``[V3]``: the UUID devlink calls ``serial_number``, with a MAC inside);
- ``nvidia-smi -q``: ``Serial Number : 1562521008218``, ``GPU UUID : GPU-370465f5-...``;
- ``ethtool -m``: ``Vendor SN : MT1708FT01255``; ``mlxlink --json``: ``"Vendor Serial Number"``;
- ibdiag's own facts in report.json and snapshots: ``"serial"``, ``"board_serial"``;
- anywhere: ``GPU-<uuid>``, ``MIG-<uuid>``, ``UUID=<uuid>`` and ``PARTUUID=`` (root=UUID=...).

``N/A``, ``Not Available``, all zeros and the like identify nothing and are kept.

A user is found in a home directory (``/home/alice/``, ``/users/alice/``) and in the domain
column of a limits.conf line (``alice hard memlock unlimited``, ``@physics soft nofile 4096``:
groups too; ``*``, ``root`` and uid ranges are kept).

A kernel command line is a line with ``BOOT_IMAGE=`` or ``root=``; in it every ``key=/path`` and
``key=host:/path`` (``nfsroot=``) value is a path to redact, except ``/dev/`` nodes, the system's
own directories (/sbin, /bin, /usr, /lib, /lib64, /proc, /sys) and the kernel and initrd images
in /, /boot or a GRUB device (``BOOT_IMAGE=/vmlinuz-5.15.0-101-generic`` stays whole: the
kernel release is what support reads).
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

# Values that name nothing: kept wherever they are printed.
_PLACEHOLDERS = {
    "n/a", "na", "none", "null", "unknown", "not available", "not specified", "not supported",
    "default string", "to be filled by o.e.m.", "0", "-", "(null)",
}  # fmt: skip

UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_UUID_VALUE = re.compile(rf"(?P<prefix>(?:GPU|MIG)-)?(?P<uuid>{UUID})")
_HEX_RUN = re.compile(r"[0-9a-fA-F]{16,64}")

# limits.conf items (pam_limits(8)): a line's third column, which tells a limits line apart
_LIMIT_ITEMS = (
    "core|data|fsize|memlock|nofile|rss|stack|cpu|nproc|as|maxlogins|maxsyslogins|nonewprivs|"
    "priority|locks|sigpending|msgqueue|nice|rtprio|chroot"
)
KEPT_USERS = {"root", "*"}
# Accounts an image or a service makes, not a person: an invoking user of one of these names is
# not replaced wherever it appears as a word (it would hit words: "slurm", "test", "core"), only
# where a home directory or limits.conf labels it.
SERVICE_ACCOUNTS = {
    "root", "admin", "administrator", "user", "test", "guest", "ubuntu", "debian", "centos",
    "rocky", "almalinux", "fedora", "ec2-user", "cloud-user", "azureuser", "opc", "core", "slurm",
    "munge", "nobody", "daemon", "ansible", "ibdiag", "nvidia", "mellanox",
}  # fmt: skip

# Where a labelled line starts, and a value ends, also inside a JSON string (report.json holds
# every command's output as one: lines joined by \n, quotes escaped) and an HTML page (quotes
# as &#34;): a value stops at a quote, a backslash, a tag or an entity.
_BOL = r"(?:(?m:^)|(?<=\\n))(?:[ \t]|\\t)*"
_Q = r"(?:\\?\"|&#34;|&quot;)"
_REST = r"[^\r\n\"\\<&]{1,200}"

# (kind, prefix, value): the labelled fields, in the order they are tried at one place.
LABELLED: List[Tuple[str, str, str]] = [
    # devlink dev info (text)
    (
        "serials",
        rf"{_BOL}(?:serial_number|board\.serial_number|function\.uid)[ \t]+",
        r"[^\s\"\\<&]{1,200}",
    ),
    # devlink -j dev info, mlxlink --json, ibdiag's own facts
    (
        "serials",
        rf"{_Q}(?:serial_number|board\.serial_number|function\.uid|board_serial|serial|"
        rf"Vendor Serial Number){_Q}[ \t]*:[ \t]*{_Q}",
        rf"[^\"\\<&\r\n]{{1,200}}(?={_Q})",
    ),
    # lspci VPD, nvidia-smi -q, ethtool -m, mlxlink (text)
    (
        "serials",
        rf"{_BOL}(?:\[SN\][ \t]*Serial number|\[VU\][ \t]*Vendor specific|Serial Number|"
        r"Vendor SN|Vendor Serial Number|GPU UUID)[ \t]*:[ \t]*",
        _REST,
    ),
    # lspci VPD: a vendor-specific field that is a long hex number (a ConnectX's [V3] UUID)
    (
        "serials",
        rf"{_BOL}\[V[0-9A-Z]\][ \t]*Vendor specific:[ \t]*",
        r"[0-9a-fA-F]{16,64}(?=[ \t]*(?:\r?\n|\\n|$|[\"<]))",
    ),
    ("serials", r"(?<![\w-])(?:PART)?UUID=", r"[0-9a-fA-F]{4,}(?:-[0-9a-fA-F]{2,})*(?![\w-])"),
    ("serials", r"(?<![\w-])(?:GPU|MIG)-", rf"{UUID}(?![\w-])"),
    # mstflint / flint q: the base MAC, 12 bare hex digits (macs; guids: see Redactor)
    ("base_mac", rf"{_BOL}Base MAC:[ \t]*", r"[0-9a-fA-F]{12}(?![0-9a-zA-Z])"),
    ("users", r"(?<![\w.-])/(?:home|users|Users)/", r"[A-Za-z_][A-Za-z0-9_.-]{0,31}(?![\w.-])"),
    (
        "users",
        rf"{_BOL}#?[ \t]*",
        r"[@%]?[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?"
        rf"(?=(?:[ \t]|\\t)+(?:soft|hard|-)(?:[ \t]|\\t)+(?:{_LIMIT_ITEMS})\b)",
    ),
]

CMDLINE_LINE = re.compile(r"(?m)^.*(?:(?<![\w.-])BOOT_IMAGE=|(?<![\w.-])root=).*$")
CMDLINE_ARG = re.compile(
    r"(?<![^\s\"'])(?P<key>[A-Za-z_][\w.-]*)=(?:(?P<host>[A-Za-z0-9][\w.-]*):)?(?P<path>/[^\s\"',\\]*)"
)
_SYSTEM_DIRS = ("/dev/", "/sbin/", "/bin/", "/usr/", "/lib/", "/lib64/", "/proc/", "/sys/")
_IMAGE = re.compile(r"(?:vmlinu[xz]|bzImage|zImage|Image|initrd|initramfs|uImage)[\w.+-]*")
_IMAGE_DIRS = ("", "/", "/boot", "/boot/")


def identifying(value: str) -> bool:
    """False for a placeholder (N/A, Not Available) or a run of one character (0000...)."""
    folded = value.strip().lower()
    if not folded or folded in _PLACEHOLDERS:
        return False
    return len(set(folded.replace("-", "").replace(":", ""))) > 1


def literal_ok(value: str) -> bool:
    """Whether a learned serial is distinctive enough to be replaced wherever it appears (a
    report's table cell), not only where a tool labels it: 6+ characters with a digit, or 8+
    digits; a shorter value, or one without a digit, could be a counter or a word elsewhere."""
    if len(value) < 6 or not value.isprintable():
        return False
    return len(value) >= 8 if value.isdigit() else any(c.isdigit() for c in value)


def uuid_parts(value: str) -> Optional[Tuple[str, str]]:
    """``GPU-370465f5-...`` -> (``GPU-``, ``370465f5-...``); a bare UUID -> ("", uuid)."""
    match = _UUID_VALUE.fullmatch(value)
    return (match["prefix"] or "", match["uuid"]) if match else None


def shaped_number(template: str, n: int) -> str:
    """``n`` in hex written into ``template``'s hex digits, right-aligned, dashes and case
    kept: ``370465f5-30e0-...`` -> ``00000000-0000-...-000000000001``."""
    digits = sum(c in "0123456789abcdefABCDEF" for c in template)
    text = f"{n:0{digits}x}"[-digits:]
    if any(c in "ABCDEF" for c in template):
        text = text.upper()
    out, i = [], 0
    for c in template:
        if c in "0123456789abcdefABCDEF":
            out.append(text[i])
            i += 1
        else:
            out.append(c)
    return "".join(out)


def hex_serial(value: str) -> bool:
    return _HEX_RUN.fullmatch(value) is not None


def path_kept(key: str, path: str) -> bool:
    """A kernel command line's path that identifies nothing: a device node, the system's own
    directories, or the kernel/initrd image in /, /boot or a GRUB device (``(hd0,gpt2)/``)."""
    if path.startswith(_SYSTEM_DIRS):
        return True
    head, _, base = path.rpartition("/")
    head = re.sub(r"^\([^)]*\)", "", head)
    return _IMAGE.fullmatch(base) is not None and head in _IMAGE_DIRS
