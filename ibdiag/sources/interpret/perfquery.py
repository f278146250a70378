"""perfquery runs -> ``Port.perfquery`` (``ibdiag.facts.perfquery.PortPma``) on every port they
were run for.

A port's runs are found by role (``perfquery-x mlx5_0:1`` and its fallback ``perfquery-basic``,
``perfquery-E``, ``perfquery-X``). Each run that exited 0 is parsed (stdout and stderr: perfquery
prints its ibwarn/iberror lines on stderr) into a reading; a port with runs but none that
succeeded gets a ``PortPma`` with no readings, so "collected and failed" differs from "not
collected" (None).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ibdiag import roles
from ibdiag.facts.perfquery import PmaReading, PortPma
from ibdiag.model import CommandRun, Device, Port

_PREFIX = "perfquery-"


def interpret(fields: Dict[str, Any], commands: Dict[str, CommandRun]) -> Dict[str, Any]:
    by_role: Dict[str, CommandRun] = {}
    for run in commands.values():
        if run.role and run.role.startswith(_PREFIX):
            by_role.setdefault(run.role, run)  # the first, as Snapshot.run finds it
    if not by_role:
        return {}
    return {"devices": [_device(dev, by_role) for dev in fields.get("devices") or []]}


def _device(dev: Device, by_role: Dict[str, CommandRun]) -> Device:
    ports: List[Port] = []
    changed = False
    for port in dev.ports:
        pma = port_pma(dev.target(port), by_role)
        if pma is not None:
            port = port.model_copy(update={"perfquery": pma})
            changed = True
        ports.append(port)
    return dev.model_copy(update={"ports": ports}) if changed else dev


def port_pma(target: str, by_role: Dict[str, CommandRun]) -> Optional[PortPma]:
    """The readings of ``target``'s runs; None when perfquery was not run for it."""
    runs = {mode: by_role.get(roles.perfquery(mode, target)) for mode in roles.PERFQUERY_MODES}
    if all(run is None for run in runs.values()):
        return None
    return PortPma.model_construct(
        counters=reading(runs["x"]) or reading(runs["basic"]),
        rcv_error_details=reading(runs["E"]),
        xmit_data_sl=reading(runs["X"]),
    )


def reading(run: Optional[CommandRun]) -> Optional[PmaReading]:
    """What ``run`` printed, if it exited 0 (None otherwise). Odd text is never an error here:
    the parser returns what it could read and says what it could not in ``problems``."""
    if run is None or not run.succeeded:
        return None
    from ibdiag.sources.parsers.perfquery import parse_perfquery

    parsed = parse_perfquery(run.stdout + "\n" + run.stderr)
    return PmaReading.model_construct(
        role=run.role,
        counters=dict(parsed.counters),
        mad_error=parsed.mad_error,
        problems=list(parsed.problems),
    )
