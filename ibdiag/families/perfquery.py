"""The perfquery family: a port's PMA counters (infiniband-diags ``perfquery``), read the way
the subnet manager and the fabric tools read them.

**What it plans** (level standard): ``perfquery -x``, ``-E`` and ``-X`` for every ACTIVE
InfiniBand port, addressed ``-C DEV -P PORT`` (a port that is not ACTIVE has no LID to
query), and plain ``perfquery`` at once when ``-x`` gives nothing usable (HCAs without
extended counters). Never ``-r``/``-R``: ibdiag never resets a counter. A device or port name
that may not go on a command line (``ibdiag.sources.names``) is planned refused, so that
port's check says why it has no counters while every other port's commands run.

**What it gives**: ``Port.perfquery`` (``ibdiag.facts.perfquery.PortPma``) on every port it
ran for: the reading of each run that exited 0 (``PmaReading``, parsed straight from the text
by ``parse_perfquery``) and what became of every run (``PortPma.runs``); a port with runs but
none that succeeded gets a ``PortPma`` with no readings, so "collected and failed" differs
from "not collected" (None). The far end's perfquery (``ibdiag.families.partner``) is parsed
by the same ``parse_perfquery``.

**The text**:

What perfquery prints (ibmad's ``mad_dump_*`` field dumps, one ``Name:.....value`` per line, the
dots padding the name to a column)::

    # Port extended counters: Lid 133 port 1 (CapMask: 0x5A00 CapMask2: 0x0000000)
    PortSelect:......................1
    CounterSelect:...................0x0000
    PortXmitData:....................37108676853855
    ...

Headers seen: ``# Port counters:`` (plain and ``-x``; older builds), ``# Port extended counters:``
(``-x``), ``# PortRcvErrorDetails counters:`` (``-E``), ``# PortXmitDataSL counters:`` (``-X``,
fields ``XmtDataSL0``..``XmtDataSL15``), ``# PortRcvDataSL counters:`` (``-S``). Old libibmad
builds used short names (``SymbolErrors``, ``LinkDowned``, ``XmtData``, ...); those are renamed
to today's names (``SymbolErrorCounter``, ``LinkDownedCounter``, ``PortXmitData``) so the rest
of ibdiag sees one set of names.

Hex-valued fields (``CounterSelect``, ``CounterSelect2``: ``mad_dump_hex`` fields, masks rather
than counts) are kept out of ``counters`` and land in ``hex_fields``; ``PortSelect`` becomes
``port_select``. ``counters`` therefore holds only decimal counts.

How perfquery fails: a VM without a PMA, a RoCE port (no MADs), a MAD timeout or a missing umad
device prints ``ibwarn: [pid] func: ...`` / ``ibpanic: ...`` / ``perfquery: iberror: failed:
...`` (usually on stderr: pass stderr too, e.g. ``parse_perfquery(stdout + "\\n" + stderr)``).
Those lines become ``mad_error`` (the reason a check shows when it skips). A lone ``ibwarn``
beside real counters (``PerfMgt ClassPortInfo 0x... extended counters not indicated``) is a
warning, not a failure: it goes to ``problems`` and the counters stand.

Parsers never raise: garbage, binary junk, empty or truncated output give what could be read
plus ``problems``.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple, Union

from ibdiag import roles
from ibdiag.facts.perfquery import PmaReading, PortPma
from ibdiag.families import Planned, Runs, Update, outcome_of
from ibdiag.families._text import IB_TOOL_ERROR, as_text, cap, output_lines, quote, trim
from ibdiag.model import Snapshot
from ibdiag.sources import names

SOURCE = "perfquery"
LEVEL = "standard"
ORDER = 30

# perfquery mode -> its flag. "basic" is perfquery's default PortCounters query, run only as
# the fallback of "x" (HCAs without extended counters). Never a reset flag (-r/-R).
FLAGS: Dict[str, Tuple[str, ...]] = {
    "basic": (),
    "x": ("-x",),  # PortCountersExtended (64-bit data counters + the error counters)
    "E": ("-E",),  # PortRcvErrorDetails
    "X": ("-X",),  # PortXmitDataSL (transmit data per SL)
}
PLANNED_MODES = ("x", "E", "X")  # "basic" only as the fallback of "x"


def argv(device: str, port: int, mode: str) -> List[str]:
    """The argv for one read-only perfquery of the local port ``device``/``port``; an unknown
    ``mode`` is a KeyError (a programming error). Names are vetted by ``plan``, not here."""
    return ["perfquery", *FLAGS[mode], "-C", device, "-P", str(port)]


def plan(snap: Snapshot) -> List[Planned]:
    """The perfquery runs of every ACTIVE InfiniBand port (module docstring)."""
    planned = []
    for dev in snap.devices:
        for port in dev.ports:
            if not (port.state == 4 and port.is_infiniband):
                continue
            why = names.device_name_problem(dev.name) or names.port_problem(port.number)
            target = dev.target(port)
            for mode in PLANNED_MODES:
                command = argv(dev.name, port.number, mode)
                fallback = None
                if mode == "x":
                    basic = argv(dev.name, port.number, "basic")
                    fallback = Planned(roles.perfquery("basic", target), basic)
                planned.append(Planned(roles.perfquery(mode, target), command, fallback, why))
    return planned


def interpret(snap: Snapshot, runs: Runs) -> Update:
    """``Port.perfquery`` on every port perfquery ran for (module docstring)."""
    found: Dict[str, Dict[str, PortPma]] = {}
    for dev in snap.devices:
        for port in dev.ports:
            target = dev.target(port)
            pma = port_pma(target, runs)
            if pma is not None:
                found[target] = {"perfquery": pma}
    return Update(ports=found)


def port_pma(target: str, runs: Runs) -> Optional[PortPma]:
    """The readings of ``target``'s runs; None when perfquery was not run for it."""
    by_mode = {mode: runs.get(roles.perfquery(mode, target)) for mode in roles.PERFQUERY_MODES}
    ran = {mode: run for mode, run in by_mode.items() if run is not None}
    if not ran:
        return None
    readings = {mode: reading(run) for mode, run in ran.items()}
    return PortPma(
        counters=readings.get("x") or readings.get("basic"),
        rcv_error_details=readings.get("E"),
        xmit_data_sl=readings.get("X"),
        runs={mode: outcome_of(run) for mode, run in ran.items()},
    )


