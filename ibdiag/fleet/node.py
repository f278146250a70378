"""One node as the fleet sees it: ``NodeSummary``, extracted from that node's Report JSON.

The fleet compares nodes; it does not re-grade them. What it needs of a Report is small: the
verdict and the drain reason (grouped across nodes), what failed where, the inventory (drift:
firmware, board, model, driver, kernel), per-rail metrics (outliers: bandwidth, error rates)
and each port's far end (switch blame, rail conformance). ``summarize`` reads exactly that
through ``ibdiag.fleet.report_view.ReportView``, the typed view of those fields alone: a field
a report does not hold, or holds as another type, is unknown (never guessed), and costs the
node that value alone; the whole Report model is not validated. A fleet of 10,000
level-standard reports is read in about 25 s on two cores, and memory holds summaries only.

A *rail* is an HCA's index among the node's InfiniBand HCAs in natural name order (``mlx5_0``
is rail 0, ``mlx5_10`` comes after ``mlx5_9``): on a GPU node HCA k of every node is cabled to
the same group of leaf switches, so rail k is what HCA k is compared with across the fleet.
``ibdiag.rails`` is the one definition: ``Snapshot.rails`` (the Prometheus rail labels) and this
module number a node's HCAs alike.
"""

from __future__ import annotations

import math
import re
import statistics
from datetime import datetime
from typing import TYPE_CHECKING, Any, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple, cast

from pydantic import BaseModel, ConfigDict

from ibdiag.drain_reason import reason_of
from ibdiag.fleet.report_view import (
    CounterIncreasesView,
    DeviceView,
    InspectorDumpView,
    InspectorSampleView,
    NcclTestsView,
    PartnerView,
    PortFactsView,
    Reading,
    ReportView,
    ResultView,
    SnapshotView,
    Unusable,
)
from ibdiag.rails import infiniband_port, rail_numbers

if TYPE_CHECKING:
    from ibdiag.model import Result

ATTENTION = ("fail", "error", "warn")
_SEVERITY = ("none", "skip", "pass", "warn", "error", "fail")
CABLE = "<->"  # results name a cable by both ends: mlx5_3:1<->leaf07/21
# What a node name may be (Slurm's, DNS's): host lists are written with "[", "," and "-".
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
VERDICTS = ("OK", "WARNING", "CRITICAL", "UNKNOWN")
MIN_RATE_WINDOW_HOURS = (
    1.0  # as ibdiag.counters.deltas: a rate over a shorter interval is per one hour
)

# Metric names (``Metric.name``) and their units.
IB_WRITE_BW = "ib_write_bw_gbps"  # level full's loopback, Gb/s, per rail
NCCL_TESTS_BUSBW = "nccl_tests_busbw_gbytes"  # nccl-tests busbw at the largest size, GB/s
# NCCL Inspector: + "<collective>:<message size bucket>[:<N>n]" (``inspector_key``): the median
# busbw (Gb/s) of the node's samples of that collective, size and communicator span.
INSPECTOR_BUSBW_PREFIX = "inspector_busbw_gbps:"
ERROR_RATE_PREFIX = "error_rate:"  # + counter name: increases per hour since the baseline


class NotAReport(ValueError):
    """The JSON is not an ibdiag Report (a foreign file, or one cut short)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FarEnd(_Frozen):
    """The far end of one port's cable as the node read it (``Port.partner``)."""

    peer_guid: Optional[str] = None  # the switch's (or other HCA's) node GUID
    peer_name: Optional[str] = None  # its short name as the partner checks name it: leaf07
    peer_port: Optional[int] = None
    peer_type: Optional[str] = None  # "Switch", "Channel Adapter"
    peer_description: Optional[str] = None


class CableMake(_Frozen):
    """Who made a port's cable and which batch: the module's part number (and vendor) and its
    lot - the EEPROM's date code and the vendor's lot code after it (``CableIdentity``
    ``date_code`` + ``lot``: ``230612AB``), which together name one manufacturing batch. A lot
    with many of its cables failing the physical layer across the fleet is a bad batch, not bad
    luck."""

    vendor: Optional[str] = None
    part_number: str
    lot: Optional[str] = None  # None: the module gave neither date code nor lot


