"""What checks iterate over: the node's devices and ports, minus those the thresholds ignore."""

from __future__ import annotations

from typing import Iterator, Tuple

from ibdiag.model import Device, Port, Snapshot
from ibdiag.thresholds import Thresholds

ACTIVE = 4  # port state 4: ACTIVE
LINK_UP = 5  # phys_state 5: LinkUp


def graded_devices(snapshot: Snapshot, thresholds: Thresholds) -> Iterator[Device]:
    """Devices not ignored by name, nor (with ``ignore_ethernet``) Ethernet-only NICs."""
    return (dev for dev in snapshot.devices if is_graded(dev, thresholds))


def is_graded(device: Device, thresholds: Thresholds) -> bool:
    return not thresholds.ignores(device.name) and not (
        thresholds.ignore_ethernet and is_ethernet_only(device)
    )


def is_ethernet_only(device: Device) -> bool:
    return bool(device.ports) and all(port.link_layer == "Ethernet" for port in device.ports)


def graded_ports(snapshot: Snapshot, thresholds: Thresholds) -> Iterator[Tuple[Device, Port]]:
    return ((dev, port) for dev in graded_devices(snapshot, thresholds) for port in dev.ports)


def evidence(owner_path: str, *attributes: str) -> list:
    """sysfs paths (relative to the sysfs root) a result was read from."""
    return [f"{owner_path}/{attribute}" for attribute in attributes]
