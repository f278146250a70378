"""perfquery: the port's PMA counters read through a MAD, as the subnet manager sees them."""

from __future__ import annotations

from typing import Dict, Iterator, NamedTuple, Optional

from ibdiag import roles
from ibdiag.command_results import command_line, skipped, symptom, symptom_result, usable_run
from ibdiag.counters.deltas import compare
from ibdiag.counters.grading import grade_errors
from ibdiag.facts.perfquery import PortPma
from ibdiag.model import Port, Result, Snapshot, Status
from ibdiag.registry import check
from ibdiag.targets import ACTIVE, graded_ports
from ibdiag.thresholds import Thresholds

_MEANING = "a hung or failing MAD agent, HCA firmware or path to the subnet manager?"
_HINT = (
    "run it by hand; check the subnet manager (sminfo), that ib_umad is loaded, the kernel log "
    "for firmware errors; send the bundle"
)
# A run that succeeded has a reading unless interpreting it broke (named in the node's problems).
_NOT_INTERPRETED = "perfquery's output was not interpreted (see the node's problems)"


def _has_pma(port: Port) -> bool:
    """False when sysfs says the port has no PMA ('N/A (no PMA)': a VM's virtual function):
    perfquery failing there is no finding."""
    return not any("no PMA" in str(why) for why in port.problems.values())


class _PmaRead(NamedTuple):
    counters: Dict[str, int]  # empty when nothing usable was read
    why: Optional[str]  # why nothing was read
    evidence: str  # the command line the counters came from (or would have)


def _read(snap: Snapshot, target: str, pma: Optional[PortPma]) -> _PmaRead:
    """Error counters from `perfquery -x` (plain perfquery when -x failed) plus `-E`."""
    reading = pma.counters if pma is not None else None
    if reading is None:
        role = roles.perfquery("x", target)
        _, why = usable_run(snap, role)
        return _PmaRead({}, why or _NOT_INTERPRETED, command_line(snap, role))
    evidence = command_line(snap, reading.role)
    if reading.mad_error:
        return _PmaRead({}, f"perfquery: {reading.mad_error}", evidence)
    counters = dict(reading.counters)
    if pma is not None and pma.rcv_error_details is not None:
        counters.update(pma.rcv_error_details.counters)
    return _PmaRead(counters, None if counters else "perfquery printed no counters", evidence)


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
        if not port.is_infiniband or port.state != ACTIVE:
            continue  # perfquery needs an ACTIVE InfiniBand port (a LID); link.state judges it
        target = dev.target(port)
        where = f"ACTIVE port {target}"
        runs = {mode: snap.run(roles.perfquery(mode, target)) for mode in ("x", "basic", "E")}
        now = _read(snap, target, port.perfquery)
        if not now.counters:
            # Neither -x nor plain perfquery answered: hung, crashed, or failing where the
            # port is ACTIVE and has a PMA - a symptom; else not applicable here.
            for run in (runs["x"], runs["basic"]):
                what = symptom(run, failing_counts=_has_pma(port))
                if run is not None and what:
                    yield symptom_result(target, run, what, where, _MEANING, _HINT)
                    break
            else:
                yield skipped(target, str(now.why), now.evidence)
            continue
        # Counters were read (plain perfquery stands in when -x fails: old firmware), yet a
        # query that hung or crashed on this port is still a symptom.
        for run in (runs["x"], runs["E"]):
            what = symptom(run)
            if run is not None and what:
                yield symptom_result(target, run, what, where, _MEANING, _HINT)
        then = comparison.previous_port(dev, port) if comparison is not None else None
        previous = None
        if then is not None:  # graded on the baseline's own typed readings
            previous = _read(comparison.baseline, target, then.perfquery).counters or None
        yield from grade_errors(
            target, now.counters, previous, comparison if previous else None, th,
            directory="perfquery", command=now.evidence,
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
        if not port.is_infiniband or port.state != ACTIVE:
            continue
        target = dev.target(port)
        role = roles.perfquery("X", target)
        reading = port.perfquery.xmit_data_sl if port.perfquery is not None else None
        if reading is None:
            failed = snap.run(role)
            what = symptom(failed)  # -X is optional (old firmware lacks it): only a hang counts
            if failed is not None and what:
                where = f"ACTIVE port {target}"
                yield symptom_result(target, failed, what, where, _MEANING, _HINT)
            else:
                _, why = usable_run(snap, role)
                yield skipped(target, why or _NOT_INTERPRETED, command_line(snap, role))
            continue
        if not reading.counters:
            yield skipped(target, reading.mad_error or "perfquery -X printed no counters",
                          command_line(snap, role))  # fmt: skip
            continue
        busy = {name: value for name, value in reading.counters.items() if value}
        shown = ", ".join(f"{name} {value}" for name, value in sorted(busy.items())) or "none"
        yield Result(target=target, status=Status.PASS,
                     message=f"transmit data per SL (4-byte words): {shown}",
                     evidence=[command_line(snap, role)])  # fmt: skip
