"""NCCL Inspector dump files -> per-GPU, per-collective bus bandwidth (``ibdiag.facts.nccl``).

The Inspector is NCCL's profiler plugin (``plugins/profiler/inspector`` in NVIDIA/nccl, loaded
with ``NCCL_PROFILER_PLUGIN=.../libnccl-profiler-inspector.so NCCL_INSPECTOR_ENABLE=1``). It
measures every collective and P2P operation a real job runs and writes two kinds of file into
``NCCL_INSPECTOR_DUMP_DIR``:

**Prometheus mode** (``NCCL_INSPECTOR_PROM_DUMP=1``, NCCL 2.30+): one file per GPU,
``nccl_inspector_metrics_<gpu uuid>.prom``, *rewritten in place* every dump interval (30 s at
least) for node_exporter's textfile collector. Per bucket (communicator, collective, message
size range, algorithm_protocol) two lines with the same labels; bandwidth is the geometric mean
of the bucket's operations, exec time the arithmetic mean::

    nccl_bus_bandwidth_gbs{version="v5.1",slurm_job_id="unknown",node="nvl72004-T01",gpu="GPU0",
      comm_name="DP Group 0",n_nodes="1",nranks="4",collective="AllReduce",
      message_size="4-5GB",algo_proto="Ring_ll"} 678.263
    nccl_collective_exec_time_microseconds{...same labels...} 9498.47
    nccl_p2p_bus_bandwidth_gbs{...,p2p_operation="Send",message_size="512-513MB"} 464.9
    nccl_p2p_exec_time_microseconds{...,p2p_operation="Send",message_size="512-513MB"} 1154.87

(one line each in the file). ``gpu`` is ``GPU<cuda device index>`` on that node; the file name
carries the GPU's UUID. ``message_size`` is a bucket: ``<n>-<n+1><unit>`` with ``n`` the size
in 1024-based units floored (``4-5GB`` holds 4 GiB .. 5 GiB); ``message_bytes`` here is its lower
bound. With ``NCCL_INSPECTOR_PROM_DUMP_STATS=1`` four per-device counters follow:
``nccl_collectives_total``, ``nccl_collectives_dropped_total``, ``nccl_p2p_total``,
``nccl_p2p_dropped_total`` (records the dump thread lost: a ring overwrote them). There is no
algorithm bandwidth in this mode.

**JSON mode** (the default): a stream of JSON objects (newline-separated in real files,
pretty-printed in NVIDIA's README). Since format v4.3 each communicator dump starts with a
``dump_stats`` marker carrying ``header`` (comm ``id``, ``comm_name``, ``rank``, ``n_ranks``,
``nnodes``) and ``metadata`` (``inspector_output_format_version``, ``hostname``, ``pid``,
``dump_timestamp_us``); the following ``coll_records`` + ``p2p_records`` + ``proxy_records``
objects belong to it::

    {"coll_perf": {"coll": "AllReduce", "coll_algo": "RING", "coll_proto": "LL",
      "coll_sn": 1407, "coll_msg_size_bytes": 17179869184, "coll_exec_time_us": 61974,
      "coll_algobw_gbs": 277.210914, "coll_busbw_gbs": 485.119099}}

v4.0-v4.2 records carry ``header`` and ``metadata`` in every object. ``p2p_perf`` records use
``p2p``, ``p2p_peer``, ``p2p_msg_size_bytes``, ``p2p_busbw_gbs``...; verbose mode
(``NCCL_INSPECTOR_DUMP_VERBOSE=1``) adds ``event_trace_sn``/``event_trace_ts``; ``proxy_trace``
records (``NCCL_INSPECTOR_ENABLE_PROXY=1``) carry no bandwidth and are only counted.

Units: the Inspector computes ``algbw = bytes / 1e9 / seconds`` -- GB/s, decimal gigaBYTES (the
``_gbs`` suffix). ibdiag grades links in Gb/s (gigaBITS, as ``rate`` in sysfs says "400 Gb/sec"),
so every sample carries both: ``bus_bw_gbytes`` (the Inspector's number) and ``bus_bw_gbps`` (x 8).

Healthy: every GPU of a job shows about the same bus bandwidth for the same collective and
message size; for large messages (>= 1 MiB) inter-node bandwidth near the HCA line rate. A GPU
well below its peers (a straggler, graded by ``checks/nccl.py``) points at its rail: a degraded
HCA port, cable, PCIe link.

How it fails / what the parser meets: the Prometheus file is rewritten in place, so a reader
can catch it empty, cut mid-line (the last line has no newline) or cut between a bandwidth line
and its exec-time partner; a JSON file can end mid-object, or hold fewer records than its last
``dump_stats`` marker announced. Then the complete samples before the cut are kept,
``truncated`` is True and ``problems`` says where. Dropped records (ring overflow) are data, not
parse problems: ``stats`` / ``dropped_records``. Parsers never raise: garbage, binary junk,
empty or truncated input give what could be read plus ``problems``.
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Any, Dict, List, Optional, Tuple, Union

from ibdiag.facts.nccl import InspectorDump, InspectorSample
from ibdiag.families._text import as_text, cap, quote

# The facts it fills (InspectorDump, InspectorSample) live in ibdiag.facts.nccl.
__all__ = [
    "message_size_lower_bound",
    "parse_inspector_file",
    "parse_inspector_json",
    "parse_inspector_prom",
]

BITS_PER_BYTE = 8

# metric name -> (kind, field) for the per-bucket lines
_PROM_SAMPLE_METRICS: Dict[str, Tuple[str, str]] = {
    "nccl_bus_bandwidth_gbs": ("coll", "bus"),
    "nccl_collective_exec_time_microseconds": ("coll", "exec"),
    "nccl_p2p_bus_bandwidth_gbs": ("p2p", "bus"),
    "nccl_p2p_exec_time_microseconds": ("p2p", "exec"),
    # the verbose OTLP mode's algorithm bandwidth, should it ever reach a text file
    "nccl_collective_algobw_gbs": ("coll", "alg"),
}
_PROM_STATS_METRICS = (
    "nccl_collectives_total",
    "nccl_collectives_dropped_total",
    "nccl_p2p_total",
    "nccl_p2p_dropped_total",
)
_BUCKET_UNITS = {"B": 0, "KB": 1, "MB": 2, "GB": 3, "TB": 4}

_PROM_LINE = re.compile(
    r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)\s*(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)"
    r"(?:\s+(?P<ts>-?\d+))?\s*$"
)
_PROM_LABEL = re.compile(
    r'\s*(?P<key>[A-Za-z_][A-Za-z0-9_]*)\s*=\s*"(?P<value>(?:[^"\\]|\\.)*)"\s*'
)
_BUCKET = re.compile(r"^\s*(?P<low>\d+)\s*-\s*(?P<high>\d+)\s*(?P<unit>[KMGT]?B)\s*$", re.I)
_UUID_NAME = re.compile(r"^nccl_inspector_metrics_(?P<uuid>.+)\.prom$")


def message_size_lower_bound(label: str) -> Optional[int]:
    """``"4-5GB"`` -> 4 GiB in bytes (the Inspector's bucket lower bound); None if odd."""
    text = str(label).strip()
    if text.upper() == "0B":
        return 0
    match = _BUCKET.match(text)
    if match is None:
        return None
    unit = _BUCKET_UNITS.get(match.group("unit").upper())
    if unit is None:
        return None
    return int(match.group("low")) * (1024**unit)


def parse_inspector_prom(text: Union[str, bytes, None]) -> InspectorDump:
    """Parse one Prometheus-mode file (``nccl_inspector_metrics_<uuid>.prom``)."""
    text = as_text(text)
    problems: List[str] = []
    truncated = False
    if not text.strip():
        problems.append("empty NCCL Inspector Prometheus file" if not text else "blank file")
        return InspectorDump(samples=[], problems=problems, truncated=False, format="prometheus")
    lines = text.split("\n")
    last_incomplete = None
    if not text.endswith("\n"):  # every line the Inspector writes ends with "\n"
        last_incomplete = lines.pop()
    builders: Dict[Tuple[str, Tuple[Tuple[str, str], ...]], _PromSample] = {}
    order: List[_PromSample] = []
    stats: Dict[str, int] = {}
    versions: List[str] = []
    last_line_kind: Optional[Tuple[_PromSample, str]] = None
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parsed = _prom_line(line, number, problems)
        if parsed is None:
            continue
        name, labels, value, ts_ms = parsed
        version = labels.get("version")
        if version and version not in versions:
            versions.append(version)
        if name in _PROM_STATS_METRICS:
            if math.isfinite(value) and value >= 0:
                stats[name] = max(stats.get(name, 0), int(value))
            else:
                problems.append(f"line {number}: {name} is {value!r}, not a count")
            continue
        spec = _PROM_SAMPLE_METRICS.get(name)
        if spec is None:
            problems.append(f"line {number}: unknown metric {name!r} left out")
            continue
        kind, what = spec
        key = (kind, tuple(sorted(labels.items())))
        builder = builders.get(key)
        if builder is None:
            builder = _PromSample(kind, labels)
            builders[key] = builder
            order.append(builder)
        if not math.isfinite(value) or value < 0:
            problems.append(f"line {number}: {name} is {value!r}; left out")
        elif what in builder.values:
            problems.append(f"line {number}: {name} repeated for the same labels; kept the first")
        else:
            builder.values[what] = value
        if ts_ms is not None and builder.ts_ms is None:
            builder.ts_ms = ts_ms
        last_line_kind = (builder, what)
    if last_incomplete is not None and last_incomplete.strip():
        truncated = True
        problems.append(
            f"last line has no newline (the Inspector was rewriting the file): left out: "
            f"{quote(last_incomplete.strip())}"
        )
    elif last_line_kind is not None:
        builder, what = last_line_kind
        if what == "bus" and "exec" not in builder.values:
            truncated = True
            problems.append(
                "the last bandwidth line has no exec-time line after it: file cut mid-write?"
            )
    samples = [b.build(problems) for b in order]
    samples = [s for s in samples if s is not None]
    if not samples and not stats and not problems:
        problems.append("no NCCL Inspector metrics found")
    return InspectorDump(
        samples=samples,
        problems=cap(problems),
        truncated=truncated,
        format="prometheus",
        format_version=versions[0] if versions else None,
        stats=stats,
    )


def parse_inspector_json(text: Union[str, bytes, None]) -> InspectorDump:
    """Parse one JSON-mode file: newline-separated or pretty-printed objects, or a JSON list."""
    text = as_text(text)
    problems: List[str] = []
    if not text.strip():
        problems.append("empty NCCL Inspector JSON file")
        return InspectorDump(samples=[], problems=problems, truncated=False, format="json")
    records, truncated = _json_records(text, problems)
    state = _JsonState()
    for record, line in records:
        state.take(record, line, problems)
    if state.expecting_more():
        missing = state.describe_missing()
        truncated = True
        problems.append(
            f"the last dump_stats marker announced more records than the file holds ({missing}): "
            "file cut, or still being written"
        )
    if state.orphans:
        problems.append(
            f"{state.orphans} record(s) without a dump_stats marker or header before them: "
            "host, rank and communicator unknown"
        )
    if not state.samples and not state.stats and not problems:
        problems.append("no coll_perf / p2p_perf records found")
    return InspectorDump(
        samples=state.samples,
        problems=cap(problems),
        truncated=truncated,
        format="json",
        format_version=state.versions[0] if state.versions else None,
        stats=state.stats,
    )


def parse_inspector_file(name: str, text: Union[str, bytes, None]) -> InspectorDump:
    """Parse a dump by its file name: ``.prom`` Prometheus, ``.json``/``.jsonl``/``.log`` JSON.

    Any other name is sniffed (``{`` or ``[`` first: JSON). The GPU UUID in
    ``nccl_inspector_metrics_<uuid>.prom`` lands in every sample's ``gpu_uuid``; ``name`` in
    the dump's ``name``.
    """
    base = os.path.basename(str(name or ""))
    lower = base.lower()
    text = as_text(text)
    note = None
    if lower.endswith(".prom"):
        dump = parse_inspector_prom(text)
    elif lower.endswith((".json", ".jsonl", ".log")):
        dump = parse_inspector_json(text)
    else:
        looks_json = text.lstrip()[:1] in ("{", "[")
        dump = parse_inspector_json(text) if looks_json else parse_inspector_prom(text)
        note = f"{base!r}: unknown extension, read as {dump.format}"
    update: Dict[str, Any] = {"name": str(name or "")}
    match = _UUID_NAME.match(base)
    if match:
        uuid = match.group("uuid")
        update["samples"] = [s.model_copy(update={"gpu_uuid": uuid}) for s in dump.samples]
    if note:
        update["problems"] = cap([note, *dump.problems])
    return dump.model_copy(update=update)


# --- Prometheus -------------------------------------------------------------------------------


class _PromSample:
    def __init__(self, kind: str, labels: Dict[str, str]) -> None:
        self.kind = kind
        self.labels = labels
        self.values: Dict[str, float] = {}
        self.ts_ms: Optional[int] = None

    def build(self, problems: List[str]) -> Optional[InspectorSample]:
        labels = self.labels
        op_label = "collective" if self.kind == "coll" else "p2p_operation"
        collective = labels.get(op_label) or labels.get("collective") or labels.get("p2p_operation")
        if not collective:
            problems.append(f"a {self.kind} sample without a {op_label} label left out")
            return None
        size_label = labels.get("message_size")
        size = message_size_lower_bound(size_label) if size_label is not None else None
        if size_label is not None and size is None:
            problems.append(f"odd message_size label {quote(size_label)}")
        bus = self.values.get("bus")
        alg = self.values.get("alg")
        return InspectorSample(
            kind=self.kind,
            collective=collective,
            message_bytes=size,
            bus_bw_gbps=_bits(bus),
            alg_bw_gbps=_bits(alg),
            gpu=labels.get("gpu"),
            host=labels.get("node"),
            comm=labels.get("comm_name"),
            timestamp_us=self.ts_ms * 1000 if self.ts_ms is not None else None,
            labels=dict(labels),
            message_size=size_label,
            bus_bw_gbytes=bus,
            alg_bw_gbytes=alg,
            exec_time_us=self.values.get("exec"),
            algo_proto=labels.get("algo_proto"),
            nranks=_int(labels.get("nranks")),
            n_nodes=_int(labels.get("n_nodes")),
        )


def _prom_line(
    line: str, number: int, problems: List[str]
) -> Optional[Tuple[str, Dict[str, str], float, Optional[int]]]:
    match = _PROM_LINE.match(line)
    if match is None:
        problems.append(f"unparseable line {number}: {quote(line)}")
        return None
    labels = _prom_labels(match.group("labels") or "")
    if labels is None:
        problems.append(f"unparseable labels at line {number}: {quote(line)}")
        return None
    try:
        value = float(match.group("value"))
    except ValueError:
        problems.append(f"not a number at line {number}: {quote(line)}")
        return None
    ts = match.group("ts")
    return match.group("name"), labels, value, int(ts) if ts is not None else None


def _prom_labels(body: str) -> Optional[Dict[str, str]]:
    labels: Dict[str, str] = {}
    pos = 0
    body = body.rstrip()
    while pos < len(body):
        match = _PROM_LABEL.match(body, pos)
        if match is None:
            return None
        labels[match.group("key")] = _unescape(match.group("value"))
        pos = match.end()
        if pos < len(body):
            if body[pos] != ",":
                return None
            pos += 1
    return labels


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


# --- JSON -------------------------------------------------------------------------------------

_DECODER = json.JSONDecoder()
_RECORD_KINDS = {"coll_perf": "coll_records", "p2p_perf": "p2p_records", "proxy_trace": None}


def _json_records(text: str, problems: List[str]) -> Tuple[List[Tuple[Any, int]], bool]:
    """Decode a stream of JSON values; resynchronise on the next line starting with ``{``."""
    records: List[Tuple[Any, int]] = []
    truncated = False
    pos = 0
    size = len(text)
    while True:
        while pos < size and text[pos] in " \t\r\n,\x00":
            pos += 1
        if pos >= size:
            break
        line = text.count("\n", 0, pos) + 1
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError) as exc:
            resume = _next_object(text, pos + 1)
            if resume is None:
                rest = text[pos:].strip()
                if rest[:1] in ("{", "["):
                    truncated = True
                    problems.append(
                        f"file ends mid-record at line {line} (cut while being written): "
                        f"{quote(rest)}"
                    )
                else:
                    problems.append(f"unparseable text at line {line}: {quote(rest)}")
                break
            reason = getattr(exc, "msg", type(exc).__name__)
            problems.append(
                f"unparseable record at line {line} ({reason}): {quote(text[pos:resume].strip())}"
            )
            pos = resume
            continue
        if isinstance(value, list):  # a whole file written as one JSON array
            records.extend((item, line) for item in value)
        else:
            records.append((value, line))
        pos = end
    return records, truncated


