"""Which read-only commands a standard-level run needs, from what sysfs showed, for the
families not yet in ``ibdiag.families`` (perfquery, ethtool, the kernel log, ibstat and
ibv_devinfo are there).

- ``nvidia-smi topo -m`` where sysfs shows an NVIDIA GPU: which HCA each GPU is nearest
  (GPUDirect RDMA pairing).
"""

from __future__ import annotations

from typing import AbstractSet, List, NamedTuple, Optional

from ibdiag import roles
from ibdiag.model import Device, Pci


class Planned(NamedTuple):
    """One command to run: what it is for (``ibdiag.roles``) and its argv."""

    role: roles.Role
    argv: List[str]


def nvidia_smi_topo_argv() -> List[str]:
    """The argv that prints the GPU/NIC topology matrix (read-only)."""
    return ["nvidia-smi", "topo", "-m"]


def commands_for(
    devices: List[Device], needs: AbstractSet[str], gpus: Optional[List[Pci]] = None
) -> List[Planned]:
    """Every command the ``needs`` call for, with its role, in a stable order. ``gpus``: the
    NVIDIA GPUs sysfs showed (nvidia-smi runs only where there is one)."""
    planned: List[Planned] = []
    if "gpu_topology" in needs and gpus:
        planned.append(Planned(roles.GPU_TOPOLOGY, nvidia_smi_topo_argv()))
    return planned
