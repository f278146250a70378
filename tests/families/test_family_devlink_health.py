"""The devlink_health family (``devlink -j health show``) and its check hca.fw_health, on the
captures in tests/captures/devlink (SOURCES.md: hand-made from iproute2's devlink.c, and one
real text capture)."""

from __future__ import annotations

import json
import os
from typing import Optional

import pytest
from snapshots import by_target, device, run, snapshot, with_runs

from ibdiag.facts.devlink import DevlinkHealth
from ibdiag.facts.outcome import NoData
from ibdiag.families import devlink_health as family
from ibdiag.model import CommandRun, Result, Snapshot, Status
from ibdiag.thresholds import Thresholds

FOLDER = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "captures", "devlink"
)
HEALTHY = "handmade-two-pfs-healthy.json"
RECOVERED = "handmade-fw-fatal-recovered.json"
ERROR_STATE = "handmade-fw-fatal-error-state.json"


def capture(name: str) -> str:
    with open(os.path.join(FOLDER, name), encoding="utf-8") as handle:
        return handle.read()


def node() -> Snapshot:
    # mlx5_0 on 0000:0c:00.0, mlx5_1 on 0000:0d:00.0 (the builder's addresses)
    return snapshot([device("mlx5_0"), device("mlx5_1")])


def ran(stdout: str = "", rc: int = 0, **kwargs) -> CommandRun:
    return CommandRun(argv=list(family.ARGV), role=family.ROLE, rc=rc, stdout=stdout, **kwargs)


def collected(stdout: str = "", rc: int = 0, **kwargs) -> Snapshot:
    return with_runs(node(), ran(stdout, rc, **kwargs))


def fact(snap: Snapshot, name: str = "mlx5_0") -> DevlinkHealth:
    found = snap.device(name).facts["devlink_health"]
    assert isinstance(found, DevlinkHealth)
    return found


def graded(snap: Snapshot, baseline: Optional[Snapshot] = None, th=None) -> dict:
    if baseline is None:
        return by_target(run("hca.fw_health", snap, th))
    from snapshots import builtin_registry

    from ibdiag.grade import run_check

    spec = builtin_registry().get("hca.fw_health")
    return by_target(run_check(spec, snap, th or Thresholds(), baseline))


# -- plan ---------------------------------------------------------------------------------------


def test_plan_one_run_for_the_node_as_an_argv_list():
    (planned,) = family.plan(node())
    assert planned.argv == ["devlink", "-j", "health", "show"]
    assert str(planned.role) == "devlink_health node" and planned.refused is None


def test_plan_nothing_without_an_hca_with_a_pci_function():
    assert family.plan(snapshot([])) == []
    assert family.plan(snapshot([device("rxe0", pci=None)])) == []


# -- parser: a test per typed field -------------------------------------------------------------


def test_parse_maps_each_pci_function_and_its_ports():
    parsed = family.parse(capture(HEALTHY))
    assert set(parsed) == {"0000:0c:00.0", "0000:0d:00.0"}
    reporters, problems = parsed["0000:0d:00.0"]
    assert problems == []
    assert [(r.name, r.port_index) for r in reporters] == [
        ("fw", None), ("fw_fatal", None), ("tx", 65535), ("rx", 65535), ("vnic", 65535),
    ]  # fmt: skip


def test_parse_every_field():
    reporters, _ = family.parse(capture(RECOVERED))["0000:0c:00.0"]
    fatal = next(r for r in reporters if r.name == "fw_fatal")
    assert fatal.handle == "pci/0000:0c:00.0"
    assert fatal.port_index is None
    assert fatal.state == "healthy"
    assert fatal.errors == 1
    assert fatal.recovers == 1
    assert fatal.grace_period_ms == 1200000
    assert fatal.auto_recover is True
    assert fatal.auto_dump is True
    assert fatal.last_dump == "2024-05-01 11:58:04"
    fw = next(r for r in reporters if r.name == "fw")
    assert fw.grace_period_ms is None and fw.auto_recover is None and fw.auto_dump is True


def test_parse_port_handle_index():
    reporters, _ = family.parse(capture(HEALTHY))["0000:0c:00.0"]
    vnic = next(r for r in reporters if r.name == "vnic")
    assert vnic.handle == "pci/0000:0c:00.0/65535" and vnic.port_index == 65535


def test_parse_older_name_key():
    reporters, _ = family.parse(capture("handmade-iproute2-5.3-name-key.json"))["0000:0c:00.0"]
    assert [r.name for r in reporters] == ["fw", "fw_fatal"]


def test_parse_state_error():
    reporters, _ = family.parse(capture(ERROR_STATE))["0000:0c:00.0"]
    fatal = next(r for r in reporters if r.name == "fw_fatal")
    assert fatal.state == "error" and not fatal.healthy and fatal.auto_recover is False


