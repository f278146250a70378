"""The nccl-tests and NCCL Inspector families (``ibdiag.families.nccl_tests``,
``.nccl_inspector``): runs and dump files -> typed Snapshot fields, on every capture in
tests/fixtures/nccl_tests and tests/fixtures/nccl_inspector.

The run is found by its role alone; its stdout and stderr are parsed together; a run that never
started gives an empty result saying why (``outcome``); junk gives a result with problems, never an
exception.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from conftest import capture_names, captures_without_facts, read_capture
from hypothesis import given, settings
from hypothesis import strategies as st

from ibdiag import families, roles
from ibdiag.facts.nccl import InspectorDump, NcclTestsResult
from ibdiag.facts.outcome import NoData
from ibdiag.families import Runs, Update, outcome_of
from ibdiag.families import nccl_inspector as inspector_family
from ibdiag.families import nccl_tests as tests_family
from ibdiag.families.nccl_tests.parser import parse_nccl_tests
from ibdiag.model import CommandRun, InspectorFile, Snapshot

TESTS = "nccl_tests"
INSPECTOR = "nccl_inspector"

# capture -> (ranks, hosts, NCCL version, rows, busbw at the largest size GB/s, finished,
#             (source, subsystem, hca, status, vendor_err) of the first warning, first error)
RUN_FACTS = {
    "gcm-allreduce-1node-8xA100-80GB-nccl2.16.2.txt":
        (8, 1, "2.16.2+cuda11.6", 6, 231.72, True, None, None),
    "gcm-allreduce-2node-16xA100-80GB-nccl2.12.12.txt":
        (16, 2, "2.12.12+cuda11.6", 6, 182.8, True, None, None),
    "gcm-allreduce-mpirun-not-enough-slots-error.txt":
        (0, 0, None, 0, None, False, None, "There are not enough slots available"),
    "gcp-a3mega-allreduce-2node-16xH100-tcpxo.txt":
        (16, 2, None, 31, 338.82, True, None, None),
    "nccl-issue1698-roce-mlx5_10-net-ib-completion-status12-vendor-err-129.txt":
        (0, 0, None, 0, None, False, ("nccl", "NET/IB", "mlx5_10", 12, 129), None),
    "nccl-tests-issue322-allreduce-1G-16G-then-unhandled-cuda-error-test-failure-PARTIAL.txt":
        (0, 0, None, 5, 367.44, False, None, "Test NCCL failure common.cu:1204"),
    "oci-oke-allreduce-2node-16xA100-40GB-roce-sriov.txt":
        (16, 2, None, 31, 237.94, True, None, None),
    "superbench-allreduce-1node-8xA100-SXM4-40GB-old-format-error-column.txt":
        (8, 1, None, 34, 235.26, True, None, None),
}  # fmt: skip

# capture -> (format, version, truncated, [(kind, collective, bytes, GB/s, gpu, host)])
DUMP_FACTS = {
    "nccl-readme-inspector-json-v4.4-dump_stats-coll_perf-allreduce-16GiB-and-verbose-"
    "reducescatter.txt": ("json", "v4.4", True, [
        ("coll", "AllReduce", 16 * 2**30, 485.119099, "rank 2", "example-hostname"),
        ("coll", "ReduceScatter", 2 * 2**30, 366.134533, "rank 2", "example-hostname"),
    ]),
    "nccl-readme-nvl72004-inspector-prom-allreduce-4-5GB-and-p2p-send.txt":
        ("prometheus", "v5.1", False, [
            ("coll", "AllReduce", 4 * 2**30, 678.263, "GPU0", "nvl72004-T01"),
            ("p2p", "Send", 512 * 2**20, 464.9, "GPU0", "nvl72004-T01"),
        ]),
}  # fmt: skip


def _run(stdout: str = "", role=roles.NCCL_TESTS, **fields) -> CommandRun:
    data = {"argv": ["/opt/site/nccl.sh", "-g", "8"], "role": role, "rc": 0, "stdout": stdout}
    return CommandRun(**{**data, **fields})


def _node(commands=None, **fields) -> Snapshot:
    """What collect has read before the interpret step (a healthy node), with ``commands`` and
    ``fields``."""
    from snapshots import snapshot

    return snapshot().model_copy(update={"commands": commands or {}, **fields})


def _interpreted(commands=None, **fields) -> Snapshot:
    """Every family's interpretation of a healthy node with ``commands`` and ``fields``."""
    return families.interpret(_node(commands, **fields))


def _interpret_run(run: CommandRun) -> Snapshot:
    """Every family's interpretation of a node whose only run is ``run``."""
    return _interpreted({run.key: run})


def _tests_update(*runs: CommandRun) -> Update:
    """What the nccl-tests family alone makes of ``runs``."""
    return tests_family.interpret(_node(), Runs({run.key: run for run in runs}))


def _ours_broke(snap: Snapshot) -> list:
    """The problems the interpret driver recorded for these two families (their own bugs)."""
    return [key for key in snap.problems if key.startswith("interpret.nccl_")]


