"""docs/architecture.md's worked example is real: a new command family is two files.

The test takes the two files from the page as written (the fenced blocks that start with
``# file: PATH``), puts the family where ``ibdiag.families`` finds families and the check in a
checks directory, and runs ``ibdiag check --level standard`` and ``ibdiag collect`` +
``ibdiag report`` on a node whose ``rdma`` prints what iproute2 prints: the family is
planned, run under the one runner with its role, parsed into its fact, graded by the check,
written into the report and the bundle, and read back from both. No other file changes.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pytest
from conftest import REPO
from sysfs_builder import mlx5_node, write_node

from ibdiag import families

PAGE = Path(REPO) / "docs" / "architecture.md"
_BLOCK = re.compile(r"```python\n# file: (?P<path>\S+)\n(?P<code>.*?)```", re.S)

# What `rdma -j link show` prints (iproute2 rdma/link.c: one JSON object per port; the
# second port here is down, which the check must flag).
RDMA_JSON = (
    '[{"ifindex":1,"ifname":"mlx5_0","port":1,"state":"ACTIVE","physical_state":"LINK_UP",'
    '"netdev":"ib0","netdev_index":4},{"ifindex":2,"ifname":"mlx5_1","port":1,"state":"DOWN",'
    '"physical_state":"POLLING"}]'
)


def example_files():
    files = {match["path"]: match["code"] for match in _BLOCK.finditer(PAGE.read_text())}
    assert set(files) == {"ibdiag/families/rdma_link.py", "checks/rdma_link.py"}, set(files)
    return files


@pytest.fixture
def example(tmp_path, monkeypatch):
    """The page's family and check in place, a node, and an ``rdma`` on PATH."""
    files = example_files()
    (tmp_path / "families").mkdir()
    (tmp_path / "families" / "rdma_link.py").write_text(files["ibdiag/families/rdma_link.py"])
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "rdma_link.py").write_text(files["checks/rdma_link.py"])
    monkeypatch.setattr(families, "__path__", [*families.__path__, str(tmp_path / "families")])
    families.families.cache_clear()
    write_node(str(tmp_path / "sys"), mlx5_node(2))
    proc = tmp_path / "proc" / "sys" / "kernel"
    proc.mkdir(parents=True)
    (proc / "hostname").write_text("node7\n")
    tool = tmp_path / "bin" / "rdma"
    tool.parent.mkdir()
    tool.write_text(f'#!/bin/sh\n[ "$*" = "-j link show" ] || exit 9\necho \'{RDMA_JSON}\'\n')
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    yield tmp_path
    families.families.cache_clear()


def _check(run_cli, node, *extra, path=None):
    env = {"PATH": path or f"{node / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    common = ["--sysfs", str(node / "sys"), "--procfs", str(node / "proc")]
    return run_cli(*extra, *common, "--checks-dir", str(node / "checks"), env=env)


def test_a_new_family_and_its_check_are_planned_run_parsed_and_graded(run_cli, example):
    result = _check(run_cli, example, "check", "--level", "standard", "--json")
    report = json.loads(result.stdout)
    run = report["snapshot"]["commands"]["rdma_link rdma"]
    assert run["argv"] == ["rdma", "-j", "link", "show"] and run["rc"] == 0
    fact = report["snapshot"]["facts"]["rdma_link"]
    assert [link["state"] for link in fact["links"]] == ["ACTIVE", "DOWN"]
    assert fact["run"]["no_data"] is None
    graded = {r["target"]: r for r in report["results"] if r["check_id"] == "rdma.link"}
    assert graded["mlx5_0:1"]["status"] == "pass"
    assert graded["mlx5_1:1"]["status"] == "warn"
    assert graded["mlx5_1:1"]["message"] == "rdma says DOWN, sysfs says ACTIVE"
    assert graded["mlx5_1:1"]["evidence"] == ["rdma -j link show"]


def test_why_the_family_gave_no_data_reaches_its_check(run_cli, example):
    (example / "bin" / "rdma").unlink()  # not installed: nothing on PATH at all
    result = _check(
        run_cli, example, "check", "--level", "standard", "--json", path=str(example / "bin")
    )
    report = json.loads(result.stdout)
    fact = report["snapshot"]["facts"]["rdma_link"]
    assert fact["run"]["no_data"] == "not-installed" and fact["links"] == []
    [skip] = [r for r in report["results"] if r["check_id"] == "rdma.link"]
    assert skip["status"] == "skip" and skip["message"] == (
        "rdma is not installed (not found on PATH)"
    )


def test_the_family_is_in_the_bundle_and_replays_to_the_same_fact(run_cli, example):
    out = example / "out"
    result = _check(run_cli, example, "collect", "--level", "standard", "-o", str(out))
    assert result.exit_code in (0, 1), result.output
    [bundle] = [
        line.split(" ", 1)[1] for line in result.stdout.splitlines() if line.startswith("bundle: ")
    ]
    live = json.loads(Path(bundle, "report.json").read_text())
    again = run_cli("report", bundle, "--checks-dir", str(example / "checks"), "--json")
    replayed = json.loads(again.stdout)
    assert replayed["snapshot"]["facts"] == live["snapshot"]["facts"]
    assert live["snapshot"]["facts"]["rdma_link"]["links"][1]["physical_state"] == "POLLING"
    assert [r for r in replayed["results"] if r["check_id"] == "rdma.link"] == [
        r for r in live["results"] if r["check_id"] == "rdma.link"
    ]


def test_a_fact_no_family_declares_is_refused_when_read_back():
    from pydantic import ValidationError

    from ibdiag.model import Snapshot

    data = {"tool_version": "x", "collected_at": "2026-01-01T00:00:00Z", "sysfs_root": "/sys",
            "procfs_root": "/proc", "facts": {"nobody": {"a": 1}}}  # fmt: skip
    with pytest.raises(ValidationError, match="no command family has a fact named 'nobody'"):
        Snapshot.model_validate(data)
