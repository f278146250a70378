"""mlxlink in a support bundle: the runs are recorded, replay into the same
``Port.facts["module"]``, and ``ibdiag report BUNDLE`` regrades phy.ber/phy.optics as the live run
graded. The node: two ConnectX-6 HCAs (tests/sysfs_builder.py); a stub mlxlink prints the
hand-made healthy NDR reading for mlx5_0 and its ``ber-1e-8`` + ``los-lane-2`` mutation for
mlx5_1."""

from __future__ import annotations

import json

import stubs as S
from module_captures import HEALTHY_NAME, MUTATIONS, healthy, path
from snapshots import assert_same_snapshot
from stubs import write_procfs
from sysfs_builder import mlx5_node, write_node

from ibdiag.bundle.opener import open_bundle
from ibdiag.bundle.replay import replay
from ibdiag.bundle.write import write_bundle
from ibdiag.collect import collect
from ibdiag.grade import grade
from ibdiag.registry import load_registry
from ibdiag.sources.sysfs import Recording
from ibdiag.thresholds import Thresholds


def _node(tmp_path):
    sysfs = str(tmp_path / "sys")
    write_node(sysfs, mlx5_node(2))
    doc = healthy()
    MUTATIONS["ber-1e-8"](doc)
    MUTATIONS["los-lane-2"](doc)
    degraded = tmp_path / "degraded.json"
    degraded.write_text(json.dumps(doc))
    stubs = S.StubBin(tmp_path / "stubs")
    stubs.add("mlxlink", S.by_args({
        "-d mlx5_0 *": S.prints(path(HEALTHY_NAME)),
        "-d mlx5_1 *": S.prints(degraded),
    }))  # fmt: skip
    return sysfs, write_procfs(tmp_path / "proc"), stubs


def test_a_bundle_replays_the_runs_and_report_regrades_them(tmp_path, run_cli):
    sysfs, procfs, stubs = _node(tmp_path)
    recording = Recording()
    options = {"path": stubs.path, "timeout_s": 10.0, "deadline_s": 30.0}
    live = collect(sysfs, procfs, {"sysfs", "module"}, options, recording=recording)
    found = {dev.target(p): p.facts.get("module") for dev in live.devices for p in dev.ports}
    assert found["mlx5_0:1"].tool == "mlxlink" and found["mlx5_1:1"].effective_ber == 1e-8
    assert found["mlx5_0:1"].identity.lot == "AB"
    report = grade(live, load_registry(), Thresholds(), "standard")
    checks = ("phy.ber", "phy.optics")
    graded = {(r.check_id, r.target): r.status.value for r in report.results
              if r.check_id in checks}  # fmt: skip
    assert graded == {
        ("phy.ber", "mlx5_0:1"): "pass", ("phy.ber", "mlx5_1:1"): "fail",
        ("phy.optics", "mlx5_0:1"): "pass", ("phy.optics", "mlx5_1:1"): "fail",
    }  # fmt: skip
    assert not any("mstlink" in call for call in stubs.calls())  # mlxlink answered
    bundle = write_bundle(live, report, recording, str(tmp_path / "out"), tarball=True)
    with open_bundle(bundle) as opened:
        assert opened.problems == []
        replayed = replay(opened)
    assert_same_snapshot(replayed, live)
    result = run_cli("report", bundle, "--format", "json")
    regraded = json.loads(result.stdout)
    again = {(r["check_id"], r["target"]): r["status"] for r in regraded["results"]
             if r["check_id"] in checks}  # fmt: skip
    assert again == graded
