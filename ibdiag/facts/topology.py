"""The GPU <-> HCA placement ``nvidia-smi topo -m`` prints: ``Snapshot.gpu_topology``.

Healthy, for GPUDirect RDMA: every GPU has its own HCA one PCIe switch away (``PIX`` or
``PXB``: the rails of DGX and ND-series nodes), and that HCA sits on the GPU's NUMA node. A GPU
whose nearest HCA is ``PHB``/``NODE``/``SYS`` away sends RDMA traffic through the CPU.

The matrix is kept as its GPU <-> NIC cells (NICs by their real names, the ``NIC Legend``
applied), with what the interpreter derived from it once: the one-to-one rail pairing (which
the loopback tests also use to pick each HCA's ``--use_cuda`` GPU) and each GPU's nearest NIC.
"""

from typing import Dict, List, Optional

from pydantic import Field

from ibdiag.facts._base import Fact
from ibdiag.facts.outcome import RunOutcome
from ibdiag.roles import RoleField


class GpuNic(Fact):
    """One GPU <-> NIC cell of the matrix: ``GPU0``, ``mlx5_0``, ``PIX``."""

    gpu: str  # as nvidia-smi names it: GPU0, GPU1, ...
    nic: str  # the RDMA device name (legend applied), or NIC<n> when the legend was missing
    link: str  # PIX, PXB, PHB, NODE, SYS (SOC on old drivers), NV<n>

    @property
    def gpu_index(self) -> Optional[int]:
        """3 for ``GPU3`` (the ``--use_cuda`` index); None for another name."""
        digits = self.gpu[len("GPU") :] if self.gpu.startswith("GPU") else ""
        return int(digits) if digits.isdigit() else None


class GpuTopology(Fact):
    """What ``nvidia-smi topo -m`` said (role ``gpu-topology nvidia-smi``).

    ``failure``: the run gave no usable output (not installed, timed out, exited non-zero: its
    ``CommandRun.failure()``); nothing else is filled then. ``error``: nvidia-smi printed its
    own failure (no driver, NVML version mismatch, no devices). ``problems``: what the parser
    could not make sense of (capped).
    """

    role: RoleField
    failure: Optional[str] = None
    error: Optional[str] = None
    gpus: List[str] = Field(default_factory=list)  # GPU0, GPU1, ... in column order
    nics: List[str] = Field(default_factory=list)  # column order
    links: List[GpuNic] = Field(default_factory=list)  # every GPU <-> NIC cell
    numa_affinity: Dict[str, Optional[int]] = Field(default_factory=dict)  # None: N/A
    rails: List[GpuNic] = Field(default_factory=list)  # each GPU's own PIX/PXB NIC, one-to-one
    unpaired_gpus: List[str] = Field(default_factory=list)  # no PIX/PXB NIC left for them
    nearest: List[GpuNic] = Field(default_factory=list)  # each GPU's closest NIC (ties: column)
    problems: List[str] = Field(default_factory=list)
    outcome: Optional[RunOutcome] = None  # what became of the run (None: a fact built by hand)

    def nearest_nic(self, gpu: str) -> Optional[GpuNic]:
        """The NIC closest to ``gpu`` (PIX < PXB < PHB < NODE < SYS), or None."""
        return next((cell for cell in self.nearest if cell.gpu == gpu), None)

    def rail_gpus(self) -> Dict[str, int]:
        """HCA name -> the index of its rail GPU (``--use_cuda``), for the rails whose GPU
        has an index."""
        return {cell.nic: cell.gpu_index for cell in self.rails if cell.gpu_index is not None}
