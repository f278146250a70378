"""The HCAs the driver stack lists: ``ibstat`` (umad/MAD stack) and ``ibv_devinfo`` (verbs).

Healthy: each tool lists every HCA sysfs shows, and nothing else (``checks/driver_inventory.py``
compares them). An HCA that sysfs shows but verbs cannot open is invisible to NCCL and MPI; one
ibstat misses has no MAD access. Values are kept as each tool prints them: ibstat says
``Active`` and ``0x58a2e10300a7820e``, ibv_devinfo ``PORT_ACTIVE`` and ``58a2:e103:00a7:820e``.
"""

from typing import List, Optional

from pydantic import Field

from ibdiag.facts._base import Fact
from ibdiag.roles import RoleField


class ListedPort(Fact):
    """One port of a listed HCA."""

    number: int
    state: Optional[str] = None  # "Active" (ibstat), "PORT_ACTIVE" (ibv_devinfo)
    link_layer: Optional[str] = None  # "InfiniBand" / "Ethernet"


class ListedCA(Fact):
    """One HCA as a tool lists it (ibstat's ``CA 'mlx5_0'``, ibv_devinfo's ``hca_id``)."""

    name: str
    firmware: Optional[str] = None  # ibstat "Firmware version", ibv_devinfo "fw_ver"
    node_guid: Optional[str] = None
    ports: List[ListedPort] = Field(default_factory=list)


class Listing(Fact):
    """One tool's listing. ``unusable``: why the run gave no usable output (``failure()`` of
    the run: not installed, permission denied, timed out, exited non-zero); its ``cas`` are then
    empty. ``error``: what the tool printed instead of a listing (``No IB devices found``,
    ``ibpanic: ... can't get CA list``). ``problems``: lines the parser could not place."""

    role: RoleField
    unusable: Optional[str] = None
    cas: List[ListedCA] = Field(default_factory=list)
    error: Optional[str] = None
    problems: List[str] = Field(default_factory=list)


class Inventory(Fact):
    """The two listings; one is None when its tool was not run (level quick, an older bundle)."""

    ibstat: Optional[Listing] = None
    ibv_devinfo: Optional[Listing] = None
