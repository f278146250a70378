"""The ethtool family (``ibdiag.families.ethtool``): what it plans, and its runs ->
``NetDev.ethtool``, on the real captures in tests/fixtures/ethtool.

Each test records CommandRuns as collect would (argv and role from the family's plan, the
capture as stdout), runs the interpret step shared by collect and replay, and reads the typed
field. The checks then grade from it alone: a baseline that holds typed
statistics and no command text at all is graded on change.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Dict, Optional

import pytest
from conftest import captures_without_facts, read_capture
from snapshots import builtin_registry, device, netdev, port, run, snapshot, with_runs

from ibdiag import families, roles
from ibdiag.facts.ethtool import EthtoolStats
from ibdiag.facts.outcome import NoData
from ibdiag.families import ethtool
from ibdiag.grade import run_check
from ibdiag.model import CommandRun, Port, Snapshot, Status
from ibdiag.thresholds import Thresholds

KIND = "ethtool"
KERNEL_5_15 = "bpf-2024-mlx5-xdp-kernel5.15-ethtool-S-rx_discards_phy-huge.txt"
KERNEL_6_5 = "bpf-2024-mlx5-xdp-kernel6.5-ethtool-S-rx_discards_phy-page-pool.txt"
FULL = "ethq-connectx4-mlx5-kernel4.15-ethtool-S-full.txt"
SETTINGS = "azhpc-diagnostics-ethtool-settings-eth1-endure.txt"

# Read from each file by hand: how many counter lines, and some of them.
FACTS: Dict[str, dict] = {
    FULL: {
        "count": 751,
        "counters": {"rx_packets": 845320277, "link_down_events_phy": 0,
                     "rx_crc_errors_phy": 0, "rx_discards_phy": 0, "tx_pause_ctrl_phy": 0},
    },
    KERNEL_5_15: {
        "count": 101,  # 102 lines less the "NIC statistics:" header
        "counters": {"rx_discards_phy": 58591428329, "tx_pause_ctrl_phy": 5745055,
                     "rx_out_of_buffer": 990473555},
    },
    KERNEL_6_5: {
        "count": 108,
        "counters": {"rx_discards_phy": 441063206498, "tx_pause_ctrl_phy": 44414017,
                     "rx_out_of_buffer": 534918379},
    },
    # Plain `ethtool eth1` (settings), not -S: what the parser cannot read is recorded.
    SETTINGS: {"problem": "settings output, not 'ethtool -S'"},
}  # fmt: skip


def es(name: str = "ib0", stdout: str = "", rc: Optional[int] = 0, **kw) -> CommandRun:
    """The ethtool -S run of netdev ``name``, recorded as collect records it."""
    return CommandRun(
        argv=ethtool.argv(name), role=roles.ethtool_stats(name), rc=rc, stdout=stdout, **kw
    )


def interpreted(*runs: CommandRun, ports=None) -> Port:
    """mlx5_0's first port after the interpret step, given these runs."""
    out = with_runs(snapshot([device("mlx5_0", ports=ports)]), *runs)
    assert out.problems == {}, out.problems
    return out.devices[0].ports[0]


def test_the_family_is_found_with_its_level():
    assert ethtool in families.families()
    assert families.source_levels()["ethtool"] == "standard"


def test_it_plans_one_run_per_netdev_and_refuses_a_name_that_may_not_run():
    names = ["ib1", "ib0", "ib0", "-ib9", None]  # ib0 twice (a bond); a name that may not run
    ports = [port(n, netdev=netdev(name) if name else None) for n, name in enumerate(names, 1)]
    planned = ethtool.plan(snapshot([device("mlx5_0", ports=ports)]))
    assert [(str(p.role), p.argv, p.refused is not None) for p in planned] == [
        ("ethtool-S -ib9", ["ethtool", "-S", "-ib9"], True),
        ("ethtool-S ib0", ["ethtool", "-S", "ib0"], False),
        ("ethtool-S ib1", ["ethtool", "-S", "ib1"], False),
    ]
    assert all(p.fallback is None for p in planned)


def test_every_capture_has_facts():
    assert captures_without_facts(KIND, FACTS) == []


@pytest.mark.parametrize("name", sorted(FACTS))
def test_a_capture_becomes_typed_statistics(name):
    facts = FACTS[name]
    stats = interpreted(es(stdout=read_capture(KIND, name))).netdev.ethtool
    assert isinstance(stats, EthtoolStats)
    assert stats.role == roles.ethtool_stats("ib0") and str(stats.role) == "ethtool-S ib0"
    assert stats.error is None and stats.outcome.no_data is None
    if "problem" in facts:
        assert any(facts["problem"] in problem for problem in stats.problems), stats.problems
        return
    assert stats.problems == []
    assert len(stats.counters) == facts["count"]
    assert {key: stats.counters[key] for key in facts["counters"]} == facts["counters"]


def test_garbage_is_a_recorded_problem_not_a_crash():
    stats = interpreted(es(stdout="\x00\xff garbage ::: = 12\nrx_bytes: -\n")).netdev.ethtool
    assert stats.counters == {}
    assert [p.split(":")[0] for p in stats.problems] == [
        "unparseable line 1",
        "unparseable line 2",
        "no counters in ethtool -S output",
    ]


def test_an_error_printed_with_exit_0_is_kept():
    stats = interpreted(es(stdout="no stats available\n")).netdev.ethtool
    assert stats.counters == {} and stats.error == "no stats available"


