"""Redaction of support bundles that leave the site (pure, stdlib only).

One :class:`Redactor` per bundle: every text file and every file name goes through the same
instance, so a value gets the same replacement in every file. Replacements keep the
original's shape, so the parsers that re-grade a redacted bundle still read it:

- ``ips``: IPv4 ``192.168.3.5`` -> ``198.18.0.1`` (label ip4-1; RFC 2544 benchmarking range
  198.18.0.0/15, last octet never 0 or 255), also inside ``::ffff:a.b.c.d``, RoCE GIDs and
  perftest's decimal GIDs; IPv6 ``2001:db8:5::17`` -> ``2001:db8::1`` (ip6-1; RFC 3849
  documentation prefix), any spelling.
- ``guids``: ``0xa088c20300e3142a`` (11-16 digits) -> ``0xfeed000000000001`` (guid-1),
  ``b859:9f03:00d4:0a10`` -> ``feed:0000:0000:0001``, ibnetdiscover ``S-0002c90200e07e58`` and
  ``(2c903000f3a9b)``, lspci's PCIe Device Serial Number ``b8-59-9f-03-00-d4-0a-10`` (an
  EUI-64: a ConnectX's is its node GUID), bare 16 hex digits ``b8599f0300d40a10`` (with a
  letter among them: 16 decimal digits are a number, ``1748030377748202``); in link-local
  IPv6 / IB GIDs
  (``fe80:0000:0000:0000:0002:c903:00f9:bfa1``, ``fe80::b859:...``, perftest ``254:128:...``,
  the IPoIB 20-byte hardware address ``00:00:10:87:fe:80:...``) the fe80::/64 prefix is kept
  and the interface id (the port GUID) is mapped like a GUID.
- ``hostnames``: the names given to the constructor (case-insensitive) -> ``host-1``, their
  domain parts -> ``domain-1``, and any ``label.<known domain>`` (an FQDN becomes
  ``host-1.domain-1``).
- ``macs`` (off by default): ``aa:bb:cc:dd:ee:ff`` / ``aa-bb-..`` -> ``02:ed:00:00:00:01``, the
  ``enx<12 hex>`` interface names systemd makes from a MAC, and mstflint's ``Base MAC:
  043f72f04c46`` (bare, 12 digits). A ConnectX's Base MAC is its Base GUID's EUI
  (``043f72`` ``0300`` ``f04c46``): with ``guids`` on and ``macs`` off, the Base MAC takes the
  GUID's token in its own shape (``feed00000001`` beside ``feed000000000001``), so it cannot give
  the GUID away; other MACs are the ``macs`` kind's (``all`` includes it).
- ``serials`` (off by default): board, function, GPU and cable serials and UUIDs where a tool
  labels them (``ibdiag.bundle.redact_fields``: devlink dev info and its JSON, lspci's VPD,
  nvidia-smi -q, ethtool -m, mlxlink, ``UUID=``, ``GPU-<uuid>``) -> ``serial-1``; a UUID keeps its
  shape (``GPU-00000000-0000-0000-0000-000000000001``, uuid-1). A serial learned from its label
  is replaced wherever it appears (a report's table) when it is distinctive (6+ characters with
  a digit and not only digits, or 8+ digits).
- ``users`` (off by default): a home directory's user (``/home/alice/``, ``/users/alice/``), the
  domain column of limits.conf (``alice`` -> ``user-1``, ``@physics`` -> ``@group-1``; ``*`` and
  ``root`` kept) and the invoking users given to the constructor, wherever they appear as words.
- ``paths`` (off by default): in a kernel command line (a line with ``BOOT_IMAGE=`` or
  ``root=``), the values of ``key=/path`` and ``key=host:/path`` -> ``/path-1`` (the host is a
  hostname: ``host-2.domain-1``), but not /dev nodes, the system's directories or the kernel and
  initrd images (``BOOT_IMAGE=/vmlinuz-5.15.0-101-generic`` stays).

``ALL_KINDS`` (``--redact all``) is every kind: each one keeps what ibdiag's parsers read.
The labelled kinds find their labels in plain text, inside a JSON string (report.json holds each
command's output as one) and in an escaped HTML page alike.

The same value is recognised in every spelling (``0x0002c90300f9bfa1``, ``0002:c903:00f9:bfa1``
and the GID ``fe80::2:c903:f9:bfa1`` share one token; an IPv4 and its ``::ffff:`` form too).
Shapes are kept: a GID written in full stays in full, upper case stays upper case.

Kept on purpose (not identifying): 127.0.0.0/8, 0.0.0.0/8, 255.255.255.255 and netmasks
(255.x contiguous), ``::``, ``::1``, IPv6 multicast ff00::/8 (the IPoIB broadcast GID),
GUID-shaped values below 2**47 (an OUI under 00:00:80, which no IB vendor uses:
``0x0000000000000000``, counters, user-space pointers ``VAddr 0x007f9fc479c000``, PCI BARs
``Memory at 0000218002000000``), with the top 16 bits all ones (kernel pointers
``0xffff8e8b...``) or the low 32 bits all zero (flag masks ``0x5000401600000000``); 16 bare
decimal digits (a ``port_xmit_data`` past 10^15, an NCCL Inspector dump's JSON
``"dump_timestamp_us": 1748030377748202``: replaced by hex they would no longer parse); the
all-zero and the broadcast MAC. Never matched: PCI addresses ``0000:0c:00.0``, versions
``20.31.2354`` / ``4.18.0-513.el8`` / ``OFED-5.8-1.0.1.1`` (in text, an IPv4 preceded by
``-`` or a word character, or followed by ``.digit``, is not an address; :meth:`Redactor.name`
is laxer), rates, timestamps ``12:34:56``, LIDs ``0x3a4``, masks ``0x00010000``.

Tokens are never redacted again: running the output through the same Redactor returns it
unchanged. The mapping (:attr:`Redactor.mapping`, :meth:`Redactor.table`) is for the admin
to keep locally; it must never be written into the bundle.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple

from ibdiag.bundle import redact_fields as fields

KINDS = ("hostnames", "ips", "guids", "macs", "serials", "users", "paths")
DEFAULT_KINDS = ("hostnames", "ips", "guids")
# ``--redact all``: every kind, each one safe to turn on (the tokens keep what the parsers read)
ALL_KINDS = KINDS

_V4_BASE = int(ipaddress.IPv4Address("198.18.0.0"))
_V4_SPAN = 1 << 17  # 198.18.0.0/15
_V6_BASE = int(ipaddress.IPv6Address("2001:db8::"))
_GUID_BASE = 0xFEED << 48
_MAC_BASE = 0x02ED << 32
_LINK_LOCAL = 0xFE80 << 112  # fe80::/64, the default IB subnet prefix
_V4_MAPPED = 0xFFFF << 32  # ::ffff:0:0/96

# Names that would redact words, or collide with our own tokens.
_UNUSABLE_NAMES = {"localhost", "localdomain", "localhost.localdomain", "host", "domain"}

_H4 = r"[0-9a-f]{1,4}"
_OCT = r"\d{1,3}"
_DOTTED = rf"{_OCT}\.{_OCT}\.{_OCT}\.{_OCT}"
# IPv6 in every legal spelling; the forms with an embedded dotted IPv4 come first so that
# ``::ffff:1.2.3.4`` is taken whole rather than as ``::ffff:1`` and ``.2.3.4``.
_IPV6 = (
    r"(?:"
    rf"(?:{_H4}:){{6}}{_DOTTED}"
    rf"|::(?:{_H4}:){{0,5}}{_DOTTED}"
    rf"|(?:{_H4}:){{1,5}}(?::{_H4}){{0,4}}:{_DOTTED}"
    rf"|(?:{_H4}:){{7}}{_H4}"
    rf"|(?:{_H4}:){{1,6}}(?::{_H4}){{1,6}}"
    rf"|(?:{_H4}:){{1,7}}:"
    rf"|::{_H4}(?::{_H4}){{1,6}}"
    r")"
)


def _compress6(value: int, upper: bool) -> str:
    """RFC 5952 text of an IPv6 address, hex groups only (the same on every Python)."""
    groups = [(value >> (112 - 16 * i)) & 0xFFFF for i in range(8)]
    best_start, best_len, start = -1, 0, -1
    for i, group in enumerate([*groups, 1]):
        if group == 0 and start < 0:
            start = i
        elif group != 0 and start >= 0:
            if i - start > best_len and i - start >= 2:
                best_start, best_len = start, i - start
            start = -1
    parts = [f"{g:x}" for g in groups]
    if best_start >= 0:
        text = ":".join(parts[:best_start]) + "::" + ":".join(parts[best_start + best_len :])
    else:
        text = ":".join(parts)
    return text.upper() if upper else text


def _exploded6(value: int, upper: bool) -> str:
    text = ":".join(f"{(value >> (112 - 16 * i)) & 0xFFFF:04x}" for i in range(8))
    return text.upper() if upper else text


def _has_upper(text: str) -> bool:
    return any(c in "ABCDEF" for c in text)


def _v4_kept(value: int) -> bool:
    first = value >> 24
    if first in (0, 127) or value == 0xFFFFFFFF:
        return True
    if first == 255:  # a netmask: ones then zeros
        inverted = ~value & 0xFFFFFFFF
        return inverted & (inverted + 1) == 0
    return False


def _guid_kept(value: int) -> bool:
    """Not a GUID: below 2**47 (an OUI under 00:00:80, none used by IB vendors: zero GUIDs,
    counters, user-space pointers 0x00007f..., PCI BARs), kernel pointers 0xffff...,
    or low 32 bits all zero (flag masks, aligned addresses)."""
    return value < (1 << 47) or (value >> 48) == 0xFFFF or value & 0xFFFFFFFF == 0


class _Space:
    """Original value (int) -> token value (int) for one class of identifiers."""

    def __init__(self, label: str, make: Callable[[int], Optional[int]]) -> None:
        self.label = label
        self._make = make
        self.forward: Dict[int, int] = {}
        self.labels: Dict[int, str] = {}  # token value -> "ip4-1"
        self._next = 1
        self.last: Optional[str] = None  # label of the last token handed out or met

    def get(self, value: int) -> int:
        if value in self.labels:  # already a token: never redacted again
            self.last = self.labels[value]
            return value
        token = self.forward.get(value)
        if token is None:
            while True:
                candidate = self._make(self._next)
                self._next += 1
                if candidate is not None and candidate != value and candidate not in self.forward:
                    break
            token = candidate
            self.forward[value] = token
            self.labels[token] = f"{self.label}-{len(self.forward)}"
        self.last = self.labels[token]
        return token


def _v4_token(n: int) -> Optional[int]:
    if n >= _V4_SPAN:
        raise RuntimeError("more than 131070 distinct IPv4 addresses to redact")
    return None if (n & 0xFF) in (0, 0xFF) else _V4_BASE + n


def _numbered(tokens: Dict[str, str], key: str, kind: str) -> str:
    """``key``'s token in ``tokens``: the one it has, else the next ``<kind>-<n>``."""
    token = tokens.get(key)
    if token is None:
        token = tokens[key] = f"{kind}-{len(tokens) + 1}"
    return token


