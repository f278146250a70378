"""The ethtool family: ``ethtool -S`` per netdev - the statistics of the physical port behind
each port's netdev (IPoIB and RoCE), and the parsers of ethtool's text.

**What it plans** (level standard): ``ethtool -S NETDEV`` (read-only statistics) once for every
netdev a port has. A netdev name that may not go on a command line (``ibdiag.sources.names``)
is planned refused: recorded as never started with why, so that port's check says why it has no
counters while every other netdev's command runs.

**What it gives**: ``NetDev.ethtool`` (``ibdiag.facts.ethtool.EthtoolStats``) on every netdev it
ran for: the counters of a run that exited 0 (parsed straight from the text by
``parse_ethtool_stats``) and what became of the run (``EthtoolStats.outcome``); a run that gave no
data leaves the counters empty and says why. ethtool's "Operation not supported" / "no stats
available" from a driver without statistics is judged here as ``NoData.NOT_SUPPORTED`` (no
finding about the node), not a failure.

**The text**: ``ethtool -S IFACE`` statistics and ``ethtool IFACE`` link settings.

``ethtool -S`` prints a ``NIC statistics:`` header and one ``     name: value`` per counter. Names
are the driver's: mlx5 uses ``rx_packets``, per-queue ``rx0_packets``/``ch3_events``, physical
port ``*_phy`` (``rx_discards_phy``, ``link_down_events_phy``), per priority ``rx_prio3_pause``,
``tx_prio3_pause_duration``; other drivers use dots and brackets (``port.rx_bytes``,
``tx_queue_0_packets``, ``[0]: bytes``-style names, names with spaces). The name is everything
before the last ``:``-and-value on the line. A value that is not an unsigned decimal (or 0x hex)
number is a problem, not a crash.

``ethtool IFACE`` prints ``Settings for eth1:`` then tab-indented ``Key: value`` lines (with
continuation lines for lists); ``parse_ethtool_settings`` keeps the few that matter (speed,
duplex, link detected, port) and every raw field.

Errors (``Cannot get stats strings information: Operation not supported``, ``no stats
available``, ``Cannot get device settings: No such device``) land in ``error``. Parsers never
raise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Union

from ibdiag import roles
from ibdiag.facts.ethtool import EthtoolStats
from ibdiag.facts.outcome import NoData, RunOutcome
from ibdiag.families import Planned, Runs, Update, outcome_of
from ibdiag.families._text import as_text, cap, numbered_lines, quote, trim
from ibdiag.model import CommandRun, Snapshot
from ibdiag.sources import names

SOURCE = "ethtool"
LEVEL = "standard"
ORDER = 40


def argv(netdev: str) -> List[str]:
    """``ethtool -S NETDEV`` (read-only statistics); the name is vetted by ``plan``."""
    return ["ethtool", "-S", netdev]


def plan(snap: Snapshot) -> List[Planned]:
    """One ``ethtool -S`` per netdev of any port, by name (module docstring)."""
    found = {port.netdev.name for dev in snap.devices for port in dev.ports if port.netdev}
    return [
        Planned(roles.ethtool_stats(name), argv(name), refused=names.netdev_name_problem(name))
        for name in sorted(found)
    ]


def interpret(snap: Snapshot, runs: Runs) -> Update:
    """``NetDev.ethtool`` on every netdev ethtool -S ran for (module docstring)."""
    found: Dict[str, Dict[str, EthtoolStats]] = {}
    for dev in snap.devices:
        for port in dev.ports:
            if port.netdev is None or port.netdev.name in found:
                continue
            run = runs.get(roles.ethtool_stats(port.netdev.name))
            if run is not None:
                found[port.netdev.name] = {"ethtool": stats_of(run)}
    return Update(netdevs=found)


def stats_of(run: CommandRun) -> EthtoolStats:
    """What ``run`` printed if it exited 0 (odd text is never an error here: the parser returns
    what it could read and says what it could not in ``problems``); no counters otherwise."""
    parsed = parse_ethtool_stats(run.stdout) if run.succeeded else EthtoolStats()
    return parsed.model_copy(update={"role": run.role, "outcome": outcome(run)})


# What ethtool prints when the driver has no statistics to give (not an mlx5 netdev).
_NOT_SUPPORTED = ("Operation not supported", "no stats available", "not supported")


def outcome(run: CommandRun) -> RunOutcome:
    """``outcome_of(run)``, with ethtool's own word: a failure saying the driver has no
    statistics ("Operation not supported", "no stats available") is ``NOT_SUPPORTED``."""
    found = outcome_of(run)
    text = f"{run.stderr}\n{run.stdout}"
    if found.no_data == NoData.FAILED and any(phrase in text for phrase in _NOT_SUPPORTED):
        return found.model_copy(update={"no_data": NoData.NOT_SUPPORTED})
    return found


_U64_MAX = 2**64 - 1

_STATS_HEADER = re.compile(r"^\s*(?:NIC|PHY|Extended)?\s*statistics\s*(?:\([^)]*\))?\s*:\s*$", re.I)
# "     rx_prio3_pause: 0", "port.rx_bytes: 12", "[0]: rx_packets: 5"; value last on the line.
_STAT = re.compile(r"^\s*(?P<name>\S(?:.*?\S)?)\s*:\s*(?P<value>-?\d+|0x[0-9a-fA-F]+)\s*$")
_ERROR = re.compile(
    r"^\s*(?:Cannot\b|Couldn't|no stats available|No data available|"
    r"Operation not (?:supported|permitted)|No such device|ethtool: )",
    re.IGNORECASE,
)
# mlx5 "rx_prio3_pause", "tx_prio0_pause_duration", "rx_prio7_pause_transition";
# mlx4 "rx_pause_prio_3", "rx_pause_duration_prio_3", "rx_pause_transition_prio_3".
_PFC_MLX5 = re.compile(r"^(?P<dir>rx|tx)_prio(?P<prio>\d+)_pause(?P<kind>_duration|_transition)?$")
_PFC_MLX4 = re.compile(r"^(?P<dir>rx|tx)_pause(?P<kind>_duration|_transition)?_prio_(?P<prio>\d+)$")
_SETTING = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9 ._/-]*?)\s*:\s*(?P<value>.*)$")


@dataclass(frozen=True)
class EthtoolSettings:
    """The parts of ``ethtool IFACE`` that a health check reads."""

    speed_mbps: Optional[int]  # None when ethtool says "Unknown!" (link down) or omits it
    duplex: Optional[str]  # "full" / "half" (lower case); None when unknown
    link_detected: Optional[bool]
    port: Optional[str]
    problems: List[str]
    interface: Optional[str] = None
    auto_negotiation: Optional[bool] = None
    fields: Dict[str, str] = field(default_factory=dict)
    error: Optional[str] = None


def parse_ethtool_stats(text: Union[str, bytes, None]) -> EthtoolStats:
    """The counters of one ``ethtool -S`` run's stdout (no role, no outcome: ``stats_of``)."""
    text = as_text(text)
    counters: Dict[str, int] = {}
    problems: List[str] = []
    errors: List[str] = []
    for number, line in numbered_lines(text):
        if _STATS_HEADER.match(line):
            continue
        if line.startswith("Settings for "):
            problems.append(
                f"line {number} is 'ethtool IFACE' settings output, not 'ethtool -S': {quote(line)}"
            )
            continue
        match = _STAT.match(line)
        if match is None:
            if _ERROR.match(line):
                errors.append(trim(line))
            else:
                problems.append(f"unparseable line {number}: {quote(line)}")
            continue
        name, value_text = match.group("name"), match.group("value")
        value = int(value_text, 16) if value_text.lower().startswith("0x") else int(value_text)
        if value < 0 or value > _U64_MAX:
            problems.append(f"{name}: value out of range at line {number}: {quote(line)}")
            continue
        if name in counters:
            # Some drivers print the same name twice (e.g. per-queue blocks without an index);
            # keep the first and say so rather than silently summing.
            if counters[name] != value:
                problems.append(f"{name} repeated at line {number}; kept the first value")
            continue
        counters[name] = value
    if not counters and not errors:
        problems.append("no counters in ethtool -S output" if text.strip() else "empty output")
    return EthtoolStats(
        counters=counters, problems=cap(problems), error="; ".join(errors[:3]) or None
    )


