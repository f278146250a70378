"""The real Debian tools on a machine with no InfiniBand device: they fail, ibdiag reports why.

``.ci/run`` installs infiniband-diags (perfquery, ibstat), perftest (ib_write_bw), ibverbs-utils
(ibv_devinfo) and ethtool. Nothing here is a stub: each tool is run through the one command runner
(``ibdiag.runner.command_runner.Runner``) and through ``ibdiag check --level standard``, and must
fail in its own real way - recorded as data, turned into a ``skip`` naming the tool and quoting its
reason - never a traceback, never exit 3 from a crash. When a tool is missing these tests FAIL
(they never skip): CI must prove this path.

What Debian 12's tools print here (infiniband-diags/ibverbs-utils 44.0, perftest 4.5-0.17,
ethtool 6.1; no ib_umad/ib_uverbs loaded, no /sys/class/infiniband):

- ``perfquery -x -C mlx5_90 -P 1``, exit 255 - on stderr ``ibwarn: [pid] get_abi_version: can't
  read ABI version from /sys/class/infiniband_mad/abi_version (No such file or directory): is
  ib_umad module loaded?`` and ``ibwarn: [pid] mad_rpc_open_port: can't open UMAD port
  (mlx5_90:1)``; on stdout ``perfquery: iberror: failed: Failed to open 'mlx5_90' port '1'``.
- ``ethtool -S ib90``, exit 96 - stderr ``Cannot get stats strings information: No such device``.
- ``ibstat``, exit 0 and no output at all (no CA to list); ``ibstat mlx5_90``, exit 255 -
  ``ibpanic: [pid] main: 'mlx5_90' IB device can't be found: Success``.
- ``ibv_devinfo``, exit 255 - ``Failed to get IB devices list: Function not implemented``
  (ib_uverbs not loaded; with it loaded and no HCA: ``No IB devices found``).
- ``ib_write_bw -d mlx5_90``, exit 1 - stderr `` Did not detect devices`` / `` If device exists,
  check if driver is up`` / `` Unable to find the Infiniband/RoCE device``.

The HCAs of the sysfs tree are named ``mlx5_90``/``mlx5_91`` (netdevs ``ib90``/``ib91``, PCI
domain ``0abc``) so that no real machine - not even one with InfiniBand - has them: the tools
fail the same way everywhere.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest
from stubs import write_procfs
from sysfs_builder import mlx5_node, write_node

from ibdiag import roles
from ibdiag.model import CommandRun
from ibdiag.runner.command_runner import Runner

REAL_TOOLS: Dict[str, str] = {  # binary -> the Debian package that ships it
    "perfquery": "infiniband-diags",
    "ibstat": "infiniband-diags",
    "ib_write_bw": "perftest",
    "ibv_devinfo": "ibverbs-utils",
    "ethtool": "ethtool",
}
APT_HINT = (
    "apt-get update && apt-get install -y infiniband-diags perftest ibverbs-utils ethtool "
    "(.ci/run does this)"
)
# infiniband-diags and ethtool install into /usr/sbin, which a non-root PATH may lack.
_DIRS = [*os.environ.get("PATH", os.defpath).split(os.pathsep), "/usr/sbin", "/sbin"]
TOOLS_PATH = os.pathsep.join(dict.fromkeys(d for d in _DIRS if d))

DEVICES = ("mlx5_90", "mlx5_91")  # no machine has these: the tools fail here and on an IB node
NETDEVS = ("ib90", "ib91")
# The kernel log is the machine's own: where that is restricted, dmesg and journalctl fail too.
COMMAND_CHECKS = {
    "perfquery.errors",
    "perfquery.sl_traffic",
    "ethtool.errors",
    "ethtool.pause",
    "kernel.log",
    "hca.driver_inventory",
}


def require_real_tools() -> Dict[str, str]:
    """Where each real tool is; fails the calling test (never skips) when one is missing."""
    found = {tool: shutil.which(tool, path=TOOLS_PATH) for tool in REAL_TOOLS}
    missing = [f"{tool} ({REAL_TOOLS[tool]})" for tool, where in found.items() if where is None]
    if missing:
        pytest.fail(
            f"the real tools are not installed: {', '.join(missing)}; these tests prove the "
            f"'no device here' path against them and must not be skipped. Install: {APT_HINT}",
            pytrace=False,
        )
    return {tool: str(where) for tool, where in found.items()}


def describe(run: CommandRun) -> str:
    """The whole run, for assertion messages: what the tool really printed."""
    return (
        f"{run.argv}: rc={run.rc} timed_out={run.timed_out} not_found={run.not_found} "
        f"permission_denied={run.permission_denied} skipped={run.skipped} error={run.error} "
        f"duration={run.duration_s:.2f}s\n--- stdout:\n{run.stdout}--- stderr:\n{run.stderr}"
    )


def assert_failed_for_real(run: CommandRun, *reasons: str) -> str:
    """The tool started, ran, exited non-zero by itself, and said one of ``reasons``."""
    context = describe(run)
    assert not run.not_found and not run.permission_denied, context
    assert run.skipped is None and run.error is None, context
    assert not run.timed_out and run.rc is not None, context
    assert run.rc != 0 and not run.succeeded, context
    assert run.duration_s < 20, context
    failure = run.failure()
    assert failure is not None and failure.startswith(f"{run.argv[0]} exited {run.rc}: "), context
    output = run.stdout + run.stderr
    assert any(reason in output for reason in reasons), context
    assert "Traceback" not in failure, context
    return failure


def test_the_real_tools_are_installed():
    found = require_real_tools()
    assert sorted(found) == sorted(REAL_TOOLS)


def test_runner_records_perfquery_failing_without_a_device():
    require_real_tools()
    from ibdiag.families.perfquery import argv as perfquery_argv
    from ibdiag.families.perfquery import parse_perfquery

    runner = Runner(timeout_s=20, deadline_s=120, path=TOOLS_PATH)
    for mode in ("basic", "x", "E", "X"):
        run = runner.run(perfquery_argv(DEVICES[0], 1, mode))
        failure = assert_failed_for_real(run, f"Failed to open '{DEVICES[0]}' port '1'")
        assert "perfquery exited" in failure
        # The real stderr/stdout are recognised as a MAD failure, never as counters.
        parsed = parse_perfquery(run.stdout + "\n" + run.stderr)
        assert parsed.counters == {}, describe(run)
        assert parsed.mad_error and "Failed to open" in parsed.mad_error, describe(run)


def test_runner_records_ethtool_on_a_missing_netdev():
    require_real_tools()
    from ibdiag.families.ethtool import argv as ethtool_argv

    run = Runner(timeout_s=20, deadline_s=60, path=TOOLS_PATH).run(ethtool_argv(NETDEVS[0]))
    assert run.argv == ["ethtool", "-S", NETDEVS[0]]
    assert_failed_for_real(run, "No such device")


def test_runner_records_ibstat_ibv_devinfo_and_ib_write_bw():
    require_real_tools()
    runner = Runner(timeout_s=20, deadline_s=120, path=TOOLS_PATH)
    runs = runner.run_all(
        [
            ["ibstat", DEVICES[0]],
            ["ibv_devinfo", "-d", DEVICES[0]],
            # Client mode against localhost: it must give up on the device, not wait for a peer.
            ["ib_write_bw", "-d", DEVICES[0], "-D", "1", "localhost"],
        ]
    )
    ibstat, devinfo, write_bw = runs.values()
    assert_failed_for_real(ibstat, f"'{DEVICES[0]}' IB device can't be found", "can't be found")
    assert_failed_for_real(
        devinfo,
        "Failed to get IB devices list",
        "No IB devices found",
        f"IB device '{DEVICES[0]}' wasn't found",
        "wasn't found",
    )
    assert_failed_for_real(
        write_bw, "Did not detect devices", "Unable to find the Infiniband/RoCE device"
    )


def test_runner_records_plain_ibstat_and_ibv_devinfo_as_the_plan_runs_them():
    """What level standard really runs: ``ibstat`` and ``ibv_devinfo`` with no argument."""
    require_real_tools()
    from snapshots import snapshot

    from ibdiag.families import ibstat, ibv_devinfo

    planned = [*ibstat.plan(snapshot([])), *ibv_devinfo.plan(snapshot([]))]
    runs = Runner(timeout_s=20, deadline_s=60, path=TOOLS_PATH).run_all(
        [item.argv for item in planned]
    )
    for run in runs.values():
        context = describe(run)
        assert not (run.timed_out or run.not_found or run.permission_denied), context
        assert run.skipped is None and run.error is None and run.rc is not None, context
        if run.rc != 0:  # ibv_devinfo without a device; ibstat exits 0 and lists nothing
            assert run.failure().startswith(f"{run.argv[0]} exited {run.rc}: "), context


# -- end to end: ibdiag check --level standard --------------------------------------------------


def _node(tmp_path: Path) -> Dict[str, str]:
    hcas = mlx5_node(2)
    for index, hca in enumerate(hcas):
        hca.name = DEVICES[index]
        hca.pci_address = f"0abc:{0x10 * (index + 1):02x}:00.0"
        hca.ports[0].netdev = NETDEVS[index]
    write_node(tmp_path / "sys", hcas)
    procfs = write_procfs(tmp_path / "proc", boot_time=time.time() - 3600)
    return {"sysfs": str(tmp_path / "sys"), "procfs": procfs}


def _check(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    node = _node(tmp_path)
    env = dict(os.environ, PATH=TOOLS_PATH)
    env.pop("IBDIAG_DEBUG", None)
    argv = [
        *(sys.executable, "-m", "ibdiag", "check", "--level", "standard", "--json"),
        *("--sysfs", node["sysfs"], "--procfs", node["procfs"]),
        *("--deadline", "60", "--command-timeout", "20"),
        *extra,
    ]
    return subprocess.run(
        argv, env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL
    )


def _results(proc: subprocess.CompletedProcess) -> List[dict]:
    context = (
        f"exit {proc.returncode}\n--- stderr:\n{proc.stderr}\n--- stdout:\n{proc.stdout[:3000]}"
    )
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, context
    assert proc.returncode in (0, 1, 2), context
    report = json.loads(proc.stdout)
    crashed = [r for r in report["results"] if r["status"] == "error"]
    assert crashed == [], context
    return report["results"]


def test_check_standard_turns_every_real_tool_failure_into_a_skip_with_its_reason(tmp_path):
    require_real_tools()
    proc = _check(tmp_path)
    results = _results(proc)
    by_check: Dict[str, List[dict]] = {}
    for result in results:
        by_check.setdefault(result["check_id"], []).append(result)
    context = json.dumps([r for r in results if r["check_id"] in COMMAND_CHECKS], indent=1)

    # perfquery -x (and plain, as fallback) failed on each ACTIVE IB port: skip with its reason.
    perf = by_check["perfquery.errors"]
    assert sorted(r["target"] for r in perf) == [f"{dev}:1" for dev in DEVICES], context
    for result in perf:
        assert result["status"] == "skip", context
        assert "perfquery" in result["message"], context
        device = result["target"].split(":")[0]
        reasons = (f"Failed to open '{device}' port '1'", f"can't open UMAD port ({device}:1)")
        assert any(reason in result["message"] for reason in reasons), context
    for result in by_check["perfquery.sl_traffic"]:
        assert result["status"] == "skip" and "perfquery exited" in result["message"], context

    # ethtool -S on each IPoIB netdev: No such device.
    eth = by_check["ethtool.errors"]
    assert len(eth) == 2, context
    for result in eth:
        assert result["status"] == "skip", context
        assert result["message"].startswith("ethtool exited "), context
        assert "No such device" in result["message"], context
    assert "ethtool.pause" not in by_check, context  # nothing read: ethtool.errors said why

    # The inventory. ibv_devinfo fails (exit 255); ibstat exits 0 and prints nothing - no CA
    # listed, which is no evidence about this tree's HCAs: both skip, naming the tool and why.
    # (A host with RDMA devices of its own lists them, and not ours: a warning there.)
    inventory = by_check["hca.driver_inventory"]
    ibv = [r for r in inventory if "ibv_devinfo" in r["evidence"]]
    ibstat = [r for r in inventory if "ibstat" in r["evidence"]]
    assert len(ibv) == 1 and len(ibstat) == 1, context
    host_has_rdma = (
        bool(os.listdir("/sys/class/infiniband"))
        if os.path.isdir("/sys/class/infiniband")
        else False
    )
    if not host_has_rdma:
        assert ibv[0]["status"] == "skip", context
        assert ibv[0]["message"].startswith("ibv_devinfo exited 255: "), context
        assert ibstat[0]["status"] == "skip", context
        assert ibstat[0]["message"].startswith("ibstat "), context
    for result in (*ibv, *ibstat):
        if result["status"] == "warn":
            assert "missing from" in result["message"], context

    # The machine's own kernel log: readable (no HCA signature for these BDFs), or restricted.
    for result in by_check["kernel.log"]:
        assert result["status"] in ("pass", "skip"), context
        if result["status"] == "skip":
            assert "dmesg" in result["message"] and "journalctl" in result["message"], context

    # Every command-based result is a pass or a skip: the verdict is OK.
    if not host_has_rdma:
        statuses = {r["status"] for r in results if r["check_id"] in COMMAND_CHECKS}
        assert statuses <= {"pass", "skip"}, context
        assert proc.returncode == 0, context


def test_check_standard_records_every_real_run_in_the_report(tmp_path):
    require_real_tools()
    proc = _check(tmp_path)
    _results(proc)
    commands = json.loads(proc.stdout)["snapshot"]["commands"]  # keyed by role
    for device in DEVICES:
        for mode, flag in (("basic", ""), ("x", "-x "), ("E", "-E "), ("X", "-X ")):
            key = str(roles.perfquery(mode, f"{device}:1"))
            assert key in commands, sorted(commands)
            run = commands[key]
            assert " ".join(run["argv"]) == f"perfquery {flag}-C {device} -P 1", run
            assert run["rc"] not in (0, None) and not run["timed_out"], run
            assert "Failed to open" in run["stdout"] + run["stderr"], run
    for netdev in NETDEVS:
        run = commands[str(roles.ethtool_stats(netdev))]
        assert run["argv"] == ["ethtool", "-S", netdev], run
        assert run["rc"] not in (0, None) and "No such device" in run["stderr"], run
    ibstat, ibv_devinfo = commands[str(roles.IBSTAT)], commands[str(roles.IBV_DEVINFO)]
    assert ibstat["argv"] == ["ibstat"] and ibstat["rc"] == 0, ibstat
    assert ibv_devinfo["argv"] == ["ibv_devinfo"] and not ibv_devinfo["not_found"], ibv_devinfo
    for run in commands.values():
        if run["role"].startswith("module-mlxlink "):  # NVIDIA MFT: not in Debian; mstlink is
            assert run["not_found"], run
            fallback = commands[run["role"].replace("module-mlxlink", "module-mstlink")]
            assert "Failed to open device" in fallback["stderr"], fallback
            continue
        assert not run["not_found"] and not run["permission_denied"], run
        assert not run["timed_out"], run
        if run["role"].startswith("partner-") and run["skipped"] is not None:
            # the far end's later steps: never started, naming the real first step's failure
            assert "which did not succeed" in run["skipped"], run
            assert "can't open UMAD port" in run["skipped"], run
        else:
            assert run["skipped"] is None, run


def test_check_standard_on_this_machines_own_sysfs_has_no_crash(tmp_path):
    """The real /sys (no InfiniBand here): exit 3 only for "no InfiniBand devices", not a crash."""
    require_real_tools()
    env = dict(os.environ, PATH=TOOLS_PATH)
    env.pop("IBDIAG_DEBUG", None)
    proc = subprocess.run(
        [sys.executable, "-m", "ibdiag", "check", "--level", "standard", "--json",
         "--deadline", "60", "--command-timeout", "20"],
        env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    context = (
        f"exit {proc.returncode}\n--- stderr:\n{proc.stderr}\n--- stdout:\n{proc.stdout[:3000]}"
    )
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, context
    report = json.loads(proc.stdout)
    assert [r for r in report["results"] if r["status"] == "error"] == [], context
    if proc.returncode == 3:  # UNKNOWN is for "nothing to grade" here, never for a crash
        assert report["verdict_reason"].startswith("no InfiniBand devices found"), context
    else:
        assert proc.returncode in (0, 1, 2), context
    commands = report["snapshot"]["commands"]  # keyed by role
    assert str(roles.IBSTAT) in commands and str(roles.IBV_DEVINFO) in commands, sorted(commands)
    for run in commands.values():
        assert not run["not_found"] and not run["timed_out"] and run["skipped"] is None, run
