"""Grading: running checks (a crash becomes one error), stamping ids, levels, and the verdict."""

from __future__ import annotations

import sys
from typing import Callable, Iterable, Iterator, List, Optional

import pytest
from conftest import TESTS_DIR

_TESTS_DIR = TESTS_DIR
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)

from snapshots import builtin_registry, device, devices, port, snapshot  # noqa: E402

from ibdiag.grade import grade, run_check, verdict_of  # noqa: E402
from ibdiag.model import Report, Result, Snapshot, Status, Verdict  # noqa: E402
from ibdiag.registry import CheckSpec, Registry, check, spec_of  # noqa: E402
from ibdiag.thresholds import Thresholds  # noqa: E402

ORIGIN = "/etc/ibdiag/checks.d/test_site.py"


def result(status: Status, target: str = "node", message: str = "observed vs expected") -> Result:
    return Result(target=target, status=status, message=message)


def make_check(
    check_id: str,
    body: Callable[[Snapshot, Thresholds], object],
    level: str = "quick",
) -> CheckSpec:
    """A registered-looking spec for ``body`` (validated by Registry.add in ``registry_of``)."""

    def func(snap: Snapshot, th: Thresholds) -> object:
        """Healthy: whatever the test says."""
        return body(snap, th)

    check(check_id, title=f"Test check {check_id}", level=level)(func)
    spec = spec_of(func)
    assert spec is not None
    return CheckSpec(
        id=spec.id,
        title=spec.title,
        needs=spec.needs,
        level=spec.level,
        func=spec.func,
        origin=ORIGIN,
    )


def registry_of(*specs: CheckSpec) -> Registry:
    registry = Registry()
    for spec in specs:
        registry.add(spec)
    return registry


def returns(*statuses: Status) -> Callable[[Snapshot, Thresholds], List[Result]]:
    return lambda snap, th: [result(status, target=f"t{n}") for n, status in enumerate(statuses)]


def boom(snap: Snapshot, th: Thresholds) -> List[Result]:
    raise ValueError("boom 42: unexpected None in port.rate")


HEALTHY = snapshot(devices(2))
EMPTY = snapshot([], problems={"class/infiniband": "missing"})


# --- a check that breaks ----------------------------------------------------------------------


def test_a_check_that_raises_becomes_one_error_and_the_others_still_run() -> None:
    calls: List[str] = []

    def first(snap: Snapshot, th: Thresholds) -> List[Result]:
        calls.append("first")
        return [result(Status.PASS, "mlx5_0:1")]

    def last(snap: Snapshot, th: Thresholds) -> List[Result]:
        calls.append("last")
        return [result(Status.PASS, "mlx5_1:1")]

    registry = registry_of(
        make_check("site.first", first),
        make_check("site.crashes", boom),
        make_check("site.last", last),
    )
    report = grade(HEALTHY, registry, Thresholds())

    assert calls == ["first", "last"]
    assert [(r.check_id, r.status) for r in report.results] == [
        ("site.first", Status.PASS),
        ("site.crashes", Status.ERROR),
        ("site.last", Status.PASS),
    ]
    error = report.results[1]
    assert error.target == "node"
    assert "ValueError" in error.message
    assert "boom 42" in error.message
    assert error.hint is not None and ORIGIN in error.hint
    assert report.verdict is Verdict.UNKNOWN
    assert report.verdict.exit_code == 3