def parse_ethtool_settings(text: Union[str, bytes, None]) -> EthtoolSettings:
    text = as_text(text)
    fields: Dict[str, str] = {}
    problems: List[str] = []
    errors: List[str] = []
    interface: Optional[str] = None
    last_key: Optional[str] = None
    key_indent: Optional[int] = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        header = re.match(r"^Settings for (\S+?):?$", line)
        if header:
            interface = header.group(1)
            last_key = None
            continue
        if _ERROR.match(line):
            errors.append(trim(line))
            continue
        expanded = raw.expandtabs(8)
        indent = len(expanded) - len(expanded.lstrip())
        if last_key is not None and key_indent is not None and indent > key_indent:
            # a continuation line: more link modes, the message-level flag names
            fields[last_key] = (fields[last_key] + " " + line).strip()
            continue
        match = _SETTING.match(line)
        if match is None:
            problems.append(f"unparseable line {number}: {quote(line)}")
            continue
        if key_indent is None:
            key_indent = indent
        last_key = match.group("key")
        fields.setdefault(last_key, match.group("value"))
    speed = _speed(fields.get("Speed"), problems)
    duplex_text = fields.get("Duplex")
    duplex = None
    if duplex_text:
        word = duplex_text.split()[0].rstrip("!").lower()
        duplex = word if word in ("full", "half") else None
    link = fields.get("Link detected")
    link_detected = {"yes": True, "no": False}.get(link.strip().lower()) if link else None
    autoneg = fields.get("Auto-negotiation")
    auto_negotiation = {"on": True, "off": False}.get(autoneg.strip().lower()) if autoneg else None
    if not fields and not errors:
        problems.append("no settings in ethtool output" if text.strip() else "empty output")
    return EthtoolSettings(
        speed_mbps=speed,
        duplex=duplex,
        link_detected=link_detected,
        port=fields.get("Port") or None,
        problems=cap(problems),
        interface=interface,
        auto_negotiation=auto_negotiation,
        fields=fields,
        error="; ".join(errors[:3]) or None,
    )


