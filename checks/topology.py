"""The node around the HCAs: NUMA placement, GPUDirect RDMA, and netdev MTUs."""

from __future__ import annotations

from typing import Iterator

from ibdiag.check_results import about
from ibdiag.model import Result, Snapshot, Status
from ibdiag.registry import check
from ibdiag.targets import graded_devices, graded_ports
from ibdiag.thresholds import Thresholds

PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
TOPO_COMMAND = "nvidia-smi topo -m"  # named in messages and evidence when it was not run


@check("topology.numa", title="Each HCA's NUMA node is known", needs={"sysfs", "topology"},
       level="standard")  # fmt: skip
def numa(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: every HCA reports the NUMA node it hangs off (or none does: a single-node or
    virtual platform that exposes no affinity).

    Why it matters: traffic pinned to the wrong socket crosses the CPU interconnect and loses
    bandwidth (a third of it in ib_write_bw loopback); NCCL picks NICs by this affinity. One
    HCA reporting -1 while its siblings report nodes is a BIOS/ACPI (SRAT) table problem.

    What to do: check the BIOS NUMA/SRAT settings; cat /sys/bus/pci/devices/<BDF>/numa_node.
    """
    devices = [(dev, dev.pci) for dev in graded_devices(snap, th) if dev.pci is not None]
    known = [dev for dev, pci in devices if pci.numa_node is not None and pci.numa_node >= 0]
    for dev, pci in devices:
        node = pci.numa_node
        if node is not None and node >= 0:
            yield Result(
                target=dev.name,
                status=Status.PASS,
                message=f"NUMA node {node}",
                observed=node,
                evidence=[f"{dev.path}/device/numa_node"],
            )
        elif known:
            yield Result(
                target=dev.name, status=Status.WARN,
                message=f"no NUMA node reported ({node}) while {len(known)} other HCAs report one",
                observed=node, hint="check the BIOS NUMA/SRAT settings for this slot",
                evidence=[f"{dev.path}/device/numa_node"],
            )  # fmt: skip
        else:
            yield Result(target=dev.name, status=Status.SKIP,
                         message="the platform reports no NUMA affinity for any HCA",
                         evidence=[f"{dev.path}/device/numa_node"])  # fmt: skip


@check("topology.peermem", title="GPUDirect RDMA module loaded where NVIDIA GPUs are",
       needs={"topology"}, level="standard")  # fmt: skip
def peermem(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: on a node with NVIDIA GPUs, nvidia_peermem (nv_peer_mem on old drivers) is
    loaded.

    Why it matters: without it GPUDirect RDMA is silently off: NCCL stages every transfer
    through host memory, costing bandwidth and CPU with no error anywhere (seed 004).

    What to do: `modprobe nvidia_peermem` and make it load at boot (it ships with the NVIDIA
    driver); after a driver update it must be rebuilt with the driver.
    """
    if snap.gpus is None or snap.kernel_modules is None:
        if snap.gpus is None:
            why = "NVIDIA GPUs not collected (level quick)"
        else:
            why = f"loaded modules unreadable ({snap.problems.get('procfs:modules', 'unknown')})"
        yield Result(target="node", status=Status.SKIP, message=why, evidence=["procfs:modules"])
        return
    if not snap.gpus:
        yield Result(target="node", status=Status.SKIP, message="no NVIDIA GPU on this node",
                     evidence=["bus/pci/devices"])  # fmt: skip
        return
    loaded = [name for name in PEERMEM_MODULES if name in snap.kernel_modules]
    if loaded:
        yield Result(target="node", status=Status.PASS,
                     message=f"{loaded[0]} loaded for {len(snap.gpus)} NVIDIA GPUs",
                     observed=loaded[0], evidence=["procfs:modules"])  # fmt: skip
    else:
        yield Result(
            target="node", status=Status.WARN,
            message=f"{len(snap.gpus)} NVIDIA GPUs but nvidia_peermem is not loaded: "
            "GPUDirect RDMA is off",
            observed="not loaded", expected="nvidia_peermem",
            hint="modprobe nvidia_peermem, and load it at boot", evidence=["procfs:modules"],
        )  # fmt: skip


@check("netdev.mtu", title="IPoIB and RoCE MTU as the profile expects", needs={"sysfs"})
def mtu(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: every IPoIB interface has expect_ipoib_mtu and every RoCE netdev
    expect_roce_mtu, when the profile or site config sets them.

    Why it matters: a node whose IPoIB MTU differs from the fabric's (2044 datagram vs 4092, or
    connected mode's 65520) fragments or drops; RoCE's MTU sets the IB MTU of every QP.

    What to do: set the MTU in the network configuration (ip link set <if> mtu N) to the site's
    value; set the expectation with expect_ipoib_mtu / expect_roce_mtu in ibdiag.toml.
    Without an expectation there is nothing to judge and the check says nothing.
    """
    for dev, port in graded_ports(snap, th):
        netdev = port.netdev
        if netdev is None:
            continue
        expected = th.expect_ipoib_mtu if port.is_infiniband else th.expect_roce_mtu
        if expected is None:
            continue
        kind = "IPoIB" if port.is_infiniband else "RoCE"
        source = [f"class/net/{netdev.name}/mtu"]
        if netdev.mtu == expected:
            yield Result(target=dev.target(port), status=Status.PASS,
                         message=f"{kind} {netdev.name} MTU {netdev.mtu}", observed=netdev.mtu,
                         expected=expected, evidence=source)  # fmt: skip
        else:
            shown = netdev.mtu if netdev.mtu is not None else netdev.problems.get("mtu", "?")
            yield Result(target=dev.target(port), status=Status.WARN,
                         message=f"{kind} {netdev.name} MTU {shown}, expected {expected}",
                         observed=netdev.mtu, expected=expected,
                         hint=f"ip link set {netdev.name} mtu {expected} (and in the network "
                         "configuration)", evidence=source)  # fmt: skip


@check(
    "topology.gpu_hca",
    title="Each GPU has an HCA on its PCIe switch, on the same NUMA node",
    needs={"sysfs", "topology", "gpu_topology"},
    level="standard",
)
def gpu_hca(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: in ``nvidia-smi topo -m`` every GPU has its own HCA behind the same PCIe
    switch (PIX or PXB: the rail layout of DGX and ND-series nodes), and that HCA sits on the
    GPU's NUMA node.

    Why it matters: GPUDirect RDMA moves data between the GPU and the HCA over the PCIe switch;
    a GPU whose nearest HCA is NODE or SYS away sends every byte through the CPU, and an HCA on
    the other socket crosses the CPU interconnect - NCCL's inter-node bandwidth drops.

    An nvidia-smi that hangs or crashes warns (a stuck driver, a GPU fallen off the bus);
    not installed or failing is a skip.

    What to do: check the BIOS PCIe/ACS settings and that every HCA is present (hca.inventory);
    an HCA reported on the wrong NUMA node is a firmware (ACPI SRAT) problem.
    """
    from ibdiag.outcome_results import symptom_result

    if snap.gpus is not None and not snap.gpus:
        yield Result(target="node", status=Status.SKIP, message="no NVIDIA GPU on this node")
        return
    topology = snap.gpu_topology
    if topology is None:
        yield Result(target="node", status=Status.SKIP, evidence=[TOPO_COMMAND],
                     message=f"no GPU topology: `{TOPO_COMMAND}` was not collected (level quick, "
                     "or not planned here)")  # fmt: skip
        return
    run = topology.outcome
    evidence = [run.command if run is not None else TOPO_COMMAND]
    if topology.failure is not None:
        what = run.symptom() if run is not None else None  # hung or crashed: a GPU fallen
        if run is not None and what:  # off the bus, a stuck driver
            yield symptom_result("node", run, what, "this node", "a hung NVIDIA driver or "
                                 "a GPU fallen off the bus?", "nvidia-smi -q; the kernel log "
                                 "for Xid errors")  # fmt: skip
            return
        yield Result(target="node", status=Status.SKIP, evidence=evidence,
                     message=f"no GPU topology: {topology.failure}")  # fmt: skip
        return
    if topology.error or not topology.gpus:
        reason = topology.error or "no GPU in its matrix"
        yield Result(target="node", status=Status.SKIP, message=f"nvidia-smi topo -m: {reason}",
                     evidence=evidence)  # fmt: skip
        return
    graded = {dev.name: dev for dev in graded_devices(snap, th)}
    for pair in topology.rails:
        dev = graded.get(pair.nic)
        if dev is None:
            continue  # an ignored or absent HCA (hca.inventory says which)
        gpu_numa = topology.numa_affinity.get(pair.gpu)
        hca_numa = dev.pci.numa_node if dev.pci else None
        result = about(dev.name, evidence)
        if gpu_numa is not None and hca_numa is not None and hca_numa >= 0 and gpu_numa != hca_numa:
            yield result(
                status=Status.WARN,
                message=f"paired with {pair.gpu} ({pair.link}) but on NUMA node {hca_numa}, "
                f"{pair.gpu} on {gpu_numa}",
                observed="numa-mismatch",
                expected=gpu_numa,
                hint="traffic crosses the CPU interconnect; check the BIOS NUMA/SRAT settings",
                evidence=[*evidence, f"{dev.path}/device/numa_node"],
            )
            continue
        yield result(status=Status.PASS, message=f"nearest GPU {pair.gpu} ({pair.link})")
    for gpu in topology.unpaired_gpus:
        nearest = topology.nearest_nic(gpu)
        via = f"nearest HCA {nearest.nic} is {nearest.link} away" if nearest else "no HCA listed"
        yield Result(
            target=gpu,
            status=Status.WARN,
            message=f"no HCA on its PCIe switch ({via}): GPUDirect RDMA goes through the CPU",
            observed="no-rail-hca",
            hint="check that every HCA is present and the BIOS PCIe settings (ACS, bifurcation)",
            evidence=evidence,
        )
