"""What a healthy node is expected to look like: HCAs, link rate, devices to ignore, counter rules.

Thresholds are plain validated data handed to every check. They are built in layers - the
counter catalogue's defaults, then a profile (ibdiag/profiles/*.toml), then the site config
(/etc/ibdiag/ibdiag.toml), then command-line flags - by ibdiag.config. The field names are the
keys of those TOML files.
"""

# No `from __future__ import annotations` here: pydantic would compile() each string
# annotation when the classes are made, on every run (benchmarks/results-issue13.md).

import fnmatch
import functools
import re
from typing import Annotated, Callable, Dict, List, Literal, Optional, Tuple

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

Severity = Literal["fail", "warn", "info"]

# Bounds on what a config may say: beyond them a value is a typo (10^26), not a setting.
MAX_COUNTER = 2**64  # the widest counters are 64-bit
MAX_RATE_PER_HOUR = 1e15
MAX_HCAS = 1024
MAX_RATE_GBPS = 100_000.0
MAX_MTU = 65_535
MAX_IGNORE_PATTERNS = 1000
MAX_HISTORY_WINDOW_S = 30 * 86400  # the store keeps 7 days; a month is the most a window means

# What may go on a command line (level full's argv builders, ibdiag.families.loopback and
# .nccl_tests, take these values as they are: this is the one place they are checked). Each
# pattern with what it means, for the one-line config error (ibdiag.config).
PROGRAM_PATH = r"^[A-Za-z0-9_./+][A-Za-z0-9_./+-]{0,4095}$"
BYTE_COUNT = r"^\d{1,15}[KkMmGg]?$"
NO_NUL = r"^[^\x00]*$"
PKEY_TEXT = r"^0[xX][0-9a-fA-F]{1,4}$"
PATTERN_MEANS = {
    PKEY_TEXT: "a partition key like 0x8001 (0x and at most four hex digits)",
    PROGRAM_PATH: "a program path (letters, digits and _ . / + -, at most 4096, not starting "
    "with -)",
    BYTE_COUNT: "a byte count like 8, 1M or 8G (nccl-tests' K/M/G suffixes)",
    NO_NUL: "an argument without a NUL character",
}
# One argument for mpirun/srun: any text but empty or holding NUL (an argv item cannot).
LauncherArgument = Annotated[str, StringConstraints(min_length=1, pattern=NO_NUL)]
# Bounds several settings share: each field then says only its default and what it means.
Floor = Annotated[float, Field(gt=0)]  # a least bandwidth (Gb/s or GB/s, as the field says)
Fraction = Annotated[float, Field(gt=0, le=1)]  # of a link rate, or of the peers' median
NetdevMtu = Annotated[int, Field(ge=68, le=MAX_MTU)]  # an interface's MTU (68: IPv4's least)
# An InfiniBand MTU: one of the five the specification defines (PortInfo's MTU codes 1-5).
IbMtu = Literal[256, 512, 1024, 2048, 4096]
# A partition key as configs write it: 0x plus up to four hex digits (16 bits; 0x8000 set: full).
PKey = Annotated[str, StringConstraints(pattern=PKEY_TEXT)]