def _file(name: str, text: str, truncated: bool = False) -> InspectorFile:
    return InspectorFile(
        name=name,
        modified_at=datetime(2025, 5, 23, 20, 0, tzinfo=timezone.utc),
        text=text,
        truncated=truncated,
    )


def test_both_families_are_registered():
    levels = families.source_levels()
    assert levels["nccl_tests"] == "full" and levels["nccl_inspector"] == "full"


def test_every_capture_has_facts():
    assert not captures_without_facts(TESTS, RUN_FACTS)
    assert not captures_without_facts(INSPECTOR, DUMP_FACTS)


# -- nccl-tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", capture_names(TESTS))
def test_the_nccl_tests_run_becomes_typed(name):
    text = read_capture(TESTS, name)
    fields = _interpret_run(_run(text))
    assert _ours_broke(fields) == []
    result = fields.nccl_tests
    assert isinstance(result, NcclTestsResult) and result.role == roles.NCCL_TESTS
    ranks, hosts, version, rows, busbw, finished, warning, error = RUN_FACTS[name]
    assert (len(result.ranks), result.hosts(), result.nccl_version) == (ranks, hosts, version)
    assert len(result.rows) == rows and result.finished() is finished
    assert result.busbw_at_largest() == (pytest.approx(busbw) if busbw is not None else None)
    assert result.wrong_results() == [] and result.wrong_total == 0
    first = result.warnings[0] if result.warnings else None
    assert (
        (first.source, first.subsystem, first.hca, first.status, first.vendor_err)
        if first
        else None
    ) == warning
    if error is None:
        assert result.errors == []
    else:
        assert error in result.errors[0]
    # what the parser makes of the text, with the role and outcome of the run; it survives JSON
    update = {"role": roles.NCCL_TESTS, "outcome": outcome_of(_run(text))}
    assert result == parse_nccl_tests(f"{text}\n").model_copy(update=update)
    assert result.outcome.no_data is None and result.outcome.command == "/opt/site/nccl.sh -g 8"
    assert NcclTestsResult.model_validate_json(result.model_dump_json()) == result


def test_stderr_is_read_with_stdout():
    """NCCL writes its WARN lines to stderr under some launchers: the run's two streams count."""
    net_ib = read_capture(TESTS, "nccl-issue1698-roce-mlx5_10-net-ib-completion-status12-"
                          "vendor-err-129.txt")  # fmt: skip
    one_node = read_capture(TESTS, "gcm-allreduce-1node-8xA100-80GB-nccl2.16.2.txt")
    result = _interpret_run(_run(one_node, stderr=net_ib)).nccl_tests
    assert result.finished() and [w.hca for w in result.warnings][:1] == ["mlx5_10"]


def test_the_run_is_found_by_role_not_by_program():
    one_node = read_capture(TESTS, "gcm-allreduce-1node-8xA100-80GB-nccl2.16.2.txt")
    named_like_it = _run(one_node, role=None, argv=["/opt/nccl-tests/build/all_reduce_perf"])
    other_role = _run(one_node, role="loopback client mlx5_0:1 attempt 1")
    assert _tests_update(named_like_it, other_role) == Update()
    wrapper = _run(one_node, argv=["/site/bin/nccl-check"])
    assert _tests_update(wrapper).node["nccl_tests"].rows


@pytest.mark.parametrize(
    "never_started, why",
    [
        ({"skipped": "the run's deadline had passed", "rc": None}, NoData.NOT_STARTED),
        ({"not_found": True, "rc": None}, NoData.NOT_INSTALLED),
        ({"permission_denied": True, "rc": None}, NoData.NO_PERMISSION),
    ],
)
def test_a_run_that_never_started_is_an_empty_result_saying_why(never_started, why):
    run = _run(**never_started)
    result = _tests_update(run).node["nccl_tests"]
    assert result.rows == [] and not result.finished()
    assert result.outcome.no_data == why and result.outcome.reason == run.failure()


def test_a_run_that_could_not_start_for_another_reason_is_read_as_empty():
    run = _run(rc=None, error="not run: not a program path: 'a b'")
    result = _tests_update(run).node["nccl_tests"]
    assert result.rows == [] and not result.finished()
    assert result.problems == ["empty nccl-tests output"]
    assert result.outcome.no_data == NoData.CANNOT_EXECUTE


@pytest.mark.parametrize(
    "junk",
    ["", "\x00\x01\xff garbage", "{" * 10_000, "# size count\n 1 2 3 4 5 6 7 8 9 10 11 12 1e999\n"],
)
def test_junk_output_is_a_recorded_problem_not_a_crash(junk):
    fields = _interpret_run(_run(junk, rc=1))
    assert _ours_broke(fields) == []
    result = fields.nccl_tests
    assert result.problems and result.rows == [] and not result.finished()


def test_a_wrong_count_too_large_for_an_integer_is_a_problem():
    header = "#  size  count  type  redop  root  time algbw busbw #wrong  time algbw busbw #wrong"
    row = "33554432 8388608 float sum -1 344.8 97.32 170.31 1e999 344.8 97.32 170.31 0"
    result = _interpret_run(_run(f"{header}\n{row}\n")).nccl_tests
    assert result.rows == [] and "#wrong '1e999' is not a count" in result.problems[0]


