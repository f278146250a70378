"""ethtool -S runs -> ``NetDev.ethtool`` (``ibdiag.facts.ethtool.EthtoolStats``) on every
port's netdev.

A netdev's run is found by role (``ethtool-S ib0``) and parsed when it exited 0; a run that
failed leaves ``NetDev.ethtool`` None, and ``Snapshot.run(role)`` says why.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from ibdiag import roles
from ibdiag.facts.ethtool import EthtoolStats
from ibdiag.model import CommandRun, Device, Port
from ibdiag.sources.interpret import runs_by_role, with_ports

_PREFIX = "ethtool-S "


def interpret(fields: Dict[str, Any], commands: Dict[str, CommandRun]) -> Dict[str, Any]:
    by_role = runs_by_role(commands, _PREFIX)
    if not by_role:
        return {}

    def netdev_stats(dev: Device, port: Port) -> Optional[Dict[str, Any]]:
        if port.netdev is None:
            return None
        stats = stats_of(by_role.get(str(roles.ethtool_stats(port.netdev.name))))
        if stats is None:
            return None
        return {"netdev": port.netdev.model_copy(update={"ethtool": stats})}

    return {"devices": with_ports(fields.get("devices") or [], netdev_stats)}


def stats_of(run: Optional[CommandRun]) -> Optional[EthtoolStats]:
    """What ``run`` printed, if it exited 0 (None otherwise). Odd text is never an error here:
    the parser returns what it could read and says what it could not in ``problems``."""
    if run is None or not run.succeeded:
        return None
    from ibdiag.sources.parsers.ethtool import parse_ethtool_stats

    parsed = parse_ethtool_stats(run.stdout)
    return EthtoolStats.model_construct(
        role=run.role,
        counters=dict(parsed.counters),
        error=parsed.error,
        problems=list(parsed.problems),
    )