@pytest.mark.parametrize(
    "value, why",
    [("-1", "is not a count"), ('"7"', "is not a count"), ("true", "is not a count"),
     (str(2**64), "is not a count")],
)  # fmt: skip
def test_parse_odd_count_is_a_problem_never_an_exception(value, why):
    text = '{"health":{"pci/0000:0c:00.0":[{"reporter":"fw","state":"healthy","error":%s}]}}'
    reporters, problems = family.parse(text % value)["0000:0c:00.0"]
    assert reporters[0].errors is None
    assert len(problems) == 1 and why in problems[0] and "fw" in problems[0]


def test_parse_odd_flag_and_state_are_problems():
    text = '{"health":{"pci/0000:0c:00.0":[{"reporter":"fw","state":3,"auto_dump":"yes"}]}}'
    reporters, problems = family.parse(text)["0000:0c:00.0"]
    assert reporters[0].state is None and reporters[0].auto_dump is None
    assert len(problems) == 2


def test_parse_leaves_out_handles_that_are_no_pci_function():
    text = json.dumps({"health": {
        "auxiliary/mlx5_core.eth.0": [{"reporter": "tx", "state": "healthy"}],
        "netdevsim/netdevsim10": [{"reporter": "empty", "state": "healthy"}],
        "pci/0000:0C:00.0": [{"reporter": "fw", "state": "healthy"}],
    }})  # fmt: skip
    assert set(family.parse(text)) == {"0000:0c:00.0"}


@pytest.mark.parametrize(
    "text",
    ["", "not json", "[]", '{"dev":{}}', '{"health":[]}', b"\xff\xfe", "[" * 100000,
     capture("iproute2-commit-health-show-text.txt")],
)  # fmt: skip
def test_parse_none_for_what_is_not_devlink_health_json(text):
    assert family.parse(text) is None


def test_parse_reporter_without_a_name_is_a_problem():
    text = '{"health":{"pci/0000:0c:00.0":[{"state":"healthy"}, 5, {"reporter":"fw"}]}}'
    reporters, problems = family.parse(text)["0000:0c:00.0"]
    assert [r.name for r in reporters] == ["fw"] and len(problems) == 2


# -- interpret -----------------------------------------------------------------------------------


def test_interpret_sets_each_hca_its_own_reporters():
    snap = collected(capture(HEALTHY))
    assert {r.name for r in fact(snap, "mlx5_1").reporters} == {
        "fw",
        "fw_fatal",
        "tx",
        "rx",
        "vnic",
    }
    assert fact(snap).address == "0000:0c:00.0" and fact(snap).outcome.no_data is None


def test_interpret_garbage_exit_0():
    snap = collected(capture("iproute2-commit-health-show-text.txt"))
    assert fact(snap).outcome.no_data == NoData.GARBAGE


def test_interpret_not_installed_and_not_permitted():
    assert (
        fact(with_runs(node(), ran(rc=None, not_found=True))).outcome.no_data
        == NoData.NOT_INSTALLED
    )
    denied = collected(rc=1, stderr=capture("handmade-not-permitted.stderr"))
    assert fact(denied).outcome.no_data == NoData.NO_PERMISSION


def test_interpret_no_devlink_in_the_kernel_is_not_supported():
    snap = collected(rc=1, stderr=capture("handmade-no-devlink.stderr"))
    assert fact(snap).outcome.no_data == NoData.NOT_SUPPORTED


def test_interpret_nothing_when_devlink_was_not_run():
    assert "devlink_health" not in with_runs(node()).devices[0].facts


# -- the check -----------------------------------------------------------------------------------


def statuses(results: dict) -> dict:
    return {target: result.status for target, result in results.items()}


def test_healthy_capture_passes():
    results = graded(collected(capture(HEALTHY)))
    assert statuses(results) == {"mlx5_0": Status.PASS, "mlx5_1": Status.PASS}
    assert "since the driver loaded" in results["mlx5_0"].message


def test_not_collected_is_one_skip():
    (result,) = graded(node()).values()
    assert result.status == Status.SKIP and "not collected" in result.message


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"rc": None, "not_found": True}, "not installed"),
        ({"rc": 1, "stderr": "kernel answers: Operation not permitted"}, "not permitted"),
        ({"rc": 1, "stderr": "Failed to connect to devlink Netlink"}, "no devlink health"),
    ],
)
def test_devlink_missing_or_refused_is_a_skip_with_the_reason(kwargs, words):
    results = graded(with_runs(node(), ran(**kwargs)))
    assert {r.status for r in results.values()} == {Status.SKIP}
    assert words in results["mlx5_0"].message or words in str(results["mlx5_0"].message)