class PortSummary(_Frozen):
    """One port: where it is (device, rail), how it is, and what failed on it or its cable."""

    target: str  # mlx5_0:1
    device: str
    number: int
    rail: Optional[int] = None  # None: not an InfiniBand HCA's port
    state: Optional[str] = None  # ACTIVE, DOWN, ...
    rate_gbps: Optional[float] = None
    status: str = "none"  # the worst result on the port itself (none: no result)
    cable_status: str = "none"  # the worst result naming its cable by both ends
    failing_checks: List[str] = []  # check ids that failed/erred/warned on it or its cable
    far_end: Optional[FarEnd] = None
    cable: Optional[CableMake] = None  # None: not read (level quick, no mlxlink/mstlink)


class HcaSummary(_Frozen):
    """One InfiniBand HCA: its rail, and the inventory drift compares rail by rail
    (``ibdiag.fleet.drift.HCA_ATTRIBUTES``: one model, board, firmware and set of partition
    keys on every rail k)."""

    name: str
    rail: int
    hca_type: Optional[str] = None
    board_id: Optional[str] = None
    fw_ver: Optional[str] = None
    # The partition keys its InfiniBand ports hold ("0x8001 0xffff", sorted; None: not read)
    pkeys: Optional[str] = None
    node_guid: Optional[str] = None


class Metric(_Frozen):
    """One number the fleet compares across nodes: ``rail`` None for a node-wide metric."""

    name: str
    rail: Optional[int] = None
    value: float


class NodeSummary(_Frozen):
    """What one node's Report says that the fleet compares."""

    host: str
    source: str  # the file (or bundle) it was read from
    level: str
    tool_version: str
    schema_version: int
    collected_at: Optional[datetime] = None
    verdict: str  # OK WARNING CRITICAL UNKNOWN
    verdict_reason: str = ""
    drain_reason: str = ""  # grade.drain_reason of the node's results: "" when nothing is wrong
    hcas: List[HcaSummary] = []
    ports: List[PortSummary] = []
    # Targets other than ports and cables (node, an HCA) with a failed or erred result: a node
    # failing there is not explained by the switch its ports share with others.
    failing_elsewhere: List[str] = []
    kernel_release: Optional[str] = None
    driver_versions: Dict[str, str] = {}
    # What says two reports come from one machine (``ibdiag.fleet.identity``): the kernel's boot
    # id, and the node GUIDs of its RDMA devices (all-zero ones left out: they name nothing).
    boot_id: Optional[str] = None
    guids: List[str] = []
    metrics: List[Metric] = []
    # Hours since the baseline the node was graded against; None: no baseline, so its error
    # rates are unknown (not zero).
    rate_window_hours: Optional[float] = None
    # No report of it could be read: only its name is known (``ibdiag.fleet.identity``), from
    # the file name of an input that could not be read. Counted UNKNOWN, not as a node read.
    unread: bool = False
    # Numbers of its report that no measurement can be (a 401-digit integer, a negative
    # bandwidth, infinity): which fields, as ``loopback gbps``. Each was read as unknown, so
    # it costs this node that value and nothing else; ``read_fleet`` notes the node.
    unusable_numbers: List[str] = []

    def metric(self, name: str, rail: Optional[int] = None) -> Optional[float]:
        return next((m.value for m in self.metrics if m.name == name and m.rail == rail), None)


def summarize(report: Any, source: str) -> NodeSummary:
    """The NodeSummary of one parsed Report JSON; ``NotAReport`` (one line) when it is not one."""
    if not isinstance(report, dict):
        raise NotAReport(f"not an ibdiag report (a JSON {type(report).__name__})")
    return summarize_view(ReportView.model_validate(report), source)


