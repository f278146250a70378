"""phy.fec: forward error correction per lane, at both ends of each cable (perfquery -T)."""

from __future__ import annotations

from statistics import median
from typing import Dict, Iterator, List, NamedTuple, Optional, Tuple

from ibdiag import roles
from ibdiag.counters.deltas import compare
from ibdiag.facts.fec import PortFec, fec_role
from ibdiag.facts.partner import CABLE, Partner, cable_name
from ibdiag.model import Device, Port, Result, Snapshot, Status
from ibdiag.outcome_results import skipped
from ibdiag.registry import check
from ibdiag.targets import ACTIVE, graded_ports
from ibdiag.thresholds import Thresholds

_HINT = (
    "reseat, clean or replace the cable or optic at this end (the lane named is the one that "
    "fails first); read its BER and optics (mlxlink/mstlink -m -c); send the bundle"
)
_FAR_MISSING = (
    "no reading of the far end's perfquery -T (an older bundle, or a far end that answered "
    "what cannot be: see link.partner)"
)
_RANK = {Status.PASS: 0, Status.WARN: 1, Status.FAIL: 2}


class _Side(NamedTuple):
    """One end of one cable to grade: its name, its FEC reading, the baseline's, its width."""

    target: str
    fec: Optional[PortFec]
    then: Optional[PortFec]
    width: Optional[str]
    evidence: str


class _Basis(NamedTuple):
    """The values graded: since the baseline (``delta``) or since the last reset."""

    delta: bool
    reset: bool  # the baseline's counters were higher: reset since, graded on lifetime
    uncorrected: Optional[int]
    corrected: Optional[int]  # the port's corrected blocks
    lanes: Dict[int, int]  # corrected per lane in use (blocks, or RS-FEC symbols)
    layout: Optional[str] = None  # ports are compared only with ports of the same layout


@check(
    "phy.fec",
    title="FEC: no uncorrectable blocks, corrections even across lanes and ports",
    needs={"perfquery_fec", "partner"},
    level="standard",
)
def phy_fec(snap: Snapshot, th: Thresholds, baseline: Optional[Snapshot]) -> Iterator[Result]:
    """Healthy: no uncorrectable FEC block since the baseline (without one: none since the last
    reset), and the blocks FEC corrected spread evenly over the lanes in use and over the
    node's ports - on our port and on the far end's (`perfquery -T`, PortExtendedSpeedsCounters,
    both layouts: per-lane FEC blocks, or RS-FEC per-lane corrected symbols and port totals).

    Why it matters: a cable or optic going bad shows first as FEC correcting more and more on
    one lane, long before the link flaps; an uncorrectable block is a packet lost to the link.
    Uncorrectable blocks increasing since the baseline fail; lifetime uncorrectable blocks
    without a baseline warn ("since the last reset": they may be old). A lane whose corrected
    count is above fec_outlier_factor times the median of its sibling lanes (and above
    fec_outlier_floor) warns naming the lane; a port that far above the node's other ports
    warns - on the change since the baseline when there is one, else on lifetime totals. A
    counter stuck at its maximum (65535 / 4294967295: PMA counters stop, not wrap) warns. The
    far end is named by both ends (`mlx5_3:1<->leaf07/21`). A PMA without the attribute
    (`cannot query PortExtendedSpeedsCounters`: the ibsim simulator, older HCAs and switches),
    perfquery missing, refused or timed out is a skip with perfquery's reason.

    What to do: reseat, clean or replace the cable or optic of the cable named (both ends read
    high: the cable; one end: that end's optic or port); compare its BER (phy.ber) and optical
    power (phy.optics); send the bundle.
    """
    comparison = compare(snap, baseline) if baseline is not None else None
    local: List[_Side] = []
    far: List[_Side] = []
    for dev, port in graded_ports(snap, th):
        if not port.is_infiniband or port.state != ACTIVE:
            continue  # perfquery -T needs an ACTIVE InfiniBand port (a LID); RoCE: ethtool
        old = comparison.previous_port(dev, port) if comparison is not None else None
        local.append(_local_side(dev, port, old))
        if port.partner is not None:
            far.append(_far_side(dev, port, port.partner, baseline))
    yield from _grade_all(local, th, "perfquery -T was not collected (an older bundle?)")
    yield from _grade_all(far, th, _FAR_MISSING)


