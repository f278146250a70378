"""``ibstat`` and ``ibstatus`` (infiniband-diags) output -> devices and ports.

``ibstat``::

    CA 'mlx5_0'
            CA type: MT4129
            Number of ports: 1
            Firmware version: 28.41.1000
            Node GUID: 0x58a2e10300a7820e
            Port 1:
                    State: Active
                    Physical state: LinkUp
                    Rate: 400
                    Base lid: 128
                    SM lid: 1
                    Link layer: InfiniBand

(tabs or spaces). ``Rate`` is in Gb/s ("2.5" for 1X SDR), lids are decimal.

``ibstatus`` (a shell script over sysfs)::

    Infiniband device 'mlx5_ib0' port 1 status:
            default gid:     fe80:0000:0000:0000:0015:5dff:fd33:ff0b
            base lid:        0x96
            sm lid:          0x11c
            state:           4: ACTIVE
            phys state:      5: LinkUp
            rate:            200 Gb/sec (4X HDR)
            link_layer:      InfiniBand

Lids are hex there; ``state``/``phys state`` keep the name ("ACTIVE", "LinkUp") with the number
in ``state_num``/``phys_state_num``; ``rate`` is the Gb/s number and ``rate_text`` the string.

``parse_ibstat`` / ``parse_ibstatus`` return the lists; the ``*_report`` variants also give the
``problems`` (unparseable lines) and ``error`` (``ibpanic: ... can't get CA list``, ``ibwarn``,
``iberror`` lines). Nothing raises on odd input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple, Union

from ibdiag.families._text import as_text, cap, quote, trim

__all__ = [
    "IbstatCA",
    "IbstatPort",
    "IbstatReport",
    "IbstatusPort",
    "IbstatusReport",
    "parse_ibstat",
    "parse_ibstat_report",
    "parse_ibstatus",
    "parse_ibstatus_report",
]


_CA_LINE = re.compile(r"^CA\s+'(?P<name>[^']*)'\s*$")
_PORT = re.compile(r"^Port\s+(?P<port>\d+)\s*:\s*$")
_KEY_VALUE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z _/-]*?)\s*:\s*(?P<value>.*?)\s*$")
_ERROR = re.compile(r"^(?:ibpanic|ibwarn)\b|\biberror\b|^ibstat(?:us)?: ", re.IGNORECASE)
_STATUS_HEADER = re.compile(
    r"^Infiniband device\s+'(?P<device>[^']*)'\s+port\s+(?P<port>\d+)\s+status\s*:\s*$",
    re.IGNORECASE,
)
_ENUM = re.compile(r"^(?P<num>\d+)\s*:\s*(?P<name>.*?)\s*$")
_RATE = re.compile(r"^(?P<gbps>\d+(?:\.\d+)?)(?:\s*Gb/sec.*)?$")


@dataclass(frozen=True)
class IbstatPort:
    state: Optional[str]  # "Active", "Down", "Initializing", "Armed"
    physical_state: Optional[str]  # "LinkUp", "Polling", "Disabled", ...
    rate: Optional[float]  # Gb/s
    link_layer: Optional[str]  # "InfiniBand" / "Ethernet"
    base_lid: Optional[int]
    sm_lid: Optional[int]
    lmc: Optional[int] = None
    port_guid: Optional[str] = None
    capability_mask: Optional[str] = None


@dataclass(frozen=True)
class IbstatCA:
    name: str
    ca_type: Optional[str]
    firmware: Optional[str]
    node_guid: Optional[str]
    ports: Dict[int, IbstatPort]
    hardware_version: Optional[str] = None
    system_image_guid: Optional[str] = None
    number_of_ports: Optional[int] = None


@dataclass(frozen=True)
class IbstatReport:
    cas: List[IbstatCA]
    problems: List[str]
    error: Optional[str] = None


@dataclass(frozen=True)
class IbstatusPort:
    device: str
    port: int
    state: Optional[str]  # "ACTIVE", "DOWN", "INIT", "ARMED"
    phys_state: Optional[str]  # "LinkUp", "Polling", "Disabled", ...
    rate: Optional[float]  # Gb/s
    link_layer: Optional[str]
    state_num: Optional[int] = None
    phys_state_num: Optional[int] = None
    rate_text: Optional[str] = None  # "200 Gb/sec (4X HDR)"
    base_lid: Optional[int] = None
    sm_lid: Optional[int] = None
    default_gid: Optional[str] = None


@dataclass(frozen=True)
class IbstatusReport:
    ports: List[IbstatusPort]
    problems: List[str]
    error: Optional[str] = None


def parse_ibstat(text: Union[str, bytes, None]) -> List[IbstatCA]:
    return parse_ibstat_report(text).cas


def parse_ibstatus(text: Union[str, bytes, None]) -> List[IbstatusPort]:
    return parse_ibstatus_report(text).ports


class _CA:
    def __init__(self, name: str) -> None:
        self.name = name
        self.fields: Dict[str, str] = {}
        self.ports: Dict[int, Dict[str, str]] = {}


def parse_ibstat_report(text: Union[str, bytes, None]) -> IbstatReport:
    problems: List[str] = []
    errors: List[str] = []
    cas: List[_CA] = []
    ca: Optional[_CA] = None
    port: Optional[Dict[str, str]] = None
    for number, raw in enumerate(as_text(text).splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if _ERROR.search(line):
            errors.append(trim(line))
            continue
        match = _CA_LINE.match(line)
        if match:
            ca = _CA(match.group("name"))
            cas.append(ca)
            port = None
            continue
        match = _PORT.match(line)
        if match and ca is not None:
            number_ = int(match.group("port"))
            if number_ in ca.ports:
                problems.append(f"{ca.name}: port {number_} listed twice (line {number})")
            port = ca.ports.setdefault(number_, {})
            continue
        match = _KEY_VALUE.match(line)
        if match and ca is not None:
            key, value = match.group("key").lower(), match.group("value")
            target = port if port is not None and key not in _CA_KEYS else ca.fields
            target.setdefault(key, value)
            continue
        problems.append(f"unparseable line {number}: {quote(line)}")
    result = [_build_ca(ca, problems) for ca in cas]
    if not result and not errors:
        problems.append("no CA in ibstat output" if as_text(text).strip() else "empty output")
    return IbstatReport(cas=result, problems=cap(problems), error=_join(errors))


_CA_KEYS = frozenset(
    {
        "ca type",
        "number of ports",
        "firmware version",
        "hardware version",
        "node guid",
        "system image guid",
    }
)


def _build_ca(ca: _CA, problems: List[str]) -> IbstatCA:
    ports: Dict[int, IbstatPort] = {}
    for number, values in sorted(ca.ports.items()):
        where = f"{ca.name} port {number}"
        rate_text = values.get("rate")
        rate = None
        if rate_text is not None:
            match = _RATE.match(rate_text)
            if match:
                rate = float(match.group("gbps"))
            else:
                problems.append(f"{where}: unparseable Rate {quote(rate_text)}")
        ports[number] = IbstatPort(
            state=values.get("state") or None,
            physical_state=values.get("physical state") or None,
            rate=rate,
            link_layer=values.get("link layer") or None,
            base_lid=_int(values.get("base lid"), f"{where} Base lid", problems),
            sm_lid=_int(values.get("sm lid"), f"{where} SM lid", problems),
            lmc=_int(values.get("lmc"), f"{where} LMC", problems),
            port_guid=values.get("port guid") or None,
            capability_mask=values.get("capability mask") or None,
        )
    fields = ca.fields
    return IbstatCA(
        name=ca.name,
        ca_type=fields.get("ca type") or None,
        firmware=fields.get("firmware version") or None,
        node_guid=fields.get("node guid") or None,
        ports=ports,
        hardware_version=fields.get("hardware version") or None,
        system_image_guid=fields.get("system image guid") or None,
        number_of_ports=_int(fields.get("number of ports"), f"{ca.name} ports", problems),
    )


def parse_ibstatus_report(text: Union[str, bytes, None]) -> IbstatusReport:
    problems: List[str] = []
    errors: List[str] = []
    blocks: List[_StatusBlock] = []
    block: Optional[_StatusBlock] = None
    for number, raw in enumerate(as_text(text).splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if _ERROR.search(line):
            errors.append(trim(line))
            continue
        match = _STATUS_HEADER.match(line)
        if match:
            block = _StatusBlock(match.group("device"), int(match.group("port")))
            blocks.append(block)
            continue
        match = _KEY_VALUE.match(line)
        if match and block is not None:
            block.fields.setdefault(match.group("key").lower(), match.group("value"))
            continue
        problems.append(f"unparseable line {number}: {quote(line)}")
    ports = [_build_status(b, problems) for b in blocks]
    if not ports and not errors:
        problems.append("no device in ibstatus output" if as_text(text).strip() else "empty output")
    return IbstatusReport(ports=ports, problems=cap(problems), error=_join(errors))


class _StatusBlock:
    def __init__(self, device: str, port: int) -> None:
        self.device = device
        self.port = port
        self.fields: Dict[str, str] = {}


def _build_status(block: _StatusBlock, problems: List[str]) -> IbstatusPort:
    where = f"{block.device} port {block.port}"
    fields = block.fields
    state_num, state = _enum(fields.get("state"))
    phys_num, phys = _enum(fields.get("phys state"))
    rate_text = fields.get("rate") or None
    rate = None
    if rate_text is not None:
        match = _RATE.match(rate_text)
        if match:
            rate = float(match.group("gbps"))
        else:
            problems.append(f"{where}: unparseable rate {quote(rate_text)}")
    gid = fields.get("default gid") or None
    return IbstatusPort(
        device=block.device,
        port=block.port,
        state=state,
        phys_state=phys,
        rate=rate,
        link_layer=fields.get("link_layer") or fields.get("link layer") or None,
        state_num=state_num,
        phys_state_num=phys_num,
        rate_text=rate_text,
        base_lid=_int(fields.get("base lid"), f"{where} base lid", problems),
        sm_lid=_int(fields.get("sm lid"), f"{where} sm lid", problems),
        default_gid=None if gid is None or gid.lower() == "unknown" else gid,
    )


def _enum(text: Optional[str]) -> Tuple[Optional[int], Optional[str]]:
    """ "4: ACTIVE" -> (4, "ACTIVE"); a bare name is kept as the name."""
    if text is None or not text.strip():
        return None, None
    match = _ENUM.match(text.strip())
    if match:
        return int(match.group("num")), match.group("name") or None
    return None, text.strip()


def _int(text: Optional[str], what: str, problems: List[str]) -> Optional[int]:
    if text is None or not text.strip():
        return None
    value = text.strip()
    try:
        return int(value, 16) if value.lower().startswith("0x") else int(value)
    except ValueError:
        problems.append(f"{what}: not a number {quote(value)}")
        return None


def _join(errors: List[str]) -> Optional[str]:
    return "; ".join(errors[:3]) or None
