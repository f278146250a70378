"""The data ibdiag moves between its stages: Snapshot (what was read), Result and Report.

A Snapshot is everything a check may look at. It serialises to JSON and back without loss, so a
saved snapshot or a support bundle can be re-graded offline exactly as it was graded live.

Every attribute that could not be read, or read but made no sense, is left ``None`` and its
reason recorded in the owning object's ``problems`` map (attribute name -> reason). One odd file
never drops a port, a device or the run.

Type annotations use ``typing.Optional``/``List``/``Dict`` because pydantic evaluates them at
runtime and the ``X | None`` form does not exist on Python 3.9.

What commands printed is here twice: as recorded (``commands``: each run with its role and raw
output, what a bundle and the HTML show) and parsed once into typed facts (``ibdiag.facts``:
``Port.perfquery``, ``NetDev.ethtool``, ``Snapshot.kernel_log`` ...) by
``ibdiag.families``; checks read the facts, never the text.

Every model is frozen: built once, changed only by making a new one (``model_copy``).

Speed: ``ibdiag check --level quick`` runs in every Slurm prolog, so models defer building their
validators until first used. Sources build models with ``model_construct`` - their parsers
already produce typed values - while anything read back from outside (a saved snapshot, a
bundle, a test's JSON) goes through ``model_validate``/``model_validate_json``.
"""

# No `from __future__ import annotations` here: pydantic would compile() each string
# annotation when the classes are made, on every run (benchmarks/results-issue13.md).

import enum
import re
from typing import Annotated, Dict, List, Optional, Union

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializeAsAny,
    WrapSerializer,
)

from ibdiag.exit_codes import ExitCode
from ibdiag.facts._base import Fact, FactsMapSchema, built_facts, typed_facts
from ibdiag.facts.ethtool import EthtoolStats
from ibdiag.facts.history import LinkHistory
from ibdiag.facts.inventory import Inventory
from ibdiag.facts.kernel_log import KernelLog
from ibdiag.facts.loopback import LoopbackAttempt
from ibdiag.facts.nccl import InspectorDump, NcclTestsResult
from ibdiag.facts.partner import Partner
from ibdiag.facts.perfquery import PortPma
from ibdiag.facts.topology import GpuTopology
from ibdiag.rails import infiniband_port, rail_numbers
from ibdiag.roles import Role, RoleField
from ibdiag.thresholds import Thresholds

# Bump when a field is renamed or removed or its meaning changes; adding a field is compatible.
# What a version changed, and the one step that upgrades older files at load, is
# ``ibdiag.migrate``. 2: Snapshot.commands keyed by role; every planned run has its role.
SCHEMA_VERSION = 2

Problems = Dict[str, str]
# The facts of families without a named field here, by the name their Fact class declares
# (``ibdiag.facts._base``; a new family: ``ibdiag.families``), each validated as that class.
FamilyFacts = Annotated[
    Dict[str, SerializeAsAny[Fact]],
    BeforeValidator(typed_facts),
    WrapSerializer(built_facts),
    FactsMapSchema(),
]
# The InfiniBand class directory, relative to ``Snapshot.sysfs_root``: where the HCAs are read
# from, and the key of ``Snapshot.problems`` when it cannot be listed.
INFINIBAND_CLASS = "class/infiniband"
Scalar = Union[int, float, str, None]


class _Model(BaseModel):
    # Snapshot fields are facts read from the machine: reject unknown keys so a typo in a
    # hand-built test snapshot or a corrupt file fails loudly instead of being dropped.
    # Frozen: a model is never changed once built - a stage that adds to one (the grader
    # stamping a check id, a baseline problem noted on the snapshot) builds a new one with
    # ``model_copy(update=...)``, so what a check saw is what the report says it saw.
    model_config = ConfigDict(extra="forbid", defer_build=True, frozen=True)


class LinkRate(_Model):
    """A port's negotiated rate, from sysfs ``rate``: "400 Gb/sec (4X NDR)" -> 400, 4X, NDR."""

    raw: str
    gbps: float
    lanes: Optional[int] = None
    speed: Optional[str] = None  # SDR DDR QDR FDR10 FDR EDR HDR NDR XDR (or HDR100-style names)

    @property
    def width(self) -> Optional[str]:
        return f"{self.lanes}X" if self.lanes is not None else None

    def describe(self) -> str:
        detail = " ".join(part for part in (self.width, self.speed) if part)
        rate = f"{self.gbps:g} Gb/s"
        return f"{rate} ({detail})" if detail else rate