def _local_side(dev: Device, port: Port, old: Optional[Port]) -> _Side:
    """Our port; ``old``: the baseline's same port (``ibdiag.counters.deltas.compare``)."""
    target = dev.target(port)
    fec = _typed(port.facts.get("fec"))
    then = _typed(old.facts.get("fec")) if old is not None else None
    width = port.rate.width if port.rate is not None else None
    return _Side(target, fec, then, width, _evidence(fec, str(fec_role(target))))


def _far_side(dev: Device, port: Port, partner: Partner, baseline: Optional[Snapshot]) -> _Side:
    target = cable_name(dev.target(port), partner)
    if target == dev.target(port):  # nothing names the far end: still not our own port
        target = f"{target}{CABLE}?"
    then = _previous_far_end(baseline, partner) if baseline is not None else None
    width = partner.port_info.width_active if partner.port_info is not None else None
    if width is None and port.rate is not None:
        width = port.rate.width  # the same cable
    fec = partner.fec
    role = roles.partner("perfquery-T", dev.target(port))
    return _Side(target, fec, then, width, _evidence(fec, str(role)))


def _evidence(fec: Optional[PortFec], role: str) -> str:
    """The command line the reading came from; the role when nothing ran."""
    return fec.outcome.command if fec is not None and fec.outcome is not None else role


def _typed(value: object) -> Optional[PortFec]:
    return value if isinstance(value, PortFec) else None


def _previous_far_end(baseline: Snapshot, partner: Partner) -> Optional[PortFec]:
    """The baseline's FEC reading of the same far-end port (node GUID and port number)."""
    if partner.node_guid is None or partner.port is None:
        return None
    for dev in baseline.devices:
        for port in dev.ports:
            then = port.partner
            if (then is not None and then.fec is not None and then.node_guid == partner.node_guid
                    and then.port == partner.port):  # fmt: skip
                return then.fec
    return None


def _grade_all(sides: List[_Side], th: Thresholds, missing: str) -> Iterator[Result]:
    bases: Dict[str, _Basis] = {}
    for side in sides:
        fec = side.fec
        if fec is None:
            yield skipped(side.target, missing, side.evidence)
        elif not fec.read:
            yield skipped(side.target, _why_unread(fec), side.evidence)
        else:
            bases[side.target] = _basis(fec, side.then, side.width)
    for side in sides:
        if side.fec is not None and side.target in bases:
            yield _grade(side, side.fec, bases, th)


def _why_unread(fec: PortFec) -> str:
    if fec.outcome is not None and fec.outcome.no_data is not None:
        return fec.outcome.reason or f"`{fec.outcome.command}` gave no FEC counters"
    if fec.mad_error:
        return f"perfquery -T: {fec.mad_error}"
    return "perfquery -T printed no FEC counters" + (f": {fec.problems[0]}" if fec.problems else "")


def _basis(fec: PortFec, then: Optional[PortFec], width: Optional[str]) -> _Basis:
    lanes = fec.lanes_in_use(width)
    now_lanes = {lane: value for lane, value in fec.lane_corrected().items() if lane in lanes}
    usable = then is not None and then.read and then.layout == fec.layout
    if then is None or not usable:
        return _Basis(
            False, False, fec.uncorrected_blocks, fec.corrected_blocks, now_lanes, fec.layout
        )
    old_lanes = then.lane_corrected()
    pairs = [(fec.uncorrected_blocks, then.uncorrected_blocks),
             (fec.corrected_blocks, then.corrected_blocks),
             *((value, old_lanes.get(lane)) for lane, value in now_lanes.items())]  # fmt: skip
    if any(now is not None and old is not None and now < old for now, old in pairs):
        return _Basis(
            False, True, fec.uncorrected_blocks, fec.corrected_blocks, now_lanes, fec.layout
        )
    deltas = {lane: value - old_lanes[lane] for lane, value in now_lanes.items()
              if lane in old_lanes}  # fmt: skip
    return _Basis(True, False, _minus(fec.uncorrected_blocks, then.uncorrected_blocks),
                  _minus(fec.corrected_blocks, then.corrected_blocks), deltas,
                  fec.layout)  # fmt: skip