def reading(run) -> Optional[PmaReading]:
    """What ``run`` printed (stdout and stderr: perfquery prints its ibwarn/iberror lines on
    stderr), if it exited 0; None otherwise. Odd text is never an error here."""
    if run is None or not run.succeeded:
        return None
    parsed = parse_perfquery(run.stdout + "\n" + run.stderr)
    return parsed.model_copy(update={"role": run.role})


# libibmad before 1.3 named the PortCounters fields differently.
OLD_COUNTER_NAMES: Dict[str, str] = {
    "SymbolErrors": "SymbolErrorCounter",
    "LinkRecovers": "LinkErrorRecoveryCounter",
    "LinkDowned": "LinkDownedCounter",
    "RcvErrors": "PortRcvErrors",
    "RcvRemotePhysErrors": "PortRcvRemotePhysicalErrors",
    "RcvSwRelayErrors": "PortRcvSwitchRelayErrors",
    "XmtDiscards": "PortXmitDiscards",
    "XmtConstraintErrors": "PortXmitConstraintErrors",
    "RcvConstraintErrors": "PortRcvConstraintErrors",
    "LinkIntegrityErrors": "LocalLinkIntegrityErrors",
    "ExcBufOverrunErrors": "ExcessiveBufferOverrunErrors",
    "XmtData": "PortXmitData",
    "RcvData": "PortRcvData",
    "XmtPkts": "PortXmitPkts",
    "RcvPkts": "PortRcvPkts",
    "XmtWait": "PortXmitWait",
}


# "# Port extended counters: Lid 133 port 1 (CapMask: 0x5A00 CapMask2: 0x0000000)"
_HEADER = re.compile(
    r"^#\s*(?P<title>[^:]*?)\s*:\s*(?P<where>.*?)\s+port\s+(?P<port>\d+)\s*(?:\((?P<extra>.*)\))?\s*$",
    re.IGNORECASE,
)
# "PortXmitData:....................37108676853855" (dots optional, spaces tolerated)
_FIELD = re.compile(r"^\s*(?P<name>[A-Za-z][A-Za-z0-9_]*)\s*:[.\s]*(?P<value>\S.*?)\s*$")
_NUMBER = re.compile(r"^(?:\d+|0x[0-9a-fA-F]+)$")
# Other ways perfquery/libibmad/libibumad report failure (checked on lines that are not counters).
_ERROR_LINE = re.compile(
    r"^\s*(?:ibwarn|ibpanic|iberror)\b|\biberror\b|mad_rpc\w* failed|_do_madrpc|query failed"
    r"|\bfailed\b|timed out|bad status|can't resolve|can't open|No such device"
    r"|Operation not permitted|Permission denied|Connection timed out",
    re.IGNORECASE,
)


