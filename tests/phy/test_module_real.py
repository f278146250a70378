"""The real ``mstlink`` (Debian's mstflint, which .ci/run installs) on a machine with no HCA of
these names: it fails in its own way, ibdiag records why (``no-device``) and phy.ber/phy.optics
skip with that reason - never a failure, a hang or a traceback. Missing mstlink FAILS these
tests (never a skip): CI must prove this path.

What mstflint 4.21.0 (Debian 12) prints for ``mstlink -d mlx5_0 -p 1 -m -c --json`` without
the device, exit 1 (tests/captures/mlxlink/mstlink-4.21-no-device.*): on stdout two ANSI colour
escapes; on stderr ``read link: No such file or directory`` / ``Unable to read link
/sys/class/infiniband/mlx5_0/device`` / ``-E- Failed to open device: "mlx5_0", Invalid
argument``."""

from __future__ import annotations

import os
import shutil

import pytest
from stubs import write_procfs
from sysfs_builder import mlx5_node, write_node

from ibdiag.collect import collect
from ibdiag.facts.module import MLXLINK, MSTLINK, module_role
from ibdiag.facts.outcome import NoData
from ibdiag.families import module as family
from ibdiag.grade import grade
from ibdiag.model import CommandRun
from ibdiag.registry import load_registry
from ibdiag.runner.command_runner import Runner
from ibdiag.thresholds import Thresholds

_DIRS = [*os.environ.get("PATH", os.defpath).split(os.pathsep), "/usr/sbin", "/sbin", "/usr/bin"]
TOOLS_PATH = os.pathsep.join(dict.fromkeys(d for d in _DIRS if d))


def real_mstlink() -> str:
    found = shutil.which("mstlink", path=TOOLS_PATH)
    if found is None:
        pytest.fail("mstlink is not installed (Debian package mstflint: apt-get install -y "
                    "mstflint; .ci/run does this); this test must not be skipped",
                    pytrace=False)  # fmt: skip
    return found


def test_real_mstlink_without_the_device_is_no_device():
    real_mstlink()
    run = Runner(timeout_s=20, deadline_s=60, path=TOOLS_PATH).run(
        family.argv(MSTLINK, "mlx5_90", 1), module_role(MSTLINK, "mlx5_90:1")
    )
    context = f"rc={run.rc} stdout={run.stdout!r} stderr={run.stderr!r}"
    assert run.rc not in (None, 0) and not run.timed_out and not run.not_found, context
    assert "Failed to open device" in run.stderr, context
    assert run.duration_s < 20, context
    absent = CommandRun(argv=family.argv(MLXLINK, "mlx5_90", 1),
                        role=module_role(MLXLINK, "mlx5_90:1"), not_found=True)  # fmt: skip
    found = family.reading(absent, run)
    assert found.outcome.no_data == NoData.NO_DEVICE, context
    assert "Failed to open device" in (found.outcome.reason or ""), context


def test_standard_level_with_the_real_mstlink_skips_with_the_reason(tmp_path):
    where = real_mstlink()
    sysfs = str(tmp_path / "sys")
    write_node(sysfs, mlx5_node(2))
    tools = tmp_path / "bin"  # mstlink only: no mlxlink, so the fallback runs
    tools.mkdir()
    os.symlink(where, tools / "mstlink")
    options = {"path": str(tools), "timeout_s": 20.0, "deadline_s": 60.0}
    live = collect(sysfs, write_procfs(tmp_path / "proc"), {"sysfs", "module"}, options)
    report = grade(live, load_registry(), Thresholds(), "standard")
    results = [r for r in report.results if r.check_id in ("phy.ber", "phy.optics")]
    assert len(results) == 4, results
    for result in results:
        assert result.status.value == "skip", result
        assert "mstlink cannot open the device from here" in result.message, result
        assert "Traceback" not in result.message
    runs = {str(r.role): r for r in live.commands.values()}
    assert runs["module-mlxlink mlx5_0:1"].not_found
    assert runs["module-mstlink mlx5_0:1"].rc not in (None, 0)
