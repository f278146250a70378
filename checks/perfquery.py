"""perfquery: the port's PMA counters read through a MAD, as the subnet manager sees them."""

from __future__ import annotations

import dataclasses
from typing import Dict, Iterator, List, Optional

from ibdiag.command_results import skipped, symptom, symptom_result, usable_run
from ibdiag.counter_grading import grade_errors
from ibdiag.deltas import compare
from ibdiag.model import Port, Result, Snapshot, Status
from ibdiag.registry import check
from ibdiag.targets import ACTIVE, graded_ports, is_infiniband
from ibdiag.thresholds import Thresholds


def _parser():
    """perfquery's parser and argv builder.

    Loaded when a standard-level check runs: a quick run only registers this module.
    """
    from ibdiag.sources.parsers import perfquery

    return perfquery


_MEANING = "a hung or failing MAD agent, HCA firmware or path to the subnet manager?"
_HINT = (
    "run it by hand; check the subnet manager (sminfo), that ib_umad is loaded, the kernel log "
    "for firmware errors; send the bundle"
)


def _has_pma(port: Port) -> bool:
    """False when sysfs says the port has no PMA ('N/A (no PMA)': a VM's virtual function):
    perfquery failing there is no finding."""
    return not any("no PMA" in str(why) for why in port.problems.values())


@dataclasses.dataclass(frozen=True)
class _PmaRead:
    counters: Dict[str, int]  # empty when nothing usable was read
    why: Optional[str]  # why nothing was read
    argv: List[str]  # the run the counters came from (or would have)


def _read(snap: Snapshot, device: str, port: int) -> _PmaRead:
    """Error counters from `perfquery -x` (plain perfquery when -x failed) plus `-E`."""
    argv = _parser().perfquery_argv(device, port, "x")
    run, why = usable_run(snap, argv)
    if run is None:
        plain, _ = usable_run(snap, _parser().perfquery_argv(device, port, "basic"))
        if plain is not None:
            run, why = plain, None
    if run is None:
        return _PmaRead({}, why, argv)
    parsed = _parser().parse_perfquery(run.stdout + "\n" + run.stderr)
    if parsed.mad_error:
        return _PmaRead({}, f"perfquery: {parsed.mad_error}", run.argv)
    counters = dict(parsed.counters)
    details, _ = usable_run(snap, _parser().perfquery_argv(device, port, "E"))
    if details is not None:
        counters.update(_parser().parse_perfquery(details.stdout + "\n" + details.stderr).counters)
    return _PmaRead(counters, None if counters else "perfquery printed no counters", run.argv)


@check(
    "perfquery.errors",
    title="PMA error counters (perfquery) did not increase",
    needs={"perfquery"},
    level="standard",
)
def perfquery_errors(
    snap: Snapshot, th: Thresholds, baseline: Optional[Snapshot]
) -> Iterator[Result]:
    """Healthy: perfquery -x (and -E receive-error details) answers for every ACTIVE InfiniBand
    port and no error counter increased since the baseline, by the same rules as the sysfs
    counters (`ibdiag explain SymbolErrorCounter`).

    Why it matters: perfquery reads the port's PMA through a MAD - what the subnet manager and
    the fabric tools see - including the -E details (local physical vs malformed vs overrun)
    that say where receive errors come from. A perfquery that hangs, crashes or fails on an
    ACTIVE port warns, naming the command and the port: a hung firmware or a wedged MAD agent
    shows this way. Not installed, no access (not root: the MAD device), or a VM whose port has
    no PMA ('N/A (no PMA)' in sysfs) is a skip with perfquery's own reason.

    What to do: for increases, as for the sysfs counters (cable/transceiver, peer port, fabric
    path); for a MAD failure on bare metal, check the SM and that ib_umad is loaded.
    """
    comparison = compare(snap, baseline) if baseline is not None else None
    for dev, port in graded_ports(snap, th):
        if not is_infiniband(port) or port.state != ACTIVE:
            continue  # perfquery needs an ACTIVE InfiniBand port (a LID); link.state judges it
        target = dev.target(port)
        where = f"ACTIVE port {target}"
        runs = {
            kind: snap.command(_parser().perfquery_argv(dev.name, port.number, kind))
            for kind in ("x", "basic", "E")
        }
        now = _read(snap, dev.name, port.number)
        if not now.counters:
            # Neither -x nor plain perfquery answered: hung, crashed, or failing where the
            # port is ACTIVE and has a PMA - a symptom; else not applicable here.
            for run in (runs["x"], runs["basic"]):
                what = symptom(run, failing_counts=_has_pma(port))
                if run is not None and what:
                    yield symptom_result(target, run, what, where, _MEANING, _HINT)
                    break
            else:
                yield skipped(target, str(now.why), now.argv)
            continue
        # Counters were read (plain perfquery stands in when -x fails: old firmware), yet a
        # query that hung or crashed on this port is still a symptom.
        for run in (runs["x"], runs["E"]):
            what = symptom(run)
            if run is not None and what:
                yield symptom_result(target, run, what, where, _MEANING, _HINT)
        previous = None
        if comparison is not None and comparison.previous_port(dev, port) is not None:
            previous = _read(comparison.baseline, dev.name, port.number).counters or None
        yield from grade_errors(
            target, now.counters, previous, comparison if previous else None, th,
            directory="perfquery", command=" ".join(now.argv),
        )  # fmt: skip


@check(
    "perfquery.sl_traffic",
    title="Data per service level (perfquery -X, informative)",
    needs={"perfquery"},
    level="standard",
)
def sl_traffic(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: always passes - informative: which service levels carried data (perfquery -X).

    Why it matters: NCCL and storage traffic are often put on separate SLs; a job whose data
    all went to an unexpected SL points at a QoS or NCCL_IB_SL misconfiguration.

    What to do: compare with the SLs your QoS policy and NCCL_IB_SL intend.
    """
    for dev, port in graded_ports(snap, th):
        if not is_infiniband(port) or port.state != ACTIVE:
            continue
        argv = _parser().perfquery_argv(dev.name, port.number, "X")
        run, why = usable_run(snap, argv)
        if run is None:
            failed = snap.command(argv)
            what = symptom(failed)  # -X is optional (old firmware lacks it): only a hang counts
            if failed is not None and what:
                where = f"ACTIVE port {dev.target(port)}"
                yield symptom_result(dev.target(port), failed, what, where, _MEANING, _HINT)
            else:
                yield skipped(dev.target(port), str(why), argv)
            continue
        parsed = _parser().parse_perfquery(run.stdout + "\n" + run.stderr)
        if not parsed.counters:
            yield skipped(dev.target(port), parsed.mad_error or "perfquery -X printed no "
                          "counters", argv)  # fmt: skip
            continue
        busy = {name: value for name, value in parsed.counters.items() if value}
        shown = ", ".join(f"{name} {value}" for name, value in sorted(busy.items())) or "none"
        yield Result(target=dev.target(port), status=Status.PASS,
                     message=f"transmit data per SL (4-byte words): {shown}",
                     evidence=[" ".join(argv)])  # fmt: skip
