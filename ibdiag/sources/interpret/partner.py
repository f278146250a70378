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

from typing import Any, Dict, List, Optional, Tuple

from ibdiag import roles
from ibdiag.facts.partner import (
    ERROR_COUNTER,
    IMPLAUSIBLE,
    PMA_STEPS,
    Partner,
    PortInfo,
    Unread,
)
from ibdiag.facts.partner_ranges import answer_problem, guid_value, lid_problem, local_port_problem
from ibdiag.facts.perfquery import PmaReading
from ibdiag.hca_capabilities import is_virtual_function
from ibdiag.model import CommandRun, Device, Port
from ibdiag.sources.interpret import runs_by_role, with_ports
from ibdiag.sources.interpret.partner_unread import unread as why_unread
from ibdiag.sources.interpret.perfquery import reading


def interpret(fields: Dict[str, Any], commands: Dict[str, CommandRun]) -> Dict[str, Any]:
    by_role = runs_by_role(commands, roles.PARTNER_PREFIX)
    if not by_role:
        return {}
    devices: List[Device] = fields.get("devices") or []
    found: Dict[str, Partner] = {}
    for dev in devices:
        for port in dev.ports:
            partner = port_partner(dev.target(port), by_role, dev, port)
            if partner is not None:
                found[dev.target(port)] = partner
    found = across_ports(devices, found)

    def partner_of(dev: Device, port: Port) -> Optional[Dict[str, Any]]:
        partner = found.get(dev.target(port))
        return None if partner is None else {"partner": partner}

    return {"devices": with_ports(devices, partner_of)}


def port_partner(
    target: str,
    by_role: Dict[str, CommandRun],
    dev: Optional[Device] = None,
    port: Optional[Port] = None,
) -> Optional[Partner]:
    """What ``target``'s runs read of its cable's far end; None when none was run for it.
    ``dev``/``port``: ours (whether it is a virtual function, which cannot query the far end).
    Every answer is range-checked (``ibdiag.facts.partner_ranges``) before it is kept."""
    from ibdiag.sources.parsers.perfquery import parse_perfquery
    from ibdiag.sources.parsers.smpquery import parse_nodedesc, parse_nodeinfo

    runs = {step: by_role.get(roles.partner(step, target)) for step in roles.PARTNER_STEPS}
    found = {step: run for step, run in runs.items() if run is not None}
    if not found:
        return None
    problems: List[str] = []
    update: Dict[str, Any] = {}
    unread: List[Unread] = []
    nodeinfo = _parsed(found.get("nodeinfo"), parse_nodeinfo)
    trusted = True
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
        wrong = None
        if nodeinfo.local_port is not None:
            wrong = local_port_problem(nodeinfo.local_port, nodeinfo.num_ports)
        if wrong is not None:
            unread.append(_implausible("nodeinfo", found["nodeinfo"], target, wrong))
            update["port"], trusted = None, False
        elif nodeinfo.local_port is None or nodeinfo.node_type is None:
            why = "nodeinfo succeeded but named no LocalPort or NodeType"
            unread.append(_said("nodeinfo", found["nodeinfo"], "unread", why))
    nodedesc = _parsed(found.get("nodedesc"), parse_nodedesc)
    if nodedesc is not None:
        problems += [f"nodedesc: {problem}" for problem in nodedesc.problems]
        update["description"] = nodedesc.description
    port_info = port_info_of(found.get("portinfo"))
    port0 = port_info_of(found.get("portinfo0"))
    lid_step = "portinfo0" if update.get("node_type") == "Switch" else "portinfo"
    lid_from = port0 if lid_step == "portinfo0" else port_info
    lid = lid_from.lid if lid_from is not None else None
    if lid is not None and lid_problem(lid) is not None:
        unread.append(_implausible(lid_step, found[lid_step], target, str(lid_problem(lid))))
        lid = None
    elif lid == 0:
        why = "no subnet manager has configured the far end yet (LID 0): no PMA to ask"
        unread.append(_said(lid_step, found[lid_step], "no-sm", why))
    readings: Dict[str, Optional[PmaReading]] = {}
    for step in PMA_STEPS:
        run = found.get(step)
        readings[step] = reading(run)
        wrong = None
        if run is not None and run.succeeded:
            said = parse_perfquery(run.stdout + "\n" + run.stderr)
            wrong = answer_problem(said.lid, said.port, said.port_select, lid, update.get("port"))
        if wrong is not None and run is not None:
            unread.append(_implausible(step, run, target, wrong))
            readings[step] = None
    virtual = dev is not None and (is_virtual_function(dev) or not _has_pma(port))
    smp_answered = bool(found.get("nodeinfo") and found["nodeinfo"].succeeded)
    for step, run in found.items():
        why = why_unread(step, run, target, virtual_function=virtual, smp_answered=smp_answered)
        if why is not None:
            unread.append(why)
    partner = Partner.model_construct(
        **update,
        lid=lid,
        port_info=port_info,
        local_port_info=port_info_of(found.get("local-portinfo")),
        counters=pma_counters(readings["perfquery-x"], readings["perfquery"]),
        rcv_error_details=readings["perfquery-E"],
        roles=[run.role for run in found.values()],
        problems=problems,
        unread=_in_chain_order(unread),
    )
    return partner if trusted else _ungraded(partner)


