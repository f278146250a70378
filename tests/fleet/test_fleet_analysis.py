"""The fleet's analyses on hand-built NodeSummary lists: robust statistics, outliers per rail,
drift, switch blame, rail conformance, and ``analyze`` putting them together."""

from __future__ import annotations

import math
import time
from datetime import timezone
from typing import Dict, List, Optional, Sequence

import pytest

from ibdiag import __version__
from ibdiag.fleet import stats
from ibdiag.fleet.analyze import analyze
from ibdiag.fleet.drift import find_drift
from ibdiag.fleet.node import (
    ERROR_RATE_PREFIX,
    IB_WRITE_BW,
    NCCL_TESTS_BUSBW,
    FarEnd,
    HcaSummary,
    Metric,
    NodeSummary,
    PortSummary,
)
from ibdiag.fleet.outliers import find_outliers
from ibdiag.fleet.render_text import switch_lines
from ibdiag.fleet.report import (
    FleetReport,
    FleetSettings,
    NodeGroup,
    ReadProblem,
)
from ibdiag.fleet.switches import blame_switches, find_rail_misplacements
from ibdiag.hostlist import expand

SETTINGS = FleetSettings()
SYMBOL = ERROR_RATE_PREFIX + "symbol_error"
LINK_FAIL = "ibdiag: mlx5_{rail}:1 link.partner"


def hca(rail: int, **fields) -> HcaSummary:
    values = {"hca_type": "MT4129", "board_id": "MT_0000000838", "fw_ver": "28.39.1002"}
    return HcaSummary(name=f"mlx5_{rail}", rail=rail, **{**values, **fields})


def port(
    rail: int,
    switch: Optional[str] = None,
    peer_port: int = 1,
    status: str = "pass",
    cable_status: str = "pass",
    checks: Sequence[str] = (),
    guid: bool = True,
    peer_type: str = "Switch",
) -> PortSummary:
    far = None
    if switch is not None:
        far = FarEnd(
            peer_guid=f"0x{abs(hash(switch)) % 16**12:012x}" if guid else None,
            peer_name=switch,
            peer_port=peer_port,
            peer_type=peer_type,
        )
    return PortSummary(
        target=f"mlx5_{rail}:1",
        device=f"mlx5_{rail}",
        number=1,
        rail=rail,
        state="ACTIVE",
        status=status,
        cable_status=cable_status,
        failing_checks=list(checks),
        far_end=far,
    )


def node(
    host: str,
    rails: int = 4,
    verdict: str = "OK",
    drain_reason: str = "",
    verdict_reason: str = "",
    ports: Optional[List[PortSummary]] = None,
    metrics: Sequence[Metric] = (),
    hcas: Optional[List[HcaSummary]] = None,
    level: str = "standard",
    tool_version: str = __version__,
    **fields,
) -> NodeSummary:
    return NodeSummary(
        host=host,
        source=f"{host}.json",
        level=level,
        tool_version=tool_version,
        schema_version=1,
        verdict=verdict,
        verdict_reason=verdict_reason,
        drain_reason=drain_reason,
        hcas=[hca(rail) for rail in range(rails)] if hcas is None else hcas,
        ports=[port(rail) for rail in range(rails)] if ports is None else ports,
        metrics=list(metrics),
        **fields,
    )


def bw(host: str, values: Dict[int, float], **fields) -> NodeSummary:
    metrics = [Metric(name=IB_WRITE_BW, rail=rail, value=v) for rail, v in values.items()]
    return node(host, rails=len(values), metrics=metrics, **fields)


def hosts(count: int, start: int = 1) -> List[str]:
    return [f"gpu{n:03d}" for n in range(start, start + count)]


# --- stats ------------------------------------------------------------------------------------


def test_median_and_scaled_mad():
    assert stats.median([3, 1, 2]) == 2 and stats.median([4, 1, 3, 2]) == 2.5
    assert stats.mad([1, 2, 3, 4, 100]) == pytest.approx(1.4826)  # 100 moves nothing
    assert stats.mad([5, 5, 5, 5]) == 0
    with pytest.raises(ValueError):
        stats.median([])


def test_median_and_gap_stay_finite_at_the_edge_of_a_float():
    """Two values near float's largest have a finite median; a huge value over a tiny median
    a finite gap: a fleet report's JSON never holds an infinity (issue 21)."""
    import math

    assert math.isfinite(stats.median([1.7e308, 1.7e308])) and stats.median([1.7e308] * 2) > 1e308
    peers = stats.Spread(median=0.5, mad=0.1, peers=9)
    assert math.isfinite(stats.gap(1.7e308, peers)) and stats.gap(1.7e308, peers) > 1e308
    assert stats.gap(-1.7e308, peers) < -1e308 and math.isfinite(stats.gap(-1.7e308, peers))


