"""The PCIe path of an HCA (and of each NVIDIA GPU): AER error counts and IOMMU domain, from sysfs.

Where they come from (level quick, files only; ``ibdiag.sources.pcie``):

- ``aer_dev_correctable``, ``aer_dev_nonfatal``, ``aer_dev_fatal`` on each PCI function
  (kernel ``Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats``): one ``<name> <count>``
  per line (``RxErr 0``, ``BadTLP 0``, ...) and a last line ``TOTAL_ERR_COR`` /
  ``TOTAL_ERR_NONFATAL`` / ``TOTAL_ERR_FATAL``. Counted since boot (or the driver's probe); the
  ABI notes an error may be counted at the link's other end, so the bridges above the HCA are
  read too.
- ``iommu_group`` -> ``kernel/iommu_groups/<N>``, whose ``type`` is the group's default
  domain: ``identity`` (passthrough, ``iommu=pt``), ``DMA`` / ``DMA-FQ`` (translated: every DMA
  goes through the IOMMU's page tables), ``blocked``, ``unmanaged`` (assigned to a VM/VFIO).

Healthy: no fatal or non-fatal AER error increases; correctable ones rare; the IOMMU domain is
the one the site expects (passthrough on GPUDirect RDMA nodes). A function with no AER files
or no ``iommu_group`` is "not available", never a fault; text that is not the kernel's format
is a problem string on the function.
"""

from typing import ClassVar, Dict, List, Literal, Optional

from pydantic import Field

from ibdiag.facts._base import Fact

Severity = Literal["correctable", "nonfatal", "fatal"]
SEVERITIES = ("correctable", "nonfatal", "fatal")
FunctionKind = Literal["hca", "bridge", "gpu"]


class PcieFunction(Fact):
    """One PCI function on the path: the HCA or GPU itself, or a bridge above it.

    ``aer``: severity -> the kernel's per-error counts plus ``TOTAL`` (``{"fatal": {"TOTAL": 0,
    "DLP": 0, ...}}``); a severity whose file is missing is absent (``aer_unavailable`` says so
    when all three are), one that is garbage is absent with the why in ``problems``.
    ``iommu_group``: the group's number; ``iommu_type``: its ``type`` (None: no IOMMU group,
    or not read for bridges).
    """

    bdf: str  # 0000:01:00.0
    kind: FunctionKind
    aer: Dict[str, Dict[str, int]] = Field(default_factory=dict)
    aer_unavailable: Optional[str] = None
    iommu_group: Optional[str] = None
    iommu_type: Optional[str] = None
    problems: List[str] = Field(default_factory=list)

    def total(self, severity: str) -> Optional[int]:
        """The ``TOTAL_ERR_*`` of ``severity`` (None: not read)."""
        return self.aer.get(severity, {}).get("TOTAL")


class PcieChain(Fact):
    """A function and the bridges above it, nearest first (``bridges[0]`` is the port the
    function is cabled to; the last one the root port). ``root``: the host bridge's directory
    (``pci0000:00``); ``unavailable``: why the path could not be read."""

    function: Optional[PcieFunction] = None
    bridges: List[PcieFunction] = Field(default_factory=list)
    root: Optional[str] = None
    unavailable: Optional[str] = None
    problems: List[str] = Field(default_factory=list)

    def path(self) -> List[str]:
        """BDFs from the root port down to the function."""
        down = [bridge.bdf for bridge in reversed(self.bridges)]
        return down + ([self.function.bdf] if self.function is not None else [])


class PciePath(PcieChain, fact_name="pcie_path"):
    """The HCA's PCIe path (``Device.facts["pcie_path"]``), read at level quick."""

    FROM_FILES: ClassVar[bool] = True  # read from sysfs: kept when runs are reinterpreted


class GpuPaths(Fact, fact_name="pcie_gpus"):
    """Each NVIDIA GPU's PCIe path and IOMMU domain (``Snapshot.facts["pcie_gpus"]``): what
    ``pci.acs`` needs to find the bridges between a GPU and an HCA, and ``pci.iommu`` grades."""

    FROM_FILES: ClassVar[bool] = True

    gpus: List[PcieChain] = Field(default_factory=list)
    problems: List[str] = Field(default_factory=list)


def between(hca: PcieChain, gpu: PcieChain) -> List[str]:
    """The bridges peer traffic between the HCA and the GPU crosses below their common
    ancestor: the HCA's side first (nearest the common ancestor down to the HCA's own port),
    then the GPU's. Empty when they share no bridge (under different root ports the traffic
    goes through the root complex whatever ACS says) or a path is unknown."""
    if hca.function is None or gpu.function is None:
        return []
    mine, theirs = hca.path()[:-1], gpu.path()[:-1]  # the bridges, root port first
    shared = 0
    while shared < min(len(mine), len(theirs)) and mine[shared] == theirs[shared]:
        shared += 1
    if shared == 0:
        return []
    return mine[shared:] + theirs[shared:]
