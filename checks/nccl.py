"""Level full: NCCL's bus bandwidth - nccl-tests run by ibdiag, NCCL Inspector dumps of jobs."""

from __future__ import annotations

import math
from typing import Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple

from ibdiag import roles
from ibdiag.facts.nccl import InspectorSample
from ibdiag.facts.outcome import NoData, RunOutcome
from ibdiag.model import Result, Snapshot, Status
from ibdiag.outcome_results import evidence as outcome_evidence
from ibdiag.registry import check
from ibdiag.targets import graded_ports
from ibdiag.thresholds import Thresholds

MIN_GRADED_MESSAGE_BYTES = 1 << 20  # small messages are latency-bound: their bandwidth says little


@check(
    "nccl.inspector",
    title="NCCL Inspector: no GPU far below its peers, bus bandwidth above the floor",
    needs={"nccl_inspector"},
    level="full",
)
def inspector(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: in the NCCL Inspector dumps of recent jobs (``NCCL_INSPECTOR_DUMP_DIR``), every
    GPU's bus bandwidth per collective and message size is within ``straggler_fraction`` (80%)
    of its peers' median, and at or above ``nccl_inspector_floor_gbytes`` (GB/s, as NCCL
    prints it) for messages of 1 MiB and more when a floor is set.

    Why it matters: one slow rank (a degraded HCA, a GPU on the wrong PCIe path) sets the pace
    of every collective: a 20% straggler is a 20% slower job, with nothing in any counter.

    What to do: a straggler names its host and GPU: run ``ibdiag check --level full`` there
    (ib_write_bw per HCA) and look at topology.gpu_hca; send the dumps with the bundle.
    """
    if snap.nccl_inspector is None:
        yield Result(target="node", status=Status.SKIP,
                     message="no NCCL Inspector dump directory (set nccl_inspector_dir or "
                     "NCCL_INSPECTOR_DUMP_DIR)")  # fmt: skip
        return
    where = snap.nccl_inspector_dir or "the dump directory"
    if not snap.nccl_inspector:
        problem = snap.problems.get("nccl_inspector")
        yield Result(target="node", status=Status.SKIP,
                     message=f"no recent NCCL Inspector dump in {where}"
                     + (f" ({problem})" if problem else ""))  # fmt: skip
        return
    evidence = [f"{where}/{dump.name}" for dump in snap.nccl_inspector]
    if snap.nccl_inspector_dumps is None:  # the interpret step broke: its reason is recorded
        problem = snap.problems.get("interpret.nccl_inspector", "no parsed dumps")
        yield Result(target="node", status=Status.ERROR, evidence=evidence,
                     message=f"NCCL Inspector dumps not interpreted: {problem}")  # fmt: skip
        return
    read_in_part = {dump.name for dump in snap.nccl_inspector if dump.truncated}
    samples = [sample for dump in snap.nccl_inspector_dumps for sample in dump.samples]
    cut = [
        dump.name or "?"
        for dump in snap.nccl_inspector_dumps
        if dump.truncated or dump.name in read_in_part
    ]
    found = False
    for slow in stragglers(samples, th.straggler_fraction):
        found = True
        yield Result(
            target=_who(slow.host, slow.gpu),
            status=Status.WARN,
            message=f"straggler: {_printable(slow.collective)} {_size(slow.message_bytes)} at "
            f"{slow.observed_gbps / 8:.1f} GB/s, peers' median {slow.median_gbps / 8:.1f} GB/s "
            f"({slow.peers} peers)",
            observed="straggler",
            hint="run ibdiag check --level full on that host; compare topology.gpu_hca",
            evidence=evidence,
        )
    floor = th.nccl_inspector_floor_gbytes
    if floor is not None:
        for sample in samples:
            big = (sample.message_bytes or 0) >= MIN_GRADED_MESSAGE_BYTES
            if big and sample.bus_bw_gbytes is not None and sample.bus_bw_gbytes < floor:
                found = True
                yield Result(
                    target=_who(sample.host, sample.gpu),
                    status=Status.FAIL,
                    message=f"{_printable(sample.collective)} {_size(sample.message_bytes)}: bus "
                    "bandwidth "
                    f"{sample.bus_bw_gbytes:.1f} GB/s < {floor:g} (nccl_inspector_floor_gbytes)",
                    observed=sample.bus_bw_gbytes,
                    expected=floor,
                    evidence=evidence,
                )
    if not found:
        note = f"; half-written, read as far as complete: {', '.join(cut)}" if cut else ""
        yield Result(target="node", status=Status.PASS, evidence=evidence,
                     message=f"{len(samples)} samples in {len(snap.nccl_inspector)} dump(s): "
                     f"no straggler{', none below the floor' if floor else ''}{note}")  # fmt: skip


class Straggler(NamedTuple):
    """A GPU whose bus bandwidth is below ``fraction`` x the median of its peers."""

    collective: str
    message_bytes: Optional[int]
    gpu: str
    host: Optional[str]
    observed_gbps: float  # Gb/s (its best sample in the group)
    median_gbps: float  # Gb/s, median of the peers' best samples
    peers: int
    kind: str = "coll"


def stragglers(samples: Iterable[InspectorSample], fraction: float = 0.8) -> List[Straggler]:
    """Per (kind, collective, message_bytes): GPUs below ``fraction`` x the median of their peers.

    A GPU is one (host, gpu) pair; its value is its *best* bus bandwidth in the group (several
    communicators or algorithms: a GPU is flagged only when even its best is slow). A GPU needs
    at least 2 peers with a bandwidth. Samples without a positive bandwidth are left out (the
    Inspector writes 0 for a bucket it could not time). Raises ValueError for a fraction
    outside (0, 1].
    """
    import statistics  # level full only: not on the quick path's import bill

    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
        raise ValueError(f"fraction must be a number in (0, 1], not {fraction!r}")
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], not {fraction!r}")
    groups: Dict[Tuple[str, str, Optional[int]], Dict[Tuple[Optional[str], str], float]] = {}
    for sample in samples:
        value = sample.bus_bw_gbps
        if sample.gpu is None or value is None or not math.isfinite(value) or value <= 0:
            continue
        group = groups.setdefault((sample.kind, sample.collective, sample.message_bytes), {})
        who = (sample.host, sample.gpu)
        group[who] = max(group.get(who, 0.0), value)
    found: List[Straggler] = []
    for (kind, collective, size), members in groups.items():
        if len(members) < 3:
            continue
        for who, value in members.items():
            peers = [v for other, v in members.items() if other != who]
            median = statistics.median(peers)
            if value < fraction * median:
                found.append(
                    Straggler(
                        collective=collective,
                        message_bytes=size,
                        gpu=who[1],
                        host=who[0],
                        observed_gbps=value,
                        median_gbps=median,
                        peers=len(peers),
                        kind=kind,
                    )
                )
    return found


def _printable(text: object) -> str:
    """A value from a dump file (written by any job) made safe to print: no control
    characters (terminal escapes), at most 80 characters."""
    return "".join(ch if ch.isprintable() else "?" for ch in str(text))[:80]


def _who(host: Optional[str], gpu: Optional[str]) -> str:
    return f"{_printable(host or 'host?')}:{_printable(gpu or 'gpu?')}"


def _size(size: Optional[int]) -> str:
    if size is None:
        return "?"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} B"


def _not_runnable(run: RunOutcome) -> bool:
    """Not installed, or not executable as this user: the configured program is wrong."""
    return run.no_data == NoData.NOT_INSTALLED or (
        run.no_data == NoData.NO_PERMISSION and run.rc is None
    )


def _cross_node_floor(snap: Snapshot, th: Thresholds, hosts: int) -> Tuple[Optional[float], str]:
    """(GB/s, where from): the configured floor, else across nodes a fraction of one HCA's
    link rate (rail-optimised: each GPU's traffic leaves through its own HCA)."""
    if th.nccl_busbw_floor_gbytes is not None:
        return th.nccl_busbw_floor_gbytes, "nccl_busbw_floor_gbytes"
    if hosts < 2:
        return None, "one node: NVLink-bound, no floor unless nccl_busbw_floor_gbytes is set"
    rates = [p.rate.gbps for _, p in graded_ports(snap, th) if p.is_infiniband and p.rate]
    if not rates:
        return None, "no InfiniBand link rate to judge by"
    floor = round(max(rates) / 8 * th.nccl_min_fraction, 1)
    return floor, f"{th.nccl_min_fraction:.0%} of {max(rates):g} Gb/s = {floor:g} GB/s"


@check(
    "nccl.tests",
    title="nccl-tests: correct results, no NET/IB error, bus bandwidth above the floor",
    needs={"sysfs", "nccl_tests"},
    level="full",
)
def nccl_tests(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: the configured nccl-tests run (``nccl_tests``, e.g. all_reduce_perf) ends,
    every result is correct (``#wrong`` 0, no out-of-bounds value), NCCL prints no NET/IB
    completion error, and the bus bandwidth at the largest size reaches the floor:
    ``nccl_busbw_floor_gbytes`` (GB/s, as nccl-tests prints it), or across nodes 80% of one
    HCA's link rate (seed 004). A one-node run is NVLink-bound: reported, judged only against
    a configured floor.

    Why it matters: it is the traffic a training job makes; a NET/IB completion error
    (``status 12``: retry exceeded) names the HCA whose link dropped packets.

    What to do: a wrong result or a CUDA error is a GPU matter (nvidia-smi -q, dcgmi diag); a
    NET/IB error names the HCA: check its link and counters; low bandwidth: run ib_write_bw
    per HCA (perftest.bandwidth) and look at topology.gpu_hca.
    """
    parsed = snap.nccl_tests
    if parsed is None:
        problem = snap.problems.get("interpret.nccl_tests")
        if problem is not None:  # it ran, but the interpret step broke: its reason is recorded
            yield Result(target="node", status=Status.ERROR,
                         message=f"nccl-tests output not interpreted: {problem}")  # fmt: skip
            return
        yield Result(target="node", status=Status.SKIP,
                     message="nccl-tests not run (set nccl_tests in ibdiag.toml)")  # fmt: skip
        return
    # The run of role nccl-tests, found by role alone: nccl-tests built with NAME_SUFFIX=_mpi
    # or a site's wrapper script is the run as much as all_reduce_perf is.
    run = parsed.outcome
    evidence = [outcome_evidence(run, roles.NCCL_TESTS)]
    if run is not None and run.no_data == NoData.NOT_STARTED:  # the deadline left no time
        yield Result(target="node", status=Status.SKIP, message=f"nccl-tests {run.reason}",
                     evidence=evidence)  # fmt: skip
        return
    if run is not None and _not_runnable(run):
        yield Result(target="node", status=Status.WARN, message=f"nccl-tests: {run.reason}",
                     observed="not-runnable", evidence=evidence,
                     hint="nccl_tests in the config: the path of all_reduce_perf")  # fmt: skip
        return
    found = False
    for warning in parsed.warnings:
        if (warning.subsystem or "").upper().startswith("NET"):
            found = True
            target = f"{warning.hca}" if warning.hca else "node"
            yield Result(target=target, status=Status.FAIL, observed="net-ib-error",
                         message=f"NCCL {warning.text[:200]}", evidence=evidence,
                         hint="the HCA's link dropped or corrupted traffic: check its "
                         "counters, cable and the switch port")  # fmt: skip
    problems = list(parsed.errors)
    timed_out = run is not None and run.no_data == NoData.TIMED_OUT
    duration_s = run.duration_s if run is not None else 0.0
    cut_short = timed_out and duration_s < th.nccl_timeout_s - 0.5
    if cut_short:  # killed by --deadline or --command-timeout: a limit the caller chose
        found = True
        yield Result(target="node", status=Status.WARN, observed="cut-short",
                     message=f"nccl-tests not judged: killed after {duration_s:.1f} s by "
                     "the run's deadline or --command-timeout, before its own nccl_timeout_s "
                     f"of {th.nccl_timeout_s} s",
                     hint="give level full more time (--deadline, --command-timeout) or leave "
                     "them unset: the traffic tests then have their own bound",
                     evidence=evidence)  # fmt: skip
    elif timed_out:
        problems.insert(0, f"timed out after {duration_s:.0f} s and was killed")
    elif not parsed.finished() and not problems:
        reason = run.reason if run is not None else None
        problems.append(reason or "ended without its '# Avg bus bandwidth' line")
    if problems:
        found = True
        yield Result(target="node", status=Status.FAIL, observed="nccl-tests-failed",
                     message=f"nccl-tests failed: {problems[0][:200]}",
                     evidence=evidence)  # fmt: skip
    wrong = parsed.wrong_results()
    if wrong or parsed.out_of_bounds:
        found = True
        sizes = ", ".join(str(row.size_bytes) for row in wrong[:5])
        yield Result(target="node", status=Status.FAIL, observed="wrong-results",
                     message=f"wrong results: #wrong {parsed.wrong_total or 0} at sizes "
                     f"{sizes or '?'}; out of bounds {parsed.out_of_bounds or 0}",
                     hint="a GPU or NVLink fault: dcgmi diag -r 3", evidence=evidence)  # fmt: skip
    busbw = parsed.busbw_at_largest()
    if busbw is None or cut_short:  # a run cut short never reached its largest size
        return
    hosts = parsed.hosts()
    floor, source = _cross_node_floor(snap, th, hosts)
    if floor is not None and busbw < floor:
        yield Result(target="node", status=Status.FAIL, observed=busbw, expected=floor,
                     message=f"bus bandwidth {busbw:.1f} GB/s < {floor:g} ({source}) at "
                     f"the largest size, {len(parsed.ranks)} ranks on {hosts or 1} node(s)",
                     evidence=evidence)  # fmt: skip
    elif not found:
        relation = f">= {floor:g} ({source})" if floor is not None else f"({source})"
        yield Result(target="node", status=Status.PASS, observed=busbw, expected=floor,
                     message=f"bus bandwidth {busbw:.1f} GB/s {relation}, "
                     f"{len(parsed.ranks)} ranks on {hosts or 1} node(s), all results correct",
                     evidence=evidence)  # fmt: skip