def pfc_pause_by_priority(counters: Dict[str, int]) -> Dict[int, Dict[str, int]]:
    """Per-priority pause (PFC) counters: ``{3: {"rx_pause": 12, "tx_pause": 0,
    "rx_pause_duration": 40, ...}}``.

    Keys are ``rx_pause``/``tx_pause`` (frames) and, where the driver has them,
    ``*_pause_duration`` and ``*_pause_transition``. Reads the mlx5 names
    (``rx_prio3_pause``) and the mlx4 ones (``rx_pause_prio_3``). Global (link-level) pause
    (``rx_pause_ctrl_phy``, ``tx_global_pause``) is not per priority and is not included.
    Only priorities that have at least one pause counter appear.
    """
    result: Dict[int, Dict[str, int]] = {}
    for name, value in (counters or {}).items():
        match = _PFC_MLX5.match(name) or _PFC_MLX4.match(name)
        if match is None or not isinstance(value, int):
            continue
        key = f"{match.group('dir')}_pause{match.group('kind') or ''}"
        result.setdefault(int(match.group("prio")), {})[key] = value
    return dict(sorted(result.items()))


def _speed(text: Optional[str], problems: List[str]) -> Optional[int]:
    if not text:
        return None
    match = re.match(r"^(\d+)\s*([MG])b/s$", text.strip())
    if match:
        value = int(match.group(1))
        return value * 1000 if match.group(2) == "G" else value
    if not text.strip().lower().startswith("unknown"):
        problems.append(f"unparseable Speed: {quote(text)}")
    return None