@pytest.mark.parametrize(
    "failed, no_data",
    [
        ({"rc": 94, "stdout": "Cannot get stats information: Operation not supported"},
         NoData.NOT_SUPPORTED),
        ({"rc": 94, "stderr": "no stats available"}, NoData.NOT_SUPPORTED),
        ({"rc": 1, "stderr": "Cannot get stats information: Input/output error"}, NoData.FAILED),
        ({"rc": None, "timed_out": True, "duration_s": 4.0}, NoData.TIMED_OUT),
        ({"rc": None, "skipped": "name 'ib 0' is not safe on a command line"},
         NoData.NOT_STARTED),
        ({"rc": None, "not_found": True}, NoData.NOT_INSTALLED),
    ],
    ids=["exit-94", "no-stats", "exit-1", "timed-out", "never-started", "not-installed"],
)  # fmt: skip
def test_a_run_that_did_not_succeed_has_no_statistics_and_says_why(failed, no_data):
    stats = interpreted(es(**failed)).netdev.ethtool
    assert stats.counters == {} and stats.role == roles.ethtool_stats("ib0")
    assert stats.outcome.no_data == no_data
    assert stats.outcome.reason == es(**failed).failure()


def test_each_netdev_gets_its_own_run():
    ports = [port(1, netdev=netdev("ib0")), port(2, netdev=netdev("ib1")), port(3, netdev=None)]
    base = snapshot([device("mlx5_0", ports=ports)])
    [dev] = with_runs(base, es("ib1", stdout=read_capture(KIND, KERNEL_6_5))).devices
    assert dev.ports[0].netdev.ethtool is None  # not collected
    assert dev.ports[1].netdev.ethtool.role == roles.ethtool_stats("ib1")
    assert dev.ports[1].netdev.ethtool.counters["rx_discards_phy"] == 441063206498
    assert dev.ports[2].netdev is None


def _snapshot(*runs: CommandRun) -> Snapshot:
    base = snapshot([device("mlx5_0")]).model_copy(update={"sources": ["sysfs", "ethtool"]})
    return with_runs(base, *runs)


def run_with_baseline(check_id: str, snap: Snapshot, baseline: Snapshot):
    return run_check(builtin_registry().get(check_id), snap, Thresholds(), baseline)


def test_typed_statistics_survive_json():
    snap = _snapshot(es(stdout=read_capture(KIND, KERNEL_5_15)))
    again = Snapshot.model_validate_json(snap.model_dump_json())
    assert again == snap
    assert again.devices[0].ports[0].netdev.ethtool.counters["tx_pause_ctrl_phy"] == 5745055


def test_the_check_grades_on_the_baselines_typed_statistics_alone():
    """Kernel 5.15 then 6.5 on the same NIC: the baseline is typed statistics, no commands."""
    now = _snapshot(es(stdout=read_capture(KIND, KERNEL_6_5)))
    then_port = interpreted(es(stdout=read_capture(KIND, KERNEL_5_15)))
    then = snapshot([device("mlx5_0", ports=[then_port])])
    then = then.model_copy(update={"collected_at": now.collected_at - timedelta(hours=2)})
    assert then.commands == {}
    results = run_with_baseline("ethtool.errors", now, then)
    failing = {r.subject: r for r in results if r.status != Status.PASS}
    assert "rx_discards_phy" in failing, results
    assert failing["rx_discards_phy"].observed == 441063206498 - 58591428329
    assert failing["rx_discards_phy"].evidence == ["ethtool -S ib0"]
    [pause] = run_with_baseline("ethtool.pause", now, then)
    assert f"tx_pause_ctrl_phy +{44414017 - 5745055}" in pause.message


def test_a_baseline_of_another_netdev_name_is_not_compared():
    now = _snapshot(es(stdout=read_capture(KIND, KERNEL_6_5)))
    renamed = port(1, netdev=netdev("ib7"))
    then_port = interpreted(es("ib7", stdout=read_capture(KIND, KERNEL_5_15)), ports=[renamed])
    then = snapshot([device("mlx5_0", ports=[then_port])])
    then = then.model_copy(update={"collected_at": now.collected_at - timedelta(hours=2)})
    results = run_with_baseline("ethtool.errors", now, then)
    assert all("no baseline" in r.message for r in results), results


def test_a_failed_run_is_skipped_with_its_reason_and_command_line():
    snap = _snapshot(es(rc=None, not_found=True))
    [result] = run("ethtool.errors", snap)
    assert result.status == Status.SKIP
    assert result.message == "ethtool is not installed (not found on PATH)"
    assert result.evidence == ["ethtool -S ib0"]


def test_not_supported_on_an_active_port_is_a_skip_other_failures_warn():
    unsupported = es(rc=94, stderr="Cannot get stats information: Operation not supported")
    [skip] = run("ethtool.errors", _snapshot(unsupported))
    assert skip.status == Status.SKIP
    broken = es(rc=1, stderr="Cannot get stats information: Input/output error")
    [warn] = run("ethtool.errors", _snapshot(broken))
    assert warn.status == Status.WARN and warn.observed == "exit-1"
    assert warn.evidence == ["ethtool -S ib0"]


def test_no_run_is_a_skip_saying_it_was_not_collected_and_the_fact_alone_is_graded():
    [skip] = run("ethtool.errors", _snapshot())
    assert skip.status == Status.SKIP
    assert skip.message == "`ethtool-S ib0` was not collected (level quick, or not planned here)"
    assert skip.evidence == ["ethtool-S ib0"]
    hung = _snapshot(es(rc=None, timed_out=True, duration_s=4.0))
    alone = hung.model_copy(update={"commands": {}})  # the fact alone: no run to read
    [warn] = run("ethtool.errors", alone)
    assert warn.status == Status.WARN and warn.observed == "timed-out"
    assert warn.evidence == ["ethtool -S ib0"]
