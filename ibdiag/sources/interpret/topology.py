"""``nvidia-smi topo -m`` (role ``gpu-topology nvidia-smi``) -> ``Snapshot.gpu_topology``.

Read once, and early: ``ibdiag.collect`` asks ``read_gpu_topology`` for the rail pairing
before level full's loopback tests start (each HCA's ``--use_cuda`` GPU), and the interpret
step sets the field from the same function.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from ibdiag import roles
from ibdiag.facts.topology import GpuNic, GpuTopology
from ibdiag.model import CommandRun


def interpret(fields: Dict[str, Any], commands: Dict[str, CommandRun]) -> Dict[str, Any]:
    return {"gpu_topology": read_gpu_topology(commands)}


def read_gpu_topology(commands: Dict[str, CommandRun]) -> Optional[GpuTopology]:
    """The GPU topology from the run recorded for its role; None when it was not run (level
    quick, no NVIDIA GPU in sysfs, an older bundle)."""
    run = next((run for run in commands.values() if run.role == roles.GPU_TOPOLOGY), None)
    if run is None:
        return None
    failure = run.failure()
    if failure is not None:
        return GpuTopology.model_construct(role=run.role, failure=failure)
    return topology_of(run.role, run.stdout)


def topology_of(role: str, text: str) -> GpuTopology:
    """The fact for one ``nvidia-smi topo -m`` output (stdout of a run that succeeded)."""
    from ibdiag.sources.parsers.nvidia_smi_topo import parse_nvidia_smi_topo

    matrix = parse_nvidia_smi_topo(text)
    pairing = matrix.gpu_nic_pairs()
    nearest = [(gpu, matrix.nearest_nic(gpu)) for gpu in matrix.gpus]
    return GpuTopology.model_construct(
        role=role,
        error=matrix.error,
        gpus=list(matrix.gpus),
        nics=list(matrix.nics),
        links=[
            _cell(gpu, nic, link)
            for gpu in matrix.gpus
            for nic in matrix.nics
            for link in [matrix.link(gpu, nic)]
            if link is not None
        ],
        numa_affinity=dict(matrix.numa_affinity),
        rails=[_cell(pair.gpu, pair.nic, pair.link) for pair in pairing.pairs],
        unpaired_gpus=list(pairing.unpaired_gpus),
        nearest=[_cell(gpu, *found) for gpu, found in nearest if found is not None],
        problems=list(matrix.problems),
    )


def _cell(gpu: str, nic: str, link: str) -> GpuNic:
    return GpuNic.model_construct(gpu=gpu, nic=nic, link=link)
