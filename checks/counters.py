"""Counter checks: judged on change since a baseline, never on lifetime history alone."""

from __future__ import annotations

from typing import Dict, Iterator, List, Optional

from ibdiag.counters.baseline import BASELINE_PROBLEM, STATE_PROBLEM
from ibdiag.counters.catalogue import lookup
from ibdiag.counters.deltas import Comparison, compare
from ibdiag.counters.grading import format_interval, grade_errors, saturated, since_phrase
from ibdiag.model import Result, Snapshot, Status
from ibdiag.registry import check
from ibdiag.targets import graded_devices, graded_ports
from ibdiag.thresholds import Thresholds


def _comparison(snap: Snapshot, baseline: Optional[Snapshot]) -> Optional[Comparison]:
    return compare(snap, baseline) if baseline is not None else None


def _none_readable(target: str, port, directory: str) -> Result:
    """A port whose counter directory is missing or held nothing numeric: say so, do not pass."""
    unreadable = sorted(key for key in port.problems if key.startswith(f"{directory}/"))
    if unreadable:
        why = f"{len(unreadable)} unreadable, e.g. {unreadable[0]}: {port.problems[unreadable[0]]}"
    else:
        why = port.problems.get(directory, "none present")
    return Result(
        target=target,
        status=Status.SKIP,
        message=f"no {directory} readable under {port.path}/{directory} ({why})",
        evidence=[f"{port.path}/{directory}"],
    )


@check("counters.baseline", title="Baseline for counter deltas is usable", needs={"sysfs"})
def baseline_state(
    snap: Snapshot, th: Thresholds, baseline: Optional[Snapshot]
) -> Iterator[Result]:
    """Healthy: a baseline from this node, earlier in time, covering every port; or none. With
    --state, the state file was saved for the next run.

    Why it matters: counters are judged on change since the baseline. A baseline from another
    host, a corrupt state file, or a clock that went backwards would make that change wrong;
    ibdiag then compares only what matches (same device name and GUID) and says what did not.
    Without a baseline, lifetime values are shown but not graded on change. A state file that
    cannot be written (its directory missing, a read-only filesystem) means every later run
    has no baseline either: counters would never be graded on their change, silently.

    What to do: give a baseline with --baseline FILE (from `ibdiag snapshot -o FILE` or the
    Slurm prolog), or --state FILE so every run compares with the previous one. A corrupt
    state file is replaced by this run's snapshot; a state file's directory is created when
    its parent exists - otherwise create it, or choose a writable path.
    """
    result = _baseline_result(snap, baseline)
    unsaved = snap.problems.get(STATE_PROBLEM)
    if unsaved:
        told = f"; {result.message}" if result.status is Status.WARN else ""
        result = Result(
            target="node",
            status=Status.WARN,
            message=f"{unsaved}: the next run has no baseline{told}",
            hint="create the state file's directory or give --state a writable path "
            "(e.g. /var/lib/ibdiag/nhc-state.json)",
            evidence=[STATE_PROBLEM, *result.evidence],
        )
    yield result


def _baseline_result(snap: Snapshot, baseline: Optional[Snapshot]) -> Result:
    """What counters.baseline says of the baseline itself: usable, missing, or off."""
    problem = snap.problems.get(BASELINE_PROBLEM)
    if problem:
        return Result(
            target="node",
            status=Status.WARN,
            message=f"baseline unusable, counters graded without one: {problem}",
            hint="the state file is rewritten by this run; a --baseline file must be a "
            "snapshot written by `ibdiag snapshot`",
            evidence=[BASELINE_PROBLEM],
        )
    if baseline is None:
        return Result(
            target="node",
            status=Status.SKIP,
            message="no baseline: lifetime counters shown, not graded on change "
            "(use --baseline or --state)",
        )
    comparison = compare(snap, baseline)
    taken = baseline.collected_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    issues: List[str] = []
    if comparison.other_host:
        issues.append(f"it is from host {baseline.host}, not {snap.host}")
    if comparison.hours is None:
        issues.append(f"it was taken at {taken}, not before this snapshot (clock skew?): no rates")
    if comparison.unmatched:
        issues.append(f"not in it (lifetime values used): {', '.join(comparison.unmatched)}")
    if issues:
        return Result(
            target="node",
            status=Status.WARN,
            message=f"baseline of {taken}: " + "; ".join(issues),
            observed=baseline.host,
            hint="use a baseline taken on this node (ibdiag snapshot -o FILE)",
        )
    reboot = (
        "; the node rebooted since, so counters restarted from zero" if comparison.rebooted else ""
    )
    ago = format_interval(comparison.hours or 0)
    return Result(target="node", status=Status.PASS,
                  message=f"baseline of {taken}, {ago} ago{reboot}",
                  observed=round(comparison.hours or 0, 4))  # fmt: skip