@pytest.mark.parametrize(
    ("values", "value", "flagged"),
    [
        ([400.0] * 9, 400.0, False),  # everybody equal
        ([400.0] * 9, 320.0, True),  # MAD 0: the margin alone decides ...
        ([400.0] * 9, 370.0, False),  # ... and 7.5% is within it
        ([400, 401, 399, 400, 400, 401, 399, 400], 380.0, False),  # past the MAD cut, in margin
        ([300, 340, 380, 400, 420, 460, 500, 400], 340.0, False),  # past the margin, within MADs
        ([0.0] * 9, 0.0, False),  # all zeros
        ([400.0] * 3, 100.0, False),  # 4 peers: too few to say
    ],
)
def test_an_outlier_is_past_both_cuts_with_enough_peers(values, value, flagged):
    peers = stats.spread([*values, value])
    assert stats.is_outlier(value, peers, SETTINGS, stats.LOW) is flagged


def test_high_side_needs_the_floor():
    quiet = stats.spread([0.0] * 9 + [0.9])
    assert not stats.is_outlier(0.9, quiet, SETTINGS, stats.HIGH, floor=1.0)
    loud = stats.spread([0.0] * 9 + [12.0])
    assert stats.is_outlier(12.0, loud, SETTINGS, stats.HIGH, floor=1.0)
    assert not stats.is_outlier(0.0, loud, SETTINGS, stats.HIGH, floor=1.0)
    assert stats.gap(12.0, loud, floor=1.0) == 12.0  # median 0: in floors, finite


# --- outliers ---------------------------------------------------------------------------------


def test_a_slow_rail_is_named_with_its_value_median_and_gap():
    fleet = [bw(h, {0: 400.0, 1: 400.0 + (i % 3)}) for i, h in enumerate(hosts(11))]
    fleet.append(bw("gpu012", {0: 400.0, 1: 320.0}))  # passes a 300 floor, 20% below its peers
    (found,) = find_outliers(fleet, SETTINGS)
    assert (found.host, found.metric, found.rail, found.direction) == (
        "gpu012", IB_WRITE_BW, 1, "low"
    )  # fmt: skip
    assert found.value == 320.0 and found.median == 401.0 and found.peers == 12
    assert found.gap == pytest.approx((320 - 401) / 401)


@pytest.mark.parametrize("value", [400.0, 0.0])
def test_a_fleet_of_equals_flags_nobody(value):
    fleet = [bw(h, {0: value, 1: value}) for h in hosts(20)]
    rates = [
        node(h, metrics=[Metric(name=SYMBOL, rail=0, value=value)], rate_window_hours=2.0)
        for h in hosts(20)
    ]
    assert find_outliers(fleet + rates, SETTINGS) == []


def test_normal_jitter_flags_nobody():
    jitter = [-6, 3, 0, 5, -2, 1, -4, 2, 6, -1, 0, -5, 4, -3, 2, 1]
    fleet = [bw(h, {0: 400.0 + j}) for h, j in zip(hosts(16), jitter)]
    assert find_outliers(fleet, SETTINGS) == []


def test_node_wide_metrics_compare_whole_nodes():
    fleet = [node(h, metrics=[Metric(name=NCCL_TESTS_BUSBW, value=180.0)]) for h in hosts(8)]
    fleet.append(node("gpu100", metrics=[Metric(name=NCCL_TESTS_BUSBW, value=120.0)]))
    (found,) = find_outliers(fleet, SETTINGS)
    assert (found.host, found.rail, found.median) == ("gpu100", None, 180.0)


def test_too_few_peers_say_nothing():
    fleet = [bw(h, {0: 400.0}) for h in hosts(3)] + [bw("gpu100", {0: 100.0})]
    assert find_outliers(fleet, SETTINGS) == []
    assert find_outliers(fleet, SETTINGS.model_copy(update={"outlier_min_nodes": 4})) != []


def test_error_rates_count_unlisted_counters_as_zero_and_skip_nodes_without_baseline():
    quiet = [node(h, rate_window_hours=24.0) for h in hosts(5)]  # rails 0-3, no rate listed
    noisy = node("gpu100", metrics=[Metric(name=SYMBOL, rail=2, value=30.0)], rate_window_hours=1.0)
    unknown = [node(h, rate_window_hours=None) for h in hosts(20, start=200)]
    (found,) = find_outliers([*quiet, noisy, *unknown], SETTINGS)
    assert (found.host, found.metric, found.rail, found.direction) == ("gpu100", SYMBOL, 2, "high")
    assert found.median == 0.0 and found.peers == 6 and math.isfinite(found.gap)
    # without the nodes whose rates are unknown, too few peers know theirs
    assert find_outliers([*quiet[:3], noisy, *unknown], SETTINGS) == []


def test_a_rate_under_the_floor_or_on_a_busy_rail_is_no_outlier():
    def rated(host, value):
        return node(host, metrics=[Metric(name=SYMBOL, rail=0, value=value)], rate_window_hours=1)

    quiet = [node(h, rate_window_hours=1.0) for h in hosts(9)]
    assert find_outliers([*quiet, rated("gpu100", 0.9)], SETTINGS) == []  # one stray error
    busy = [rated(h, 50.0 + i) for i, h in enumerate(hosts(9))]
    assert find_outliers([*busy, rated("gpu100", 56.0)], SETTINGS) == []  # like its peers
    (found,) = find_outliers([*busy, rated("gpu100", 200.0)], SETTINGS)
    assert found.host == "gpu100"


