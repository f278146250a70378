"""The ibv_devinfo family: the HCAs and ports rdma-core's ``ibv_devinfo`` lists (the verbs
stack's view: what NCCL and MPI can open), cross-checked with sysfs and ibstat
(``checks/driver_inventory.py``).

**What it plans** (level standard): ``ibv_devinfo`` (role ``inventory ibv_devinfo``), once.

**What it gives**: ``Snapshot.inventory.ibv_devinfo`` (``ibdiag.facts.inventory.Listing``),
parsed straight from the text by ``parse_ibv_devinfo``, with what became of the run
(``Listing.outcome``); a run that failed is not parsed: ``Listing.unusable`` says why. The
reading is shared with ``ibdiag.families.ibstat`` (``ibdiag.families._listing``).

**The text** (``ibv_devinfo``, or ``ibv_devinfo -v``)::

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
not supported``, ``ooo_rc_caps  = 0x0``): those are device detail, not problems; the
``key: value`` pairs a listing names are kept. Port ``state``/``phys_state`` keep the name
(``PORT_ACTIVE``, ``POLLING``) with the number in ``state_num``/``physical_state_num``;
``phys_state``, ``active_width`` and ``active_speed`` appear with ``-v`` only.

``parse_ibv_devinfo`` gives the ``Listing``: its HCAs, the ``problems`` (text outside any
device) and the ``error`` (``No IB devices found``, ``Failed to get IB devices list``). Nothing
raises on odd input.
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple, Union

from ibdiag import roles
from ibdiag.facts.inventory import ListedCA, ListedPort, Listing
from ibdiag.families._listing import Block, Dialect, ListingFamily, joined, read_blocks
from ibdiag.families._text import as_text, cap, number

SOURCE = "ibv_devinfo"
LEVEL = "standard"
ORDER = 21  # after ibstat: both set Snapshot.inventory


_HCA = re.compile(r"^hca_id\s*:\s*(?P<name>\S+)\s*$")
_PORT = re.compile(r"^port\s*:\s*(?P<port>\d+)\s*$")
_KEY_VALUE = re.compile(r"^(?P<key>[A-Za-z_][\w \[\]]*?)\s*:\s*(?P<value>.*?)\s*$")
_ENUM = re.compile(r"^(?P<name>.*?)\s*\(\s*(?P<num>\d+)\s*\)\s*$")
_ERROR = re.compile(
    r"^(?:No IB devices found|Failed to |Couldn't |libibverbs: |ibv_devinfo: )", re.IGNORECASE
)
# -v detail without a "key: value" shape (flag lists, "... not supported") is no problem.
_IBV_DEVINFO = Dialect(
    _HCA, _PORT, _KEY_VALUE, _ERROR, strict=False, before=" (before any hca_id)", fold_case=False
)


def parse_ibv_devinfo(text: Union[str, bytes, None]) -> Listing:
    """The HCAs ``ibv_devinfo`` listed, in its order (no role, no outcome: the family sets
    those)."""
    blocks, problems, errors = read_blocks(text, _IBV_DEVINFO)
    cas = [_ca(block, problems) for block in blocks]
    if not cas and not errors:
        problems.append(
            "no hca_id in ibv_devinfo output" if as_text(text).strip() else "empty output"
        )
    return Listing(cas=cas, problems=cap(problems), error=joined(errors))


def _ca(block: Block, problems: List[str]) -> ListedCA:
    ports = []
    for port_number, values in sorted(block.ports.items()):
        where = f"{block.name} port {port_number}"
        state, state_num = _enum(values.get("state"))
        phys, phys_num = _enum(values.get("phys_state"))
        active_mtu, _ = _enum(values.get("active_mtu"))
        max_mtu, _ = _enum(values.get("max_mtu"))
        width, _ = _enum(values.get("active_width"))
        speed, _ = _enum(values.get("active_speed"))
        ports.append(
            ListedPort(
                number=port_number,
                state=state,
                link_layer=values.get("link_layer") or None,
                state_num=state_num,
                physical_state=phys,
                physical_state_num=phys_num,
                active_mtu=number(active_mtu, f"{where} active_mtu", problems),
                max_mtu=number(max_mtu, f"{where} max_mtu", problems),
                sm_lid=number(values.get("sm_lid"), f"{where} sm_lid", problems),
                lid=number(values.get("port_lid"), f"{where} port_lid", problems),
                active_width=width,
                active_speed=speed,
            )
        )
    fields = block.fields
    transport, _ = _enum(fields.get("transport"))
    return ListedCA(
        name=block.name,
        firmware=fields.get("fw_ver") or None,
        node_guid=fields.get("node_guid") or None,
        ports=ports,
        number_of_ports=number(
            fields.get("phys_port_cnt"), f"{block.name} phys_port_cnt", problems
        ),
        hardware_version=fields.get("hw_ver") or None,
        system_image_guid=fields.get("sys_image_guid") or None,
        transport=transport,
        vendor_id=fields.get("vendor_id") or None,
        vendor_part_id=fields.get("vendor_part_id") or None,
        board_id=fields.get("board_id") or None,
    )


def _enum(text: Optional[str]) -> Tuple[Optional[str], Optional[int]]:
    """ "PORT_ACTIVE (4)" -> ("PORT_ACTIVE", 4); "4X" -> ("4X", None)."""
    if text is None or not text.strip():
        return None, None
    match = _ENUM.match(text.strip())
    if match and match.group("name"):
        return match.group("name"), int(match.group("num"))
    return text.strip(), None


# plan: ``ibv_devinfo``, once; interpret: ``Snapshot.inventory.ibv_devinfo`` when it ran.
_FAMILY = ListingFamily("ibv_devinfo", roles.IBV_DEVINFO, parse_ibv_devinfo)
plan = _FAMILY.plan
interpret = _FAMILY.interpret
