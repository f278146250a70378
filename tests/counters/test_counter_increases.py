"""``Report.counter_increases``: the error counters that went up since the baseline, by target,
with the interval - what ``ibdiag fleet report`` turns into per-node error rates."""

from __future__ import annotations

from datetime import timedelta

from snapshots import builtin_registry, device, port, replaced, snapshot

from ibdiag.counters.increases import counter_increases
from ibdiag.grade import grade
from ibdiag.thresholds import Thresholds

ZERO = {"symbol_error": 0, "port_rcv_errors": 0, "port_rcv_data": 1000, "link_downed": 0}


def node(counters=ZERO, hw=None, hours: float = 0.0, **snap_update):
    snap = snapshot([device("mlx5_0", [port(1, counters=dict(counters))]), device("mlx5_1")])
    snap = replaced(snap, "mlx5_0:1", hw_counters=dict(hw or {}))
    update = {"collected_at": snap.collected_at + timedelta(hours=hours), **snap_update}
    return snap.model_copy(update=update)


def test_only_error_counters_that_went_up_are_listed_with_the_interval():
    then = node(hw={"out_of_sequence": 5})
    now = node(
        {**ZERO, "symbol_error": 12, "port_rcv_data": 999999, "link_downed": 0},
        hw={"out_of_sequence": 9},
        hours=2.0,
    )
    found = counter_increases(now, then)
    assert found is not None and found.hours == 2.0 and not found.rebooted
    assert found.targets == {"mlx5_0:1": {"symbol_error": 12, "out_of_sequence": 4}}


def test_no_baseline_another_host_or_nothing_increased():
    now = node(hours=1.0)
    assert counter_increases(now, None) is None
    assert counter_increases(now, node(host="node999")) is None
    assert counter_increases(now, node()).targets == {}


def test_a_reboot_counts_from_zero_and_says_so():
    then = node({**ZERO, "symbol_error": 50})
    now = node({**ZERO, "symbol_error": 3}, hours=5.0, boot_id="another-boot")
    found = counter_increases(now, then)
    assert found.rebooted and found.targets == {"mlx5_0:1": {"symbol_error": 3}}


def test_grade_keeps_them_on_the_report_and_they_round_trip_json():
    from ibdiag.model import Report

    then = node()
    now = node({**ZERO, "symbol_error": 7}, hours=3.0)
    report = grade(now, builtin_registry(), Thresholds(), "quick", baseline=then)
    assert report.counter_increases.targets == {"mlx5_0:1": {"symbol_error": 7}}
    assert grade(now, builtin_registry(), Thresholds(), "quick").counter_increases is None
    again = Report.model_validate_json(report.model_dump_json())
    assert again.counter_increases == report.counter_increases


def test_the_far_ends_increases_are_listed_under_our_port_as_partner_counters():
    from partner_builders import counters, partner

    then = replaced(node(), "mlx5_0:1", partner=partner(counters=counters(SymbolErrorCounter=5)))
    now = node(hours=2.0, boot_id="rebooted-since")  # a node reboot leaves the switch counting
    now = replaced(now, "mlx5_0:1", partner=partner(counters=counters(SymbolErrorCounter=25)))
    found = counter_increases(now, then)
    assert found.targets == {"mlx5_0:1": {"partner:symbol_error": 20}}
    recabled = replaced(now, "mlx5_0:1", partner=partner(port=30, counters=counters(
        SymbolErrorCounter=25)))  # fmt: skip
    assert counter_increases(recabled, then).targets == {}  # another switch port: starts fresh


def test_far_end_readings_of_x_and_plain_perfquery_are_not_compared():
    """A plain PortCounters reading cleared to 0 then a 64-bit -x reading of 5000: no rate."""
    from partner_builders import counters, extended, partner

    then = replaced(node(), "mlx5_0:1", partner=partner(counters=counters(SymbolErrorCounter=0)))
    now = replaced(node(hours=2.0), "mlx5_0:1",
                   partner=partner(counters=extended(SymbolErrorCounter=5000)))  # fmt: skip
    assert counter_increases(now, then).targets == {}
    both_x = replaced(then, "mlx5_0:1", partner=partner(counters=extended(SymbolErrorCounter=0)))
    assert counter_increases(now, both_x).targets == {"mlx5_0:1": {"partner:symbol_error": 5000}}
