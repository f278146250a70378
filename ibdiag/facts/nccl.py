"""NCCL's bus bandwidth, typed: the nccl-tests run ibdiag made and the NCCL Inspector dumps of jobs.

``Snapshot.nccl_tests`` is the run recorded with role ``nccl-tests`` (``ibdiag.roles``), parsed
by ``ibdiag.families.nccl_tests``: its ranks, result table, NCCL warnings and errors, and
what became of the run (``outcome``: a run that never started gives an empty result saying why).
``Snapshot.nccl_inspector_dumps`` holds one ``InspectorDump`` per file of
``Snapshot.nccl_inspector`` (same order, same ``name``), parsed by
``ibdiag.families.nccl_inspector``; the files' text stays in ``nccl_inspector`` for the
bundle.

Units: nccl-tests and the Inspector print GB/s = 10^9 **bytes**/s. nccl-tests fields named
``*_gbps`` keep that unit (gigaBYTES, as printed); Inspector samples carry both the printed
``*_gbytes`` and ``*_gbps`` in gigaBITS (x 8), the unit ibdiag grades links in.

Healthy, in short (``checks/nccl.py`` grades): every nccl-tests row ``#wrong`` 0, no
out-of-bounds value, the run ``finished()``, no NCCL ``NET/...`` warning, busbw at the largest
size near what the fabric carries; every GPU in the Inspector dumps near its peers.
"""

from typing import Dict, List, Optional

from pydantic import Field

from ibdiag.facts._base import Fact
from ibdiag.facts.outcome import RunOutcome
from ibdiag.roles import RoleField

# -- nccl-tests ----------------------------------------------------------------------------------


class NcclRank(Fact):
    """``#  Rank  0 Group  0 Pid  66421 on node01 device  0 [0x07] NVIDIA A100-SXM4-80GB``."""

    rank: int
    group: Optional[int]  # None in old builds (no "Group" column)
    pid: int
    host: str
    device: int  # the CUDA device index on that host
    bus_id: str  # "0x07" (old) or "0000:07:00" (new)
    gpu: str  # "NVIDIA A100-SXM4-80GB"


class NcclSide(Fact):
    """The out-of-place or in-place half of a row. Bandwidths in GB/s (10^9 bytes/s)."""

    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: Optional[int]  # "#wrong" (wrong elements); None for "N/A" or the old "error" column
    max_error: Optional[float] = None  # old builds' "error" column (max relative error)


class NcclTestsRow(Fact):
    """One line of the result table: a message size, both halves."""

    size_bytes: int
    count: int
    dtype: str
    redop: Optional[str]  # "sum", "none" (all_gather), None when the layout has no redop
    root: Optional[int]  # -1 where the collective has no root; None when there is no column
    out_of_place: Optional[NcclSide]
    in_place: Optional[NcclSide]

    def busbw_gbps(self) -> Optional[float]:
        """The better busbw of the two halves (GB/s), or None."""
        values = [s.busbw_gbps for s in (self.out_of_place, self.in_place) if s is not None]
        return max(values) if values else None

    def wrong(self) -> int:
        """Wrong elements in both halves (0 where not validated)."""
        return sum(s.wrong or 0 for s in (self.out_of_place, self.in_place) if s is not None)


class NcclWarning(Fact):
    """A warning line: NCCL's own ``NCCL WARN`` or one of nccl-tests' or the launcher's notes."""

    text: str  # the message, without the host:pid:tid prefix
    source: str  # "nccl" (NCCL WARN), "nccl-tests" or "launcher"
    host: Optional[str] = None
    gpu: Optional[int] = None  # the CUDA device in "[6]"
    subsystem: Optional[str] = None  # "NET/IB", "NET/Socket", "NET/Plugin", ...
    hca: Optional[str] = None  # "mlx5_10" when the line names an RDMA device
    port: Optional[int] = None
    interface: Optional[str] = None  # a netdev named by NET/Socket lines ("eth0")
    status: Optional[int] = None  # ibv_wc_status (12 = retry exceeded, 5 = flush)
    vendor_err: Optional[int] = None
    peer: Optional[str] = None