class NetDev(_Model):
    """The kernel network interface on top of a port: IPoIB (ib0) or the RoCE Ethernet netdev."""

    name: str
    operstate: Optional[str] = None  # "up", "down", "dormant", ...
    carrier: Optional[int] = None
    carrier_changes: Optional[int] = None
    mtu: Optional[int] = None
    type: Optional[int] = None  # ARPHRD: 32 = InfiniBand (IPoIB), 1 = Ethernet
    mode: Optional[str] = None  # IPoIB only: "datagram" or "connected"
    speed_mbps: Optional[int] = None
    ethtool: Optional[EthtoolStats] = None  # ethtool -S (level standard); None: not read
    problems: Problems = Field(default_factory=dict)

    @property
    def is_ipoib(self) -> bool:
        return self.type == 32


class Port(_Model):
    """One port of an HCA. Healthy: state 4: ACTIVE, phys_state 5: LinkUp, at the expected rate."""

    number: int
    path: str  # sysfs directory relative to the sysfs root, e.g. class/infiniband/mlx5_0/ports/1
    state: Optional[int] = None
    state_name: Optional[str] = None
    phys_state: Optional[int] = None
    phys_state_name: Optional[str] = None
    rate: Optional[LinkRate] = None
    link_layer: Optional[str] = None  # "InfiniBand" or "Ethernet" (RoCE)
    lid: Optional[int] = None
    sm_lid: Optional[int] = None
    counters: Dict[str, int] = Field(default_factory=dict)  # counters/ and counters_ext/
    hw_counters: Dict[str, int] = Field(default_factory=dict)  # hw_counters/ (mlx5 and others)
    netdev: Optional[NetDev] = None
    perfquery: Optional[PortPma] = None  # PMA counters (level standard); None: not collected
    # The far end of the cable (a check declaring the source "partner"); None: not collected
    partner: Optional[Partner] = None
    facts: FamilyFacts = Field(default_factory=dict)  # other families' facts about the port
    problems: Problems = Field(default_factory=dict)

    @property
    def is_infiniband(self) -> bool:
        """The one definition of an InfiniBand port (``ibdiag.rails.infiniband_port``, which
        the fleet view applies to Report JSON): link layer InfiniBand, or no ``link_layer``
        file at all (kernels without it predate RoCE). A link layer that could not be read is
        not assumed to be anything."""
        return infiniband_port(self.link_layer, self.problems)

    @property
    def is_ethernet(self) -> bool:
        return self.link_layer == "Ethernet"


class Pci(_Model):
    """The HCA's PCIe function. Healthy: the link trained at its maximum speed and width."""

    address: str  # domain:bus:device.function, e.g. 0000:0c:00.0
    vendor_id: Optional[str] = None  # "0x15b3" = Mellanox/NVIDIA
    device_id: Optional[str] = None  # "0x101b" = ConnectX-6
    numa_node: Optional[int] = None  # -1: the platform reports no NUMA affinity
    current_link_speed: Optional[float] = None  # GT/s
    current_link_width: Optional[int] = None
    max_link_speed: Optional[float] = None
    max_link_width: Optional[int] = None
    problems: Problems = Field(default_factory=dict)


class Device(_Model):
    """One RDMA device (HCA) under /sys/class/infiniband, with every one of its ports."""

    name: str
    path: str  # sysfs directory relative to the sysfs root
    node_type: Optional[int] = None  # 1: CA, 2: Switch, 3: Router, 4: RNIC
    node_type_name: Optional[str] = None
    hca_type: Optional[str] = None  # e.g. MT4123
    board_id: Optional[str] = None
    fw_ver: Optional[str] = None
    node_guid: Optional[str] = None
    sys_image_guid: Optional[str] = None
    node_desc: Optional[str] = None
    hw_rev: Optional[str] = None
    pci: Optional[Pci] = None
    ports: List[Port] = Field(default_factory=list)
    hw_counters: Dict[str, int] = Field(default_factory=dict)  # device-level hw_counters/
    facts: FamilyFacts = Field(default_factory=dict)  # other families' facts about the HCA
    problems: Problems = Field(default_factory=dict)

    def target(self, port: Optional[Port] = None) -> str:
        """The name results use: ``mlx5_0`` for the device, ``mlx5_0:1`` for one of its ports."""
        return f"{self.name}:{port.number}" if port is not None else self.name


