"""``ibdiag collect`` with the support catalogue on an 8-HCA, 8-GPU node (tests/support_node.py),
end to end as a separate process, in the four ways a node's tools can behave (issue 26).

Healthy: whatever the tools do, collect writes a bundle within its deadline and says, item by
item and target by target, what it got: every item collected where every tool answers;
``timed out`` or ``not started`` where every tool hangs, with no process left behind;
``absent`` where none is installed (exit 0: a node without MFT or OFED is a normal node); and a
tool that floods its output is cut at the runner's cap, the cut recorded, the bundle written.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

import pytest
import stubs as S
from standard_node import COMMAND_TIMEOUT, DEADLINE, SLACK_SUBPROCESS
from support_node import DMI, SupportNode

from ibdiag.families.support.catalogue import load

pytestmark = pytest.mark.slow


class Collected:
    """One ``collect`` run: its exit, wall time, bundle, report and manifest."""

    def __init__(self, node: SupportNode, out: str, *args: str) -> None:
        argv = [sys.executable, "-m", "ibdiag", *node.argv(*args, out=out)]
        started = time.monotonic()
        proc = subprocess.run(
            argv, env=node.env(), capture_output=True, text=True, timeout=300,
            stdin=subprocess.DEVNULL, cwd=S.REPO,
        )  # fmt: skip
        self.wall = time.monotonic() - started
        self.code = proc.returncode
        self.context = f"exit {proc.returncode} after {self.wall:.1f} s\n{proc.stderr[-3000:]}"
        assert "Traceback" not in proc.stderr, self.context
        made = glob.glob(os.path.join(out, "ibdiag-*"))
        assert len(made) == 1, self.context
        self.bundle = made[0]
        with open(os.path.join(self.bundle, "report.json")) as handle:
            self.report = json.load(handle)
        with open(os.path.join(self.bundle, "manifest.json")) as handle:
            self.manifest = json.load(handle)
        facts = self.report["snapshot"]["facts"]
        self.rows: List[dict] = facts["support"]["rows"]
        self.file_rows: List[dict] = facts["support_files"]["rows"]

    def command_rows(self) -> Dict[Tuple[str, str], dict]:
        """The rows of the catalogue's command items, by (item, target)."""
        ids = {item.id for item in load().of_kind("command")}
        return {(r["item"], r["target"]): r for r in self.rows if r["item"] in ids}

    def show(self, rows: Optional[List[dict]] = None) -> str:
        lines = [
            f"{r['item']:20} {r['target']:14} {r['status']:14} {r.get('reason')}"
            for r in (self.rows if rows is None else rows)
        ]
        return "\n".join([self.context, *lines])


@pytest.fixture
def node(tmp_path) -> SupportNode:
    return SupportNode(tmp_path / "node")


def expected_targets(node: SupportNode) -> Dict[str, List[str]]:
    """Each command item's targets on this node (empty: not applicable, no Ethernet port)."""
    by_per = {
        "node": [""],
        "gpus": [""],
        "hca": [hca.name for hca in node.hcas],
        "pcie_path": node.pcie_functions,
        "netdev": node.netdevs,
        "ethernet_netdev": [],
        "active_ib_port": [f"{hca.name}:1" for hca in node.hcas],
    }
    return {item.id: by_per[item.per or ""] for item in load().of_kind("command")}


