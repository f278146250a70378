"""The far end of each cable: the switch port (or the other HCA) an ACTIVE InfiniBand port is
plugged into, as read from this node (``Port.partner``, ``ibdiag.sources.partner``).

Results name the cable by both ends - ``mlx5_3:1<->leaf07/21``: our device and port, the
partner's short name (``leaf07`` from the node description ``MF0;leaf07:MQM9700/U1``; else the
description; else its node GUID) and its port - so a drain reason says which cable, stably.
When the far end could not be read the result is a ``skip`` with the tool's own reason (not
root, no subnet manager yet, a MAD timeout, tools missing, a switch without a PMA), never a
fail: a node is not drained for a permission.
"""

from __future__ import annotations

import re
from typing import Iterator, List, Optional, Sequence, Tuple

from ibdiag import roles
from ibdiag.command_results import command_line
from ibdiag.counter_grading import grade_errors, saturated
from ibdiag.deltas import Comparison, compare, previous_partner, read_far_ends
from ibdiag.facts.partner import (
    ACTIVE_STATE,
    SPEEDS,
    WIDTHS,
    Partner,
    PortInfo,
    cable_name,
    link_speed,
    short_name,
)
from ibdiag.model import CommandRun, Device, Port, Result, Snapshot, Status
from ibdiag.registry import check
from ibdiag.targets import ACTIVE, graded_ports
from ibdiag.thresholds import Thresholds

# Why the far end could not be read, from the failing run's own words: (stable word, phrase).
_NO_ACCESS = re.compile(
    r"Permission denied|Operation not permitted|can't open UMAD port|Failed to open '"
    r"|is ib_umad module loaded|No IB devices found",
    re.IGNORECASE,
)
_NO_ANSWER = re.compile(r"_do_madrpc failed|query failed|timeout|timed out", re.IGNORECASE)
_NO_SM = re.compile(r"LID is 0|can't resolve destination port 0", re.IGNORECASE)
_PMA_STEPS = ("perfquery-x", "perfquery", "perfquery-E")


def cable_target(dev: Device, port: Port, partner: Optional[Partner]) -> str:
    """``mlx5_3:1<->leaf07/21``; just ``mlx5_3:1`` while nothing is known of the far end
    (``ibdiag.facts.partner.cable_name``: the Prometheus renderer names the cable alike)."""
    return cable_name(dev.target(port), partner)


def _active_ib_ports(snap: Snapshot, th: Thresholds) -> Iterator[Tuple[Device, Port]]:
    for dev, port in graded_ports(snap, th):
        if port.is_infiniband and port.state == ACTIVE:
            yield dev, port


# --- why the far end is unknown ----------------------------------------------------------------


def _root_failure(snap: Snapshot, target: str, steps: Sequence[str]) -> Optional[CommandRun]:
    """The run that stopped the chain: the first of ``steps`` that ran and failed; else the
    first never started (its reason names the step it needed)."""
    never: Optional[CommandRun] = None
    for step in steps:
        run = snap.run(roles.partner(step, target))
        if run is None or run.succeeded:
            continue
        if run.skipped:
            never = never or run
            continue
        return run
    return never


def unread_reason(snap: Snapshot, target: str, steps: Sequence[str]) -> Tuple[str, str, str]:
    """(stable word, one-line reason, evidence) for a far end ``steps`` did not read."""
    run = _root_failure(snap, target, steps)
    if run is None:
        role = roles.partner(steps[0], target)
        return (
            "not-collected",
            f"the far end of {target} was not read (`{role}` not collected: level quick, "
            "an older bundle, or a port not ACTIVE then)",
            role,
        )
    failure = run.failure() or ""
    text = f"{failure}\n{run.stderr}\n{run.stdout}"
    evidence = " ".join(run.argv)
    nodeinfo = snap.run(roles.partner("nodeinfo", target))
    smp_ok = nodeinfo is not None and nodeinfo.succeeded
    pma = run.argv[:1] == ["perfquery"]
    if run.not_found:
        word, why = "not-installed", "the infiniband-diags tools are not installed"
    elif run.permission_denied or _NO_ACCESS.search(text):
        word, why = "no-access", "the umad device cannot be opened as this user (not root?)"
    elif _NO_SM.search(text):
        word, why = "no-sm", "no subnet manager has configured the far end yet (LID 0)"
    elif pma and smp_ok and (run.timed_out or _NO_ANSWER.search(text)):
        word = "no-pma"
        why = "the far end answers SMPs but not PMA queries (an unmanaged switch?)"
    elif run.timed_out or _NO_ANSWER.search(text):
        word, why = "mad-timeout", "the far end did not answer (MAD timeout)"
    else:
        word, why = "unread", "the far end could not be read"
    return word, f"{why}: {failure}", evidence