def test_no_reporters_for_the_hca_is_a_skip():
    results = graded(collected(capture("handmade-no-reporters.json")))
    assert results["mlx5_0"].status == Status.SKIP
    assert "no health reporter for pci/0000:0c:00.0" in results["mlx5_0"].message


def test_lifetime_counts_without_a_baseline_warn_since_the_driver_loaded():
    results = graded(collected(capture(RECOVERED)))
    assert results["mlx5_0"].status == Status.WARN
    message = results["mlx5_0"].message
    assert "fw_fatal 1 error(s) since the driver loaded" in message and "recovered" in message
    assert results["mlx5_1"].status == Status.PASS


def test_error_state_fails_even_without_a_baseline():
    results = graded(collected(capture(ERROR_STATE)))
    assert results["mlx5_0"].status == Status.FAIL
    assert "fw_fatal state error" in results["mlx5_0"].message
    assert results["mlx5_0"].hint


def test_fw_fatal_increase_since_the_baseline_fails_and_says_recovered():
    before = collected(capture(HEALTHY))
    after = collected(capture(RECOVERED))
    result = graded(after, before)["mlx5_0"]
    assert result.status == Status.FAIL
    assert "fw_fatal 1 error(s) since the baseline, recovered (1 recover(s))" in result.message
    assert graded(after, before)["mlx5_1"].status == Status.PASS


def test_fw_increase_alone_warns():
    before = collected(capture(HEALTHY))
    text = capture(HEALTHY).replace(
        '"reporter":"fw","state":"healthy","error":0',
        '"reporter":"fw","state":"healthy","error":2',
        1,
    )
    result = graded(collected(text), before)["mlx5_0"]
    assert result.status == Status.WARN
    assert "fw 2 error(s) since the baseline, not recovered (0 recovers)" in result.message


def test_same_counts_as_the_baseline_pass():
    then = collected(capture(RECOVERED))
    result = graded(collected(capture(RECOVERED)), then)["mlx5_0"]
    assert result.status == Status.PASS and "since the baseline" in result.message


def test_counts_lower_than_the_baseline_are_a_driver_reload():
    then = collected(capture(ERROR_STATE))  # fw_fatal 2 errors
    now = collected(capture(RECOVERED))  # fw_fatal 1 error: reloaded since
    result = graded(now, then)["mlx5_0"]
    assert result.status == Status.FAIL and "since the driver reloaded" in result.message


def test_baseline_from_another_boot_counts_everything_again():
    then = collected(capture(RECOVERED))
    then = then.model_copy(update={"boot_id": "another-boot"})
    result = graded(collected(capture(RECOVERED)), then)["mlx5_0"]
    assert result.status == Status.FAIL and "baseline has no comparable count" in result.message


def test_ignored_hca_is_not_graded():
    results = graded(collected(capture(ERROR_STATE)), th=Thresholds(ignore_hcas=["mlx5_0"]))
    assert set(results) == {"mlx5_1"}


def test_hca_without_pci_function_is_a_skip_naming_why():
    snap = with_runs(snapshot([device("mlx5_0"), device("rxe0", pci=None)]), ran(capture(HEALTHY)))
    results = graded(snap)
    assert results["rxe0"].status == Status.SKIP and "PCI" in results["rxe0"].message


def test_result_has_evidence_and_expected():
    result: Result = graded(collected(capture(ERROR_STATE)))["mlx5_0"]
    assert result.evidence == ["devlink -j health show"]
    assert result.expected and result.observed


@pytest.mark.parametrize(
    "entry, left_out",
    [
        ('{"reporter":"fw\\n\\u001b[2J","error":1}', "not a plain name"),
        ('{"reporter":"fw","state":"ok\\nFAIL"}', "not a state name"),
        ('{"reporter":"fw","last_dump_date":"2024\\n","last_dump_time":"x"}', "not a date"),
    ],
)
def test_parse_names_states_and_stamps_with_control_characters_are_left_out(entry, left_out):
    text = '{"health":{"pci/0000:0c:00.0":[' + entry + "]}}"
    reporters, problems = family.parse(text)["0000:0c:00.0"]
    assert len(problems) == 1 and left_out in problems[0]
    assert all("\n" not in (r.name + str(r.state) + str(r.last_dump)) for r in reporters)


@pytest.mark.parametrize(
    "kwargs, kind",
    [
        ({"rc": None, "timed_out": True, "duration_s": 5.0}, "timed-out"),
        ({"rc": -11}, "killed-by-SIGSEGV"),
        ({"rc": None, "error": "Exec format error"}, "cannot-execute"),
    ],
)
def test_devlink_hanging_crashing_or_unable_to_run_is_one_warning_naming_it(kwargs, kind):
    results = graded(with_runs(node(), ran(**kwargs)))
    assert set(results) == {"node"}
    result = results["node"]
    assert result.status == Status.WARN and result.observed == kind
    assert "`devlink -j health show`" in result.message
