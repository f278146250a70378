"""The far end of each cable: the switch port (or the other HCA) an ACTIVE InfiniBand port is
plugged into, as read from this node (``Port.partner``, ``ibdiag.families.partner``).

Results name the cable by both ends - ``mlx5_3:1<->leaf07/21``: our device and port, the
partner's short name (``leaf07`` from the node description ``MF0;leaf07:MQM9700/U1``; else the
description; else its node GUID) and its port - so a drain reason says which cable, stably.
Why the far end could not be read is a typed fact (``Partner.unread``, judged where the runs
are interpreted), never the tools' text read here. What is not possible from here is a
``skip`` with its reason (no access to the umad device, no umad device, a virtual function, no
subnet manager yet, tools missing, a switch without a PMA), never a fail: a node is not drained
for a permission. A symptom warns, naming the command: a tool killed at the command timeout (a
local hang: the tools run with a MAD timeout and give up by themselves), a far end that does
not answer an ACTIVE port of a physical function, a far end whose answer cannot be (its
numbers and identities are range-checked: nonsense is never graded).
"""

from __future__ import annotations

from typing import Iterator, List, Optional, Sequence, Tuple

from ibdiag import roles
from ibdiag.counters.deltas import Comparison, compare, previous_partner, read_far_ends
from ibdiag.counters.grading import grade_errors, saturated
from ibdiag.facts.partner import (
    ACTIVE_STATE,
    IMPLAUSIBLE,
    PMA_STEPS,
    SMP_STEPS,
    SPEEDS,
    WIDTHS,
    Partner,
    PortInfo,
    Unread,
    cable_name,
    link_speed,
    short_name,
)
from ibdiag.model import Device, Port, Result, Snapshot, Status
from ibdiag.registry import check
from ibdiag.targets import ACTIVE, graded_ports
from ibdiag.thresholds import Thresholds


def cable_target(dev: Device, port: Port, partner: Optional[Partner]) -> str:
    """``mlx5_3:1<->leaf07/21``; just ``mlx5_3:1`` while nothing is known of the far end
    (``ibdiag.facts.partner.cable_name``: the Prometheus renderer names the cable alike)."""
    return cable_name(dev.target(port), partner)


def _active_ib_ports(snap: Snapshot, th: Thresholds) -> Iterator[Tuple[Device, Port]]:
    for dev, port in graded_ports(snap, th):
        if port.is_infiniband and port.state == ACTIVE:
            yield dev, port


# --- why the far end is unknown ----------------------------------------------------------------
# Judged where the runs are interpreted (Partner.unread, ibdiag.families.partner.unread): here
# only read. A symptom (a local hang, a far end that does not answer, an implausible answer)
# warns in the check whose steps it belongs to - link.partner the SMP steps, counters.partner
# the PMA steps - and is a skip naming it in the other.

_LINK_STEPS = ("nodeinfo", "portinfo")
_COUNTER_STEPS = ("nodeinfo", "portinfo", "portinfo0", *PMA_STEPS)
_SYMPTOM_HINT = {
    IMPLAUSIBLE: "the far end's management agent answered nonsense (firmware, or a forged "
    "node): check the switch port from the fabric management host (ibnetdiscover, ibswitches); "
    "nothing it said was graded",
    "no-answer": "check the switch port and the cable from the fabric management host "
    "(ibportstate, ibqueryerrors); run the command by hand",
}
_HANG_HINT = (
    "run the command by hand; check that ib_umad is loaded, the kernel log for firmware or MAD "
    "errors, and the subnet manager (sminfo); send the bundle"
)


def not_collected(target: str) -> Result:
    role = roles.partner("nodeinfo", target)
    return _skip(
        target,
        "not-collected",
        f"the far end of {target} was not read (`{role}` not collected: level quick, an older "
        "bundle, or a port not ACTIVE then)",
        str(role),
    )


def _opening(
    dev: Device, port: Port, mine: Sequence[str]
) -> Tuple[str, Optional[Partner], List[Result]]:
    """(the cable's name, its far end, the results that come first): not collected when no
    chain ran for the port, else the warns of the symptoms among ``mine`` (this check's steps)."""
    partner = port.partner
    target = cable_target(dev, port, partner)
    if partner is None:
        return target, None, [not_collected(dev.target(port))]
    return target, partner, list(_warns(target, partner.symptoms(mine)))