def test_a_node_is_no_peer_on_a_rail_it_does_not_have():
    small = [node(h, rails=2, rate_window_hours=1.0) for h in hosts(10)]
    big = [node(h, rails=4, rate_window_hours=1.0) for h in hosts(3, start=50)]
    big.append(
        node("gpu100", metrics=[Metric(name=SYMBOL, rail=3, value=40.0)], rate_window_hours=1.0)
    )
    assert find_outliers(small + big, SETTINGS) == []  # 4 peers on rail 3
    (found,) = find_outliers(small + big + [node("gpu101", rate_window_hours=1.0)], SETTINGS)
    assert found.peers == 5


# --- drift ------------------------------------------------------------------------------------


def test_the_same_everywhere_is_no_drift():
    fleet = [
        node(h, kernel_release="5.15.0-1068", driver_versions={"mlx5_core": "24.10"})
        for h in hosts(10)
    ]
    assert find_drift(fleet, SETTINGS) == []


def test_firmware_off_on_some_nodes_names_majority_and_the_others():
    fleet = [node(h) for h in hosts(10)]
    odd = [hca(0), hca(1), hca(2, fw_ver="28.36.1010"), hca(3)]
    fleet += [node(h, hcas=odd) for h in ("gpu020", "gpu021")]
    fleet.append(node("gpu030", hcas=[hca(0), hca(1), hca(2, fw_ver="22.1"), hca(3)]))
    (found,) = find_drift(fleet, SETTINGS)
    assert (found.attribute, found.rail, found.majority, found.majority_count) == (
        "fw_ver", 2, "28.39.1002", 10
    )  # fmt: skip
    assert [(o.value, o.nodes, o.count) for o in found.others] == [
        ("28.36.1010", "gpu[020-021]", 2),
        ("22.1", "gpu030", 1),
    ]


def test_kernel_and_drivers_are_node_wide_and_unknown_only_where_others_disagree():
    old = [node(h) for h in hosts(5)]  # an older ibdiag: no kernel release, no drivers
    assert find_drift(old, SETTINGS) == []
    new = [
        node(h, kernel_release="6.8.0", driver_versions={"mlx5_core": "24.10", "ib_core": "a1"})
        for h in hosts(6, start=10)
    ]
    assert find_drift(old + new, SETTINGS) == []  # the new ones agree: mixed versions are no drift
    new.append(node("gpu020", kernel_release="6.5.0", driver_versions={"mlx5_core": "23.10"}))
    found = {(d.attribute, d.rail): d for d in find_drift(old + new, SETTINGS)}
    assert set(found) == {("kernel_release", None), ("driver:mlx5_core", None),
                          ("driver:ib_core", None)}  # fmt: skip
    kernel = found[("kernel_release", None)]
    assert (kernel.majority, kernel.majority_count) == ("6.8.0", 6)
    assert [(o.value, o.nodes) for o in kernel.others] == [
        ("(unknown)", "gpu[001-005]"),
        ("6.5.0", "gpu020"),
    ]
    ib_core = found[("driver:ib_core", None)]
    assert ib_core.majority == "a1"
    assert [(o.value, o.nodes) for o in ib_core.others] == [
        ("(unknown)", "gpu[001-005]"),
        ("(not loaded)", "gpu020"),
    ]


def test_board_and_model_drift_per_rail():
    fleet = [node(h) for h in hosts(6)]
    fleet.append(node("gpu100", hcas=[hca(0, hca_type="MT4123", board_id="MT_0000000223"),
                                      hca(1), hca(2), hca(3)]))  # fmt: skip
    found = [(d.attribute, d.rail, d.others[0].value) for d in find_drift(fleet, SETTINGS)]
    assert found == [("hca_type", 0, "MT4123"), ("board_id", 0, "MT_0000000223")]


def test_nodes_checked_by_another_ibdiag_or_at_another_level_are_drift():
    """3 nodes ran an older ibdiag and 2 level quick among standard ones: each said, with the
    majority; a report that did not say (an unreadable file's node) is unknown, no value."""
    fleet = [node(h) for h in hosts(7)]
    fleet += [node(h, tool_version="0.0.9") for h in hosts(3, start=10)]
    fleet += [node(h, level="quick") for h in hosts(2, start=20)]
    fleet.append(node("gpu030", tool_version="?", level="?", hcas=[], ports=[]))
    found = [
        (d.attribute, d.rail, d.majority, d.majority_count,
         [(o.value, o.nodes, o.count) for o in d.others])
        for d in find_drift(fleet, SETTINGS)
    ]  # fmt: skip
    assert found == [
        ("ibdiag_version", None, __version__, 9,
         [("0.0.9", "gpu[010-012]", 3), ("(unknown)", "gpu030", 1)]),
        ("level", None, "standard", 10, [("quick", "gpu[020-021]", 2), ("(unknown)", "gpu030", 1)]),
    ]  # fmt: skip
    same = [node(h) for h in hosts(5)] + [node("gpu030", tool_version="?", level="?")]
    assert find_drift(same, SETTINGS) == []  # one value, and a node that did not say
    report = analyze(fleet, SETTINGS)
    assert report.verdict == "WARNING" and "2 drifting attributes" in report.verdict_reason


