"""pci.aer, pci.iommu and pci.acs on PCIe paths read from fake sysfs trees (tests/pcie_tree.py)
and on typed facts: each fails or warns its planted fault naming the HCA and the bridge, passes
healthy trees, skips without data."""

from __future__ import annotations

import datetime
import os

from pcie_tree import behind_switch, switch_of, write_aer, write_gpu, write_path
from stubs import write_procfs
from sysfs_builder import mlx5_node, write_node

import checks.pci_path as pci_path
from ibdiag.collect import collect
from ibdiag.facts.lspci import BridgeAcs, LspciAcs
from ibdiag.facts.outcome import NoData, RunOutcome
from ibdiag.families import lspci as lspci_family
from ibdiag.model import Status
from ibdiag.sources.sysfs import SysfsReader
from ibdiag.sources.topology import read_gpu_paths, read_nvidia_gpus
from ibdiag.thresholds import Thresholds

TH = Thresholds()


def _node(tmp_path, count=2, **path):
    root = str(tmp_path / "sys")
    hcas = behind_switch(mlx5_node(count))
    write_node(root, hcas)
    for hca in hcas:
        write_path(root, hca, **path)
    return root, write_procfs(tmp_path / "proc"), hcas


def _snap(root, proc, later_h=0.0, **updates):
    snap = collect(root, proc, {"sysfs"})
    when = snap.collected_at + datetime.timedelta(hours=later_h)
    return snap.model_copy(update={"collected_at": when, **updates})


def _dir(root, hca, depth=None):
    parts = hca.pci_address.split("/")
    return os.path.join(root, "devices", "pci0000:00", *parts[: depth or len(parts)])


def _by_target(results):
    return {r.target: r for r in results}


def test_aer_passes_a_clean_path_with_and_without_baseline(tmp_path):
    root, proc, _ = _node(tmp_path)
    base = _snap(root, proc)
    now = _snap(root, proc, later_h=1)
    for results in (pci_path.pci_aer(now, TH, None), pci_path.pci_aer(now, TH, base)):
        found = _by_target(results)
        assert {r.status for r in found.values()} == {Status.PASS}, found
        assert "no AER errors" in found["mlx5_0"].message
    assert "since the baseline" in _by_target(pci_path.pci_aer(now, TH, base))["mlx5_0"].message


def test_a_nonfatal_increase_on_the_bridge_fails_naming_it(tmp_path):
    root, proc, hcas = _node(tmp_path)
    base = _snap(root, proc)
    write_aer(_dir(root, hcas[0], depth=3), {"nonfatal": {"CmpltTO": 2}})  # the switch port
    now = _snap(root, proc, later_h=1)
    found = _by_target(pci_path.pci_aer(now, TH, base))
    bad = found["mlx5_0"]
    assert bad.status == Status.FAIL
    assert "non-fatal +2 since the baseline on the bridge 0000:11:00.0 above it" in bad.message
    assert "CmpltTO +2" in bad.message
    assert found["mlx5_1"].status == Status.PASS


def test_a_fatal_increase_on_the_hca_fails_naming_it(tmp_path):
    root, proc, hcas = _node(tmp_path)
    base = _snap(root, proc)
    write_aer(_dir(root, hcas[1]), {"fatal": {"DLP": 1}})
    now = _snap(root, proc, later_h=1)
    bad = _by_target(pci_path.pci_aer(now, TH, base))["mlx5_1"]
    assert bad.status == Status.FAIL and "fatal +1" in bad.message
    assert "the HCA 0000:22:00.0" in bad.message


def test_correctable_rate_warns_above_the_limit_only(tmp_path):
    root, proc, hcas = _node(tmp_path)
    base = _snap(root, proc)
    write_aer(_dir(root, hcas[0]), {"correctable": {"RxErr": 100}})
    write_aer(_dir(root, hcas[1]), {"correctable": {"RxErr": 10}})
    now = _snap(root, proc, later_h=1)
    found = _by_target(pci_path.pci_aer(now, TH, base))
    assert found["mlx5_0"].status == Status.WARN and "100/h > 60/h" in found["mlx5_0"].message
    assert found["mlx5_1"].status == Status.PASS and "correctable +10" in found["mlx5_1"].message