def test_every_item_is_collected_on_every_target_when_every_tool_answers(node, tmp_path):
    run = Collected(node, str(tmp_path / "out"))
    assert run.code in (0, 1, 2), run.context  # the verdict's: the dmesg capture has findings
    rows = run.command_rows()
    for item, targets in expected_targets(node).items():
        if not targets:
            assert rows[(item, "")]["status"] == "not applicable", run.show()
            continue
        got = sorted(target for (name, target) in rows if name == item)
        assert got == sorted(targets), (item, got)
        for target in targets:
            row = rows[(item, target)]
            assert row["status"] == "collected", run.show([row])
            assert row["size"] and row["size"] > 0, row
    assert len(node.pcie_functions) == 32 and len(node.gpus) == 8  # the node is what it says
    families = [r for r in run.rows if r["item"] in {i.id for i in load().of_kind("family")}]
    assert families and all(r["status"] == "collected" for r in families), run.show(families)
    files = {r["item"]: r["status"] for r in run.file_rows}
    assert files.pop("opensm_config") == "absent"  # this node runs no subnet manager
    assert set(files.values()) == {"collected"}, run.show(run.file_rows)
    listed = {(r["item"], r["target"]): r["status"] for r in run.manifest["items"]}
    assert listed == {(r["item"], r["target"]): r["status"] for r in run.rows + run.file_rows}
    assert all(not c["timed_out"] and not c["not_found"] for c in run.manifest["commands"])
    support_files = run.report["snapshot"]["facts"]["support_files"]
    assert support_files["platform"] == DMI  # every DMI file the catalogue names, by its name


def test_every_tool_hanging_ends_within_the_deadline_and_leaves_no_process(node, tmp_path):
    mark = S.marker()
    node.hang_all(mark)
    run = Collected(
        node, str(tmp_path / "out"),
        "--deadline", str(DEADLINE), "--command-timeout", str(COMMAND_TIMEOUT),
    )  # fmt: skip
    try:
        assert run.wall <= DEADLINE + SLACK_SUBPROCESS, run.context
        rows = run.command_rows()
        applicable = {k: r for k, r in rows.items() if r["status"] != "not applicable"}
        assert len(applicable) == sum(len(t) for t in expected_targets(node).values())
        statuses = {r["status"] for r in applicable.values()}
        assert statuses <= {"timed out", "not started"}, run.show(list(applicable.values()))
        assert "timed out" in statuses
        commands = run.manifest["commands"]
        assert commands and all(c["timed_out"] or c["skipped"] for c in commands), commands
        assert os.path.isfile(os.path.join(run.bundle, "report.html"))
    finally:
        S.assert_no_strays(mark)


def test_no_tool_installed_is_a_bundle_of_absent_rows_and_exit_0(node, tmp_path):
    node.absent_all()
    assert os.listdir(node.stubs.path) == []
    run = Collected(node, str(tmp_path / "out"))
    assert run.code == 0, run.context
    rows = run.command_rows()
    applicable = [r for r in rows.values() if r["status"] != "not applicable"]
    assert len(applicable) == sum(len(t) for t in expected_targets(node).values())
    assert {r["status"] for r in applicable} == {"absent"}, run.show(applicable)
    commands = run.manifest["commands"]
    support = [c for c in commands if str(c["role"]).startswith("support-")]
    assert support and all(c["not_found"] for c in support), support
    # The checks' own commands too; a far-end step after a first one that found no smpquery is
    # not run at all, and says why.
    others = [c for c in commands if c not in support]
    assert others and all(
        c["not_found"] or "not installed" in (c["skipped"] or "") for c in others
    ), others
    keys = {c["key"] for c in support}
    assert "support-modinfo" in keys and "support-mstflint_query mlx5_7" in keys, keys
    assert "support-mstflint_query-fallback mlx5_7" in keys  # flint was looked for too


def test_a_tool_printing_50_mb_is_cut_at_the_cap_and_the_bundle_written(node, tmp_path):
    node.floods("modinfo", 50)
    run = Collected(node, str(tmp_path / "out"))
    assert run.code in (0, 1, 2), run.context
    entry = next(c for c in run.manifest["commands"] if c["key"] == "support-modinfo")
    assert entry["stdout_truncated"] is True and entry["rc"] == 0, entry
    stored = os.path.getsize(os.path.join(run.bundle, entry["stdout_file"]))
    assert 0 < stored <= 2 << 20, stored  # the runner's 1 MiB per stream, not 50 MB
    bundle_bytes = sum(
        os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(run.bundle) for f in fs
    )
    assert bundle_bytes < 30 << 20, bundle_bytes
    others = [r for r in run.command_rows().values() if r["item"] != "modinfo"]
    assert {r["status"] for r in others} <= {"collected", "not applicable"}, run.show(others)
