"""The node around the HCAs, from files: NVIDIA GPUs on the PCI bus and loaded kernel modules.

GPUDirect RDMA needs the ``nvidia_peermem`` module (``nv_peer_mem`` before it) whenever NVIDIA
GPUs are present: without it NCCL silently stages every transfer through host memory (seed 004).
"""

from __future__ import annotations

from typing import Dict, List, Optional

from ibdiag.facts._base import Fact
from ibdiag.model import Pci, Problems
from ibdiag.sources import pcie
from ibdiag.sources import sysfs_values as parse
from ibdiag.sources.names import shown
from ibdiag.sources.sysfs import SysfsReader

NVIDIA_VENDOR = "0x10de"
_DISPLAY_CLASS_PREFIX = "0x03"  # PCI class 03: display controllers (VGA 0300, 3D 0302)


def read_nvidia_gpus(reader: SysfsReader, problems: Problems) -> List[Pci]:
    """Every NVIDIA display/3D controller under bus/pci/devices, with its NUMA node."""
    names, problem = reader.listdir("bus/pci/devices")
    if problem is not None:
        problems["bus/pci/devices"] = problem
    gpus = []
    for address in names:
        base = f"bus/pci/devices/{address}"
        vendor, _ = reader.read_text(f"{base}/vendor")
        pci_class, _ = reader.read_text(f"{base}/class")
        if (vendor or "").strip().lower() != NVIDIA_VENDOR:
            continue
        if not (pci_class or "").strip().lower().startswith(_DISPLAY_CLASS_PREFIX):
            continue  # NVIDIA bridges, audio, NVSwitch are not GPUs
        numa, _ = reader.read_text(f"{base}/numa_node")
        try:
            numa_node = parse.parse_int(numa) if numa else None
        except ValueError:
            numa_node = None
        device_id, _ = reader.read_text(f"{base}/device")
        gpus.append(
            Pci.model_construct(
                address=shown(address).lower(),
                vendor_id=NVIDIA_VENDOR,
                device_id=device_id.strip() if device_id else None,
                numa_node=numa_node,
                problems={},
            )
        )
    return gpus


def read_gpu_paths(reader: SysfsReader, gpus: Optional[List[Pci]]) -> Dict[str, Fact]:
    """The node's ``facts`` entry for the GPUs' PCIe paths and IOMMU domains
    (``{"pcie_gpus": GpuPaths}``, ``ibdiag.sources.pcie``): what ``pci.acs`` and ``pci.iommu``
    read about the GPUs. Nothing when no GPU was found (or GPUs were not collected)."""
    return pcie.gpu_facts(reader, [gpu.address for gpu in gpus or []])
