"""The PCIe path's Prometheus families (checked by promtool) and HTML rows, from a graded node
built by tests/pcie_tree.py: a non-fatal error on mlx5_0's switch port, a GPU in a DMA domain."""

from __future__ import annotations

from pcie_tree import behind_switch, switch_of, write_gpu, write_path
from prometheus_text import parse, promtool_check
from stubs import write_procfs
from sysfs_builder import mlx5_node, write_node

from ibdiag.collect import collect
from ibdiag.grade import grade
from ibdiag.registry import load_registry
from ibdiag.render.html_pci import pci_rows
from ibdiag.render.prometheus import _Exposition
from ibdiag.render.prometheus_pci import add_pci
from ibdiag.sources.sysfs import SysfsReader
from ibdiag.sources.topology import read_gpu_paths, read_nvidia_gpus
from ibdiag.thresholds import Thresholds


def _report(tmp_path):
    sysfs = str(tmp_path / "sys")
    hcas = behind_switch(mlx5_node(1))
    write_node(sysfs, hcas)
    write_path(sysfs, hcas[0], aer={"0000:11:00.0": {"nonfatal": {"CmpltTO": 2}}})
    write_gpu(sysfs, switch_of(hcas[0]), "0000:13:00.0", group=81, group_type="DMA")
    snap = collect(sysfs, write_procfs(tmp_path / "proc"), {"sysfs"})
    reader = SysfsReader(sysfs)
    gpus = read_gpu_paths(reader, read_nvidia_gpus(reader, {}))
    snap = snap.model_copy(update={"facts": gpus})
    return grade(snap, load_registry(), Thresholds(), "quick")


def test_aer_totals_and_iommu_info_are_samples_promtool_accepts(tmp_path):
    exposition = _Exposition()
    add_pci(exposition.family, _report(tmp_path))
    text = exposition.text()
    promtool_check(text)
    values = parse(text)
    bridge = (("device", "mlx5_0"), ("function", "bridge"), ("bdf", "0000:11:00.0"))
    assert values[("ibdiag_pcie_aer_errors_total", (*bridge, ("severity", "nonfatal")))] == 2
    hca = (("device", "mlx5_0"), ("function", "hca"), ("bdf", "0000:12:00.0"))
    assert values[("ibdiag_pcie_aer_errors_total", (*hca, ("severity", "fatal")))] == 0
    gpu = (("device", "gpu"), ("bdf", "0000:13:00.0"), ("group", "81"), ("type", "DMA"))
    assert values[("ibdiag_pcie_iommu_info", gpu)] == 1
    mine = (("device", "mlx5_0"), ("bdf", "0000:12:00.0"), ("group", "40"), ("type", "identity"))
    assert values[("ibdiag_pcie_iommu_info", mine)] == 1


def test_html_rows_name_the_path_the_bridge_and_the_domain(tmp_path):
    rows = {row["target"]: row for row in pci_rows(_report(tmp_path))}
    hca = rows["mlx5_0"]
    assert hca["path"] == "0000:00:01.0 > 0000:10:00.0 > 0000:11:00.0 > 0000:12:00.0"
    assert hca["aer"].endswith("correctable 0, nonfatal 2, fatal 0 (bridge 0000:11:00.0)")
    assert hca["iommu"] == "group 40: identity" and hca["status"] == "warn"
    assert any("bridge 0000:11:00.0" in text for text in hca["findings"])
    assert rows["gpu@0000:13:00.0"]["iommu"] == "group 81: DMA"
