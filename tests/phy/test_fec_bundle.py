"""perfquery -T in a support bundle: the runs are recorded, replay into the same
``Port.facts["fec"]``, and ``ibdiag report BUNDLE`` regrades phy.fec as the live run graded.

The node: two ConnectX-6 HCAs (tests/sysfs_builder.py); a stub perfquery prints the hand-made
extended-speeds reading for mlx5_0 and a degraded copy (FECUncorrectableBlockCtrLane2 5) for
mlx5_1."""

from __future__ import annotations

import json
import re

import stubs as S
from fec_captures import path
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

HEALTHY = path("handmade-T-extended-speeds-edr-hca.txt")


def _node(tmp_path):
    sysfs = str(tmp_path / "sys")
    write_node(sysfs, mlx5_node(2))
    degraded = tmp_path / "degraded-T.txt"  # a mutation of the healthy reading
    with open(HEALTHY) as handle:
        text = handle.read()
    degraded.write_text(re.sub(r"^(FECUncorrectableBlockCtrLane2:\.+)0$", r"\g<1>5", text,
                               flags=re.M))  # fmt: skip
    stubs = S.StubBin(tmp_path / "stubs")
    stubs.add("perfquery", S.by_args({
        "-T -C mlx5_0 *": S.prints(HEALTHY),
        "-T -C mlx5_1 *": S.prints(degraded),
    }))  # fmt: skip
    return sysfs, write_procfs(tmp_path / "proc"), stubs


def test_a_bundle_replays_the_runs_and_report_regrades_them(tmp_path, run_cli):
    sysfs, procfs, stubs = _node(tmp_path)
    recording = Recording()
    options = {"path": stubs.path, "timeout_s": 10.0, "deadline_s": 30.0}
    live = collect(sysfs, procfs, {"sysfs", "perfquery_fec"}, options, recording=recording)
    fecs = {dev.target(p): p.facts.get("fec") for dev in live.devices for p in dev.ports}
    assert fecs["mlx5_0:1"].uncorrected_blocks == 0 and fecs["mlx5_1:1"].uncorrected_blocks == 5
    report = grade(live, load_registry(), Thresholds(), "standard")
    graded = {r.target: r.status.value for r in report.results if r.check_id == "phy.fec"}
    assert graded == {"mlx5_0:1": "pass", "mlx5_1:1": "warn"}
    path = write_bundle(live, report, recording, str(tmp_path / "out"), tarball=True)
    with open_bundle(path) as opened:
        assert opened.problems == []
        replayed = replay(opened)
    assert_same_snapshot(replayed, live)
    result = run_cli("report", path, "--format", "json")
    regraded = json.loads(result.stdout)
    again = {r["target"]: r["status"] for r in regraded["results"] if r["check_id"] == "phy.fec"}
    assert again == graded