def _skip(target: str, word: str, message: str, evidence: str) -> Result:
    return Result(
        target=target, status=Status.SKIP, message=message, observed=word, evidence=[evidence]
    )


# --- link.partner ------------------------------------------------------------------------------


def _ours(port: Port, local: Optional[PortInfo]) -> Tuple[Optional[str], Optional[str], str]:
    """Our port's (width, speed, where from): sysfs ``rate`` first (what the kernel says the
    link runs at), else our own SMA's PortInfo (read only where it can matter:
    ``ibdiag.facts.partner.local_port_info_matters``)."""
    rate = port.rate
    width = rate.width if rate is not None else None
    speed = link_speed(rate.speed) if rate is not None else None
    where = f"{port.path}/rate"
    if local is not None:
        if width is None:
            width, where = local.width_active, local.role
        if speed is None:
            speed, where = link_speed(local.speed_active), local.role
    return width, speed, where


def _best_common(order: Sequence[str], *lists: List[str]) -> Optional[str]:
    """The highest value every non-empty list allows; None when none is known or none shared."""
    known = [set(values) for values in lists if values]
    if len(known) < 2:
        return None
    common = set(order).intersection(*known)
    return max(common, key=order.index) if common else None


def _below(order: Sequence[str], active: Optional[str], best: Optional[str]) -> bool:
    return active in order and best in order and order.index(active) < order.index(best)


def _link_result(
    target: str, dev: Device, port: Port, partner: Partner, info: PortInfo, snap: Snapshot
) -> Result:
    far = f"{short_name(partner)}/{partner.port}"
    local = dev.target(port)
    evidence = [command_line(snap, info.role)]
    state = f"{info.link_state or '?'}/{info.phys_link_state or '?'}"
    if (info.link_state, info.phys_link_state) != ACTIVE_STATE:
        return Result(
            target=target, status=Status.FAIL,
            message=f"far end {far} of {local} is {state}, expected Active/LinkUp",
            observed=state, expected="Active/LinkUp",
            hint="the switch side of the cable is not up: check the switch port (disabled, "
            "errors, SM), reseat or replace the cable",
            evidence=evidence,
        )  # fmt: skip
    ours = partner.local_port_info
    width, speed, where = _ours(port, ours)
    if where not in evidence:
        evidence.append(where)
    if info.width_active is None or info.speed_active is None:
        unknown = "its PortInfo named no active width or speed"
    elif width is None or speed is None:
        unknown = "our width or speed is unknown (no sysfs rate, and our PortInfo not read)"
    else:
        unknown = ""
    if unknown:  # nothing to compare is no pass: say what could not be read
        return Result(
            target=target, status=Status.SKIP,
            message=f"far end {far} of {local} is {state}, but {unknown}: the cable's width "
            "and speed are not compared",
            observed="unread", evidence=evidence,
        )  # fmt: skip
    theirs = f"{info.width_active} {info.speed_active}"
    mine = f"{width} {speed}"
    mismatched = [
        what
        for what, a, b in (("width", width, info.width_active), ("speed", speed, info.speed_active))
        if a != b
    ]
    if mismatched:
        return Result(
            target=target, status=Status.FAIL,
            message=f"{' and '.join(mismatched)} differ across the cable: {local} runs {mine}, "
            f"its far end {far} {theirs}",
            observed=theirs, expected=mine,
            hint="both ends of a cable must agree: reseat or replace the cable/transceiver, "
            "then check both ports' enabled widths and speeds",
            evidence=evidence,
        )  # fmt: skip
    lists = (ours.width_enabled, ours.width_supported) if ours is not None else ([], [])
    best_width = _best_common(
        WIDTHS, lists[0], lists[1], info.width_enabled, info.width_supported
    ) if ours is not None else None  # fmt: skip
    speeds = (ours.speed_enabled, ours.speed_supported) if ours is not None else ([], [])
    best_speed = _best_common(
        SPEEDS, speeds[0], speeds[1], info.speed_enabled, info.speed_supported
    ) if ours is not None else None  # fmt: skip
    could = [
        best
        for order, active, best in ((WIDTHS, width, best_width), (SPEEDS, speed, best_speed))
        if _below(order, active, best)
    ]
    if could:
        return Result(
            target=target, status=Status.FAIL,
            message=f"the cable {local}<->{far} runs {theirs}, could be {' '.join(could)} "
            "(what both ends enable and support)",
            observed=theirs, expected=f"{best_width or width} {best_speed or speed}",
            hint="a link that trained below what both ends can do is a bad lane or a marginal "
            "cable/transceiver: reseat or replace it",
            evidence=evidence,
        )  # fmt: skip
    return Result(
        target=target, status=Status.PASS,
        message=f"{local} {mine} <-> {far} {state} {theirs}",
        observed=state, expected="Active/LinkUp",
        evidence=evidence,
    )  # fmt: skip


