"""Counter checks on before/after Snapshot pairs built from the real sysfs captures.

"before" is a Snapshot collected from a scenario tree; "after" is a copy with counters
changed and ``collected_at`` moved forward. The checks grade the change (delta, rate per hour,
restarts) per the catalogue's rules and the thresholds' overrides.
"""

from __future__ import annotations

import functools
import os
from datetime import timedelta
from typing import Dict, List, Optional

import pytest
from conftest import SCENARIOS_DIR
from snapshots import builtin_registry, replaced
from sysfs_builder import mlx5_node, write_node

from ibdiag.collect import collect
from ibdiag.grade import grade, run_check
from ibdiag.model import Result, Snapshot, Status
from ibdiag.thresholds import CounterRule, Thresholds

HWLOC = os.path.join(
    SCENARIOS_DIR, "hwloc-tacc-stampede-c412-603-connectx3-mlx4-fdr", "root", "sys"
)
NODE_EXPORTER = os.path.join(SCENARIOS_DIR, "node_exporter-fixtures-i40iw-mlx4", "root", "sys")
HWLOC_PORT = "mlx4_0:1"  # full PortCounters, symbol_error 0, port_xmit_wait 21833

COUNTER_CHECKS = (
    "counters.baseline",
    "counters.port_errors",
    "counters.hw_errors",
    "counters.saturation",
    "counters.congestion",
    "counters.traffic",
)


@functools.cache
def _collected(sysfs_root: str) -> Snapshot:
    return collect(sysfs_root, "/proc", {"sysfs"})


def captured(sysfs_root: str = HWLOC) -> Snapshot:
    """A Snapshot of a capture (frozen: tests build changed copies of it)."""
    return _collected(sysfs_root)


def _owner(snap: Snapshot, target: str):
    """The port (``dev:port``) or device (``dev``) a target names."""
    name, _, number = target.partition(":")
    dev = snap.device(name)
    assert dev is not None, target
    if not number:
        return dev
    return next(p for p in dev.ports if p.number == int(number))


def later(
    before: Snapshot,
    hours: float = 2.0,
    target: str = HWLOC_PORT,
    hw: bool = False,
    **deltas: int,
) -> Snapshot:
    """``before`` ``hours`` later with counters of ``target`` increased by ``deltas``."""
    values = dict(getattr(_owner(before, target), "hw_counters" if hw else "counters"))
    for name, delta in deltas.items():
        values[name] = values.get(name, 0) + delta
    after = replaced(before, target, **{"hw_counters" if hw else "counters": values})
    return after.model_copy(update={"collected_at": before.collected_at + timedelta(hours=hours)})


def set_counters(
    snap: Snapshot, target: str = HWLOC_PORT, hw: bool = False, **values: int
) -> Snapshot:
    """``snap`` with these counters of ``target`` set."""
    field = "hw_counters" if hw else "counters"
    return replaced(snap, target, **{field: {**getattr(_owner(snap, target), field), **values}})


def renamed(snap: Snapshot, **update: object) -> Snapshot:
    """``snap`` with node-level fields (host, boot_id, ...) replaced."""
    return snap.model_copy(update=update)


def check(
    check_id: str,
    after: Snapshot,
    baseline: Optional[Snapshot] = None,
    th: Optional[Thresholds] = None,
) -> List[Result]:
    spec = builtin_registry().get(check_id)
    assert spec is not None, check_id
    results = run_check(spec, after, th or Thresholds(), baseline=baseline)
    assert all(r.status != Status.ERROR for r in results), results
    return results


def one(results: List[Result], target: str) -> Result:
    found = [r for r in results if r.target == target]
    assert len(found) == 1, f"{target}: {found}"
    return found[0]


def not_passing(results: List[Result]) -> List[Result]:
    return [r for r in results if r.status != Status.PASS]