def summarize_view(view: ReportView, source: str) -> NodeSummary:
    """The NodeSummary of a Report's view (``ReportView.model_validate_json`` of a report file
    reads straight into it); ``NotAReport`` (one line) when it is none."""
    snapshot, verdict, results = view.snapshot, view.verdict, view.results
    if snapshot is None or verdict not in VERDICTS or results is None:
        raise NotAReport("not an ibdiag report (no verdict, results and snapshot)")
    host = snapshot.host
    if not host:
        raise NotAReport("the report names no host")
    if not NODE_NAME.fullmatch(host):
        raise NotAReport(f"host name {host[:64]!r} cannot be a node name")
    rails = _rails(snapshot.devices)
    unusable: Set[str] = set()
    ports = _ports(snapshot.devices, rails, results, unusable)
    increases = view.counter_increases
    hours = _reading(increases.hours, "counter_increases hours", unusable) if increases else None
    attention = [result for result in results if result.status in ATTENTION]
    return NodeSummary(
        host=host,
        source=source,
        level=view.level or "?",
        tool_version=view.tool_version or "?",
        schema_version=view.schema_version or 0,
        collected_at=snapshot.collected_at,
        verdict=verdict,
        verdict_reason=view.verdict_reason or "",
        # reason_of reads what a ResultView has of a Result: check_id, target, status,
        # observed (only text is quoted) and subject.
        drain_reason=reason_of(cast("List[Result]", attention)),
        hcas=_hcas(snapshot.devices, rails),
        ports=ports,
        failing_elsewhere=sorted(
            {
                r.target
                for r in results
                if r.status in ("fail", "error")
                and CABLE not in r.target
                and r.target not in {port.target for port in ports}
            }
        ),
        kernel_release=snapshot.kernel_release,
        driver_versions={name: v for name, v in snapshot.driver_versions.items() if v},
        boot_id=snapshot.boot_id or None,
        guids=_guids(snapshot.devices),
        metrics=_metrics(snapshot, rails, increases, hours, unusable),
        rate_window_hours=hours,
        unusable_numbers=sorted(unusable),
    )


# --- pieces -----------------------------------------------------------------------------------


def _reading(value: Reading, what: str, unusable: Set[str]) -> Optional[float]:
    """A measurement's value; None when unknown, and ``what`` added to ``unusable`` when the
    report says a number no measurement can be (``report_view.UNUSABLE``)."""
    if isinstance(value, Unusable):
        unusable.add(what)
        return None
    return value


def _rails(devices: Sequence[DeviceView]) -> Dict[str, int]:
    """Device name -> rail, as ``Snapshot.rails`` numbers them (``ibdiag.rails``)."""
    return rail_numbers(
        (dev.name, any(infiniband_port(port.link_layer, port.problems) for port in dev.ports))
        for dev in devices
        if dev.name is not None
    )


def _hcas(devices: Sequence[DeviceView], rails: Dict[str, int]) -> List[HcaSummary]:
    """The InfiniBand HCAs in rail order."""
    found = [
        HcaSummary(
            name=dev.name,
            rail=rails[dev.name],
            hca_type=dev.hca_type,
            board_id=dev.board_id,
            fw_ver=dev.fw_ver,
            pkeys=_pkeys(dev),
            node_guid=dev.node_guid,
        )
        for dev in devices
        if dev.name is not None and dev.name in rails
    ]
    return sorted(found, key=lambda hca: hca.rail)


def _pkeys(dev: DeviceView) -> Optional[str]:
    """The partition keys the HCA's InfiniBand ports hold, as one sorted text ("0x8001
    0xffff"); None when no port's table was read (a capture without one, an older ibdiag)."""
    keys: Set[str] = set()
    read = False
    for port in dev.ports:
        table = port.facts.pkeys if port.facts is not None else None
        if table is None or not infiniband_port(port.link_layer, port.problems):
            continue
        read = True
        keys.update(f"0x{key.value:04x}" for key in table.keys if key.value is not None)
    return " ".join(sorted(keys)) if read else None


def _guids(devices: Sequence[DeviceView]) -> List[str]:
    """The devices' node GUIDs, lower case, sorted; none that is all zeros (a virtual function's
    or an unprogrammed one's GUID is the same on every machine)."""
    found = set()
    for dev in devices:
        guid = dev.node_guid
        if guid and guid.strip().lower().replace("0x", "").strip("0:"):
            found.add(guid.strip().lower())
    return sorted(found)


def _ports(
    devices: Sequence[DeviceView],
    rails: Dict[str, int],
    results: Sequence[ResultView],
    unusable: Set[str],
) -> List[PortSummary]:
    local: Dict[str, List[ResultView]] = {}
    cable: Dict[str, List[ResultView]] = {}
    cable_names: Dict[str, str] = {}
    for result in results:
        if CABLE in result.target:
            near, far = result.target.split(CABLE, 1)
            cable.setdefault(near, []).append(result)
            cable_names.setdefault(near, far)
        else:
            local.setdefault(result.target, []).append(result)
    ports = []
    for dev in devices:
        name = dev.name
        if name is None:
            continue
        for port in dev.ports:
            number = port.number
            if number is None:
                continue
            target = f"{name}:{number}"
            mine, theirs = local.get(target, []), cable.get(target, [])
            ports.append(
                PortSummary(
                    target=target,
                    device=name,
                    number=number,
                    rail=rails.get(name),
                    state=port.state_name,
                    rate_gbps=_reading(port.rate.gbps, "port rate gbps", unusable)
                    if port.rate is not None
                    else None,
                    status=_worst(mine),
                    cable_status=_worst(theirs),
                    failing_checks=sorted(
                        {r.check_id for r in (*mine, *theirs) if r.status in ATTENTION}
                    ),
                    far_end=_far_end(port.partner, cable_names.get(target)),
                    cable=_cable(port.facts),
                )
            )
    return ports


