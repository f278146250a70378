"""The devlink_health family: the firmware's liveness as the driver reports it, from iproute2's
``devlink -j health show`` (one run for the node, level standard).

**What it plans**: ``devlink -j health show`` once, when sysfs shows an HCA with a PCI function
(devlink names a device by its bus and address; a device without one has no devlink instance
ibdiag can match). Read-only: it lists the reporters; nothing is diagnosed, dumped, recovered
or set.

**What it gives**: ``Device.facts["devlink_health"]`` (``ibdiag.facts.devlink.DevlinkHealth``)
on every HCA with a PCI function: the reporters devlink lists under ``pci/<its address>`` and
that instance's ports (``pci/<address>/<port index>``), with the run's outcome - why there is
no data when there is none (not installed, not permitted, the kernel has no devlink:
``outcome_of``; ``garbage`` when it printed no JSON object of reporters).

**The text** (iproute2 ``devlink/devlink.c``: ``cmd_health_show`` ->
``pr_out_section_start(dl, "health")``, then per reporter ``pr_out_health``: the handle opens a
JSON array once per devlink instance, each reporter an object)::

    {"health":{"pci/0000:08:00.0":[{"reporter":"fw","state":"healthy","error":0,"recover":0,
      "auto_dump":true},{"reporter":"fw_fatal","state":"healthy","error":0,"recover":0,
      "grace_period":1200000,"auto_recover":true,"auto_dump":true}],
      "pci/0000:08:00.0/65535":[{"reporter":"tx","state":"healthy","error":0,"recover":0,
      "grace_period":500,"auto_recover":true,"auto_dump":true}]}}

``last_dump_date``/``last_dump_time`` appear once a dump was taken; iproute2 before 5.4 named
the reporter ``name``. A parser never raises: a value that is not what its field needs is a
recorded problem on that device's fact.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Tuple

from ibdiag.facts.devlink import DevlinkHealth, HealthReporter
from ibdiag.facts.outcome import NoData, RunOutcome
from ibdiag.families import Planned, Runs, Update, outcome_of
from ibdiag.families._text import as_text, cap
from ibdiag.model import Snapshot
from ibdiag.roles import Role

SOURCE = "devlink_health"
LEVEL = "standard"
ROLE = Role("devlink_health", target="node")
ARGV = ["devlink", "-j", "health", "show"]

_HANDLE = re.compile(r"^pci/([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])(?:/(\d+))?$")
_MAX_COUNT = 2**64 - 1  # devlink's counts are u64
_WORD = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")  # a reporter's name, a state's (kernel strings)
_STAMP = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$")  # strftime %Y-%m-%d %H:%M:%S
_NO_DEVLINK = re.compile(
    r"Failed to connect to devlink Netlink|Unknown family|Protocol not supported"
    r"|Object \"health\" not found",
    re.IGNORECASE,
)


def plan(snap: Snapshot) -> List[Planned]:
    """One run, where sysfs shows an HCA with a PCI function."""
    return [Planned(ROLE, list(ARGV))] if any(dev.pci for dev in snap.devices) else []


def interpret(snap: Snapshot, runs: Runs) -> Update:
    """``facts["devlink_health"]`` on every HCA with a PCI function; nothing when devlink was
    not run."""
    run = runs.get(ROLE)
    if run is None:
        return Update()
    outcome = outcome_of(run)
    by_address: Dict[str, Tuple[List[HealthReporter], List[str]]] = {}
    if outcome.no_data is None:
        parsed = parse(run.stdout)
        if parsed is None:
            outcome = _judged(outcome, NoData.GARBAGE, "devlink printed no JSON health section")
        else:
            by_address = parsed
    elif outcome.no_data == NoData.FAILED and _NO_DEVLINK.search(run.stderr + run.stdout):
        outcome = _judged(
            outcome, NoData.NOT_SUPPORTED, f"no devlink health here: {outcome.reason}"
        )
    found: Dict[str, Dict[str, Any]] = {}
    for dev in snap.devices:
        if dev.pci is None:
            continue
        address = dev.pci.address.lower()
        reporters, problems = by_address.get(address, ([], []))
        fact = DevlinkHealth(
            address=address, reporters=reporters, problems=problems, outcome=outcome
        )
        found[dev.name] = {"facts": {"devlink_health": fact}}
    return Update(devices=found)


def _judged(outcome: RunOutcome, no_data: NoData, reason: str) -> RunOutcome:
    return outcome.model_copy(update={"no_data": no_data, "reason": reason})


def parse(text: Any) -> Optional[Dict[str, Tuple[List[HealthReporter], List[str]]]]:
    """devlink's JSON, by PCI address (lower case): (its reporters and its ports', the problems
    met reading them). None when the text is not a JSON object with a ``health`` object. Handles
    that are not PCI functions (``auxiliary/...``, ``netdevsim/...``) are left out."""
    try:
        document = json.loads(as_text(text))
    except (ValueError, RecursionError):
        return None
    if not isinstance(document, dict) or not isinstance(document.get("health"), dict):
        return None
    found: Dict[str, Tuple[List[HealthReporter], List[str]]] = {}
    for handle, entries in document["health"].items():
        match = _HANDLE.match(handle) if isinstance(handle, str) else None
        if match is None:
            continue
        address = match.group(1).lower()
        port = int(match.group(2)) if match.group(2) is not None else None
        reporters, problems = found.setdefault(address, ([], []))
        if isinstance(entries, dict):
            entries = [entries]
        if not isinstance(entries, list):
            problems.append(f"{handle}: not a list of reporters")
            continue
        for entry in entries:
            reporter = _reporter(handle, port, entry, problems)
            if reporter is not None:
                reporters.append(reporter)
    return {address: (reporters, cap(problems)) for address, (reporters, problems) in found.items()}


def _reporter(
    handle: str, port: Optional[int], entry: Any, problems: List[str]
) -> Optional[HealthReporter]:
    if not isinstance(entry, dict):
        problems.append(f"{handle}: an entry that is not an object")
        return None
    name = entry.get("reporter", entry.get("name"))
    if not isinstance(name, str) or not name.strip():
        problems.append(f"{handle}: a reporter without a name")
        return None
    if not _WORD.match(name):
        problems.append(f"{handle}: reporter name {name[:40]!r} is not a plain name: left out")
        return None
    where = f"{handle} {name}"
    state = entry.get("state")
    if state is not None and (not isinstance(state, str) or not _WORD.match(state)):
        problems.append(f"{where}: state {str(state)[:40]!r} is not a state name: left out")
        state = None
    date, time = entry.get("last_dump_date"), entry.get("last_dump_time")
    last_dump = None
    if isinstance(date, str) and isinstance(time, str):
        last_dump = f"{date} {time}"
        if not _STAMP.match(last_dump):
            problems.append(f"{where}: last dump {last_dump[:40]!r} is not a date and time")
            last_dump = None
    return HealthReporter(
        name=name,
        handle=handle,
        port_index=port,
        state=state,
        errors=_count(entry, "error", where, problems),
        recovers=_count(entry, "recover", where, problems),
        grace_period_ms=_count(entry, "grace_period", where, problems),
        auto_recover=_flag(entry, "auto_recover", where, problems),
        auto_dump=_flag(entry, "auto_dump", where, problems),
        last_dump=last_dump,
    )


def _count(entry: Dict[str, Any], key: str, where: str, problems: List[str]) -> Optional[int]:
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_COUNT:
        problems.append(f"{where}: {key} {str(value)[:40]!r} is not a count: left out")
        return None
    return value


def _flag(entry: Dict[str, Any], key: str, where: str, problems: List[str]) -> Optional[bool]:
    value = entry.get(key)
    if value is None or isinstance(value, bool):
        return value
    problems.append(f"{where}: {key} {str(value)[:40]!r} is not true/false: left out")
    return None
