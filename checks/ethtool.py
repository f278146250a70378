"""ethtool -S: the physical port's own counters behind each netdev (RoCE and IPoIB)."""

from __future__ import annotations

from typing import Dict, Iterator, NamedTuple, Optional

from ibdiag import roles
from ibdiag.counters.catalogue import lookup
from ibdiag.counters.deltas import Comparison, compare
from ibdiag.counters.grading import grade_errors, since_phrase
from ibdiag.facts.outcome import RunOutcome
from ibdiag.model import Device, NetDev, Port, Result, Snapshot, Status
from ibdiag.outcome_results import evidence, skipped, symptom_result, why_no_data
from ibdiag.registry import check
from ibdiag.targets import ACTIVE, graded_ports
from ibdiag.thresholds import Thresholds


def _outcome(port: Optional[Port]) -> Optional[RunOutcome]:
    """What became of the ethtool -S run of the port's netdev; None when it was not run (or a
    reading stored without it)."""
    netdev = port.netdev if port is not None else None
    stats = netdev.ethtool if netdev is not None else None
    return stats.outcome if stats is not None else None


def _counters(port: Optional[Port]) -> Optional[Dict[str, int]]:
    """The port's netdev's ethtool -S counters; None when none were read."""
    netdev = port.netdev if port is not None else None
    stats = netdev.ethtool if netdev is not None else None
    if stats is None or (stats.outcome is not None and stats.outcome.no_data is not None):
        return None
    return stats.counters


def _previous(
    comparison: Optional[Comparison], dev: Device, port: Port
) -> Optional[Dict[str, int]]:
    """The same netdev's counters in the baseline (its own typed reading); None without."""
    then = comparison.previous_port(dev, port) if comparison is not None else None
    if then is None or then.netdev is None or port.netdev is None:
        return None
    if then.netdev.name != port.netdev.name:
        return None  # renamed: not the statistics the baseline read
    return _counters(then)


class _Read(NamedTuple):
    """What ethtool -S gave for one graded port's netdev."""

    dev: Device
    port: Port
    netdev: NetDev
    role: roles.Role
    counters: Optional[Dict[str, int]]  # None: none were read
    outcome: Optional[RunOutcome]  # None: not collected
    evidence: str  # the command line as it ran (the role, when nothing ran)


def _reads(snap: Snapshot, th: Thresholds) -> Iterator[_Read]:
    """The reading of every graded port that has a netdev."""
    for dev, port in graded_ports(snap, th):
        if port.netdev is not None:
            role = roles.ethtool_stats(port.netdev.name)
            outcome = _outcome(port)
            used = evidence(outcome, role)
            yield _Read(dev, port, port.netdev, role, _counters(port), outcome, used)


@check(
    "ethtool.errors",
    title="Physical-port error counters (ethtool -S) did not increase",
    needs={"ethtool"},
    level="standard",
)
def ethtool_errors(
    snap: Snapshot, th: Thresholds, baseline: Optional[Snapshot]
) -> Iterator[Result]:
    """Healthy: no error counter of `ethtool -S <netdev>` increased since the baseline:
    link_down_events_phy (any increase fails), *_phy symbol and CRC errors, discards,
    rx_out_of_buffer, pause-storm events - by the catalogue's rules (`ibdiag explain NAME`).

    Why it matters: for RoCE this is the only view of the Ethernet port: CRC/symbol errors are
    the cable, discards and pause storms are a lossy or congested fabric - RoCE needs a
    lossless class, and a few drops cost whole retransmission windows.

    An ethtool -S that hangs, crashes, cannot execute, or fails on an ACTIVE port's netdev
    warns, naming the command and the port; not installed, no statistics from the driver
    ("Operation not supported"), or no permission is a skip.

    What to do: errors - the cable/transceiver; discards and pause storms - PFC/ECN on host
    (mlnx_qos) and switch; out_of_buffer - the application's receive posting.
    """
    comparison = compare(snap, baseline) if baseline is not None else None
    for dev, port, netdev, role, counters, outcome, used in _reads(snap, th):
        if not counters:
            # A non-zero exit is a finding on an ACTIVE port's netdev; a driver without
            # statistics (NOT_SUPPORTED: not an mlx5 netdev) is not.
            what = outcome.symptom(failing_counts=port.state == ACTIVE) if outcome else None
            if outcome is not None and what:
                state = "ACTIVE port" if port.state == ACTIVE else "port"
                yield symptom_result(
                    dev.target(port), outcome, what, f"{netdev.name} of {state} "
                    f"{dev.target(port)}", "a hung or failing driver (mlx5_core) or firmware?",
                    "run it by hand; check the kernel log for mlx5_core errors; send the bundle",
                )  # fmt: skip
                continue
            gave = outcome is not None and outcome.no_data is None
            why = None if gave else why_no_data(outcome, role)
            yield skipped(dev.target(port), why or "ethtool -S printed no counters", used)
            continue
        previous = _previous(comparison, dev, port)
        results = grade_errors(
            dev.target(port), counters, previous, comparison if previous else None, th,
            directory="ethtool", command=used,
        )  # fmt: skip
        if results:
            yield from results
        else:
            yield Result(
                target=dev.target(port),
                status=Status.PASS,
                message=f"{netdev.name}: no catalogued error counters in "
                "ethtool -S (not an mlx5 netdev?)",
                evidence=[used],
            )


@check(
    "ethtool.pause",
    title="Pause and PFC frames per priority (reported)",
    needs={"ethtool"},
    level="standard",
)
def ethtool_pause(snap: Snapshot, th: Thresholds, baseline: Optional[Snapshot]) -> Iterator[Result]:
    """Healthy: always passes - reported: pause/PFC frames sent and received per priority
    and the other congestion counters of `ethtool -S`, since the baseline or since boot.

    Why it matters: PFC keeps RoCE lossless but a port that pauses far more than its peers is
    congested or is the victim of a slow receiver; with the RoCE discards it explains a slow job.

    What to do: compare across the node's ports and the job's nodes; check ECN/DCQCN settings.
    """
    comparison = compare(snap, baseline) if baseline is not None else None
    for dev, port, netdev, _, counters, _, used in _reads(snap, th):
        if not counters:
            continue  # ethtool.errors already said why
        congestion = {n: v for n, v in counters.items() if lookup(n).category == "congestion"}
        if not congestion:
            continue
        previous = _previous(comparison, dev, port)
        if comparison is not None and previous:
            moved = [
                f"{c.name} +{c.delta}" for c in comparison.changes(congestion, previous) if c.delta
            ]
            text = f"{since_phrase(comparison)}: " + (", ".join(moved) or "none")
        else:
            nonzero = [f"{name} {value}" for name, value in sorted(congestion.items()) if value]
            text = "since boot or the last reset: " + (", ".join(nonzero) or "none")
        yield Result(target=dev.target(port), status=Status.PASS,
                     message=f"{netdev.name} pause/congestion {text}",
                     evidence=[used])  # fmt: skip
