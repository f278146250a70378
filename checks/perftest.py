"""Level full: ib_write_bw loopback bandwidth per InfiniBand port."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Tuple

from ibdiag.model import CommandRun, Result, Snapshot, Status
from ibdiag.registry import check
from ibdiag.thresholds import Thresholds


@dataclass(frozen=True)
class _Attempt:
    """One recorded run: the client (where the traffic starts), the server, what it gave."""

    client: object  # ibdiag.sources.active.RecordedLoopback
    server: Optional[object]
    client_run: CommandRun
    gbps: Optional[float]
    why_not: str  # when gbps is None: the first error line either side printed


def _attempts(snap: Snapshot) -> Dict[Tuple[str, int], List[_Attempt]]:
    """(client device, port) -> its runs in attempt order (the retry uses a higher TCP port)."""
    from ibdiag.sources.active import read_loopback_argv
    from ibdiag.sources.parsers.perftest import parse_perftest

    sides: Dict[int, Dict[str, Tuple[object, CommandRun]]] = {}
    for run in snap.commands.values():
        info = read_loopback_argv(run.argv)
        if info is not None:
            sides.setdefault(info.tcp_port, {})[info.side] = (info, run)
    found: Dict[Tuple[str, int], List[_Attempt]] = {}
    for tcp_port in sorted(sides):
        if "client" not in sides[tcp_port]:
            continue
        client, client_run = sides[tcp_port]["client"]
        server, server_run = sides[tcp_port].get("server", (None, None))
        parsed = parse_perftest(f"{client_run.stdout}\n{client_run.stderr}")
        why_not = ""
        if parsed.average_gbps is None:
            errors = list(parsed.errors)
            if server_run is not None:
                errors += parse_perftest(f"{server_run.stdout}\n{server_run.stderr}").errors
            why_not = errors[0] if errors else (client_run.failure() or "no result row")
        attempt = _Attempt(client, server, client_run, parsed.average_gbps, why_not)
        found.setdefault((client.device, client.port), []).append(attempt)
    return found


def _route(attempt: _Attempt) -> str:
    """ " to mlx5_1:1" when the server was another HCA port; "" for a self loopback."""
    server, client = attempt.server, attempt.client
    if server is None or (server.device, server.port) == (client.device, client.port):
        return ""
    return f" to {server.device}:{server.port}"


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
        evidence = [" ".join(attempt.client_run.argv) for attempt in recorded]
        attempts = [attempt for attempt in recorded if not attempt.client_run.skipped]
        not_run = [attempt.client_run for attempt in recorded if attempt.client_run.skipped]
        if not attempts:  # the deadline left no time for it
            yield Result(target=target, status=Status.SKIP, evidence=evidence,
                         message=str(not_run[0].failure()))  # fmt: skip
            continue
        if attempts[-1].client_run.not_found:
            yield Result(target=target, status=Status.SKIP, evidence=evidence,
                         message="ib_write_bw is not installed (package perftest)")  # fmt: skip
            continue
        gpu = attempts[0].client.gpu
        rate = _link_rate(snap, device, number)
        server = attempts[0].server
        if server is not None and rate is not None:  # pairs: the slower port sets the floor
            server_rate = _link_rate(snap, server.device, server.port)
            rate = None if server_rate is None else min(rate, server_rate)
        floor, source = perftest_floor(rate, th, gpu is not None)
        where = _route(attempts[0]) + (f", GPU {gpu} (GPUDirect RDMA)" if gpu is not None else "")
        numbers = [attempt.gbps for attempt in attempts if attempt.gbps is not None]
        cut = [a.client_run for a in attempts if _cut_short(a.client_run, th)]
        if not numbers and cut:  # killed by --deadline or --command-timeout: no verdict
            yield Result(
                target=target,
                status=Status.WARN,
                message=f"ib_write_bw{where} not judged: {_cut_short_why(cut[-1], th)}",
                observed="cut-short",
                expected=floor,
                hint="give level full more time (--deadline, --command-timeout) or leave them "
                "unset: the traffic tests then have their own bound",
                evidence=evidence,
            )
            continue
        if not numbers:
            yield Result(
                target=target,
                status=Status.FAIL,
                message=f"ib_write_bw{where} gave no bandwidth in {len(attempts)} run(s): "
                f"{attempts[-1].why_not}",
                expected=floor,
                hint="run it by hand: ib_write_bw -d DEV & ib_write_bw -d DEV localhost",
                evidence=evidence,
            )
            continue
        best = max(numbers)
        runs = "; ".join("none" if a.gbps is None else f"{a.gbps:.1f}" for a in attempts)
        retried = f"; runs: {runs} Gb/s" if len(attempts) > 1 else ""
        if floor is None:
            yield Result(target=target, status=Status.PASS, observed=best, evidence=evidence,
                         message=f"{best:.1f} Gb/s{where} ({source}){retried}")  # fmt: skip
            continue
        ok = best >= floor
        if not ok and not_run:  # the retry that guards against one noisy run never ran
            yield Result(
                target=target,
                status=Status.WARN,
                message=f"{best:.1f} Gb/s < {floor:g} ({source}){where} once; the retry was "
                f"not run: {not_run[0].skipped}",
                observed=best,
                expected=floor,
                hint="run level full again with more time before draining the node",
                evidence=evidence,
            )
            continue
        yield Result(
            target=target,
            status=Status.PASS if ok else Status.FAIL,
            message=f"{best:.1f} Gb/s {'>=' if ok else '<'} {floor:g} ({source}){where}{retried}",
            observed=best,
            expected=floor,
            hint=None
            if ok
            else "check pci.link and topology.numa for this HCA; one slow port "
            "among fast ones: its cable or transceiver",
            evidence=evidence,
        )


def _allowance(th: Thresholds) -> float:
    from ibdiag.sources.active import STARTUP_ALLOWANCE_S

    return th.perftest_duration_s + STARTUP_ALLOWANCE_S


def _cut_short(run: CommandRun, th: Thresholds) -> bool:
    """Killed before its own timeout (duration + start-up allowance): by the run's deadline or
    by --command-timeout - a limit the caller chose, not a finding about the port."""
    return run.timed_out and run.duration_s < _allowance(th) - 0.5


def _cut_short_why(run: CommandRun, th: Thresholds) -> str:
    return (
        f"killed after {run.duration_s:.1f} s by the run's deadline or --command-timeout, "
        f"before its own {_allowance(th):g} s (perftest_duration_s + start-up)"
    )


def _link_rate(snap: Snapshot, device: str, number: int) -> Optional[float]:
    dev = snap.device(device)
    port = next((p for p in dev.ports if p.number == number), None) if dev else None
    return port.rate.gbps if port is not None and port.rate is not None else None
