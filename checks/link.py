"""Port link checks: logical state, physical state, link layer, rate and width, per port."""

from __future__ import annotations

from collections import defaultdict
from functools import partial
from typing import Dict, Iterator, List, Tuple

from ibdiag import hca_capabilities
from ibdiag.check_results import about
from ibdiag.model import Device, Port, Result, Snapshot, Status
from ibdiag.registry import check
from ibdiag.targets import (
    ACTIVE,
    LINK_UP,
    evidence,
    graded_devices,
    graded_ports,
)
from ibdiag.thresholds import Thresholds

# What to do for each non-healthy value; InfiniBand and RoCE ports differ for the logical state.
IB_STATE_HINTS = {
    1: "no link: see phys_state; check the cable, transceiver and peer switch port",
    2: "physical link is up but the subnet manager has not configured the port: check that "
    "the SM (opensm/UFM) is running and reaches this port",
    3: "the SM configured the port but never activated it: the SM sweep is stuck or failing",
    5: "ACTIVE_DEFER: transient; if it persists, reseat the cable and check the SM logs",
}
ETH_STATE_HINTS = {
    1: "RoCE port down: check the Ethernet link (ip link), cable and switch port",
}
PHYS_STATE_HINTS = {
    1: "port is asleep: the HCA port was put to sleep; re-enable it",
    2: "Polling: no link partner; check the cable at both ends, the transceiver, and that the "
    "peer switch port is enabled",
    3: "Disabled: the port was disabled (ibportstate, the SM or the switch side); re-enable it",
    4: "still training: if it persists, the cable or transceiver is faulty",
    6: "LinkErrorRecovery: the link is retraining after errors; suspect the cable or "
    "transceiver and check symbol_error",
    7: "PhyTest: the port is in a physical-layer test mode; take it out of test mode",
}


def _state_text(code, name) -> str:
    return f"{code}: {name}" if code is not None else "unreadable"


def _unreadable(result: partial[Result], port: Port, file: str, label: str, it: str) -> Result:
    """WARN: the port's state ``file`` could not be read (link.state, link.phys_state)."""
    return result(
        status=Status.WARN,
        message=f"{label} unreadable ({port.problems.get(file, 'unknown')})",
        hint=f"read the file by hand; a driver that cannot report {it} is suspect",
    )