@pytest.fixture
def mlx5_tree(tmp_path):
    """A builder mlx5 node (2 HCAs, hw_counters per port) plus device-level hw_counters."""
    root = str(tmp_path / "sys")
    write_node(root, mlx5_node(2))
    for dev in ("mlx5_0", "mlx5_1"):
        hw_dir = os.path.join(root, "class", "infiniband", dev, "hw_counters")
        os.makedirs(hw_dir)
        for name in ("req_transport_retries_exceeded", "out_of_buffer", "lifespan"):
            with open(os.path.join(hw_dir, name), "w") as handle:
                handle.write("0\n" if name != "lifespan" else "10\n")
        port_hw = os.path.join(root, "class", "infiniband", dev, "ports", "1", "hw_counters")
        for name in ("req_transport_retries_exceeded", "req_rnr_retries_exceeded"):
            with open(os.path.join(port_hw, name), "w") as handle:
                handle.write("0\n")
    return root


# --- the capture's own values -----------------------------------------------------------------


def test_captures_hold_the_documented_counters():
    hwloc = _owner(captured(HWLOC), HWLOC_PORT).counters
    assert hwloc["port_xmit_wait"] == 21833
    assert hwloc["symbol_error"] == 0
    exporter = _owner(captured(NODE_EXPORTER), "mlx4_0:1").counters
    assert exporter["port_xmit_wait"] == 4294967295
    assert exporter["port_xmit_discards"] == 5


# --- no baseline: lifetime values shown, never graded on change --------------------------------


def test_no_baseline_shows_lifetime_values_and_never_fails():
    snap = captured()
    snap = set_counters(snap, symbol_error=5000, link_downed=200, port_rcv_errors=77)
    report = grade(snap, builtin_registry(), Thresholds())
    counters = [r for r in report.results if r.check_id in COUNTER_CHECKS]
    assert not [r for r in counters if r.status in (Status.FAIL, Status.WARN, Status.ERROR)]
    baseline = one([r for r in counters if r.check_id == "counters.baseline"], "node")
    assert baseline.status == Status.SKIP
    assert "no baseline" in baseline.message
    errors = one([r for r in counters if r.check_id == "counters.port_errors"], HWLOC_PORT)
    assert errors.status == Status.PASS
    assert "symbol_error 5000" in errors.message
    assert "link_downed 200" in errors.message
    assert "port_rcv_errors 77" in errors.message
    assert "no baseline" in errors.message


def test_no_baseline_node_exporter_lifetime_discards_pass():
    results = check("counters.port_errors", captured(NODE_EXPORTER))
    result = one(results, "mlx4_0:1")
    assert result.status == Status.PASS
    assert "lifetime port_xmit_discards 5" in result.message
    assert "all zero" in one(results, "mlx4_0:2").message


@pytest.mark.parametrize("with_baseline", [False, True])
def test_port_with_no_readable_counters_is_a_skip_naming_why(with_baseline):
    """i40iw0 in the node_exporter capture reads 'N/A (no PMA)' in every counter file."""
    before = captured(NODE_EXPORTER)
    after = later(before, 2.0, "mlx4_0:1")
    results = check("counters.port_errors", after, before if with_baseline else None)
    skip = one(results, "i40iw0:1")
    assert skip.status == Status.SKIP
    assert "17 unreadable" in skip.message and "N/A (no PMA)" in skip.message
    assert one(results, "mlx4_0:1").status == Status.PASS


@pytest.mark.parametrize("value,status", [(2, Status.PASS), (3, Status.FAIL)])
def test_no_baseline_lifetime_limit_fails_above_it(value, status):
    snap = captured()
    snap = set_counters(snap, symbol_error=value)
    th = Thresholds(counters={"symbol_error": CounterRule(lifetime_limit=2)})
    result = one(check("counters.port_errors", snap, th=th), HWLOC_PORT)
    assert result.status == status
    if status == Status.FAIL:
        assert result.message == (
            "symbol_error is 3 since boot or the last reset, above the lifetime limit 2"
        )
        assert result.observed == 3
        assert result.expected == "at most 2"
        assert result.evidence == ["class/infiniband/mlx4_0/ports/1/counters/symbol_error"]
        assert "ibdiag explain symbol_error" in (result.hint or "")


