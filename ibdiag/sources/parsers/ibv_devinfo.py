"""``ibv_devinfo`` / ``ibv_devinfo -v`` (rdma-core) output -> devices and ports.

::

    hca_id: mlx5_0
            transport:                      InfiniBand (0)
            fw_ver:                         16.31.1014
            node_guid:                      f41d:6b03:006f:4743
            ...
            phys_port_cnt:                  1
                    port:   1
                            state:                  PORT_ACTIVE (4)
                            max_mtu:                4096 (5)
                            active_mtu:             1024 (3)
                            sm_lid:                 0
                            port_lid:               0
                            link_layer:             Ethernet

Tabs or spaces (older MLNX_OFED also prints a ``Device ports:`` line). ``-v`` adds many device
capability lines (some without a ``key: value`` shape, e.g. flag lists, ``Multi-Packet RQ is
not supported``, ``ooo_rc_caps  = 0x0``): those are device detail, not problems; only
``key: value`` pairs are kept, in ``fields``. Port ``state``/``phys_state`` keep the name
(``PORT_ACTIVE``, ``POLLING``) with the number in ``state_num``/``phys_state_num``;
``phys_state``, ``active_width`` and ``active_speed`` appear with ``-v`` only.

``parse_ibv_devinfo`` returns the list; ``parse_ibv_devinfo_report`` also gives ``problems``
(text outside any device) and ``error`` (``No IB devices found``, ``Failed to get IB devices
list``). Nothing raises on odd input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple, Union

from ibdiag.families._text import as_text, cap, quote, trim

__all__ = [
    "IbvDevice",
    "IbvDevinfoReport",
    "IbvPort",
    "parse_ibv_devinfo",
    "parse_ibv_devinfo_report",
]


_HCA = re.compile(r"^hca_id\s*:\s*(?P<name>\S+)\s*$")
_PORT = re.compile(r"^port\s*:\s*(?P<port>\d+)\s*$")
_KEY_VALUE = re.compile(r"^(?P<key>[A-Za-z_][\w \[\]]*?)\s*:\s*(?P<value>.*?)\s*$")
_ENUM = re.compile(r"^(?P<name>.*?)\s*\(\s*(?P<num>\d+)\s*\)\s*$")
_ERROR = re.compile(
    r"^(?:No IB devices found|Failed to |Couldn't |libibverbs: |ibv_devinfo: )", re.IGNORECASE
)


@dataclass(frozen=True)
class IbvPort:
    state: Optional[str]  # "PORT_ACTIVE", "PORT_DOWN", "PORT_INIT", "PORT_ARMED"
    phys_state: Optional[str]  # "LINK_UP", "POLLING", "DISABLED", ... (-v only)
    link_layer: Optional[str]  # "InfiniBand" / "Ethernet"
    state_num: Optional[int] = None
    phys_state_num: Optional[int] = None
    active_mtu: Optional[int] = None  # bytes (the "4096" of "4096 (5)")
    max_mtu: Optional[int] = None
    sm_lid: Optional[int] = None
    port_lid: Optional[int] = None
    active_width: Optional[str] = None  # "4X" (-v only)
    active_speed: Optional[str] = None  # "25.0 Gbps" (-v only)
    fields: Dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class IbvDevice:
    hca_id: str
    fw_ver: Optional[str]
    node_guid: Optional[str]
    ports: Dict[int, IbvPort]
    transport: Optional[str] = None
    sys_image_guid: Optional[str] = None
    vendor_id: Optional[str] = None
    vendor_part_id: Optional[str] = None
    hw_ver: Optional[str] = None
    board_id: Optional[str] = None
    phys_port_cnt: Optional[int] = None
    fields: Dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class IbvDevinfoReport:
    devices: List[IbvDevice]
    problems: List[str]
    error: Optional[str] = None


def parse_ibv_devinfo(text: Union[str, bytes, None]) -> List[IbvDevice]:
    return parse_ibv_devinfo_report(text).devices


class _Device:
    def __init__(self, name: str) -> None:
        self.name = name
        self.fields: Dict[str, str] = {}
        self.ports: Dict[int, Dict[str, str]] = {}


def parse_ibv_devinfo_report(text: Union[str, bytes, None]) -> IbvDevinfoReport:
    text = as_text(text)
    problems: List[str] = []
    errors: List[str] = []
    devices: List[_Device] = []
    device: Optional[_Device] = None
    port: Optional[Dict[str, str]] = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        match = _HCA.match(line)
        if match:
            device = _Device(match.group("name"))
            devices.append(device)
            port = None
            continue
        if _ERROR.match(line):
            errors.append(trim(line))
            continue
        if device is None:
            problems.append(f"unparseable line {number} (before any hca_id): {quote(line)}")
            continue
        match = _PORT.match(line)
        if match:
            port_number = int(match.group("port"))
            if port_number in device.ports:
                problems.append(f"{device.name}: port {port_number} listed twice (line {number})")
            port = device.ports.setdefault(port_number, {})
            continue
        if line.lower().startswith("device ports"):
            continue
        match = _KEY_VALUE.match(line)
        if match is None:
            continue  # -v detail without key: value shape (flag lists, "... not supported")
        key, value = match.group("key").strip(), match.group("value")
        (port if port is not None else device.fields).setdefault(key, value)
    result = [_build(device, problems) for device in devices]
    if not result and not errors:
        problems.append("no hca_id in ibv_devinfo output" if text.strip() else "empty output")
    return IbvDevinfoReport(
        devices=result, problems=cap(problems), error="; ".join(errors[:3]) or None
    )


def _build(device: _Device, problems: List[str]) -> IbvDevice:
    ports: Dict[int, IbvPort] = {}
    for number, values in sorted(device.ports.items()):
        where = f"{device.name} port {number}"
        state, state_num = _enum(values.get("state"))
        phys, phys_num = _enum(values.get("phys_state"))
        active_mtu, _ = _enum(values.get("active_mtu"))
        max_mtu, _ = _enum(values.get("max_mtu"))
        width, _ = _enum(values.get("active_width"))
        speed, _ = _enum(values.get("active_speed"))
        ports[number] = IbvPort(
            state=state,
            phys_state=phys,
            link_layer=values.get("link_layer") or None,
            state_num=state_num,
            phys_state_num=phys_num,
            active_mtu=_int(active_mtu, f"{where} active_mtu", problems),
            max_mtu=_int(max_mtu, f"{where} max_mtu", problems),
            sm_lid=_int(values.get("sm_lid"), f"{where} sm_lid", problems),
            port_lid=_int(values.get("port_lid"), f"{where} port_lid", problems),
            active_width=width,
            active_speed=speed,
            fields=dict(values),
        )
    fields = device.fields
    transport, _ = _enum(fields.get("transport"))
    return IbvDevice(
        hca_id=device.name,
        fw_ver=fields.get("fw_ver") or None,
        node_guid=fields.get("node_guid") or None,
        ports=ports,
        transport=transport,
        sys_image_guid=fields.get("sys_image_guid") or None,
        vendor_id=fields.get("vendor_id") or None,
        vendor_part_id=fields.get("vendor_part_id") or None,
        hw_ver=fields.get("hw_ver") or None,
        board_id=fields.get("board_id") or None,
        phys_port_cnt=_int(fields.get("phys_port_cnt"), f"{device.name} phys_port_cnt", problems),
        fields=dict(fields),
    )


def _enum(text: Optional[str]) -> Tuple[Optional[str], Optional[int]]:
    """ "PORT_ACTIVE (4)" -> ("PORT_ACTIVE", 4); "4X" -> ("4X", None)."""
    if text is None or not text.strip():
        return None, None
    match = _ENUM.match(text.strip())
    if match and match.group("name"):
        return match.group("name"), int(match.group("num"))
    return text.strip(), None


def _int(text: Optional[str], what: str, problems: List[str]) -> Optional[int]:
    if text is None or not text.strip():
        return None
    value = text.strip()
    try:
        return int(value, 16) if value.lower().startswith("0x") else int(value)
    except ValueError:
        problems.append(f"{what}: not a number {quote(value)}")
        return None