class NcclTestsResult(Fact):
    """What one nccl-tests run printed (stdout and stderr together).

    Healthy: ``finished()``, ``wrong_total`` 0 and ``out_of_bounds`` 0, no ``errors``, no
    ``NET/...`` warning, ``busbw_at_largest()`` near the fabric's rate. ``problems`` are the
    parser's (lines it could not read), not the run's: those are ``errors``/``warnings``.
    """

    ranks: List[NcclRank]
    nccl_version: Optional[str]  # "2.16.2+cuda11.6", or "2.19.3" from nccl-library=21903
    rows: List[NcclTestsRow]
    avg_bus_bandwidth_gbps: Optional[float]  # "# Avg bus bandwidth" in GB/s (bytes)
    out_of_bounds: Optional[int]  # "# Out of bounds values : N"
    wrong_total: int  # sum of #wrong over every row and half
    warnings: List[NcclWarning]
    errors: List[str]
    complete: bool  # the "Avg bus bandwidth" line was printed
    problems: List[str]
    test: Optional[str] = None  # "all_reduce_perf" (newer builds print it)
    concluded: bool = False  # "# Collective test concluded: ..." (newer builds end with it)
    reduced_max_bytes: Optional[int] = None  # "Reducing maxBytes to N due to memory limitation"
    nccl_tests_version: Optional[str] = None
    config: Dict[str, int] = Field(default_factory=dict)  # nThread, nGpus, minBytes, iters, ...
    avg_check: Optional[str] = None  # "OK"/"FAILED" after the average, when checked
    runs: int = 0  # how many "# nThread" headers (more than one: several independent runs)
    role: Optional[RoleField] = None  # the run it was parsed from (``ibdiag.roles.NCCL_TESTS``)
    outcome: Optional[RunOutcome] = None  # what became of that run: never started, timed out...

    def busbw_at_largest(self) -> Optional[float]:
        """The best busbw (GB/s) of out-of-place/in-place over the rows of the largest size."""
        if not self.rows:
            return None
        largest = max(row.size_bytes for row in self.rows)
        values = [row.busbw_gbps() for row in self.rows if row.size_bytes == largest]
        known = [v for v in values if v is not None]
        return max(known) if known else None

    def wrong_results(self) -> List[NcclTestsRow]:
        """Rows with a non-zero #wrong in either half."""
        return [row for row in self.rows if row.wrong() > 0]

    def hosts(self) -> int:
        """How many hosts the ranks ran on (0 when no rank line was printed)."""
        return len({rank.host for rank in self.ranks if rank.host})

    def table_complete(self) -> bool:
        """The result table reaches the end of the size sweep its ``# nThread`` header announced:
        its last row is its largest size, and one more step (``step: F(factor)`` or
        ``N(bytes)``) would pass maxBytes (or the ``Reducing maxBytes to`` value). nccl-tests
        loops ``for (size = minBytes; size <= maxBytes; size = size*F or size+N)`` and prints
        each size rounded down to whole elements, so the last printed size never exceeds it.
        False when it cannot tell: no header, several runs, no rows."""
        top = self.reduced_max_bytes or self.config.get("maxBytes")
        if self.runs != 1 or not self.rows or top is None:
            return False
        last = self.rows[-1].size_bytes
        if last < max(row.size_bytes for row in self.rows):
            return False  # a later sweep (another type or op) stopped part-way
        factor, step = self.config.get("step_factor"), self.config.get("step_bytes")
        if factor is not None and factor > 1:
            return last * factor > top
        if step is not None and step > 0:
            return last + step > top
        return False

    def finished(self) -> bool:
        """The run ended as nccl-tests ends one: the ``Avg bus bandwidth`` line (``complete``),
        or - where that line is missing - a complete table (``table_complete``), the ``Out of
        bounds values`` line and ``# Collective test concluded``, which nccl-tests prints after
        both: a run with all three is not failed for the average line alone."""
        if self.complete:
            return True
        return self.concluded and self.out_of_bounds is not None and self.table_complete()


# -- NCCL Inspector ------------------------------------------------------------------------------


class InspectorSample(Fact):
    """One operation (JSON) or one aggregated bucket (Prometheus) as the Inspector saw it."""

    kind: str  # "coll" or "p2p"
    collective: str  # AllReduce, ReduceScatter, AllGather, ..., Send, Recv
    # JSON: the exact size; Prometheus: the lower bound of the ``message_size`` bucket.
    message_bytes: Optional[int]
    # Gb/s (gigabits): the Inspector's GB/s x 8. None where the file has none.
    bus_bw_gbps: Optional[float]
    alg_bw_gbps: Optional[float]
    # Prometheus: "GPU<n>" (CUDA device index on that node); JSON: "rank <n>" (no GPU there).
    gpu: Optional[str]
    host: Optional[str]
    comm: Optional[str]  # communicator name (Prometheus comm_name; JSON header comm_name or id)
    # JSON: metadata.dump_timestamp_us; Prometheus: the line's own timestamp (ms -> us), if any.
    timestamp_us: Optional[int]
    labels: Dict[str, str] = Field(default_factory=dict)  # every label / scalar field, as text
    message_size: Optional[str] = None  # Prometheus bucket label, e.g. "4-5GB"
    bus_bw_gbytes: Optional[float] = None  # GB/s as the Inspector printed it
    alg_bw_gbytes: Optional[float] = None
    exec_time_us: Optional[float] = None
    algo_proto: Optional[str] = None  # "Ring_ll" (Prometheus), "RING_LL" (JSON algo_proto)
    rank: Optional[int] = None
    nranks: Optional[int] = None
    n_nodes: Optional[int] = None
    comm_id: Optional[str] = None
    gpu_uuid: Optional[str] = None  # from the file name (nccl_inspector_metrics_<uuid>.prom)
    seq: Optional[int] = None  # coll_sn / p2p_sn
    peer: Optional[int] = None  # P2P peer rank
    timing_source: Optional[str] = None  # kernel_gpu, kernel_cpu, collective_cpu


# Stats (cumulative) that count records the Inspector overwrote before dumping them.
DROPPED_STATS = (
    "coll_dropped_total",
    "p2p_dropped_total",
    "proxy_dropped_total",
    "nccl_collectives_dropped_total",
    "nccl_p2p_dropped_total",
)


class InspectorDump(Fact):
    """What one Inspector file held.

    Healthy: ``samples`` and no ``problems``; ``truncated`` only when the Inspector was caught
    rewriting the file (the samples before the cut are kept).
    """

    samples: List[InspectorSample]
    problems: List[str]
    truncated: bool  # the file was caught half-written: samples before the cut are kept
    format: str = "unknown"  # "prometheus" or "json"
    format_version: Optional[str] = None  # "v5.1" (Prometheus label), "v4.4" (JSON metadata)
    # JSON: the integer fields of the dump_stats markers (coll_dropped_total, ...); Prometheus:
    # the opt-in stats metrics (nccl_collectives_dropped_total, ...). The largest value seen of
    # each (they are cumulative; several communicators or GPUs: the worst one).
    stats: Dict[str, int] = Field(default_factory=dict)
    name: Optional[str] = None  # the file's name (``InspectorFile.name``) it was parsed from

    @property
    def dropped_records(self) -> int:
        """Records the Inspector overwrote before dumping them (cumulative), all kinds."""
        return sum(self.stats.get(name, 0) for name in DROPPED_STATS)