def test_a_generator_check_that_raises_midway_leaves_only_the_error() -> None:
    def half(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
        yield result(Status.PASS, "mlx5_0:1")
        raise KeyError("ports")

    results = run_check(make_check("site.half", half), HEALTHY, Thresholds())
    assert len(results) == 1
    assert results[0].status is Status.ERROR
    assert results[0].check_id == "site.half"
    assert "KeyError" in results[0].message


@pytest.mark.parametrize(
    ("returned", "type_name"),
    [
        ([{"target": "node", "status": "pass", "message": "a dict"}], "dict"),
        (["a string"], "str"),
        ([result(Status.PASS), None], "NoneType"),
    ],
)
def test_a_check_returning_non_results_is_an_error(returned: object, type_name: str) -> None:
    results = run_check(make_check("site.sloppy", lambda s, t: returned), HEALTHY, Thresholds())
    assert len(results) == 1
    assert results[0].status is Status.ERROR
    assert results[0].check_id == "site.sloppy"
    assert type_name in results[0].message
    assert "Result" in results[0].message


def test_a_check_returning_one_bare_result_instead_of_a_list_is_an_error() -> None:
    spec = make_check("site.bare", lambda s, t: result(Status.PASS))
    results = run_check(spec, HEALTHY, Thresholds())
    assert [r.status for r in results] == [Status.ERROR]


def test_a_crash_and_a_fail_elsewhere_is_critical() -> None:
    registry = registry_of(
        make_check("site.crashes", boom),
        make_check("site.fails", returns(Status.FAIL)),
    )
    report = grade(HEALTHY, registry, Thresholds())
    assert report.verdict is Verdict.CRITICAL
    assert report.verdict.exit_code == 2
    assert [r.status for r in report.results] == [Status.ERROR, Status.FAIL]


def test_builtin_checks_still_run_beside_a_crashing_check() -> None:
    # A check that blows up on data it does not expect must not take the others down.
    def broken_rate(snap: Snapshot, th: Thresholds) -> Iterable[Result]:
        raise AttributeError("'NoneType' object has no attribute 'gbps'")

    builtins = [s for s in builtin_registry() if s.id in {"link.state", "link.phys_state"}]
    registry = registry_of(make_check("site.broken_rate", broken_rate), *builtins)
    report = grade(HEALTHY, registry, Thresholds())
    counts = report.counts()
    assert counts["error"] == 1
    assert counts["pass"] == 4  # 2 HCAs x (state + phys_state)


# --- stamping ---------------------------------------------------------------------------------


def test_check_id_is_stamped_on_every_result_and_the_original_is_untouched() -> None:
    shared = Result(check_id="wrong.id", target="mlx5_0:1", status=Status.WARN, message="m")
    unstamped = Result(target="mlx5_1:1", status=Status.PASS, message="m")
    spec = make_check("site.stamped", lambda s, t: [shared, unstamped])
    results = run_check(spec, HEALTHY, Thresholds())
    assert [r.check_id for r in results] == ["site.stamped", "site.stamped"]
    assert [r.target for r in results] == ["mlx5_0:1", "mlx5_1:1"]
    assert [r.status for r in results] == [Status.WARN, Status.PASS]
    assert shared.check_id == "wrong.id"  # the check's own object is not mutated
    assert unstamped.check_id == ""


def test_builtin_results_all_carry_their_check_id() -> None:
    report = grade(HEALTHY, builtin_registry(), Thresholds())
    ids = {spec.id for spec in builtin_registry()}
    assert report.results
    for found in report.results:
        assert found.check_id in ids


# --- levels -----------------------------------------------------------------------------------


def _levelled_registry(calls: List[str]) -> Registry:
    def recorder(name: str) -> Callable[[Snapshot, Thresholds], List[Result]]:
        def body(snap: Snapshot, th: Thresholds) -> List[Result]:
            calls.append(name)
            return [result(Status.PASS)]

        return body

    return registry_of(
        make_check("site.full_one", recorder("full"), level="full"),
        make_check("site.quick_one", recorder("quick"), level="quick"),
        make_check("site.standard_one", recorder("standard"), level="standard"),
    )


@pytest.mark.parametrize(
    ("level", "ran"),
    [
        ("quick", ["quick"]),
        ("standard", ["quick", "standard"]),
        ("full", ["full", "quick", "standard"]),
    ],
)
def test_grade_runs_only_the_checks_of_its_level(level: str, ran: List[str]) -> None:
    calls: List[str] = []
    report = grade(HEALTHY, _levelled_registry(calls), Thresholds(), level=level)
    assert calls == ran
    assert [r.check_id for r in report.results] == [f"site.{name}_one" for name in ran]
    assert report.level == level


def test_grade_default_level_is_quick() -> None:
    calls: List[str] = []
    report = grade(HEALTHY, _levelled_registry(calls), Thresholds())
    assert calls == ["quick"]
    assert report.level == "quick"


# --- verdict ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("statuses", "verdict", "exit_code"),
    [
        ([Status.PASS, Status.WARN, Status.FAIL, Status.ERROR, Status.SKIP], Verdict.CRITICAL, 2),
        ([Status.FAIL], Verdict.CRITICAL, 2),
        ([Status.PASS, Status.ERROR, Status.WARN], Verdict.UNKNOWN, 3),
        ([Status.ERROR], Verdict.UNKNOWN, 3),
        ([Status.WARN, Status.PASS, Status.SKIP], Verdict.WARNING, 1),
        ([Status.PASS, Status.SKIP], Verdict.OK, 0),
        ([Status.SKIP], Verdict.OK, 0),
        ([Status.PASS], Verdict.OK, 0),
    ],
)
def test_verdict_policy(statuses: List[Status], verdict: Verdict, exit_code: int) -> None:
    found, reason = verdict_of([result(status) for status in statuses], HEALTHY, Thresholds())
    assert found is verdict
    assert found.exit_code == exit_code
    assert reason


