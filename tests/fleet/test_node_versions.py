"""The kernel release and the driver stack's versions a node reports (``Snapshot.kernel_release``,
``Snapshot.driver_versions``): what ``ibdiag fleet report`` compares across nodes for drift.
Read from real files (a temporary sysfs/procfs), recorded in bundles and replayed the same."""

from __future__ import annotations

import os
import shutil

import pytest
from conftest import scenario_sysfs
from snapshots import report_for
from stubs import write_procfs

from ibdiag.bundle.opener import open_bundle
from ibdiag.bundle.replay import replay
from ibdiag.bundle.write import write_bundle
from ibdiag.collect import collect
from ibdiag.sources import drivers, procfs
from ibdiag.sources.sysfs import Recording, SysfsReader

GOOD = "gcm-8xCX6-HDR-good"


def write(root, rel: str, text: str) -> None:
    path = os.path.join(str(root), rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


def test_module_versions_with_srcversion_standing_in_for_inbox_drivers(tmp_path):
    write(tmp_path, "module/mlx5_core/version", "24.10-1.1.4\n")
    write(tmp_path, "module/mlx5_core/srcversion", "ABCDEF0123456789\n")
    write(tmp_path, "module/ib_core/srcversion", "1F2E3D4C5B6A\n")  # inbox: no version file
    write(tmp_path, "module/ib_uverbs/version", "\n")  # empty: its srcversion is not there
    os.makedirs(tmp_path / "module" / "nfs")  # not one of ours
    problems = {}
    found = drivers.read_driver_versions(SysfsReader(str(tmp_path)), problems)
    assert found == {"mlx5_core": "24.10-1.1.4", "ib_core": "srcversion:1F2E3D4C5B6A"}
    assert problems == {}


def test_an_unreadable_version_is_a_problem_and_hostile_text_is_escaped(tmp_path):
    os.makedirs(tmp_path / "module" / "mlx5_core" / "version")  # a directory, not a file
    write(tmp_path, "module/mlx5_ib/version", "5.8\x1b[31m" + "x" * 200 + "\n")
    problems = {}
    found = drivers.read_driver_versions(SysfsReader(str(tmp_path)), problems)
    assert "mlx5_core" not in found and "module/mlx5_core/version" in problems
    assert "\x1b" not in found["mlx5_ib"] and found["mlx5_ib"].startswith("5.8")
    assert len(found["mlx5_ib"]) < 100


def test_kernel_release_read_or_absent_or_a_problem(tmp_path):
    write(tmp_path / "a", "sys/kernel/osrelease", "5.15.0-1068-azure\n")
    problems = {}
    assert procfs.read_kernel_release(str(tmp_path / "a"), problems) == "5.15.0-1068-azure"
    assert procfs.read_kernel_release(str(tmp_path / "b"), problems) is None  # not recorded
    assert problems == {}
    os.makedirs(tmp_path / "c" / "sys" / "kernel" / "osrelease")
    assert procfs.read_kernel_release(str(tmp_path / "c"), problems) is None
    assert "procfs:sys/kernel/osrelease" in problems


@pytest.mark.parametrize("tarball", [False, True], ids=["dir", "tar"])
def test_a_bundle_records_and_replays_them(tmp_path, tarball):
    sys_root = tmp_path / "sys"
    shutil.copytree(scenario_sysfs(GOOD), sys_root, symlinks=True)
    write(sys_root, "module/mlx5_core/version", "24.10-1.1.4\n")
    write(sys_root, "module/ib_core/srcversion", "1F2E3D4C5B6A\n")
    proc_root = write_procfs(tmp_path / "proc")
    write(proc_root, "sys/kernel/osrelease", "5.15.0-1068-azure\n")
    recording = Recording()
    live = collect(str(sys_root), proc_root, {"sysfs"}, recording=recording)
    assert live.kernel_release == "5.15.0-1068-azure"
    assert live.driver_versions == {
        "mlx5_core": "24.10-1.1.4",
        "ib_core": "srcversion:1F2E3D4C5B6A",
    }
    path = write_bundle(live, report_for(live), recording, str(tmp_path / "out"), tarball=tarball)
    with open_bundle(path) as opened:
        replayed = replay(opened)
    assert replayed.kernel_release == live.kernel_release
    assert replayed.driver_versions == live.driver_versions
    assert replayed.problems == live.problems
