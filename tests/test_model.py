"""The data model: lossless JSON round trips, schema_version, strictness and the JSON Schema.

A saved snapshot or a bundle is re-graded offline, so a Snapshot and a Report must come back
from JSON exactly as they went in - values and their types (200 stays int, 200.0 stays float).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from typing import Any, Dict, List

import pytest
from pydantic import ValidationError

from ibdiag.collect import collect
from ibdiag.grade import grade
from ibdiag.model import (
    SCHEMA_VERSION,
    CommandRun,
    Device,
    InspectorFile,
    LinkRate,
    NetDev,
    Pci,
    Port,
    Report,
    Result,
    Snapshot,
    Status,
    Verdict,
)
from ibdiag.thresholds import Thresholds

_TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
if _TESTS_DIR not in sys.path:  # the builder is a plain module next to this file
    sys.path.insert(0, _TESTS_DIR)

from snapshots import loaded_registry  # noqa: E402
from sysfs_builder import HcaSpec, PortSpec, mlx5_node, write_node  # noqa: E402

SCENARIOS = os.path.join(_TESTS_DIR, "scenarios")
SCENARIO_NAMES = sorted(
    name for name in os.listdir(SCENARIOS) if os.path.isdir(os.path.join(SCENARIOS, name, "root"))
)


@functools.cache
def scenario_snapshot(name: str) -> Snapshot:
    root = os.path.join(SCENARIOS, name, "root")
    return collect(os.path.join(root, "sys"), os.path.join(root, "proc"), {"sysfs"})


def _put(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


def built_snapshot(tmp_path) -> Snapshot:
    """A built node with something of everything: two ports, RoCE, multi-plane, odd files."""
    sys_root = str(tmp_path / "sys")
    proc_root = str(tmp_path / "proc")
    hcas = mlx5_node(2)
    hcas.append(
        HcaSpec(
            name="mlx5_2",
            pci_address="0000:30:00.0",
            numa_node="-1",
            current_link_speed="8.0 GT/s PCIe",
            current_link_width="8",
            ports=[
                PortSpec(netdev="ib2", counters={"symbol_error": 3, "port_xmit_wait": 4294967295}),
                PortSpec(
                    netdev="ib3",
                    state="1: DOWN",
                    phys_state="2: Polling",
                    rate="10 Gb/sec (4X)",
                    hw_counters={"TxWait, Cnt": 7, "Rx Hdr Egr Ovfl": 18446744073709551615},
                ),
            ],
        )
    )
    hcas.append(
        HcaSpec(
            name="mlx5_10",
            pci_address="0000:40:00.0",
            ports=[
                PortSpec(
                    link_layer="Ethernet",
                    rate="25 Gb/sec (1X EDR)",
                    netdev="ens1f0np0",
                    lid="0x0",
                    sm_lid="0x0",
                )
            ],
        )
    )
    write_node(sys_root, hcas)
    ib = os.path.join(sys_root, "class", "infiniband")
    _put(os.path.join(ib, "mlx5_10", "ports", "1", "gid_attrs", "ndevs", "0"), "ens1f0np0\n")
    _put(os.path.join(ib, "mlx5_0", "ports", "1", "counters", "port_rcv_errors"), "N/A (no PMA)\n")
    _put(os.path.join(ib, "mlx5_0", "ports", "1", "lid"), "lid\n")
    _put(os.path.join(ib, "mlx5_1", "hw_counters", "lifespan"), "10\n")
    os.rename(os.path.join(ib, "mlx5_2", "ports", "2"), os.path.join(ib, "mlx5_2", "ports", "3"))
    os.remove(os.path.join(ib, "mlx5_1", "device"))
    _put(os.path.join(proc_root, "sys", "kernel", "hostname"), "gpu-node-007\n")
    _put(os.path.join(proc_root, "sys", "kernel", "random", "boot_id"), "0f1e2d3c-aaaa\n")
    return collect(sys_root, proc_root, {"sysfs"})


def _assert_lossless(model_cls, original) -> None:
    text = original.model_dump_json()
    again = model_cls.model_validate_json(text)
    assert again == original
    # == says 200 == 200.0; the JSON text does not: types must survive too.
    assert again.model_dump_json() == text
    assert model_cls.model_validate(original.model_dump()) == original
    assert model_cls.model_validate(json.loads(text)) == original


# --- Snapshot round trips ------------------------------------------------------------------------


def test_all_scenarios_are_round_tripped():
    assert len(SCENARIO_NAMES) == 7


@pytest.mark.parametrize("name", SCENARIO_NAMES)
def test_scenario_snapshot_json_round_trip_is_lossless(name):
    snap = scenario_snapshot(name)
    assert snap.devices  # a real capture, not an empty snapshot
    _assert_lossless(Snapshot, snap)


@pytest.mark.parametrize("name", SCENARIO_NAMES)
def test_scenario_snapshot_built_by_sources_is_strictly_valid(name):
    """Sources use model_construct (no validation): what they build must pass strict mode."""
    snap = scenario_snapshot(name)
    assert Snapshot.model_validate(snap.model_dump(), strict=True) == snap


def test_built_tree_snapshot_round_trip_is_lossless(tmp_path):
    snap = built_snapshot(tmp_path)
    # The tree really has the variety the round trip is meant to cover.
    assert [dev.name for dev in snap.devices] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_10"]
    assert snap.host == "gpu-node-007"
    assert snap.device("mlx5_0").ports[0].problems == {
        "lid": "not a number: 'lid'",
        "counters/port_rcv_errors": "not a number: 'N/A (no PMA)'",
    }
    assert snap.device("mlx5_1").pci is None
    assert snap.device("mlx5_1").hw_counters == {"lifespan": 10}
    assert [port.number for port in snap.device("mlx5_2").ports] == [1, 3]
    assert snap.device("mlx5_2").ports[1].hw_counters["Rx Hdr Egr Ovfl"] == 2**64 - 1
    assert snap.device("mlx5_2").pci.numa_node == -1
    assert snap.device("mlx5_10").ports[0].netdev.name == "ens1f0np0"

    _assert_lossless(Snapshot, snap)
    assert Snapshot.model_validate(snap.model_dump(), strict=True) == snap


def test_round_trip_keeps_value_types_in_the_json(tmp_path):
    snap = built_snapshot(tmp_path)
    data = json.loads(Snapshot.model_validate_json(snap.model_dump_json()).model_dump_json())
    port = data["devices"][0]["ports"][0]
    assert port["rate"] == {"raw": "200 Gb/sec (4X HDR)", "gbps": 200.0, "lanes": 4, "speed": "HDR"}
    assert isinstance(port["rate"]["gbps"], float)
    assert isinstance(port["rate"]["lanes"], int)
    assert port["number"] == 1 and isinstance(port["number"], int)
    assert isinstance(data["devices"][0]["pci"]["current_link_speed"], float)
    assert isinstance(data["devices"][0]["pci"]["current_link_width"], int)
    assert data["devices"][2]["ports"][1]["rate"]["speed"] is None
    big = data["devices"][2]["ports"][1]["hw_counters"]["Rx Hdr Egr Ovfl"]
    assert big == 18446744073709551615 and isinstance(big, int)


def test_empty_snapshot_round_trip(tmp_path):
    os.makedirs(tmp_path / "sys")
    snap = collect(str(tmp_path / "sys"), str(tmp_path / "proc"), {"sysfs"})
    assert snap.devices == []
    assert snap.problems["class/infiniband"] == "missing"
    _assert_lossless(Snapshot, snap)


def test_round_trip_keeps_collected_at_as_an_aware_utc_datetime():
    snap = scenario_snapshot("gcm-8xCX6-HDR-good")
    again = Snapshot.model_validate_json(snap.model_dump_json())
    assert again.collected_at == snap.collected_at
    assert again.collected_at.utcoffset() is not None
    assert again.collected_at.utcoffset().total_seconds() == 0


# --- Report round trips --------------------------------------------------------------------------

THRESHOLDS = [
    Thresholds(),
    Thresholds(expect_hcas=8, expect_rate_gbps=200.0, ignore_hcas=["mlx5_an*"]),
    Thresholds(expect_hca_names=["mlx5_0", "mlx5_9"], expect_rate_gbps=400),
]


@pytest.mark.parametrize("thresholds", THRESHOLDS, ids=["default", "hdr8", "ndr"])
@pytest.mark.parametrize("name", SCENARIO_NAMES)
def test_scenario_report_json_round_trip_is_lossless(name, thresholds):
    report = grade(scenario_snapshot(name), loaded_registry(), thresholds)
    assert report.results  # the built-in checks did run
    _assert_lossless(Report, report)
    again = Report.model_validate_json(report.model_dump_json())
    assert again.verdict is report.verdict
    assert again.verdict.exit_code == report.verdict.exit_code
    assert again.thresholds == thresholds
    assert again.counts() == report.counts()
    assert [type(r.observed) for r in again.results] == [type(r.observed) for r in report.results]
    assert [type(r.expected) for r in again.results] == [type(r.expected) for r in report.results]


def test_built_tree_report_round_trip_is_lossless(tmp_path):
    report = grade(built_snapshot(tmp_path), loaded_registry(), Thresholds(expect_rate_gbps=200.0))
    statuses = {result.status for result in report.results}
    assert Status.FAIL in statuses  # a DOWN port and a 10 Gb/s port: real findings to carry
    assert report.verdict is Verdict.CRITICAL
    _assert_lossless(Report, report)


def test_report_round_trip_with_every_status(tmp_path):
    results = [
        Result(check_id=f"test.s{i}", target="mlx5_0:1", status=status, message=status.value)
        for i, status in enumerate(Status)
    ]
    report = Report(
        tool_version="0.0.0",
        level="quick",
        verdict=Verdict.CRITICAL,
        verdict_reason="1 fail, 1 error, 1 warn",
        results=results,
        thresholds=Thresholds(),
        snapshot=scenario_snapshot("hwloc-tacc-stampede-c412-603-connectx3-mlx4-fdr"),
    )
    _assert_lossless(Report, report)
    assert report.counts() == {"pass": 1, "warn": 1, "fail": 1, "skip": 1, "error": 1}


# --- schema_version ------------------------------------------------------------------------------


def test_schema_version_is_a_positive_int():
    assert isinstance(SCHEMA_VERSION, int)
    assert SCHEMA_VERSION >= 1


def test_snapshot_json_carries_schema_version():
    data = json.loads(scenario_snapshot("gcm-8xCX6-HDR-good").model_dump_json())
    assert data["schema_version"] == SCHEMA_VERSION


def test_report_json_carries_schema_version_at_top_and_in_snapshot():
    report = grade(scenario_snapshot("gcm-8xCX6-HDR-good"), loaded_registry(), Thresholds())
    data = json.loads(report.model_dump_json())
    assert data["schema_version"] == SCHEMA_VERSION
    assert data["snapshot"]["schema_version"] == SCHEMA_VERSION


# --- strictness: unknown keys are rejected -------------------------------------------------------


def _snapshot_data() -> Dict[str, Any]:
    return json.loads(
        scenario_snapshot("hwloc-tacc-stampede-c412-603-connectx3-mlx4-fdr").model_dump_json()
    )


def _where(data: Dict[str, Any], path: List[Any]) -> Dict[str, Any]:
    for step in path:
        data = data[step]
    return data


@pytest.mark.parametrize(
    "path",
    [
        [],
        ["devices", 0],
        ["devices", 0, "pci"],
        ["devices", 0, "ports", 0],
        ["devices", 0, "ports", 0, "rate"],
        ["devices", 0, "ports", 0, "netdev"],
    ],
    ids=["snapshot", "device", "pci", "port", "rate", "netdev"],
)
def test_unknown_keys_are_rejected_at_every_level(path):
    data = _snapshot_data()
    assert Snapshot.model_validate(data)  # the untouched data is fine
    _where(data, path)["colour"] = "blue"
    with pytest.raises(ValidationError) as excinfo:
        Snapshot.model_validate(data)
    errors = excinfo.value.errors()
    assert [error["type"] for error in errors] == ["extra_forbidden"]
    assert list(errors[0]["loc"]) == [*path, "colour"]


def test_a_typo_in_a_field_name_is_rejected_not_dropped():
    data = _snapshot_data()
    data["device"] = data.pop("devices")
    with pytest.raises(ValidationError, match="device"):
        Snapshot.model_validate_json(json.dumps(data))


@pytest.mark.parametrize(
    ("model_cls", "data"),
    [
        (LinkRate, {"raw": "x", "gbps": 1.0, "width": "4X"}),
        (NetDev, {"name": "ib0", "ipoib": True}),
        (Pci, {"address": "0000:0c:00.0", "numa": 0}),
        (Port, {"number": 1, "path": "p", "State": 4}),
        (Device, {"name": "mlx5_0", "path": "p", "firmware": "1.0"}),
        (Result, {"target": "node", "status": "pass", "message": "m", "severity": "low"}),
    ],
)
def test_unknown_keys_are_rejected_by_each_model(model_cls, data):
    with pytest.raises(ValidationError) as excinfo:
        model_cls.model_validate(data)
    assert {error["type"] for error in excinfo.value.errors()} == {"extra_forbidden"}


def test_report_rejects_unknown_keys_including_inside_thresholds():
    report = grade(scenario_snapshot("gcm-8xCX6-HDR-good"), loaded_registry(), Thresholds())
    data = json.loads(report.model_dump_json())
    data["exit_code"] = 0
    with pytest.raises(ValidationError, match="exit_code"):
        Report.model_validate(data)
    del data["exit_code"]
    data["thresholds"]["expect_rate"] = 200
    with pytest.raises(ValidationError, match="expect_rate"):
        Report.model_validate(data)
    del data["thresholds"]["expect_rate"]
    data["results"][0]["details"] = {}
    with pytest.raises(ValidationError, match="details"):
        Report.model_validate(data)
    del data["results"][0]["details"]
    assert Report.model_validate(data) == report


def test_wrong_types_are_rejected():
    with pytest.raises(ValidationError):
        Port.model_validate({"number": "one", "path": "p"})
    with pytest.raises(ValidationError):
        LinkRate.model_validate({"raw": "x", "gbps": "fast"})
    with pytest.raises(ValidationError):
        Result.model_validate({"target": "node", "status": "ok", "message": "m"})
    data = json.loads(
        grade(
            scenario_snapshot("gcm-8xCX6-HDR-good"), loaded_registry(), Thresholds()
        ).model_dump_json()
    )
    data["verdict"] = "MAYBE"
    with pytest.raises(ValidationError):
        Report.model_validate(data)


# --- JSON Schema ---------------------------------------------------------------------------------


def test_report_json_schema():
    schema = Report.model_json_schema()
    json.dumps(schema)  # serialisable: `ibdiag schema` prints it
    assert schema["title"] == "Report"
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == {
        "schema_version",
        "tool_version",
        "level",
        "verdict",
        "verdict_reason",
        "results",
        "thresholds",
        "check_output",
        "snapshot",
        "altered_files",
        "counter_increases",
    }
    assert schema["properties"]["schema_version"]["default"] == SCHEMA_VERSION
    assert set(schema["required"]) >= {"tool_version", "verdict", "results", "snapshot"}
    defs = schema["$defs"]
    assert {"Snapshot", "Device", "Port", "Pci", "NetDev", "LinkRate", "Result"} <= set(defs)
    assert defs["Verdict"]["enum"] == ["OK", "WARNING", "CRITICAL", "UNKNOWN"]
    assert defs["Status"]["enum"] == ["pass", "warn", "fail", "skip", "error"]
    for name in ("Snapshot", "Device", "Port", "Pci", "NetDev", "LinkRate", "Result"):
        assert defs[name]["additionalProperties"] is False, name
    observed = {part.get("type") for part in defs["Result"]["properties"]["observed"]["anyOf"]}
    assert observed == {"integer", "number", "string", "null"}


def test_report_json_matches_its_schema_field_names():
    """Every key a real report writes is declared in the schema (stable field names)."""
    schema = Report.model_json_schema()
    data = json.loads(
        grade(
            scenario_snapshot("gcm-8xCX6-HDR-good"), loaded_registry(), Thresholds()
        ).model_dump_json()
    )
    defs = schema["$defs"]
    assert set(data) <= set(schema["properties"])
    assert set(data["snapshot"]) <= set(defs["Snapshot"]["properties"])
    assert set(data["snapshot"]["devices"][0]) <= set(defs["Device"]["properties"])
    assert set(data["snapshot"]["devices"][0]["ports"][0]) <= set(defs["Port"]["properties"])
    assert set(data["results"][0]) <= set(defs["Result"]["properties"])


def test_snapshot_json_schema():
    schema = Snapshot.model_json_schema()
    assert schema["title"] == "Snapshot"
    assert schema["additionalProperties"] is False
    assert {"schema_version", "devices", "problems", "collected_at"} <= set(schema["properties"])


# --- Result value types --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        0,
        3,
        -1,
        4294967295,
        18446744073709551615,
        0.0,
        3.0,
        2.5,
        200.0,
        1e-9,
        "3",
        "",
        "4: ACTIVE",
        None,
    ],
    ids=repr,
)
def test_result_observed_and_expected_keep_their_type(value):
    result = Result(
        check_id="link.rate",
        target="mlx5_0:1",
        status=Status.WARN,
        message="m",
        observed=value,
        expected=value,
    )
    assert type(result.observed) is type(value)
    again = Result.model_validate_json(result.model_dump_json())
    assert type(again.observed) is type(value)
    assert type(again.expected) is type(value)
    assert again.observed == value
    assert again == result
    again = Result.model_validate(json.loads(result.model_dump_json()))
    assert type(again.observed) is type(value)


def test_result_types_survive_inside_a_report():
    results = [
        Result(target="a", status=Status.PASS, message="int", observed=200, expected=200),
        Result(target="b", status=Status.FAIL, message="float", observed=100.0, expected=200.0),
        Result(target="c", status=Status.WARN, message="str", observed="200", expected="4X"),
        Result(target="d", status=Status.SKIP, message="none"),
    ]
    report = Report(
        tool_version="0.0.0",
        level="quick",
        verdict=Verdict.CRITICAL,
        verdict_reason="1 fail",
        results=results,
        thresholds=Thresholds(expect_rate_gbps=200.0),
        snapshot=scenario_snapshot("azhpc-diagnostics-endure-mlx4-hyperv"),
    )
    again = Report.model_validate_json(report.model_dump_json())
    assert [(type(r.observed), type(r.expected)) for r in again.results] == [
        (int, int),
        (float, float),
        (str, str),
        (type(None), type(None)),
    ]
    assert again == report


# --- Verdict and Status --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("verdict", "code"),
    [(Verdict.OK, 0), (Verdict.WARNING, 1), (Verdict.CRITICAL, 2), (Verdict.UNKNOWN, 3)],
)
def test_verdict_exit_codes_follow_nagios(verdict, code):
    assert verdict.exit_code == code
    assert Verdict(verdict.value).exit_code == code


def test_every_verdict_has_an_exit_code():
    assert sorted(verdict.exit_code for verdict in Verdict) == [0, 1, 2, 3]
    assert [verdict.value for verdict in Verdict] == ["OK", "WARNING", "CRITICAL", "UNKNOWN"]


def test_status_values():
    assert [status.value for status in Status] == ["pass", "warn", "fail", "skip", "error"]
    assert Status("fail") is Status.FAIL


# --- small helpers on the models -----------------------------------------------------------------


def test_snapshot_device_lookup_and_targets():
    snap = scenario_snapshot("gcm-8xCX6-HDR-good")
    dev = snap.device("mlx5_8")
    assert dev is not None and dev.name == "mlx5_8"
    assert snap.device("mlx5_4") is None
    assert dev.target() == "mlx5_8"
    assert dev.target(dev.ports[0]) == "mlx5_8:1"
    assert dev.ports[0].is_infiniband and not dev.ports[0].is_ethernet
    assert dev.ports[0].netdev.is_ipoib


def test_a_command_run_keeps_the_role_it_was_planned_for():
    assert CommandRun(argv=["ibstat"]).role is None  # a run recorded before roles existed
    run = CommandRun(argv=["/opt/site/run-nccl.sh", "-g", "8"], rc=0, role="nccl-tests")
    assert CommandRun.model_validate_json(run.model_dump_json()) == run
    assert json.loads(run.model_dump_json())["role"] == "nccl-tests"


# --- frozen: a model is never changed once built -----------------------------------------------


@pytest.mark.parametrize(
    "model_cls",
    [LinkRate, NetDev, Port, Pci, Device, CommandRun, InspectorFile, Snapshot, Result, Report],
    ids=lambda cls: cls.__name__,
)
def test_every_model_is_frozen(model_cls):
    assert model_cls.model_config.get("frozen") is True


def test_assigning_a_field_of_a_built_model_raises():
    snap = scenario_snapshot("gcm-8xCX6-HDR-good")
    dev = snap.devices[0]
    with pytest.raises(ValidationError, match="frozen"):
        snap.host = "elsewhere"
    with pytest.raises(ValidationError, match="frozen"):
        dev.ports[0].state = 1
    assert snap.host != "elsewhere" and dev.ports[0].state == 4


def test_with_problem_builds_a_new_snapshot_and_leaves_the_old_one_alone():
    snap = scenario_snapshot("gcm-8xCX6-HDR-good")
    before = dict(snap.problems)
    noted = snap.with_problem("baseline", "state.json: no such file")
    assert noted is not snap
    assert noted.problems == {**before, "baseline": "state.json: no such file"}
    assert snap.problems == before
    assert noted.devices == snap.devices


def test_every_field_the_files_give_is_a_snapshot_field():
    """``collect.NodeFiles.snapshot`` builds the Snapshot from its own fields by name: one that
    is no Snapshot field (misspelt, or renamed in the model) must fail here, not be dropped."""
    from ibdiag.collect import NodeFiles

    assert set(NodeFiles._fields) <= set(Snapshot.model_fields)


def test_a_facts_map_builds_each_constructed_facts_class_before_serialising_it():
    """File readers make facts with model_construct (no schema on the prolog's path); pydantic
    before 2.14 cannot serialise a class that was never built (MockValSer), so the facts map
    builds each one first (``ibdiag.facts._base.built_facts``)."""
    from pydantic import ConfigDict

    from ibdiag.facts._base import Fact, built_facts

    class NeverBuilt(Fact):
        model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
        value: int = 0

    fact = NeverBuilt.model_construct(value=3)
    assert not NeverBuilt.__pydantic_complete__
    assert built_facts({"never_built": fact}, lambda facts: facts) == {"never_built": fact}
    assert NeverBuilt.__pydantic_complete__
    assert NeverBuilt.__pydantic_serializer__.to_python(fact) == {"value": 3}