class CommandRun(_Model):
    """One command ibdiag ran, or meant to run, recorded whatever happened to it.

    Healthy: ``rc`` 0 within its timeout. Everything else is data a check turns into a skip
    or error with the reason: not installed, permission denied, timed out (its whole process
    group was killed), non-zero exit, or never started because the run's deadline had passed.

    ``role`` says what the run was for (``ibdiag.roles.Role``: "perfquery-x mlx5_0:1",
    "nccl-tests", "loopback client mlx5_0:1 attempt 1"), given to the runner when it was
    planned: the families find their runs by role, never by the program's name or argv (a site
    may configure any program, e.g. a wrapper script). None only for a run an older ibdiag
    recorded that ``ibdiag.migrate`` could not give a role: kept for the bundle, read by no one.
    """

    argv: List[str]
    role: Optional[RoleField] = None
    rc: Optional[int] = None  # None: it did not run to completion
    stdout: str = ""  # decoded as UTF-8 with replacement; the tail kept when capped
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_s: float = 0.0
    timed_out: bool = False
    not_found: bool = False
    permission_denied: bool = False
    skipped: Optional[str] = None  # why it was never started (e.g. the run's deadline)
    error: Optional[str] = None  # any other reason it could not run (exec format error, ...)

    @property
    def key(self) -> str:
        """How the run is filed in ``Snapshot.commands``: its role's string form (its argv
        only for a role-less run an older ibdiag recorded)."""
        return str(self.role) if self.role is not None else command_key(self.argv)

    @property
    def succeeded(self) -> bool:
        return self.rc == 0 and not self.timed_out

    def failure(self) -> Optional[str]:
        """One line saying why the command gave no usable output; None when it succeeded."""
        if self.succeeded:
            return None
        tool = self.argv[0] if self.argv else "command"
        if self.skipped:
            return f"{tool} not run: {self.skipped}"
        if self.not_found:
            return f"{tool} is not installed (not found on PATH)"
        if self.permission_denied:
            return f"{tool}: permission denied"
        if self.timed_out:
            return f"{tool} timed out after {self.duration_s:.1f} s and was killed"
        if self.error:
            return f"{tool}: {self.error}"
        detail = (self.stderr.strip() or self.stdout.strip()).splitlines()
        last = _PID.sub("", detail[-1])[:200] if detail else "no output"
        return f"{tool} exited {self.rc}: {last}"


# "ibwarn: [24156] mad_rpc_open_port: ..." - the pid changes every run; a reason must not.
_PID = re.compile(r"\[\d+\]\s*")


def command_key(argv: List[str]) -> str:
    """A command line as one string: its argv joined by spaces (evidence, and the key of a
    role-less run)."""
    return " ".join(argv)


class InspectorFile(_Model):
    """One NCCL Inspector dump file as read (level full): its name, age and text."""

    name: str
    modified_at: Optional[AwareDatetime] = None
    text: str = ""
    truncated: bool = False  # larger than ibdiag keeps: only the newest part was read