def test_lifetime_limit_is_not_used_with_a_baseline():
    before = captured()
    before = set_counters(before, symbol_error=50)
    after = later(before)
    th = Thresholds(counters={"symbol_error": CounterRule(lifetime_limit=2)})
    assert one(check("counters.port_errors", after, before, th), HWLOC_PORT).status == Status.PASS


# --- threshold boundaries ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "hours,delta,status,phrase",
    [
        (2.0, 1, Status.WARN, "symbol_error +1 since the baseline 2.0 h ago (0.5/hour): "
         "any increase warns"),
        (2.0, 240, Status.WARN, "symbol_error +240 since the baseline 2.0 h ago (120.0/hour): "
         "any increase warns"),
        (2.0, 241, Status.FAIL, "symbol_error +241 since the baseline 2.0 h ago (120.5/hour): "
         "above 120/hour"),
        (1 / 6, 100, Status.WARN, "symbol_error +100 since the baseline 10 min ago: "
         "any increase warns"),
        (1 / 6, 120, Status.WARN, "any increase warns"),
        (1 / 6, 121, Status.FAIL, "symbol_error +121 since the baseline 10 min ago: "
         "above 120/hour (judged over at least 1 h)"),
    ],
)  # fmt: skip
def test_symbol_error_boundaries(hours, delta, status, phrase):
    before = captured()
    results = check("counters.port_errors", later(before, hours, symbol_error=delta), before)
    result = one(results, HWLOC_PORT)
    assert result.status == status
    assert phrase in result.message
    assert result.observed == delta
    if status == Status.WARN:
        assert result.expected == "no increase"
    assert result.evidence[0].endswith("ports/1/counters/symbol_error")
    assert "cable" in (result.hint or "")


def test_no_increase_is_one_pass_per_port():
    before = captured()
    result = one(check("counters.port_errors", later(before), before), HWLOC_PORT)
    assert result.status == Status.PASS
    assert result.message == ("12 error counters: no graded increase since the baseline 2.0 h ago")


@pytest.mark.parametrize(
    "counter", ["link_downed", "local_link_integrity_errors", "excessive_buffer_overrun_errors"]
)
def test_any_increase_fails(counter):
    before = captured()
    result = one(check("counters.port_errors", later(before, **{counter: 1}), before), HWLOC_PORT)
    assert result.status == Status.FAIL
    assert result.message.startswith(f"{counter} +1 since the baseline 2.0 h ago")
    assert result.message.endswith("any increase fails")


@pytest.mark.parametrize("delta,status", [(1, Status.WARN), (2000, Status.WARN),
                                          (2001, Status.FAIL)])  # fmt: skip
def test_port_xmit_discards_rate_boundary(delta, status):
    before = captured(NODE_EXPORTER)  # mlx4_0:1 already has 5 discards: only the change counts
    after = later(before, 2.0, "mlx4_0:1", port_xmit_discards=delta)
    result = one(check("counters.port_errors", after, before), "mlx4_0:1")
    assert result.status == status
    assert f"port_xmit_discards +{delta} " in result.message
    if status == Status.FAIL:
        assert "above 1000/hour" in result.message


def test_several_counters_give_one_result_each_and_the_verdict_is_critical():
    before = captured()
    after = later(before, symbol_error=3, link_downed=1)
    results = check("counters.port_errors", after, before)
    assert sorted((r.status.value, r.message.split()[0]) for r in results) == [
        ("fail", "link_downed"),
        ("warn", "symbol_error"),
    ]
    report = grade(after, builtin_registry(), Thresholds(), baseline=before)
    assert report.verdict.value == "CRITICAL"


# --- hw_counters: per port and per device -------------------------------------------------------


