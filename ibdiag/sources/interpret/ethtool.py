"""ethtool -S runs -> ``NetDev.ethtool`` (``ibdiag.facts.ethtool.EthtoolStats``) on every
port's netdev.

A netdev's run is found by role (``ethtool-S ib0``) and parsed when it exited 0; a run that
failed leaves ``NetDev.ethtool`` None, and ``Snapshot.run(role)`` says why.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ibdiag import roles
from ibdiag.facts.ethtool import EthtoolStats
from ibdiag.model import CommandRun, Device, Port

_PREFIX = "ethtool-S "


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
        stats = None
        if port.netdev is not None:
            stats = stats_of(by_role.get(roles.ethtool_stats(port.netdev.name)))
        if stats is not None:
            netdev = port.netdev.model_copy(update={"ethtool": stats})
            port = port.model_copy(update={"netdev": netdev})
            changed = True
        ports.append(port)
    return dev.model_copy(update={"ports": ports}) if changed else dev


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