def _cable(facts: Optional[PortFactsView]) -> Optional[CableMake]:
    """The port's cable make, when its module reading named a part number."""
    identity = facts.module.identity if facts and facts.module else None
    if identity is None or not identity.part_number:
        return None
    lot = (identity.date_code or "") + (identity.lot or "")
    return CableMake(vendor=identity.vendor, part_number=identity.part_number, lot=lot or None)


def _far_end(partner: Optional[PartnerView], cable_name: Optional[str]) -> Optional[FarEnd]:
    """The far end, named as the partner checks name it (``leaf07`` of ``leaf07/21``)."""
    if partner is None or not (partner.node_guid or cable_name):
        return None
    name = cable_name.rsplit("/", 1)[0] if cable_name else None
    return FarEnd(
        peer_guid=partner.node_guid,
        peer_name=name or partner.description or partner.node_guid,
        peer_port=partner.port,
        peer_type=partner.node_type,
        peer_description=partner.description,
    )


def _metrics(
    snapshot: SnapshotView,
    rails: Dict[str, int],
    increases: Optional[CounterIncreasesView],
    hours: Optional[float],
    unusable: Set[str],
) -> List[Metric]:
    metrics: List[Metric] = []
    best: Dict[int, float] = {}
    for attempt in snapshot.loopback:
        rail = rails.get(attempt.client_device) if attempt.client_device is not None else None
        gbps = _reading(attempt.gbps, "loopback gbps", unusable)
        if rail is not None and gbps is not None:
            best[rail] = max(best.get(rail, gbps), gbps)
    metrics += [Metric(name=IB_WRITE_BW, rail=rail, value=v) for rail, v in sorted(best.items())]
    busbw = _nccl_tests_busbw(snapshot.nccl_tests, unusable)
    if busbw is not None:
        metrics.append(Metric(name=NCCL_TESTS_BUSBW, value=busbw))
    metrics += [
        Metric(name=INSPECTOR_BUSBW_PREFIX + key, value=value)
        for key, value in sorted(_inspector_busbw(snapshot.nccl_inspector_dumps, unusable).items())
    ]
    if increases is not None and hours is not None:
        rates: Dict[Tuple[str, int], float] = {}
        for target, counters in increases.targets.items():
            rail = rails.get(target.split(":", 1)[0])
            if rail is None:
                continue
            for name, delta in counters.items():
                value = _reading(delta, "counter_increases delta", unusable)
                if value is not None:
                    key = (name, rail)
                    rates[key] = rates.get(key, 0.0) + value / max(hours, MIN_RATE_WINDOW_HOURS)
        for (name, rail), value in sorted(rates.items()):
            if math.isfinite(value):
                metrics.append(Metric(name=ERROR_RATE_PREFIX + name, rail=rail, value=value))
            else:  # finite deltas whose sum is not
                unusable.add("counter_increases delta")
    return metrics


def _nccl_tests_busbw(result: Optional[NcclTestsView], unusable: Set[str]) -> Optional[float]:
    """The best busbw (GB/s) of the rows of the largest size, as the nccl check reads it."""
    if result is None:
        return None
    sizes = [row.size_bytes for row in result.rows if row.size_bytes is not None]
    if not sizes:
        return None
    largest = max(sizes)
    values = [
        _reading(half.busbw_gbps, "nccl_tests busbw_gbps", unusable)
        for row in result.rows
        if row.size_bytes == largest
        for half in (row.out_of_place, row.in_place)
        if half is not None
    ]
    found = [value for value in values if value is not None]
    return max(found) if found else None


