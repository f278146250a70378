"""The subnet manager and addressing of each InfiniBand port: a valid LID, a reachable SM, one
SM for the node, no LID handed out twice, no failover gone unnoticed."""

from __future__ import annotations

from collections import defaultdict
from typing import Dict, Iterator, List, Optional, Tuple

from ibdiag.check_results import about
from ibdiag.counters.deltas import compare
from ibdiag.facts.partner_ranges import UNICAST_LID_MAX
from ibdiag.model import Device, Port, Result, Snapshot, Status
from ibdiag.registry import check
from ibdiag.targets import ACTIVE, LINK_UP, evidence, graded_ports
from ibdiag.thresholds import Thresholds

NO_SM_HINT = (
    "no subnet manager has configured this port: check that opensm/UFM runs and reaches this "
    "rail (sminfo, or `systemctl status opensm` on the SM host); then the port's cable"
)


def lid_text(lid: Optional[int]) -> str:
    return f"0x{lid:x}" if lid is not None else "unreadable"


def _unicast(lid: Optional[int]) -> bool:
    return lid is not None and 0 < lid <= UNICAST_LID_MAX  # 0: none assigned; above: multicast


@check("sm.address", title="Port has a valid LID from a reachable subnet manager", needs={"sysfs"})
def sm_address(snap: Snapshot, th: Thresholds, baseline: Optional[Snapshot]) -> Iterator[Result]:
    """Healthy: every InfiniBand port with its link up reads a unicast ``lid`` (0x1-0xbfff) and
    the ``sm_lid`` of the subnet manager that configured it; the node's ports name one SM and
    no two of them share a LID (unless ``subnets_per_rail``: each rail its own subnet); and
    neither changed since the baseline.

    Why it matters: only the SM moves a port from INIT to ACTIVE and hands out the LIDs every
    path is routed by. A port whose link is up but whose LID or SM LID is 0 was never
    configured (no SM on that rail: jobs hang at NCCL init); a port stuck in INIT or ARMED with
    an SM LID lost its SM (stopped, crashed or cut off) after it was last configured. An SM
    LID that changed since the baseline is a failover: the fabric is re-swept and jobs may see
    path errors (warn, naming the old and new SM LID); a LID that changed breaks every peer
    that cached the old one. Ports of one node naming different SMs sit on different subnets:
    either by design (multi-subnet rails: set ``subnets_per_rail``) or a cable in the wrong
    switch. Two ports with one LID on one subnet is an SM fault (UFM's fabric validation
    reports duplicate LIDs too); it warns, as separate subnets whose SMs all sit at LID 1
    cannot be told apart from sysfs.

    What to do: LID or SM LID 0, or stuck in INIT: check the SM (`sminfo`, opensm's log, UFM)
    and that it reaches this rail; a failover: read both SMs' logs for why; different SMs:
    trace the port's cable (`ibdiag check --level standard` names the far end).
    """
    previous = compare(snap, baseline) if baseline is not None else None
    active: List[Tuple[Device, Port]] = []
    for dev, port in graded_ports(snap, th):
        if not port.is_infiniband:
            continue  # RoCE: addressed by IP, no SM
        target = dev.target(port)
        result = about(target, evidence(port.path, "lid", "sm_lid"))
        if port.phys_state not in (None, 0, LINK_UP):  # 0: a virtual HCA reports none
            yield result(
                status=Status.SKIP,
                message=f"link not up ({port.phys_state}: {port.phys_state_name}): "
                "link.phys_state grades it",
            )
            continue
        if port.lid is None or port.sm_lid is None:
            unread = [n for n, v in (("lid", port.lid), ("sm_lid", port.sm_lid)) if v is None]
            reasons = ", ".join(f"{n}: {port.problems.get(n, 'missing')}" for n in unread)
            yield result(status=Status.SKIP, message=f"not comparable ({reasons})")
            continue
        if port.state is None:
            yield result(status=Status.SKIP, message="state unreadable: link.state grades it")
            continue
        if port.state != ACTIVE:
            yield _not_activated(result, port)
            continue
        old = previous.previous_port(dev, port) if previous is not None else None
        yield _graded(result, port, old)
        active.append((dev, port))
    yield from _node_wide(active, th)