# --- switch blame -----------------------------------------------------------------------------


def failing_node(host: str, switch: str, peer_port: int, rail: int = 0, **port_fields):
    fields = {"cable_status": "fail", "checks": ["counters.partner"], **port_fields}
    ports = [port(r, f"leaf{r}x") for r in range(4)]
    ports[rail] = port(rail, switch, peer_port=peer_port, **fields)
    return node(host, verdict="CRITICAL", drain_reason=LINK_FAIL.format(rail=rail), ports=ports)


def test_several_nodes_failing_on_one_switch_make_it_the_suspect():
    fleet = [failing_node(h, "leaf07", 20 + i) for i, h in enumerate(hosts(3))]
    fleet += [node(h, ports=[port(0, "leaf07", 30 + i)]) for i, h in enumerate(hosts(7, 10))]
    fleet.append(failing_node("gpu100", "leaf09", 5, rail=0, status="fail", cable_status="pass"))
    suspect, single = blame_switches(fleet, SETTINGS)
    assert (suspect.peer_name, suspect.suspect, suspect.failing_nodes) == (
        "leaf07", True, "gpu[001-003]"
    )  # fmt: skip
    assert (suspect.failing_node_count, suspect.attached_node_count) == (3, 10)
    assert suspect.attached_port_count == 10
    assert [(p.peer_port, p.host, p.target, p.checks) for p in suspect.failing_ports] == [
        (20, "gpu001", "mlx5_0:1", ["counters.partner"]),
        (21, "gpu002", "mlx5_0:1", ["counters.partner"]),
        (22, "gpu003", "mlx5_0:1", ["counters.partner"]),
    ]
    assert (single.peer_name, single.suspect, single.failing_nodes) == ("leaf09", False, "gpu100")


def test_a_share_of_a_small_switch_makes_it_the_suspect():
    two = [failing_node(h, "edge1", i) for i, h in enumerate(hosts(2))]
    one = [failing_node("gpu100", "edge2", 1)]
    found = {s.peer_name: s.suspect for s in blame_switches(two + one, SETTINGS)}
    assert found["edge1"] is True  # 2 of its 2 nodes
    assert found["edge2"] is False  # 1 of 1: one node is never a switch's fault
    strict = SETTINGS.model_copy(update={"switch_min_share": 1.0, "switch_min_nodes": 5})
    half = [*two, node("gpu050", ports=[port(0, "edge1", 9)])]
    assert blame_switches(half, strict)[0].suspect is False  # 2 of 3 < 100%


def on_edge(host: str, rails: int, failing: int, first_port: int) -> NodeSummary:
    """A node whose ``rails`` HCAs all land on leaf edge, the first ``failing`` of them failing
    there."""
    bad = {"cable_status": "fail", "checks": ["counters.partner"]}
    ports = [port(r, "edge", first_port + r, **(bad if r < failing else {})) for r in range(rails)]
    return node(host, rails=rails, ports=ports)


def test_the_share_counts_node_ports_not_nodes():
    """k counts nodes; the share counts node ports, so a node with several HCAs on one leaf
    weighs as many ports - here the two counts disagree, both ways (share 0.5, k 3)."""
    # 2 of 4 nodes fail (half the nodes), but on 2 of the leaf's 8 node ports: no suspect
    fleet = [on_edge("gpu001", 1, 1, 1), on_edge("gpu002", 1, 1, 2)]
    fleet += [on_edge("gpu003", 3, 0, 3), on_edge("gpu004", 3, 0, 6)]
    (edge,) = blame_switches(fleet, SETTINGS)
    assert (edge.failing_node_count, edge.attached_node_count) == (2, 4)
    assert (len(edge.failing_ports), edge.attached_port_count) == (2, 8)
    assert edge.suspect is False
    # 2 of 6 nodes fail (a third), but on 6 of its 10 node ports: the suspect
    fleet = [on_edge("gpu001", 3, 3, 1), on_edge("gpu002", 3, 3, 4)]
    fleet += [on_edge(h, 1, 0, 7 + i) for i, h in enumerate(hosts(4, 3))]
    (edge,) = blame_switches(fleet, SETTINGS)
    assert (edge.failing_node_count, edge.attached_node_count) == (2, 6)
    assert (len(edge.failing_ports), edge.attached_port_count) == (6, 10)
    assert edge.suspect is True
    # one node failing on every port of a leaf it alone uses is still no switch's fault
    (alone,) = blame_switches([on_edge("gpu001", 2, 2, 1)], SETTINGS)
    assert alone.attached_port_count == 2 and alone.suspect is False


