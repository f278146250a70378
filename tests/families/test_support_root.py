"""Root-only catalogue items (``root = true``) when the collector is not root: the row says "no
permission" with the uid, from the collector's own /proc/self/status, recorded so that a replay
keeps the collector's uid; as root the same failure stays "failed"."""

from __future__ import annotations

from snapshots import device, pci, port, snapshot, with_runs

from ibdiag.facts.support import ItemStatus, SupportFiles
from ibdiag.families import Runs, support
from ibdiag.families.support.catalogue import load
from ibdiag.model import CommandRun
from ibdiag.sources.support_files import read_support_files
from ibdiag.sources.sysfs import SysfsReader

CANNOT_OPEN = "-E- Cannot open Device: 0000:08:00.0. No such file or directory. MFE_CR_ERROR\n"


def _rows(uid):
    snap = snapshot([device("mlx5_0", [port(1)], pci=pci("0000:08:00.0"))])
    files = SupportFiles(collector_uid=uid)
    snap = snap.model_copy(update={"facts": {**snap.facts, "support_files": files}})
    item = load().get("mstflint_query")
    run = CommandRun(
        argv=item.argv({"bdf": "0000:08:00.0", "hca": "mlx5_0"}), rc=1, stdout=CANNOT_OPEN,
        role=support.role(item, "mlx5_0"),
    )  # fmt: skip
    flint = CommandRun(argv=["flint"], not_found=True, role=support.role(item, "mlx5_0", True))
    inventory = support.interpret(with_runs(snap, run, flint), Runs({"a": run, "b": flint}))
    inventory = inventory.node["facts"]["support"]
    return {(row.item, row.target): row for row in inventory.rows}


def test_a_root_item_failing_when_not_root_is_no_permission_naming_the_uid():
    row = _rows(1000)[("mstflint_query", "mlx5_0")]
    assert row.status is ItemStatus.NO_PERMISSION
    assert row.reason.startswith("needs root (collected as uid 1000): mstflint exited 1")


def test_as_root_or_unknown_the_failure_stays_a_failure():
    for uid in (0, None):
        row = _rows(uid)[("mstflint_query", "mlx5_0")]
        assert row.status is ItemStatus.FAILED, uid
        assert row.reason.startswith("mstflint exited 1")


def test_a_non_root_item_failing_is_a_failure_whoever_collects():
    snap = snapshot([device("mlx5_0", [port(1)], pci=pci("0000:08:00.0"))])
    snap = snap.model_copy(update={"facts": {"support_files": SupportFiles(collector_uid=1000)}})
    item = load().get("ofed_info")
    run = CommandRun(argv=["ofed_info", "-s"], rc=2, stderr="broken", role=support.role(item, ""))
    inventory = support.interpret(snap, Runs({"a": run})).node["facts"]["support"]
    row = next(row for row in inventory.rows if row.item == "ofed_info")
    assert row.status is ItemStatus.FAILED


def test_the_collector_uid_is_read_from_proc_self_status(tmp_path):
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "status").write_text(
        "Name:\tibdiag\nState:\tR (running)\nUid:\t1000\t1001\t1000\t1000\nGid:\t100\t100\n"
    )
    found = read_support_files({"proc": SysfsReader(str(tmp_path))})
    assert found.collector_uid == 1001  # the effective one
    assert found.as_root is False
    assert read_support_files({"proc": SysfsReader(str(tmp_path / "none"))}).collector_uid is None
