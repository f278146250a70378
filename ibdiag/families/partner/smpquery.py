"""``smpquery`` (infiniband-diags) output -> the far end of a cable (``ibdiag.families.partner``).

smpquery prints libibmad's field dumps, one ``Name:.....value`` per line, the dots padding the
name to column 33 (captures: ``tests/captures/ibsim-partner``)::

    # Node info: DR path slid 65535; dlid 65535; 0,1
    NodeType:........................Switch
    Guid:............................0x0000000000200000
    LocalPort:.......................1

    Node Description:...........MF0;leaf07:MQM8700/U1

    # Port info: DR path slid 65535; dlid 65535; 0,1 port 1
    Lid:.............................0
    CapMask:.........................0xc04a
                                    IsSM
    LinkWidthActive:.................4X
    LinkState:.......................Active
    LinkSpeedActive:.................2.5 Gbps
    LinkSpeedExtActive:..............53.125 Gbps
    LinkSpeedExtSupported:...........14.0625 Gbps or 25.78125 Gbps or 53.125 Gbps

The capability masks (``CapMask``, ``CapabilityMask2``) continue on tab-indented lines, one
capability name each. The values are libibmad's names (``libibmad/dump.c``):

- widths ``1X 4X 8X 12X 2X``; a set is joined by `` or `` and may end `` (IBA extension)``;
- ``LinkSpeedActive/Enabled/Supported``: ``2.5 Gbps`` (SDR), ``5.0 Gbps`` (DDR), ``10.0 Gbps``
  (QDR, and FDR10, which only Mellanox's MlnxExtPortInfo tells apart); ``Extended speed``:
  the extended field applies;
- ``LinkSpeedExt*``: ``14.0625 Gbps`` (FDR), ``25.78125 Gbps`` (EDR), ``53.125 Gbps`` (HDR),
  ``106.25 Gbps`` (NDR); ``No Extended Speed`` (active) or ``0`` (a set) for none, ``Extended
  link speeds disabled`` (enabled);
- ``LinkSpeedExt*2`` (newer libibmad, XDR): ``212.5 Gbps``; ``No Extended Speed 2`` or ``0``;
- anything else reads ``undefined (N)`` or ``?(N)``: kept out of the typed values, with a
  problem;
- ``NeighborMTU`` and ``MtuCap`` (``mad_dump_mtu``): ``256 512 1024 2048 4096`` bytes, else
  ``?(N)`` (a problem). ibsim answers ``2048`` for both on every port but a switch's port 0
  (``256`` / ``1024``).

The active speed is the highest field in use: the second extended one, else the extended one,
else the base one, as the IBA defines LinkSpeedExtActive to override LinkSpeedActive when it
is not 0. Names come out as sysfs names them (``4X``, ``HDR``), so both ends of a cable compare
directly with ``Port.rate``.

How smpquery fails (rc 255): ``smpquery: iberror: failed: operation nodeinfo: node info query
failed`` (no answer: a MAD timeout, a port beyond the cable), ``Failed to open 'mlx5_9' port
'1'`` with ``ibwarn: ... can't open UMAD port`` (no such HCA, or /dev/infiniband/umad* not
readable), ``can't resolve destination port``. Those lines become ``mad_error``.

Parsers never raise: garbage, binary junk, empty or truncated output give what could be read
plus ``problems``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple, Union

from ibdiag.facts.partner import PortInfo
from ibdiag.families._text import IB_TOOL_ERROR, as_text, cap, quote, trim

__all__ = [
    "SPEED_ORDER",
    "NodeDescResult",
    "NodeInfoResult",
    "parse_nodedesc",
    "parse_nodeinfo",
    "parse_portinfo",
]

WIDTHS = ("1X", "2X", "4X", "8X", "12X")
SPEED_ORDER = ("SDR", "DDR", "QDR", "FDR", "EDR", "HDR", "NDR", "XDR")
_BASE_SPEEDS = {"2.5 Gbps": "SDR", "5.0 Gbps": "DDR", "10.0 Gbps": "QDR"}
_EXT_SPEEDS = {
    "14.0625 Gbps": "FDR",
    "25.78125 Gbps": "EDR",
    "53.125 Gbps": "HDR",
    "106.25 Gbps": "NDR",
}
_EXT2_SPEEDS = {"212.5 Gbps": "XDR"}
# What a speed field prints for "none of this kind".
_NO_SPEED = {"No Extended Speed", "No Extended Speed 2", "Extended speed", "0"}
_DISABLED = "Extended link speeds disabled"
_MASKS = ("CapMask", "CapabilityMask2")  # fields whose capabilities follow on indented lines
_NODE_DESC = "Node Description"

# "Guid:............................0x0000000000200000" (dots optional: one after a long name)
_FIELD = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9_ ]*?):(?P<value>.*)$")
_HEADER_PORT = re.compile(r"\bport\s+(\d+)\s*$")
_CAPABILITY = re.compile(r"^Is[A-Za-z0-9]+$")
_GUID = re.compile(r"^0x[0-9a-fA-F]{1,16}$")
_DECIMAL = re.compile(r"^\d{1,10}$")
_ERROR_LINE = re.compile(
    r"\bfailed\b|timed out|can't |No such device|not permitted|Permission denied",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class NodeInfoResult:
    """``smpquery nodeinfo``: who is at the far end, and which of its ports the cable is in."""

    node_type: Optional[str]  # "Switch", "Channel Adapter", "Router" as libibmad prints it
    node_guid: Optional[str]  # "0x0000000000200000": 0x and 16 lower-case hex digits
    port_guid: Optional[str]
    system_guid: Optional[str]
    num_ports: Optional[int]
    local_port: Optional[int]  # LocalPort: the port the query came in on, the cable's far end
    device_id: Optional[str]
    vendor_id: Optional[str]
    problems: List[str]
    mad_error: Optional[str]


@dataclass(frozen=True)
class NodeDescResult:
    """``smpquery nodedesc``: the node's description (a switch's name, e.g. ``MF0;leaf07:...``)."""

    description: Optional[str]
    problems: List[str]
    mad_error: Optional[str]


@dataclass
class _Dump:
    """One smpquery answer as read: its header, its fields as printed, what was odd."""

    header: Optional[str] = None
    fields: Dict[str, str] = field(default_factory=dict)
    capabilities: List[str] = field(default_factory=list)
    problems: List[str] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)
    empty: bool = False

    def mad_error(self) -> Optional[str]:
        if not self.errors:
            return None
        joined = "; ".join(self.errors[:5])
        if len(self.errors) > 5:
            joined += f"; ... ({len(self.errors) - 5} more)"
        return joined


def _read(text: Union[str, bytes, None], tool: str = "smpquery") -> _Dump:
    dump = _Dump()
    text = as_text(text)
    last: Optional[str] = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if IB_TOOL_ERROR.search(line):
            dump.errors.append(trim(line))
            continue
        if line.startswith("#"):
            if dump.header is None:
                dump.header = line.lstrip("#").strip()
            else:
                dump.problems.append(f"second header at line {number}: {quote(line)}")
            continue
        if raw[:1] in ("\t", " ") and _CAPABILITY.match(line) and last in _MASKS:
            dump.capabilities.append(line)  # a capability under CapMask / CapabilityMask2
            continue
        match = _FIELD.match(line)
        if match is None:
            if _ERROR_LINE.search(line):
                dump.errors.append(trim(line))
            else:
                dump.problems.append(f"unparseable line {number}: {quote(line)}")
            continue
        name = match["name"].strip()
        value = match["value"].lstrip(".").strip() if name != _NODE_DESC else match["value"]
        last = name
        if name in dump.fields:
            if dump.fields[name] != value:
                dump.problems.append(f"{name} repeated at line {number}; kept the first value")
            continue
        dump.fields[name] = value
    if not text.strip():
        dump.empty = True
        dump.problems.append(f"empty {tool} output")
    return dump


def _checked(dump: _Dump, name: str, pattern: re.Pattern, what: str) -> Optional[str]:
    """Field ``name`` as printed when it matches ``pattern``; else None (a problem when it was
    printed but is not ``what``)."""
    value = dump.fields.get(name)
    if value is not None and not pattern.match(value):
        dump.problems.append(f"{name} is not {what}: {quote(value)}")
        return None
    return value


def _guid(dump: _Dump, name: str) -> Optional[str]:
    value = _checked(dump, name, _GUID, "a GUID")
    return None if value is None else f"0x{int(value, 16):016x}"


def _int(dump: _Dump, name: str) -> Optional[int]:
    value = _checked(dump, name, _DECIMAL, "a number")
    return None if value is None else int(value)


def _require(dump: _Dump, names: Tuple[str, ...], what: str) -> None:
    """A problem for each field ``what`` must print but did not (unless the tool failed or
    printed nothing at all, which is a problem of its own)."""
    if dump.errors or dump.empty:
        return
    missing = [name for name in names if name not in dump.fields]
    if missing:
        dump.problems.append(f"no {', '.join(missing)} in smpquery {what} output")


def parse_nodeinfo(text: Union[str, bytes, None]) -> NodeInfoResult:
    """Parse ``smpquery nodeinfo`` (stdout, plus stderr if you have it)."""
    dump = _read(text)
    _require(dump, ("NodeType", "Guid", "LocalPort"), "nodeinfo")
    node_type = dump.fields.get("NodeType")
    if node_type is not None and (not node_type or node_type.startswith("?")):
        dump.problems.append(f"unknown NodeType {quote(node_type)}")
    return NodeInfoResult(
        node_type=node_type or None,
        node_guid=_guid(dump, "Guid"),
        port_guid=_guid(dump, "PortGuid"),
        system_guid=_guid(dump, "SystemGuid"),
        num_ports=_int(dump, "NumPorts"),
        local_port=_int(dump, "LocalPort"),
        device_id=dump.fields.get("DevId"),
        vendor_id=dump.fields.get("VendorId"),
        problems=cap(dump.problems),
        mad_error=dump.mad_error(),
    )


def parse_nodedesc(text: Union[str, bytes, None]) -> NodeDescResult:
    """Parse ``smpquery nodedesc``: ``Node Description:`` then dots padding to column 33 (one
    dot after a name of 32 characters or more), then the name as the node set it."""
    dump = _read(text)
    _require(dump, (_NODE_DESC,), "nodedesc")
    raw = dump.fields.get(_NODE_DESC)
    description = None
    if raw is not None:
        # 32 characters after the colon: a name shorter than 32, padded by dots (a name that
        # starts with dots loses them here); more: one dot, then the name as it is.
        description = raw.lstrip(".") if len(raw) <= 32 else raw[1:]
        description = description.strip()
    return NodeDescResult(
        description=description, problems=cap(dump.problems), mad_error=dump.mad_error()
    )


def parse_portinfo(text: Union[str, bytes, None]) -> PortInfo:
    """Parse ``smpquery portinfo`` (stdout, plus stderr if you have it) straight into the
    ``PortInfo`` fact (its ``role`` is the run's: set by whoever knows the run)."""
    dump = _read(text)
    _require(dump, ("Lid", "LinkState", "PhysLinkState", "LinkWidthActive"), "portinfo")
    port = None
    if dump.header is not None:
        found = _HEADER_PORT.search(dump.header)
        port = int(found.group(1)) if found else None
    width_active = _widths(dump, "LinkWidthActive")
    if len(width_active) > 1:
        dump.problems.append(f"LinkWidthActive names more than one width: {width_active}")
    speeds = {
        "active": [_speeds(dump, f"LinkSpeed{kind}Active", table) for kind, table in _KINDS],
        "enabled": [_speeds(dump, f"LinkSpeed{kind}Enabled", table) for kind, table in _KINDS],
        "supported": [_speeds(dump, f"LinkSpeed{kind}Supported", table) for kind, table in _KINDS],
    }
    active = next((found[-1] for found in reversed(speeds["active"]) if found), None)
    return PortInfo(
        port=port,
        lid=_int(dump, "Lid"),
        sm_lid=_int(dump, "SMLid"),
        link_state=_state(dump, "LinkState"),
        phys_link_state=_state(dump, "PhysLinkState"),
        width_active=width_active[0] if len(width_active) == 1 else None,
        width_enabled=list(_widths(dump, "LinkWidthEnabled")),
        width_supported=list(_widths(dump, "LinkWidthSupported")),
        speed_active=active,
        speed_enabled=list(_union(speeds["enabled"])),
        speed_supported=list(_union(speeds["supported"])),
        capabilities=list(dump.capabilities),
        neighbor_mtu=_mtu(dump, "NeighborMTU"),
        mtu_cap=_mtu(dump, "MtuCap"),
        problems=cap(dump.problems),
        mad_error=dump.mad_error(),
    )


_KINDS = (("", _BASE_SPEEDS), ("Ext", _EXT_SPEEDS), ("Ext2", _EXT2_SPEEDS))
MTUS = (256, 512, 1024, 2048, 4096)  # libibmad's mad_dump_mtu: the IBA's MTU codes 1..5


def _mtu(dump: _Dump, name: str) -> Optional[int]:
    """An MTU field in bytes; None (a problem when it was printed) for anything else."""
    value = dump.fields.get(name)
    if value is None:
        return None
    if value.isdigit() and int(value) in MTUS:
        return int(value)
    dump.problems.append(f"{name} is not an MTU: {quote(value)}")
    return None


def _state(dump: _Dump, name: str) -> Optional[str]:
    value = dump.fields.get(name)
    if value is None:
        return None
    if not value or value.startswith("?"):
        dump.problems.append(f"{name} is not a known state: {quote(value)}")
        return None
    return value


def _parts(value: str) -> List[str]:
    """The members of a set as libibmad prints it ("1X or 4X (IBA extension)")."""
    value = value.replace("(IBA extension)", "").strip()
    return [part.strip() for part in value.split(" or ") if part.strip()]


def _widths(dump: _Dump, name: str) -> Tuple[str, ...]:
    value = dump.fields.get(name)
    if value is None:
        return ()
    found: List[str] = []
    for part in _parts(value):
        if part in WIDTHS:
            found.append(part)
        else:
            dump.problems.append(f"{name}: not a link width: {quote(part)}")
    return tuple(sorted(set(found), key=WIDTHS.index))


def _speeds(dump: _Dump, name: str, table: Dict[str, str]) -> Tuple[str, ...]:
    """The speed names a field gives (``LinkSpeedExt2Active`` is printed
    ``LinkSpeedExtActive2``: both spellings are read)."""
    value = dump.fields.get(name)
    if value is None and name.startswith("LinkSpeedExt2"):
        value = dump.fields.get("LinkSpeedExt" + name[len("LinkSpeedExt2") :] + "2")
    if value is None or value in _NO_SPEED or value == _DISABLED:
        return ()
    found: List[str] = []
    for part in _parts(value):
        if part in table:
            found.append(table[part])
            continue
        known = next((text for text in table if part.startswith(text + " ")), None)
        if known is not None:  # "212.5 Gbps undefined (3)": the second set prints no " or "
            found.append(table[known])
            part = part[len(known) :].strip()
        dump.problems.append(f"{name}: not a known speed: {quote(part)}")
    return tuple(sorted(set(found), key=SPEED_ORDER.index))


def _union(groups: List[Tuple[str, ...]]) -> Tuple[str, ...]:
    return tuple(sorted({speed for group in groups for speed in group}, key=SPEED_ORDER.index))
