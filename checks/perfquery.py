"""perfquery: the port's PMA counters read through a MAD, as the subnet manager sees them."""

from __future__ import annotations

from typing import Dict, Iterator, NamedTuple, Optional

from ibdiag import roles
from ibdiag.counters.deltas import compare
from ibdiag.counters.grading import grade_errors
from ibdiag.facts.perfquery import PortPma
from ibdiag.model import Port, Result, Snapshot, Status
from ibdiag.outcome_results import evidence, skipped, symptom_result, why_no_data
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


def _read(target: str, pma: Optional[PortPma]) -> _PmaRead:
    """Error counters from `perfquery -x` (plain perfquery when -x failed) plus `-E`."""
    reading = pma.counters if pma is not None else None
    runs = pma.runs if pma is not None else {}
    if reading is None:
        outcome = runs.get("x")
        why = _NOT_INTERPRETED if outcome is not None and outcome.no_data is None else None
        role = roles.perfquery("x", target)
        return _PmaRead({}, why or why_no_data(outcome, role), evidence(outcome, role))
    mode = reading.role.step if reading.role is not None else "x"
    used = evidence(runs.get(mode), reading.role or roles.perfquery("x", target))
    if reading.mad_error:
        return _PmaRead({}, f"perfquery: {reading.mad_error}", used)
    counters = dict(reading.counters)
    if pma is not None and pma.rcv_error_details is not None:
        counters.update(pma.rcv_error_details.counters)
    return _PmaRead(counters, None if counters else "perfquery printed no counters", used)


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
        runs = port.perfquery.runs if port.perfquery is not None else {}
        now = _read(target, port.perfquery)
        if not now.counters:
            # Neither -x nor plain perfquery answered: hung, crashed, or failing where the
            # port is ACTIVE and has a PMA - a symptom; else not applicable here.
            for outcome in (runs.get("x"), runs.get("basic")):
                what = outcome.symptom(failing_counts=_has_pma(port)) if outcome else None
                if outcome is not None and what:
                    yield symptom_result(target, outcome, what, where, _MEANING, _HINT)
                    break
            else:
                yield skipped(target, str(now.why), now.evidence)
            continue
        # Counters were read (plain perfquery stands in when -x fails: old firmware), yet a
        # query that hung or crashed on this port is still a symptom.
        for outcome in (runs.get("x"), runs.get("E")):
            what = outcome.symptom() if outcome is not None else None
            if outcome is not None and what:
                yield symptom_result(target, outcome, what, where, _MEANING, _HINT)
        then = comparison.previous_port(dev, port) if comparison is not None else None
        previous = None
        if then is not None:  # graded on the baseline's own typed readings
            previous = _read(target, then.perfquery).counters or None
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
        pma = port.perfquery
        reading = pma.xmit_data_sl if pma is not None else None
        outcome = pma.runs.get("X") if pma is not None else None
        used = evidence(outcome, role)
        if reading is None:
            what = outcome.symptom() if outcome is not None else None  # -X is optional (old
            if outcome is not None and what:  # firmware lacks it): only a hang counts
                where = f"ACTIVE port {target}"
                yield symptom_result(target, outcome, what, where, _MEANING, _HINT)
            else:
                gave = outcome is not None and outcome.no_data is None
                yield skipped(
                    target, _NOT_INTERPRETED if gave else why_no_data(outcome, role), used
                )
            continue
        if not reading.counters:
            yield skipped(target, reading.mad_error or "perfquery -X printed no counters", used)
            continue
        busy = {name: value for name, value in reading.counters.items() if value}
        shown = ", ".join(f"{name} {value}" for name, value in sorted(busy.items())) or "none"
        yield Result(target=target, status=Status.PASS,
                     message=f"transmit data per SL (4-byte words): {shown}",
                     evidence=[used])  # fmt: skip
