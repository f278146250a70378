"""The kernel-log family's parser: log lines (dmesg, journalctl -k, syslog files) ->
timestamped lines -> HCA findings (``ibdiag.facts.kernel_log.KernelFinding``).

``parse_kernel_log`` accepts the forms seen in the wild and strips their decorations:

- ``dmesg``: ``[ 1234.567890] msg`` (seconds since boot);
- ``dmesg -x`` / ``--decode``: ``kern  :err   : [ 1234.5] msg`` (level kept), also with
  ``--time-format iso``: ``kern  :info  : 2025-01-17T15:36:26,128279+00:00 msg``;
- ``dmesg -T``: ``[Mon Mar  1 12:00:00 2021] msg``; ``dmesg -r``: ``<6>[ 12.3] msg``;
  ``/dev/kmsg`` records: ``6,1234,5678901,-;msg``;
- ``journalctl -k -o short-monotonic``: ``[   12.345678] host kernel: msg``;
- syslog / ``journalctl -o short|short-iso|short-precise``:
  ``Mar  1 12:00:00 host kernel: [ 12.3] msg``, ``Aug 17 06:18:01 host systemd-networkd[5398]:
  ib6: lost carrier`` (the tag is kept: non-kernel lines such as networkd's carrier messages
  are evidence too);
- ``host kernel: msg`` (no time), and bare indented text (a quoted log).

``seconds`` is the monotonic time since boot when the line has one (dmesg, short-monotonic, a
syslog line carrying the kernel's ``[ 12.3]``), else None; wall-clock stamps are kept as text in
``wallclock`` (syslog has no year, so ibdiag does not pretend to convert it).

``classify`` maps lines to the HCA they concern and to a signature of the family's catalogue
(``ibdiag.families.kernel_log.signatures``: see it for the rules). Nothing here raises on odd
input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Pattern, Sequence, Tuple, Union

from ibdiag.facts.kernel_log import KernelFinding
from ibdiag.families._text import as_text
from ibdiag.families.kernel_log.signatures import SIGNATURES, KernelSignature

__all__ = [
    "KernelLine",
    "classify",
    "kernel_log_restriction",
    "parse_kernel_log",
]

_MAX_TEXT = 4096

_KMSG = re.compile(r"^(?P<prio>\d{1,4}),(?P<seq>\d+),(?P<usec>\d+),[^;]{0,16};")
_PRIO = re.compile(r"^<(?P<prio>\d{1,4})>")
# syslog's levels by number (the low 3 bits of a priority), as dmesg -x names them
_LEVELS = ("emerg", "alert", "crit", "err", "warn", "notice", "info", "debug")
_DECODE = re.compile(
    r"^(?P<facility>kern|user|mail|daemon|auth|syslog|lpr|news|uucp|cron|authpriv|ftp"
    rf"|res\d+|local[0-7])\s*:\s*(?P<level>{'|'.join(_LEVELS)})\s*:\s?"
)
_MONO = re.compile(r"^\[\s*(?P<sec>\d+\.\d+)\]\s?")
_CTIME = re.compile(
    r"^\[(?P<ts>(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) +[A-Z][a-z]{2} +\d{1,2} +\d{1,2}:\d{2}:\d{2}"
    r" +\d{4})\]\s?"
)
_ISO = re.compile(
    r"^(?P<ts>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)\s+"
)
_SYSLOG = re.compile(
    r"^(?P<ts>(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +\d{1,2} +\d{1,2}:\d{2}:\d{2}"
    r"(?:\.\d+)?)\s+(?P<host>\S+)\s+(?P<tag>[^\s:]+):\s?"
)
# after a wall-clock stamp: "host kernel: " or "host prog[123]: "
_HOST_TAG = re.compile(r"^(?P<host>[\w.-]+) (?P<tag>kernel|[\w.@/-]+\[\d+\]):\s?")
# "host kernel: msg" with nothing before (gpud's kmsg samples, grep output of syslog files)
_HOST_KERNEL = re.compile(r"^(?P<host>[\w.-]+) (?P<tag>kernel):\s?")


@dataclass(frozen=True)
class KernelLine:
    seconds: Optional[float]  # monotonic seconds since boot, when the line carries them
    text: str  # the message, decorations removed
    level: Optional[str] = None  # "err", "warn", ... when the format says (dmesg -x, kmsg)
    wallclock: Optional[str] = None  # the wall-clock stamp as printed (syslog, iso, -T)
    tag: Optional[str] = None  # syslog tag: "kernel", "systemd-networkd[5398]"


_RESTRICTED = re.compile(
    r"read kernel buffer failed|Operation not permitted|Permission denied"
    r"|No journal files were (?:found|opened)|insufficient permissions"
    r"|not seeing messages from other users",
    re.IGNORECASE,
)


def kernel_log_restriction(text: Union[str, bytes, None]) -> Optional[str]:
    """The line of dmesg/journalctl output (pass stderr) saying the log is not readable, e.g.
    ``dmesg: read kernel buffer failed: Operation not permitted``; None if there is none."""
    for line in as_text(text).splitlines():
        if _RESTRICTED.search(line):
            stripped = line.strip()
            return stripped[:300]
    return None


def parse_kernel_log(text: Union[str, bytes, None]) -> List[KernelLine]:
    """One KernelLine per non-empty line (journal ``-- ... --`` markers dropped)."""
    lines: List[KernelLine] = []
    for raw in as_text(text).splitlines():
        parsed = _parse_line(raw)
        if parsed is not None:
            lines.append(parsed)
    return lines


def _parse_line(raw: str) -> Optional[KernelLine]:
    rest = raw.strip()
    if not rest or rest.startswith("-- "):
        return None
    seconds: Optional[float] = None
    level: Optional[str] = None
    wallclock: Optional[str] = None
    tag: Optional[str] = None

    match = _KMSG.match(rest)
    if match:
        level = _level(match.group("prio"))
        seconds = int(match.group("usec")) / 1e6
        rest = rest[match.end() :]
    else:
        match = _PRIO.match(rest)
        if match:
            level = _level(match.group("prio"))
            rest = rest[match.end() :]
    match = _DECODE.match(rest)
    if match:
        level = match.group("level")
        rest = rest[match.end() :]

    match = _MONO.match(rest)
    if match and seconds is None:
        seconds = float(match.group("sec"))
        rest = rest[match.end() :]
        host = _HOST_KERNEL.match(rest)  # journalctl -o short-monotonic
        if host:
            tag = host.group("tag")
            rest = rest[host.end() :]
    else:
        for stamp in (_CTIME, _ISO):
            match = stamp.match(rest)
            if match:
                wallclock = match.group("ts")
                rest = rest[match.end() :]
                host = _HOST_TAG.match(rest)
                if host:
                    tag = host.group("tag")
                    rest = rest[host.end() :]
                break
        else:
            match = _SYSLOG.match(rest)
            if match:
                wallclock = match.group("ts")
                tag = match.group("tag")
                rest = rest[match.end() :]
            else:
                host = _HOST_KERNEL.match(rest)
                if host:
                    tag = host.group("tag")
                    rest = rest[host.end() :]
        if tag == "kernel" and seconds is None:  # "host kernel: [ 12.345] msg"
            match = _MONO.match(rest)
            if match:
                seconds = float(match.group("sec"))
                rest = rest[match.end() :]
    text = rest.strip()
    if not text:
        return None
    return KernelLine(
        seconds=seconds, text=text[:_MAX_TEXT], level=level, wallclock=wallclock, tag=tag
    )


# A line is about InfiniBand/mlx hardware on its face (used when no known device matches).
_IB_TEXT = re.compile(
    r"mlx[45]|\bib_[a-z]|ipoib|infiniband|\brdma|\bib[psP]?\d[\w.]*\b", re.IGNORECASE
)


def classify(
    lines: Union[Sequence[KernelLine], str, bytes, None],
    bdfs: Optional[Mapping[str, str]] = None,
    netdevs: Optional[Mapping[str, str]] = None,
    signatures: Sequence[KernelSignature] = SIGNATURES,
) -> List[KernelFinding]:
    """Findings for the lines that match a signature and concern an HCA.

    ``bdfs`` maps PCI addresses to RDMA devices (``{"0000:0c:00.0": "mlx5_0"}``; the domain may
    be left out), ``netdevs`` netdev names to RDMA devices (``{"ib4": "mlx5_6"}``). A line is
    attributed to a device by, in order: an RDMA device name in it (``infiniband mlx5_0:``), a
    BDF in ``bdfs`` (the first one that is: an AER line names the root port first and the HCA
    after), a netdev in ``netdevs`` (child interfaces ``ib0.8001`` count for ``ib0``). A line
    naming none of them still counts, with device None, when it is plainly about mlx/IB/IPoIB
    (an HCA whose probe failed has no RDMA device yet); any other line is ignored. To leave out
    an HCA (``--ignore-hca``) map it here as usual and drop its findings by device.

    ``lines`` may also be raw log text. A signature whose regex does not compile is skipped.
    """
    if isinstance(lines, (str, bytes)) or lines is None:
        lines = parse_kernel_log(lines)
    resolver = _Resolver(bdfs or {}, netdevs or {})
    compiled = _compile(signatures)
    plain = [entry for entry in compiled if entry[2] is None]
    contextual = [entry for entry in compiled if entry[2] is not None]
    texts = [line.text if isinstance(line, KernelLine) else str(line) for line in lines]
    findings: List[KernelFinding] = []
    for index, line in enumerate(lines):
        text = texts[index]
        seconds = line.seconds if isinstance(line, KernelLine) else None
        device = resolver.device(text)
        relevant = device is not None or bool(_IB_TEXT.search(text))
        hit: Optional[KernelSignature] = None
        if relevant:
            for signature, pattern, _context in plain:
                if pattern.search(text):
                    hit = signature
                    break
        if hit is None:
            for signature, pattern, context in contextual:
                if pattern.search(text) and (
                    relevant or _context_matches(texts, index, signature, pattern, context)
                ):
                    hit = signature
                    break
        if hit is not None:
            findings.append(
                KernelFinding(signature=hit.id, device=device, seconds=seconds, line=text)
            )
    return findings


_END_TRACE = re.compile(r"---\[ end trace")


def _context_matches(
    texts: Sequence[str],
    index: int,
    signature: KernelSignature,
    pattern: Pattern[str],
    context: Optional[Pattern[str]],
) -> bool:
    if context is None:
        return False
    if context.search(texts[index]):
        return True
    stop = min(len(texts), index + 1 + max(0, int(signature.context_lines or 0)))
    for text in texts[index + 1 : stop]:
        if pattern.search(text):
            return False  # the next report of the same kind starts: this one named no IB frame
        if context.search(text):
            return True
        if _END_TRACE.search(text):
            return False
    return False


_CompiledSignature = Tuple[KernelSignature, Pattern[str], Optional[Pattern[str]]]


def _compile(signatures: Iterable[KernelSignature]) -> List[_CompiledSignature]:
    compiled: List[_CompiledSignature] = []
    for signature in signatures or ():
        try:
            pattern = re.compile(signature.regex)
            context = re.compile(signature.context) if signature.context else None
        except (re.error, TypeError, AttributeError):
            continue
        compiled.append((signature, pattern, context))
    return compiled


# PCI addresses as the kernel prints them (always with the domain).
_BDF = re.compile(r"\b([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])\b")
# RDMA device names written in messages ("infiniband mlx5_0:", "mlx5_ib0", "mlx5_bond_0").
_DEVICE_NAME = re.compile(r"(?<![\w-])(mlx[45]_(?:bond_)?\d+|mlx5_(?:ib|an)\d+)(?![\w-])")


class _Resolver:
    """Finds the RDMA device a log line concerns."""

    def __init__(self, bdfs: Mapping[str, str], netdevs: Mapping[str, str]) -> None:
        self.bdfs: Dict[str, str] = {}
        for key, device in _items(bdfs):
            normal = _normal_bdf(key)
            if normal:
                self.bdfs[normal] = device
        self.netdevs: Dict[str, str] = {
            name: device for name, device in _items(netdevs) if name.strip()
        }
        known = sorted(set(self.bdfs.values()) | set(self.netdevs.values()), key=len, reverse=True)
        self.known_names: Optional[Pattern[str]] = (
            re.compile(r"(?<![\w-])(" + "|".join(re.escape(n) for n in known) + r")(?![\w-])")
            if known
            else None
        )
        names = sorted(self.netdevs, key=len, reverse=True)
        self.netdev_names: Optional[Pattern[str]] = (
            re.compile(
                r"(?<![\w.-])("
                + "|".join(re.escape(n) for n in names)
                + r")(?:\.[0-9a-fA-Fx]+)?(?=[:\s,)]|$)"
            )
            if names
            else None
        )

    def device(self, text: str) -> Optional[str]:
        if self.known_names is not None:
            match = self.known_names.search(text)
            if match:
                return match.group(1)
        match = _DEVICE_NAME.search(text)
        if match:
            return match.group(1)
        if self.bdfs:
            for found in _BDF.finditer(text):
                device = self.bdfs.get(_join_bdf(found.groups()))
                if device is not None:
                    return device
        if self.netdev_names is not None:
            match = self.netdev_names.search(text)
            if match:
                return self.netdevs.get(match.group(1))
        return None


def _items(mapping: Optional[Mapping[str, str]]) -> List[Tuple[str, str]]:
    pairs: List[Tuple[str, str]] = []
    try:
        for key, value in (mapping or {}).items():
            if isinstance(key, str) and isinstance(value, str) and value:
                pairs.append((key, value))
    except (AttributeError, TypeError):
        return []
    return pairs


_BDF_KEY = re.compile(r"^(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")


def _normal_bdf(key: str) -> Optional[str]:
    match = _BDF_KEY.match(key.strip())
    if not match:
        return None
    return _join_bdf(match.groups())


def _join_bdf(groups: Tuple[Optional[str], ...]) -> str:
    domain, bus, slot, function = groups
    domain_value = int(domain, 16) if domain else 0
    return f"{domain_value:04x}:{bus.lower()}:{slot.lower()}.{function}"  # type: ignore[union-attr]


def _level(prio: str) -> Optional[str]:
    try:
        return _LEVELS[int(prio) & 7]
    except (ValueError, IndexError):
        return None