def test_warnings_and_other_hcas_are_no_switch_blame():
    warned = [failing_node(h, "leaf07", i, cable_status="warn") for i, h in enumerate(hosts(4))]
    b2b = [failing_node(h, "gpu900", i, peer_type="Channel Adapter") for i, h in
           enumerate(hosts(4, 10))]  # fmt: skip
    erred = [failing_node(h, "leaf08", i, cable_status="error") for i, h in enumerate(hosts(3, 20))]
    assert [s.peer_name for s in blame_switches(warned + b2b + erred, SETTINGS)] == ["leaf08"]


def test_ports_flapping_on_one_switch_are_counted_there_and_a_failing_flap_is_blamed():
    """A flap that warns (1 in 12h) is counted on its switch, never a suspect; one that fails
    is a failing port like any other: three nodes on leaf07 make it the suspect."""
    warned = [
        node(h, ports=[port(0, "leaf05", 10 + i, status="warn", checks=["link.flaps"])])
        for i, h in enumerate(hosts(2))
    ]
    failed = [
        failing_node(h, "leaf07", 20 + i, status="fail", cable_status="pass", checks=["link.flaps"])
        for i, h in enumerate(hosts(3, 10))
    ]
    dropped = [failing_node("gpu050", "leaf07", 30, checks=["link.drop", "counters.partner"])]
    quiet = [node(h, ports=[port(0, "leaf05", 40 + i)]) for i, h in enumerate(hosts(3, 60))]
    found = {s.peer_name: s for s in blame_switches(warned + failed + dropped + quiet, SETTINGS)}
    leaf07, leaf05 = found["leaf07"], found["leaf05"]
    assert leaf07.suspect and leaf07.failing_node_count == 4
    assert (leaf07.flapping_port_count, leaf07.flapping_nodes) == (4, "gpu[010-012,050]")
    assert not leaf05.suspect and leaf05.failing_ports == []
    assert (leaf05.flapping_port_count, leaf05.flapping_nodes) == (2, "gpu[001-002]")
    text = "\n".join(switch_lines(leaf05))
    assert "2 node ports flapped or dropped on it: gpu[001-002]" in text


def test_a_switch_read_by_name_only_is_the_one_its_guid_names():
    fleet = [failing_node(h, "leaf07", i) for i, h in enumerate(hosts(2))]
    fleet.append(failing_node("gpu100", "leaf07", 9, guid=False))
    (found,) = blame_switches(fleet, SETTINGS)
    assert found.failing_node_count == 3 and found.peer_guid is not None


FAR_SYMBOL = ERROR_RATE_PREFIX + "partner:symbol_error"


def on_two_leaves(
    index: int, host: str, bw1: float = 400.0, far_rate: float = 0.0, failing: bool = False
) -> NodeSummary:
    """A node with rail 0 on leafA and rail 1 on leafB (port index + 1 of each), measured on
    both rails (``bw1``: rail 1's ib_write_bw), graded against a baseline; ``far_rate``: leafB's
    end of its rail-1 cable counting symbol errors; ``failing``: that cable fails."""
    metrics = [Metric(name=IB_WRITE_BW, rail=0, value=400.0)]
    metrics.append(Metric(name=IB_WRITE_BW, rail=1, value=bw1))
    if far_rate:
        metrics.append(Metric(name=FAR_SYMBOL, rail=1, value=far_rate))
    metrics.append(Metric(name=NCCL_TESTS_BUSBW, value=480.0 if index != 9 else 360.0))
    bad = {"cable_status": "fail", "checks": ["counters.partner"]} if failing else {}
    return node(
        host,
        rails=2,
        ports=[port(0, "leafA", index + 1), port(1, "leafB", index + 1, **bad)],
        metrics=metrics,
        rate_window_hours=24.0,
        verdict="CRITICAL" if failing else "OK",
        drain_reason=LINK_FAIL.format(rail=1) if failing else "",
    )