def _minus(now: Optional[int], old: Optional[int]) -> Optional[int]:
    return None if now is None or old is None else now - old


def _grade(side: _Side, fec: PortFec, bases: Dict[str, _Basis], th: Thresholds) -> Result:
    basis = bases[side.target]
    since = "since the baseline" if basis.delta else "since the last reset"
    if basis.reset:
        since += " (the counters went down since the baseline: reset)"
    findings: List[Tuple[Status, str, str]] = []
    if basis.uncorrected:
        status = Status.FAIL if basis.delta else Status.WARN
        findings.append((status, f"{basis.uncorrected} uncorrectable FEC blocks {since}, "
                         "expected 0", "uncorrectable-fec"))  # fmt: skip
    stuck = fec.saturated()
    if stuck:
        shown = ", ".join(stuck[:3]) + (f" and {len(stuck) - 3} more" if len(stuck) > 3 else "")
        findings.append((Status.WARN, f"{shown} saturated (at its maximum: counts nothing more "
                         "until reset), expected below", "fec-saturated"))  # fmt: skip
    lane = _lane_outlier(basis.lanes, th)
    if lane is not None:
        number, value, middle = lane
        findings.append((Status.WARN, f"lane {number} {fec.lane_unit} {value} {since}, above "
                         f"{th.fec_outlier_factor:g}x its sibling lanes' median {middle:g}",
                         f"fec-lane{number}"))  # fmt: skip
    others = [
        b.corrected
        for name, b in bases.items()
        if name != side.target
        and (b.delta, b.layout) == (basis.delta, basis.layout)
        and b.corrected is not None
    ]
    if basis.corrected is not None and others:
        middle = median(others)
        if (
            basis.corrected > th.fec_outlier_floor
            and basis.corrected > th.fec_outlier_factor * middle
        ):
            findings.append((Status.WARN, f"{basis.corrected} corrected FEC blocks {since}, above "
                             f"{th.fec_outlier_factor:g}x the median {middle:g} of the node's "
                             "other ports", "fec-port-outlier"))  # fmt: skip
    odd = (
        f"; {len(fec.problems)} odd values in perfquery -T: {fec.problems[0]}"
        if fec.problems
        else ""
    )
    if not findings:
        read = "uncorrectable FEC blocks not read" if basis.uncorrected is None else (
            f"0 uncorrectable FEC blocks {since}, expected 0")  # fmt: skip
        return Result(target=side.target, status=Status.PASS, observed=basis.uncorrected,
                      expected=0, evidence=[side.evidence],
                      message=f"{read}; {fec.lane_unit} per lane {_lanes(basis.lanes)} "
                      f"({fec.layout}){odd}")  # fmt: skip
    worst = max(findings, key=lambda found: _RANK[found[0]])[0]
    return Result(target=side.target, status=worst, observed=basis.uncorrected, expected=0,
                  message="; ".join(text for _, text, _ in findings) + odd,
                  subject=" ".join(word for _, _, word in findings),
                  hint=_HINT, evidence=[side.evidence])  # fmt: skip


def _lane_outlier(lanes: Dict[int, int], th: Thresholds) -> Optional[Tuple[int, int, float]]:
    """The lane furthest above fec_outlier_factor x the median of its siblings (and above
    fec_outlier_floor): (lane, value, siblings' median); None when none is."""
    worst: Optional[Tuple[int, int, float]] = None
    if len(lanes) < 2:
        return None
    for lane, value in sorted(lanes.items()):
        middle = median(v for other, v in lanes.items() if other != lane)
        if value > th.fec_outlier_floor and value > th.fec_outlier_factor * middle:
            if worst is None or value > worst[1]:
                worst = (lane, value, middle)
    return worst


def _lanes(lanes: Dict[int, int]) -> str:
    return "/".join(str(value) for _, value in sorted(lanes.items())) or "none read"
