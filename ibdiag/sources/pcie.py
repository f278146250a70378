"""Read the PCIe path of each HCA and NVIDIA GPU from sysfs: AER counts and IOMMU domain.

Layout read (relative to the sysfs root; level quick, files only):

    class/infiniband/<dev>/device                   -> devices/pci0000:00/0000:00:01.0/0000:01:00.0
    class/infiniband/<dev>/device/.., /../.., ...    the bridges above it (names only)
    class/infiniband/<dev>/device/aer_dev_{correctable,nonfatal,fatal}
    class/infiniband/<dev>/device/iommu_group       -> kernel/iommu_groups/<N>
    kernel/iommu_groups/<N>/type                    identity, DMA, DMA-FQ, blocked, unmanaged
    bus/pci/devices/<bridge>/aer_dev_*              each bridge's AER counts
    bus/pci/devices/<gpu>/..., /iommu_group          each GPU's bridges and IOMMU group

The bridges are found by naming the directory each ``..`` of the function's resolved path
lands in (``SysfsReader.realname``), up to the first name that is not a PCI address (the host
bridge, ``pci0000:00``): no file is read through a ``..`` (a bundle stores none), and the links
``realname`` resolves are recorded, so a bundle replays the same path. Each bridge's files are
read at ``bus/pci/devices/<BDF>``.

Facts are built with ``model_construct``: every value here is typed by this module, and
validating would build the models' schemas on the prolog's path (tens of ms on first use).

Cost per HCA: one link name per level (three or four on a server, five or six behind a PCIe
switch), three AER files per function, one ``iommu_group`` name and one ``type``.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Tuple

from ibdiag.facts._base import Fact
from ibdiag.facts.pcie import (
    SEVERITIES,
    FunctionKind,
    GpuPaths,
    PcieChain,
    PcieFunction,
    PciePath,
)
from ibdiag.sources.names import shown

BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", re.IGNORECASE)
MAX_DEPTH = 16  # PCIe allows deep trees; a longer chain is a loop or a hostile capture
AER_FILES = {
    "correctable": ("aer_dev_correctable", "TOTAL_ERR_COR"),
    "nonfatal": ("aer_dev_nonfatal", "TOTAL_ERR_NONFATAL"),
    "fatal": ("aer_dev_fatal", "TOTAL_ERR_FATAL"),
}
MAX_AER_LINES = 64  # the kernel prints about 20 names per severity
NO_AER = "no AER statistics (kernel without CONFIG_PCIEAER, or AER not supported here)"
NO_PATH = "no PCI function (virtual device or partial tree)"
_NAME = re.compile(r"^[A-Za-z0-9_]{1,40}$")


def device_facts(reader, device_path: str) -> Dict[str, Fact]:
    """The device's ``facts`` entry: ``{"pcie_path": PciePath}``; nothing when the device has
    no PCI function at all (``pci.link`` already says so)."""
    link = f"{device_path}/device"
    if not reader.exists(link):
        return {}
    return {"pcie_path": read_chain(reader, link, "hca", PciePath)}


def gpu_facts(reader, addresses: Sequence[str]) -> Dict[str, Fact]:
    """The node's ``facts`` entry ``{"pcie_gpus": GpuPaths}`` for the GPUs at ``addresses``
    (``Snapshot.gpus``); nothing when there are none."""
    if not addresses:
        return {}
    chains = [
        read_chain(reader, f"bus/pci/devices/{address}", "gpu", PcieChain) for address in addresses
    ]
    return {"pcie_gpus": GpuPaths.model_construct(gpus=chains)}


def read_chain(reader, link: str, kind: FunctionKind, model=PcieChain):
    """The function at ``link`` (a directory or a symlink to one) and every bridge above it."""
    name = reader.realname(link)
    if not BDF.match(name):
        return model.model_construct(unavailable=f"not a PCI function: '{shown(name)}'")
    function = read_function(reader, link, name.lower(), kind)
    bridges: List[PcieFunction] = []
    problems: List[str] = []
    up = link
    root = None
    for _ in range(MAX_DEPTH):
        up = f"{up}/.."
        parent = reader.realname(up)
        if not BDF.match(parent):
            root = shown(parent) if parent else None
            break
        bdf = parent.lower()
        bridges.append(read_function(reader, f"bus/pci/devices/{bdf}", bdf, "bridge"))
    else:
        problems.append(f"more than {MAX_DEPTH} bridges above {function.bdf}: the rest not read")
    return model.model_construct(function=function, bridges=bridges, root=root, problems=problems)


def read_function(reader, directory: str, bdf: str, kind: FunctionKind) -> PcieFunction:
    """One function's AER counts, and (not for a bridge) its IOMMU group and domain type."""
    problems: List[str] = []
    aer: Dict[str, Dict[str, int]] = {}
    missing = 0
    for severity in SEVERITIES:
        filename, total_name = AER_FILES[severity]
        text, problem = reader.read_text(f"{directory}/{filename}")
        if problem == "missing":
            missing += 1
            continue
        if problem is not None:
            problems.append(f"{filename}: {problem}")
            continue
        counts, why = parse_aer(text or "", total_name)
        if counts is None:
            problems.append(f"{filename}: {why}")
        else:
            aer[severity] = counts
    group = group_type = None
    if kind != "bridge":
        group, group_type = read_iommu(reader, directory, problems)
    return PcieFunction.model_construct(
        bdf=bdf,
        kind=kind,
        aer=aer,
        aer_unavailable=NO_AER if missing == len(SEVERITIES) else None,
        iommu_group=group,
        iommu_type=group_type,
        problems=problems,
    )


def parse_aer(text: str, total_name: str) -> Tuple[Optional[Dict[str, int]], Optional[str]]:
    """The kernel's ``aer_dev_*`` text -> ({name: count, "TOTAL": total}, None), or (None, why)
    when it is not that: each line ``<Name> <count>``, the last ``TOTAL_ERR_*``."""
    counts: Dict[str, int] = {}
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > MAX_AER_LINES:
        return None, f"{len(lines)} lines, not the kernel's AER statistics"
    for line in lines:
        parts = line.split()
        if len(parts) != 2 or not _NAME.match(parts[0]) or not parts[1].isdigit():
            return None, f"not '<name> <count>': '{shown(line.strip()[:60])}'"
        name = "TOTAL" if parts[0] == total_name else parts[0]
        counts[name] = int(parts[1])
    if "TOTAL" not in counts:
        return None, f"no {total_name} line"
    return counts, None


def read_iommu(reader, directory: str, problems: List[str]) -> Tuple[Optional[str], Optional[str]]:
    """(group number, domain type) of the function at ``directory``; (None, None) when it has
    no ``iommu_group`` (no IOMMU, or it is off)."""
    link = f"{directory}/iommu_group"
    if not reader.exists(link):
        return None, None
    group = reader.realname(link)
    if not group.isdigit():
        problems.append(f"iommu_group: not a group number: '{shown(group[:40])}'")
        return None, None
    text, problem = reader.read_text(f"kernel/iommu_groups/{group}/type")
    if problem == "missing":
        return group, None  # a kernel before 5.11 has no type file
    if problem is not None:
        problems.append(f"iommu_groups/{group}/type: {problem}")
        return group, None
    value = (text or "").strip()
    if not _NAME_TYPE.match(value):
        problems.append(f"iommu_groups/{group}/type: not a domain type: '{shown(value[:40])}'")
        return group, None
    return group, value


_NAME_TYPE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