def test_without_baseline_lifetime_uncorrectable_warns_since_boot(tmp_path):
    root, proc, _hcas = _node(tmp_path, aer={"0000:00:01.0": {"fatal": {"MalfTLP": 1}}})
    found = _by_target(pci_path.pci_aer(_snap(root, proc), TH, None))
    assert found["mlx5_0"].status == Status.WARN
    assert (
        "fatal 1 since boot on the bridge 0000:00:01.0 3 levels above it" in found["mlx5_0"].message
    )


def test_a_reboot_or_a_count_that_went_down_is_no_increase(tmp_path):
    root, proc, hcas = _node(tmp_path)
    write_aer(_dir(root, hcas[0]), {"nonfatal": {"CmpltTO": 5}})
    base = _snap(root, proc)
    write_aer(_dir(root, hcas[0]), {"nonfatal": {"CmpltTO": 1}})  # reset: went down
    now = _snap(root, proc, later_h=1)
    found = _by_target(pci_path.pci_aer(now, TH, base))["mlx5_0"]
    assert found.status == Status.WARN and "non-fatal 1 since boot" in found.message
    write_aer(_dir(root, hcas[0]), {"nonfatal": {"CmpltTO": 9}})
    rebooted = _snap(root, proc, later_h=2, boot_id="another-boot")
    found = _by_target(pci_path.pci_aer(rebooted, TH, base))["mlx5_0"]
    assert found.status == Status.WARN and "since boot" in found.message


def test_no_aer_statistics_is_a_skip_with_the_reason(tmp_path):
    root, proc, hcas = _node(tmp_path, count=1)
    for depth in range(1, 5):
        for name in ("aer_dev_correctable", "aer_dev_nonfatal", "aer_dev_fatal"):
            os.remove(os.path.join(_dir(root, hcas[0], depth), name))
    found = _by_target(pci_path.pci_aer(_snap(root, proc), TH, None))["mlx5_0"]
    assert found.status == Status.SKIP and "no AER statistics" in found.message


def test_a_snapshot_without_the_fact_is_a_skip(tmp_path):
    root, proc, _ = _node(tmp_path, count=1)
    snap = _snap(root, proc)
    bare = snap.model_copy(
        update={"devices": [d.model_copy(update={"facts": {}}) for d in snap.devices]}
    )
    for check in (lambda s: pci_path.pci_aer(s, TH, None), lambda s: pci_path.pci_iommu(s, TH)):
        assert [r.status for r in check(bare)] == [Status.SKIP]


class _Expect:
    """Thresholds plus the proposed ``expect_iommu`` setting (not in Thresholds yet)."""

    def __init__(self, expect):
        self.expect_iommu = expect

    def __getattr__(self, name):
        return getattr(TH, name)


def test_iommu_dma_warns_where_passthrough_is_expected(tmp_path):
    root, proc, _ = _node(tmp_path, group_type="DMA")
    snap = _snap(root, proc)
    found = _by_target(pci_path.pci_iommu(snap, _Expect("passthrough")))
    assert found["mlx5_0"].status == Status.WARN
    assert "IOMMU group 40 of 0000:12:00.0 is DMA, expected passthrough" in found["mlx5_0"].message
    assert (
        _by_target(pci_path.pci_iommu(snap, _Expect("translated")))["mlx5_0"].status == Status.PASS
    )
    reported = _by_target(pci_path.pci_iommu(snap, TH))["mlx5_0"]
    assert reported.status == Status.PASS and "is DMA" in reported.message


def test_iommu_identity_passes_passthrough_and_gpus_are_graded(tmp_path):
    root, proc, hcas = _node(tmp_path, count=1)
    write_gpu(root, switch_of(hcas[0]), "0000:13:00.0", group=81, group_type="DMA-FQ")
    snap = _snap(root, proc)
    reader = SysfsReader(root)
    gpus = read_gpu_paths(reader, read_nvidia_gpus(reader, {}))
    snap = snap.model_copy(update={"facts": gpus})
    found = _by_target(pci_path.pci_iommu(snap, _Expect("passthrough")))
    assert found["mlx5_0"].status == Status.PASS
    assert found["gpu@0000:13:00.0"].status == Status.WARN
    assert "DMA-FQ" in found["gpu@0000:13:00.0"].message