class CounterRule(BaseModel):
    """How one counter is graded. Unset fields keep the catalogue's default for that counter.

    - ``on_increase``: what any increase since the baseline means (``info``: report only).
    - ``rate_warn_per_hour`` / ``rate_fail_per_hour``: an increase faster than this per hour
      since the baseline warns / fails, whatever ``on_increase`` says.
    - ``lifetime_limit``: without a baseline, a lifetime value above this fails (off: None).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True, allow_inf_nan=False)

    on_increase: Optional[Severity] = None
    rate_warn_per_hour: Optional[float] = Field(default=None, ge=0, le=MAX_RATE_PER_HOUR)
    rate_fail_per_hour: Optional[float] = Field(default=None, ge=0, le=MAX_RATE_PER_HOUR)
    lifetime_limit: Optional[int] = Field(default=None, ge=0, le=MAX_COUNTER)


class Thresholds(BaseModel):
    """Expectations checks compare the Snapshot against. Empty: judge the node by itself."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True, allow_inf_nan=False)

    expect_hcas: Optional[int] = Field(
        default=None, ge=0, le=MAX_HCAS, description="How many InfiniBand HCAs this node must have."
    )
    expect_hca_names: List[str] = Field(
        default_factory=list, description="HCA names that must be present, e.g. mlx5_ib0."
    )
    expect_rate_gbps: Optional[float] = Field(
        default=None,
        gt=0,
        le=MAX_RATE_GBPS,
        description="Rate every InfiniBand port must run at, in Gb/s.",
    )
    ignore_hcas: List[str] = Field(
        default_factory=list,
        max_length=MAX_IGNORE_PATTERNS,
        description="Glob patterns of devices to leave out, e.g. mlx5_an* (Azure's Ethernet NIC).",
    )
    ignore_ethernet: bool = Field(
        default=False,
        description="Leave out devices whose every port is Ethernet (RoCE storage or host NICs) "
        "on nodes where only the InfiniBand compute fabric is graded.",
    )
    expect_ipoib_mtu: Optional[NetdevMtu] = Field(
        default=None, description="MTU every IPoIB interface must have (e.g. 4092)."
    )
    expect_roce_mtu: Optional[NetdevMtu] = Field(
        default=None, description="MTU every RoCE netdev must have (e.g. 4200 or 9000)."
    )
    # -- level full: the active tests (ibdiag.active) ------------------------------------------
    perftest_pairing: Literal["self", "pairs"] = Field(
        default="self",
        description="ib_write_bw loopback: self (server and client on the same HCA port) or "
        "pairs (HCA 0 to 1, 2 to 3, ...: traffic crosses the cables and the leaf switch).",
    )
    perftest_gdr: bool = Field(
        default=False,
        description="Run ib_write_bw with --use_cuda on the GPU nearest each HCA (GPUDirect "
        "RDMA; needs nvidia-smi and a CUDA-enabled perftest).",
    )
    perftest_size: int = Field(
        default=65536, ge=2, le=1 << 30, description="ib_write_bw message size in bytes."
    )
    perftest_duration_s: int = Field(
        default=5, ge=1, le=600, description="Seconds each ib_write_bw run moves traffic."
    )
    perftest_qps: int = Field(default=1, ge=1, le=64, description="ib_write_bw queue pairs.")
    perftest_base_port: int = Field(
        default=18515,
        ge=1024,
        le=65000,
        description="First TCP port ib_write_bw servers listen on (one per test, loopback).",
    )
    perftest_floor_gbps: Optional[Floor] = Field(
        default=None,
        description="Least ib_write_bw bandwidth (Gb/s) per port; unset: perftest_min_fraction "
        "of the port's link rate.",
    )
    perftest_gdr_floor_gbps: Optional[Floor] = Field(
        default=None, description="The same with perftest_gdr (GPU memory), e.g. 380 on ND H100 v5."
    )
    perftest_min_fraction: Fraction = Field(
        default=0.9,
        description="Without a floor: the least bandwidth as a fraction of the link rate.",
    )
    nccl_tests: Optional[str] = Field(
        default=None,
        pattern=PROGRAM_PATH,
        description="Path of nccl-tests' all_reduce_perf (or another *_perf) to run at level "
        "full; unset: nccl-tests are not run.",
    )
    nccl_launcher: Literal["plain", "mpirun", "srun"] = Field(
        default="plain", description="How nccl-tests start: plain (-g GPUS), mpirun or srun."
    )
    nccl_gpus: Optional[int] = Field(
        default=None, ge=1, le=64, description="GPUs for nccl-tests; unset: every NVIDIA GPU."
    )
    nccl_launcher_args: List[LauncherArgument] = Field(
        default_factory=list,
        description='Options for mpirun or srun, e.g. ["--allow-run-as-root", "-H", '
        '"gpu1:8,gpu2:8"] (a cross-node run: 16 ranks); each one argument, not empty.',
    )
    nccl_min_bytes: str = Field(
        default="8", pattern=BYTE_COUNT, description="nccl-tests -b (e.g. 8, 1M)."
    )
    nccl_max_bytes: str = Field(
        default="8G", pattern=BYTE_COUNT, description="nccl-tests -e (e.g. 8G)."
    )
    nccl_timeout_s: int = Field(
        default=600, ge=10, le=7200, description="Kill nccl-tests after this many seconds."
    )
    nccl_busbw_floor_gbytes: Optional[Floor] = Field(
        default=None,
        description="Least nccl-tests bus bandwidth (GB/s, as nccl-tests prints it) at the "
        "largest size; unset: across nodes, nccl_min_fraction of one HCA's link rate.",
    )
    nccl_min_fraction: Fraction = Field(
        default=0.8,
        description="Without a floor, across nodes: the least bus bandwidth as a fraction of "
        "the per-GPU HCA link rate (seed 004: 80%).",
    )
    nccl_inspector_dir: Optional[str] = Field(
        default=None,
        description="NCCL Inspector's NCCL_INSPECTOR_DUMP_DIR to read at level full; unset: "
        "the environment's NCCL_INSPECTOR_DUMP_DIR, if any.",
    )
    nccl_inspector_max_age_s: int = Field(
        default=3600, ge=1, le=366 * 86400, description="Ignore Inspector dumps older than this."
    )
    nccl_inspector_floor_gbytes: Optional[Floor] = Field(
        default=None,
        description="Least bus bandwidth (GB/s) an Inspector sample may show for messages of "
        "1 MiB and more; unset: only stragglers are graded.",
    )
    straggler_fraction: Fraction = Field(
        default=0.8,
        description="A GPU below this fraction of its peers' median bus bandwidth is a straggler.",
    )
    # -- between runs: each port's outages in the history store (ibdiag.history) -------------
    flap_window_s: int = Field(
        default=43200,
        ge=60,
        le=MAX_HISTORY_WINDOW_S,
        description="How far back link.flaps and link.drop look, from the run's own time "
        "(12 h, as gpud's flap window).",
    )
    flap_min_down_s: float = Field(
        default=0,
        ge=0,
        le=MAX_HISTORY_WINDOW_S,
        description="An outage shorter than this is not a flap (0: every return to ACTIVE is).",
    )
    flap_fail_count: int = Field(
        default=3,
        ge=1,
        le=1_000_000,
        description="This many flaps within flap_window_s fail link.flaps; fewer warn.",
    )
    drop_fail_s: float = Field(
        default=240,
        gt=0,
        le=MAX_HISTORY_WINDOW_S,
        description="A port down at least this long within flap_window_s fails link.drop "
        "(4 min, as gpud's drop).",
    )
    # -- the physical layer: module and ASIC temperature, FEC, BER (checks/phy_*.py) -----------
    temperature_margin_c: float = Field(
        default=5.0,
        ge=0,
        le=100,
        description="A module or ASIC sensor within this many degrees C of its own critical "
        "threshold warns phy.temperature; at or over it fails.",
    )
    ber_warn: float = Field(
        default=1e-12,
        gt=0,
        lt=1,
        description="An effective (post-FEC) bit error rate above this warns phy.ber: the "
        "InfiniBand specification's 1e-12 (NVIDIA DGX SuperPOD cabling guide; ibdiagnet's BER "
        "test default).",
    )
    ber_fail: float = Field(
        default=1e-9,
        gt=0,
        lt=1,
        description="An effective bit error rate above this fails phy.ber: ibdiag's own "
        "choice, not a standard's - three decades past the objective, where links retrain and "
        "lose packets.",
    )
    fec_outlier_factor: float = Field(
        default=10.0,
        gt=1,
        le=1e9,
        description="A lane (or port) whose corrected FEC count (blocks; RS-FEC lanes: "
        "corrected symbols) exceeds this many times the median of its sibling lanes in use (or "
        "of the node's other ports of the same FEC layout) warns phy.fec.",
    )
    fec_outlier_floor: int = Field(
        default=1000,
        ge=0,
        le=MAX_COUNTER,
        description="Corrected FEC counts (blocks, or RS-FEC symbols per lane) at or below "
        "this (or increase, with a baseline) are never an outlier: a quiet link's few "
        "corrections are noise.",
    )
    # -- the silent misconfigurations: SM, partitions, MTU, character devices, PCIe path ------
    expect_ib_mtu: Optional[IbMtu] = Field(
        default=4096,
        description="The active MTU every InfiniBand port must run at, in bytes (link.mtu): "
        "4096, the largest InfiniBand MTU, is what NCCL and MPI are tuned for. None: not graded.",
    )
    expect_pkeys: List[PKey] = Field(
        default_factory=list,
        max_length=128,
        description="Partition keys every InfiniBand port's table must hold (partition.pkeys), "
        "e.g. 0x8001 (Azure's style: full member of partition 1). The high bit is the "
        "membership: 0x8001 full, 0x0001 limited.",
    )
    subnets_per_rail: bool = Field(
        default=False,
        description="The node's InfiniBand ports may sit on separate subnets, each with its own "
        "subnet manager (multi-subnet rails): sm.address then does not require one SM LID for "
        "the node nor a different LID on each port, and partition.pkeys compares ports per SM.",
    )
    expect_issm: bool = Field(
        default=False,
        description="hca.char_devices also requires one issm device per InfiniBand port (only "
        "where an SM runs on the node; GB300 images have none).",
    )
    expect_iommu: Optional[Literal["passthrough", "translated"]] = Field(
        default=None,
        description="The IOMMU domain of the HCAs' and GPUs' groups (pci.iommu): passthrough "
        "(identity, what GPUDirect RDMA wants) or translated (DMA/DMA-FQ). None: reported only.",
    )
    aer_correctable_per_hour: float = Field(
        default=60.0,
        ge=0,
        le=MAX_RATE_PER_HOUR,
        description="Correctable PCIe AER errors on an HCA or a bridge above it rising faster "
        "than this per hour since the baseline warn pci.aer (fatal or non-fatal: any rise fails).",
    )
    counters: Dict[str, CounterRule] = Field(
        default_factory=dict,
        description="Per-counter rules over the catalogue's defaults, by counter name.",
    )

    def ignores(self, device_name: str) -> bool:
        """Whether a pattern of ``ignore_hcas`` matches (all of them compiled once, together:
        matched one by one, thousands of patterns cost seconds per run)."""
        return _ignore_matcher(tuple(self.ignore_hcas))(device_name) is not None


@functools.lru_cache(maxsize=8)
def _ignore_matcher(patterns: Tuple[str, ...]) -> Callable[[str], Optional[re.Match]]:
    if not patterns:
        return lambda name: None
    return re.compile("|".join(fnmatch.translate(pattern) for pattern in patterns)).match