@check("link.state", title="Port logical state is ACTIVE", needs={"sysfs"})
def port_state(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: every port of every HCA reads ``state`` 4: ACTIVE.

    Why it matters: only an ACTIVE port carries traffic. 2: INIT means the cable is fine but the
    subnet manager never brought the port up, so jobs using this rail hang at NCCL init.

    What to do: 1: DOWN - see phys_state and the cable; 2: INIT / 3: ARMED - check the subnet
    manager (opensm/UFM) sees the port; RoCE DOWN - check the Ethernet link and switch port.
    An HCA with no readable ports at all fails: it cannot carry traffic either.
    """
    for dev in graded_devices(snap, th):
        if not dev.ports:
            yield Result(
                target=dev.name,
                status=Status.FAIL,
                message=f"no ports readable under {dev.path}/ports "
                f"({dev.problems.get('ports', 'empty')})",
                expected="at least one port",
                hint="the driver did not register the HCA's ports: check dmesg for mlx5_ib errors",
                evidence=[f"{dev.path}/ports"],
            )
    for dev, port in graded_ports(snap, th):
        result = about(dev.target(port), evidence(port.path, "state"), expected="4: ACTIVE")
        if port.state is None:
            yield _unreadable(result, port, "state", "port state", "state")
            continue
        observed = _state_text(port.state, port.state_name)
        if port.state == ACTIVE:
            yield result(status=Status.PASS, message=f"state {observed}", observed=observed)
            continue
        hints = IB_STATE_HINTS if port.is_infiniband else ETH_STATE_HINTS
        hint = hints.get(port.state, "port is not ACTIVE: check cable, peer port and SM")
        if port.state == 2 and port.is_infiniband and port.sm_lid == 0:
            hint += " (sm_lid is 0: no SM has ever reached it)"
        elif port.state in (2, 3) and port.is_infiniband and port.sm_lid:
            hint += (
                f" (sm_lid 0x{port.sm_lid:x}: the SM there configured it once - is it still "
                "running? sminfo, its log, UFM)"
            )
        yield result(
            status=Status.FAIL,
            message=f"port state {observed}, expected 4: ACTIVE",
            observed=observed,
            hint=hint,
            evidence=evidence(port.path, "state", "sm_lid"),
        )


@check("link.phys_state", title="Port physical link is LinkUp", needs={"sysfs"})
def phys_state(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: every port reads ``phys_state`` 5: LinkUp.

    Why it matters: the physical layer is below everything; a port that is not LinkUp carries
    nothing. 2: Polling means no link partner (cable, transceiver or peer switch port);
    3: Disabled means someone or something turned the port off.

    What to do: Polling - reseat or swap the cable and check the switch port; Disabled -
    re-enable the port (ibportstate enable, or on the switch); LinkErrorRecovery - swap the
    cable. Virtualised HCAs that report 0: <unknown> on an ACTIVE port are skipped.
    """
    for dev, port in graded_ports(snap, th):
        result = about(dev.target(port), evidence(port.path, "phys_state"), expected="5: LinkUp")
        if port.phys_state is None:
            yield _unreadable(result, port, "phys_state", "phys_state", "it")
            continue
        observed = _state_text(port.phys_state, port.phys_state_name)
        if port.phys_state == LINK_UP:
            yield result(status=Status.PASS, message=f"phys_state {observed}", observed=observed)
        elif port.phys_state == 0 and port.state == ACTIVE:
            yield result(
                status=Status.SKIP,
                message=f"phys_state {observed} on an ACTIVE port: not reported by this "
                "(virtualised) HCA",
                observed=observed,
            )
        else:
            yield result(
                status=Status.FAIL,
                message=f"phys_state {observed}, expected 5: LinkUp",
                observed=observed,
                hint=PHYS_STATE_HINTS.get(port.phys_state, "check the cable and peer port"),
            )


@check("link.layer", title="Port link layer is known (InfiniBand or Ethernet/RoCE)")
def link_layer(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: each port reports ``link_layer`` InfiniBand, or Ethernet for a RoCE port.

    Why it matters: InfiniBand and RoCE ports are judged differently (subnet manager, lanes,
    rates); ibdiag applies IB-only rules to IB ports only. A port on the wrong link layer (a
    VPI card flipped to Ethernet) will not join the IB fabric.

    What to do: for a VPI card on the wrong protocol set LINK_TYPE_P<n> with mlxconfig and
    reboot; exclude Ethernet-only devices you do not want graded with --ignore-hca (Azure's
    mlx5_an0, for example).
    """
    for dev, port in graded_ports(snap, th):
        result = about(dev.target(port), evidence(port.path, "link_layer"))
        if port.is_infiniband:
            layer = port.link_layer or "InfiniBand (no link_layer file: pre-RoCE kernel)"
            yield result(status=Status.PASS, message=f"link layer {layer}", observed="InfiniBand")
        elif port.is_ethernet:
            yield result(
                status=Status.PASS,
                message="link layer Ethernet (RoCE): InfiniBand-only rules not applied",
                observed="Ethernet",
            )
        else:
            shown = port.link_layer or port.problems.get("link_layer", "unreadable")
            yield result(
                status=Status.WARN,
                message=f"link layer {shown!r}, expected InfiniBand or Ethernet",
                observed=port.link_layer,
                hint="read the file by hand; an unknown link layer is not graded as IB or RoCE",
            )


def _active_rated_ports(snap: Snapshot, th: Thresholds) -> List[Tuple[Device, Port]]:
    return [
        (dev, port)
        for dev, port in graded_ports(snap, th)
        if port.state == ACTIVE and port.rate is not None
    ]


def _layer(port: Port) -> str:
    """The link layer ports are compared within: InfiniBand by ``Port.is_infiniband`` (a
    missing link_layer file included), else what sysfs said ("unknown": unreadable)."""
    return "InfiniBand" if port.is_infiniband else (port.link_layer or "unknown")


def _fastest_peer_rates(snap: Snapshot, th: Thresholds) -> Dict[Tuple[str, str], float]:
    """For each (HCA model, link layer) on this node, the best rate any ACTIVE port runs at."""
    best: Dict[Tuple[str, str], float] = defaultdict(float)
    for dev, port in _active_rated_ports(snap, th):
        key = (hca_capabilities.model_key(dev), _layer(port))
        best[key] = max(best[key], port.rate.gbps)  # type: ignore[union-attr]
    return best


@check("link.rate", title="Port runs at the expected link rate", needs={"sysfs"})
def link_rate(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: every ACTIVE InfiniBand port runs at the expected rate (``--expect-rate``);
    without one - and for RoCE ports always - at the rate of the other ports of the same HCA
    model and link layer on this node, and at the model's best InfiniBand speed (a ConnectX-6
    at HDR, a ConnectX-7 at NDR).

    Why it matters: a cable that trained at EDR instead of HDR halves that rail's bandwidth
    and slows every collective on the node, while the port still reads ACTIVE.

    What to do: reseat or replace the cable/transceiver and check the switch port's speed
    settings; if the fabric is slower on purpose, set --expect-rate to its rate.
    """
    peers = _fastest_peer_rates(snap, th)
    for dev, port in graded_ports(snap, th):
        source = evidence(port.path, "rate")
        result = about(dev.target(port), source)
        if port.state != ACTIVE:
            yield result(
                status=Status.SKIP, message="port not ACTIVE: its rate means nothing until it is"
            )
            continue
        if port.rate is None:
            yield result(
                status=Status.WARN,
                message=f"rate unreadable on an ACTIVE port ({port.problems.get('rate', '?')})",
                expected=th.expect_rate_gbps,
                hint="read the file by hand; compare with ibstat",
            )
            continue
        yield _grade_rate(dev, port, th, peers, source)


def _grade_rate(dev, port, th, peers, source) -> Result:
    rate = port.rate
    observed = rate.describe()
    result = about(dev.target(port), source, observed=rate.gbps)
    if th.expect_rate_gbps is not None and port.is_infiniband:
        if rate.gbps < th.expect_rate_gbps:
            return result(
                status=Status.FAIL,
                message=f"rate {observed}, expected {th.expect_rate_gbps:g} Gb/s",
                expected=th.expect_rate_gbps,
                subject=_below(rate.gbps, th.expect_rate_gbps),
                hint="degraded link: reseat or replace the cable/transceiver; check the "
                "switch port speed",
            )
        return result(
            status=Status.PASS,
            message=f"rate {observed} (expected {th.expect_rate_gbps:g} Gb/s)",
            expected=th.expect_rate_gbps,
        )
    key = (hca_capabilities.model_key(dev), _layer(port))
    best = peers.get(key, rate.gbps)
    if rate.gbps < best:
        return result(
            status=Status.FAIL,
            message=f"rate {observed}, below the {best:g} Gb/s of the other {key[0]} "
            f"{key[1]} ports on this node",
            expected=best,
            subject=_below(rate.gbps, best),
            hint="degraded link: reseat or replace the cable/transceiver; check the switch port",
        )
    model = hca_capabilities.identify(dev)
    if port.is_infiniband and model is not None and hca_capabilities.below_capability(model, rate):
        return result(
            status=Status.WARN,
            message=f"rate {observed}: a {model.name} supports {model.max_ib_speed}",
            expected=model.max_ib_speed,
            subject=f"{rate.gbps:g} Gb/s<{model.max_ib_speed}",
            hint="cable, transceiver or switch limits the speed; if the fabric is slower on "
            "purpose, set --expect-rate",
        )
    return result(status=Status.PASS, message=f"rate {observed}")


def _below(gbps: float, expected: float) -> str:
    """How a drain reason names a slow port's rate: "100<200 Gb/s" (a fleet grouped by reason
    tells 100 from 50 Gb/s)."""
    return f"{gbps:g}<{expected:g} Gb/s"


@check("link.width", title="InfiniBand port trained on all its lanes", needs={"sysfs"})
def link_width(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: an ACTIVE InfiniBand port runs 4X (or 2X, the HDR100/NDR200 split cables).

    Why it matters: a port at 1X has lost lanes: a damaged cable or transceiver leaves the link
    ACTIVE at a quarter of its bandwidth. Ethernet (RoCE) ports report 1X normally and are not
    judged here.

    What to do: reseat or replace the cable/transceiver; ibstat shows the same width.
    """
    for dev, port in graded_ports(snap, th):
        if not port.is_infiniband or port.state != ACTIVE or port.rate is None:
            continue
        if port.rate.lanes is None:
            continue
        width = port.rate.width
        result = about(dev.target(port), evidence(port.path, "rate"), observed=width)
        if port.rate.lanes < 2:
            yield result(
                status=Status.WARN,
                message=f"link width {width}, expected 4X (or 2X for split cables)",
                expected="4X",
                hint="lanes failed to train: reseat or replace the cable/transceiver",
            )
        else:
            yield result(status=Status.PASS, message=f"link width {width}")
