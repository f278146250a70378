"""The network interface on top of each port (IPoIB ibN, or the RoCE netdev)."""

from __future__ import annotations

from typing import Iterator

from ibdiag.check_results import about
from ibdiag.model import Result, Snapshot, Status
from ibdiag.registry import check
from ibdiag.targets import ACTIVE, graded_ports
from ibdiag.thresholds import Thresholds


@check("netdev.operstate", title="Netdev is up on an ACTIVE port", needs={"sysfs"})
def netdev_operstate(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: the IPoIB (or RoCE) interface of every ACTIVE port has operstate ``up``.

    Why it matters: the IB port can be ACTIVE while its IPoIB interface is down: anything that
    bootstraps over IPoIB (NCCL/MPI out-of-band, storage, Slurm traffic on ib0) fails on that
    rail. A high carrier_changes count means the interface has been flapping.

    What to do: `ip link show <if>`; bring it up (`ip link set <if> up`, or the network
    config), and check dmesg for link flaps. A port that is not ACTIVE is judged by
    link.state instead.
    """
    for dev, port in graded_ports(snap, th):
        netdev = port.netdev
        if netdev is None or port.state != ACTIVE:
            continue
        kind = "IPoIB" if netdev.is_ipoib or port.is_infiniband else "RoCE"
        source = [f"class/net/{netdev.name}/operstate"]
        result = about(dev.target(port), source)
        if netdev.operstate == "up":
            yield result(status=Status.PASS, message=f"{kind} {netdev.name} is up", observed="up")
            continue
        observed = netdev.operstate or netdev.problems.get("operstate", "unreadable")
        flaps = (
            f"; carrier changed {netdev.carrier_changes} times since it was created"
            if netdev.carrier_changes
            else ""
        )
        yield result(
            status=Status.WARN,
            message=f"{kind} {netdev.name} operstate {observed} while the port is ACTIVE{flaps}",
            observed=observed,
            expected="up",
            hint=f"ip link show {netdev.name}; bring it up and check dmesg for link flaps",
            evidence=[*source, f"class/net/{netdev.name}/carrier_changes"],
        )