def test_iommu_off_and_no_type_file(tmp_path):
    root, proc, hcas = _node(tmp_path, count=1, group_type=None)
    found = _by_target(pci_path.pci_iommu(_snap(root, proc), _Expect("passthrough")))["mlx5_0"]
    assert found.status == Status.SKIP and "a kernel before 5.11" in found.message
    os.remove(os.path.join(_dir(root, hcas[0]), "iommu_group"))
    found = _by_target(pci_path.pci_iommu(_snap(root, proc), _Expect("passthrough")))["mlx5_0"]
    assert found.status == Status.PASS and "no IOMMU group" in found.message
    found = _by_target(pci_path.pci_iommu(_snap(root, proc), _Expect("translated")))["mlx5_0"]
    assert found.status == Status.WARN


# -- pci.acs --------------------------------------------------------------------------------


def _acs_node(tmp_path):
    root, proc, hcas = _node(tmp_path, count=2)
    write_gpu(root, switch_of(hcas[0]), "0000:13:00.0")  # beside mlx5_0 only
    snap = _snap(root, proc)
    reader = SysfsReader(root)
    gpus = read_gpu_paths(reader, read_nvidia_gpus(reader, {}))
    return snap.model_copy(update={"facts": gpus})


def _ok(bdf, **bits):
    ctl = {"SrcValid": False, "ReqRedir": False, "CmpltRedir": False, **bits}
    return BridgeAcs(
        bdf=bdf, outcome=RunOutcome(command=f"lspci -vvv -s {bdf}"), has_acs=True, acs_ctl=ctl
    )


def _with(snap, *bridges):
    found = LspciAcs(bridges={b.bdf: b for b in bridges})
    return snap.model_copy(update={"facts": {**snap.facts, "lspci_acs": found}})


def test_the_family_plans_the_bridges_between_gpu_and_hca(tmp_path):
    snap = _acs_node(tmp_path)
    planned = lspci_family.plan(snap)
    assert [p.argv for p in planned] == [
        ["lspci", "-vvv", "-s", "0000:11:00.0"],
        ["lspci", "-vvv", "-s", "0000:12:01.0"],
    ]


def test_acs_redirect_on_a_bridge_between_warns_naming_it(tmp_path):
    snap = _with(
        _acs_node(tmp_path),
        _ok("0000:11:00.0", ReqRedir=True, CmpltRedir=True),
        _ok("0000:12:01.0"),
    )
    found = _by_target(pci_path.pci_acs(snap, TH))
    bad = found["mlx5_0"]
    assert bad.status == Status.WARN
    assert "bridge 0000:11:00.0 between mlx5_0 (0000:12:00.0) and GPU 0000:13:00.0" in bad.message
    assert "ReqRedir+ CmpltRedir+" in bad.message
    assert found["mlx5_1"].status == Status.SKIP and "no GPU shares" in found["mlx5_1"].message


def test_acs_off_passes(tmp_path):
    snap = _with(_acs_node(tmp_path), _ok("0000:11:00.0"), _ok("0000:12:01.0"))
    assert _by_target(pci_path.pci_acs(snap, TH))["mlx5_0"].status == Status.PASS


def test_acs_denied_or_not_run_is_a_skip_with_the_reason(tmp_path):
    snap = _acs_node(tmp_path)
    denied = [
        BridgeAcs(bdf=b, outcome=RunOutcome(command="lspci"), denied=True)
        for b in ("0000:11:00.0", "0000:12:01.0")
    ]
    found = _by_target(pci_path.pci_acs(_with(snap, *denied), TH))["mlx5_0"]
    assert found.status == Status.SKIP and "access denied" in found.message
    missing = RunOutcome(
        command="lspci", no_data=NoData.NOT_INSTALLED, reason="lspci is not installed"
    )
    gone = [BridgeAcs(bdf=b, outcome=missing) for b in ("0000:11:00.0", "0000:12:01.0")]
    found = _by_target(pci_path.pci_acs(_with(snap, *gone), TH))["mlx5_0"]
    assert found.status == Status.SKIP and "not installed" in found.message


def test_acs_without_gpus_is_a_skip(tmp_path):
    root, proc, _ = _node(tmp_path, count=1)
    snap = _snap(root, proc)
    assert [r.status for r in pci_path.pci_acs(snap, TH)] == [Status.SKIP]
    empty = snap.model_copy(update={"facts": read_gpu_paths(SysfsReader(root), [])})
    assert [r.message for r in pci_path.pci_acs(empty, TH)] == ["GPU PCIe paths not collected"]