def test_hw_counters_per_port_and_device_level(mlx5_tree):
    before = collect(mlx5_tree, "/proc", {"sysfs"})
    assert before.device("mlx5_0").hw_counters["req_transport_retries_exceeded"] == 0
    assert "local_ack_timeout_err" in before.device("mlx5_0").ports[0].hw_counters
    after = later(before, 2.0, "mlx5_0:1", hw=True, local_ack_timeout_err=1)
    after = set_counters(after, "mlx5_1", hw=True, req_transport_retries_exceeded=21)  # 10.5/hour
    after = set_counters(after, "mlx5_1:1", hw=True, local_ack_timeout_err=201)  # 100.5/hour
    results = check("counters.hw_errors", after, before)
    port0 = one(results, "mlx5_0:1")
    assert port0.status == Status.WARN
    assert port0.message == (
        "local_ack_timeout_err +1 since the baseline 2.0 h ago (0.5/hour): any increase warns"
    )
    assert port0.evidence == ["class/infiniband/mlx5_0/ports/1/hw_counters/local_ack_timeout_err"]
    device1 = one(results, "mlx5_1")
    assert device1.status == Status.FAIL
    assert device1.message.startswith("req_transport_retries_exceeded +21")
    assert "above 10/hour" in device1.message
    assert device1.evidence == [
        "class/infiniband/mlx5_1/hw_counters/req_transport_retries_exceeded"
    ]
    port1 = one(results, "mlx5_1:1")
    assert port1.status == Status.FAIL
    assert "above 100/hour" in port1.message
    assert one(results, "mlx5_0").status == Status.PASS
    assert {r.target for r in results} == {"mlx5_0", "mlx5_0:1", "mlx5_1", "mlx5_1:1"}


def test_hw_counters_without_baseline_are_lifetime_only(mlx5_tree):
    snap = collect(mlx5_tree, "/proc", {"sysfs"})
    snap = set_counters(snap, "mlx5_0:1", hw=True, req_transport_retries_exceeded=10**6)
    result = one(check("counters.hw_errors", snap), "mlx5_0:1")
    assert result.status == Status.PASS
    assert "req_transport_retries_exceeded 1000000" in result.message


def test_flush_errors_are_informative_and_mentioned(mlx5_tree):
    before = collect(mlx5_tree, "/proc", {"sysfs"})
    after = later(before, 2.0, "mlx5_0:1", hw=True, req_cqe_flush_error=500)
    result = one(check("counters.hw_errors", after, before), "mlx5_0:1")
    assert result.status == Status.PASS
    assert "informative: req_cqe_flush_error +500" in result.message


@pytest.mark.parametrize(
    "counter",
    ["out_of_buffer", "packet_seq_err", "req_cqe_error", "resp_remote_access_errors",
     "duplicate_request", "rx_icrc_encapsulated"],
)  # fmt: skip
def test_hw_error_counters_warn_on_any_increase(mlx5_tree, counter):
    before = collect(mlx5_tree, "/proc", {"sysfs"})
    after = later(before, 2.0, "mlx5_0:1", hw=True, **{counter: 10**6})
    result = one(check("counters.hw_errors", after, before), "mlx5_0:1")
    assert result.status == Status.WARN  # no rate limit: a million warns, never fails
    assert result.message.startswith(f"{counter} +1000000 ")


def test_traffic_and_config_hw_counters_are_not_graded(mlx5_tree):
    before = collect(mlx5_tree, "/proc", {"sysfs"})
    after = later(before, 0.5, "mlx5_0:1", hw=True, rx_write_requests=10**9, lifespan=5,
                  vendor_new_error=10**9)  # fmt: skip
    results = check("counters.hw_errors", after, before)
    assert not_passing(results) == []
    assert "rx_write_requests" not in one(results, "mlx5_0:1").message


# --- restarts: reset and reboot ---------------------------------------------------------------


def test_value_went_down_is_counted_from_zero_and_said():
    before = captured()
    before = set_counters(before, symbol_error=40)
    after = later(before)
    after = set_counters(after, symbol_error=3)
    result = one(check("counters.port_errors", after, before), HWLOC_PORT)
    assert result.status == Status.WARN
    assert result.observed == 3
    assert "symbol_error +3 " in result.message
    assert "counter restarted: went down from 40 to 3" in result.message


