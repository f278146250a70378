"""link.mtu: each InfiniBand port's link runs the expected MTU (4096 bytes by default), and the
far end of its cable (the switch port) can carry it.

Two sources at level standard, both already collected for other checks:

- ``ibv_devinfo`` (``Snapshot.inventory.ibv_devinfo``): our port's ``active_mtu`` (what verbs
  applications, NCCL and MPI, get) and ``max_mtu``;
- the far-end reader (``Port.partner``): the partner port's PortInfo ``NeighborMTU`` (the MTU
  the subnet manager set for the link, the same at both ends) and ``MtuCap`` (the largest its
  port supports); our own PortInfo too, where the chain read it (``local-portinfo``: the link
  runs below the switch port's MtuCap, ``ibdiag.facts.partner.mtu_below_cap``).

The expected MTU is ``Thresholds.expect_ib_mtu`` (4096; None: not graded). Ethernet (RoCE)
ports are not graded here: their MTU is the netdev's (the netdev checks).
"""

from __future__ import annotations

from typing import Dict, Iterator, List, Optional, Tuple

from ibdiag.facts.inventory import ListedPort, Listing
from ibdiag.facts.partner import Partner, PortInfo, cable_name
from ibdiag.model import Device, Port, Result, Snapshot, Status
from ibdiag.registry import check
from ibdiag.roles import IBV_DEVINFO
from ibdiag.targets import ACTIVE, graded_ports
from ibdiag.thresholds import Thresholds

_LINK_STEPS = ("nodeinfo", "portinfo")

_HINT = (
    "find which end holds the link down: the switch port's MtuCap (its port profile or split "
    "mode), our HCA's max_mtu (ibv_devinfo), and the subnet manager, which sets NeighborMTU at "
    "link up from both ends' MtuCap (opensm partitions.conf `mtu=5` is 4096 for a partition's "
    "multicast groups); fix it, then bounce the port or re-sweep the SM"
)