def _not_activated(result, port: Port) -> Result:
    """A port whose link is up but which is not ACTIVE: link.state fails it (naming the SM);
    this says what the addressing shows, as a skip, so one fault is one failure."""
    state = f"{port.state}: {port.state_name}"
    if not port.lid or not port.sm_lid:
        why = "no subnet manager has configured the port"
    else:
        why = f"the SM at LID {lid_text(port.sm_lid)} has not activated it (SM lost?)"
    return result(
        status=Status.SKIP,
        message=f"state {state}, lid {lid_text(port.lid)}, sm_lid {lid_text(port.sm_lid)}: "
        f"{why}; link.state grades it",
    )


def _graded(result, port: Port, old: Optional[Port]) -> Result:
    """An ACTIVE port's own LID and SM LID, and their change since the baseline's port."""
    lid, sm_lid = port.lid, port.sm_lid
    observed = f"lid {lid_text(lid)}, sm_lid {lid_text(sm_lid)}"
    if not _unicast(lid) or not _unicast(sm_lid):
        bad = "lid" if not _unicast(lid) else "sm_lid"
        return result(
            status=Status.FAIL,
            message=f"ACTIVE with {observed}: {bad} is not a unicast LID (0x1-0xbfff)",
            observed=observed,
            expected="unicast lid and sm_lid",
            subject=f"{bad} {lid_text(lid if bad == 'lid' else sm_lid)}",
            hint=NO_SM_HINT,
        )
    if old is not None and old.sm_lid and old.sm_lid != sm_lid:
        return result(
            status=Status.WARN,
            message=f"the SM moved from LID {lid_text(old.sm_lid)} to {lid_text(sm_lid)} since "
            "the baseline: a subnet manager failover",
            observed=lid_text(sm_lid),
            expected=lid_text(old.sm_lid),
            subject=f"SM {lid_text(old.sm_lid)}->{lid_text(sm_lid)}",
            hint="read both SMs' logs for why the master changed; jobs running across the "
            "failover may have seen path errors",
        )
    if old is not None and old.lid and old.lid != lid:
        return result(
            status=Status.WARN,
            message=f"the port's LID changed from {lid_text(old.lid)} to {lid_text(lid)} since "
            "the baseline: peers that cached the old LID lose this port",
            observed=lid_text(lid),
            expected=lid_text(old.lid),
            subject=f"LID {lid_text(old.lid)}->{lid_text(lid)}",
            hint="the SM re-assigned LIDs (a restart without its guid2lid file?): check the SM",
        )
    return result(status=Status.PASS, message=observed, observed=observed)


def _node_wide(active: List[Tuple[Device, Port]], th: Thresholds) -> Iterator[Result]:
    """Across the node's ACTIVE InfiniBand ports: one SM, and no LID twice - unless
    ``subnets_per_rail`` (each rail its own subnet: separate SMs, each free to hand out the
    same LIDs, and from sysfs one subnet cannot be told from another: their SMs all sit at
    LID 1 as often as not)."""
    if th.subnets_per_rail:
        return
    by_sm: Dict[int, List[str]] = defaultdict(list)
    by_lid: Dict[int, List[str]] = defaultdict(list)
    for dev, port in active:
        if _unicast(port.lid) and _unicast(port.sm_lid):
            by_sm[port.sm_lid].append(dev.target(port))  # type: ignore[index]
            by_lid[port.lid].append(dev.target(port))  # type: ignore[index]
    for lid, targets in sorted(by_lid.items()):
        if len(targets) > 1:
            yield Result(
                target="node",
                status=Status.WARN,
                message=f"LID {lid_text(lid)} is held by {len(targets)} ports: "
                f"{', '.join(targets)} (one subnet expected: subnets_per_rail is false)",
                observed=", ".join(targets),
                expected="one port per LID",
                subject=f"duplicate LID {lid_text(lid)}",
                hint="on one subnet the SM handed one LID out twice: restart it with a clean "
                "guid2lid file and check for a second SM; rails that are separate subnets by "
                "design: set subnets_per_rail = true",
            )
    if len(by_sm) > 1:
        groups = "; ".join(
            f"{lid_text(sm)}: {', '.join(targets)}" for sm, targets in sorted(by_sm.items())
        )
        yield Result(
            target="node",
            status=Status.WARN,
            message=f"the node's InfiniBand ports name {len(by_sm)} different SMs ({groups})",
            observed=len(by_sm),
            expected=1,
            subject=f"{len(by_sm)} SMs",
            hint="multi-subnet rails by design: set subnets_per_rail = true; otherwise a cable "
            "is in another subnet's switch",
        )