def test_reset_of_a_quiet_counter_is_said_in_the_pass():
    before = captured()
    before = set_counters(before, link_downed=7)
    after = later(before)
    after = set_counters(after, link_downed=0)
    result = one(check("counters.port_errors", after, before), HWLOC_PORT)
    assert result.status == Status.PASS
    assert "reset since the baseline (counted from zero): link_downed" in result.message


def test_new_boot_id_counts_from_zero_and_says_so():
    before = captured()
    before = set_counters(before, symbol_error=9)
    after = later(before)  # same value, but the node rebooted: 9 errors since boot
    after = renamed(after, boot_id="11111111-2222-3333-4444-555555555555")
    result = one(check("counters.port_errors", after, before), HWLOC_PORT)
    assert result.status == Status.WARN
    assert "symbol_error +9 " in result.message
    assert "counter restarted: the node rebooted since the baseline" in result.message
    baseline = one(check("counters.baseline", after, before), "node")
    assert baseline.status == Status.PASS
    assert "rebooted since" in baseline.message


def test_reboot_with_zero_counters_is_a_pass_that_says_so():
    before = captured()
    after = later(before)
    after = renamed(after, boot_id="11111111-2222-3333-4444-555555555555")
    result = one(check("counters.port_errors", after, before), HWLOC_PORT)
    assert result.status == Status.PASS
    assert "the node rebooted since the baseline (counted from zero)" in result.message


# --- saturation -------------------------------------------------------------------------------


def test_node_exporter_port_xmit_wait_is_saturated():
    results = check("counters.saturation", captured(NODE_EXPORTER))
    result = one(results, "mlx4_0:1")
    assert result.status == Status.WARN
    assert "port_xmit_wait stuck at 4294967295 (32-bit maximum)" in result.message
    assert "can no longer count" in result.message
    assert result.observed == 4294967295
    assert result.evidence == ["class/infiniband/mlx4_0/ports/1/counters/port_xmit_wait"]
    assert one(results, "mlx4_0:2").status == Status.PASS
    assert "ibdiag never resets" in (result.hint or "")


@pytest.mark.parametrize(
    "counter,value,status,text",
    [
        ("symbol_error", 65535, Status.WARN, "symbol_error stuck at 65535 (16-bit maximum)"),
        ("symbol_error", 65534, Status.PASS, "no counter at its maximum"),
        ("link_downed", 255, Status.WARN, "link_downed stuck at 255 (8-bit maximum)"),
        ("local_link_integrity_errors", 15, Status.WARN, "stuck at 15 (4-bit maximum)"),
        ("port_xmit_wait", 4294967294, Status.PASS, "no counter at its maximum"),
    ],
)
def test_saturation_boundaries(counter, value, status, text):
    snap = captured()
    snap = set_counters(snap, **{counter: value})
    result = one(check("counters.saturation", snap), HWLOC_PORT)
    assert result.status == status
    assert text in result.message


def test_saturated_counter_warns_through_the_whole_grade():
    snap = captured()
    snap = set_counters(snap, symbol_error=65535)
    report = grade(snap, builtin_registry(), Thresholds())
    warned = [r for r in report.results if r.check_id == "counters.saturation"]
    assert [r.status for r in warned] == [Status.WARN]
    assert report.verdict.value == "WARNING"


# --- a baseline from another host, or with other devices/ports ----------------------------------


def test_baseline_from_another_host_compares_nothing():
    before = captured()
    before = renamed(before, host="node-other-42")
    before = replaced(before, before.devices[0].name, node_guid="dead:beef:0000:0001")
    before = set_counters(before, symbol_error=0, link_downed=0)
    after = later(before, symbol_error=5000, link_downed=3)
    after = renamed(after, host="node-this-one")
    after = replaced(after, after.devices[0].name, node_guid=_collected(HWLOC).devices[0].node_guid)
    baseline = one(check("counters.baseline", after, before), "node")
    assert baseline.status == Status.WARN
    assert "it is from host node-other-42, not node-this-one" in baseline.message
    assert "not in it (lifetime values used): mlx4_0" in baseline.message
    assert baseline.observed == "node-other-42"
    errors = one(check("counters.port_errors", after, before), HWLOC_PORT)
    assert errors.status == Status.PASS  # no false deltas: lifetime values only
    assert "no baseline" in errors.message and "symbol_error 5000" in errors.message
    congestion = one(check("counters.congestion", after, before), HWLOC_PORT)
    assert "since boot or the last reset" in congestion.message


