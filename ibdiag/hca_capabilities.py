"""Which HCA model a device is, and what it can do: a declarative table, no I/O.

A device is identified by the ``hca_type`` its driver reports in sysfs (mlx4/mlx5: "MT<PCI
device id in decimal>") or, when that is missing or anonymised, by its PCI device id (sysfs
``device/device``). ``max_ib_speed`` is the fastest InfiniBand per-lane speed the card
supports; a port below it warns (the fabric may be slower on purpose: set --expect-rate then).
Ethernet-only parts (ConnectX-4 Lx, -6 Dx, -6 Lx) have no InfiniBand speed. QDR-only
ConnectX-3 SKUs exist (MCX353A-QCBT): on those, --expect-rate 40 silences the warning.

Sources: NVIDIA ConnectX product briefs; PCI ids from the pci.ids database (vendor 15b3).
"""

from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Tuple

from ibdiag.model import Device, LinkRate

SPEED_ORDER: Tuple[str, ...] = ("SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR")


class HcaModel(NamedTuple):  # immutable; a tenth of a frozen dataclass's cost to make
    name: str
    hca_types: Tuple[str, ...]
    pci_device_ids: Tuple[str, ...]
    max_ib_speed: Optional[str] = None  # None: an Ethernet-only part


MODELS: Tuple[HcaModel, ...] = (
    HcaModel("ConnectX-3", ("MT4099",), ("0x1003",), "FDR"),
    HcaModel("ConnectX-3 Pro", ("MT4103",), ("0x1007",), "FDR"),
    HcaModel("Connect-IB", ("MT4113",), ("0x1011",), "FDR"),
    HcaModel("ConnectX-4", ("MT4115",), ("0x1013",), "EDR"),
    HcaModel("ConnectX-4 Lx", ("MT4117",), ("0x1015",)),
    HcaModel("ConnectX-5", ("MT4119",), ("0x1017",), "EDR"),
    HcaModel("ConnectX-5 Ex", ("MT4121",), ("0x1019",), "EDR"),
    HcaModel("ConnectX-6", ("MT4123",), ("0x101b",), "HDR"),
    HcaModel("ConnectX-6 Dx", ("MT4125",), ("0x101d",)),
    HcaModel("ConnectX-6 Lx", ("MT4127",), ("0x101f",)),
    HcaModel("ConnectX-7", ("MT4129",), ("0x1021",), "NDR"),
    HcaModel("ConnectX-8", ("MT4131",), ("0x1023",), "XDR"),
    HcaModel("BlueField-2", ("MT41686",), ("0xa2d6",), "HDR"),
    HcaModel("BlueField-3", ("MT41692",), ("0xa2dc",), "NDR"),
)

# Virtual functions (SR-IOV) of the same parts (pci.ids, vendor 15b3): ConnectX-3, Connect-IB,
# ConnectX-4, -4 Lx, -5, -5 Ex, -6, and the "ConnectX Family mlx5Gen Virtual Function" of
# ConnectX-6 Dx and later; mlx4/mlx5 report their hca_type as "MT<device id in decimal>".
VF_PCI_DEVICE_IDS: Tuple[str, ...] = (
    "0x1004", "0x1012", "0x1014", "0x1016", "0x1018", "0x101a", "0x101c", "0x101e",
)  # fmt: skip
VF_HCA_TYPES: Tuple[str, ...] = tuple(f"MT{int(pci_id, 16)}" for pci_id in VF_PCI_DEVICE_IDS)

_BY_HCA_TYPE: Dict[str, HcaModel] = {key: m for m in MODELS for key in m.hca_types}
_BY_PCI_ID: Dict[str, HcaModel] = {key: m for m in MODELS for key in m.pci_device_ids}


def identify(device: Device) -> Optional[HcaModel]:
    """The model from hca_type, else from the PCI device id; None when neither is known."""
    if device.hca_type and device.hca_type.strip().upper() in _BY_HCA_TYPE:
        return _BY_HCA_TYPE[device.hca_type.strip().upper()]
    if device.pci and device.pci.device_id:
        return _BY_PCI_ID.get(device.pci.device_id.strip().lower())
    return None


def is_virtual_function(device: Device) -> bool:
    """Whether the device is an SR-IOV virtual function (by its hca_type, else its PCI device
    id): a VF has no subnet management agent of its own to send SMPs to the far end with, and
    often no PMA (sysfs ``N/A (no PMA)``)."""
    if device.hca_type and device.hca_type.strip().upper() in VF_HCA_TYPES:
        return True
    return bool(device.pci and (device.pci.device_id or "").strip().lower() in VF_PCI_DEVICE_IDS)


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
    for name in sorted(SPEED_ORDER, key=len, reverse=True):  # FDR10 before FDR
        if speed.upper().startswith(name):
            return SPEED_ORDER.index(name)
    return None


def below_capability(model: HcaModel, rate: LinkRate) -> bool:
    """True when the port runs a slower per-lane speed than the model supports."""
    have, best = speed_rank(rate.speed), speed_rank(model.max_ib_speed)
    return have is not None and best is not None and have < best
