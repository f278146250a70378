"""perfquery runs -> ``Port.perfquery`` (``ibdiag.facts.perfquery.PortPma``) on every port they
were run for.

A port's runs are found by role (``perfquery-x mlx5_0:1`` and its fallback ``perfquery-basic``,
``perfquery-E``, ``perfquery-X``). Each run that exited 0 is parsed (stdout and stderr: perfquery
prints its ibwarn/iberror lines on stderr) into a reading; a port with runs but none that
succeeded gets a ``PortPma`` with no readings, so "collected and failed" differs from "not
collected" (None).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from ibdiag import roles
from ibdiag.facts.perfquery import PmaReading, PortPma
from ibdiag.model import CommandRun, Device, Port
from ibdiag.sources.interpret import runs_by_role, with_ports

_PREFIX = "perfquery-"


def interpret(fields: Dict[str, Any], commands: Dict[str, CommandRun]) -> Dict[str, Any]:
    by_role = runs_by_role(commands, _PREFIX)
    if not by_role:
        return {}

    def pma_of(dev: Device, port: Port) -> Optional[Dict[str, Any]]:
        pma = port_pma(dev.target(port), by_role)
        return None if pma is None else {"perfquery": pma}

    return {"devices": with_ports(fields.get("devices") or [], pma_of)}


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
