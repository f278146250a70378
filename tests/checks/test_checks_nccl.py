"""checks/nccl.py reads typed fields only: the nccl-tests result and the NCCL Inspector dumps
the interpret step made (``Snapshot.nccl_tests``, ``Snapshot.nccl_inspector_dumps``), the run only
for why it failed; and grades them (stragglers, floors) itself.
"""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from conftest import read_capture
from hypothesis import given, settings
from hypothesis import strategies as st
from snapshots import builtin_registry, interpreted, run, snapshot

from ibdiag import resources, roles
from ibdiag.facts.nccl import InspectorSample
from ibdiag.families.nccl_inspector.parser import parse_inspector_prom
from ibdiag.model import CommandRun, InspectorFile
from ibdiag.thresholds import Thresholds

KIND = "nccl_inspector"
PROM_CAPTURE = "nccl-readme-nvl72004-inspector-prom-allreduce-4-5GB-and-p2p-send.txt"
ONE_NODE = "gcm-allreduce-1node-8xA100-80GB-nccl2.16.2.txt"

# checks/nccl.py as the registry loaded it (checks are files, not a package)
NCCL = sys.modules[builtin_registry().get("nccl.inspector").func.__module__]
stragglers = NCCL.stragglers


def test_the_checks_read_no_command_text():
    """No parser, no argv builder, no run at all: typed fields (with their RunOutcome) only."""
    source = (Path(resources.builtin_checks_dir()) / "nccl.py").read_text()
    banned = ("ibdiag.sources", "ibdiag.families", "_argv(", ".command(", ".commands", ".stdout",
              ".stderr", "snap.run(", "CommandRun", "command_results")  # fmt: skip
    for word in banned:
        assert word not in source, word


# -- nccl-tests ----------------------------------------------------------------------------------


def _nccl_snapshot(stdout: str, **fields):
    data = {"argv": ["/opt/site/nccl.sh"], "role": roles.NCCL_TESTS, "rc": 0, "stdout": stdout}
    planned = CommandRun(**{**data, **fields})
    return snapshot().model_copy(update={"commands": {planned.key: planned}})


def test_nccl_tests_is_graded_from_the_typed_result():
    snap = interpreted(_nccl_snapshot(read_capture("nccl_tests", ONE_NODE)))
    # the text is gone, the typed result stays: the check grades what the interpret step read
    (planned,) = snap.commands.values()
    blank = planned.model_copy(update={"stdout": ""})
    snap = snap.model_copy(update={"commands": {blank.key: blank}})
    (only,) = run("nccl.tests", snap)
    assert only.status.value == "pass" and only.observed == pytest.approx(231.72)
    assert only.message == (
        "bus bandwidth 231.7 GB/s (one node: NVLink-bound, no floor unless "
        "nccl_busbw_floor_gbytes is set), 8 ranks on 1 node(s), all results correct"
    )
    assert only.evidence == ["/opt/site/nccl.sh"]


def test_nccl_tests_not_interpreted_is_an_error_naming_why():
    snap = _nccl_snapshot(read_capture("nccl_tests", ONE_NODE))
    snap = snap.model_copy(update={"problems": {"interpret.nccl_tests": "ValueError: x"}})
    (only,) = run("nccl.tests", snap)
    assert only.status.value == "error"
    assert only.message == "nccl-tests output not interpreted: ValueError: x"


@pytest.mark.parametrize(
    "never_started, status, words",
    [
        ({"skipped": "the run's deadline had passed"}, "skip", "not run: the run's deadline"),
        ({"not_found": True}, "warn", "not installed"),
        ({"permission_denied": True}, "warn", "permission denied"),
    ],
)
def test_a_run_that_never_started_says_why_from_the_run(never_started, status, words):
    snap = interpreted(_nccl_snapshot("", rc=None, **never_started))
    assert snap.nccl_tests.rows == [] and snap.nccl_tests.outcome.no_data is not None
    (only,) = run("nccl.tests", snap)
    assert only.status.value == status and words in only.message, only


def test_a_run_that_could_not_start_fails_with_its_reason():
    snap = interpreted(_nccl_snapshot("", rc=None, error="not run: not a program path"))
    (only,) = run("nccl.tests", snap)
    assert only.status.value == "fail"
    assert only.message == "nccl-tests failed: /opt/site/nccl.sh: not run: not a program path"


# -- NCCL Inspector ------------------------------------------------------------------------------


def _inspector_snapshot(files):
    dumps = [
        InspectorFile(
            name=name,
            modified_at=datetime(2025, 5, 23, 20, 0, tzinfo=timezone.utc),
            text=text,
            truncated=truncated,
        )
        for name, text, truncated in files
    ]
    return interpreted(
        snapshot().model_copy(update={"nccl_inspector": dumps, "nccl_inspector_dir": "/dumps"})
    )


def _gpu_files(factors):
    text = read_capture(KIND, PROM_CAPTURE)
    files = []
    for n, factor in enumerate(factors):
        gpu_text = text.replace('gpu="GPU0"', f'gpu="GPU{n}"').replace(
            "} 678.263", f"}} {678.263 * factor}"
        )
        files.append((f"nccl_inspector_metrics_GPU-{n}.prom", gpu_text, False))
    return files


