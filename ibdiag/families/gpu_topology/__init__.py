"""The GPU topology family (source ``gpu_topology``, level standard): ``nvidia-smi topo -m``
-> ``Snapshot.gpu_topology``: which HCA each GPU is nearest (GPUDirect RDMA pairing).

**What it plans**: ``nvidia-smi topo -m`` (read-only) where sysfs shows an NVIDIA GPU
(``Snapshot.gpus``); nothing elsewhere.

**What it gives**: the matrix as its GPU <-> NIC cells (``parser.parse_gpu_topology``), with
what is derived from it once: the one-to-one rail pairing and each GPU's nearest NIC, and what
became of the run (``GpuTopology.outcome``) for the check. Read early too: level full's loopback
asks ``read_gpu_topology`` for the rail pairing before its tests start (each HCA's
``--use_cuda`` GPU), from the same run with the same function.
"""

from __future__ import annotations

from typing import List, Optional

from ibdiag import roles
from ibdiag.facts.topology import GpuTopology
from ibdiag.families import Planned, Runs, Update, outcome_of
from ibdiag.model import Snapshot

SOURCE = "gpu_topology"
LEVEL = "standard"
ORDER = 60


def argv() -> List[str]:
    """The argv that prints the GPU/NIC topology matrix (read-only)."""
    return ["nvidia-smi", "topo", "-m"]


def plan(snap: Snapshot) -> List[Planned]:
    """``nvidia-smi topo -m`` where sysfs shows an NVIDIA GPU."""
    return [Planned(roles.GPU_TOPOLOGY, argv())] if snap.gpus else []


def interpret(snap: Snapshot, runs: Runs) -> Update:
    return Update(node={"gpu_topology": read_gpu_topology(runs)})


def read_gpu_topology(runs: Runs) -> Optional[GpuTopology]:
    """The GPU topology from the run recorded for its role; None when it was not run (level
    quick, no NVIDIA GPU in sysfs, an older bundle)."""
    recorded = runs.get(roles.GPU_TOPOLOGY)
    if recorded is None:
        return None
    outcome = outcome_of(recorded)
    failure = recorded.failure()
    if failure is not None:
        return GpuTopology.model_construct(
            role=roles.GPU_TOPOLOGY, failure=failure, outcome=outcome
        )
    from ibdiag.families.gpu_topology.parser import parse_gpu_topology

    topology = parse_gpu_topology(recorded.stdout, roles.GPU_TOPOLOGY)
    return topology.model_copy(update={"outcome": outcome})