@check(
    "link.partner",
    title="The far end of each cable is up at our width and speed",
    needs={"sysfs", "partner"},
    level="standard",
)
def link_partner(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: for every ACTIVE InfiniBand port, the port at the far end of its cable (read
    from this node: smpquery -D nodeinfo/portinfo 0,1 through our own port) is Active/LinkUp, at
    the same width and speed as ours, and neither runs below what both ends enable and support
    ("could be 4X", as iblinkinfo says it).

    Why it matters: the switch side often knows more than the node: a port that trained at 2X
    or at a lower speed shows it on both ends, but only the pair of enabled/supported fields
    says it could do better; a switch port that is not Active while ours is points at the
    switch or the cable. The result names the cable by both ends (mlx5_3:1<->leaf07/21).

    What to do: a mismatch or a link below its capability - reseat, then replace the cable or
    transceiver and check the switch port; a far end not Active - check the switch port and the
    SM. A far end that could not be read (not root: the umad device; no SM yet: LID 0; a MAD
    timeout; the tools missing) is a skip with the tool's own reason: run as root with
    infiniband-diags installed.
    """
    for dev, port in _active_ib_ports(snap, th):
        partner = port.partner
        target = cable_target(dev, port, partner)
        info = partner.port_info if partner is not None else None
        if partner is None or info is None:
            word, why, evidence = unread_reason(snap, dev.target(port), ("nodeinfo", "portinfo"))
            yield _skip(target, word, why, evidence)
            continue
        yield _link_result(target, dev, port, partner, info, snap)


# --- counters.partner --------------------------------------------------------------------------


@check(
    "counters.partner",
    title="The far end's error counters did not increase",
    needs={"sysfs", "partner"},
    level="standard",
)
def counters_partner(
    snap: Snapshot, th: Thresholds, baseline: Optional[Snapshot]
) -> Iterator[Result]:
    """Healthy: no error counter of the port at the far end of each ACTIVE InfiniBand port's
    cable (perfquery -x, or plain perfquery, on the partner's LID and port, read from this
    node) increased since the baseline, graded exactly like our own port's counters: the same
    catalogue, rules, thresholds and rates (`ibdiag explain symbol_error`), and none stuck at
    its maximum.

    Why it matters: a dirty connector or a failing transceiver often shows symbol and receive
    errors only on the switch side of the cable; the fabric tools that read it need a
    management host, this reads it from every node. The baseline's value is the one of the
    same far-end port (node GUID and port number): a re-cabled port starts fresh, and a value
    that went down (a switch reboot, a counter reset) counts from zero, not as a spike. Never
    graded on lifetime totals: without a baseline (--baseline or --state) it passes, saying so.
    Only counters both readings hold are compared: the receive error details (perfquery -E)
    are read only while PortRcvErrors or PortRcvSwitchRelayErrors is not 0, so the run where
    such errors first appear has no details in its baseline and grades them through those
    totals (whose increase includes the details', with the same rules), the details from the
    next run on. A reading of perfquery -x (64-bit PortCountersExtended) is never compared with
    one of plain perfquery (16/32-bit PortCounters, saturating, cleared apart): a run read
    otherwise than its baseline skips, and only the fixed-width ones can saturate.

    What to do: reseat or replace the cable/transceiver named by both ends (mlx5_3:1<->leaf07/21)
    and check the switch port (ibqueryerrors). A far end that could not be read (not root, no
    SM yet, a MAD timeout, an unmanaged switch without a PMA) is a skip with the reason.
    """
    comparison: Optional[Comparison] = None
    if baseline is not None:  # the switch's counters do not restart when this node reboots
        comparison = compare(snap, baseline)._replace(
            rebooted=False, reset_cause="the far end rebooted or its counters were cleared"
        )
    for dev, port in _active_ib_ports(snap, th):
        partner = port.partner
        target = cable_target(dev, port, partner)
        if partner is None or partner.counters is None:
            steps = ("nodeinfo", "portinfo", "portinfo0", *_PMA_STEPS)
            word, why, evidence = unread_reason(snap, dev.target(port), steps)
            yield _skip(target, word, why, evidence)
            continue
        evidence = command_line(snap, partner.counters.role)
        if partner.counters.mad_error:
            yield _skip(target, "unread", f"perfquery: {partner.counters.mad_error}", evidence)
            continue
        if not partner.has_error_counters:
            yield _no_error_counters(snap, dev.target(port), target, evidence)
            continue
        for info in saturated(partner.fixed_width_counter_values()):
            yield Result(
                target=target, status=Status.WARN,
                message=f"{info.name} of the far end stuck at {info.saturated_value} "
                f"({info.width}-bit maximum): it can no longer count",
                observed=info.saturated_value, subject=info.name,
                expected=f"below {info.saturated_value}",
                hint="reset the switch port's counters when convenient (from the fabric "
                "management host); ibdiag never resets counters",
                evidence=[evidence],
            )  # fmt: skip
        then = previous_partner(comparison.baseline, partner) if comparison else None
        if comparison is None or then is None:
            yield Result(
                target=target, status=Status.PASS,
                message="far-end error counters not graded on change: "
                f"{_no_baseline_reading(comparison, partner)}; lifetime totals are never graded",
                evidence=[evidence],
            )  # fmt: skip
            continue
        if not partner.counts_like(then):
            yield _skip(target, "not-comparable", _not_comparable(then, partner), evidence)
            continue
        values = partner.error_counter_values()
        yield from grade_errors(
            target, values, then.error_counter_values(), comparison, th,
            directory="perfquery", command=evidence,
        )  # fmt: skip


def _no_error_counters(snap: Snapshot, local: str, target: str, evidence: str) -> Result:
    """The skip for a far end whose PMA answered with data counters only: -x without the
    additional PortCountersExtended fields, and plain perfquery (their fallback) not read."""
    plain = snap.run(roles.partner("perfquery", local))
    if plain is not None and not plain.succeeded:
        word, why, evidence = unread_reason(snap, local, ("perfquery",))
        return _skip(target, word, f"perfquery -x printed no error counters and {why}", evidence)
    return _skip(
        target, "unread",
        "perfquery -x printed no error counters (a PMA without the additional "
        "PortCountersExtended fields) and plain perfquery was not read: the far end's error "
        "counters are unknown",
        evidence,
    )  # fmt: skip


def _no_baseline_reading(comparison: Optional[Comparison], partner: Partner) -> str:
    if comparison is None:
        return "no baseline (use --baseline or --state)"
    if not read_far_ends(comparison.baseline):
        return (
            "the baseline read no far end's error counters (level quick, or not root then): "
            "graded from the next run"
        )
    return (
        f"the baseline has no reading of {short_name(partner)}/{partner.port} (node GUID "
        f"{partner.node_guid}): re-cabled or new, starts fresh"
    )


def _not_comparable(then: Partner, now: Partner) -> str:
    """Why readings from perfquery -x and plain perfquery are not compared."""

    def kind(partner: Partner) -> str:
        if partner.counters_extended:
            return "perfquery -x (64-bit PortCountersExtended)"
        return "plain perfquery (16/32-bit PortCounters)"

    return (
        f"far-end error counters not graded on change this run: the baseline read them with "
        f"{kind(then)}, this run with {kind(now)} - counted and cleared apart, so not "
        "comparable; graded again from the next run read alike"
    )