def test_verdict_reason_counts_what_went_wrong() -> None:
    statuses = [Status.FAIL, Status.WARN, Status.WARN, Status.ERROR, Status.PASS]
    verdict, reason = verdict_of([result(status) for status in statuses], HEALTHY, Thresholds())
    assert verdict is Verdict.CRITICAL
    assert "1 fail" in reason
    assert "1 error" in reason
    assert "2 warn" in reason


def test_verdict_ok_reason_counts_passes() -> None:
    verdict, reason = verdict_of(
        [result(Status.PASS)] * 3 + [result(Status.SKIP)], HEALTHY, Thresholds()
    )
    assert verdict is Verdict.OK
    assert "3 pass" in reason


@pytest.mark.parametrize("statuses", [[], [Status.SKIP], [Status.PASS, Status.SKIP]])
def test_no_devices_and_nothing_failed_is_unknown(statuses: List[Status]) -> None:
    verdict, reason = verdict_of([result(status) for status in statuses], EMPTY, Thresholds())
    assert verdict is Verdict.UNKNOWN
    assert verdict.exit_code == 3
    assert "no InfiniBand devices found" in reason
    assert "/sys/class/infiniband" in reason


def test_no_devices_under_a_relocated_sysfs_names_it() -> None:
    verdict, reason = verdict_of([], snapshot([], sysfs_root="/host/sys/"), Thresholds())
    assert verdict is Verdict.UNKNOWN
    assert "/host/sys/class/infiniband" in reason


def test_no_devices_with_a_fail_is_critical() -> None:
    verdict, _ = verdict_of([result(Status.FAIL)], EMPTY, Thresholds())
    assert verdict is Verdict.CRITICAL


def test_exit_codes_follow_nagios() -> None:
    assert {verdict: verdict.exit_code for verdict in Verdict} == {
        Verdict.OK: 0,
        Verdict.WARNING: 1,
        Verdict.CRITICAL: 2,
        Verdict.UNKNOWN: 3,
    }


# --- the built-in checks, end to end on hand-built snapshots ----------------------------------


def _report(snap: Snapshot, th: Optional[Thresholds] = None) -> Report:
    return grade(snap, builtin_registry(), th or Thresholds())


def test_healthy_node_is_ok() -> None:
    report = _report(snapshot(devices(8, ports=[port(1)])), Thresholds(expect_hcas=8))
    assert report.verdict is Verdict.OK, [r for r in report.results if r.status != Status.PASS]
    assert report.verdict.exit_code == 0
    not_pass = {(r.check_id, r.status) for r in report.results if r.status != Status.PASS}
    # No baseline given, and the hand-built ports carry no counters and the HCAs no hwmon
    # temperatures and no PCIe path: each says so as a skip.
    assert not_pass == {
        ("counters.baseline", Status.SKIP),
        ("counters.port_errors", Status.SKIP),
        ("counters.hw_errors", Status.SKIP),
        ("phy.temperature", Status.SKIP),
        ("pci.aer", Status.SKIP),
        ("pci.iommu", Status.SKIP),
    }


def test_node_without_devices_is_unknown() -> None:
    report = _report(EMPTY)
    assert report.verdict is Verdict.UNKNOWN
    assert "no InfiniBand devices found" in report.verdict_reason
    assert {r.status for r in report.results} <= {Status.SKIP}


def test_node_whose_only_devices_are_ignored_is_unknown_not_ok() -> None:
    # An Azure VM with only its Ethernet NIC (mlx5_an0), ignored as the docs suggest: there is
    # no InfiniBand device to grade, exactly as on a node with none at all.
    nic = device(
        "mlx5_an0",
        hca_type="MT4125",
        ports=[port(link_layer="Ethernet", rate_text="50 Gb/sec (2X EDR)")],
    )
    report = _report(snapshot([nic]), Thresholds(ignore_hcas=["mlx5_an*"]))
    assert report.verdict is Verdict.UNKNOWN, (report.verdict, report.verdict_reason)
    assert "no InfiniBand devices found" in report.verdict_reason


def test_node_without_devices_but_expecting_some_is_critical() -> None:
    assert _report(EMPTY, Thresholds(expect_hcas=8)).verdict is Verdict.CRITICAL


def test_port_stuck_in_init_is_critical() -> None:
    node = [*devices(3), device("mlx5_3", ports=[port(state=2)])]
    report = _report(snapshot(node))
    assert report.verdict is Verdict.CRITICAL
    failing = {(r.check_id, r.target) for r in report.results if r.status is Status.FAIL}
    assert failing == {("link.state", "mlx5_3:1")}


