"""Counter change since a baseline: deltas, rates, restarts, matching, and the judge.

Unit cases pin the rules; hypothesis properties show the arithmetic never crashes, never goes
negative and never produces inf/nan on any counter values a 64-bit counter can hold.
"""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from snapshots import device, port, replaced, snapshot

from ibdiag.counters.deltas import MIN_RATE_WINDOW_HOURS, Change, change, compare
from ibdiag.counters.grading import format_interval, judge
from ibdiag.model import Status
from ibdiag.thresholds import MAX_RATE_PER_HOUR, CounterRule

U64 = 2**64 - 1
RANK = {Status.PASS: 0, Status.WARN: 1, Status.FAIL: 2}

# --- change(): unit cases --------------------------------------------------------------------


def test_no_previous_value_means_no_delta():
    item = change("symbol_error", 7, None, 2.0, False)
    assert item == Change("symbol_error", 7)
    assert item.delta is None and item.per_hour is None and item.restarted is None
    assert item.judged_per_hour is None


def test_increase():
    item = change("symbol_error", 17, 7, 2.0, False)
    assert item.previous == 7
    assert item.delta == 10
    assert item.per_hour == 5.0
    assert item.judged_per_hour == 5.0
    assert item.restarted is None
    assert item.hours == 2.0


def test_equal_values_are_a_zero_delta():
    item = change("link_downed", 3, 3, 1.5, False)
    assert item.delta == 0
    assert item.per_hour == 0.0
    assert item.restarted is None


def test_value_went_down_means_restarted_from_zero_with_reason():
    item = change("symbol_error", 4, 90, 2.0, False)
    assert item.delta == 4  # counted from zero, never 4 - 90
    assert item.per_hour == 2.0
    assert item.restarted is not None
    assert "went down from 90 to 4" in item.restarted
    assert "perfquery -r" in item.restarted


def test_reboot_counts_the_value_from_zero():
    item = change("symbol_error", 50, 50, 3.0, True)  # same value, but a new boot
    assert item.delta == 50
    assert item.restarted == "the node rebooted since the baseline"


def test_reboot_wins_over_went_down():
    item = change("symbol_error", 2, 40, 3.0, True)
    assert item.delta == 2
    assert "rebooted" in (item.restarted or "")


@pytest.mark.parametrize("hours", [0.0, -0.5, -1000.0, None])
def test_no_positive_interval_means_no_rate(hours):
    item = change("symbol_error", 20, 10, hours, False)
    assert item.delta == 10
    assert item.per_hour is None
    assert item.judged_per_hour is None


def test_judged_per_hour_is_over_at_least_one_hour():
    assert MIN_RATE_WINDOW_HOURS == 1.0
    short = change("symbol_error", 100, 0, 10 / 60, False)  # +100 in 10 minutes
    assert short.per_hour == pytest.approx(600.0)
    assert short.judged_per_hour == 100.0  # 100 / max(1/6, 1)
    long = change("symbol_error", 100, 0, 4.0, False)
    assert long.judged_per_hour == 25.0


def test_judged_per_hour_without_delta_is_none():
    assert Change("x", 5, None, None, None, None, 2.0).judged_per_hour is None


# --- judge(): unit cases ---------------------------------------------------------------------


SYMBOL_RULE = CounterRule(on_increase="warn", rate_fail_per_hour=120)


@pytest.mark.parametrize(
    "delta,hours,status,why",
    [
        (0, 2.0, Status.PASS, "no increase"),
        (1, 2.0, Status.WARN, "any increase warns"),
        (240, 2.0, Status.WARN, "any increase warns"),  # exactly 120/hour: not above
        (241, 2.0, Status.FAIL, "above 120/hour"),
        (100, 1 / 6, Status.WARN, "any increase warns"),  # 10 min: judged over 1 h
        (120, 1 / 6, Status.WARN, "any increase warns"),
        (121, 1 / 6, Status.FAIL, "above 120/hour (judged over at least 1 h)"),
        (10**6, None, Status.WARN, "any increase warns"),  # no interval: no rate judged
    ],
)
def test_judge_symbol_error_boundaries(delta, hours, status, why):
    assert judge(change("symbol_error", 1000 + delta, 1000, hours, False), SYMBOL_RULE) == (
        status,
        why,
    )


def test_judge_without_baseline_value_is_pass():
    assert judge(change("link_downed", 9, None, 1.0, False), CounterRule(on_increase="fail")) == (
        Status.PASS,
        "no increase",
    )


def test_judge_any_increase_fails():
    status, why = judge(change("link_downed", 1, 0, 5.0, False), CounterRule(on_increase="fail"))
    assert (status, why) == (Status.FAIL, "any increase fails")


