"""The PCIe path in a support bundle: the links the walk up the bridges resolved and the AER /
IOMMU files are recorded, replay into the same facts, and ``ibdiag report BUNDLE`` regrades
pci.aer and pci.iommu as the live run graded (a non-fatal error on mlx5_1's switch port)."""

from __future__ import annotations

import json

from pcie_tree import behind_switch, write_path
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

CHECKS = ("pci.aer", "pci.iommu")


def test_a_bundle_replays_the_pcie_path_and_report_regrades_it(tmp_path, run_cli):
    sysfs = str(tmp_path / "sys")
    hcas = behind_switch(mlx5_node(2))
    write_node(sysfs, hcas)
    write_path(sysfs, hcas[0], group_type="DMA")
    write_path(sysfs, hcas[1], group=41, aer={"0000:21:00.0": {"nonfatal": {"CmpltTO": 3}}})
    procfs = write_procfs(tmp_path / "proc")
    recording = Recording()
    live = collect(sysfs, procfs, {"sysfs"}, recording=recording)
    path = live.device("mlx5_1").facts["pcie_path"]
    assert [b.bdf for b in path.bridges] == ["0000:21:00.0", "0000:20:00.0", "0000:00:02.0"]
    report = grade(live, load_registry(), Thresholds(), "quick")
    graded = {(r.check_id, r.target): (r.status.value, r.message) for r in report.results
              if r.check_id in CHECKS}  # fmt: skip
    assert graded[("pci.aer", "mlx5_1")][0] == "warn"
    assert "bridge 0000:21:00.0 above it" in graded[("pci.aer", "mlx5_1")][1]
    assert "is DMA" in graded[("pci.iommu", "mlx5_0")][1]
    bundle = write_bundle(live, report, recording, str(tmp_path / "out"), tarball=True)
    with open_bundle(bundle) as opened:
        assert opened.problems == []
        replayed = replay(opened)
    assert_same_snapshot(replayed, live)
    result = run_cli("report", bundle, "--format", "json")
    regraded = json.loads(result.stdout)
    again = {(r["check_id"], r["target"]): (r["status"], r["message"]) for r in regraded["results"]
             if r["check_id"] in CHECKS}  # fmt: skip
    assert again == graded