def test_baseline_from_another_host_without_guids_compares_nothing():
    """mlx4_0 in the node_exporter capture has no node_guid: the host alone must tell."""
    before = captured(NODE_EXPORTER)
    assert before.device("mlx4_0").node_guid is None
    before = renamed(before, host="node-other-42")
    before = set_counters(before, "mlx4_0:1", link_downed=0, port_xmit_discards=0)
    after = later(before, 2.0, "mlx4_0:1", link_downed=3)
    after = renamed(after, host="node-this-one")
    assert one(check("counters.baseline", after, before), "node").status == Status.WARN
    result = one(check("counters.port_errors", after, before), "mlx4_0:1")
    assert result.status == Status.PASS, result.message  # not "link_downed +3" from elsewhere
    assert "lifetime link_downed 3" in result.message and "no baseline" in result.message


def test_baseline_missing_a_device_compares_the_rest(mlx5_tree):
    before = collect(mlx5_tree, "/proc", {"sysfs"})
    after = later(before, 2.0, "mlx5_0:1", link_downed=1)
    after = set_counters(after, "mlx5_1:1", link_downed=3)
    before = renamed(before, devices=[dev for dev in before.devices if dev.name != "mlx5_1"])
    baseline = one(check("counters.baseline", after, before), "node")
    assert baseline.status == Status.WARN
    assert baseline.message.endswith("not in it (lifetime values used): mlx5_1")
    assert "from host" not in baseline.message
    results = check("counters.port_errors", after, before)
    assert one(results, "mlx5_0:1").status == Status.FAIL
    unmatched = one(results, "mlx5_1:1")
    assert unmatched.status == Status.PASS
    assert "lifetime link_downed 3" in unmatched.message


def test_baseline_missing_a_port_compares_the_rest():
    before = captured(NODE_EXPORTER)
    after = later(before, 2.0, "mlx4_0:1", link_downed=1)
    after = set_counters(after, "mlx4_0:2", link_downed=4)
    before = replaced(before, "mlx4_0", ports=before.device("mlx4_0").ports[:1])
    baseline = one(check("counters.baseline", after, before), "node")
    assert baseline.status == Status.WARN
    assert "not in it (lifetime values used): mlx4_0:2" in baseline.message
    results = check("counters.port_errors", after, before)
    assert one(results, "mlx4_0:1").status == Status.FAIL
    assert one(results, "mlx4_0:2").status == Status.PASS
    assert "lifetime link_downed 4" in one(results, "mlx4_0:2").message


def test_clock_skew_warns_and_no_rate_based_fail():
    before = captured()
    after = later(before, -1.0, symbol_error=100000)  # baseline one hour in the future
    baseline = one(check("counters.baseline", after, before), "node")
    assert baseline.status == Status.WARN
    assert "clock skew" in baseline.message and "no rates" in baseline.message
    result = one(check("counters.port_errors", after, before), HWLOC_PORT)
    assert result.status == Status.WARN  # any increase warns; the rate is unknown
    assert result.message == "symbol_error +100000 since the baseline: any increase warns"


def test_good_baseline_is_a_pass_with_its_age():
    before = captured()
    baseline = one(check("counters.baseline", later(before, 3.0), before), "node")
    assert baseline.status == Status.PASS
    assert baseline.message.endswith(", 3.0 h ago")
    assert baseline.observed == 3.0