class Snapshot(_Model):
    """Everything ibdiag read from one node at one moment: the only input a check sees."""

    schema_version: int = SCHEMA_VERSION
    tool_version: str
    host: Optional[str] = None
    boot_id: Optional[str] = None
    boot_time: Optional[AwareDatetime] = None  # from procfs stat btime: dates kernel-log lines
    collected_at: AwareDatetime  # with a timezone: baselines are compared across runs
    sysfs_root: str
    procfs_root: str
    rootfs: Optional[str] = None  # where collect read /etc from (the root fs); None: not read
    sources: List[str] = Field(default_factory=list)  # which sources were collected ("sysfs", ...)
    devices: List[Device] = Field(default_factory=list)
    gpus: Optional[List[Pci]] = None  # NVIDIA GPUs on the PCI bus (None: not collected)
    kernel_modules: Optional[List[str]] = None  # loaded modules (None: not collected)
    kernel_release: Optional[str] = None  # uname -r (None: not recorded, e.g. an older bundle)
    # Driver module -> version or "srcversion:<hash>" (ibdiag.sources.drivers); None: not read
    driver_versions: Optional[Dict[str, str]] = None
    # Every run as recorded, by its role's string form (``CommandRun.key``); ``run(role)``.
    commands: Dict[str, CommandRun] = Field(default_factory=dict)
    nccl_inspector_dir: Optional[str] = None  # where Inspector dumps were read (level full)
    nccl_inspector: Optional[List[InspectorFile]] = None  # None: not collected
    # Typed facts parsed from the runs and files above (ibdiag.families); None: not run.
    kernel_log: Optional[KernelLog] = None  # dmesg / journalctl -k findings
    inventory: Optional[Inventory] = None  # ibstat / ibv_devinfo listings
    gpu_topology: Optional[GpuTopology] = None  # nvidia-smi topo -m
    loopback: Optional[List[LoopbackAttempt]] = None  # ib_write_bw attempts
    # The run of role "nccl-tests" parsed, with what became of it (a run that never started
    # gives an empty result saying why), and each nccl_inspector file parsed, by name.
    nccl_tests: Optional[NcclTestsResult] = None
    nccl_inspector_dumps: Optional[List[InspectorDump]] = None
    # Each port's outages in the window the checks grade, from the history store (None: not read)
    history: Optional[LinkHistory] = None
    facts: FamilyFacts = Field(default_factory=dict)  # other families' facts about the node
    problems: Problems = Field(default_factory=dict)  # node-level: e.g. class/infiniband missing

    def device(self, name: str) -> Optional[Device]:
        return next((dev for dev in self.devices if dev.name == name), None)

    def rails(self) -> Dict[str, int]:
        """HCA name -> rail: its index among the HCAs with an InfiniBand port, in natural name
        order (``ibdiag.rails``, the definition the fleet view uses too)."""
        return rail_numbers(
            (dev.name, any(port.is_infiniband for port in dev.ports)) for dev in self.devices
        )

    def with_problem(self, key: str, why: str) -> "Snapshot":
        """This snapshot with one more node-level problem (``baseline``, ``state``): a new
        Snapshot, as every model is frozen once built."""
        return self.model_copy(update={"problems": {**self.problems, key: why}})

    def run(self, role: Role) -> Optional[CommandRun]:
        """The run recorded for ``role`` (``ibdiag.roles``); None when it was not collected
        (level quick) or not planned here."""
        return self.commands.get(str(role))


class Status(str, enum.Enum):
    """Outcome of one result. ``skip``: not applicable here; ``error``: the check itself broke."""

    PASS = "pass"  # noqa: S105 - a status, not a password
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"
    ERROR = "error"


class Result(_Model):
    """One finding: a check's verdict on one target (``mlx5_0:1``, ``mlx5_0`` or ``node``)."""

    check_id: str = ""  # stamped by the grader from the check's spec
    target: str
    status: Status
    message: str  # one line that states observed vs expected
    observed: Scalar = None
    expected: Scalar = None
    # What within the target (the counter "link_downed"), or a number the finding is about in
    # stable words ("100<200 Gb/s", "7/8 HCAs"): what a drain reason names (ibdiag.drain_reason)
    subject: Optional[str] = None
    hint: Optional[str] = None  # what to do about it
    evidence: List[str] = Field(default_factory=list)  # files/commands it came from


class Verdict(str, enum.Enum):
    """The node's overall state in the Nagios plugin vocabulary; ``exit_code`` is what we exit."""

    OK = "OK"
    WARNING = "WARNING"
    CRITICAL = "CRITICAL"
    UNKNOWN = "UNKNOWN"

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode[self.name]


class CounterIncreases(_Model):
    """Error counters that went up since the baseline a Report was graded against
    (``ibdiag.counters.increases``): target -> counter -> increase. ``hours``: the interval
    (None when the baseline is not older); ``rebooted``: the node rebooted in between (the
    increases then count from zero)."""

    hours: Optional[float] = None
    rebooted: bool = False
    targets: Dict[str, Dict[str, int]] = Field(default_factory=dict)


class Report(_Model):
    """A graded Snapshot: the only thing renderers see."""

    schema_version: int = SCHEMA_VERSION
    tool_version: str
    level: str
    verdict: Verdict
    verdict_reason: str  # one line: why the verdict is what it is
    results: List[Result]
    thresholds: Thresholds  # the effective expectations the results were graded with
    snapshot: Snapshot
    # What checks printed (check id -> text, capped): shown by `check -v`, never on stdout.
    check_output: Dict[str, str] = Field(default_factory=dict)
    # A bundle graded although these of its files differ from its manifest's sha256
    # (`--accept-altered`): the results may rest on edited data. Empty for a live run.
    altered_files: List[str] = Field(default_factory=list)
    # Graded against a baseline: which error counters increased (None: no baseline).
    counter_increases: Optional[CounterIncreases] = None

    def counts(self) -> Dict[str, int]:
        counts = {status.value: 0 for status in Status}
        for result in self.results:
            counts[result.status.value] += 1
        return counts
