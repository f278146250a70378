"""The HTML report's system section and the bundle's manifest table: what a support engineer
reads first (distribution, kernel and its command line, platform, driver, OFED, and per HCA its
firmware, PSID and PCIe path), and what the support catalogue gathered, item by item.

Arranges what the Report holds (``facts["support_files"]`` and ``facts["support"]`` of
``ibdiag collect``; sysfs's identity for any report); decides nothing. The catalogue's ``never``
items come from the catalogue itself: static data, like the counter catalogue's tooltips.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ibdiag.facts.pcie import PcieChain
from ibdiag.facts.support import HcaFirmware, ItemStatus, SupportFiles, SupportInventory
from ibdiag.model import Device, Report, Snapshot

# The mlx5 driver modules the section names, in this order (modinfo's, else sysfs's version).
DRIVER_MODULES = ("mlx5_core", "mlx5_ib", "ib_core")


def system_facts(report: Report) -> List[Tuple[str, str]]:
    """(label, text) rows of the node: OS, kernel, command line, platform, driver, OFED, GPUs;
    a label with nothing known is left out."""
    snap = report.snapshot
    files = _fact(snap, "support_files", SupportFiles)
    inventory = _fact(snap, "support", SupportInventory)
    rows: List[Tuple[str, str]] = []
    if files is not None and files.os_release:
        release = files.os_release
        name = release.get("PRETTY_NAME") or " ".join(
            part for part in (release.get("NAME"), release.get("VERSION")) if part
        )
        if name:
            rows.append(("Distribution", name))
    kernel = snap.kernel_release or ""
    if files is not None and files.kernel_version:
        kernel = files.kernel_version if not kernel else f"{kernel} ({files.kernel_version})"
    if kernel:
        rows.append(("Kernel", kernel))
    if files is not None and files.cmdline:
        rows.append(("Kernel command line", files.cmdline))
    if files is not None and files.platform:
        rows.append(("Platform", platform_text(files.platform)))
    driver = driver_text(snap, inventory)
    if driver:
        rows.append(("Driver", driver))
    if inventory is not None:
        rows.append(("OFED / DOCA", inventory.ofed or ofed_missing(inventory)))
    if files is not None and files.module_parameters:
        rows.append(("Module parameters", parameters_text(files.module_parameters)))
    if snap.gpus is not None:
        rows.append(("NVIDIA GPUs", str(len(snap.gpus))))
    if files is not None and files.as_root is not None:
        rows.append(("Collected as", collector_text(files.collector_uid)))
    return rows


def collector_text(uid: Optional[int]) -> str:
    """``root`` or ``uid 1000: not root, so the root-only items (mstflint, mstconfig, lspci's
    capabilities, ethtool -m, sminfo, saquery) have no data``."""
    if uid == 0:
        return "root"
    return (
        f"uid {uid}: not root, so the root-only items (mstflint, mstconfig, lspci's "
        "capabilities, ethtool -m, sminfo, saquery) have no data"
    )


def platform_text(platform: Dict[str, str]) -> str:
    """``Dell Inc. PowerEdge XE9680 (board 0XYZ12), BIOS 1.4.4 of 05/12/2024``."""
    head = " ".join(v for v in (platform.get("sys_vendor"), platform.get("product_name")) if v)
    if platform.get("board_name"):
        head += f" (board {platform['board_name']})"
    if platform.get("bios_version"):
        head += f", BIOS {platform['bios_version']}"
        if platform.get("bios_date"):
            head += f" of {platform['bios_date']}"
    return head.strip(", ") or "unknown"


def driver_text(snap: Snapshot, inventory: Optional[SupportInventory]) -> str:
    """``mlx5_core 24.10-2.1.8 (OFED build: /lib/modules/.../updates/dkms/mlx5_core.ko)``, one per
    driver module; sysfs's version where modinfo was not run."""
    modules = {module.name: module for module in inventory.modules} if inventory else {}
    parts = []
    for name in DRIVER_MODULES:
        module = modules.get(name)
        if module is not None:
            kind = {True: "inbox", False: "OFED/DKMS build", None: "built where?"}[module.inbox]
            version = module.version or module.srcversion or "no version"
            parts.append(f"{name} {version} ({kind}: {module.filename or '?'})")
        elif snap.driver_versions and name in snap.driver_versions:
            parts.append(f"{name} {snap.driver_versions[name]}")
    return "; ".join(parts)