def test_degraded_capability_only_is_warning() -> None:
    report = _report(snapshot(devices(2, ports=[port(rate_text="100 Gb/sec (4X EDR)")])))
    assert report.verdict is Verdict.WARNING
    assert report.verdict.exit_code == 1


def test_report_carries_its_inputs_and_round_trips_through_json() -> None:
    th = Thresholds(expect_hcas=2, expect_rate_gbps=200)
    report = _report(HEALTHY, th)
    assert report.thresholds == th
    assert report.snapshot == HEALTHY
    assert report.tool_version
    again = Report.model_validate_json(report.model_dump_json())
    assert again == report
    assert sum(report.counts().values()) == len(report.results)


# --- the drain reason: which finding is the worst, in stable words ----------------------------


def _graded(results: List[Result]) -> Report:
    return Report(
        tool_version="0",
        level="quick",
        verdict=Verdict.CRITICAL,
        verdict_reason="",
        results=results,
        thresholds=Thresholds(),
        snapshot=HEALTHY,
    )


def _found(status: Status, target: str, check_id: str, **fields) -> Result:
    return Result(check_id=check_id, target=target, status=status, message="m 12.5/hour", **fields)


def test_drain_reason_names_the_first_fail_before_any_error_or_warning() -> None:
    from ibdiag.drain_reason import drain_reason

    report = _graded(
        [
            _found(Status.WARN, "mlx5_0:1", "link.rate", observed=100.0),
            _found(Status.ERROR, "node", "site.broken"),
            _found(Status.FAIL, "mlx5_6:1", "link.state", observed="2: INIT"),
            _found(Status.FAIL, "mlx5_7:1", "link.state", observed="1: DOWN"),
        ]
    )
    assert drain_reason(report) == "ibdiag: mlx5_6:1 link.state 2: INIT and more"


def test_drain_reason_holds_no_numbers_but_the_subject_instead() -> None:
    from ibdiag.drain_reason import drain_reason

    counted = _found(Status.WARN, "mlx5_0:1", "counters.port_errors", observed=37)
    counted = counted.model_copy(update={"subject": "symbol_error"})
    assert drain_reason(_graded([counted])) == "ibdiag: mlx5_0:1 counters.port_errors symbol_error"
    error = _found(Status.ERROR, "node", "site.broken", observed=3)
    assert drain_reason(_graded([error, counted])) == "ibdiag: node site.broken"


def test_drain_reason_is_empty_when_nothing_is_wrong() -> None:
    from ibdiag.drain_reason import drain_reason

    assert drain_reason(_report(HEALTHY)) == ""
    assert drain_reason(_graded([_found(Status.SKIP, "node", "x.y")])) == ""


def test_the_printed_reason_is_the_policy_made_one_safe_line() -> None:
    from ibdiag.render.text import reason_line

    hostile = _found(Status.FAIL, "mlx5_0:1\nIBDIAG OK", "link.state", observed="2: INIT")
    assert reason_line(_graded([hostile])) == "ibdiag: mlx5_0:1 IBDIAG OK link.state 2: INIT"


# -- drain reasons: the observed value, stably (link.rate, hca.inventory) -----------------------


def _reason_of_node(snap: Snapshot, th: Thresholds) -> str:
    from ibdiag.drain_reason import drain_reason

    return drain_reason(_report(snap, th))


def test_a_slow_port_s_reason_carries_its_rate_and_the_expected_one() -> None:
    """A fleet grouped by reason tells a port at 100 Gb/s from one at 50 Gb/s."""
    th = Thresholds(expect_hcas=2, expect_rate_gbps=200)
    edr = snapshot([device("mlx5_0", ports=[port(1, rate_text="100 Gb/sec (4X EDR)")]),
                    device("mlx5_1")])  # fmt: skip
    half = snapshot([device("mlx5_0", ports=[port(1, rate_text="50 Gb/sec (1X HDR)")]),
                     device("mlx5_1")])  # fmt: skip
    assert _reason_of_node(edr, th) == "ibdiag: mlx5_0:1 link.rate 100<200 Gb/s"
    assert _reason_of_node(half, th).startswith("ibdiag: mlx5_0:1 link.rate 50<200 Gb/s")
    # without --expect-rate: below the other ports of the same model on the node
    peers = snapshot([device("mlx5_0", ports=[port(1, rate_text="100 Gb/sec (4X EDR)")]),
                      *devices(3)[1:]])  # fmt: skip
    assert _reason_of_node(peers, Thresholds()) == "ibdiag: mlx5_0:1 link.rate 100<200 Gb/s"


