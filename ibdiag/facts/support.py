"""What a support bundle gathered for the vendor (``ibdiag collect``; the catalogue in
``ibdiag.families.support``), as typed facts: each item's outcome (the manifest table), and
the system identity a support engineer reads first: OS, kernel, driver, OFED, each HCA's
firmware and PSID.

Healthy: every item ``collected``; one that is ``absent`` (the tool is not installed, the file
does not exist) is no finding, only a line of the table: sysinfo-snapshot and sos alike gather
what the node has.
"""

from __future__ import annotations

import enum
from typing import ClassVar, Dict, List, Optional

from pydantic import Field

from ibdiag.facts._base import Fact


class ItemStatus(str, enum.Enum):
    """What became of one catalogue item on one target."""

    COLLECTED = "collected"
    ABSENT = "absent"  # the tool is not installed, the file does not exist
    NO_PERMISSION = "no permission"  # needs root (or the device's group)
    TIMED_OUT = "timed out"  # killed at its timeout
    FAILED = "failed"  # ran and failed (non-zero exit, a crash), or unreadable
    NOT_STARTED = "not started"  # the run's deadline had passed, a refused name
    NOT_APPLICABLE = "not applicable"  # no target here (no Ethernet port, no GPU)


class ItemRow(Fact):
    """One row of the manifest table: a catalogue item on one target (``""``: the node), the
    command or files it came from, and what became of it."""

    item: str
    target: str = ""
    status: ItemStatus
    source: str = ""  # the command line as it ran, or the file pattern
    reason: Optional[str] = None  # why it is not collected (None when it is)
    duration_s: Optional[float] = None
    size: Optional[int] = None  # bytes kept (stdout, or the files' total)


class SupportFiles(Fact, fact_name="support_files"):
    """The catalogue's files (``Snapshot.facts["support_files"]``), read at every level
    ``collect`` runs: each item's rows, and what the system section shows from them."""

    FROM_FILES: ClassVar[bool] = True

    rows: List[ItemRow] = Field(default_factory=list)
    os_release: Dict[str, str] = Field(default_factory=dict)  # NAME, VERSION_ID, PRETTY_NAME
    kernel_version: Optional[str] = None  # /proc/version
    cmdline: Optional[str] = None  # /proc/cmdline
    platform: Dict[str, str] = Field(default_factory=dict)  # dmi: sys_vendor, product_name...
    module_parameters: Dict[str, Dict[str, str]] = Field(default_factory=dict)
    # the collector's effective uid (/proc/self/status): 0 is root; any other leaves the
    # catalogue's root-only items (mstflint, mstconfig, sminfo...) without their data
    collector_uid: Optional[int] = None

    @property
    def as_root(self) -> Optional[bool]:
        return None if self.collector_uid is None else self.collector_uid == 0


class ModuleInfo(Fact):
    """One driver module as ``modinfo`` shows it. ``inbox``: built with the kernel
    (``.../kernel/drivers/...``), not an OFED/DKMS build (``.../updates/...``, ``extra/``)."""

    name: str
    filename: Optional[str] = None
    version: Optional[str] = None  # only OFED builds carry one
    srcversion: Optional[str] = None
    vermagic: Optional[str] = None
    inbox: Optional[bool] = None


class HcaFirmware(Fact):
    """One HCA's firmware identity from every source that names it: ``mstflint q`` (flash),
    ``devlink dev info`` (running, stored, PSID, serials), ``ethtool -i`` (running, PSID).
    ``pending``: a stored (flashed) version that is not the running one: a firmware reset or
    reboot is due."""

    hca: str
    bdf: Optional[str] = None
    psid: Optional[str] = None
    running: Optional[str] = None
    stored: Optional[str] = None
    board_serial: Optional[str] = None
    security: Optional[str] = None  # mstflint's "Security Attributes" (secure-fw)
    sources: List[str] = Field(default_factory=list)  # the commands it came from

    @property
    def pending(self) -> bool:
        return bool(self.running and self.stored and self.running != self.stored)


class SupportInventory(Fact, fact_name="support"):
    """What the catalogue's commands gave (``Snapshot.facts["support"]``): each item's rows,
    and the driver and firmware identity parsed from them."""

    rows: List[ItemRow] = Field(default_factory=list)
    ofed: Optional[str] = None  # "MLNX_OFED_LINUX-23.10-1.1.9.0"
    modules: List[ModuleInfo] = Field(default_factory=list)
    firmware: List[HcaFirmware] = Field(default_factory=list)
