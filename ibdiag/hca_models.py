"""Which HCA model a device is, and what it can do, from the table in data/hca_models.toml."""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
from typing import Dict, Optional, Tuple

from ibdiag.model import Device, LinkRate

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.9/3.10
    import tomli as tomllib

_TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "hca_models.toml")


@dataclasses.dataclass(frozen=True)
class HcaModel:
    name: str
    max_ib_speed: Optional[str]  # None: an Ethernet-only part


@dataclasses.dataclass(frozen=True)
class _Table:
    speed_order: Tuple[str, ...]
    by_hca_type: Dict[str, HcaModel]
    by_pci_id: Dict[str, HcaModel]


@functools.cache
def _table() -> _Table:
    with open(_TABLE, "rb") as handle:
        data = tomllib.load(handle)
    by_hca_type: Dict[str, HcaModel] = {}
    by_pci_id: Dict[str, HcaModel] = {}
    for entry in data["model"]:
        model = HcaModel(name=entry["name"], max_ib_speed=entry.get("max_ib_speed"))
        by_hca_type.update({key.upper(): model for key in entry["hca_types"]})
        by_pci_id.update({key.lower(): model for key in entry["pci_device_ids"]})
    return _Table(tuple(data["speed_order"]), by_hca_type, by_pci_id)


def identify(device: Device) -> Optional[HcaModel]:
    """The model from hca_type, else from the PCI device id; None when neither is known."""
    table = _table()
    if device.hca_type and device.hca_type.strip().upper() in table.by_hca_type:
        return table.by_hca_type[device.hca_type.strip().upper()]
    if device.pci and device.pci.device_id:
        return table.by_pci_id.get(device.pci.device_id.strip().lower())
    return None


def model_key(device: Device) -> str:
    """A name to group "the same kind of HCA" by: the model, else whatever the driver says."""
    model = identify(device)
    if model is not None:
        return model.name
    if device.hca_type:
        return device.hca_type
    if device.pci and device.pci.device_id:
        return f"PCI device {device.pci.device_id}"
    return "unknown HCA model"


def speed_rank(speed: Optional[str]) -> Optional[int]:
    """Position of a per-lane speed in SDR..XDR; HDR100-style names rank as their base speed."""
    if speed is None:
        return None
    order = _table().speed_order
    for name in sorted(order, key=len, reverse=True):  # FDR10 before FDR
        if speed.upper().startswith(name):
            return order.index(name)
    return None


def below_capability(model: HcaModel, rate: LinkRate) -> bool:
    """True when the port runs a slower per-lane speed than the model supports."""
    have, best = speed_rank(rate.speed), speed_rank(model.max_ib_speed)
    return have is not None and best is not None and have < best