def test_baseline_problem_recorded_by_the_cli_is_one_warn():
    snap = captured()
    snap = snap.with_problem("baseline", "state.json: not valid JSON (truncated or corrupt)")
    results = check("counters.baseline", snap)
    assert len(results) == 1
    assert results[0].status == Status.WARN
    assert "state.json: not valid JSON" in results[0].message


# --- thresholds overrides ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "rule,deltas,status",
    [
        (CounterRule(on_increase="fail"), {"symbol_error": 1}, Status.FAIL),
        (CounterRule(rate_fail_per_hour=10), {"symbol_error": 1}, Status.WARN),
        (CounterRule(rate_fail_per_hour=10), {"symbol_error": 21}, Status.FAIL),
        (CounterRule(on_increase="info"), {"symbol_error": 240}, Status.PASS),
        (CounterRule(on_increase="info"), {"symbol_error": 241}, Status.FAIL),
        (CounterRule(rate_fail_per_hour=None), {"symbol_error": 10**5}, Status.WARN),
    ],
)
def test_symbol_error_overrides(rule, deltas, status):
    before = captured()
    th = Thresholds(counters={"symbol_error": rule})
    after = later(before, 2.0, **deltas)
    assert one(check("counters.port_errors", after, before, th), HWLOC_PORT).status == status


def test_override_turns_link_downed_informative():
    before = captured()
    th = Thresholds(counters={"link_downed": CounterRule(on_increase="info")})
    result = one(
        check("counters.port_errors", later(before, link_downed=2), before, th), HWLOC_PORT
    )
    assert result.status == Status.PASS
    assert "informative: link_downed +2" in result.message


def test_override_rate_warn_on_an_informative_rule():
    before = captured()
    th = Thresholds(
        counters={"port_xmit_discards": CounterRule(on_increase="info", rate_warn_per_hour=5)}
    )
    quiet = later(before, 2.0, port_xmit_discards=10)
    busy = later(before, 2.0, port_xmit_discards=11)
    assert one(check("counters.port_errors", quiet, before, th), HWLOC_PORT).status == Status.PASS
    result = one(check("counters.port_errors", busy, before, th), HWLOC_PORT)
    assert result.status == Status.WARN
    assert "above 5/hour" in result.message
    assert result.expected == "at most 5/hour"  # the limit that fired, not the 1000/hour one


# --- congestion and traffic: reported, always pass ----------------------------------------------


def test_congestion_and_traffic_without_baseline():
    snap = captured()
    congestion = one(check("counters.congestion", snap), HWLOC_PORT)
    assert congestion.status == Status.PASS
    assert congestion.message == "congestion since boot or the last reset: port_xmit_wait 21833"
    traffic = one(check("counters.traffic", snap), HWLOC_PORT)
    assert traffic.status == Status.PASS
    # port_rcv_data 5550796 words = 22203184 B; port_xmit_data 8039908 words = 32159632 B
    assert traffic.message == (
        "traffic since boot or the last reset: received 22.2 MB, sent 32.2 MB"
    )


def test_congestion_and_traffic_since_baseline_count_words_as_four_bytes():
    before = captured()
    after = later(before, 2.0, port_xmit_wait=3600, port_rcv_data=250, port_xmit_data=250_000)
    congestion = one(check("counters.congestion", after, before), HWLOC_PORT)
    assert congestion.status == Status.PASS
    assert congestion.message == (
        "congestion since the baseline 2.0 h ago: port_xmit_wait +3600 (1800/hour)"
    )
    traffic = one(check("counters.traffic", after, before), HWLOC_PORT)
    assert traffic.status == Status.PASS
    assert "received 1.0 KB (" in traffic.message  # +250 words = 1000 bytes
    assert "sent 1.0 MB (" in traffic.message  # +250000 words = 1 000 000 bytes
    assert traffic.message.startswith("traffic since the baseline 2.0 h ago: ")


def test_traffic_rate_in_gbps():
    before = captured()
    words = 9 * 10**12 // 32  # 9e12 bits over one hour = 2.50 Gb/s
    after = later(before, 1.0, port_rcv_data=words)
    traffic = one(check("counters.traffic", after, before), HWLOC_PORT)
    assert "(2.50 Gb/s average)" in traffic.message


