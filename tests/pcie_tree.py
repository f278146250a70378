"""PCIe paths in a sysfs tree built by ``tests/sysfs_builder.py``, laid out as the kernel does:
HCAs and GPUs nested under their bridges (``devices/pci0000:00/<root port>/<switch up>/<switch
down>/<function>``), each function with ``aer_dev_{correctable,nonfatal,fatal}`` in the
multi-line format of ``drivers/pci/pcie/aer.c`` (``Documentation/ABI/testing/
sysfs-bus-pci-devices-aer_stats``), ``iommu_group`` -> ``kernel/iommu_groups/<N>`` with its
``type``, and ``bus/pci/devices/<BDF>`` linking to each.

    hcas = behind_switch(mlx5_node(2))     # each HCA under a root port and a PCIe switch
    write_node(root, hcas)
    write_path(root, hcas[0])              # AER files, bus links, IOMMU group
    write_gpu(root, switch_of(hcas[0]), "0000:19:00.0")
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional

from sysfs_builder import HcaSpec

# The names the kernel prints, per severity (aer_correctable_error_string,
# aer_uncorrectable_error_string in drivers/pci/pcie/aer.c), and the total's name.
CORRECTABLE = ("RxErr", "BadTLP", "BadDLLP", "Rollover", "Timeout", "NonFatalErr", "CorrIntErr",
               "HeaderOF")  # fmt: skip
UNCORRECTABLE = ("Undefined", "DLP", "SDES", "TLP", "FCP", "CmpltTO", "CmpltAbrt", "UnxCmplt",
                 "RxOF", "MalfTLP", "ECRC", "UnsupReq", "ACSViol", "UncorrIntErr", "BlockedTLP",
                 "AtomicOpBlocked", "TLPBlockedErr", "PoisonTLPBlocked")  # fmt: skip
FILES = {
    "correctable": ("aer_dev_correctable", CORRECTABLE, "TOTAL_ERR_COR"),
    "nonfatal": ("aer_dev_nonfatal", UNCORRECTABLE, "TOTAL_ERR_NONFATAL"),
    "fatal": ("aer_dev_fatal", UNCORRECTABLE, "TOTAL_ERR_FATAL"),
}


def aer_text(severity: str, **counts: int) -> str:
    """The kernel's text of one ``aer_dev_*`` file: every name with its count, then the total."""
    _, names, total = FILES[severity]
    lines = [f"{name} {counts.get(name, 0)}" for name in names]
    lines.append(f"{total} {sum(counts.values())}")
    return "\n".join(lines)


def behind_switch(hcas: List[HcaSpec]) -> List[HcaSpec]:
    """Each HCA moved under its own root port and a PCIe switch (upstream + downstream port):
    ``0000:00:0N.0/0000:0X:00.0/0000:0Y:00.0/<hca>``, the HCA renumbered on the bus below."""
    for index, hca in enumerate(hcas):
        bus = 0x10 * (index + 1)
        root, up, down = (
            f"0000:00:{index + 1:02x}.0",
            f"0000:{bus:02x}:00.0",
            f"0000:{bus + 1:02x}:00.0",
        )
        hca.pci_address = f"{root}/{up}/{down}/0000:{bus + 2:02x}:00.0"
    return hcas


def bridges_of(chain: str) -> List[str]:
    """The bridges' BDFs of a nested address, root port first."""
    return chain.split("/")[:-1]


def switch_of(hca: HcaSpec) -> str:
    """The nested path of the HCA's switch upstream port (where a sibling GPU goes)."""
    return "/".join(hca.pci_address.split("/")[:2])


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text + "\n")


def _link(link: str, target: str) -> None:
    os.makedirs(os.path.dirname(link), exist_ok=True)
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(os.path.relpath(target, os.path.dirname(link)), link)


def write_aer(directory: str, counts: Optional[Dict[str, Dict[str, int]]] = None) -> None:
    """``aer_dev_*`` of one function directory; ``counts``: severity -> name -> count."""
    for severity, (filename, _, _) in FILES.items():
        _write(
            os.path.join(directory, filename),
            aer_text(severity, **(counts or {}).get(severity, {})),
        )


def write_function(
    sys_root: str,
    chain: str,
    aer: Optional[Dict[str, Dict[str, int]]] = None,
    group: Optional[int] = None,
    group_type: Optional[str] = "identity",
) -> str:
    """The function at the nested ``chain`` (``0000:00:01.0/0000:10:00.0``): its AER files, its
    ``bus/pci/devices`` link, and (``group``) its IOMMU group. Returns its directory."""
    sys_root = str(sys_root)
    directory = os.path.join(sys_root, "devices", "pci0000:00", *chain.split("/"))
    os.makedirs(directory, exist_ok=True)
    if aer is not None:
        write_aer(directory, aer)
    _link(os.path.join(sys_root, "bus", "pci", "devices", chain.split("/")[-1]), directory)
    if group is not None:
        group_dir = os.path.join(sys_root, "kernel", "iommu_groups", str(group))
        os.makedirs(os.path.join(group_dir, "devices"), exist_ok=True)
        if group_type is not None:
            _write(os.path.join(group_dir, "type"), group_type)
        _link(os.path.join(directory, "iommu_group"), group_dir)
    return directory


def write_path(
    sys_root: str,
    hca: HcaSpec,
    aer: Optional[Dict[str, Dict[str, Dict[str, int]]]] = None,
    group: int = 40,
    group_type: Optional[str] = "identity",
) -> None:
    """The HCA's function and every bridge above it: AER files (``aer``: BDF -> severity ->
    name -> count; every other function clean), bus links, and the HCA's IOMMU group."""
    parts = hca.pci_address.split("/")
    for depth in range(1, len(parts) + 1):
        chain = "/".join(parts[:depth])
        bdf = parts[depth - 1]
        is_hca = depth == len(parts)
        write_function(
            sys_root, chain, (aer or {}).get(bdf, {}),
            group=group if is_hca else None, group_type=group_type,
        )  # fmt: skip


def write_gpu(
    sys_root: str, parent: str, bdf: str, group: int = 80, group_type: Optional[str] = "identity"
) -> str:
    """An NVIDIA H100 (3D controller) at ``bdf`` below the nested ``parent`` (a switch upstream
    port: the GPU gets its own downstream port, ``<bus>:01.0`` style). Returns the nested chain
    of its downstream port."""
    bus = int(bdf.split(":")[1], 16)
    down = f"0000:{bus - 1:02x}:01.0"
    port_chain = f"{parent}/{down}"
    write_function(sys_root, port_chain, {})
    directory = write_function(
        sys_root, f"{port_chain}/{bdf}", {}, group=group, group_type=group_type
    )
    for name, value in (("vendor", "0x10de"), ("device", "0x2330"), ("class", "0x030200"),
                        ("numa_node", "0")):  # fmt: skip
        _write(os.path.join(directory, name), value)
    return port_chain