@check("counters.port_errors", title="Port error counters did not increase", needs={"sysfs"})
def port_errors(snap: Snapshot, th: Thresholds, baseline: Optional[Snapshot]) -> Iterator[Result]:
    """Healthy: no error counter under ports/N/counters increased since the baseline.

    Why it matters: symbol errors, receive errors and link downs during a job are a failing
    cable or transceiver slowing every collective, long before the port goes down. Lifetime
    values are not judged (3 symbol errors in 90 days is fine); change is. Defaults: link_downed,
    local_link_integrity_errors, excessive_buffer_overrun_errors - any increase fails;
    symbol_error, port_rcv_errors - any increase warns, above 120/hour fails; see
    `ibdiag explain COUNTER` for each counter's rule and its reason.

    What to do: reseat or replace the cable/transceiver on the port that moved and check the
    peer switch port (ibqueryerrors); tune rules per counter in the config's [counters.NAME].
    """
    comparison = _comparison(snap, baseline)
    for dev, port in graded_ports(snap, th):
        if not port.counters:
            yield _none_readable(dev.target(port), port, "counters")
            continue
        previous = comparison.previous_port(dev, port) if comparison else None
        yield from grade_errors(
            dev.target(port), port.counters, previous.counters if previous else None,
            comparison, th, f"{port.path}/counters",
        )  # fmt: skip


@check("counters.hw_errors", title="HCA transport error counters did not increase")
def hw_errors(snap: Snapshot, th: Thresholds, baseline: Optional[Snapshot]) -> Iterator[Result]:
    """Healthy: no mlx5 hw_counters error (per port or per device) increased since the baseline.

    Why it matters: these see what port counters miss: ACK timeouts and transport retries
    exceeded (a peer unreachable: NCCL stalls for seconds), sequence errors (loss or reordering
    in the fabric), completion errors (HCA or firmware trouble). *_flush_error counters only
    count QP teardown at job end and are informative.

    What to do: timeouts and sequence errors - look at the path (peer nodes, switch counters);
    completion errors - dmesg and the firmware; out_of_buffer - the application's receive
    posting. `ibdiag explain COUNTER` gives each rule and its reason.
    """
    comparison = _comparison(snap, baseline)
    for dev in graded_devices(snap, th):
        previous_dev = comparison.previous_device(dev) if comparison else None
        yield from grade_errors(
            dev.name, dev.hw_counters, previous_dev.hw_counters if previous_dev else None,
            comparison, th, f"{dev.path}/hw_counters",
        )  # fmt: skip
        for port in dev.ports:
            if not port.hw_counters:
                yield _none_readable(dev.target(port), port, "hw_counters")
                continue
            previous = comparison.previous_port(dev, port) if comparison else None
            yield from grade_errors(
                dev.target(port), port.hw_counters,
                previous.hw_counters if previous else None,
                comparison, th, f"{port.path}/hw_counters",
            )  # fmt: skip