def _next_object(text: str, start: int) -> Optional[int]:
    index = text.find("\n{", start)
    return None if index < 0 else index + 1


class _JsonState:
    """Carries the dump_stats marker's context over the records that follow it."""

    def __init__(self) -> None:
        self.header: Optional[Dict[str, Any]] = None
        self.metadata: Optional[Dict[str, Any]] = None
        self.remaining: Dict[str, int] = {}
        self.announced: Dict[str, int] = {}
        self.samples: List[InspectorSample] = []
        self.stats: Dict[str, int] = {}
        self.versions: List[str] = []
        self.orphans = 0

    def expecting_more(self) -> bool:
        return any(n > 0 for n in self.remaining.values())

    def describe_missing(self) -> str:
        return ", ".join(
            f"{kind}: {self.announced[kind] - left} of {self.announced[kind]}"
            for kind, left in self.remaining.items()
            if left > 0
        )

    def take(self, record: Any, line: int, problems: List[str]) -> None:
        if not isinstance(record, dict):
            problems.append(f"record at line {line} is not a JSON object: {quote(repr(record))}")
            return
        header = record.get("header") if isinstance(record.get("header"), dict) else None
        metadata = record.get("metadata") if isinstance(record.get("metadata"), dict) else None
        if metadata:
            version = metadata.get("inspector_output_format_version")
            if isinstance(version, str) and version not in self.versions:
                self.versions.append(version)
        if "dump_stats" in record:
            self._marker(record, header, metadata, line, problems)
            return
        body_kind = next((k for k in _RECORD_KINDS if isinstance(record.get(k), dict)), None)
        if body_kind is None:
            problems.append(
                f"record at line {line} has no coll_perf/p2p_perf: keys {sorted(record)[:6]}"
            )
            return
        if header is None and metadata is None:  # v4.3+: the marker's context
            header, metadata = self.header, self.metadata
            counter = _RECORD_KINDS[body_kind]
            kind_key = counter or "proxy_records"
            if kind_key in self.remaining:
                self.remaining[kind_key] -= 1
            if header is None and metadata is None:
                self.orphans += 1
        if body_kind == "proxy_trace":
            return
        sample = _json_sample(body_kind, record[body_kind], header, metadata, line, problems)
        if sample is not None:
            self.samples.append(sample)

    def _marker(
        self,
        record: Dict[str, Any],
        header: Optional[Dict[str, Any]],
        metadata: Optional[Dict[str, Any]],
        line: int,
        problems: List[str],
    ) -> None:
        if self.expecting_more():
            problems.append(
                f"dump_stats marker at line {line} came before the previous dump's records "
                f"were all there ({self.describe_missing()})"
            )
        self.header, self.metadata = header, metadata
        stats = record.get("dump_stats")
        self.remaining, self.announced = {}, {}
        if not isinstance(stats, dict):
            problems.append(f"dump_stats at line {line} is not an object")
            return
        for name, value in stats.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                continue
            if name in ("coll_records", "p2p_records", "proxy_records"):
                self.remaining[name] = value
                self.announced[name] = value
            else:
                self.stats[name] = max(self.stats.get(name, 0), value)


