"""The inventory runs (``ibstat``, ``ibv_devinfo``) -> ``Snapshot.inventory``.

Each tool's run becomes its ``Listing``: the HCAs and ports it printed, or why it gave nothing
usable (the run's failure), what it printed instead of a listing, and the lines its parser could
not place. A run that failed is not parsed: its output is an error message, not a listing.

Neither tool run (level quick, a bundle without them): no field.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ibdiag import roles
from ibdiag.facts.inventory import Inventory, ListedCA, ListedPort, Listing
from ibdiag.model import CommandRun
from ibdiag.sources.parsers.ibstat import parse_ibstat_report
from ibdiag.sources.parsers.ibv_devinfo import parse_ibv_devinfo_report


def interpret(fields: Dict[str, Any], commands: Dict[str, CommandRun]) -> Dict[str, Any]:
    by_role = {run.role: run for run in commands.values() if run.role in _PARSERS}
    if not by_role:
        return {}
    return {
        "inventory": Inventory(
            ibstat=_listing(by_role.get(roles.IBSTAT)),
            ibv_devinfo=_listing(by_role.get(roles.IBV_DEVINFO)),
        )
    }


def _ibstat(text: str) -> Tuple[List[ListedCA], Any]:
    report = parse_ibstat_report(text)
    cas = [
        ListedCA(
            name=ca.name,
            firmware=ca.firmware,
            node_guid=ca.node_guid,
            ports=[
                ListedPort(number=number, state=port.state, link_layer=port.link_layer)
                for number, port in sorted(ca.ports.items())
            ],
        )
        for ca in report.cas
    ]
    return cas, report


def _ibv_devinfo(text: str) -> Tuple[List[ListedCA], Any]:
    report = parse_ibv_devinfo_report(text)
    cas = [
        ListedCA(
            name=device.hca_id,
            firmware=device.fw_ver,
            node_guid=device.node_guid,
            ports=[
                ListedPort(number=number, state=port.state, link_layer=port.link_layer)
                for number, port in sorted(device.ports.items())
            ],
        )
        for device in report.devices
    ]
    return cas, report


_PARSERS = {roles.IBSTAT: _ibstat, roles.IBV_DEVINFO: _ibv_devinfo}


def _listing(run: Optional[CommandRun]) -> Optional[Listing]:
    if run is None:
        return None
    failure = run.failure()
    if failure is not None:
        return Listing(role=run.role, unusable=failure)
    cas, report = _PARSERS[run.role](run.stdout)
    return Listing(role=run.role, cas=cas, error=report.error, problems=list(report.problems))