def test_traffic_prefers_the_64_bit_counters():
    before = captured(NODE_EXPORTER)
    after = later(before, 2.0, "mlx4_0:1", port_rcv_data_64=250, port_rcv_data=999_999)
    traffic = one(check("counters.traffic", after, before), "mlx4_0:1")
    assert "received 1.0 KB" in traffic.message
    assert "sent 0 B" in traffic.message


def test_roce_congestion_counters_are_reported(mlx5_tree):
    before = collect(mlx5_tree, "/proc", {"sysfs"})
    after = later(before, 2.0, "mlx5_0:1", hw=True, np_cnp_sent=10, rp_cnp_handled=4)
    results = check("counters.congestion", after, before)
    result = one(results, "mlx5_0:1")
    assert result.status == Status.PASS
    assert "np_cnp_sent +10 (5/hour)" in result.message
    assert "rp_cnp_handled +4 (2/hour)" in result.message
    assert one(results, "mlx5_1:1").message == "congestion since the baseline 2.0 h ago: none"


def test_all_counter_checks_pass_on_an_unchanged_node():
    before = captured()
    report = grade(later(before), builtin_registry(), Thresholds(), baseline=before)
    counters = [r for r in report.results if r.check_id in COUNTER_CHECKS]
    assert {r.check_id for r in counters} == set(COUNTER_CHECKS)
    # the mlx4 capture has no hw_counters: said as a skip, not a pass
    [hw] = [r for r in counters if r.check_id == "counters.hw_errors"]
    assert hw.status == Status.SKIP and hw.target == HWLOC_PORT
    assert "no hw_counters readable" in hw.message
    graded = [r for r in counters if r.check_id != "counters.hw_errors"]
    assert all(r.status == Status.PASS for r in graded), [
        r.message for r in graded if r.status != Status.PASS
    ]
    assert report.verdict.value != "CRITICAL"


# --- targets and purity -----------------------------------------------------------------------


def test_result_targets(mlx5_tree):
    before = collect(mlx5_tree, "/proc", {"sysfs"})
    after = later(before, 2.0, "mlx5_0", hw=True, out_of_buffer=1)
    report = grade(after, builtin_registry(), Thresholds(), baseline=before)
    targets: Dict[str, set] = {}
    for result in report.results:
        targets.setdefault(result.check_id, set()).add(result.target)
    ports = {"mlx5_0:1", "mlx5_1:1"}
    assert targets["counters.baseline"] == {"node"}
    assert targets["counters.port_errors"] == ports
    assert targets["counters.saturation"] == ports
    assert targets["counters.congestion"] == ports
    assert targets["counters.traffic"] == ports
    assert targets["counters.hw_errors"] == ports | {"mlx5_0", "mlx5_1"}
    device_warn = [r for r in report.results if r.status == Status.WARN]
    assert [(r.check_id, r.target) for r in device_warn] == [("counters.hw_errors", "mlx5_0")]


@pytest.mark.parametrize("with_baseline", [True, False])
def test_checks_never_mutate_their_snapshots(with_baseline):
    before = captured(NODE_EXPORTER)
    before = set_counters(before, "mlx4_0:1", symbol_error=10)
    after = later(before, 2.0, "mlx4_0:1", symbol_error=5, link_downed=2)
    after = renamed(after, boot_id="rebooted")
    after = set_counters(after, "mlx4_0:2", link_downed=0)
    before = set_counters(before, "mlx4_0:2", link_downed=5)  # a reset too
    baseline = before if with_baseline else None
    snapshots_before = (after.model_dump(), before.model_dump())
    th = Thresholds(counters={"symbol_error": CounterRule(lifetime_limit=1)})
    for check_id in COUNTER_CHECKS:
        check(check_id, after, baseline, th)
    grade(after, builtin_registry(), th, baseline=baseline)
    assert (after.model_dump(), before.model_dump()) == snapshots_before