class Redactor:
    """Consistent, shape-keeping redaction of one support bundle (see the module docstring)."""

    def __init__(
        self,
        kinds: Iterable[str] = DEFAULT_KINDS,
        hostnames: Iterable[str] = (),
        users: Iterable[str] = (),
    ) -> None:
        """kinds: which classes to redact (``KINDS``); hostnames: the node's own names (FQDNs
        or short names) to replace wherever they appear, with their domain parts (hostnames
        cannot be found by pattern alone); users: the invoking user's names (SUDO_USER, the
        login name), replaced wherever they appear as a word (``root``, service accounts such
        as ``slurm`` or ``ubuntu`` and names shorter than 3 characters are not: they would hit
        words and name no person)."""
        self.kinds = frozenset(kinds)
        unknown = self.kinds - set(KINDS)
        if unknown:
            raise ValueError(f"unknown redaction kind(s): {', '.join(sorted(unknown))}")
        self._v4 = _Space("ip4", _v4_token)
        self._v6 = _Space("ip6", lambda n: _V6_BASE + n)
        self._guid = _Space("guid", lambda n: _GUID_BASE + n)
        self._mac = _Space("mac", lambda n: _MAC_BASE + n)
        self._spaces = (self._v4, self._v6, self._guid, self._mac)
        self._hosts: Dict[str, str] = {}
        self._domains: Dict[str, str] = {}
        self._map: Dict[str, str] = {}
        self._rows: Dict[str, Tuple[str, str]] = {}  # original -> (kind, label)
        names, domains = self._split_names(hostnames)
        self._names = names
        self._rx_text = self._build(names, domains, lax=False)
        self._rx_name = self._build(names, domains, lax=True)
        # serials, users, paths: value -> token, learned where a tool labels the value
        self._serials: Dict[str, str] = {}  # value -> token
        self._uuids: Dict[str, str] = {}  # lower-case UUID -> token
        self._users: Dict[str, str] = {}
        self._groups: Dict[str, str] = {}
        self._paths: Dict[str, str] = {}
        self._tokens: Set[str] = set()  # every token handed out: never redacted again
        self._derived_macs: Set[int] = set()  # Base MACs made from the GUID map (guids only)
        self._literals: Dict[str, str] = {}  # original text -> token, replaced everywhere
        self._literal_paths: Dict[str, str] = {}
        self._rx_literal: Optional[re.Pattern] = None
        self._literals_built = (0, 0)
        self._labelled = [entry for entry in fields.LABELLED if self._labelled_on(entry[0])]
        self._rx_labelled = (
            re.compile(
                "|".join(
                    f"(?P<p{i}>{prefix})(?P<v{i}>{value})"
                    for i, (_, prefix, value) in enumerate(self._labelled)
                ),
                re.IGNORECASE,
            )
            if self._labelled
            else None
        )
        if "users" in self.kinds:
            for user in users:
                name = (user or "").strip()
                if self._user_usable(name):
                    self._literals[name] = self._user_token(name)

    # -- public API ---------------------------------------------------------------------

    def text(self, text: str) -> str:
        """``text`` with every identifier of the enabled kinds replaced by its token: first
        the labelled values (a kernel command line's paths, serials, users; learned, so that
        the same value elsewhere gets the same token), then those learned values wherever they
        appear, then the patterns (addresses, GUIDs, MACs, host names)."""
        if not text:
            return text
        text = self._labelled_pass(text)
        text = self._literal_pass(text)
        if self._rx_text is None:
            return text
        return self._rx_text.sub(self._replace, text)

    def learn(self, text: str) -> None:
        """Learn the labelled values in ``text`` (serials, users, a command line's paths)
        without redacting anything yet, so that a value met unlabelled in a file redacted
        earlier (a report's table) already has its token."""
        if text:
            self._labelled_pass(text)

    def name(self, value: str) -> str:
        """A file name or path, redacted with the same mapping (``/`` separators kept; an
        IPv4 next to ``-`` or ``_`` counts here, as in ``ping-10.1.2.3.txt``)."""
        if not value:
            return value
        value = self._literal_pass(value)
        if self._rx_name is None:
            return value
        return "/".join(self._rx_name.sub(self._replace, part) for part in value.split("/"))

    @property
    def mapping(self) -> Dict[str, str]:
        """Original text -> replacement, for every spelling met so far. Keep it LOCALLY
        (never in the bundle): it undoes the redaction."""
        return dict(self._map)

    def table(self) -> List[Dict[str, str]]:
        """The mapping as rows ``{kind, label, original, replacement}`` (label: ``ip4-1``...),
        sorted by label, for a local mapping file."""
        rows = [
            {"kind": kind, "label": label, "original": original, "replacement": self._map[original]}
            for original, (kind, label) in self._rows.items()
        ]
        return sorted(rows, key=lambda r: (r["kind"], _label_key(r["label"]), r["original"]))

    def summary(self) -> Dict[str, int]:
        """How many distinct values of each enabled kind were replaced so far."""
        counts = {
            "hostnames": len(self._hosts) + len(self._domains),
            "ips": len(self._v4.forward) + len(self._v6.forward),
            "guids": len(self._guid.forward),
            "macs": len(self._mac.forward),
            "serials": len(self._serials) + len(self._uuids),
            "users": len(self._users) + len(self._groups),
            "paths": len(self._paths),
        }
        return {kind: counts[kind] for kind in KINDS if kind in self.kinds}

    # -- construction -------------------------------------------------------------------

    def _split_names(self, hostnames: Iterable[str]) -> Tuple[List[str], List[str]]:
        names: Set[str] = set()
        domains: Set[str] = set()
        if "hostnames" not in self.kinds:
            return [], []
        for raw in hostnames:
            name = (raw or "").strip().rstrip(".").lower()
            if not self._usable(name):
                continue
            labels = name.split(".")
            if self._usable(labels[0]):
                names.add(labels[0])
            if len(labels) > 1:
                domains.add(".".join(labels[1:]))
                for i in range(2, len(labels) - 1):
                    domains.add(".".join(labels[i:]))
        names -= domains
        by_length = lambda s: (-len(s), s)  # noqa: E731 - longest first in alternations
        return sorted(names, key=by_length), sorted(domains, key=by_length)

    @staticmethod
    def _usable(name: str) -> bool:
        if len(name) < 2 or name.isdigit() or name in _UNUSABLE_NAMES:
            return False
        if not re.fullmatch(r"[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?", name):
            return False
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return True
        return False

    def _build(self, names: List[str], domains: List[str], lax: bool) -> Optional[re.Pattern]:
        on = self.kinds
        branches = []
        if on & {"ips", "guids"}:
            # IPoIB hardware address: 4 bytes of flags/QPN, then the port's 16-byte GID.
            branches.append(
                r"(?<![0-9a-z:])(?P<ipoib>(?:[0-9a-f]{2}:){19}[0-9a-f]{2})(?![0-9a-z:])"
            )
            # perftest prints GIDs as 16 decimal bytes.
            branches.append(r"(?<![0-9a-z:])(?P<decgid>(?:\d{1,3}:){15}\d{1,3})(?![0-9a-z:])")
            branches.append(rf"(?<![0-9a-z:.])(?P<ip6>{_IPV6})(?![0-9a-z:]|\.\d)")
        if "guids" in on:
            branches += [
                r"(?<![0-9a-z:.])(?P<gcolon>[0-9a-f]{4}(?::[0-9a-f]{4}){3})(?![0-9a-z:]|\.\d)",
                r"(?<![0-9a-z])0x(?P<g0x>[0-9a-f]{11,16})(?![0-9a-z])",
                # lspci's "Device Serial Number b8-59-9f-03-00-d4-0a-10": the PCIe DSN, an
                # EUI-64 (a ConnectX's is its node GUID)
                r"(?<![0-9a-z:-])(?P<gdsn>[0-9a-f]{2}(?:-[0-9a-f]{2}){7})(?![0-9a-z:-])",
                r"(?<![0-9a-z])(?P<ghs>[hsr])-(?P<ghsv>[0-9a-f]{16})(?![0-9a-z])",
                r"\((?P<gparen>[0-9a-f]{11,16})\)",
                # a bare GUID has a hex letter: 16 decimal digits are a number (a data
                # counter past 10^15, a timestamp in microseconds), to stay a number
                r"(?<![0-9a-z-])(?P<gbare>(?=[0-9]{0,15}[a-f])[0-9a-f]{16})(?![0-9a-z-])",
            ]
        if "ips" in on:
            before, after = (r"[\d.]", r"\d|\.\d") if lax else (r"[\w.-]", r"[\w-]|\.\d")
            branches.append(rf"(?<!{before})(?P<ip4>{_DOTTED})(?!{after})")
        if "macs" in on:
            # an interface named after its MAC (systemd's altname enx043f72f04c46)
            branches.append(r"(?<![0-9a-z])enx(?P<enx>[0-9a-f]{12})(?![0-9a-z])")
            branches.append(
                r"(?<![0-9a-z:-])(?P<mac>[0-9a-f]{2}(?P<macsep>[:-])(?:[0-9a-f]{2}(?P=macsep)){4}"
                r"[0-9a-f]{2})(?![0-9a-z:-])"
            )
        if "hostnames" in on and (names or domains):
            label = r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?"
            alts = []
            if domains:
                bare = [d for d in domains if "." in d]
                if bare:  # a bare multi-label domain ("search cluster.example.com")
                    alts.append("(?P<dom>" + "|".join(re.escape(d) for d in bare) + ")")
                doms = "|".join(re.escape(d) for d in domains)
                # any host in a known domain, the longest domain winning (lazy prefix)
                alts.append(rf"(?P<hpre>{label}(?:\.{label})*?)\.(?P<hdom>{doms})")
            if names:
                alts.append("(?P<host>" + "|".join(re.escape(n) for n in names) + ")")
            branches.append(r"(?<![a-z0-9])(?:" + "|".join(alts) + r")(?![a-z0-9])")
        if not branches:
            return None
        return re.compile("|".join(branches), re.IGNORECASE)

    # -- replacement --------------------------------------------------------------------

    def _replace(self, match: re.Match) -> str:
        for space in self._spaces:
            space.last = None
        group = match.lastgroup
        original = match.group(0)
        kind = "guids"
        if group == "ip6":
            replacement, kind = self._ip6_text(original)
        elif group == "ipoib":
            replacement, kind = self._ipoib(original)
        elif group == "decgid":
            replacement, kind = self._decgid(original)
        elif group in ("gcolon", "g0x", "ghsv", "gparen", "gbare", "gdsn"):
            replacement = self._guid_text(match, group)
        elif group == "ip4":
            replacement, kind = self._ip4_text(original), "ips"
        elif group == "mac":
            replacement, kind = self._mac_text(match.group("mac"), match.group("macsep")), "macs"
        elif group == "enx":
            replacement, kind = "enx" + self._mac_text(match.group("enx"), ""), "macs"
        else:
            replacement, kind = self._host_text(match), "hostnames"
        if replacement != original:
            self._remember(original, replacement, kind)
        return replacement

    def _remember(
        self, original: str, replacement: str, kind: str, label: Optional[str] = None
    ) -> None:
        if original in self._map:
            return
        self._map[original] = replacement
        self._rows[original] = (kind, label or self._label(kind, replacement))

    def _label(self, kind: str, replacement: str) -> str:
        if kind == "hostnames":
            return replacement
        labels = [space.last for space in self._spaces if space.last]
        return labels[-1] if labels else kind

    # IPv4 ------------------------------------------------------------------------------

    def _ip4_value(self, value: int) -> int:
        if "ips" not in self.kinds or _v4_kept(value):
            return value
        return self._v4.get(value)

    def _ip4_text(self, text: str) -> str:
        octets = [int(o) for o in text.split(".")]
        if any(o > 255 for o in octets):
            return text
        value = (octets[0] << 24) | (octets[1] << 16) | (octets[2] << 8) | octets[3]
        token = self._ip4_value(value)
        if token == value:
            return text
        return str(ipaddress.IPv4Address(token))

    # IPv6, GIDs ------------------------------------------------------------------------

    def _ip6_value(self, value: int) -> Tuple[int, str]:
        """(replacement value, kind) of one IPv6 address or GID."""
        if value in (0, 1) or (value >> 120) == 0xFF:
            return value, "ips"
        if (value >> 32) == (_V4_MAPPED >> 32):
            return (value & ~0xFFFFFFFF) | self._ip4_value(value & 0xFFFFFFFF), "ips"
        if (value >> 64) == (_LINK_LOCAL >> 64):
            iid = value & ((1 << 64) - 1)
            if "guids" in self.kinds:
                return (value >> 64 << 64) | self._guid_value(iid), "guids"
        if "ips" not in self.kinds:
            return value, "ips"
        return self._v6.get(value), "ips"

    def _ip6_text(self, text: str) -> Tuple[str, str]:
        try:
            value = int(ipaddress.IPv6Address(text))
        except ValueError:
            return text, "ips"
        new, kind = self._ip6_value(value)
        if new == value:
            return text, kind
        if "." in text:  # embedded dotted IPv4: keep the spelling, swap the IPv4
            if (new >> 32) == (value >> 32):
                head = text.rpartition(":")[0]
                return f"{head}:{ipaddress.IPv4Address(new & 0xFFFFFFFF)}", kind
            return _compress6(new, _has_upper(text)), kind
        full = re.fullmatch(r"[0-9a-f]{4}(?::[0-9a-f]{4}){7}", text, re.IGNORECASE)
        render = _exploded6 if full else _compress6
        return render(new, _has_upper(text)), kind

    def _ipoib(self, text: str) -> Tuple[str, str]:
        octets = text.split(":")
        value = int("".join(octets[4:]), 16)
        new, kind = self._ip6_value(value)
        if new == value:
            return text, kind
        tail = [f"{(new >> (120 - 8 * i)) & 0xFF:02x}" for i in range(16)]
        out = ":".join(octets[:4] + tail)
        return (out.upper() if _has_upper(text) else out), kind

    def _decgid(self, text: str) -> Tuple[str, str]:
        octets = [int(o) for o in text.split(":")]
        if any(o > 255 for o in octets):
            return text, "ips"
        value = int.from_bytes(bytes(octets), "big")
        new, kind = self._ip6_value(value)
        if new == value:
            return text, kind
        return ":".join(f"{b:02d}" for b in new.to_bytes(16, "big")), kind

    # GUIDs, MACs -----------------------------------------------------------------------

    def _guid_text(self, match: re.Match, group: str) -> str:
        original = match.group(0)
        digits = match.group(group)
        plain = digits.replace(":", "").replace("-", "")
        value = int(plain, 16)
        token = self._guid_value(value)
        if token == value:
            return original
        text = f"{token:016x}" if len(plain) == 16 else f"{token:x}"
        if group == "gcolon":
            text = ":".join(text[i : i + 4] for i in range(0, 16, 4))
        elif group == "gdsn":
            text = "-".join(text[i : i + 2] for i in range(0, 16, 2))
        if _has_upper(digits):
            text = text.upper()
        start, end = match.span(group)
        base = match.start(0)
        return original[: start - base] + text + original[end - base :]

    def _guid_value(self, value: int) -> int:
        if "guids" not in self.kinds or _guid_kept(value):
            return value
        return self._guid.get(value)

    def _mac_text(self, text: str, sep: str) -> str:
        value = int(text.replace(sep, ""), 16)
        if value in (0, (1 << 48) - 1):
            return text
        token = self._mac.get(value)
        out = sep.join(f"{(token >> (40 - 8 * i)) & 0xFF:02x}" for i in range(6))
        return out.upper() if _has_upper(text) else out

    # Labelled values: serials, users, paths, the base MAC --------------------------------

    def _labelled_on(self, kind: str) -> bool:
        if kind == "base_mac":  # the same EUI as the base GUID: see _base_mac
            return bool(self.kinds & {"macs", "guids"})
        return kind in self.kinds

    def _labelled_pass(self, text: str) -> str:
        if "paths" in self.kinds and ("BOOT_IMAGE=" in text or "root=" in text):
            text = fields.CMDLINE_LINE.sub(self._cmdline_line, text)
        if self._rx_labelled is None:
            return text
        return self._rx_labelled.sub(self._labelled_value, text)

    def _labelled_value(self, match: re.Match) -> str:
        index = int((match.lastgroup or "v0")[1:])
        kind = self._labelled[index][0]
        prefix, raw = match.group(f"p{index}"), match.group(f"v{index}")
        value = raw.rstrip()
        trail = raw[len(value) :]
        if kind == "base_mac":
            new = self._base_mac(value)
        elif kind == "users":
            new = self._user_text(value)
        else:
            new = self._serial_text(prefix, value)
        return prefix + new + trail

    def _serial_text(self, prefix: str, value: str) -> str:
        if value in self._tokens or not fields.identifying(value):
            return value
        if "Vendor specific" in prefix and "[VU]" not in prefix.upper():
            if not fields.hex_serial(value):  # [V0] PCIeGen5 x16, [VA] MLX:MN=...
                return value
        parts = fields.uuid_parts(value)
        if parts is None and prefix.upper().endswith("UUID="):  # UUID=ABCD-1234 (vfat)
            parts = ("", value)
        if parts is not None:
            head, uuid = parts
            if uuid in self._tokens:
                return value
            token = self._uuids.get(uuid.lower())
            if token is None:
                token = self._new_token(
                    self._uuids, uuid.lower(), lambda n: fields.shaped_number(uuid, n)
                )
                self._remember(uuid, token, "serials", f"uuid-{len(self._uuids)}")
            self._literals.setdefault(uuid, token)
            return head + token
        token = self._serials.get(value)
        if token is None:
            token = self._new_token(self._serials, value, lambda n: f"serial-{n}")
            self._remember(value, token, "serials", token)
        if fields.literal_ok(value):
            self._literals.setdefault(value, token)
        return token

    def _new_token(self, table: Dict[str, str], key: str, make: Callable[[int], str]) -> str:
        token = make(len(table) + 1)
        table[key] = token
        self._tokens.add(token)
        return token

    def _base_mac(self, value: str) -> str:
        """``Base MAC: 043f72f04c46``: with macs, the MAC's token; with guids alone, the token
        of the GUID the MAC is the EUI-48 of (``043f720300f04c46``: a ConnectX's base GUID is
        its base MAC with 03:00 in the middle), so that the MAC cannot give the GUID away."""
        number = int(value, 16)
        if number in (0, (1 << 48) - 1) or number in self._derived_macs:
            return value
        if "macs" in self.kinds:
            return self._mac_text(value, "")
        guid = (number >> 24) << 40 | 0x0300 << 24 | (number & 0xFFFFFF)
        token = self._guid_value(guid)
        if token == guid:
            return value
        mac = (token >> 40) << 24 | (token & 0xFFFFFF)
        self._derived_macs.add(mac)
        out = f"{mac:012x}"
        out = out.upper() if _has_upper(value) else out
        self._remember(value, out, "guids", self._guid.labels.get(token, "guids"))
        return out

    # users

    def _user_usable(self, name: str) -> bool:
        return (
            len(name) >= 3
            and name.lower() not in fields.SERVICE_ACCOUNTS
            and name not in _UNUSABLE_NAMES
            and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*\$?", name) is not None
        )

    def _user_token(self, name: str) -> str:
        token = self._users.get(name)
        if token is None:
            token = self._new_token(self._users, name, lambda n: f"user-{n}")
            self._remember(name, token, "users", token)
        return token

    def _user_text(self, value: str) -> str:
        sigil = value[:1] if value[:1] in "@%" else ""
        name = value[len(sigil) :]
        if value in self._tokens or name in self._tokens or name in fields.KEPT_USERS:
            return value
        if not sigil:
            return self._user_token(name)
        token = self._groups.get(name)
        if token is None:
            token = self._new_token(self._groups, name, lambda n: f"group-{n}")
            self._remember(value, sigil + token, "users", token)
        return sigil + token

    # paths (a kernel command line)

    def _cmdline_line(self, match: re.Match) -> str:
        return fields.CMDLINE_ARG.sub(self._cmdline_arg, match.group(0))

    def _cmdline_arg(self, match: re.Match) -> str:
        key, host, path = match["key"], match["host"], match["path"]
        if path in self._tokens or fields.path_kept(key, path):
            return match.group(0)
        token = self._paths.get(path)
        if token is None:
            token = self._new_token(self._paths, path, lambda n: f"/path-{n}")
            self._remember(path, token, "paths", token[1:])
        if len(path) > 1:
            self._literal_paths.setdefault(path, token)
        if host and "hostnames" in self.kinds and not re.fullmatch(r"[\d.]+", host):
            host = self._learned_host(host)
        return f"{key}={host + ':' if host else ''}{token}"

    def _learned_host(self, host: str) -> str:
        """A server a command line names (``nfsroot=nfs01.example.com:/...``): a hostname
        token, replaced wherever the name appears from now on."""
        if host in self._tokens or host.lower() in self._hosts.values():
            return host
        first, _, domain = host.partition(".")
        token = self._host_token(first)
        if domain:
            token = f"{token}.{self._domain_token(domain)}"
        self._tokens.add(token)
        self._literals.setdefault(host, token)
        self._remember(host, token, "hostnames", token)
        return token

    # learned values, wherever they appear

    def _literal_pass(self, text: str) -> str:
        if not self._literals and not self._literal_paths:
            return text
        size = (len(self._literals), len(self._literal_paths))
        if self._rx_literal is None or self._literals_built != size:
            self._rx_literal = self._build_literals()
            self._literals_built = size
        return self._rx_literal.sub(self._literal_value, text)

    def _build_literals(self) -> re.Pattern:
        def alternation(values: Iterable[str]) -> str:
            return "|".join(re.escape(v) for v in sorted(values, key=lambda v: (-len(v), v)))

        branches = []
        if self._literals:
            words = alternation(self._literals)
            branches.append(rf"(?<![A-Za-z0-9])(?P<word>{words})(?![A-Za-z0-9])")
        if self._literal_paths:
            paths = alternation(self._literal_paths)
            branches.append(rf"(?<![\w/.-])(?P<path>{paths})(?![\w.-])")
        return re.compile("|".join(branches))

    def _literal_value(self, match: re.Match) -> str:
        if match.lastgroup == "path":
            return self._literal_paths[match.group(0)]
        return self._literals[match.group(0)]

    # Hostnames -------------------------------------------------------------------------

    def _host_token(self, name: str) -> str:
        return _numbered(self._hosts, name.lower(), "host")

    def _domain_token(self, name: str) -> str:
        return _numbered(self._domains, name.lower(), "domain")

    def _host_text(self, match: re.Match) -> str:
        groups = match.groupdict()
        if groups.get("hdom") is not None:
            prefix = groups["hpre"]
            host = prefix if prefix.lower() in self._hosts.values() else self._host_token(prefix)
            return f"{host}.{self._domain_token(groups['hdom'])}"
        if groups.get("dom") is not None:
            return self._domain_token(groups["dom"])
        return self._host_token(groups["host"])


def _label_key(label: str) -> Tuple[str, int]:
    head, _, tail = label.rpartition("-")
    return (head, int(tail)) if tail.isdigit() else (label, 0)
