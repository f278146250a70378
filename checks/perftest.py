"""Level full: ib_write_bw loopback bandwidth per InfiniBand port."""

from __future__ import annotations

from typing import Dict, Iterator, List, Optional, Tuple

from ibdiag.check_results import about
from ibdiag.facts.loopback import LoopbackAttempt
from ibdiag.facts.outcome import NoData, RunOutcome
from ibdiag.model import Result, Snapshot, Status
from ibdiag.outcome_results import evidence as evidence_of
from ibdiag.registry import check
from ibdiag.thresholds import Thresholds


def _never_started(run: Optional[RunOutcome]) -> bool:
    """The deadline left no time for the run (recorded as never started, with why)."""
    return run is not None and run.no_data == NoData.NOT_STARTED


def _attempts(snap: Snapshot) -> Dict[Tuple[str, int], List[LoopbackAttempt]]:
    """(client device, port) -> its attempts in order, ports in the order they were tested."""
    found: Dict[Tuple[str, int], List[LoopbackAttempt]] = {}
    for fact in snap.loopback or []:
        found.setdefault((fact.client_device, fact.client_port), []).append(fact)
    return {port: sorted(runs, key=lambda a: a.attempt) for port, runs in found.items()}


def _route(fact: LoopbackAttempt) -> str:
    """ " to mlx5_1:1" when the server was another HCA port; "" for a self loopback."""
    if fact.server is None or fact.server == fact.client:
        return ""
    return f" to {fact.server}"


@check(
    "perftest.bandwidth",
    title="ib_write_bw loopback reaches the port's bandwidth floor",
    needs={"sysfs", "topology", "gpu_topology", "perftest"},
    level="full",
)
def bandwidth(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: an RDMA write test between two processes on the node (the same HCA port, or
    paired HCAs through the switch) moves at least the floor: the profile's number (Azure: 380
    Gb/s per ND H100 v5 HCA with GPUDirect RDMA, 180 on ND A100 v4, 390 on HBv4), else 90% of
    the port's link rate. A run below it is retried once; the better run counts.

    Why it matters: a port can be ACTIVE, at full rate and error-free and still deliver half
    its bandwidth (PCIe trained at x8, wrong NUMA pinning, firmware); only traffic shows it.

    What to do: compare with the HCA's PCIe link (pci.link) and NUMA node (topology.numa);
    reseat or replace the cable/transceiver for a slow port among fast ones; send the bundle.
    """
    from ibdiag.bandwidth import perftest_floor

    tests = _attempts(snap)
    if not tests:
        yield Result(
            target="node",
            status=Status.SKIP,
            message="no ib_write_bw ran (no ACTIVE InfiniBand port, or not level full)",
        )
        return
    for (device, number), recorded in tests.items():
        target = f"{device}:{number}"
        evidence = [evidence_of(attempt.client_run, attempt.client_role) for attempt in recorded]
        result = about(target, evidence)
        attempts = [attempt for attempt in recorded if not _never_started(attempt.client_run)]
        not_run = [a.client_run for a in recorded if a.client_run and _never_started(a.client_run)]
        if not attempts:  # the deadline left no time for it
            yield result(status=Status.SKIP, message=str(not_run[0].reason))
            continue
        last_run = attempts[-1].client_run
        if last_run is not None and last_run.no_data == NoData.NOT_INSTALLED:
            yield result(
                status=Status.SKIP, message="ib_write_bw is not installed (package perftest)"
            )
            continue
        gpu = attempts[0].gpu
        rate = _link_rate(snap, device, number)
        first = attempts[0]
        if first.server_device is not None and first.server_port is not None and rate is not None:
            # pairs: the slower port sets the floor
            server_rate = _link_rate(snap, first.server_device, first.server_port)
            rate = None if server_rate is None else min(rate, server_rate)
        floor, source = perftest_floor(rate, th, gpu is not None)
        where = _route(attempts[0]) + (f", GPU {gpu} (GPUDirect RDMA)" if gpu is not None else "")
        numbers = [attempt.gbps for attempt in attempts if attempt.gbps is not None]
        cut = [a.client_run for a in attempts if a.client_run and _cut_short(a.client_run, th)]
        if not numbers and cut:  # killed by --deadline or --command-timeout: no verdict
            yield result(
                status=Status.WARN,
                message=f"ib_write_bw{where} not judged: {_cut_short_why(cut[-1], th)}",
                observed="cut-short",
                expected=floor,
                hint="give level full more time (--deadline, --command-timeout) or leave them "
                "unset: the traffic tests then have their own bound",
            )
            continue
        if not numbers:
            yield result(
                status=Status.FAIL,
                message=f"ib_write_bw{where} gave no bandwidth in {len(attempts)} run(s): "
                f"{attempts[-1].why_not}",
                expected=floor,
                hint="run it by hand: ib_write_bw -d DEV & ib_write_bw -d DEV localhost",
            )
            continue
        best = max(numbers)
        gbps = [attempt.gbps for attempt in attempts]
        runs = "; ".join("none" if value is None else f"{value:.1f}" for value in gbps)
        retried = f"; runs: {runs} Gb/s" if len(attempts) > 1 else ""
        if floor is None:
            yield result(
                status=Status.PASS,
                observed=best,
                message=f"{best:.1f} Gb/s{where} ({source}){retried}",
            )
            continue
        ok = best >= floor
        if not ok and not_run:  # the retry that guards against one noisy run never ran
            yield result(
                status=Status.WARN,
                message=f"{best:.1f} Gb/s < {floor:g} ({source}){where} once; the retry was "
                f"not run: {_why_not_started(not_run[0])}",
                observed=best,
                expected=floor,
                hint="run level full again with more time before draining the node",
            )
            continue
        yield result(
            status=Status.PASS if ok else Status.FAIL,
            message=f"{best:.1f} Gb/s {'>=' if ok else '<'} {floor:g} ({source}){where}{retried}",
            observed=best,
            expected=floor,
            hint=None
            if ok
            else "check pci.link and topology.numa for this HCA; one slow port "
            "among fast ones: its cable or transceiver",
        )


def _allowance(th: Thresholds) -> float:
    from ibdiag.bandwidth import perftest_timeout_s

    return perftest_timeout_s(th)


def _why_not_started(run: RunOutcome) -> str:
    """Why a run never started, without the tool's name (``ib_write_bw not run: <why>``)."""
    reason = run.reason or ""
    return reason.split(" not run: ", 1)[1] if " not run: " in reason else reason


def _cut_short(run: RunOutcome, th: Thresholds) -> bool:
    """Killed before its own timeout (duration + start-up allowance): by the run's deadline or
    by --command-timeout - a limit the caller chose, not a finding about the port."""
    return run.no_data == NoData.TIMED_OUT and run.duration_s < _allowance(th) - 0.5


def _cut_short_why(run: RunOutcome, th: Thresholds) -> str:
    return (
        f"killed after {run.duration_s:.1f} s by the run's deadline or --command-timeout, "
        f"before its own {_allowance(th):g} s (perftest_duration_s + start-up)"
    )


def _link_rate(snap: Snapshot, device: str, number: int) -> Optional[float]:
    dev = snap.device(device)
    port = next((p for p in dev.ports if p.number == number), None) if dev else None
    return port.rate.gbps if port is not None and port.rate is not None else None