def test_a_missing_hca_s_reason_carries_the_count_and_the_name_when_known() -> None:
    seven = [dev for dev in devices(8) if dev.name != "mlx5_4"]
    by_count = _reason_of_node(snapshot(seven), Thresholds(expect_hcas=8))
    assert by_count == "ibdiag: node hca.inventory 7/8 HCAs"
    none = _reason_of_node(snapshot([]), Thresholds(expect_hcas=8))
    assert none == "ibdiag: node hca.inventory 0/8 HCAs"
    one_too_many = _reason_of_node(snapshot(devices(9)), Thresholds(expect_hcas=8))
    assert one_too_many == "ibdiag: node hca.inventory 9/8 HCAs"  # a warning's, for the log
    named = Thresholds(expect_hca_names=[f"mlx5_{n}" for n in range(8)])
    by_name = _reason_of_node(snapshot(seven), named)
    assert by_name == "ibdiag: mlx5_4 hca.inventory 7/8 HCAs, mlx5_4 missing"
    six = [dev for dev in seven if dev.name != "mlx5_6"]
    assert _reason_of_node(snapshot(six), named) == (
        "ibdiag: mlx5_4 hca.inventory 6/8 HCAs, mlx5_4 missing and more"
    )


def test_the_fleet_reads_the_same_reason_out_of_the_report_json() -> None:
    """``ibdiag fleet`` groups nodes by the reason it reads back out of each report's JSON:
    the observed value must survive that trip (it travels in the result's subject)."""
    import json

    from ibdiag.drain_reason import drain_reason
    from ibdiag.fleet.node import summarize

    th = Thresholds(expect_hcas=8, expect_rate_gbps=200)
    slow = snapshot([device("mlx5_0", ports=[port(1, rate_text="100 Gb/sec (4X EDR)")]),
                     *devices(8)[1:]])  # fmt: skip
    missing = snapshot(devices(7))
    for snap in (slow, missing):
        report = _report(snap, th)
        summary = summarize(json.loads(report.model_dump_json()), "gpu001.json")
        assert summary.drain_reason == drain_reason(report) != ""
        assert any(char.isdigit() for char in summary.drain_reason.split(" ", 3)[3])


def test_the_reason_holds_no_value_that_changes_from_run_to_run() -> None:
    """Counters keep naming the counter, never its increase; a rate is the rate itself."""
    from ibdiag.drain_reason import drain_reason

    for increase in (3, 4000):
        counted = _found(Status.FAIL, "mlx5_0:1", "counters.port_errors", observed=increase)
        counted = counted.model_copy(update={"subject": "link_downed"})
        assert drain_reason(_graded([counted])) == (
            "ibdiag: mlx5_0:1 counters.port_errors link_downed"
        )


# -- the reason line: a length cap and a safe character set -------------------------------------

HOSTILE_FAR_END = (
    "MF0;\"$(touch /tmp/ibdiag-pwned)\";`id`\\|&[root@x]%s#*?{}=!'quote'" + "\u00e9\u202e" * 3
)


def _far_end_fail(description: str, local: str = "mlx5_3:1") -> Result:
    from ibdiag.facts.partner import Partner, cable_name

    far = Partner(node_guid="0x0002c90300a0b0c0", description=description, port=21)
    return _found(Status.FAIL, cable_name(local, far), "link.partner", observed="Down")


def test_far_end_text_reaches_the_reason_only_through_a_safe_character_set() -> None:
    import re

    from ibdiag.render.text import REASON_MAX_CHARS, reason_line

    line = reason_line(_graded([_far_end_fail(HOSTILE_FAR_END)]))
    assert line.startswith("ibdiag: mlx5_3:1<->MF0__") and line.endswith(" link.partner Down")
    assert re.fullmatch(r"[A-Za-z0-9 _.,:/+<>()-]+", line), line
    assert len(line) <= REASON_MAX_CHARS == 128


def test_a_long_reason_is_cut_to_the_cap_and_says_so() -> None:
    from ibdiag.render.text import REASON_MAX_CHARS, reason_line

    far_end, local = f"MF0;leaf{'x' * 300}:MQM9700/U1", f"mlx5_{'y' * 60}:1"  # both as read
    line = reason_line(_graded([_far_end_fail(far_end, local)]))
    assert len(line) == REASON_MAX_CHARS and line.endswith("...")
    assert line.startswith(f"ibdiag: {local}<->leafxxx")
    # the same finding gives the same line, run after run
    assert line == reason_line(_graded([_far_end_fail(far_end, local)]))