def parse_perfquery(text: Union[str, bytes, None]) -> PmaReading:
    """Parse one perfquery run (stdout, plus stderr if you have it).

    Several counter blocks for the same port (e.g. a wrapper that ran -x then -E into one file)
    are merged; blocks for other ports are left out with a problem saying so: use
    ``parse_perfquery_blocks`` for multi-port output.
    """
    text = as_text(text)
    blocks, loose_problems, error_lines = _parse(text)
    problems: List[str] = []
    if not blocks:
        counters: Dict[str, int] = {}
        result = _Block()
        problems.extend(loose_problems)
    else:
        result = blocks[0]
        counters = dict(result.counters)
        hex_fields = dict(result.hex_fields)
        kinds = [result.kind] if result.kind else []
        for other in blocks[1:]:
            same_port = (other.lid, other.port_or_select()) == (
                result.lid,
                result.port_or_select(),
            )
            if not same_port:
                problems.append(
                    f"counter block for {other.describe()} left out "
                    f"(this result is {result.describe()}; use parse_perfquery_blocks)"
                )
                continue
            for name, value in other.counters.items():
                if name in counters and counters[name] != value:
                    problems.append(
                        f"{name} appears twice with different values "
                        f"({counters[name]} and {value}); kept the first"
                    )
                    continue
                counters.setdefault(name, value)
            for name, value in other.hex_fields.items():
                hex_fields.setdefault(name, value)
            if other.kind and other.kind not in kinds:
                kinds.append(other.kind)
            problems.extend(other.problems)
        problems[:0] = [*loose_problems, *result.problems]
        result.hex_fields = hex_fields
        result.kind = "+".join(kinds) if kinds else None
    mad_error = _mad_error(error_lines, bool(counters), problems)
    if not counters and mad_error is None:
        problems.append(
            "no counters found in perfquery output" if text.strip() else "empty perfquery output"
        )
    return result.reading(counters, cap(problems), mad_error)


def parse_perfquery_blocks(text: Union[str, bytes, None]) -> List[PmaReading]:
    """One result per ``# ... counters:`` block (e.g. ``perfquery -l`` or concatenated runs).

    An error seen anywhere (ibwarn/ibpanic) is attached to every block as ``mad_error`` only
    when that block has no counters; lines outside any block are reported on the first result.
    Empty output gives an empty list.
    """
    text = as_text(text)
    blocks, loose_problems, error_lines = _parse(text)
    results: List[PmaReading] = []
    if not blocks and (error_lines or loose_problems):
        mad_error = _mad_error(error_lines, False, [])
        return [PmaReading(problems=cap(loose_problems), mad_error=mad_error)]
    for index, block in enumerate(blocks):
        problems = list(block.problems)
        if index == 0:
            problems[:0] = loose_problems
        mad_error = _mad_error(error_lines, bool(block.counters), problems)
        results.append(block.reading(dict(block.counters), cap(problems), mad_error))
    return results


class _Block:
    """Mutable accumulator for one ``# ...`` block while parsing."""

    def __init__(self) -> None:
        self.header: Optional[str] = None
        self.kind: Optional[str] = None
        self.lid: Optional[int] = None
        self.port: Optional[int] = None
        self.port_select: Optional[int] = None
        self.cap_mask: Optional[int] = None
        self.counters: Dict[str, int] = {}
        self.hex_fields: Dict[str, int] = {}
        self.problems: List[str] = []

    def port_or_select(self) -> Optional[int]:
        return self.port if self.port is not None else self.port_select

    def describe(self) -> str:
        lid = "?" if self.lid is None else str(self.lid)
        port = self.port_or_select()
        return f"Lid {lid} port {'?' if port is None else port}"

    def empty(self) -> bool:
        return self.header is None and not self.counters and self.port_select is None

    def reading(
        self, counters: Dict[str, int], problems: List[str], mad_error: Optional[str]
    ) -> PmaReading:
        return PmaReading(
            header=self.header, kind=self.kind, lid=self.lid, port=self.port,
            port_select=self.port_select, cap_mask=self.cap_mask, counters=counters,
            hex_fields=dict(self.hex_fields), problems=problems, mad_error=mad_error,
        )  # fmt: skip


