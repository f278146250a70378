"""phy.fec: each status on our port and the far end's, with and without a baseline.

Readings are the hand-made healthy layouts (tests/captures/perfquery-T/handmade-T-*), and
degraded copies made here (``degraded``: one field changed, named in each test)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import List, Optional

from fec_captures import capture
from partner_builders import partner, port_info
from snapshots import builtin_registry, by_target, device, port, snapshot

from ibdiag.facts.fec import PortFec, fec_role
from ibdiag.facts.outcome import NoData, RunOutcome
from ibdiag.families.perfquery_fec import parse_fec
from ibdiag.grade import run_check
from ibdiag.model import Port, Result, Snapshot, Status
from ibdiag.thresholds import Thresholds

EXTENDED = capture("handmade-T-extended-speeds-edr-hca.txt")
RS = capture("handmade-T-rs-fec-hdr-switch-port21.txt")
CABLE = "mlx5_0:1<->leaf07/21"


def degraded(text: str, **fields: int) -> str:
    """``text`` with each named field's value replaced (a mutation of the healthy reading)."""
    for name, value in fields.items():
        text, count = re.subn(rf"^({name}:\.+)\d+$", rf"\g<1>{value}", text, flags=re.M)
        assert count == 1, name
    return text


def fec(text: str, target: str = "mlx5_0:1") -> PortFec:
    outcome = RunOutcome(role=fec_role(target), command=f"perfquery -T -C {target}")
    return parse_fec(text).model_copy(update={"outcome": outcome})


def unsupported(command: str = "perfquery -T -C mlx5_0 -P 1") -> PortFec:
    reason = "perfquery: iberror: failed: cannot query PortExtendedSpeedsCounters: ..."
    outcome = RunOutcome(command=command, no_data=NoData.NOT_SUPPORTED, reason=reason, rc=255)
    return PortFec(outcome=outcome, mad_error="cannot query PortExtendedSpeedsCounters")


def with_fec(p: Port, reading: Optional[PortFec]) -> Port:
    return p.model_copy(update={"facts": {"fec": reading}} if reading else {})


def node(*readings: Optional[PortFec], far: Optional[PortFec] = None, rate=None) -> Snapshot:
    """mlx5_0.. one ACTIVE 4X IB port each, with these readings; mlx5_0's far end reads ``far``."""
    devices = []
    for index, reading in enumerate(readings):
        p = with_fec(port(1, rate_text=rate) if rate else port(1), reading)
        if index == 0 and far is not None:
            p = p.model_copy(
                update={"partner": partner(fec=far, port_info=port_info(width_active="4X"))}
            )
        devices.append(device(f"mlx5_{index}", ports=[p]))
    return snapshot(devices)


def grade(now: Snapshot, baseline: Optional[Snapshot] = None, th=None) -> List[Result]:
    spec = builtin_registry().get("phy.fec")
    return run_check(spec, now, th or Thresholds(), baseline=baseline)


def later(snap: Snapshot) -> Snapshot:
    return snap.model_copy(update={"collected_at": snap.collected_at + timedelta(hours=2)})


def test_the_healthy_readings_pass_in_both_layouts():
    found = by_target(grade(node(fec(EXTENDED), fec(RS, "mlx5_1:1"), far=fec(RS))))
    assert {t: r.status for t, r in found.items()} == {
        "mlx5_0:1": Status.PASS, "mlx5_1:1": Status.PASS, CABLE: Status.PASS,
    }  # fmt: skip
    assert "0 uncorrectable FEC blocks since the last reset" in found["mlx5_0:1"].message
    assert "112/97/131/105" in found["mlx5_0:1"].message  # lanes 0-3 of a 4X link
    assert found["mlx5_0:1"].evidence == ["perfquery -T -C mlx5_0:1"]


def test_uncorrectable_blocks_since_the_baseline_fail():
    then = node(fec(RS))
    now = later(node(fec(degraded(RS, PortFECUncorrectableBlockCtr=3))))
    result = by_target(grade(now, then))["mlx5_0:1"]
    assert result.status == Status.FAIL and result.observed == 3
    assert "3 uncorrectable FEC blocks since the baseline" in result.message
    assert result.subject == "uncorrectable-fec" and result.hint


def test_old_uncorrectable_blocks_with_a_baseline_pass():
    old = fec(degraded(RS, PortFECUncorrectableBlockCtr=3))
    result = by_target(grade(later(node(old)), node(old)))["mlx5_0:1"]
    assert result.status == Status.PASS and "since the baseline" in result.message


def test_lifetime_uncorrectable_blocks_without_a_baseline_warn_since_the_last_reset():
    reading = fec(degraded(EXTENDED, FECUncorrectableBlockCtrLane2=5))
    result = by_target(grade(node(reading)))["mlx5_0:1"]
    assert result.status == Status.WARN
    assert "5 uncorrectable FEC blocks since the last reset" in result.message


def test_counters_that_went_down_are_a_reset_graded_on_lifetime():
    then = node(fec(degraded(RS, PortFECUncorrectableBlockCtr=9)))
    now = later(node(fec(degraded(RS, PortFECUncorrectableBlockCtr=2))))
    result = by_target(grade(now, then))["mlx5_0:1"]
    assert result.status == Status.WARN and "reset" in result.message


def test_a_lane_far_above_its_siblings_warns_naming_it():
    reading = fec(degraded(EXTENDED, FECCorrectableBlockCtrLane3=50000))
    result = by_target(grade(node(reading)))["mlx5_0:1"]
    assert result.status == Status.WARN and "lane 3 corrected blocks 50000" in result.message
    assert result.subject == "fec-lane3"


