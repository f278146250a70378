"""The far end of each cable: the switch port (or the other HCA of a back-to-back cable) an
ACTIVE InfiniBand port is plugged into, read from this node with the read-only infiniband-diags
tools (``smpquery``, ``perfquery``) over the direct route out of our port.

**What it plans** (level standard, source ``partner``): a chain per ACTIVE InfiniBand port,
each step depending on an earlier one's answer (``chain``: nodeinfo, nodedesc, portinfo0;
portinfo and perfquery -x; our own PortInfo, plain perfquery and -E only where an earlier
answer asks for them). So the family plans through ``collect(snap, runner)``, which the
collector calls in its thread pool beside the other commands, all under the one runner and
deadline, each run recorded with its typed role (``ibdiag.roles.partner``). ``plan(snap)``
gives only the chains of ports whose names may not go on a command line: planned refused, so
that port's checks say why its far end is unknown.

**What it gives**: ``Port.partner`` (``ibdiag.facts.partner.Partner``) on every port a chain
was run for. A port's runs are found by role (``partner-nodeinfo mlx5_0:1``,
``partner-nodedesc``, ``partner-portinfo``, ``partner-portinfo0``, ``partner-local-portinfo``,
``partner-perfquery-x``, ``partner-perfquery``, ``partner-perfquery-E``,
``partner-perfquery-T``). Each run that exited
0 is parsed (stdout and stderr: ``smpquery`` here, perfquery by
``ibdiag.families.perfquery.parse_perfquery``); a port with runs but none that succeeded gets
a ``Partner`` with nothing read, so "collected and failed" differs from "not collected"
(None). What became of every run is ``Partner.runs`` (``RunOutcome``, by step), and why each
step gave nothing usable is judged once, here (``unread``), as ``Partner.unread``: the checks
read those and never a run. A step the chain did not need (``local-portinfo``, plain
``perfquery``, ``perfquery-E``: run only on an earlier answer) has no run: its field is None,
as for a bundle recorded before the chain read them only where needed, and nothing here treats
it as a failure. ``perfquery -T`` (FEC per lane, ``Partner.fec``) is optional: what became of
it is the fact's own outcome, never an ``unread`` symptom (the ibsim simulator and many PMAs
answer ``cannot query PortExtendedSpeedsCounters``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ibdiag import roles
from ibdiag.facts.fec import PortFec
from ibdiag.facts.outcome import NoData, RunOutcome
from ibdiag.facts.partner import IMPLAUSIBLE, PMA_STEPS, Partner, Unread
from ibdiag.facts.partner_ranges import answer_problem, guid_value, lid_problem, local_port_problem
from ibdiag.facts.perfquery import PmaReading
from ibdiag.families import Planned, Runs, Update, outcome_of
from ibdiag.families.partner.readings import parsed, pma_counters, port_info_of
from ibdiag.families.partner.unread import judged
from ibdiag.families.partner.unread import unread as why_unread
from ibdiag.families.perfquery import reading
from ibdiag.hca_capabilities import is_virtual_function
from ibdiag.model import CommandRun, Device, Port, Snapshot

SOURCE = "partner"
LEVEL = "standard"
ORDER = 40  # after perfquery: nothing depends on it, it depends on nothing


# What nodeinfo says of who is there, by the same names on Partner.
_IDENTITY = ("node_type", "node_guid", "port_guid", "system_guid", "num_ports")


def plan(snap: Snapshot) -> List[Planned]:
    """The chains that may not run: those of ports whose names may not go on a command line,
    planned refused (``chain.refused``). The others run through ``collect``."""
    from ibdiag.families.partner import chain

    return chain.refused(snap.devices)


def collect(snap: Snapshot, runner) -> Dict[str, CommandRun]:
    """Every runnable port's chain, all at once, through ``runner`` (the collection's one
    ``ibdiag.runner.command_runner.Runner``); the runs by ``CommandRun.key``."""
    from ibdiag.families.partner import chain

    return chain.read_partners(runner, snap.devices)


def interpret(snap: Snapshot, runs: Runs) -> Update:
    """``Port.partner`` on every port a chain was run for (module docstring)."""
    if not runs.of(SOURCE):
        return Update()
    found: Dict[str, Partner] = {}
    for dev in snap.devices:
        for port in dev.ports:
            partner = port_partner(dev.target(port), runs, dev, port)
            if partner is not None:
                found[dev.target(port)] = partner
    found = across_ports(snap.devices, found)
    return Update(ports={target: {"partner": partner} for target, partner in found.items()})


def port_partner(
    target: str,
    runs: Runs,
    dev: Optional[Device] = None,
    port: Optional[Port] = None,
) -> Optional[Partner]:
    """What ``target``'s runs read of its cable's far end; None when none was run for it.
    ``dev``/``port``: ours (whether it is a virtual function, which cannot query the far end).
    Every answer is range-checked (``ibdiag.facts.partner_ranges``) before it is kept."""
    from ibdiag.families.partner.smpquery import parse_nodedesc, parse_nodeinfo

    by_step = {step: runs.get(roles.partner(step, target)) for step in roles.PARTNER_STEPS}
    found = {step: run for step, run in by_step.items() if run is not None}
    if not found:
        return None
    outcomes = {step: outcome_of(run) for step, run in found.items()}
    problems: List[str] = []
    update: Dict[str, Any] = {}
    unread: List[Unread] = []
    nodeinfo = parsed(found.get("nodeinfo"), parse_nodeinfo)
    trusted = True
    if nodeinfo is not None:
        problems += [f"nodeinfo: {problem}" for problem in nodeinfo.problems]
        update.update({name: getattr(nodeinfo, name) for name in _IDENTITY})
        update["port"] = nodeinfo.local_port
        wrong = None
        if nodeinfo.local_port is not None:
            wrong = local_port_problem(nodeinfo.local_port, nodeinfo.num_ports)
        if wrong is not None:
            unread.append(_implausible("nodeinfo", outcomes["nodeinfo"], target, wrong))
            update["port"], trusted = None, False
        elif nodeinfo.local_port is None or nodeinfo.node_type is None:
            why = "nodeinfo succeeded but named no LocalPort or NodeType"
            unread.append(judged("nodeinfo", outcomes["nodeinfo"], "unread", why))
    nodedesc = parsed(found.get("nodedesc"), parse_nodedesc)
    if nodedesc is not None:
        problems += [f"nodedesc: {problem}" for problem in nodedesc.problems]
        update["description"] = nodedesc.description
    port_info = port_info_of(found.get("portinfo"))
    port0 = port_info_of(found.get("portinfo0"))
    lid_step = "portinfo0" if update.get("node_type") == "Switch" else "portinfo"
    lid_from = port0 if lid_step == "portinfo0" else port_info
    lid = lid_from.lid if lid_from is not None else None
    if lid is not None and lid_problem(lid) is not None:
        unread.append(_implausible(lid_step, outcomes[lid_step], target, str(lid_problem(lid))))
        lid = None
    elif lid == 0:
        why = "no subnet manager has configured the far end yet (LID 0): no PMA to ask"
        unread.append(judged(lid_step, outcomes[lid_step], "no-sm", why))
    readings: Dict[str, Optional[PmaReading]] = {}
    for step in PMA_STEPS:
        said = readings[step] = reading(found.get(step))
        wrong = None
        if said is not None:
            wrong = answer_problem(said.lid, said.port, said.port_select, lid, update.get("port"))
        if wrong is not None:
            unread.append(_implausible(step, outcomes[step], target, wrong))
            readings[step] = None
    virtual = dev is not None and (is_virtual_function(dev) or not _has_pma(port))
    smp_answered = bool(found.get("nodeinfo") and found["nodeinfo"].succeeded)
    fec = _fec(found.get("perfquery-T"), lid, update.get("port"), target)
    for step, run in found.items():
        if step == FEC_STEP:  # optional: its failure is the fact's outcome, never a symptom
            continue
        judgement = why_unread(
            step, run, target, virtual_function=virtual, smp_answered=smp_answered
        )
        if judgement is not None:
            unread.append(judgement)
    partner = Partner(  # validated: ``update`` holds what nodeinfo/nodedesc said, by field name
        **update,
        lid=lid,
        port_info=port_info,
        local_port_info=port_info_of(found.get("local-portinfo")),
        counters=pma_counters(readings["perfquery-x"], readings["perfquery"]),
        rcv_error_details=readings["perfquery-E"],
        fec=fec,
        roles=[run.role for run in found.values() if run.role is not None],
        runs=outcomes,
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
            far = partners.get(target)
            owner = ours.get(guid_value(far.node_guid)) if far is not None else None
            if far is not None and owner is not None and target not in wrong:
                why = _own_guid_problem(dev, port, owner, far, partners)
                if why is not None:
                    wrong[target] = why
    fixed = dict(partners)
    for target, why in wrong.items():
        partner = partners[target]
        command = _command(partner, "nodeinfo")
        said = Unread(step="nodeinfo", kind=IMPLAUSIBLE, no_data=NoData.IMPLAUSIBLE, symptom=True,
                      command=command,
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
        update=dict(
            port_info=None, local_port_info=None, counters=None, rcv_error_details=None, fec=None
        )
    )


FEC_STEP = "perfquery-T"


def _fec(
    run: Optional[CommandRun], lid: Optional[int], port: Optional[int], target: str
) -> Optional[PortFec]:
    """The far end's ``perfquery -T`` (``ibdiag.families.perfquery_fec.port_fec``); None when
    it was not run. An answer naming another LID or port than the far end's is implausible:
    nothing of it is kept but why."""
    from ibdiag.families.perfquery_fec import port_fec

    if run is None:
        return None
    fec = port_fec(run)
    wrong = None
    if fec.layout is not None:
        wrong = answer_problem(fec.lid, fec.port, None, lid, port)
    if wrong is None or fec.outcome is None:
        return fec
    why = f"the far end of {target} answered what cannot be: {wrong} (`{fec.outcome.command}`)"
    outcome = fec.outcome.model_copy(update={"no_data": NoData.IMPLAUSIBLE, "reason": why})
    return PortFec(outcome=outcome)


def _in_chain_order(unread: List[Unread]) -> List[Unread]:
    return sorted(unread, key=lambda why: roles.PARTNER_STEPS.index(why.step))


def _command(partner: Partner, step: str) -> str:
    return next((why.command for why in partner.unread if why.step == step), "") or step


def _implausible(step: str, outcome: RunOutcome, target: str, wrong: str) -> Unread:
    command = outcome.command
    why = f"the far end of {target} answered what cannot be: {wrong} (`{command}`)"
    return judged(step, outcome, IMPLAUSIBLE, why, True)


def _has_pma(port: Optional[Port]) -> bool:
    """False when sysfs says the port has no PMA ('N/A (no PMA)': a VM's virtual function)."""
    return port is None or not any("no PMA" in str(why) for why in port.problems.values())