def test_judge_info_is_pass_but_a_rate_warn_raises_it():
    rule = CounterRule(on_increase="info", rate_warn_per_hour=5)
    assert judge(change("c", 10, 0, 2.0, False), rule) == (Status.PASS, "informative")
    assert judge(change("c", 11, 0, 2.0, False), rule) == (Status.WARN, "above 5/hour")


def test_judge_unset_on_increase_is_informative():
    assert judge(change("c", 10, 0, 2.0, False), CounterRule()) == (Status.PASS, "informative")


def test_judge_a_rate_never_lowers_on_increase():
    rule = CounterRule(on_increase="fail", rate_warn_per_hour=1)
    assert judge(change("c", 100, 0, 1.0, False), rule)[0] == Status.FAIL


def test_format_interval():
    assert format_interval(42 / 3600) == "42 s"
    assert format_interval(10 / 60) == "10 min"
    assert format_interval(2.0) == "2.0 h"
    assert format_interval(84.0) == "3.5 days"


# --- compare(): matching, host, interval, reboot ---------------------------------------------


def _later(snap, hours=2.0):
    return snap.model_copy(update={"collected_at": snap.collected_at + timedelta(hours=hours)})


def test_compare_matches_devices_and_ports_by_name_and_guid():
    before = snapshot(devices=[device("mlx5_0"), device("mlx5_1")])
    after = _later(before)
    comparison = compare(after, before)
    assert comparison.unmatched == []
    assert set(comparison.devices) == {"mlx5_0", "mlx5_1"}
    assert set(comparison.ports) == {("mlx5_0", 1), ("mlx5_1", 1)}
    assert comparison.hours == pytest.approx(2.0)
    assert comparison.rebooted is False and comparison.other_host is False
    dev = after.devices[1]
    assert comparison.previous_device(dev) is before.devices[1]
    assert comparison.previous_port(dev, dev.ports[0]) is before.devices[1].ports[0]


def test_compare_a_swapped_hca_with_another_guid_is_unmatched():
    before = snapshot(devices=[device("mlx5_0"), device("mlx5_1", node_guid="1111:2222:3333:4444")])
    after = _later(snapshot(devices=[device("mlx5_0"), device("mlx5_1", node_guid="aaaa:bbbb")]))
    comparison = compare(after, before)
    assert comparison.unmatched == ["mlx5_1"]
    assert set(comparison.devices) == {"mlx5_0"}
    assert ("mlx5_1", 1) not in comparison.ports
    assert comparison.previous_device(after.devices[1]) is None
    assert comparison.previous_port(after.devices[1], after.devices[1].ports[0]) is None


def test_compare_unknown_guid_on_one_side_matches_by_name():
    before = replaced(snapshot(devices=[device("mlx5_0")]), "mlx5_0", node_guid=None)
    comparison = compare(_later(snapshot(devices=[device("mlx5_0")])), before)
    assert comparison.unmatched == []
    assert ("mlx5_0", 1) in comparison.ports


def test_compare_flags_another_host():
    before = snapshot().model_copy(update={"host": "node999"})
    comparison = compare(_later(snapshot()), before)
    assert comparison.other_host is True
    unknown = before.model_copy(update={"host": None})  # unknown host: not "another" host
    assert compare(_later(snapshot()), unknown).other_host is False


def test_compare_lists_ports_and_devices_missing_from_the_baseline():
    before = snapshot(devices=[device("mlx5_0", ports=[port(1)])])
    after = _later(snapshot(devices=[device("mlx5_0", ports=[port(1), port(2)]), device("mlx5_1")]))
    comparison = compare(after, before)
    assert comparison.unmatched == ["mlx5_0:2", "mlx5_1"]
    assert set(comparison.ports) == {("mlx5_0", 1)}


@pytest.mark.parametrize("hours", [-1.0, 0.0])
def test_compare_clock_skew_means_no_interval(hours):
    before = snapshot()
    comparison = compare(_later(before, hours), before)
    assert comparison.hours is None
    assert comparison.unmatched == []


def test_compare_detects_a_reboot_by_boot_id():
    before = snapshot()
    after = _later(before).model_copy(update={"boot_id": "00000000-0000-0000-0000-000000000000"})
    assert compare(after, before).rebooted is True
    after = after.model_copy(update={"boot_id": None})  # unknown boot id: no reboot claimed
    assert compare(after, before).rebooted is False