def test_outlying_ports_are_listed_on_their_switch_but_make_no_suspect():
    """An outlier on a rail is listed on the switch that rail's port lands on, with the
    metric; outliers count for no suspect (2 failing + 2 outlying nodes on leafB: 4 >= k, but
    only the 2 failing count); a failing rail's outlier and a node-wide one name no port."""
    fleet = [on_two_leaves(i, h) for i, h in enumerate(hosts(20))]
    fleet[2] = on_two_leaves(2, "gpu003", bw1=320.0)  # rail 1 20% slow
    fleet[4] = on_two_leaves(4, "gpu005", far_rate=40.0)  # leafB's port errs at 40/h
    fleet[6] = on_two_leaves(6, "gpu007", bw1=310.0, failing=True)  # slow, but it fails
    fleet[7] = on_two_leaves(7, "gpu008", failing=True)
    report = analyze(fleet, SETTINGS)
    assert {(o.host, o.metric, o.rail) for o in report.outliers} == {
        ("gpu003", IB_WRITE_BW, 1),
        ("gpu005", FAR_SYMBOL, 1),
        ("gpu010", NCCL_TESTS_BUSBW, None),  # node-wide: on no switch
    }
    (leaf_b,) = report.switches  # leafA: nothing fails or stands out there
    assert (leaf_b.peer_name, leaf_b.suspect, leaf_b.failing_nodes) == (
        "leafB",
        False,
        "gpu[007-008]",
    )
    assert (leaf_b.outlying_nodes, leaf_b.outlying_node_count) == ("gpu[003,005]", 2)
    assert [(p.peer_port, p.host, p.target, p.checks) for p in leaf_b.outlying_ports] == [
        (3, "gpu003", "mlx5_1:1", []),
        (5, "gpu005", "mlx5_1:1", []),
    ]
    by_host = {o.host: o for o in report.outliers}
    assert [p.outliers for p in leaf_b.outlying_ports] == [[by_host["gpu003"]], [by_host["gpu005"]]]
    assert report.switch_suspect == [] and {g.nodes for g in report.drain} == {"gpu[007-008]"}
    # a third failing node makes it the suspect: failing ports decide, outlying ones ride along
    fleet[8] = on_two_leaves(8, "gpu009", failing=True)
    (leaf_b,) = analyze(fleet, SETTINGS).switches
    assert leaf_b.suspect and leaf_b.failing_node_count == 3 and leaf_b.outlying_node_count == 2
    # without a far end, an outlier is on no switch
    blind = [n.model_copy(update={"ports": [port(0), port(1)]}) for n in fleet[:7]]
    assert blame_switches(blind, SETTINGS, report.outliers) == []


# --- rail conformance -------------------------------------------------------------------------


def railed(host: str, leaves: Sequence[str]) -> NodeSummary:
    return node(host, rails=len(leaves), ports=[port(r, leaf) for r, leaf in enumerate(leaves)])


def test_a_rail_optimized_fabric_names_swapped_cables():
    fleet = [railed(h, ["leaf0", "leaf1", "leaf2", "leaf3"]) for h in hosts(8)]
    assert find_rail_misplacements(fleet, SETTINGS) == []
    fleet[2] = railed("gpu003", ["leaf1", "leaf0", "leaf2", "leaf3"])
    found = find_rail_misplacements(fleet, SETTINGS)
    assert [(m.host, m.rail, m.target, m.peer_name, m.expected) for m in found] == [
        ("gpu003", 0, "mlx5_0:1", "leaf1", ["leaf0"]),
        ("gpu003", 1, "mlx5_1:1", "leaf0", ["leaf1"]),
    ]


def test_rails_spanning_a_leaf_per_scalable_unit():
    su_a = [railed(h, [f"leaf{r}a" for r in range(4)]) for h in hosts(8)]
    su_b = [railed(h, [f"leaf{r}b" for r in range(4)]) for h in hosts(8, 20)]
    su_c = [railed("gpu040", [f"leaf{r}c" for r in range(4)])]  # a unit with one node so far
    assert find_rail_misplacements(su_a + su_b + su_c, SETTINGS) == []
    stray = railed("gpu050", ["leaf0b", "leaf1b", "leaf3a", "leaf3b"])
    (found,) = find_rail_misplacements(su_a + su_b + su_c + [stray], SETTINGS)
    assert (found.host, found.rail, found.peer_name) == ("gpu050", 2, "leaf3a")
    assert found.expected == ["leaf2a", "leaf2b", "leaf2c"]


def test_a_leaf_per_two_rails():
    leaves = ["leafA", "leafA", "leafB", "leafB"]
    fleet = [railed(h, leaves) for h in hosts(8)]
    assert find_rail_misplacements(fleet, SETTINGS) == []
    fleet.append(railed("gpu100", ["leafA", "leafB", "leafB", "leafB"]))
    (found,) = find_rail_misplacements(fleet, SETTINGS)
    assert (found.host, found.rail, found.expected) == ("gpu100", 1, ["leafA"])


def test_a_non_rail_fabric_flags_nobody():
    fleet = [railed(h, [f"leaf{i // 4}"] * 8) for i, h in enumerate(hosts(16))]
    fleet.append(railed("gpu100", ["leaf0"] * 7 + ["leaf3"]))  # one cable on another leaf
    assert find_rail_misplacements(fleet, SETTINGS) == []
    # the far end of rail 0 unread on most nodes of leaf5: rail 0 is a stray there, but leaf5
    # carries 7 rails of 8 - no rail-aligned switch
    fleet += [node(h, rails=8, ports=[port(0)] + [port(r, "leaf5") for r in range(1, 8)])
              for h in hosts(10, 50)]  # fmt: skip
    fleet.append(railed("gpu060", ["leaf5"] * 8))
    assert find_rail_misplacements(fleet, SETTINGS) == []