def ofed_missing(inventory: SupportInventory) -> str:
    """Why no OFED release is shown: ofed_info absent (an inbox driver, most likely) or failed."""
    row = next((row for row in inventory.rows if row.item == "ofed_info"), None)
    if row is None:
        return "not run"
    if row.status is ItemStatus.ABSENT:
        return "none (ofed_info is not installed: the distribution's inbox driver)"
    return f"unknown: ofed_info {row.status.value}" + (f" ({row.reason})" if row.reason else "")


def parameters_text(parameters: Dict[str, Dict[str, str]]) -> str:
    """``mlx5_core: prof_sel=2 debug_mask=0; ib_ipoib: ...`` (modules and parameters sorted)."""
    return "; ".join(
        f"{module}: " + " ".join(f"{name}={value}" for name, value in sorted(values.items()))
        for module, values in sorted(parameters.items())
    )


def hca_rows(report: Report) -> List[Dict[str, Any]]:
    """One row per HCA: ``hca``, ``model`` (hca_type and board_id), ``firmware`` (running, with
    the stored one when it differs), ``psid``, ``pending`` (a flashed firmware not running),
    ``sources``, ``pci`` (address, link, NUMA node), ``path`` (root port down to the HCA)."""
    snap = report.snapshot
    inventory = _fact(snap, "support", SupportInventory)
    firmware = {fw.hca: fw for fw in inventory.firmware} if inventory else {}
    return [_hca_row(dev, firmware.get(dev.name)) for dev in snap.devices]


def _hca_row(dev: Device, fw: Optional[HcaFirmware]) -> Dict[str, Any]:
    running = (fw.running if fw else None) or dev.fw_ver
    path = dev.facts.get("pcie_path")
    pci = dev.pci
    link = None
    if pci is not None and pci.current_link_speed is not None:
        link = f"{pci.current_link_speed:g} GT/s x{pci.current_link_width}"
        if pci.max_link_speed is not None:
            link += f" (max {pci.max_link_speed:g} GT/s x{pci.max_link_width})"
    return {
        "hca": dev.name,
        "model": " ".join(part for part in (dev.hca_type, dev.board_id) if part) or None,
        "firmware": running,
        "stored": fw.stored if fw is not None and fw.pending else None,
        "psid": fw.psid if fw else None,
        "security": fw.security if fw else None,
        "sources": ", ".join(["sysfs fw_ver", *fw.sources] if fw else ["sysfs fw_ver"]),
        "address": pci.address if pci is not None else None,
        "link": link,
        "numa": pci.numa_node if pci is not None else None,
        "path": " > ".join(path.path()) if isinstance(path, PcieChain) else None,
    }


def manifest_rows(report: Report) -> Dict[str, Any]:
    """The manifest table: ``rows`` (each item on each target: item, target, status, source,
    reason, duration_s, size), ``counts`` per status, and ``never``: (id, what, why) of what
    ibdiag does not run. Empty rows when the catalogue was not gathered (not a bundle)."""
    snap = report.snapshot
    rows = []
    for name, kind in (("support_files", SupportFiles), ("support", SupportInventory)):
        fact = _fact(snap, name, kind)
        if fact is not None:
            rows.extend(fact.rows)
    counts: Dict[str, int] = {}
    for row in rows:
        counts[row.status.value] = counts.get(row.status.value, 0) + 1
    order = [status.value for status in ItemStatus]
    never: List[Tuple[str, str, str]] = []
    if rows:
        from ibdiag.families.support.catalogue import load

        never = [(item.id, item.what, item.never or "") for item in load().of_kind("never")]
    return {
        "rows": rows,
        "counts": sorted(counts.items(), key=lambda pair: order.index(pair[0])),
        "never": never,
    }


def _fact(snap: Snapshot, name: str, kind: type) -> Any:
    found = snap.facts.get(name)
    return found if isinstance(found, kind) else None