def test_comparison_changes_use_interval_and_reboot():
    before = snapshot()
    after = _later(before, 4.0).model_copy(update={"boot_id": "new-boot"})
    comparison = compare(after, before)
    items = comparison.changes({"symbol_error": 8, "link_downed": 0}, {"symbol_error": 8})
    assert items[0].delta == 8 and items[0].restarted and items[0].per_hour == 2.0
    assert items[1].previous is None and items[1].delta is None  # not in the baseline
    lifetime = comparison.changes({"symbol_error": 8}, None)
    assert lifetime == [Change("symbol_error", 8)]


# --- properties ------------------------------------------------------------------------------

counter_values = st.integers(min_value=0, max_value=U64)
intervals = st.one_of(
    st.none(),
    st.just(0.0),
    st.sampled_from([5e-324, 1e-300, 1e-12, 1 / 3600, 1e300, 1.7976931348623157e308]),
    st.floats(allow_nan=False, allow_infinity=True),
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
)
severities = st.sampled_from([None, "fail", "warn", "info"])
# every rate a config may hold (CounterRule refuses inf, nan and more than MAX_RATE_PER_HOUR)
rates = st.one_of(st.none(), st.floats(min_value=0, max_value=MAX_RATE_PER_HOUR))
rules = st.builds(
    CounterRule,
    on_increase=severities,
    rate_warn_per_hour=rates,
    rate_fail_per_hour=rates,
    lifetime_limit=st.one_of(st.none(), st.integers(min_value=0, max_value=U64)),
)


def _finite_non_negative(value):
    return value is None or (math.isfinite(value) and value >= 0)


@settings(max_examples=300, deadline=None)
@given(value=counter_values, previous=st.one_of(st.none(), counter_values), hours=intervals,
       rebooted=st.booleans())  # fmt: skip
@example(value=0, previous=U64, hours=-1.0, rebooted=False)
@example(value=U64, previous=U64, hours=float("inf"), rebooted=True)
@example(value=U64, previous=0, hours=5e-324, rebooted=False)
def test_change_never_raises_and_never_goes_negative(value, previous, hours, rebooted):
    item = change("c", value, previous, hours, rebooted)
    assert item.value == value
    if previous is None:
        assert item.delta is None and item.per_hour is None and item.judged_per_hour is None
        return
    assert item.delta is not None and item.delta >= 0
    if item.restarted:
        assert item.delta <= value
    else:
        assert item.delta == value - previous
    assert item.per_hour is None or item.per_hour >= 0
    assert item.judged_per_hour is None or item.judged_per_hour >= 0
    if hours is None or hours <= 0:
        assert item.per_hour is None and item.judged_per_hour is None


@settings(max_examples=300, deadline=None)
@given(value=counter_values, previous=st.one_of(st.none(), counter_values), hours=intervals,
       rebooted=st.booleans())  # fmt: skip
@example(value=U64, previous=0, hours=5e-324, rebooted=False)  # per_hour was inf
@example(value=U64, previous=0, hours=1e-300, rebooted=False)
def test_change_rates_are_never_inf_or_nan(value, previous, hours, rebooted):
    item = change("c", value, previous, hours, rebooted)
    assert _finite_non_negative(item.per_hour), item.per_hour
    assert _finite_non_negative(item.judged_per_hour), item.judged_per_hour


@settings(max_examples=300, deadline=None)
@given(value=counter_values, previous=st.one_of(st.none(), counter_values), hours=intervals,
       rebooted=st.booleans(), rule=rules)  # fmt: skip
def test_judge_never_raises(value, previous, hours, rebooted, rule):
    status, why = judge(change("c", value, previous, hours, rebooted), rule)
    assert status in RANK
    assert isinstance(why, str) and why


@settings(max_examples=300, deadline=None)
@given(
    previous=counter_values,
    deltas=st.tuples(st.integers(0, 2**40), st.integers(0, 2**40)),
    hours=st.one_of(st.none(), st.floats(min_value=1e-6, max_value=1e6)),
    rule=rules,
)
def test_judge_is_monotonic_in_delta(previous, deltas, hours, rule):
    small, large = sorted(deltas)
    low = judge(change("c", previous + small, previous, hours, False), rule)[0]
    high = judge(change("c", previous + large, previous, hours, False), rule)[0]
    assert RANK[low] <= RANK[high]


@settings(max_examples=300, deadline=None)
@given(
    delta=st.integers(1, 2**40),
    hours=st.floats(min_value=1e-6, max_value=1e6),
    factor=st.floats(min_value=1.0, max_value=1e6),
    rule=rules,
)
def test_judge_status_only_goes_up_when_the_interval_shrinks(delta, hours, factor, rule):
    """The same increase over a shorter interval is a higher rate: never a better status."""
    slow = judge(change("c", delta, 0, hours * factor, False), rule)[0]
    fast = judge(change("c", delta, 0, hours, False), rule)[0]
    assert RANK[slow] <= RANK[fast]