def _warns(target: str, symptoms: List[Unread]) -> Iterator[Result]:
    """One warn per kind of symptom (a far end that answers nothing fails nodeinfo, nodedesc
    and portinfo0 alike: one finding), naming its first command and the other steps."""
    kinds: List[str] = []
    for why in symptoms:
        if why.kind not in kinds:
            kinds.append(why.kind)
    for kind in kinds:
        alike = [why for why in symptoms if why.kind == kind]
        first = alike[0]
        message = first.reason
        if len(alike) > 1:
            message += f" (so did {', '.join(why.step for why in alike[1:])})"
        yield Result(
            target=target, status=Status.WARN, message=message, observed=kind,
            hint=_SYMPTOM_HINT.get(kind, _HANG_HINT),
            evidence=[why.command or why.step for why in alike],
        )  # fmt: skip


def _unread_result(target: str, why: Optional[Unread], local: str, mine: Sequence[str]):
    """The result for a far end that ``why`` stopped: a warn when it is a symptom of one of
    ``mine`` (this check's steps; None: already warned, nothing more to say), else a skip with
    its reason."""
    if why is None:
        return _skip(target, "unread", f"the far end of {local} could not be read", local)
    if why.symptom and why.step in mine:
        return None
    if why.symptom:
        owner = "link.partner" if why.step in SMP_STEPS else "counters.partner"
        message = f"not graded: {why.reason} (a finding of {owner})"
        return _skip(target, why.kind, message, why.command or why.step)
    return _skip(target, why.kind, why.reason, why.command or why.step)


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
            width, where = local.width_active, str(local.role)
        if speed is None:
            speed, where = link_speed(local.speed_active), str(local.role)
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


def _link_result(target: str, dev: Device, port: Port, partner: Partner, info: PortInfo) -> Result:
    far = f"{short_name(partner)}/{partner.port}"
    local = dev.target(port)
    evidence = [partner.evidence(info.role)]
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
        if best is not None and _below(order, active, best)
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
    SM. A far-end tool that hung (killed at the command timeout: a local hang), a far end that
    does not answer, or one whose answer cannot be (LocalPort 0, a multicast LID, two ports on
    one far-end port, our own GUID) warns naming the command. One that could not be read from
    here (not root: the umad device; ib_umad not loaded; a virtual function; no SM yet: LID 0;
    the tools missing) is a skip with its reason: run as root with infiniband-diags installed.
    """
    for dev, port in _active_ib_ports(snap, th):
        target, partner, first = _opening(dev, port, SMP_STEPS)  # a hung nodedesc warns too
        yield from first
        if partner is None:
            continue
        info = partner.port_info
        if info is None:
            stopped = partner.first_unread(_LINK_STEPS) or partner.first_unread(SMP_STEPS)
            found = _unread_result(target, stopped, dev.target(port), SMP_STEPS)
            if found is not None:
                yield found
            continue
        yield _link_result(target, dev, port, partner, info)


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
    and check the switch port (ibqueryerrors). A hung perfquery on the far end warns naming it
    (even when plain perfquery then read the counters), as do an answer for another LID or
    port than asked (not graded) and a far end that answers SMPs but not the PMA queries every
    InfiniBand port must answer (its performance agent is hung or broken). A far end that could
    not be read from here (not root, no SM yet, a VF; link.partner's findings) is a skip with
    the reason.
    """
    comparison: Optional[Comparison] = None
    if baseline is not None:  # the switch's counters do not restart when this node reboots
        comparison = compare(snap, baseline)._replace(
            rebooted=False, reset_cause="the far end rebooted or its counters were cleared"
        )
    for dev, port in _active_ib_ports(snap, th):
        target, partner, first = _opening(dev, port, PMA_STEPS)  # a hung -x though plain read
        yield from first
        if partner is None:
            continue
        if partner.counters is None:
            stopped = partner.first_unread(_COUNTER_STEPS)
            found = _unread_result(target, stopped, dev.target(port), PMA_STEPS)
            if found is not None:
                yield found
            continue
        evidence = partner.evidence(partner.counters.role)
        if partner.counters.mad_error:
            yield _skip(target, "unread", f"perfquery: {partner.counters.mad_error}", evidence)
            continue
        if not partner.has_error_counters:
            unknown = _no_error_counters(partner, target, evidence)
            if unknown is not None:  # None: plain perfquery's symptom was warned above
                yield unknown
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


def _no_error_counters(partner: Partner, target: str, evidence: str) -> Optional[Result]:
    """The skip for a far end whose PMA answered with data counters only: -x without the
    additional PortCountersExtended fields, and plain perfquery (their fallback) not read;
    None when plain perfquery's failure is a symptom (``_warns`` said it: one finding)."""
    plain = partner.first_unread(("perfquery",))
    if plain is not None and plain.symptom:
        return None
    if plain is not None:
        message = f"perfquery -x printed no error counters and {plain.reason}"
        return _skip(target, plain.kind, message, plain.command or evidence)
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