def test_a_non_rail_fabric_of_nodes_with_4_and_8_hcas_flags_nobody():
    """leafB carries 4-HCA nodes and one 8-HCA node: its rails 0-3 are half the fleet's, and
    rails 4-7 strays there - but rails 4-7 land mostly on leafA, which carries every rail: they
    show no rails, so the 8-HCA node on leafB is no misplacement."""
    eight = [railed(h, ["leafA"] * 8) for h in hosts(8)]
    four = [railed(h, ["leafB"] * 4) for h in hosts(8, 20)]
    assert find_rail_misplacements([*eight, *four, railed("gpu100", ["leafB"] * 8)], SETTINGS) == []


def test_one_rail_or_no_far_ends_say_nothing():
    assert find_rail_misplacements([railed(h, ["leaf0"]) for h in hosts(8)], SETTINGS) == []
    assert find_rail_misplacements([node(h) for h in hosts(8)], SETTINGS) == []


# --- analyze ----------------------------------------------------------------------------------


def test_analyze_groups_nodes_and_moves_those_of_a_suspect_switch():
    on_leaf09 = [port(0), port(1, "leaf09", 10), port(2), port(3)]
    fleet = [node(h, ports=on_leaf09 if i < 5 else None) for i, h in enumerate(hosts(20))]
    fleet += [failing_node(h, "leaf07", 20 + i) for i, h in enumerate(hosts(3, 30))]
    fleet += [failing_node(h, "leaf09", i, rail=1) for i, h in enumerate(["gpu040", "gpu042"])]
    fleet.append(  # fails on leaf07 too, but its reason is elsewhere: drained
        failing_node("gpu050", "leaf07", 40)
        .model_copy(update={"drain_reason": "ibdiag: node kernel.log xid"})
    )  # fmt: skip
    fleet.append(  # its reason is its port on leaf07, but the node fails elsewhere too: drained
        failing_node("gpu051", "leaf07", 41).model_copy(update={"failing_elsewhere": ["mlx5_3"]})
    )
    fleet.append(node("gpu060", verdict="CRITICAL", drain_reason="ibdiag: mlx5_2:1 link.state"))
    fleet.append(node("gpu061", verdict="WARNING", drain_reason="ibdiag: mlx5_0:1 counters"))
    fleet.append(node("gpu062", verdict="UNKNOWN", verdict_reason="1 error"))
    fleet.append(node("extra1"))  # not expected: reported all the same
    expected = expand("gpu[001-020,030-032,040,042,050-051,060-062,070-071]")
    report = analyze(fleet, SETTINGS, expected=expected)
    assert report.counts == {"OK": 21, "WARNING": 1, "CRITICAL": 8, "UNKNOWN": 1, "MISSING": 2}
    assert report.nodes_read == 31
    assert [(s.peer_name, s.suspect, s.failing_node_count) for s in report.switches] == [
        ("leaf07", True, 5),
        ("leaf09", False, 2),  # 2 of its 7 nodes
    ]
    assert [(g.reason, g.nodes, g.count) for g in report.switch_suspect] == [
        (LINK_FAIL.format(rail=0), "gpu[030-032]", 3)
    ]
    assert [(g.reason, g.nodes, g.count) for g in report.drain] == [
        (LINK_FAIL.format(rail=1), "gpu[040,042]", 2),  # largest first
        (LINK_FAIL.format(rail=0), "gpu051", 1),
        ("ibdiag: mlx5_2:1 link.state", "gpu060", 1),
        ("ibdiag: node kernel.log xid", "gpu050", 1),
    ]
    assert report.missing == NodeGroup(reason="no report", nodes="gpu[070-071]", count=2)
    assert [(g.reason, g.nodes) for g in report.warnings] == [
        ("ibdiag: mlx5_0:1 counters", "gpu061")
    ]
    assert [(g.reason, g.nodes) for g in report.unknown] == [("1 error", "gpu062")]
    assert report.outliers == report.drift == report.rail_misplacements == []
    assert (report.verdict, report.exit_code) == ("CRITICAL", 2)
    assert report.verdict_reason == (
        "8 CRITICAL nodes (5 to drain, 3 switch-suspect), 2 expected nodes missing"
    )
    assert report.tool_version == __version__ and report.settings == SETTINGS
    assert report.generated_at.utcoffset() == timezone.utc.utcoffset(None)
    assert FleetReport.model_validate_json(report.model_dump_json()) == report


def test_a_healthy_fleet_is_ok():
    report = analyze([node(h) for h in hosts(12)], SETTINGS, expected=hosts(12))
    assert (report.verdict, report.verdict_reason, report.exit_code) == ("OK", "12 nodes OK", 0)
    assert report.counts["MISSING"] == 0 and report.missing is None
    assert report.drain == report.switch_suspect == report.switches == []


def test_a_missing_node_alone_is_critical():
    report = analyze([node(h) for h in hosts(3)], SETTINGS, expected=hosts(4))
    assert (report.verdict, report.verdict_reason) == ("CRITICAL", "1 expected node missing")