def test_a_lane_above_the_factor_but_under_the_floor_passes():
    reading = fec(degraded(EXTENDED, FECCorrectableBlockCtrLane3=900))  # > 10x 105, < 1000
    assert by_target(grade(node(reading)))["mlx5_0:1"].status == Status.PASS


def test_lanes_beyond_the_links_width_are_not_siblings():
    """A 4X link counts on lanes 0-3: the idle lanes 4-11 (0) do not make every lane an outlier."""
    busy = fec(degraded(RS, **{f"FECCorrectableSymbolCtrLane{n}": 20000 for n in range(4)}))
    assert by_target(grade(node(busy)))["mlx5_0:1"].status == Status.PASS


def test_rs_fec_lane_outlier_is_in_corrected_symbols_on_the_delta():
    then = node(fec(RS))
    now = later(node(fec(degraded(RS, FECCorrectableSymbolCtrLane1=1433 + 40000))))
    result = by_target(grade(now, then))["mlx5_0:1"]
    assert result.status == Status.WARN
    assert "lane 1 corrected symbols 40000 since the baseline" in result.message


def test_a_port_far_above_the_nodes_other_ports_warns():
    hot = fec(degraded(RS, PortFECCorrectableBlockCtr=900000), "mlx5_2:1")
    snap = node(fec(RS), fec(RS, "mlx5_1:1"), hot, fec(RS, "mlx5_3:1"))
    found = by_target(grade(snap))
    assert found["mlx5_2:1"].status == Status.WARN
    assert "of the node's other ports" in found["mlx5_2:1"].message
    assert found["mlx5_2:1"].subject == "fec-port-outlier"
    assert found["mlx5_0:1"].status == Status.PASS


def test_the_thresholds_move_the_outlier_line():
    reading = fec(degraded(EXTENDED, FECCorrectableBlockCtrLane3=50000))
    relaxed = Thresholds(fec_outlier_factor=1000)
    assert by_target(grade(node(reading), th=relaxed))["mlx5_0:1"].status == Status.PASS


def test_the_far_end_is_graded_the_same_named_by_both_ends():
    then = node(fec(RS), far=fec(RS))
    now = later(node(fec(RS), far=fec(degraded(RS, PortFECUncorrectableBlockCtr=7))))
    found = by_target(grade(now, then))
    assert found[CABLE].status == Status.FAIL and "7 uncorrectable" in found[CABLE].message
    assert found["mlx5_0:1"].status == Status.PASS


def test_unsupported_is_a_skip_with_perfquerys_reason_at_both_ends():
    found = by_target(grade(node(unsupported(), far=unsupported("perfquery ... -T 5 21"))))
    for target in ("mlx5_0:1", CABLE):
        assert found[target].status == Status.SKIP
        assert "cannot query PortExtendedSpeedsCounters" in found[target].message


def test_not_collected_is_a_skip():
    found = by_target(grade(node(None)))
    assert found["mlx5_0:1"].status == Status.SKIP and "not collected" in found["mlx5_0:1"].message


def test_ethernet_and_down_ports_are_not_graded():
    snap = snapshot([
        device("mlx5_0", ports=[with_fec(port(1, link_layer="Ethernet"), fec(EXTENDED))]),
        device("mlx5_1", ports=[port(1, state=1)]),
    ])  # fmt: skip
    assert grade(snap) == []


def test_timed_out_is_a_skip_never_a_failure():
    outcome = RunOutcome(command="perfquery -T", no_data=NoData.TIMED_OUT, reason="timed out")
    result = by_target(grade(node(PortFec(outcome=outcome))))["mlx5_0:1"]
    assert result.status == Status.SKIP and result.message == "timed out"


def test_ports_of_another_layout_are_not_compared():
    """An EDR port's few corrected blocks are no yardstick for an HDR port's RS-FEC totals."""
    found = by_target(grade(node(fec(EXTENDED), fec(RS, "mlx5_1:1"))))
    assert found["mlx5_1:1"].status == Status.PASS


def test_a_reading_cut_short_says_what_was_not_read():
    """RS-FEC totals missing (output cut short): graded on what was read, saying so."""
    cut = "\n".join(RS.splitlines()[:-3])
    result = by_target(grade(node(fec(cut))))["mlx5_0:1"]
    assert result.status == Status.PASS and result.observed is None
    assert "uncorrectable FEC blocks not read" in result.message
    assert "3 fields missing" in result.message


def test_a_far_end_without_a_reading_is_a_skip_saying_why():
    """An older bundle, or a far end whose answers were implausible (nothing of it graded)."""
    p = with_fec(port(1), fec(RS)).model_copy(update={"partner": partner()})
    found = by_target(grade(snapshot([device("mlx5_0", ports=[p])])))
    assert found[CABLE].status == Status.SKIP and "older bundle" in found[CABLE].message
    assert found["mlx5_0:1"].status == Status.PASS


def test_a_saturated_counter_warns_naming_it():
    """A PMA counter stops at its maximum: a saturated one cannot show new errors."""
    stuck = fec(degraded(EXTENDED, FECCorrectableBlockCtrLane0=4294967295))
    result = by_target(grade(later(node(stuck)), node(stuck)))["mlx5_0:1"]
    assert result.status == Status.WARN and "FECCorrectableBlockCtrLane0 saturated" in (
        result.message
    )
    assert "fec-saturated" in result.subject
    rs = fec(degraded(RS, PortFECUncorrectableBlockCtr=4294967295, SyncHeaderErrorCounter=65535))
    assert rs.saturated() == ["SyncHeaderErrorCounter", "PortFECUncorrectableBlockCtr"]