def _json_sample(
    kind: str,
    perf: Dict[str, Any],
    header: Optional[Dict[str, Any]],
    metadata: Optional[Dict[str, Any]],
    line: int,
    problems: List[str],
) -> Optional[InspectorSample]:
    short = "coll" if kind == "coll_perf" else "p2p"
    name = perf.get(short)
    if not isinstance(name, str) or not name:
        problems.append(f"{kind} at line {line} has no {short!r} name; left out")
        return None
    header = header or {}
    metadata = metadata or {}
    size = _json_int(perf.get(f"{short}_msg_size_bytes"))
    bus = _json_float(perf.get(f"{short}_busbw_gbs"), f"{short}_busbw_gbs", line, problems)
    alg = _json_float(perf.get(f"{short}_algobw_gbs"), f"{short}_algobw_gbs", line, problems)
    rank = _json_int(header.get("rank"))
    algo, proto = perf.get("coll_algo"), perf.get("coll_proto")
    algo_proto = f"{algo}_{proto}" if isinstance(algo, str) and isinstance(proto, str) else None
    comm_name = header.get("comm_name")
    comm_id = header.get("id")
    labels: Dict[str, str] = {}
    for source in (metadata, header, perf):
        for key, value in source.items():
            if isinstance(value, (str, int, float, bool)):
                labels[str(key)] = str(value)
    timing = perf.get(f"{short}_timing_source")
    return InspectorSample(
        kind=short,
        collective=name,
        message_bytes=size,
        bus_bw_gbps=_bits(bus),
        alg_bw_gbps=_bits(alg),
        gpu=f"rank {rank}" if rank is not None else None,
        host=metadata.get("hostname") if isinstance(metadata.get("hostname"), str) else None,
        comm=(
            comm_name
            if isinstance(comm_name, str) and comm_name and comm_name != "unknown"
            else (comm_id if isinstance(comm_id, str) else None)
        ),
        timestamp_us=_json_int(metadata.get("dump_timestamp_us")),
        labels=labels,
        bus_bw_gbytes=bus,
        alg_bw_gbytes=alg,
        exec_time_us=_json_float(
            perf.get(f"{short}_exec_time_us"), f"{short}_exec_time_us", line, problems
        ),
        algo_proto=algo_proto,
        rank=rank,
        nranks=_json_int(header.get("n_ranks")),
        n_nodes=_json_int(header.get("nnodes")),
        comm_id=comm_id if isinstance(comm_id, str) else None,
        seq=_json_int(perf.get(f"{short}_sn")),
        peer=_json_int(perf.get("p2p_peer")),
        timing_source=timing if isinstance(timing, str) else None,
    )


# --- small helpers ----------------------------------------------------------------------------


def _bits(gbytes: Optional[float]) -> Optional[float]:
    return None if gbytes is None else gbytes * BITS_PER_BYTE


def _int(text: Optional[str]) -> Optional[int]:
    if text is None or not re.fullmatch(r"\s*-?\d{1,18}\s*", text):
        return None
    return int(text.strip())  # re's \s is wider than int()'s whitespace (\x1c: "4" is 4)


def _json_int(value: Any) -> Optional[int]:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _json_float(value: Any, name: str, line: int, problems: List[str]) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        problems.append(f"{name} at line {line} is not a number: {quote(repr(value))}")
        return None
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number) or number < 0:
        problems.append(f"{name} at line {line} is {number!r}; left out")
        return None
    return number