@check("counters.saturation", title="No counter is stuck at its maximum", needs={"sysfs"})
def saturation(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: no fixed-width counter reads its maximum (255, 65535, 4294967295; 15 for the
    4-bit integrity counters).

    Why it matters: IB port counters do not wrap: at their maximum they stop, so further errors
    are invisible and deltas on them read zero. A saturated error counter hides a live fault.

    What to do: reset the port's counters when convenient (perfquery -x -R on the node, or the
    SM side); ibdiag itself never resets a counter.
    """
    for dev, port in graded_ports(snap, th):
        stuck = saturated(port.counters)
        for info in stuck:
            yield Result(
                target=dev.target(port), status=Status.WARN,
                message=f"{info.name} stuck at {info.saturated_value} ({info.width}-bit "
                "maximum): it can no longer count, so its changes mean nothing",
                observed=info.saturated_value, expected=f"below {info.saturated_value}",
                hint="reset the port counters when convenient (perfquery -x -R); "
                "ibdiag never resets counters",
                evidence=[f"{port.path}/counters/{info.name}"],
            )  # fmt: skip
        if not stuck and any(lookup(name).width for name in port.counters):
            yield Result(
                target=dev.target(port),
                status=Status.PASS,
                message="no counter at its maximum",
                evidence=[f"{port.path}/counters"],
            )


def _report(snap, th, baseline, category: str, describe) -> Iterator[Result]:
    """One informative pass result per port that has counters of ``category``."""
    comparison = _comparison(snap, baseline)
    for dev, port in graded_ports(snap, th):
        values = {
            name: value
            for name, value in {**port.counters, **port.hw_counters}.items()
            if lookup(name).category == category
        }
        if not values:
            continue
        previous = comparison.previous_port(dev, port) if comparison else None
        if comparison is not None and previous is not None:
            before = {**previous.counters, **previous.hw_counters}
            changes = {c.name: c for c in comparison.changes(values, before)}
            text = describe(values, changes, since_phrase(comparison), comparison.hours)
        else:
            text = describe(values, None, "since boot or the last reset", None)
        yield Result(
            target=dev.target(port), status=Status.PASS, message=text, evidence=[port.path]
        )


def _congestion_text(values, changes, since, hours) -> str:
    if changes is not None:
        moved = [
            f"{c.name} +{c.delta}" + (f" ({c.per_hour:.0f}/hour)" if c.per_hour is not None else "")
            for c in changes.values() if c.delta
        ]  # fmt: skip
        return f"congestion {since}: " + (", ".join(moved) if moved else "none")
    nonzero = [f"{name} {value}" for name, value in values.items() if value]
    return f"congestion {since}: " + (", ".join(nonzero) if nonzero else "none")


@check("counters.congestion", title="Congestion counters (reported)", needs={"sysfs"})
def congestion(snap: Snapshot, th: Thresholds, baseline: Optional[Snapshot]) -> Iterator[Result]:
    """Healthy: always passes - reported, not graded: port_xmit_wait (ticks with data to send
    but no credits) and the RoCE congestion-control counters (CNPs sent/handled, ECN marks).

    Why it matters: they grow with load, so they say nothing alone; beside a slow job, a port
    whose xmit_wait climbs far faster than its peers' points at a congested or slow link.

    What to do: compare the rate across the node's ports and across nodes in the job;
    persistent hot spots point at the switch path (routing, oversubscription, a slow link).
    """
    yield from _report(snap, th, baseline, "congestion", _congestion_text)


_DATA = (("port_rcv_data_64", "port_rcv_data"), ("port_xmit_data_64", "port_xmit_data"))


def _bytes(words: int) -> str:
    value = float(words * 4)  # port_*_data counts 4-byte words
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if value < 1000 or unit == "PB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1000
    return f"{value:.1f} PB"  # pragma: no cover - the loop always returns


def _traffic_text(values: Dict[str, int], changes, since: str, hours) -> str:
    parts = []
    for label, names in zip(("received", "sent"), _DATA):
        name = next((n for n in names if n in values), None)
        if name is None:
            continue
        if changes is not None:
            words = changes[name].delta or 0
            rate = f" ({words * 32 / hours / 3600 / 1e9:.2f} Gb/s average)" if hours else ""
            parts.append(f"{label} {_bytes(words)}{rate}")
        else:
            parts.append(f"{label} {_bytes(values[name])}")
    return f"traffic {since}: " + (", ".join(parts) if parts else "no data counters")


@check("counters.traffic", title="Traffic counters (informative)", needs={"sysfs"})
def traffic(snap: Snapshot, th: Thresholds, baseline: Optional[Snapshot]) -> Iterator[Result]:
    """Healthy: always passes - informative: data received and sent per port (port_*_data
    counts 4-byte words, so bytes = value x 4), since the baseline with its average rate.

    Why it matters: confirms traffic really flowed on every rail during a job; a rail that
    moved far less than its siblings was not used (NCCL topology, a down port) or was slow.

    What to do: compare ports; a silent rail during a multi-node job deserves a look at the
    job's NCCL_IB_HCA setting and the port's state.
    """
    yield from _report(snap, th, baseline, "traffic", _traffic_text)