def test_inspector_is_graded_from_the_typed_dumps():
    snap = _inspector_snapshot(_gpu_files((1.0, 1.01, 0.99, 0.5)))
    # the files' text is gone, the typed dumps stay: the check grades what was parsed
    blank = [f.model_copy(update={"text": ""}) for f in snap.nccl_inspector]
    (slow,) = run("nccl.inspector", snap.model_copy(update={"nccl_inspector": blank}))
    assert slow.status.value == "warn" and slow.target == "nvl72004-T01:GPU3"
    assert slow.message == (
        "straggler: AllReduce 4 GiB at 339.1 GB/s, peers' median 678.3 GB/s (3 peers)"
    )
    assert slow.evidence == [f"/dumps/nccl_inspector_metrics_GPU-{n}.prom" for n in range(4)]


def test_inspector_names_the_files_read_in_part_or_caught_half_written():
    files = _gpu_files((1.0, 1.0, 1.0))
    files[0] = (files[0][0], files[0][1], True)  # only its newest part was read
    files[2] = (files[2][0], files[2][1][:-20], False)  # the Inspector was rewriting it
    (only,) = run("nccl.inspector", _inspector_snapshot(files))
    assert only.status.value == "pass"
    assert only.message == (
        "6 samples in 3 dump(s): no straggler; half-written, read as far as complete: "
        "nccl_inspector_metrics_GPU-0.prom, nccl_inspector_metrics_GPU-2.prom"
    )


def test_inspector_not_interpreted_is_an_error_naming_why():
    snap = _inspector_snapshot(_gpu_files((1.0,)))
    snap = snap.model_copy(
        update={"nccl_inspector_dumps": None, "problems": {"interpret.nccl_inspector": "Bug: y"}}
    )
    (only,) = run("nccl.inspector", snap)
    assert only.status.value == "error"
    assert only.message == "NCCL Inspector dumps not interpreted: Bug: y"


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["a.prom", "b.log", "c"]), st.text())
def test_any_dump_is_graded_without_an_error(name, text):
    results = run("nccl.inspector", _inspector_snapshot([(name, text, False)]))
    assert results and all(r.status.value != "error" for r in results), results


def test_inspector_floor_reads_the_printed_gbytes():
    snap = _inspector_snapshot(_gpu_files((1.0,)))
    results = run("nccl.inspector", snap, Thresholds(nccl_inspector_floor_gbytes=500))
    (low,) = [r for r in results if r.status.value == "fail"]
    assert low.message == (
        "Send 512 MiB: bus bandwidth 464.9 GB/s < 500 (nccl_inspector_floor_gbytes)"
    )


# -- the straggler finder ------------------------------------------------------------------------


def _sample(gpu, bus_gbytes, host="n1", collective="AllReduce", size=2**30, kind="coll"):
    return InspectorSample(
        kind=kind,
        collective=collective,
        message_bytes=size,
        bus_bw_gbps=None if bus_gbytes is None else bus_gbytes * 8,
        alg_bw_gbps=None,
        gpu=gpu,
        host=host,
        comm="c",
        timestamp_us=None,
    )


def test_stragglers_flags_the_slow_gpu():
    samples = [_sample(f"GPU{n}", 45.0 + n * 0.1) for n in range(8)]
    samples[5] = _sample("GPU5", 30.0)
    samples.append(_sample("GPU5", 31.0))  # its best sample counts
    samples += [_sample(f"GPU{n}", 10.0, size=2**20) for n in range(3)]  # all equal: fine
    found = stragglers(samples)
    assert len(found) == 1
    (slow,) = found
    assert (slow.gpu, slow.host, slow.collective, slow.message_bytes) == (
        "GPU5",
        "n1",
        "AllReduce",
        2**30,
    )
    assert slow.observed_gbps == pytest.approx(248.0)
    assert slow.median_gbps == pytest.approx(8 * 45.3)
    assert slow.peers == 7 and slow.kind == "coll"
    assert stragglers(samples, fraction=0.5) == []


def test_stragglers_needs_two_peers_and_a_bandwidth():
    assert stragglers([_sample("GPU0", 50.0), _sample("GPU1", 5.0)]) == []
    three = [_sample("GPU0", 50.0), _sample("GPU1", 50.0), _sample("GPU2", 5.0)]
    assert [s.gpu for s in stragglers(three)] == ["GPU2"]
    unknown = [*three[:2], _sample("GPU2", None), _sample("GPU3", 0.0), _sample(None, 1.0)]
    assert stragglers(unknown) == []


def test_stragglers_keeps_hosts_and_groups_apart():
    samples = [_sample("GPU0", 50.0, host=h) for h in ("a", "b", "c")]
    samples += [_sample("GPU0", 20.0, host="d")]
    samples += [_sample("GPU0", 5.0, host=h, collective="Send", kind="p2p") for h in "ab"]
    found = stragglers(samples)
    assert [(s.host, s.gpu, s.peers) for s in found] == [("d", "GPU0", 3)]


@pytest.mark.parametrize("fraction", [0, -1, 1.5, "0.8", True])
def test_stragglers_rejects_a_bad_fraction(fraction):
    with pytest.raises(ValueError):
        stragglers([], fraction=fraction)


def test_stragglers_on_parsed_prometheus_files():
    text = read_capture(KIND, PROM_CAPTURE)
    samples = []
    for n, factor in enumerate((1.0, 1.01, 0.99, 0.5)):
        gpu_text = text.replace('gpu="GPU0"', f'gpu="GPU{n}"').replace(
            "} 678.263", f"}} {678.263 * factor}"
        )
        samples += parse_inspector_prom(gpu_text).samples
    found = stragglers(samples)
    assert [(s.gpu, s.collective, s.message_bytes) for s in found] == [
        ("GPU3", "AllReduce", 4 * 2**30)
    ]
    assert found[0].median_gbps == pytest.approx(678.263 * 8)
