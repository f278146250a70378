"""The ibstat family: the HCAs and ports infiniband-diags' ``ibstat`` lists (the umad/MAD stack's
view), cross-checked with sysfs and ibv_devinfo (``checks/driver_inventory.py``).

**What it plans** (level standard): ``ibstat`` (role ``inventory ibstat``), once.

**What it gives**: ``Snapshot.inventory.ibstat`` (``ibdiag.facts.inventory.Listing``), parsed
straight from the text by ``parse_ibstat``, with what became of the run (``Listing.outcome``); a run
that failed is not parsed (its output is an error message): ``Listing.unusable`` says why. The
reading is shared with ``ibdiag.families.ibv_devinfo`` (``ibdiag.families._listing``).

**The text**: ``ibstat``::

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

``parse_ibstat`` gives the ``Listing`` (its CAs, the ``problems`` - unparseable lines - and the
``error``: ``ibpanic: ... can't get CA list``, ``ibwarn``, ``iberror`` lines).
``parse_ibstatus`` / ``parse_ibstatus_report`` read ``ibstatus`` (which ibdiag does not run:
sysfs has the same) into its ports. Nothing raises on odd input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple, Union

from ibdiag import roles
from ibdiag.facts.inventory import ListedCA, ListedPort, Listing
from ibdiag.families._listing import Block, Dialect, ListingFamily, joined, read_blocks
from ibdiag.families._text import as_text, cap, number, output_lines, quote

SOURCE = "ibstat"
LEVEL = "standard"
ORDER = 20


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

# Keys of the CA itself (the rest under a "Port N:" header are the port's).
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
_IBSTAT = Dialect(_CA_LINE, _PORT, _KEY_VALUE, _ERROR, device_keys=_CA_KEYS)


def parse_ibstat(text: Union[str, bytes, None]) -> Listing:
    """The CAs ``ibstat`` listed, in its order (no role, no outcome: the family sets those)."""
    blocks, problems, errors = read_blocks(text, _IBSTAT)
    cas = [_ca(block, problems) for block in blocks]
    if not cas and not errors:
        problems.append("no CA in ibstat output" if as_text(text).strip() else "empty output")
    return Listing(cas=cas, problems=cap(problems), error=joined(errors))


def _ca(block: Block, problems: List[str]) -> ListedCA:
    ports = []
    for port_number, values in sorted(block.ports.items()):
        where = f"{block.name} port {port_number}"
        ports.append(
            ListedPort(
                number=port_number,
                state=values.get("state") or None,
                link_layer=values.get("link layer") or None,
                physical_state=values.get("physical state") or None,
                rate=_rate(values.get("rate"), f"{where}: unparseable Rate", problems),
                lid=number(values.get("base lid"), f"{where} Base lid", problems),
                sm_lid=number(values.get("sm lid"), f"{where} SM lid", problems),
                lmc=number(values.get("lmc"), f"{where} LMC", problems),
                port_guid=values.get("port guid") or None,
                capability_mask=values.get("capability mask") or None,
            )
        )
    fields = block.fields
    return ListedCA(
        name=block.name,
        firmware=fields.get("firmware version") or None,
        node_guid=fields.get("node guid") or None,
        ports=ports,
        number_of_ports=number(fields.get("number of ports"), f"{block.name} ports", problems),
        hardware_version=fields.get("hardware version") or None,
        system_image_guid=fields.get("system image guid") or None,
        ca_type=fields.get("ca type") or None,
    )


def _rate(text: Optional[str], what: str, problems: List[str]) -> Optional[float]:
    """Gb/s from "400" or "200 Gb/sec (4X HDR)"; a problem saying ``what`` when unreadable."""
    if text is None:
        return None
    match = _RATE.match(text)
    if match is None:
        problems.append(f"{what} {quote(text)}")
        return None
    return float(match.group("gbps"))


# -- ibstatus ----------------------------------------------------------------------------------


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


def parse_ibstatus(text: Union[str, bytes, None]) -> List[IbstatusPort]:
    return parse_ibstatus_report(text).ports


def parse_ibstatus_report(text: Union[str, bytes, None]) -> IbstatusReport:
    problems: List[str] = []
    errors: List[str] = []
    blocks: List[_StatusBlock] = []
    block: Optional[_StatusBlock] = None
    for line_number, line in output_lines(text, _ERROR, errors):
        match = _STATUS_HEADER.match(line)
        if match:
            block = _StatusBlock(match.group("device"), int(match.group("port")))
            blocks.append(block)
            continue
        match = _KEY_VALUE.match(line)
        if match and block is not None:
            block.fields.setdefault(match.group("key").lower(), match.group("value"))
            continue
        problems.append(f"unparseable line {line_number}: {quote(line)}")
    ports = [_build_status(b, problems) for b in blocks]
    if not ports and not errors:
        problems.append("no device in ibstatus output" if as_text(text).strip() else "empty output")
    return IbstatusReport(ports=ports, problems=cap(problems), error=joined(errors))


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
    gid = fields.get("default gid") or None
    return IbstatusPort(
        device=block.device,
        port=block.port,
        state=state,
        phys_state=phys,
        rate=_rate(rate_text, f"{where}: unparseable rate", problems),
        link_layer=fields.get("link_layer") or fields.get("link layer") or None,
        state_num=state_num,
        phys_state_num=phys_num,
        rate_text=rate_text,
        base_lid=number(fields.get("base lid"), f"{where} base lid", problems),
        sm_lid=number(fields.get("sm lid"), f"{where} sm lid", problems),
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


# plan: ``ibstat``, once; interpret: ``Snapshot.inventory.ibstat`` when it ran (module docstring).
_FAMILY = ListingFamily("ibstat", roles.IBSTAT, parse_ibstat)
plan = _FAMILY.plan
interpret = _FAMILY.interpret
