"""devlink health in a support bundle: the run is recorded, replays into the same
``Device.facts["devlink_health"]``, and ``ibdiag report BUNDLE`` regrades hca.fw_health as the
live run graded. And an ignored HCA: its counters are not read, so not in the bundle, and the
bundle replays into the same Snapshot. The node: two ConnectX-6 HCAs (tests/sysfs_builder.py,
0000:10:00.0 and 0000:20:00.0); a stub devlink prints the hand-made error-state capture moved
onto mlx5_0's address."""

from __future__ import annotations

import json
import os

import stubs as S
from snapshots import assert_same_snapshot
from stubs import write_procfs
from sysfs_builder import mlx5_node, write_node

from ibdiag.bundle.opener import open_bundle
from ibdiag.bundle.replay import replay
from ibdiag.bundle.write import write_bundle
from ibdiag.collect import collect
from ibdiag.facts.devlink import DevlinkHealth
from ibdiag.grade import grade
from ibdiag.registry import load_registry
from ibdiag.sources.sysfs import Recording
from ibdiag.thresholds import Thresholds

CAPTURES = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "captures", "devlink"
)
OPTIONS = {"timeout_s": 10.0, "deadline_s": 30.0}


def _node(tmp_path):
    sysfs = str(tmp_path / "sys")
    write_node(sysfs, mlx5_node(2))
    with open(os.path.join(CAPTURES, "handmade-fw-fatal-error-state.json")) as handle:
        text = handle.read().replace("0000:0c:00.0", "0000:10:00.0")
        text = text.replace("0000:0d:00.0", "0000:20:00.0")
    output = tmp_path / "devlink.json"
    output.write_text(text)
    stubs = S.StubBin(tmp_path / "stubs")
    stubs.add("devlink", S.by_args({"-j health show": S.prints(output)}, S.fails("bad args")))
    return sysfs, write_procfs(tmp_path / "proc"), stubs


def test_a_bundle_replays_the_run_and_report_regrades_it(tmp_path, run_cli):
    sysfs, procfs, stubs = _node(tmp_path)
    recording = Recording()
    options = {"path": stubs.path, **OPTIONS}
    live = collect(sysfs, procfs, {"sysfs", "devlink_health"}, options, recording=recording)
    assert stubs.calls() == ["devlink -j health show"]  # one run for the node
    fact = live.device("mlx5_0").facts["devlink_health"]
    assert isinstance(fact, DevlinkHealth) and fact.reporter("fw_fatal").state == "error"
    report = grade(live, load_registry(), Thresholds(), "standard")
    graded = {r.target: r.status.value for r in report.results if r.check_id == "hca.fw_health"}
    assert graded == {"mlx5_0": "fail", "mlx5_1": "pass"}
    bundle = write_bundle(live, report, recording, str(tmp_path / "out"), tarball=True)
    with open_bundle(bundle) as opened:
        assert opened.problems == []
        replayed = replay(opened)
    assert_same_snapshot(replayed, live)
    result = run_cli("report", bundle, "--format", "json")
    regraded = json.loads(result.stdout)
    again = {r["target"]: r["status"] for r in regraded["results"]
             if r["check_id"] == "hca.fw_health"}  # fmt: skip
    assert again == graded


def test_an_ignored_hca_bundle_holds_none_of_its_counters_and_replays_the_same(tmp_path):
    sysfs, procfs, _ = _node(tmp_path)
    recording = Recording()
    th = Thresholds(ignore_hcas=["mlx5_1"])
    live = collect(sysfs, procfs, {"sysfs"}, recording=recording, thresholds=th)
    assert not any("/mlx5_1/" in key and "counters" in key for key in recording.files)
    report = grade(live, load_registry(), th, "quick")
    bundle = write_bundle(live, report, recording, str(tmp_path / "out"), tarball=True)
    with open_bundle(bundle) as opened:
        assert opened.problems == []
        replayed = replay(opened)
    assert_same_snapshot(replayed, live)
    assert replayed.device("mlx5_1").fw_ver and not replayed.device("mlx5_1").ports[0].counters
