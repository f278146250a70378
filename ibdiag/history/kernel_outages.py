"""The kernel log's link down and link up lines as outages: a first run sees last night.

A node that has never run ibdiag, or has just rebooted into a prolog, has no samples; the kernel
log still says when a port's link went down and came back (mlx5's ``<netdev>: Link down`` /
``Link up``, the signatures ``link.down`` / ``link.up`` of ``ibdiag.families.kernel_log``, each
line attributed to its HCA there). Each down is paired with the next up of the same HCA into one
outage; a down with no up after it ends where the run found the port ACTIVE again (bounded: when
it came back is not known), or stays open when the port is still down.

Only lines with a time since boot count (the boot time dates them) and only those of the last
``window_s`` seconds before the Snapshot's time (24 h by default).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Dict, List, Optional

from ibdiag.facts.history import Outage, node_keys
from ibdiag.model import Device, Snapshot

KERNEL_WINDOW_S = 86400.0
_DOWN, _UP = "link.down", "link.up"


def kernel_outages(snapshot: Snapshot, window_s: float = KERNEL_WINDOW_S) -> List[Outage]:
    """The outages the kernel log shows for the Snapshot's HCAs (an HCA with more than one
    port is left out: the line does not say which port)."""
    log, booted = snapshot.kernel_log, snapshot.boot_time
    if log is None or booted is None:
        return []
    since = snapshot.collected_at - timedelta(seconds=window_s)
    devices = {dev.name: dev for dev in snapshot.devices if len(dev.ports) == 1}
    keys = node_keys((dev.name, dev.node_guid) for dev in snapshot.devices)
    opened: Dict[str, Outage] = {}
    found: List[Outage] = []
    for finding in log.findings:
        dev = devices.get(finding.device or "")
        if finding.signature not in (_DOWN, _UP) or dev is None or finding.seconds is None:
            continue
        at = booted + timedelta(seconds=finding.seconds)
        if finding.signature == _DOWN:
            if dev.name not in opened and at >= since:
                opened[dev.name] = _outage(dev, keys[dev.name], at, snapshot.boot_id)
        elif dev.name in opened:
            found.append(opened.pop(dev.name).model_copy(update={"end": at}))
    for name, outage in opened.items():
        found.append(_unfinished(outage, devices[name], snapshot))
    return sorted(found, key=lambda outage: outage.start)


def _outage(dev: Device, key: str, at: datetime, boot_id: Optional[str]) -> Outage:
    return Outage(
        node_guid=key,
        port=dev.ports[0].number,
        device=dev.name,
        start=at,
        source="kernel-log",
        boot_id=boot_id,
    )


def _unfinished(outage: Outage, dev: Device, snapshot: Snapshot) -> Outage:
    """A down the log never saw end: over by the run's time when the port is ACTIVE now."""
    if dev.ports[0].state == 4:
        return outage.model_copy(update={"end": snapshot.collected_at, "bounded": True})
    return outage
