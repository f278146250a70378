"""Write an mlx5 hwmon device into a sysfs tree built by ``tests/sysfs_builder.py``, laid out as
``drivers/net/ethernet/mellanox/mlx5/core/hwmon.c`` registers it: on the HCA's PCI function
(``devices/pci0000:00/<BDF>/hwmon/hwmonN/``, reached as ``class/infiniband/<dev>/device/hwmon``),
``name`` = ``mlx5``, and for each channel ``tempK_{input,highest,crit,label}`` (millidegrees C)
plus the write-only ``tempK_reset_history``; ``class/hwmon/hwmonN`` links to it.

    write_hwmon(sys_root, "0000:10:00.0", ASIC, MODULE0)
"""

from __future__ import annotations

import os
from typing import Dict, Optional

# (label, input, highest, crit) in millidegrees, as a ConnectX-7 with an optical module shows:
# the labels are the firmware's names ("asic", "Module0"), crit the MTMP high threshold.
ASIC: Dict[str, Optional[str]] = {
    "label": "asic",
    "input": "47000",
    "highest": "52000",
    "crit": "105000",
}
MODULE0: Dict[str, Optional[str]] = {
    "label": "Module0",
    "input": "57000",
    "highest": "58000",
    "crit": "70000",
}


def write_hwmon(
    sys_root: str,
    pci_address: str,
    *channels: Dict[str, Optional[str]],
    name: str = "mlx5",
    index: Optional[int] = None,
) -> str:
    """Write the hwmon directory; each channel a dict of attribute -> text (None: the file is
    left out). Returns its path relative to ``sys_root``."""
    klass = os.path.join(str(sys_root), "class", "hwmon")
    if index is None:  # the next free hwmonN of this tree, as the hwmon class numbers them
        index = len(os.listdir(klass)) if os.path.isdir(klass) else 0
    pci = os.path.join(str(sys_root), "devices", "pci0000:00", pci_address)
    directory = os.path.join(pci, "hwmon", f"hwmon{index}")
    os.makedirs(directory, exist_ok=True)
    _write(os.path.join(directory, "name"), name)
    for number, channel in enumerate(channels, start=1):
        for attribute, text in channel.items():
            if text is not None:
                _write(os.path.join(directory, f"temp{number}_{attribute}"), text)
        _write(os.path.join(directory, f"temp{number}_reset_history"), "")
    os.makedirs(klass, exist_ok=True)
    link = os.path.join(klass, f"hwmon{index}")
    if not os.path.lexists(link):
        os.symlink(os.path.relpath(directory, klass), link)
    os.symlink(os.path.relpath(pci, directory), os.path.join(directory, "device"))
    return os.path.relpath(directory, str(sys_root))


def channel(**values: Optional[str]) -> Dict[str, Optional[str]]:
    """A channel like ``MODULE0`` with ``values`` replaced."""
    return {**MODULE0, **values}


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text + "\n" if text else "")