def across_ports(devices: List[Device], partners: Dict[str, Partner]) -> Dict[str, Partner]:
    """``partners`` (by our port's target) with what no single port's answers show: two of
    our ports claiming the same far-end GUID and port (one cable end is in one port), and a far
    end claiming one of this node's own HCAs' GUIDs, unless it is another ACTIVE port of it
    whose far end names this one back (a loopback cable). Each such far end is implausible:
    named, never graded."""
    ours = {
        guid_value(dev.node_guid): dev for dev in devices if guid_value(dev.node_guid) is not None
    }
    claimed: Dict[Tuple[int, int], List[str]] = {}
    for target, partner in partners.items():
        guid = guid_value(partner.node_guid)
        if guid is not None and partner.port is not None:
            claimed.setdefault((guid, partner.port), []).append(target)
    wrong: Dict[str, str] = {}
    for (_, number), targets in claimed.items():
        if len(targets) > 1:
            for target in targets:
                wrong[target] = (
                    f"{' and '.join(targets)} claim the same far end "
                    f"{partners[target].node_guid} port {number}: one cable end cannot be "
                    "plugged into two ports"
                )
    for dev in devices:
        for port in dev.ports:
            target = dev.target(port)
            partner = partners.get(target)
            owner = ours.get(guid_value(partner.node_guid)) if partner is not None else None
            if partner is not None and owner is not None and target not in wrong:
                why = _own_guid_problem(dev, port, owner, partner, partners)
                if why is not None:
                    wrong[target] = why
    fixed = dict(partners)
    for target, why in wrong.items():
        partner = partners[target]
        command = _command(partner, "nodeinfo")
        said = Unread(step="nodeinfo", kind=IMPLAUSIBLE, symptom=True, command=command,
                      reason=f"the far end of {target} answered what cannot be: {why}")  # fmt: skip
        update = {"unread": _in_chain_order([*partner.unread, said])}
        fixed[target] = _ungraded(partner.model_copy(update=update))
    return fixed


def _own_guid_problem(
    dev: Device, port: Port, owner: Device, partner: Partner, partners: Dict[str, Partner]
) -> Optional[str]:
    """Why a far end claiming ``owner``'s GUID (one of this node's HCAs) cannot be."""
    claim = f"the node GUID of this node's own {owner.name}"
    if owner is dev and partner.port == port.number:
        return f"it claims {claim} and our own port {port.number}: a port is not its own far end"
    other = next((p for p in owner.ports if p.number == partner.port), None)
    if other is None or other.state != 4:
        return f"it claims {claim} with port {partner.port}, which is no ACTIVE port of it"
    back = partners.get(owner.target(other))
    if back is not None and back.node_guid is not None:
        if guid_value(back.node_guid) != guid_value(dev.node_guid) or back.port != port.number:
            return (
                f"it claims {claim} port {partner.port}, whose own far end is not "
                f"{dev.target(port)}"
            )
    return None


def _ungraded(partner: Partner) -> Partner:
    """``partner`` with nothing left to grade: an implausible far end is named, not graded."""
    return partner.model_copy(
        update=dict(port_info=None, local_port_info=None, counters=None, rcv_error_details=None)
    )


def _in_chain_order(unread: List[Unread]) -> List[Unread]:
    return sorted(unread, key=lambda why: roles.PARTNER_STEPS.index(why.step))


def _command(partner: Partner, step: str) -> str:
    return next((why.command for why in partner.unread if why.step == step), "") or step


def _said(step: str, run: CommandRun, kind: str, why: str) -> Unread:
    return Unread(step=step, kind=kind, reason=why, command=" ".join(run.argv))


def _implausible(step: str, run: CommandRun, target: str, wrong: str) -> Unread:
    command = " ".join(run.argv)
    return Unread(
        step=step, kind=IMPLAUSIBLE, symptom=True, command=command,
        reason=f"the far end of {target} answered what cannot be: {wrong} (`{command}`)",
    )  # fmt: skip


def _has_pma(port: Optional[Port]) -> bool:
    """False when sysfs says the port has no PMA ('N/A (no PMA)': a VM's virtual function)."""
    return port is None or not any("no PMA" in str(why) for why in port.problems.values())


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