# Inspector metrics kept per node: messages from 1 MiB (smaller ones are latency-bound, their
# bandwidth says little of the fabric - as checks/nccl.py grades), the largest few size buckets
# of each collective and span (where bus bandwidth is the links'), and a bound on the whole, so
# a summary stays small whatever the jobs ran.
INSPECTOR_MIN_BYTES = 1 << 20
INSPECTOR_SIZES_KEPT = 4
INSPECTOR_METRICS_MAX = 32


class _Bucket(NamedTuple):
    """Where an Inspector sample is compared: collective, nodes spanned, message size bucket."""

    collective: str
    nodes: Optional[int]
    unit: int  # index in _BUCKET_UNITS
    low: int  # the bucket is low to low + 1 of that unit

    @property
    def key(self) -> str:
        span = f":{self.nodes}n" if self.nodes is not None else ""
        return f"{self.collective}:{self.low}-{self.low + 1}{_BUCKET_UNITS[self.unit]}{span}"


def _inspector_busbw(dumps: Sequence[InspectorDumpView], unusable: Set[str]) -> Dict[str, float]:
    """``inspector_key`` -> the median busbw (Gb/s) of this node's collective samples with that
    key. A bus bandwidth is only comparable like for like: a 4 KiB AllReduce runs at a fraction
    of a 4 GiB one, and a communicator within one node (NVLink) far above one across nodes, so
    a median over every sample would measure the node's workload, not the node. Left out:
    samples without a positive bandwidth (the Inspector writes 0 for a bucket it could not
    time), without a size or below ``INSPECTOR_MIN_BYTES``, P2P operations (their bandwidth
    depends on the peer's placement), all but the ``INSPECTOR_SIZES_KEPT`` largest buckets of a
    collective and span, and past ``INSPECTOR_METRICS_MAX`` keys (by collective name)."""
    values: Dict[_Bucket, List[float]] = {}
    for dump in dumps:
        for sample in dump.samples:
            value = _reading(sample.bus_bw_gbps, "nccl_inspector bus_bw_gbps", unusable)
            bucket = _inspector_bucket(sample)
            if sample.kind != "coll" or bucket is None or value is None or value <= 0:
                continue
            if (sample.message_bytes or 0) >= INSPECTOR_MIN_BYTES:
                values.setdefault(bucket, []).append(value)
    largest: Dict[Tuple[str, Optional[int]], List[_Bucket]] = {}
    for bucket in sorted(values, key=lambda b: (b.unit, b.low), reverse=True):
        kept = largest.setdefault((bucket.collective, bucket.nodes), [])
        if len(kept) < INSPECTOR_SIZES_KEPT:
            kept.append(bucket)
    chosen = [bucket for group in sorted(largest, key=str) for bucket in largest[group]]
    return {
        bucket.key: statistics.median(values[bucket]) for bucket in chosen[:INSPECTOR_METRICS_MAX]
    }


_BUCKET_UNITS = ("B", "KB", "MB", "GB", "TB")  # the Inspector's message_size labels, 1024-based
_COLLECTIVE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,39}")


def inspector_key(sample: Dict[str, Any]) -> Optional[str]:
    """``AllReduce:4-5GB:2n`` of one Inspector sample (a parsed ``InspectorSample``'s JSON): the
    collective, the message size bucket as the Inspector's Prometheus mode labels it (``n`` to
    ``n+1`` of the largest 1024-based unit not above the size: a JSON dump's exact 17179869184
    bytes and a Prometheus bucket ``16-17GB`` are the same key) and, when the dump says, how many
    nodes the communicator spans. None when the collective or the size is missing or odd."""
    bucket = _inspector_bucket(InspectorSampleView.model_validate(sample))
    return bucket.key if bucket is not None else None


def _inspector_bucket(sample: InspectorSampleView) -> Optional[_Bucket]:
    collective, size = sample.collective, sample.message_bytes
    if collective is None or not _COLLECTIVE.fullmatch(collective) or size is None or size < 0:
        return None
    unit = 0
    while unit < len(_BUCKET_UNITS) - 1 and size >= 1024 ** (unit + 1):
        unit += 1
    nodes = sample.n_nodes
    return _Bucket(collective, nodes if nodes is not None and nodes > 0 else None, unit,
                   size // 1024**unit)  # fmt: skip


def _worst(results: Sequence[ResultView]) -> str:
    statuses = [r.status for r in results if r.status in _SEVERITY]
    return max(statuses, key=_SEVERITY.index) if statuses else "none"
