"""Parsers for the text of single sysfs attributes. Each raises ValueError saying what was odd.

Formats come from the kernel (drivers/infiniband/core/sysfs.c, drivers/pci/pci-sysfs.c):
``state`` "4: ACTIVE", ``rate`` "400 Gb/sec (4X NDR)" (old kernels: "10 Gb/sec (4X)" with no
speed name for SDR; "2.5 Gb/sec (1X SDR)" with a half), ``lid`` "0x3a4", PCIe
``current_link_speed`` "16.0 GT/s PCIe" (older kernels: "16 GT/s", "8 GT/s").
"""

from __future__ import annotations

import re
from typing import Tuple

from ibdiag.model import LinkRate

_ENUM = re.compile(r"^\s*(\d+)\s*:\s*(.*?)\s*$")
_RATE = re.compile(
    r"^\s*(?P<gbps>\d+(?:\.\d+)?)\s*Gb/sec"
    r"(?:\s*\(\s*(?P<lanes>\d+)X(?:\s+(?P<speed>[A-Za-z][A-Za-z0-9]*))?\s*\))?\s*$"
)
_U64_MAX = 2**64 - 1
_PCIE_SPEED = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*GT/s(?:\s+PCIe)?\s*$")


def parse_enum(text: str) -> Tuple[int, str]:
    """ "4: ACTIVE" -> (4, "ACTIVE"); the form of state, phys_state and node_type."""
    match = _ENUM.match(text)
    if not match:
        raise ValueError(f"expected 'N: NAME', got {text!r}")
    return int(match.group(1)), match.group(2)


def parse_rate(text: str) -> LinkRate:
    """ "400 Gb/sec (4X NDR)" -> 400 Gb/s, 4 lanes, NDR. Also 1X/2X/12X, HDR100, XDR forms."""
    match = _RATE.match(text)
    if not match:
        raise ValueError(f"expected 'N Gb/sec (NX SPEED)', got {text!r}")
    lanes = match.group("lanes")
    return LinkRate.model_construct(
        raw=text.strip(),
        gbps=float(match.group("gbps")),
        lanes=int(lanes) if lanes else None,
        speed=match.group("speed").upper() if match.group("speed") else None,
    )


def parse_int(text: str) -> int:
    """A decimal integer such as a counter, mtu or numa_node ("-1" allowed)."""
    stripped = text.strip()
    if not re.fullmatch(r"-?[0-9]+", stripped):
        raise ValueError(f"not a number: {text!r}")
    return int(stripped)


def parse_counter(text: str) -> int:
    """A counter value: a non-negative decimal integer (up to 64 bits)."""
    value = parse_int(text)
    if value < 0:
        raise ValueError(f"negative counter: {text!r}")
    if value > _U64_MAX:
        raise ValueError(f"wider than 64 bits: {text!r}")
    return value


def parse_hex_or_int(text: str) -> int:
    """ "0x3a4" or "932": how lid and sm_lid are written."""
    stripped = text.strip()
    try:
        value = int(stripped, 16) if stripped.lower().startswith("0x") else parse_int(stripped)
    except ValueError:
        raise ValueError(f"not a number: {text!r}") from None
    if value < 0:
        raise ValueError(f"negative: {text!r}")
    return value


def parse_pcie_speed(text: str) -> float:
    """ "16.0 GT/s PCIe" or "16 GT/s" -> 16.0 (GT/s). "Unknown" (link down) is an error."""
    match = _PCIE_SPEED.match(text)
    if not match:
        raise ValueError(f"expected 'N GT/s', got {text!r}")
    return float(match.group(1))


def parse_pcie_width(text: str) -> int:
    """ "16" (or "x16") -> 16 lanes."""
    stripped = text.strip().lower()
    width = parse_int(stripped[1:] if stripped.startswith("x") else stripped)
    if width < 0:
        raise ValueError(f"negative width: {text!r}")
    return width