@settings(max_examples=100, deadline=None)
@given(st.text(), st.text())
def test_any_output_never_raises(stdout, stderr):
    fields = _interpret_run(_run(stdout, stderr=stderr))
    assert _ours_broke(fields) == [] and isinstance(fields.nccl_tests, NcclTestsResult)


# -- NCCL Inspector ------------------------------------------------------------------------------


def _as_files(name: str, text: str) -> list:
    """The capture under the names the Inspector gives its files (.log JSON, .prom per GPU)."""
    if DUMP_FACTS[name][0] == "json":
        return [_file("node0-pid1639453.log", text)]
    return [_file("nccl_inspector_metrics_GPU-0a1b.prom", text)]


@pytest.mark.parametrize("name", capture_names(INSPECTOR))
def test_inspector_files_become_typed_dumps(name):
    text = read_capture(INSPECTOR, name)
    files = _as_files(name, text)
    fields = _interpreted(nccl_inspector=files)
    assert _ours_broke(fields) == []
    (dump,) = fields.nccl_inspector_dumps
    assert isinstance(dump, InspectorDump) and dump.name == files[0].name
    fmt, version, truncated, samples = DUMP_FACTS[name]
    assert (dump.format, dump.format_version, dump.truncated) == (fmt, version, truncated)
    got = [
        (s.kind, s.collective, s.message_bytes, s.bus_bw_gbytes, s.gpu, s.host)
        for s in dump.samples
    ]
    assert got == samples
    for sample in dump.samples:  # Gb/s for grading beside GB/s as printed
        assert sample.bus_bw_gbps == pytest.approx(sample.bus_bw_gbytes * 8)
    if fmt == "prometheus":  # the GPU's UUID from the file name
        assert {s.gpu_uuid for s in dump.samples} == {"GPU-0a1b"}
    assert InspectorDump.model_validate_json(dump.model_dump_json()) == dump


def test_dumps_keep_the_files_order_and_names():
    files = [
        f for name in sorted(DUMP_FACTS) for f in _as_files(name, read_capture(INSPECTOR, name))
    ]
    files.append(_file("empty.log", ""))
    found = inspector_family.interpret(_node(nccl_inspector=files), Runs({}))
    dumps = found.node["nccl_inspector_dumps"]
    assert [d.name for d in dumps] == [f.name for f in files]
    assert dumps[-1].samples == [] and "empty" in dumps[-1].problems[0]


def test_no_dump_directory_and_no_recent_dump():
    assert inspector_family.interpret(_node(nccl_inspector=None), Runs({})) == Update()
    none_recent = inspector_family.interpret(_node(nccl_inspector=[]), Runs({}))
    assert none_recent == Update(node={"nccl_inspector_dumps": []})


@pytest.mark.parametrize(
    "name, junk",
    [
        ("x.prom", "\x00\x01\xff garbage"),
        ("x.prom", 'nccl_bus_bandwidth_gbs{collective="AllReduce"} 1e400\n'),
        ("x.log", "{" * 10_000),
        ("x.log", '{"coll_perf": {"coll": "AllReduce", "coll_busbw_gbs": "fast"}}\n'),
        ("mystery", "[1, 2, {}]"),
    ],
)
def test_junk_dump_is_a_recorded_problem_not_a_crash(name, junk):
    fields = _interpreted(nccl_inspector=[_file(name, junk)])
    assert _ours_broke(fields) == []
    (dump,) = fields.nccl_inspector_dumps
    assert dump.problems and dump.name == name


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["a.prom", "b.log", "c.json", "d"]), st.text())
def test_any_dump_never_raises(name, text):
    fields = _interpreted(nccl_inspector=[_file(name, text)])
    assert _ours_broke(fields) == []
    (dump,) = fields.nccl_inspector_dumps
    assert isinstance(dump, InspectorDump)


# -- on the Snapshot -----------------------------------------------------------------------------


def test_the_typed_fields_round_trip_through_a_snapshot():
    from snapshots import interpreted, snapshot

    run = _run(read_capture(TESTS, "gcm-allreduce-2node-16xA100-80GB-nccl2.12.12.txt"))
    prom = "nccl-readme-nvl72004-inspector-prom-allreduce-4-5GB-and-p2p-send.txt"
    files = _as_files(prom, read_capture(INSPECTOR, prom))
    snap = interpreted(
        snapshot().model_copy(update={"commands": {run.key: run}, "nccl_inspector": files})
    )
    assert snap.nccl_tests is not None and len(snap.nccl_tests.ranks) == 16
    assert snap.nccl_inspector_dumps is not None and len(snap.nccl_inspector_dumps) == 1
    again = Snapshot.model_validate_json(snap.model_dump_json())
    assert again.nccl_tests == snap.nccl_tests
    assert again.nccl_inspector_dumps == snap.nccl_inspector_dumps
