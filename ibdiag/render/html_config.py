"""The HTML report's configuration table: per port, what the subnet manager and the kernel set
up - LID and SM LID, partition keys, the active MTU, the HCA's character devices - each row
coloured by the worst result of the configuration checks (``sm.address``, ``partition.pkeys``,
``link.mtu``, ``hca.char_devices``) on the port or its HCA.

Healthy reads as: a LID and the one SM LID every port shares, the site's partition keys on
every port, MTU 4096, a uverbs device for the HCA and a umad device for the port. These are
the faults that leave every port ACTIVE and every counter clean while jobs fail.

Arranges what the Report holds; decides nothing (the colours are the checks' statuses).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ibdiag.facts.char_devices import CharDevices
from ibdiag.facts.partitions import PKeyTable
from ibdiag.facts.partner import CABLE
from ibdiag.model import Device, Port, Report, Result, Snapshot
from ibdiag.render.html_status import findings, worst

CONFIG_CHECKS = ("sm.address", "partition.pkeys", "link.mtu", "hca.char_devices")


def config_rows(report: Report) -> List[Dict[str, Any]]:
    """One row per InfiniBand port: ``target``, ``status`` (the worst configuration result on
    the port, its cable or its HCA; "none"), ``findings`` and the cells' texts (None: not
    read)."""
    results: Dict[str, List[Result]] = {}
    for result in report.results:
        if result.check_id in CONFIG_CHECKS:
            results.setdefault(result.target.split(CABLE, 1)[0], []).append(result)
    snap = report.snapshot
    rows = []
    for dev in snap.devices:
        for port in dev.ports:
            if not port.is_infiniband:
                continue
            target = dev.target(port)
            found = results.get(target, []) + results.get(dev.name, [])
            rows.append(
                {
                    "target": target,
                    "status": worst(found),
                    "findings": findings(found),
                    "address": address_text(port),
                    "pkeys": pkeys_text(port),
                    "mtu": mtu_text(snap, dev, port),
                    "devices": devices_text(snap, dev, port),
                }
            )
    return rows


def address_text(port: Port) -> Optional[str]:
    """``LID 0x12, SM 0x1``."""
    if port.lid is None and port.sm_lid is None:
        return None
    lid = f"0x{port.lid:x}" if port.lid is not None else "?"
    sm = f"0x{port.sm_lid:x}" if port.sm_lid is not None else "?"
    return f"LID {lid}, SM {sm}"


def pkeys_text(port: Port) -> Optional[str]:
    """``0xffff 0x8001 (128 slots)``."""
    table = port.facts.get("pkeys")
    if not isinstance(table, PKeyTable):
        return None
    keys = " ".join(table.texts()) or "none"
    problems = f"; {len(table.problems)} unreadable" if table.problems else ""
    return f"{keys} ({table.size} slots{problems})"


def mtu_text(snap: Snapshot, dev: Device, port: Port) -> Optional[str]:
    """The active MTU ibv_devinfo lists for the port (``4096 (max 4096)``), and the far end's
    PortInfo MTUs where the far end was read (``switch port 2048, cap 2048``)."""
    parts = []
    listing = snap.inventory.ibv_devinfo if snap.inventory is not None else None
    for ca in listing.cas if listing is not None else ():
        for listed in ca.ports if ca.name == dev.name else ():
            if listed.number == port.number and listed.active_mtu is not None:
                best = f" (max {listed.max_mtu})" if listed.max_mtu is not None else ""
                parts.append(f"{listed.active_mtu}{best}")
    partner = port.partner
    info = partner.port_info if partner is not None else None
    if partner is not None and info is not None and (info.neighbor_mtu or info.mtu_cap):
        far = "switch port" if partner.is_switch else "far end"
        parts.append(f"{far} {info.neighbor_mtu or '?'}, cap {info.mtu_cap or '?'}")
    return "; ".join(parts) or None


def devices_text(snap: Snapshot, dev: Device, port: Port) -> Optional[str]:
    """``uverbs0, umad0``: the HCA's verbs devices and the port's MAD devices."""
    found = snap.facts.get("char_devices")
    if not isinstance(found, CharDevices):
        return None
    names = [d.name for d in found.serving("verbs", dev.name)]
    names += [d.name for d in found.serving("mad", dev.name, port.number)]
    names += [d.name for d in found.serving("issm", dev.name, port.number)]
    return ", ".join(names) or "none"