def _parse(text: str) -> Tuple[List[_Block], List[str], List[str]]:
    blocks: List[_Block] = []
    loose: List[str] = []
    errors: List[str] = []
    current: Optional[_Block] = None
    for number, line in output_lines(text, IB_TOOL_ERROR, errors):
        if line.startswith("#"):
            header = _HEADER.match(line)
            if header is None:
                (current.problems if current else loose).append(
                    f"unparseable header at line {number}: {quote(line)}"
                )
                continue
            current = _Block()
            blocks.append(current)
            _fill_header(current, line, header)
            continue
        match = _FIELD.match(line)
        if match is None or not _NUMBER.match(match.group("value")):
            if _ERROR_LINE.search(line):
                errors.append(trim(line))
                continue
        if match is None:
            (current.problems if current else loose).append(
                f"unparseable line {number}: {quote(line)}"
            )
            continue
        if current is None:  # counters without a header (a wrapper stripped it)
            current = _Block()
            blocks.append(current)
        _add_field(current, match.group("name"), match.group("value"), number, line)
    return [b for b in blocks if not b.empty()], loose, errors


_LID = re.compile(r"^Lid\s+(\d+)$", re.IGNORECASE)
_CAPMASK = re.compile(r"CapMask:\s*(0x[0-9a-fA-F]+)")
_KINDS = (
    ("rcverrordetails", "rcv_error_details"),
    ("xmitdiscarddetails", "xmit_discard_details"),
    ("xmitdatasl", "xmit_data_sl"),
    ("rcvdatasl", "rcv_data_sl"),
    ("extended speeds", "extended_speeds"),
    ("extended", "extended"),
    ("port counters", "port"),
)


def _fill_header(block: _Block, line: str, match: re.Match[str]) -> None:
    block.header = line.lstrip("#").strip()
    title = match.group("title").lower()
    compact = title.replace(" ", "")
    for needle, kind in _KINDS:
        if needle.replace(" ", "") in compact:
            block.kind = kind
            break
    else:
        block.kind = title.replace(" ", "_") or None
    lid = _LID.match(match.group("where").strip())
    if lid:
        block.lid = int(lid.group(1))
    block.port = int(match.group("port"))
    extra = match.group("extra") or ""
    cap = _CAPMASK.search(extra)
    if cap:
        block.cap_mask = int(cap.group(1), 16)


_DECIMAL = re.compile(r"^\d+$")
_HEX = re.compile(r"^0x[0-9a-fA-F]+$")
_U64_MAX = 2**64 - 1


def _add_field(block: _Block, name: str, value: str, number: int, line: str) -> None:
    name = OLD_COUNTER_NAMES.get(name, name)
    if _DECIMAL.match(value):
        number_value = int(value)
        if name == "PortSelect":
            block.port_select = number_value
            return
        if number_value > _U64_MAX:
            block.problems.append(f"{name} wider than 64 bits at line {number}: {quote(line)}")
            return
        if name in block.counters and block.counters[name] != number_value:
            block.problems.append(f"{name} repeated at line {number}; kept the first value")
            return
        block.counters.setdefault(name, number_value)
        return
    if _HEX.match(value):
        block.hex_fields.setdefault(name, int(value, 16))
        return
    block.problems.append(f"unparseable value for {name} at line {number}: {quote(line)}")


# An ibwarn that alone (beside counters) does not mean the query failed.
_HARD_ERROR = re.compile(
    r"ibpanic|iberror|\bfailed\b|timed out|bad status|can't |No such|not permitted|denied",
    re.IGNORECASE,
)


def _mad_error(error_lines: List[str], have_counters: bool, problems: List[str]) -> Optional[str]:
    if not error_lines:
        return None
    hard = any(_HARD_ERROR.search(line) for line in error_lines)
    if have_counters and not hard:
        problems.extend(f"perfquery warned: {line}" for line in error_lines)
        return None
    joined = "; ".join(error_lines[:5])
    if len(error_lines) > 5:
        joined += f"; ... ({len(error_lines) - 5} more)"
    return joined
