"""The configuration's files go into a support bundle and replay: the partition tables and the
character devices are read from the bundle's recorded sysfs as from the node, so
``ibdiag report BUNDLE`` grades them as the live run did."""

from __future__ import annotations

import os
import shutil

from snapshots import assert_same_snapshot
from stubs import write_procfs
from sysfs_builder import mlx5_node, write_node

from ibdiag.bundle.opener import open_bundle
from ibdiag.bundle.replay import replay
from ibdiag.bundle.write import write_bundle
from ibdiag.collect import collect
from ibdiag.facts.char_devices import VERBS_CLASS
from ibdiag.grade import grade
from ibdiag.registry import load_registry
from ibdiag.sources.sysfs import Recording
from ibdiag.thresholds import Thresholds

TH = Thresholds(expect_pkeys=["0x8001"])


def _statuses(report, *checks):
    return {(r.check_id, r.target): r.status.value for r in report.results if r.check_id in checks}


def test_pkeys_and_char_devices_replay_from_a_bundle(tmp_path):
    root = str(tmp_path / "sys")
    specs = mlx5_node(2, port=dict(pkeys=("0xffff", "0x8001")))
    specs[1].ports[0].pkeys = ("0xffff",)
    write_node(root, specs)
    shutil.rmtree(os.path.join(root, VERBS_CLASS, "uverbs1"))
    recording = Recording()
    procfs = write_procfs(tmp_path / "proc")
    live = collect(root, procfs, {"sysfs"}, {"path": str(tmp_path / "none")}, recording=recording)
    report = grade(live, load_registry(), TH, "quick")
    path = write_bundle(live, report, recording, str(tmp_path / "out"), tarball=True)
    with open_bundle(path) as opened:
        assert opened.problems == []
        replayed = replay(opened)
    assert_same_snapshot(replayed, live)
    assert replayed.facts == live.facts and replayed.devices[1].ports[0].facts["pkeys"].texts() == [
        "0xffff"
    ]
    again = grade(replayed, load_registry(), TH, "quick")
    wanted = ("partition.pkeys", "hca.char_devices", "sm.address")
    assert _statuses(again, *wanted) == _statuses(report, *wanted)
    assert _statuses(report, *wanted)[("partition.pkeys", "mlx5_1:1")] == "fail"
    assert _statuses(report, *wanted)[("hca.char_devices", "mlx5_1")] == "fail"
