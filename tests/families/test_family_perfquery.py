"""The perfquery family (``ibdiag.families.perfquery``): what it plans, and its runs ->
``Port.perfquery``, on the real captures in tests/fixtures/perfquery.

Each test records CommandRuns as collect would (argv and role from the family's plan, the
capture as stdout), runs the interpret step shared by collect and replay, and reads the typed
fields. The checks then grade from those fields alone: a baseline that holds typed readings and
no command text at all is graded on change.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Dict, Optional

import pytest
import stubs as S
from conftest import captures_without_facts, read_capture
from snapshots import builtin_registry, device, port, run, snapshot, with_runs

from ibdiag import families, roles
from ibdiag.facts.outcome import NoData
from ibdiag.facts.perfquery import PmaReading, PortPma
from ibdiag.families import perfquery
from ibdiag.grade import run_check
from ibdiag.model import CommandRun, Port, Snapshot, Status
from ibdiag.thresholds import Thresholds

KIND = "perfquery"
TARGET = "mlx5_0:1"

# Read from each file by hand: its mode and some counters.
FACTS: Dict[str, dict] = {
    "infiniband_exporter-x-hca-edr-lid133.txt": {
        "mode": "x",
        "count": 22,  # 24 fields less the CounterSelect/CounterSelect2 masks
        "counters": {"PortXmitData": 37108676853855, "PortRcvPkts": 100583719365,
                     "SymbolErrorCounter": 0, "PortXmitWait": 0, "QP1Dropped": 0},
    },
    "infiniband_exporter-x-hca-edr-lid134.txt": {
        "mode": "x",
        "count": 22,
        "counters": {"PortXmitData": 9049592493976, "PortMulticastRcvPkts": 3732158589,
                     "LinkDownedCounter": 0},
    },
    "infiniband_exporter-x-switch-edr-0x506b4b03005c2740.txt": {
        "mode": "x",
        "count": 22,
        "counters": {"LinkDownedCounter": 1, "PortRcvSwitchRelayErrors": 7,
                     "PortXmitDiscards": 20046, "PortXmitWait": 41864608},
    },
    # Two ports in one file: port 1's block is the reading, port 2's a recorded problem.
    "infiniband_exporter-x-switch-edr-2ports-lid1719.txt": {
        "mode": "x",
        "count": 22,
        "counters": {"SymbolErrorCounter": 0},
        "problem": "left out",
    },
    "infiniband_exporter-E-rcverr-hca-lid133.txt": {
        "mode": "E",
        "count": 6,
        "counters": {"PortLocalPhysicalErrors": 0, "PortMalformedPktErrors": 0,
                     "PortBufferOverrunErrors": 0, "PortLoopingErrors": 0},
    },
    "infiniband_exporter-E-rcverr-switch-lid1719-port2.txt": {
        "mode": "E",
        "count": 6,
        "counters": {"PortDLIDMappingErrors": 0, "PortVLMappingErrors": 0},
    },
}  # fmt: skip

# Which PortPma field each mode's run fills.
FIELD = {"x": "counters", "basic": "counters", "E": "rcv_error_details", "X": "xmit_data_sl"}


def pq(mode: str, stdout: str = "", stderr: str = "", rc: Optional[int] = 0, **kw) -> CommandRun:
    """The run of ``mode`` on mlx5_0 port 1, recorded as collect records it."""
    argv = perfquery.argv("mlx5_0", 1, mode)
    return CommandRun(
        argv=argv, role=roles.perfquery(mode, TARGET), rc=rc, stdout=stdout, stderr=stderr, **kw
    )


def interpreted(*runs: CommandRun) -> Port:
    """mlx5_0 port 1 after the interpret step, given these runs."""
    out = with_runs(snapshot([device("mlx5_0")]), *runs)
    assert out.problems == {}, out.problems
    return out.devices[0].ports[0]


def test_the_family_is_found_with_its_level():
    assert perfquery in families.families()
    assert families.source_levels()["perfquery"] == "standard"


def test_it_plans_three_queries_per_active_infiniband_port_and_the_fallback_of_x():
    down = port(2, state=1)
    roce = port(3, link_layer="Ethernet")
    snap = snapshot([device("mlx5_0", ports=[port(1), down, roce])])
    planned = perfquery.plan(snap)
    assert [(str(p.role), " ".join(p.argv), p.refused) for p in planned] == [
        ("perfquery-x mlx5_0:1", "perfquery -x -C mlx5_0 -P 1", None),
        ("perfquery-E mlx5_0:1", "perfquery -E -C mlx5_0 -P 1", None),
        ("perfquery-X mlx5_0:1", "perfquery -X -C mlx5_0 -P 1", None),
    ]
    assert planned[0].fallback == families.Planned(
        roles.perfquery("basic", "mlx5_0:1"), perfquery.argv("mlx5_0", 1, "basic")
    )
    assert all("-r" not in p.argv and "-R" not in p.argv for p in planned)


def test_a_name_that_may_not_go_on_a_command_line_is_planned_refused():
    snap = snapshot([device("mlx5_0;rm", ports=[port(1)])])
    planned = perfquery.plan(snap)
    assert len(planned) == 3 and all(p.refused for p in planned)
    run_ = families.refused_run(planned[0])
    assert run_.skipped == planned[0].refused and run_.key == "perfquery-x mlx5_0;rm:1"


def test_every_capture_has_facts():
    assert captures_without_facts(KIND, FACTS) == []


@pytest.mark.parametrize("name", sorted(FACTS))
def test_a_capture_becomes_a_typed_reading(name):
    facts = FACTS[name]
    mode = facts["mode"]
    pma = interpreted(pq(mode, stdout=read_capture(KIND, name))).perfquery
    assert isinstance(pma, PortPma)
    reading = getattr(pma, FIELD[mode])
    assert isinstance(reading, PmaReading)
    assert reading.role == roles.perfquery(mode, TARGET)
    assert len(reading.counters) == facts["count"]
    assert {key: reading.counters[key] for key in facts["counters"]} == facts["counters"]
    assert reading.mad_error is None
    if "problem" in facts:
        assert any(facts["problem"] in problem for problem in reading.problems), reading.problems
    else:
        assert reading.problems == []
    others = [field for field in ("counters", "rcv_error_details", "xmit_data_sl")
              if field != FIELD[mode]]  # fmt: skip
    assert [getattr(pma, field) for field in others] == [None, None]


def test_all_three_runs_of_a_port():
    pma = interpreted(
        pq("x", stdout=read_capture(*S.PERFQUERY_X_FAULT)),
        pq("E", stdout=read_capture(*S.PERFQUERY_E)),
        pq("X", stdout=S.PERFQUERY_XMIT_SL),  # no -X capture is recorded: the tool's shape
    ).perfquery
    assert pma.counters.counters["PortXmitDiscards"] == 20046
    assert pma.rcv_error_details.counters["PortLocalPhysicalErrors"] == 0
    assert str(pma.xmit_data_sl.role) == "perfquery-X mlx5_0:1"
    assert pma.xmit_data_sl.counters["XmtDataSL0"] == 9281738471
    assert pma.xmit_data_sl.counters["XmtDataSL3"] == 1204877
    assert len(pma.xmit_data_sl.counters) == 16


def test_plain_perfquery_stands_in_when_x_failed():
    pma = interpreted(
        pq("x", rc=5, stderr="ibwarn: [2421] _do_madrpc: recv failed: Connection timed out"),
        pq("basic", stdout=read_capture(*S.PERFQUERY_X_HEALTHY)),
    ).perfquery
    assert str(pma.counters.role) == "perfquery-basic mlx5_0:1"
    assert pma.counters.counters["PortXmitData"] == 37108676853855


def test_x_that_succeeded_is_the_reading_even_beside_a_fallback():
    pma = interpreted(
        pq("x", stdout=read_capture(*S.PERFQUERY_X_FAULT)),
        pq("basic", stdout=read_capture(*S.PERFQUERY_X_HEALTHY)),
    ).perfquery
    assert str(pma.counters.role) == "perfquery-x mlx5_0:1"
    assert pma.counters.counters["LinkDownedCounter"] == 1


def test_garbage_is_a_recorded_problem_not_a_crash():
    pma = interpreted(pq("x", stdout="\x00\xff garbage ::: = 12\n")).perfquery
    assert pma.counters.counters == {}
    assert pma.counters.mad_error is None
    assert pma.counters.problems and "unparseable line 1" in pma.counters.problems[0]


def test_a_mad_error_printed_with_exit_0_is_kept():
    stderr = (
        "ibwarn: [12345] mad_rpc: _do_madrpc failed; dport (Lid 133)\n"
        "perfquery: iberror: failed: perfquery query failed\n"
    )
    pma = interpreted(pq("x", stderr=stderr)).perfquery
    assert pma.counters.counters == {}
    assert pma.counters.mad_error == (
        "ibwarn: [12345] mad_rpc: _do_madrpc failed; dport (Lid 133); "
        "perfquery: iberror: failed: perfquery query failed"
    )


@pytest.mark.parametrize(
    "failed",
    [
        {"rc": 5, "stderr": "ibwarn: [1] mad_rpc_open_port: can't open UMAD port"},
        {"rc": None, "timed_out": True, "duration_s": 4.0},
        {"rc": None, "skipped": "the run's deadline had passed"},
        {"rc": None, "not_found": True},
    ],
    ids=["exit-5", "timed-out", "never-started", "not-installed"],
)
def test_a_run_that_did_not_succeed_has_no_reading_and_says_why(failed):
    pma = interpreted(pq("x", **failed), pq("E", **failed), pq("X", **failed)).perfquery
    assert (pma.counters, pma.rcv_error_details, pma.xmit_data_sl) == (None, None, None)
    assert set(pma.runs) == {"x", "E", "X"}
    expected = {
        "exit-5": NoData.NO_DEVICE,  # can't open UMAD port: not reachable from here
        "timed-out": NoData.TIMED_OUT,
        "never-started": NoData.NOT_STARTED,
        "not-installed": NoData.NOT_INSTALLED,
    }
    kind = (
        "exit-5" if failed.get("rc") == 5 else "timed-out" if failed.get("timed_out")
        else "never-started" if failed.get("skipped") else "not-installed"
    )  # fmt: skip
    assert pma.runs["x"].no_data == expected[kind]
    assert pma.runs["x"].command == "perfquery -x -C mlx5_0 -P 1"


def test_a_run_that_gave_data_has_no_reason():
    pma = interpreted(pq("x", stdout=read_capture(*S.PERFQUERY_X_HEALTHY))).perfquery
    assert pma.runs["x"].no_data is None and pma.runs["x"].reason is None


def test_no_run_is_not_collected():
    assert interpreted().perfquery is None
    other = CommandRun(argv=["ethtool", "-S", "ib0"], role="ethtool-S ib0", rc=0, stdout="a: 1")
    assert interpreted(other).perfquery is None


def test_the_runs_of_another_port_stay_there():
    base = snapshot([device("mlx5_0", ports=[port(1), port(2)])])
    [dev] = with_runs(base, pq("x", stdout=read_capture(*S.PERFQUERY_X_FAULT))).devices
    assert dev.ports[0].perfquery.counters.counters["PortXmitDiscards"] == 20046
    assert dev.ports[1].perfquery is None


def run_with_baseline(check_id: str, snap: Snapshot, baseline: Snapshot):
    return run_check(builtin_registry().get(check_id), snap, Thresholds(), baseline)


def _snapshot(*runs: CommandRun) -> Snapshot:
    base = snapshot([device("mlx5_0")]).model_copy(update={"sources": ["sysfs", "perfquery"]})
    return with_runs(base, *runs)


def test_typed_fields_survive_json():
    snap = _snapshot(
        pq("x", stdout=read_capture(*S.PERFQUERY_X_FAULT)),
        pq("E", stdout=read_capture(*S.PERFQUERY_E)),
        pq("X", rc=5, stderr="ibwarn: x"),
    )
    again = Snapshot.model_validate_json(snap.model_dump_json())
    assert again == snap
    assert again.devices[0].ports[0].perfquery.counters.counters["PortRcvSwitchRelayErrors"] == 7


def test_the_check_grades_on_the_baselines_typed_reading_alone():
    """The baseline holds a typed reading and no command text: the check grades on change."""
    now = _snapshot(pq("x", stdout=read_capture(*S.PERFQUERY_X_FAULT)))
    healthy = interpreted(pq("x", stdout=read_capture(*S.PERFQUERY_X_HEALTHY)))
    then = snapshot([device("mlx5_0", ports=[healthy])])
    then = then.model_copy(update={"collected_at": now.collected_at - timedelta(hours=2)})
    assert then.commands == {}
    results = run_with_baseline("perfquery.errors", now, then)
    failing = {r.subject: r for r in results if r.status != Status.PASS}
    assert set(failing) >= {"LinkDownedCounter", "PortXmitDiscards"}, results
    assert failing["PortXmitDiscards"].observed == 20046
    assert failing["PortXmitDiscards"].evidence == ["perfquery -x -C mlx5_0 -P 1"]


def test_a_baseline_without_typed_readings_is_graded_on_lifetime():
    now = _snapshot(pq("x", stdout=read_capture(*S.PERFQUERY_X_HEALTHY)))
    then = snapshot([device("mlx5_0")])  # no perfquery reading (an older ibdiag, level quick)
    then = then.model_copy(update={"collected_at": now.collected_at - timedelta(hours=2)})
    [result] = run_with_baseline("perfquery.errors", now, then)
    assert result.status == Status.PASS
    assert "no baseline" in result.message
    assert result.evidence == ["perfquery -x -C mlx5_0 -P 1"]


def test_sl_traffic_reads_the_typed_reading():
    snap = _snapshot(pq("X", stdout=S.PERFQUERY_XMIT_SL))
    [result] = run("perfquery.sl_traffic", snap)
    assert result.status == Status.PASS
    assert result.message == (
        "transmit data per SL (4-byte words): XmtDataSL0 9281738471, XmtDataSL3 1204877"
    )
    assert result.evidence == ["perfquery -X -C mlx5_0 -P 1"]