@check(
    "link.mtu",
    title="InfiniBand links run the expected MTU",
    needs={"ibv_devinfo", "partner"},
    level="standard",
)
def link_mtu(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: every ACTIVE InfiniBand port's active MTU is the expected one (4096 by default:
    ``expect_ib_mtu``), the far end's port (the switch port) supports it (PortInfo MtuCap) and
    was set to the same MTU as ours (its NeighborMTU).

    Why it matters: a link at 2048 or less carries every RDMA message in twice as many packets
    as at 4096; NCCL and MPI still run, slower, with nothing failing or counting an error. A
    switch port capped lower, or a subnet manager that set a smaller MTU, is invisible from
    the node's state and counters. Ends that disagree drop packets larger than the smaller MTU.

    What to do: find which end holds the link down - the switch port's MtuCap (named in the
    result), our HCA's max_mtu (ibv_devinfo), the subnet manager's MTU for the partition
    (opensm partitions.conf ``mtu=5``, UFM) - fix it, then bounce the port or re-sweep the SM
    so the link is set up again. RoCE ports are graded by the netdev MTU checks.
    """
    expected = th.expect_ib_mtu
    listing = snap.inventory.ibv_devinfo if snap.inventory is not None else None
    verbs = _listed_ports(listing)
    for dev, port in graded_ports(snap, th):
        if not port.is_infiniband:
            continue  # RoCE: the netdev's MTU (netdev checks)
        local = dev.target(port)
        partner = port.partner
        target = cable_name(local, partner)
        if expected is None:
            yield _skip(target, "no expected MTU configured (expect_ib_mtu unset)", local)
            continue
        if port.state != ACTIVE:
            message = f"{local} is not ACTIVE ({port.state_name}): no MTU is set up (link.state)"
            yield _skip(target, message, f"{port.path}/state")
            continue
        yield _grade(target, dev, port, expected, verbs.get((dev.name, port.number)), listing)


def _listed_ports(listing: Optional[Listing]) -> Dict[Tuple[str, int], ListedPort]:
    """ibv_devinfo's ports by (device, number), those it says are InfiniBand (or says nothing
    of): the MTU of a port it calls Ethernet is a RoCE MTU, never graded as an IB one (sysfs
    and verbs disagreeing is hca.driver_inventory's to say)."""
    if listing is None:
        return {}
    return {
        (ca.name, p.number): p
        for ca in listing.cas
        for p in ca.ports
        if p.link_layer in (None, "InfiniBand")
    }


def _verbs_evidence(listing: Optional[Listing]) -> str:
    outcome = listing.outcome if listing is not None else None
    return outcome.command if outcome is not None else str(IBV_DEVINFO)


def _why_no_verbs(dev: Device, port: Port, listing: Optional[Listing]) -> str:
    if listing is None:
        return "ibv_devinfo was not collected"
    if listing.unusable is not None:
        return f"ibv_devinfo: {listing.unusable}"
    if listing.error is not None:
        return f"ibv_devinfo: {listing.error}"
    return f"ibv_devinfo listed no InfiniBand active_mtu for {dev.name} port {port.number}"


def _why_no_far_end(partner: Optional[Partner]) -> str:
    if partner is None:
        return "the far end was not read"
    why = partner.first_unread(_LINK_STEPS)
    if why is not None:
        return f"the far end's PortInfo was not read: {why.reason}"
    return "the far end's PortInfo named no NeighborMTU or MtuCap"


def _grade(
    target: str,
    dev: Device,
    port: Port,
    expected: int,
    listed: Optional[ListedPort],
    listing: Optional[Listing],
) -> Result:
    partner = port.partner
    far: Optional[PortInfo] = partner.port_info if partner is not None else None
    ours_info = partner.local_port_info if partner is not None else None
    evidence: List[str] = []
    ours: Optional[int] = None
    if listed is not None and listed.active_mtu is not None:
        ours = listed.active_mtu
        evidence.append(_verbs_evidence(listing))
    elif ours_info is not None and ours_info.neighbor_mtu is not None:
        ours = ours_info.neighbor_mtu
        evidence.append(partner.evidence(ours_info.role))  # type: ignore[union-attr]
    far_neighbor = far.neighbor_mtu if far is not None else None
    far_cap = far.mtu_cap if far is not None else None
    if far is not None and (far_neighbor is not None or far_cap is not None):
        evidence.append(partner.evidence(far.role))  # type: ignore[union-attr]
    if ours is None and far_neighbor is None and far_cap is None:
        reasons = [_why_no_verbs(dev, port, listing), _why_no_far_end(partner)]
        return Result(
            target=target, status=Status.SKIP,
            message=f"no MTU read for {dev.target(port)}: {'; '.join(reasons)}",
            evidence=[_verbs_evidence(listing)],
        )  # fmt: skip
    kind = "switch port" if partner is not None and partner.is_switch else "far end's port"
    link, link_source = ours, "active MTU"
    if link is None:
        link, link_source = far_neighbor, f"link MTU (the {kind}'s NeighborMTU)"
    findings: List[str] = []
    subject: Optional[str] = None
    if link is not None and link < expected:
        findings.append(f"{link_source} {link} < {expected}")
        subject = f"MTU {link}<{expected}"
    if far_cap is not None and far_cap < expected:
        findings.append(f"{kind} MtuCap {far_cap} < {expected}")
        subject = subject or f"{kind} MtuCap {far_cap}<{expected}"
    if ours is not None and far_neighbor is not None and far_neighbor != ours:
        findings.append(f"{kind} NeighborMTU {far_neighbor} != ours {ours}")
        subject = subject or f"NeighborMTU {far_neighbor}!={ours}"
    our_cap = _our_cap(listed, ours_info)
    if findings and our_cap is not None and our_cap < expected:
        findings.append(f"our MtuCap {our_cap} < {expected}")
    if findings:
        return Result(
            target=target, status=Status.FAIL, message=f"{target}: {'; '.join(findings)}",
            observed=link, expected=expected, subject=subject, hint=_HINT, evidence=evidence,
        )  # fmt: skip
    seen = [f"{link_source} {link}"]
    if far_neighbor is not None and ours is not None:
        seen.append(f"{kind} NeighborMTU {far_neighbor}")
    if far_cap is not None:
        seen.append(f"{kind} MtuCap {far_cap}")
    if link is not None and link > expected:
        return Result(
            target=target, status=Status.WARN,
            message=f"{target}: {', '.join(seen)}; expected {expected} (expect_ib_mtu)",
            observed=link, expected=expected, subject=f"MTU {link}>{expected}",
            hint="set expect_ib_mtu to the MTU this fabric is meant to run", evidence=evidence,
        )  # fmt: skip
    unread = ""
    if ours is None:
        unread = f" ({_why_no_verbs(dev, port, listing)})"
    elif far_neighbor is None and far_cap is None:
        unread = f" ({_why_no_far_end(partner)})"
    return Result(
        target=target, status=Status.PASS,
        message=f"{target}: {', '.join(seen)}, expected {expected}{unread}",
        observed=link, expected=expected, evidence=evidence,
    )  # fmt: skip


def _our_cap(listed: Optional[ListedPort], info: Optional[PortInfo]) -> Optional[int]:
    """Our port's largest MTU: ibv_devinfo's max_mtu, else our PortInfo's MtuCap."""
    if listed is not None and listed.max_mtu is not None:
        return listed.max_mtu
    return info.mtu_cap if info is not None else None


def _skip(target: str, message: str, evidence: str) -> Result:
    return Result(target=target, status=Status.SKIP, message=message, evidence=[evidence])
