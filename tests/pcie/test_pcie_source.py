"""The PCIe path from sysfs (ibdiag/sources/pcie.py): the HCA's function and bridges, the
kernel's multi-line AER files, the IOMMU group and its type, through the run's SysfsReader."""

from __future__ import annotations

import os

import pytest
from pcie_tree import aer_text, behind_switch, bridges_of, switch_of, write_gpu, write_path
from sysfs_builder import mlx5_node, write_node

from ibdiag.facts.pcie import GpuPaths, PciePath, between
from ibdiag.sources import pcie
from ibdiag.sources.sysfs import SysfsReader, read_devices
from ibdiag.sources.topology import read_gpu_paths, read_nvidia_gpus


def _tree(tmp_path, count=1, **path):
    root = str(tmp_path / "sys")
    hcas = behind_switch(mlx5_node(count))
    write_node(root, hcas)
    for hca in hcas:
        write_path(root, hca, **path)
    return root, hcas


def _path(root, name="mlx5_0") -> PciePath:
    devices, _ = read_devices(SysfsReader(root))
    found = {dev.name: dev for dev in devices}[name].facts["pcie_path"]
    assert isinstance(found, PciePath)
    return found


def test_the_function_and_every_bridge_above_it_nearest_first(tmp_path):
    root, hcas = _tree(tmp_path)
    found = _path(root)
    assert found.function.bdf == "0000:12:00.0" and found.function.kind == "hca"
    assert [b.bdf for b in found.bridges] == ["0000:11:00.0", "0000:10:00.0", "0000:00:01.0"]
    assert found.path() == [*bridges_of(hcas[0].pci_address), "0000:12:00.0"]
    assert found.root == "pci0000:00" and found.problems == []
    assert all(b.kind == "bridge" and b.iommu_type is None for b in found.bridges)


def test_aer_counts_per_name_and_the_total(tmp_path):
    counts = {
        "0000:11:00.0": {"nonfatal": {"CmpltTO": 2}, "correctable": {"RxErr": 5, "BadTLP": 1}}
    }
    root, _ = _tree(tmp_path, aer=counts)
    found = _path(root)
    bridge = found.bridges[0]
    assert bridge.total("nonfatal") == 2 and bridge.aer["nonfatal"]["CmpltTO"] == 2
    assert bridge.total("correctable") == 6 and bridge.aer["correctable"]["BadTLP"] == 1
    assert bridge.total("fatal") == 0
    assert found.function.total("fatal") == 0 and found.function.aer_unavailable is None


def test_iommu_group_and_type(tmp_path):
    root, _ = _tree(tmp_path, group=17, group_type="DMA-FQ")
    function = _path(root).function
    assert (function.iommu_group, function.iommu_type) == ("17", "DMA-FQ")


def test_no_aer_files_and_no_iommu_are_not_available_not_problems(tmp_path):
    root, hcas = _tree(tmp_path)
    hca_dir = os.path.join(root, "devices", "pci0000:00", *hcas[0].pci_address.split("/"))
    for name in ("aer_dev_correctable", "aer_dev_nonfatal", "aer_dev_fatal", "iommu_group"):
        os.remove(os.path.join(hca_dir, name))
    function = _path(root).function
    assert function.aer == {} and function.aer_unavailable == pcie.NO_AER
    assert function.iommu_group is None and function.problems == []


def test_a_kernel_without_the_type_file(tmp_path):
    root, _ = _tree(tmp_path, group_type=None)
    function = _path(root).function
    assert function.iommu_group == "40" and function.iommu_type is None
    assert function.problems == []


@pytest.mark.parametrize(
    "text, why",
    [
        ("RxErr 0\nBadTLP 0", "no TOTAL_ERR_COR line"),
        ("RxErr zero\nTOTAL_ERR_COR 0", "not '<name> <count>'"),
        ("RxErr -1\nTOTAL_ERR_COR 0", "not '<name> <count>'"),
        ("garbage", "not '<name> <count>'"),
        ("X 1\n" * 70 + "TOTAL_ERR_COR 0", "lines, not the kernel's"),
    ],
)
def test_garbage_aer_is_a_problem_of_that_file(tmp_path, text, why):
    root, hcas = _tree(tmp_path)
    hca_dir = os.path.join(root, "devices", "pci0000:00", *hcas[0].pci_address.split("/"))
    with open(os.path.join(hca_dir, "aer_dev_correctable"), "w") as handle:
        handle.write(text + "\n")
    function = _path(root).function
    assert "correctable" not in function.aer and function.total("fatal") == 0
    assert len(function.problems) == 1 and why in function.problems[0]
    assert function.problems[0].startswith("aer_dev_correctable: ")


def test_parse_aer_reads_the_kernels_text():
    counts, why = pcie.parse_aer(aer_text("fatal", DLP=1, MalfTLP=2), "TOTAL_ERR_FATAL")
    assert why is None and counts["TOTAL"] == 3 and counts["DLP"] == 1 and counts["MalfTLP"] == 2


def test_garbage_iommu_type_is_a_problem(tmp_path):
    root, _ = _tree(tmp_path, group_type="not a type!")
    function = _path(root).function
    assert function.iommu_type is None and "not a domain type" in function.problems[0]


def test_a_device_without_pci_function_has_no_path(tmp_path):
    root, _ = _tree(tmp_path)
    os.remove(os.path.join(root, "class", "infiniband", "mlx5_0", "device"))
    devices, _ = read_devices(SysfsReader(root))
    assert "pcie_path" not in devices[0].facts


def test_gpus_under_the_hcas_switch_and_the_bridges_between(tmp_path):
    root, hcas = _tree(tmp_path)
    down = write_gpu(root, switch_of(hcas[0]), "0000:13:00.0", group_type="DMA")
    reader = SysfsReader(root)
    problems: dict = {}
    gpus = read_nvidia_gpus(reader, problems)
    assert [g.address for g in gpus] == ["0000:13:00.0"]
    found = read_gpu_paths(reader, gpus)["pcie_gpus"]
    assert isinstance(found, GpuPaths)
    gpu = found.gpus[0]
    assert gpu.function.kind == "gpu" and gpu.function.iommu_type == "DMA"
    assert gpu.path() == [*down.split("/"), "0000:13:00.0"]
    assert between(_path(root), gpu) == ["0000:11:00.0", "0000:12:01.0"]
    assert read_gpu_paths(reader, []) == {}


def test_reads_stay_inside_the_root(tmp_path):
    root, hcas = _tree(tmp_path)
    outside = tmp_path / "secret"
    outside.write_text("RxErr 0\nTOTAL_ERR_COR 0\n")
    hca_dir = os.path.join(root, "devices", "pci0000:00", *hcas[0].pci_address.split("/"))
    os.remove(os.path.join(hca_dir, "aer_dev_correctable"))
    os.symlink(str(outside), os.path.join(hca_dir, "aer_dev_correctable"))
    function = _path(root).function
    assert "correctable" not in function.aer and "refused" in function.problems[0]
