"""The perfquery_fec family: each port's FEC counters per lane, from ``perfquery -T``
(PortExtendedSpeedsCounters; infiniband-diags).

**What it plans** (level standard): ``perfquery -T -C DEV -P PORT`` for every ACTIVE
InfiniBand port of every HCA (a port that is not ACTIVE has no LID to query), as the perfquery
family addresses its ports; a device or port name that may not go on a command line is planned
refused. Ethernet (RoCE) ports: no run (they have no PMA; their FEC is ethtool's). Never
``-r``/``-R``: ibdiag never resets a counter.

**What it gives**: ``Port.facts["fec"]`` (``ibdiag.facts.fec.PortFec``) on every port it ran
for, with the run's outcome: counters in one of the two layouts, or why there are none - not
installed, no permission, timed out, or ``not-supported`` when perfquery answers ``cannot
query PortExtendedSpeedsCounters`` (the port's PMA does not implement the attribute: the ibsim
simulator, older HCAs and switches). The far end's ``perfquery -T`` (``ibdiag.families.partner``)
is read by the same ``port_fec``.

**The text** (rdma-core ``perfquery.c``: ``common_func`` prints a header and libibmad's
``_dump_fields``, one ``Name:.....value`` a line, names padded with dots to 32 columns)::

    # PortExtendedSpeedsCounters counters: Lid 12 port 1
    PortSelect:......................1
    CounterSelect:...................0x0000000000000000
    SyncHeaderErrorCounter:..........0
    ...
    FECUncorrectableBlockCtrLane11:..0

or ``# PortExtendedSpeedsCounters with RS-FEC Active counters: Lid 12 port 1`` with the
RS-FEC fields (``ibdiag.facts.fec``). Failing, perfquery prints ``perfquery: iberror: failed:
cannot query PortExtendedSpeedsCounters`` on stdout (libibmad's ``ibwarn`` lines on stderr) and
exits 255. The lines are read by the perfquery family's ``parse_perfquery``; this module only
names the fields. Parsers never raise.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Union

from ibdiag.facts.fec import EXTENDED_SPEEDS, LANES, RS_FEC, FecLane, PortFec
from ibdiag.facts.fec import fec_role as role
from ibdiag.facts.outcome import NoData, RunOutcome
from ibdiag.families import Planned, Runs, Update, outcome_of
from ibdiag.families._text import as_text, cap
from ibdiag.families.perfquery import parse_perfquery
from ibdiag.model import CommandRun, Snapshot
from ibdiag.sources import names

SOURCE = "perfquery_fec"
LEVEL = "standard"
ORDER = 31  # beside perfquery; nothing depends on it

UNSUPPORTED = re.compile(r"cannot query PortExtendedSpeedsCounters", re.IGNORECASE)
UNSUPPORTED_REASON = (
    "the port's PMA does not implement PortExtendedSpeedsCounters (no per-lane FEC counters: "
    "a simulator, or an HCA/switch without them)"
)

# Field names by layout (libibmad fields.c), and their widths in bits.
_PER_LANE = {
    EXTENDED_SPEEDS: (
        ("ErrorDetectionCounterLane", "error_detection", 16),
        ("FECCorrectableBlockCtrLane", "corrected_blocks", 32),
        ("FECUncorrectableBlockCtrLane", "uncorrected_blocks", 32),
    ),
    RS_FEC: (("FECCorrectableSymbolCtrLane", "corrected_symbols", 32),),
}
_PORT_FIELDS = (
    ("SyncHeaderErrorCounter", "sync_header_errors", 16),
    ("UnknownBlockCounter", "unknown_blocks", 16),
)
_RS_TOTALS = (
    ("PortFECCorrectableBlockCtr", "corrected_blocks", 32),
    ("PortFECUncorrectableBlockCtr", "uncorrected_blocks", 32),
    ("PortFECCorrectedSymbolCtr", "corrected_symbols", 32),
)


def argv(device: str, port: int) -> List[str]:
    return ["perfquery", "-T", "-C", device, "-P", str(port)]


def plan(snap: Snapshot) -> List[Planned]:
    """``perfquery -T`` of every ACTIVE InfiniBand port (module docstring)."""
    planned = []
    for dev in snap.devices:
        for port in dev.ports:
            if port.state == 4 and port.is_infiniband:
                why = names.device_name_problem(dev.name) or names.port_problem(port.number)
                command = argv(dev.name, port.number)
                planned.append(Planned(role(dev.target(port)), command, None, why))
    return planned


def interpret(snap: Snapshot, runs: Runs) -> Update:
    """``Port.facts["fec"]`` on every port ``perfquery -T`` ran for."""
    found: Dict[str, Dict[str, Dict[str, PortFec]]] = {}
    for dev in snap.devices:
        for port in dev.ports:
            target = dev.target(port)
            run = runs.get(role(target))
            if run is not None:
                found[target] = {"facts": {"fec": port_fec(run)}}
    return Update(ports=found)


def port_fec(run: CommandRun) -> PortFec:
    """What one ``perfquery -T`` run read, with its outcome: counters when it exited 0 and
    printed them; else why not (``not-supported`` for ``cannot query
    PortExtendedSpeedsCounters``, ``garbage`` for output with no FEC counters)."""
    outcome = outcome_of(run)
    text = run.stdout + "\n" + run.stderr
    if outcome.no_data is None:
        parsed = parse_fec(text)
        if parsed.layout is None:
            why = parsed.mad_error or (parsed.problems[0] if parsed.problems else "no counters")
            no_data = NoData.NOT_SUPPORTED if UNSUPPORTED.search(text) else NoData.GARBAGE
            outcome = _judged(outcome, no_data, f"perfquery -T: {why}")
        return parsed.model_copy(update={"outcome": outcome})
    mad_error = _unsupported_line(text)
    if mad_error is not None and outcome.no_data == NoData.FAILED:
        outcome = _judged(outcome, NoData.NOT_SUPPORTED, f"{mad_error}: {UNSUPPORTED_REASON}")
    return PortFec(mad_error=mad_error, outcome=outcome)


def _judged(outcome: RunOutcome, no_data: NoData, reason: str) -> RunOutcome:
    return outcome.model_copy(update={"no_data": no_data, "reason": reason})


def _unsupported_line(text: str) -> Optional[str]:
    for line in text.splitlines():
        if UNSUPPORTED.search(line):
            return line.strip()[:200]
    return None


def parse_fec(text: Union[str, bytes, None]) -> PortFec:
    """The PortExtendedSpeedsCounters ``perfquery -T`` printed (stdout, plus stderr if you
    have it), in either layout; ``layout`` None (with the reason in ``problems`` or
    ``mad_error``) when the text holds none of their counters."""
    text = as_text(text)
    reading = parse_perfquery(text)
    problems = list(reading.problems)
    counters = dict(reading.counters)
    layout = _layout(reading.header, counters)
    if layout is None:
        if counters and reading.mad_error is None:
            problems.append(
                f"not PortExtendedSpeedsCounters output (header {reading.header!r}, "
                f"{len(counters)} other counters)"
            )
        elif reading.mad_error is None and not problems:
            problems.append("no FEC counters in perfquery -T output")
        return PortFec(lid=reading.lid, port=reading.port, mad_error=reading.mad_error,
                       problems=cap(problems))  # fmt: skip
    values: Dict[str, Optional[int]] = {}
    missing: List[str] = []
    for name, field, bits in _PORT_FIELDS + (_RS_TOTALS if layout == RS_FEC else ()):
        values[field] = _value(counters, name, bits, problems, missing)
    lanes = []
    for lane in range(LANES):
        fields = {
            field: _value(counters, f"{prefix}{lane}", bits, problems, missing)
            for prefix, field, bits in _PER_LANE[layout]
        }
        lanes.append(FecLane(lane=lane, **fields))
    if missing:
        more = f" and {len(missing) - 4} more" if len(missing) > 4 else ""
        shown = ", ".join(missing[:4]) + more
        problems.append(f"{len(missing)} fields missing (output cut short?): {shown}")
    if layout == EXTENDED_SPEEDS:
        values["corrected_blocks"] = _total(lane.corrected_blocks for lane in lanes)
        values["uncorrected_blocks"] = _total(lane.uncorrected_blocks for lane in lanes)
    return PortFec(layout=layout, lid=reading.lid, port=reading.port or reading.port_select,
                   lanes=lanes, mad_error=reading.mad_error, problems=cap(problems),
                   **values)  # fmt: skip


def _layout(header: Optional[str], counters: Dict[str, int]) -> Optional[str]:
    title = (header or "").lower()
    if "rs-fec" in title or any(name in counters for name, _, _ in _RS_TOTALS):
        return RS_FEC
    if any(name.startswith("FECCorrectableSymbolCtrLane") for name in counters):
        return RS_FEC
    if "extendedspeedscounters" in title.replace(" ", "") or any(
        name.startswith(("FECCorrectableBlockCtrLane", "ErrorDetectionCounterLane"))
        for name in counters
    ):
        return EXTENDED_SPEEDS
    return None


def _value(
    counters: Dict[str, int], name: str, bits: int, problems: List[str], missing: List[str]
) -> Optional[int]:
    if name not in counters:
        missing.append(name)
        return None
    value = counters[name]
    if value >= 2**bits:
        problems.append(f"{name} {value} is wider than its {bits} bits: left out")
        return None
    return value


def _total(values) -> Optional[int]:
    read = [value for value in values if value is not None]
    return sum(read) if read else None
