"""kernel.log and hca.driver_inventory grade the typed fields (``Snapshot.kernel_log``,
``Snapshot.inventory``), never command text nor runs: every run here has empty output, so a
check that still parsed text would find nothing, and what became of each run is on the fact
(``RunOutcome``, as the family records it)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import List

import pytest
from conftest import REPO
from snapshots import builtin_registry, devices, run, snapshot

from ibdiag import roles
from ibdiag.facts.inventory import Inventory, ListedCA, Listing
from ibdiag.facts.kernel_log import KernelFinding, KernelLog
from ibdiag.families import outcome_of
from ibdiag.grade import run_check
from ibdiag.model import CommandRun, Snapshot
from ibdiag.thresholds import Thresholds

CHECKS = Path(REPO) / "checks"
DMESG = ["dmesg", "--kernel", "--nopager"]
JOURNALCTL = ["journalctl", "-k", "-b", "--no-pager", "-o", "short-monotonic"]
FATAL = "mlx5_core 0000:0c:00.0: poll_health:702:(pid 930): Fatal error 1 detected"


@pytest.mark.parametrize("name", ["kernel_log.py", "driver_inventory.py"])
def test_the_checks_read_fields_only(name):
    source = (CHECKS / name).read_text(encoding="utf-8")
    for banned in ("_argv(", "sources.parsers", ".command(", "usable_run", "classify", "parse_"):
        assert banned not in source, f"{name} still uses {banned}"
    assert not re.search(r"\.stdout\b", source), name


def with_runs(snap: Snapshot, *runs: CommandRun, **fields) -> Snapshot:
    return snap.model_copy(update={"commands": {run.key: run for run in runs}, **fields})


def tried(*runs: CommandRun) -> dict:
    """The outcomes a KernelLog records of the runs it tried, in order."""
    return {"runs": [outcome_of(run) for run in runs]}


def dmesg(**kwargs) -> CommandRun:
    return CommandRun(argv=DMESG, role=roles.KERNEL_LOG, **{"rc": 0, **kwargs})


def journalctl(**kwargs) -> CommandRun:
    return CommandRun(argv=JOURNALCTL, role=roles.KERNEL_LOG_FALLBACK, **{"rc": 0, **kwargs})


def finding(device, seconds, signature="mlx5.fw_fatal", line=FATAL) -> KernelFinding:
    return KernelFinding(signature=signature, device=device, seconds=seconds, line=line)


def kernel(snap: Snapshot, baseline=None, th=None) -> List:
    spec = builtin_registry().get("kernel.log")
    return run_check(spec, snap, th or Thresholds(), baseline)


# -- kernel.log -------------------------------------------------------------------------------


def test_findings_are_graded_per_device_from_the_field():
    log = KernelLog(
        role=roles.KERNEL_LOG,
        findings=[
            finding("mlx5_0", 10.0),
            finding("mlx5_0", 11.0),
            finding(None, 12.0, "link.carrier_lost", "ib7: lost carrier"),
            finding("mlx5_1", 13.0, "link.up", "mlx5_core 0000:0d:00.0: Link up"),
        ],
        dated=[10.0, 11.0, 12.0, 13.0],
        **tried(dmesg()),
    )
    results = kernel(with_runs(snapshot(devices(2)), dmesg(), kernel_log=log))
    got = [(r.target, r.status.value, r.observed) for r in results]
    # severities are the signature table's: fail, warn, and info passes
    assert got == [
        ("mlx5_0", "fail", "mlx5.fw_fatal"),
        ("node", "warn", "link.carrier_lost"),
        ("mlx5_1", "pass", "link.up"),
    ]
    assert results[0].message == (
        f"mlx5 firmware fatal error / health compromised (2 line(s) since boot); last: {FATAL}"
    )
    assert results[0].hint and results[1].message.endswith("last: ib7: lost carrier")
    assert results[0].evidence == [" ".join(DMESG)]


def test_since_the_baseline_and_ignored_hcas_leave_findings_out():
    snap = snapshot(devices(2)).model_copy(
        update={"boot_time": snapshot().collected_at - timedelta(seconds=1000)}
    )
    baseline = snap.model_copy(update={"collected_at": snap.collected_at - timedelta(seconds=500)})
    log = KernelLog(
        role=roles.KERNEL_LOG_FALLBACK,
        findings=[finding("mlx5_0", 400.0), finding("mlx5_1", 600.0)],
        dated=[100.0, 400.0, 600.0],
        undated=1,
        **tried(dmesg(rc=1), journalctl()),
    )
    snap = with_runs(snap, dmesg(rc=1), journalctl(), kernel_log=log)
    th = Thresholds(ignore_hcas=["mlx5_1"])
    (result,) = kernel(snap, baseline, th)
    assert result.status.value == "pass"
    # 600.0 and the undated line are after the cutoff (500 s after boot)
    assert result.message == "no HCA fault signature in 2 kernel-log lines since the baseline"
    assert result.evidence == [" ".join(JOURNALCTL)]
    (fail,) = kernel(snap, baseline)
    assert (fail.target, fail.status.value) == ("mlx5_1", "fail")
    assert "(1 line(s) since the baseline)" in fail.message


def test_neither_run_usable_is_one_skip_with_the_recorded_reasons():
    log = KernelLog(
        unusable=["dmesg exited 1: restricted", "`journalctl ...` printed nothing"],
        **tried(dmesg(rc=1), journalctl()),
    )
    snap = with_runs(snapshot(), dmesg(rc=1), journalctl(), kernel_log=log)
    (result,) = kernel(snap)
    assert result.status.value == "skip"
    assert result.message == (
        "kernel log unavailable: dmesg exited 1: restricted; `journalctl ...` printed nothing"
    )
    assert result.evidence == [" ".join(DMESG)]


def test_a_hung_dmesg_warns_found_by_its_role():
    hung = dmesg(rc=None, timed_out=True, duration_s=10.0)
    log = KernelLog(role=roles.KERNEL_LOG_FALLBACK, dated=[1.0], **tried(hung, journalctl()))
    results = kernel(with_runs(snapshot(), hung, journalctl(), kernel_log=log))
    assert [r.status.value for r in results] == ["warn", "pass"]
    assert results[0].evidence == [" ".join(DMESG)] and results[0].observed == "timed-out"
    assert results[1].message == "no HCA fault signature in 1 kernel-log lines since boot"
    alone = snapshot().model_copy(update={"kernel_log": log})  # the fact alone, no runs
    assert kernel(alone) == results


def test_no_kernel_log_field_is_a_skip_saying_it_was_not_collected():
    (result,) = kernel(snapshot())
    assert result.status.value == "skip"
    assert result.message == (
        "kernel log unavailable: not collected (level quick, or not planned here)"
    )
    assert result.evidence == ["kernel-log dmesg"]


# -- hca.driver_inventory ---------------------------------------------------------------------


def listing(run: CommandRun, *names: str, **kwargs) -> Listing:
    """The listing the family records of ``run``: its CAs ``names``, and what became of it."""
    cas = [ListedCA(name=name) for name in names]
    return Listing(role=run.role, cas=cas, outcome=outcome_of(run), **kwargs)


def ibstat(**kwargs) -> CommandRun:
    return CommandRun(argv=["ibstat"], role=roles.IBSTAT, **{"rc": 0, **kwargs})


def ibv_devinfo(**kwargs) -> CommandRun:
    return CommandRun(argv=["ibv_devinfo"], role=roles.IBV_DEVINFO, **{"rc": 0, **kwargs})


def test_inventory_listings_are_compared_with_sysfs_from_the_field():
    inventory = Inventory(
        ibstat=listing(ibstat(), "mlx5_0", "mlx5_1"),
        ibv_devinfo=listing(ibv_devinfo(), "mlx5_0", "mlx5_9"),
    )
    snap = with_runs(snapshot(devices(2)), ibstat(), ibv_devinfo(), inventory=inventory)
    results = run("hca.driver_inventory", snap)
    assert [r.status.value for r in results] == ["pass", "warn"]
    assert results[0].message == "ibstat lists the same 2 HCAs as sysfs"
    assert results[0].evidence == ["ibstat", "class/infiniband"]
    assert results[1].message == (
        "ibv_devinfo and sysfs disagree: missing from ibv_devinfo: mlx5_1; not in sysfs: mlx5_9"
    )


def test_inventory_unusable_garbage_and_not_collected():
    inventory = Inventory(
        ibstat=listing(
            ibstat(rc=None, permission_denied=True), unusable="ibstat: permission denied"
        ),
        ibv_devinfo=listing(ibv_devinfo(), problems=["unparseable line 1: 'junk'"]),
    )
    snap = with_runs(
        snapshot(), ibstat(rc=None, permission_denied=True), ibv_devinfo(), inventory=inventory
    )
    results = run("hca.driver_inventory", snap)
    assert [(r.status.value, r.message) for r in results] == [
        ("skip", "ibstat: permission denied"),
        ("skip", "ibv_devinfo output lists no HCA (unparseable line 1: 'junk')"),
    ]
    results = run("hca.driver_inventory", snapshot())
    assert [r.message for r in results] == [
        "`ibstat` was not collected (level quick, or not planned here)",
        "`ibv_devinfo` was not collected (level quick, or not planned here)",
    ]


def test_inventory_tool_crashing_while_sysfs_lists_hcas_warns():
    crashed = ibstat(rc=-11, stderr="")
    inventory = Inventory(
        ibstat=listing(crashed, unusable=crashed.failure()),
        ibv_devinfo=listing(ibv_devinfo(), "mlx5_0"),
    )
    snap = with_runs(snapshot(), crashed, ibv_devinfo(), inventory=inventory)
    results = run("hca.driver_inventory", snap)
    assert [r.status.value for r in results] == ["warn", "pass"]
    assert results[0].observed == "killed-by-SIGSEGV" and results[0].evidence == ["ibstat"]
    alone = snapshot().model_copy(update={"inventory": inventory})  # the fact alone, no runs
    assert run("hca.driver_inventory", alone) == results