@pytest.mark.parametrize(
    ("extra", "problems", "reason"),
    [
        ([node("gpu100", verdict="WARNING", drain_reason="w")], (), "1 WARNING node"),
        ([node("gpu100", verdict="UNKNOWN")], (), "1 UNKNOWN node"),
        ([bw("gpu100", {0: 300.0, 1: 400.0, 2: 400.0, 3: 400.0})], (), "1 outlier"),
        ([node("gpu100", hcas=[hca(0, fw_ver="1.0"), hca(1), hca(2), hca(3)])], (),
         "1 drifting attribute"),
        ([railed("gpu100", ["leaf1", "leaf1", "leaf2", "leaf3"])], (), "1 misplaced rail"),
        ([], [ReadProblem(source="x.json", reason="not JSON")], "1 unreadable input"),
    ],
)  # fmt: skip
def test_what_makes_the_fleet_warn(extra, problems, reason):
    peers = [railed(h, ["leaf0", "leaf1", "leaf2", "leaf3"]) for h in hosts(8)]
    peers = [p.model_copy(update={"metrics": bw(p.host, dict.fromkeys(range(4), 400.0)).metrics})
             for p in peers]  # fmt: skip
    report = analyze(peers + extra, SETTINGS, read_problems=problems)
    assert (report.verdict, report.verdict_reason, report.exit_code) == ("WARNING", reason, 1)
    assert report.read_problems == list(problems)


def test_no_node_read_is_unknown():
    problem = ReadProblem(source="a.json", reason="truncated")
    report = analyze([], SETTINGS, expected=["gpu001"], read_problems=[problem])
    assert (report.verdict, report.exit_code) == ("UNKNOWN", 3)
    assert report.verdict_reason == (
        "no node report could be read, 1 unreadable input, 1 expected node missing"
    )
    assert report.counts["MISSING"] == 1 and report.nodes_read == 0


def test_duplicates_are_reported_as_given():
    dup = NodeGroup(reason="2 reports: the newest used", nodes="gpu001", count=1)
    report = analyze([node("gpu001")], SETTINGS, duplicates=[dup])
    assert report.duplicates == [dup] and report.verdict == "OK"


def test_analysis_cost_grows_linearly_with_nodes():
    """10,000 nodes of 8 rails in a rail-optimized fabric, with metrics and rates: each
    analysis is one pass (plus sorts), so 4x the nodes take about 4x the time, never 16x."""

    def fleet(count):
        made = []
        for i in range(count):
            host = f"gpu{i:05d}"
            ports = [port(r, f"leaf{r}-{i // 32}", peer_port=i % 32) for r in range(8)]
            metrics = [Metric(name=IB_WRITE_BW, rail=r, value=400.0 - (i % 7)) for r in range(8)]
            metrics.append(Metric(name=SYMBOL, rail=i % 8, value=(i % 3) / 2))  # under the floor
            made.append(
                node(
                    host,
                    rails=8,
                    ports=ports,
                    metrics=metrics,
                    rate_window_hours=1.0,
                    kernel_release="6.8.0",
                    driver_versions={"mlx5_core": "24.10"},
                )
            )
        return made  # fmt: skip

    def seconds(nodes):
        start = time.perf_counter()
        report = analyze(nodes, SETTINGS)
        assert report.verdict == "OK", report.verdict_reason
        return time.perf_counter() - start

    large = fleet(10000)
    took = seconds(large)
    assert took < 30  # about 2 s on two shared cores
    assert took / seconds(large[:2500]) < 10


def test_outliers_already_failed_by_the_nodes_own_checks_are_not_repeated():
    """Outliers name nodes that pass their own floor: a rail whose port (or cable) fails is
    drained for it already; a node-wide metric of a CRITICAL node adds nothing."""
    fleet = [bw(h, {0: 400.0, 1: 400.0}) for h in hosts(11)]
    slow_passing = bw("gpu012", {0: 400.0, 1: 320.0})
    slow_failing = bw("gpu013", {0: 400.0, 1: 300.0}).model_copy(
        update={"ports": [port(0), port(1, status="fail")], "verdict": "CRITICAL",
                "drain_reason": "ibdiag: mlx5_1:1 perftest.bandwidth"}
    )  # fmt: skip
    assert len(find_outliers([*fleet, slow_passing, slow_failing], SETTINGS)) == 2
    report = analyze([*fleet, slow_passing, slow_failing], SETTINGS)
    assert [(o.host, o.rail) for o in report.outliers] == [("gpu012", 1)]


def test_an_expected_short_name_matches_a_report_from_its_fqdn_host():
    fleet = [node("gpu001.cluster.example"), node("gpu002")]
    report = analyze(fleet, SETTINGS, expected=["gpu001", "gpu002", "gpu003"])
    assert report.missing.nodes == "gpu003" and report.counts["MISSING"] == 1


def test_an_expected_node_answers_under_its_report_files_name():
    """fleet run writes DIR/<Slurm node name>.json; the kernel's host name may differ."""
    reported = node("vm-7f3a").model_copy(update={"source": "/shared/run/gpu004.json"})
    report = analyze([reported], SETTINGS, expected=["gpu004", "gpu005"])
    assert report.missing.nodes == "gpu005"
