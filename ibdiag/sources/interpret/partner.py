"""The far end's runs -> ``Port.partner`` (``ibdiag.facts.partner.Partner``) on every port they
were run for.

A port's runs are found by role (``partner-nodeinfo mlx5_0:1``, ``partner-nodedesc``,
``partner-portinfo``, ``partner-portinfo0``, ``partner-local-portinfo``, ``partner-perfquery-x``,
``partner-perfquery``, ``partner-perfquery-E``; ``ibdiag.sources.partner`` runs them). Each run
that exited 0 is parsed (stdout and stderr); a port with runs but none that succeeded gets a
``Partner`` with nothing read, so "collected and failed" differs from "not collected" (None).
A step the chain did not need (``local-portinfo``, plain ``perfquery``, ``perfquery-E``: run
only on an earlier answer) has no run: its field is None, as for a bundle recorded before the
chain read them only where needed, and nothing here treats it as a failure.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ibdiag import roles
from ibdiag.facts.partner import ERROR_COUNTER, Partner, PortInfo
from ibdiag.facts.perfquery import PmaReading
from ibdiag.model import CommandRun, Device, Port
from ibdiag.sources.interpret import runs_by_role, with_ports
from ibdiag.sources.interpret.perfquery import reading


def interpret(fields: Dict[str, Any], commands: Dict[str, CommandRun]) -> Dict[str, Any]:
    by_role = runs_by_role(commands, roles.PARTNER_PREFIX)
    if not by_role:
        return {}

    def partner_of(dev: Device, port: Port) -> Optional[Dict[str, Any]]:
        found = port_partner(dev.target(port), by_role)
        return None if found is None else {"partner": found}

    return {"devices": with_ports(fields.get("devices") or [], partner_of)}


def port_partner(target: str, by_role: Dict[str, CommandRun]) -> Optional[Partner]:
    """What ``target``'s runs read of its cable's far end; None when none was run for it."""
    from ibdiag.sources.parsers.smpquery import parse_nodedesc, parse_nodeinfo

    runs = {step: by_role.get(roles.partner(step, target)) for step in roles.PARTNER_STEPS}
    found = {step: run for step, run in runs.items() if run is not None}
    if not found:
        return None
    problems: List[str] = []
    update: Dict[str, Any] = {}
    nodeinfo = _parsed(found.get("nodeinfo"), parse_nodeinfo)
    if nodeinfo is not None:
        problems += [f"nodeinfo: {problem}" for problem in nodeinfo.problems]
        update.update(
            node_type=nodeinfo.node_type,
            node_guid=nodeinfo.node_guid,
            port_guid=nodeinfo.port_guid,
            system_guid=nodeinfo.system_guid,
            num_ports=nodeinfo.num_ports,
            port=nodeinfo.local_port,
        )
    nodedesc = _parsed(found.get("nodedesc"), parse_nodedesc)
    if nodedesc is not None:
        problems += [f"nodedesc: {problem}" for problem in nodedesc.problems]
        update["description"] = nodedesc.description
    port_info = port_info_of(found.get("portinfo"))
    port0 = port_info_of(found.get("portinfo0"))
    lid_from = port0 if update.get("node_type") == "Switch" else port_info
    return Partner.model_construct(
        **update,
        lid=lid_from.lid if lid_from is not None else None,
        port_info=port_info,
        local_port_info=port_info_of(found.get("local-portinfo")),
        counters=pma_counters(reading(found.get("perfquery-x")), reading(found.get("perfquery"))),
        rcv_error_details=reading(found.get("perfquery-E")),
        roles=[run.role for run in found.values()],
        problems=problems,
    )


def port_info_of(run: Optional[CommandRun]) -> Optional[PortInfo]:
    """The PortInfo ``run`` printed, if it exited 0 (None otherwise)."""
    from ibdiag.sources.parsers.smpquery import parse_portinfo

    parsed = _parsed(run, parse_portinfo)
    if parsed is None or run is None:
        return None
    return PortInfo.model_construct(
        role=run.role,
        port=parsed.port,
        lid=parsed.lid,
        sm_lid=parsed.sm_lid,
        link_state=parsed.link_state,
        phys_link_state=parsed.phys_link_state,
        width_active=parsed.width_active,
        width_enabled=list(parsed.width_enabled),
        width_supported=list(parsed.width_supported),
        speed_active=parsed.speed_active,
        speed_enabled=list(parsed.speed_enabled),
        speed_supported=list(parsed.speed_supported),
        problems=list(parsed.problems),
    )


def _parsed(run: Optional[CommandRun], parse):
    if run is None or not run.succeeded:
        return None
    return parse(run.stdout + "\n" + run.stderr)


def pma_counters(
    extended: Optional[PmaReading], basic: Optional[PmaReading]
) -> Optional[PmaReading]:
    """The reading the error counters are graded from: -x's when it carries them, else plain
    perfquery's; -x's data counters alone when that is all there is."""
    if extended is not None and ERROR_COUNTER in extended.counters:
        return extended
    return basic if basic is not None else extended
