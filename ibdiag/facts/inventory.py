"""The HCAs the driver stack lists: ``ibstat`` (umad/MAD stack) and ``ibv_devinfo`` (verbs).

Healthy: each tool lists every HCA sysfs shows, and nothing else (``checks/driver_inventory.py``
compares them). An HCA that sysfs shows but verbs cannot open is invisible to NCCL and MPI; one
ibstat misses has no MAD access. Values are kept as each tool prints them: ibstat says
``Active`` and ``0x58a2e10300a7820e``, ibv_devinfo ``PORT_ACTIVE`` and ``58a2:e103:00a7:820e``.
A field is None where the tool does not print it (ibstat has no MTU, ibv_devinfo no rate).
"""

from typing import List, Optional

from pydantic import Field

from ibdiag.facts._base import Fact
from ibdiag.facts.outcome import RunOutcome
from ibdiag.roles import RoleField


class ListedPort(Fact):
    """One port of a listed HCA."""

    number: int
    state: Optional[str] = None  # "Active" (ibstat), "PORT_ACTIVE" (ibv_devinfo)
    link_layer: Optional[str] = None  # "InfiniBand" / "Ethernet"
    state_num: Optional[int] = None  # ibv_devinfo: the 4 of "PORT_ACTIVE (4)"
    physical_state: Optional[str] = None  # "LinkUp" (ibstat), "LINK_UP" (ibv_devinfo -v)
    physical_state_num: Optional[int] = None  # ibv_devinfo -v
    rate: Optional[float] = None  # ibstat: Gb/s ("2.5" for 1X SDR)
    lid: Optional[int] = None  # ibstat "Base lid", ibv_devinfo "port_lid"
    sm_lid: Optional[int] = None
    lmc: Optional[int] = None  # ibstat
    port_guid: Optional[str] = None  # ibstat
    capability_mask: Optional[str] = None  # ibstat
    active_mtu: Optional[int] = None  # ibv_devinfo: bytes (the 4096 of "4096 (5)")
    max_mtu: Optional[int] = None  # ibv_devinfo
    active_width: Optional[str] = None  # ibv_devinfo -v: "4X"
    active_speed: Optional[str] = None  # ibv_devinfo -v: "25.0 Gbps"


class ListedCA(Fact):
    """One HCA as a tool lists it (ibstat's ``CA 'mlx5_0'``, ibv_devinfo's ``hca_id``)."""

    name: str
    firmware: Optional[str] = None  # ibstat "Firmware version", ibv_devinfo "fw_ver"
    node_guid: Optional[str] = None
    ports: List[ListedPort] = Field(default_factory=list)
    number_of_ports: Optional[int] = None  # ibstat "Number of ports", ibv "phys_port_cnt"
    hardware_version: Optional[str] = None  # ibstat "Hardware version", ibv "hw_ver"
    system_image_guid: Optional[str] = None
    ca_type: Optional[str] = None  # ibstat: "MT4129"
    transport: Optional[str] = None  # ibv_devinfo: "InfiniBand"
    vendor_id: Optional[str] = None  # ibv_devinfo: "0x02c9"
    vendor_part_id: Optional[str] = None  # ibv_devinfo: "4129"
    board_id: Optional[str] = None  # ibv_devinfo: "MT_0000000838"


class Listing(Fact):
    """One tool's listing. ``unusable``: why the run gave no usable output (``failure()`` of
    the run: not installed, permission denied, timed out, exited non-zero); its ``cas`` are then
    empty. ``error``: what the tool printed instead of a listing (``No IB devices found``,
    ``ibpanic: ... can't get CA list``). ``problems``: lines the parser could not place.
    ``outcome``: what became of the run (``ibdiag.facts.outcome``)."""

    role: Optional[RoleField] = None  # the run it came from; None: parsed from bare text
    unusable: Optional[str] = None
    cas: List[ListedCA] = Field(default_factory=list)
    error: Optional[str] = None
    problems: List[str] = Field(default_factory=list)
    outcome: Optional[RunOutcome] = None  # None: a listing stored without one


class Inventory(Fact):
    """The two listings; one is None when its tool was not run (level quick, not planned)."""

    ibstat: Optional[Listing] = None
    ibv_devinfo: Optional[Listing] = None
