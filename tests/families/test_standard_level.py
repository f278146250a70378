"""``ibdiag check --level standard`` end to end, with stub tools on PATH.

Each test builds a node - a sysfs tree (``sysfs_builder``), a procfs directory (hostname,
boot_id, ``stat`` with ``btime``, ``modules``) and a directory of stub executables for perfquery,
ethtool, dmesg, journalctl, ibstat and ibv_devinfo - and runs the real CLI, in-process
(``run_cli``) or as ``python -m ibdiag``. PATH is the stub directory alone: a real tool installed
on the machine can never answer for a stub, and an absent stub is really absent.

The stubs print real captures from tests/fixtures (the sysfs tree is built with the PCI
addresses the kernel-log captures name, so findings land on the right HCA), hang forever, ignore
SIGTERM, exit non-zero, print garbage or binary junk, are absent or not executable. Whatever they
do, the run ends within its deadline and every command-based result is graded from the real
output or is a skip/error naming the tool and the reason - never a traceback, never exit 3 from a
crash.

Time bounds are generous (a loaded 2-core CI machine) but each still separates "the deadline
held" from "waited for a command that never ends".
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import List, Sequence

import pytest
import stubs as S
from standard_node import (
    COMMAND_CHECKS,
    COMMAND_TIMEOUT,
    DEADLINE,
    FW_SYNDROME_BDF,
    HEALTHY_BDF,
    KERNEL_LOG,
    SLACK_IN_PROCESS,
    SLACK_SUBPROCESS,
    TOOLS,
    Node,
    by_line,
)


@pytest.fixture
def node(tmp_path, run_cli, monkeypatch):
    """A 2-HCA node whose mlx5_0 is the HCA the fw-syndrome capture names; healthy stubs."""
    made = Node(tmp_path, run_cli, bdfs=(FW_SYNDROME_BDF, HEALTHY_BDF))
    monkeypatch.setenv("PATH", made.stubs.path)  # the stubs first - and alone
    monkeypatch.delenv("IBDIAG_DEBUG", raising=False)
    made.healthy_tools()
    return made


def planned_commands(devices: Sequence[str], netdevs: Sequence[str]) -> List[str]:
    """What a healthy run executes: plain perfquery runs only when -x fails."""
    keys = []
    for device in devices:
        keys += [f"perfquery {flag}-C {device} -P 1" for flag in ("-x ", "-E ", "-X ", "-T ")]
    keys += [f"ethtool -S {netdev}" for netdev in netdevs]
    keys += [f"mlxlink -d {device} -p 1 -m -c --json" for device in devices]
    return [*keys, " ".join(KERNEL_LOG), "ibstat", "ibv_devinfo", "devlink -j health show"]


# -- real captures, graded -------------------------------------------------------------------


def test_real_captures_are_graded_on_the_right_hca(node):
    run = node.check()
    show = run.show()

    # Every planned command ran once, read-only, and is recorded with what it printed.
    expected = planned_commands(node.devices, ["ib0", "ib1"])
    assert sorted(run.commands) == sorted(expected), show
    for key in expected:
        command = run.commands[key]
        assert command["rc"] == 0 and command["stdout"], (key, command)
    calls = node.stubs.calls()
    assert sorted(calls) == sorted(expected), calls  # journalctl: not needed, not run
    assert not any(arg in ("-r", "-R") for call in calls for arg in call.split()), calls

    # The kernel log's firmware fault fails mlx5_0 - the HCA at the BDF the lines name - only.
    kernel = run.of("kernel.log")
    on_faulty = [r for r in kernel if r["target"] == "mlx5_0"]
    assert on_faulty and {r["status"] for r in on_faulty} <= {"fail", "warn"}, show
    failing = {r["observed"] for r in on_faulty if r["status"] == "fail"}
    assert failing & {"mlx5.fw_health_error", "mlx5.fw_fatal"}, show
    for result in on_faulty:
        assert "since boot" in result["message"] and result["hint"], result
    assert run.of("kernel.log", "mlx5_1") == [], show

    # perfquery -x/-E of a healthy EDR HCA: all error counters zero, one pass per port.
    for device in node.devices:
        perf = run.of("perfquery.errors", f"{device}:1")
        assert [r["status"] for r in perf] == ["pass"], show
        assert "all zero" in perf[0]["message"], perf
        assert perf[0]["evidence"] == [f"perfquery -x -C {device} -P 1"], perf
        sl = run.of("perfquery.sl_traffic", f"{device}:1")
        assert [r["status"] for r in sl] == ["pass"], show
        assert "XmtDataSL0 9281738471" in sl[0]["message"], sl
        # ethtool -S of a ConnectX-4 (mlx5) port: catalogued *_phy errors, all zero.
        eth = run.of("ethtool.errors", f"{device}:1")
        assert [r["status"] for r in eth] == ["pass"], show

    # ibstat and ibv_devinfo list exactly sysfs's HCAs.
    inventory = run.of("hca.driver_inventory")
    assert [r["status"] for r in inventory] == ["pass", "pass"], show
    assert run.code == 2 and run.report["verdict"] == "CRITICAL", show


@pytest.mark.parametrize(
    "capture, bdfs, expected",
    [
        pytest.param(
            S.DMESG_FW_SYNDROME,
            (FW_SYNDROME_BDF, HEALTHY_BDF),
            {
                # 0000:0d:00.1-.5, the card's other functions (not in this sysfs tree),
                # belong to the HCA on 0d:00.0: all of it lands there, none on the node
                "mlx5_0": ("fail", {"mlx5.fw_health_error", "mlx5.fw_fatal"}),
            },
            id="fw-internal-error-synd1",
        ),
        pytest.param(
            S.DMESG_PCIE_POWER,
            ("0000:1a:00.0", "0000:3c:00.0"),
            {
                "mlx5_0": ("warn", {"mlx5.pcie_power_insufficient"}),
                "mlx5_1": ("warn", {"mlx5.pcie_power_insufficient"}),
                # the node's eight other HCAs in the capture; two "Cable unplugged" lines
                "node": ("warn", {"mlx5.pcie_power_insufficient", "mlx5.module_unplugged"}),
            },
            id="insufficient-pcie-power",
        ),
        pytest.param(
            ("dmesg", "gpud-kmsg-matcher-mlx5-pcie-power-module-hightemp-access-reg-fail.txt"),
            ("0000:5c:00.0", HEALTHY_BDF),
            {
                "mlx5_0": ("warn", {"mlx5.pcie_power_insufficient"}),
                # "Port module event[error]: ... High Temperature" names no PCI address
                "node": ("fail", {"mlx5.module_high_temp"}),
            },
            id="kmsg-pcie-power-and-module-high-temperature",
        ),
    ],
)
def test_kernel_log_fault_signature_lands_on_its_hca(
    tmp_path, run_cli, monkeypatch, capture, bdfs, expected
):
    node = Node(tmp_path, run_cli, bdfs=bdfs)
    monkeypatch.setenv("PATH", node.stubs.path)
    node.healthy_tools()
    node.stubs.add("dmesg", S.prints(S.fixture(*capture)))
    run = node.check()
    show = run.show()
    ranks = {"pass": 0, "warn": 1, "fail": 2}
    for device in [*node.devices, "node"]:
        findings = run.of("kernel.log", device)
        if device not in expected:
            assert findings == [], show
            continue
        status, signatures = expected[device]
        found = {r["observed"] for r in findings if r["status"] == status}
        assert found & signatures, show
        # The worst finding on the HCA is the expected one (informative lines pass).
        assert max(ranks[r["status"]] for r in findings) == ranks[status], show
        for result in findings:
            if result["status"] != "pass":
                assert result["hint"] and result["evidence"] == [" ".join(KERNEL_LOG)], result
    assert run.code == max(ranks[s] for s, _ in expected.values()), show


def test_ibstat_listing_a_device_sysfs_lacks_warns(node):
    node.stubs.add(
        "ibstat",
        S.prints(S.fixture("ibstat", "gpud-ibstat-a100-vm-9xMT4126-VF-hdr-all-active.txt")),
    )
    node.stubs.add("dmesg", S.prints_text("[    1.000000] Linux version 6.1.0 (quiet boot)"))
    run = node.check()
    show = run.show()
    inventory = run.of("hca.driver_inventory")
    ibstat = [r for r in inventory if "ibstat" in r["evidence"]]
    ibv = [r for r in inventory if "ibv_devinfo" in r["evidence"]]
    assert [r["status"] for r in ibstat] == ["warn"], show
    extra = ", ".join(f"mlx5_{n}" for n in range(2, 9))
    assert f"not in sysfs: {extra}" in ibstat[0]["message"], show
    assert "missing from" not in ibstat[0]["message"], show
    assert [r["status"] for r in ibv] == ["pass"], show
    assert run.code == 1 and run.report["verdict"] == "WARNING", show


def test_ibstat_missing_an_hca_sysfs_has_warns(node):
    node.stubs.add("ibstat", S.prints(node.ibstat_listing(1)))  # lists mlx5_0 only
    run = node.check()
    ibstat = [r for r in run.of("hca.driver_inventory") if "ibstat" in r["evidence"]]
    assert [r["status"] for r in ibstat] == ["warn"], run.show()
    assert "missing from ibstat: mlx5_1" in ibstat[0]["message"], run.show()


# -- the kernel log when dmesg is restricted ----------------------------------------------

DMESG_RESTRICTED = "dmesg: read kernel buffer failed: Operation not permitted"
JOURNAL_RESTRICTED = (
    "No journal files were opened due to insufficient permissions."  # journalctl as a user
)


def test_dmesg_and_journalctl_both_restricted_give_one_skip_naming_both(node):
    node.stubs.add("dmesg", S.fails(DMESG_RESTRICTED, 1))
    node.stubs.add("journalctl", S.fails(JOURNAL_RESTRICTED, 1))
    run = node.check()
    show = run.show()
    kernel = run.of("kernel.log")
    assert len(kernel) == 1, show
    (result,) = kernel
    assert result["status"] == "skip" and result["target"] == "node", show
    message = result["message"]
    assert "dmesg" in message and "journalctl" in message, show
    assert "Operation not permitted" in message and "insufficient permissions" in message, show
    assert run.commands["dmesg --kernel --nopager"]["rc"] == 1, show
    journal = [key for key in run.commands if key.startswith("journalctl ")]
    assert len(journal) == 1 and run.commands[journal[0]]["rc"] == 1, show
    assert run.code == 0, show  # a skip is no finding: the healthy captures pass


def test_journalctl_is_read_when_dmesg_is_restricted(node):
    node.stubs.add("dmesg", S.fails(DMESG_RESTRICTED, 1))
    # journalctl -k -o short-monotonic: "[  445.937186] node001 kernel: mlx5_core ...".
    capture = S.fixture(*S.DMESG_FW_SYNDROME)
    node.stubs.add(
        "journalctl",
        "case \"$*\" in *-k*) ;; *) echo 'stub: expected -k' >&2; exit 2;; esac\n"
        f"sed 's/^\\(\\[[ 0-9.]*\\]\\) /\\1 node001 kernel: /' {S._q(capture)}\n",
    )
    run = node.check()
    show = run.show()
    faulty = run.of("kernel.log", "mlx5_0")
    assert "fail" in {r["status"] for r in faulty}, show
    for result in faulty:
        assert result["evidence"][0].startswith("journalctl -k"), result
    assert run.of("kernel.log", "mlx5_1") == [], show


# -- broken tools -------------------------------------------------------------------------------

BROKEN = {
    # behaviour: (how each stub is written, what the result must say about the tool)
    "hangs-forever": (lambda mark: S.hangs(mark), "timed out after"),
    "ignores-sigterm": (lambda mark: S.ignores_sigterm(mark), "timed out after"),
    "crashes": (lambda mark: "echo starting\nkill -SEGV $$\n", "killed by signal 11 (SIGSEGV)"),
    "cannot-execute": (None, "could not be run: cannot execute: Exec format error"),
    "exits-non-zero": (
        lambda mark: S.fails("ibwarn: [4242] mad_rpc_open_port: stub says the port is gone", 5),
        # the pid is dropped: a reason must be the same every run (Slurm groups by reason)
        "exited 5: ibwarn: mad_rpc_open_port: stub says the port is gone",
    ),
    "absent": (None, "is not installed (not found on PATH)"),
    "not-executable": (lambda mark: "echo never\n", "permission denied"),
    "garbage": (lambda mark: S.garbage(), None),
    "binary-junk": (lambda mark: S.binary_junk(), None),
}
# Issue 12 item 11: a tool that hangs, crashes or cannot execute is a symptom (warn); so is
# one failing where the node shows what it queries (an ACTIVE port, HCAs in sysfs). Optional
# queries failing (perfquery -X) and a restricted kernel log are not.
SYMPTOMS = {"hangs-forever", "ignores-sigterm", "crashes", "cannot-execute"}
FAILING_COUNTS = {"perfquery.errors", "ethtool.errors", "hca.driver_inventory"}


def _expected_status(behaviour: str, check_id: str) -> str:
    if behaviour in SYMPTOMS:
        return "warn"
    if behaviour == "exits-non-zero" and check_id in FAILING_COUNTS:
        return "warn"
    return "skip"


def _break_all_tools(node: Node, behaviour: str) -> str:
    mark = S.marker()
    write, _ = BROKEN[behaviour]
    for tool in TOOLS:
        (node.stubs.bin / tool).unlink()
        if behaviour == "cannot-execute":  # no #! line: execve fails with ENOEXEC
            stub = node.stubs.bin / tool
            stub.write_bytes(b"\x7fELF\x02\x01\x01 not a program for this machine\n")
            stub.chmod(0o755)
            continue
        if write is None:
            continue
        node.stubs.add(tool, write(mark), mode=0o644 if behaviour == "not-executable" else 0o755)
    return mark


def _tool_of(result: dict) -> str:
    evidence = " ".join(result["evidence"])
    for tool in TOOLS:
        if evidence.startswith(tool) or f" {tool}" in f" {evidence}":
            return tool
    raise AssertionError(f"no tool in the evidence of {result}")


@pytest.mark.parametrize("behaviour", sorted(BROKEN))
def test_broken_tools_are_findings_or_skips_naming_tool_and_reason_within_the_deadline(
    node, behaviour
):
    mark = _break_all_tools(node, behaviour)
    _, reason = BROKEN[behaviour]
    run = node.check("--deadline", str(DEADLINE), "--command-timeout", str(COMMAND_TIMEOUT))
    show = run.show()
    assert run.wall < DEADLINE + SLACK_IN_PROCESS, show
    assert S.wait_no_strays(mark) == [], show

    results = run.command_results()
    assert results, show
    checks_seen = {r["check_id"] for r in results}
    assert {"perfquery.errors", "ethtool.errors", "kernel.log", "hca.driver_inventory"} <= (
        checks_seen
    ), show
    for result in results:
        if result["check_id"] == "kernel.log" and behaviour in ("garbage", "binary-junk"):
            # Any text is a log line to dmesg's reader: nothing in it is an HCA fault.
            assert result["status"] == "pass", show
            continue
        expected = _expected_status(behaviour, result["check_id"])
        if behaviour in SYMPTOMS and result["check_id"] == "perfquery.errors":
            # -x, plain and -E all hung: one warning per query that did
            expected = "warn"
        if result["status"] == "skip" and result["check_id"] == "kernel.log":
            assert "journalctl" in result["message"], show  # the fallback was tried, too
        assert result["status"] == expected, (result, show)
        tool = "dmesg" if result["check_id"] == "kernel.log" else _tool_of(result)
        if result["check_id"] == "kernel.log" and expected == "warn":
            tool = _tool_of(result)  # dmesg's or journalctl's own warning
        assert tool in result["message"], show
        if expected == "warn":
            # the command, the port (or node) and what happened, in one line
            assert f"`{result['evidence'][0]}`" in result["message"], result
            if ":" in result["target"]:
                assert f"port {result['target']}" in result["message"], result
            assert reason in result["message"], result
        elif reason is not None:
            assert (
                f"{tool} {reason}" in result["message"]
                or f"{tool}: {reason}" in (result["message"])
            ), show

    if behaviour in ("hangs-forever", "ignores-sigterm"):
        for key, command in run.commands.items():
            # Killed at --command-timeout (or when the deadline came first), never later.
            assert command["timed_out"] or command["skipped"], (key, command)
            assert command["duration_s"] < COMMAND_TIMEOUT + 1.5, (key, command)
    if behaviour == "absent":
        assert all(command["not_found"] for command in run.commands.values()), show
    if behaviour == "not-executable":
        assert all(c["permission_denied"] for c in run.commands.values()), show
    # A node whose tools hang, crash or fail on its ACTIVE ports is not OK.
    if behaviour in SYMPTOMS or behaviour == "exits-non-zero":
        assert run.code == 1 and run.report["verdict"] == "WARNING", show
    elif behaviour in ("absent", "not-executable"):
        assert run.code == 0 and run.report["verdict"] == "OK", show


def test_commands_the_deadline_leaves_no_time_for_are_skipped_with_that_reason(node):
    mark = _break_all_tools(node, "hangs-forever")
    # 13 commands, at most 8 at once: the first 8 use the whole 1 s deadline.
    run = node.check("--deadline", "1", "--command-timeout", "5")
    show = run.show()
    assert run.wall < 1 + SLACK_IN_PROCESS, show
    assert S.wait_no_strays(mark) == [], show
    never_started = {k: c for k, c in run.commands.items() if c["skipped"]}
    assert never_started, show
    for command in never_started.values():
        assert "deadline of 1 s had passed" in command["skipped"], command
        assert command["rc"] is None and command["duration_s"] < 0.5, command
    timed_out = [c for c in run.commands.values() if c["timed_out"]]
    assert timed_out and all(c["duration_s"] < 2.5 for c in timed_out), show
    # What hung is a finding; what the deadline left no time for is a skip saying so (here
    # the fallbacks: every first query started, and hung).
    for result in run.command_results():
        if "deadline" in result["message"]:
            assert result["status"] == "skip" and "not run:" in result["message"], result
        else:
            assert result["status"] == "warn" and "timed out" in result["message"], result
    assert run.code == 1, show


def test_each_tool_broken_its_own_way_in_one_subprocess_run(node):
    """One real ``python -m ibdiag`` process: the hang and SIGTERM cases cannot outlive it."""
    mark = S.marker()
    stub = node.stubs.add
    stub(
        "perfquery",
        S.by_args(
            {"-x -C mlx5_0*": S.hangs(mark), "-x -C mlx5_1*": S.ignores_sigterm(mark)},
            default=S.prints(S.fixture(*S.PERFQUERY_X_HEALTHY)),
        ),
    )
    (node.stubs.bin / "ethtool").unlink()  # absent
    stub("dmesg", S.binary_junk())
    stub(
        "ibstat",
        S.fails("ibpanic: [77] main: stat of IB device 'mlx5_0' failed: No such file", 255),
    )
    stub("ibv_devinfo", "echo never\n", mode=0o644)
    run = node.check_subprocess(
        "--deadline", str(DEADLINE), "--command-timeout", str(COMMAND_TIMEOUT)
    )
    show = run.show()
    assert run.wall < DEADLINE + SLACK_SUBPROCESS, show
    assert S.wait_no_strays(mark) == [], show

    for device in node.devices:
        perf = run.of("perfquery.errors", f"{device}:1")
        # -x timed out on an ACTIVE port: a finding; the plain query (the healthy capture)
        # stands in for the counters, which pass.
        assert [r["status"] for r in perf] == ["warn", "pass"], show
        x_argv = f"perfquery -x -C {device} -P 1"
        assert perf[0]["evidence"] == [x_argv] and perf[0]["observed"] == "timed-out", show
        assert perf[0]["message"].startswith(f"`{x_argv}` on ACTIVE port {device}:1 timed out")
        assert perf[1]["evidence"] == [f"perfquery -C {device} -P 1"], show
        assert run.commands[x_argv]["timed_out"], show
    for result in run.of("ethtool.errors"):
        assert result["status"] == "skip", show
        assert result["message"] == "ethtool is not installed (not found on PATH)", show
    inventory = {_tool_of(r): r for r in run.of("hca.driver_inventory")}
    # ibstat cannot see the HCA from here (a module not loaded, another namespace): a skip
    assert inventory["ibstat"]["status"] == "skip", show
    assert inventory["ibstat"]["message"].startswith("ibstat exited 255: ibpanic:"), show
    assert inventory["ibv_devinfo"]["status"] == "skip", show
    assert inventory["ibv_devinfo"]["message"] == "ibv_devinfo: permission denied", show
    assert [r["status"] for r in run.of("kernel.log")] == ["pass"], show  # junk: no signature
    assert run.code == 1 and run.report["verdict"] == "WARNING", show


# -- baselines -------------------------------------------------------------------------------


def test_perfquery_counters_increasing_since_a_standard_baseline_grade_like_sysfs(node, tmp_path):
    """The baseline snapshot records perfquery's counters; the next run reads the faulty switch
    capture on mlx5_0 (LinkDownedCounter +1, PortRcvSwitchRelayErrors +7, PortXmitDiscards
    +20046) and the same increases in sysfs: both sources grade them alike."""
    healthy = S.prints(S.fixture(*S.PERFQUERY_X_HEALTHY))
    faulty = S.prints(S.fixture(*S.PERFQUERY_X_FAULT))
    node.stubs.add(
        "perfquery",
        S.by_args(
            {
                "-x -C mlx5_0 *": S.in_turn(healthy, faulty, node.stubs.state),
                "-x -C *": healthy,
                "-E -C *": S.prints(S.fixture(*S.PERFQUERY_E)),
                "-X -C *": S.prints_text(S.PERFQUERY_XMIT_SL),
                "-C *": healthy,
            }
        ),
    )
    baseline = node.snapshot(tmp_path / "baseline.json", "--level", "standard")
    assert "perfquery -x -C mlx5_0 -P 1" in by_line(baseline["commands"]), baseline["commands"]
    assert baseline["boot_time"] is not None

    for name, value in (
        ("link_downed", 1),
        ("port_rcv_switch_relay_errors", 7),
        ("port_xmit_discards", 20046),
    ):
        node.set_sysfs_counter("mlx5_0", name, value)
    run = node.check("--baseline", str(tmp_path / "baseline.json"))
    show = run.show()

    perf = {r["message"].split()[0]: r for r in run.of("perfquery.errors", "mlx5_0:1")}
    sysfs = {r["message"].split()[0]: r for r in run.of("counters.port_errors", "mlx5_0:1")}
    pairs = {
        "LinkDownedCounter": "link_downed",
        "PortRcvSwitchRelayErrors": "port_rcv_switch_relay_errors",
        "PortXmitDiscards": "port_xmit_discards",
    }
    graded = [name for name in pairs if name in perf]
    assert graded, show  # at least one of the increases is a finding
    for pq_name, sysfs_name in pairs.items():
        assert (pq_name in perf) == (sysfs_name in sysfs), show
        if pq_name not in perf:
            continue
        assert perf[pq_name]["status"] == sysfs[sysfs_name]["status"], show
        assert perf[pq_name]["expected"] == sysfs[sysfs_name]["expected"], show
        assert perf[pq_name]["observed"] == sysfs[sysfs_name]["observed"], show
        assert "since the baseline" in perf[pq_name]["message"], show
        assert perf[pq_name]["evidence"] == ["perfquery -x -C mlx5_0 -P 1"], show
    assert perf["LinkDownedCounter"]["status"] == "fail", show
    assert perf["LinkDownedCounter"]["observed"] == 1, show

    # mlx5_1 read the same capture both times: no graded increase.
    other = run.of("perfquery.errors", "mlx5_1:1")
    assert [r["status"] for r in other] == ["pass"], show
    assert "no graded increase since the baseline" in other[0]["message"], show

    # The firmware fault lines (at ~446 s after boot) predate the baseline (an hour after
    # boot): the kernel log counts only what came after it.
    kernel = run.of("kernel.log")
    assert [r["status"] for r in kernel] == ["pass"], show
    assert "since the baseline" in kernel[0]["message"], show
    assert run.code == 2, show


def test_quick_level_runs_no_command(node, tmp_path):
    run = node.check(level="quick")
    assert run.commands == {}, run.show()
    assert run.command_results() == [], run.show()
    node.snapshot(tmp_path / "quick.json")  # snapshot's default level is quick, too
    assert not node.stubs.calls_log.exists(), node.stubs.calls()
    assert node.stubs.calls() == []


def test_snapshot_standard_records_every_command_run(node, tmp_path):
    node.stubs.add("ethtool", S.fails("Cannot get stats strings information: No such device", 96))
    node.stubs.add("dmesg", S.fails(DMESG_RESTRICTED, 1))
    node.stubs.add("journalctl", S.prints(S.fixture(*S.DMESG_FW_SYNDROME)))
    snap = node.snapshot(tmp_path / "standard.json", "--level", "standard")

    # The far end's chain (roles partner-*) is tested in test_partner_chain.py.
    commands = {key: run for key, run in by_line(snap["commands"]).items()
                if not str(run.get("role") or "").startswith("partner-")}  # fmt: skip
    planned = planned_commands(node.devices, ["ib0", "ib1"])
    journal = [key for key in commands if key.startswith("journalctl -k")]
    assert len(journal) == 1, sorted(commands)
    assert sorted(commands) == sorted(planned + journal), sorted(commands)
    assert sorted(node.stubs.calls()) == sorted(commands)
    for key in planned:
        assert commands[key]["argv"] == key.split(), commands[key]
    perf = commands["perfquery -x -C mlx5_0 -P 1"]
    assert perf["rc"] == 0 and "LinkDownedCounter:...............0" in perf["stdout"], perf
    for netdev in ("ib0", "ib1"):
        eth = commands[f"ethtool -S {netdev}"]
        assert eth["rc"] == 96 and "No such device" in eth["stderr"], eth
    dmesg = commands["dmesg --kernel --nopager"]
    assert dmesg["rc"] == 1 and DMESG_RESTRICTED in dmesg["stderr"], dmesg
    assert commands[journal[0]]["rc"] == 0 and "synd 0x1" in commands[journal[0]]["stdout"]
    assert snap["kernel_modules"] and "mlx5_core" in snap["kernel_modules"]
    assert snap["boot_time"] is not None and snap["host"] == "node001"


def test_snapshot_standard_is_bounded_by_its_deadline(node, tmp_path):
    mark = S.marker()
    node.stubs.add("ethtool", S.hangs(mark))
    started = time.monotonic()
    snap = node.snapshot(tmp_path / "standard.json", "--level", "standard", "--deadline", "2")
    assert time.monotonic() - started < 2 + SLACK_IN_PROCESS
    assert S.wait_no_strays(mark) == []
    for netdev in ("ib0", "ib1"):
        eth = by_line(snap["commands"])[f"ethtool -S {netdev}"]
        assert eth["timed_out"] and eth["rc"] is None, eth
        assert eth["stdout"] == "starting...\n" and eth["duration_s"] < 2 + 1.5, eth
    assert by_line(snap["commands"])["ibstat"]["rc"] == 0


# -- issue 12 item 10: output is bounded by the caps, not by the tools -------------------------


def test_a_flood_of_binary_output_is_capped_per_command_and_in_all(tmp_path, run_cli, monkeypatch):
    """33 commands each printing 1.5 MB of random bytes: each keeps at most 1 MiB, all of them
    together at most 16 MiB beyond a 64 KiB floor each; every cut is recorded."""
    import os

    per_stream, in_all, floor = 1 << 20, 16 << 20, 64 << 10  # the defaults README states

    bdfs = [f"0000:{bus:02x}:00.0" for bus in (0x1A, 0x3C, 0x4D, 0x5E, 0x9A, 0xBC)]
    node = Node(tmp_path, run_cli, bdfs=bdfs, netdevs=[f"ib{n}" for n in range(6)])
    monkeypatch.setenv("PATH", node.stubs.path)
    junk = tmp_path / "junk.bin"
    junk.write_bytes(os.urandom(1_500_000))
    for tool in TOOLS:
        node.stubs.add(tool, S.prints(junk))
    run = node.check("--deadline", "60", "--command-timeout", "60")
    show = run.context
    # 33 + mlxlink on each of 6 ports + devlink health
    assert len(run.commands) == 40, sorted(run.commands)
    kept = 0
    for key, command in run.commands.items():
        assert command["rc"] == 0 and command["stdout_truncated"], (key, show)
        # one character per byte kept at most (bad bytes decode to one U+FFFD each)
        assert len(command["stdout"]) <= per_stream, key
        kept += len(command["stdout"]) + len(command["stderr"])
    floors = 2 * len(run.commands) * (floor + 1)
    assert kept <= in_all + floors, f"{kept} characters kept"


# -- issue 12 item 11: a tool that hangs, crashes or fails on what the node shows ---------------

MAD_TIMEOUT = (
    "ibwarn: [3116] _do_madrpc: recv failed: Connection timed out\n"
    "ibwarn: [3116] mad_rpc: _do_madrpc failed; dport (Lid 12)\n"
    "perfquery: iberror: [pid 3116] main: failed: perfquery -x: query failed"
)


def test_perfquery_failing_on_an_active_port_warns_but_not_where_the_port_has_no_pma(node):
    """A VM's virtual function reads 'N/A (no PMA)' in sysfs: perfquery cannot answer there,
    and that is no finding. On the other, ordinary ACTIVE port the same failure is one."""
    node.set_sysfs_counter("mlx5_0", "symbol_error", "N/A (no PMA)")
    node.stubs.add("perfquery", S.fails(MAD_TIMEOUT, 1))
    run = node.check()
    show = run.show()
    (no_pma,) = run.of("perfquery.errors", "mlx5_0:1")
    assert no_pma["status"] == "skip" and "query failed" in no_pma["message"], show
    (failing,) = run.of("perfquery.errors", "mlx5_1:1")
    assert failing["status"] == "warn" and failing["observed"] == "exit-1", show
    assert failing["message"].startswith(
        "`perfquery -x -C mlx5_1 -P 1` on ACTIVE port mlx5_1:1 exited 1: perfquery: iberror:"
    ), show
    assert "query failed" in failing["message"], show
    # -X is optional (old firmware lacks it): failing is a skip, on both ports
    assert {r["status"] for r in run.of("perfquery.sl_traffic")} == {"skip"}, show
    assert run.code == 2, show  # the fw-syndrome kernel log of the healthy stubs fails mlx5_0


def test_tools_that_cannot_reach_the_device_from_here_are_skips_not_findings(node):
    """Not root: perfquery may not open the MAD device, dmesg is restricted, ethtool refused."""
    node.stubs.add(
        "perfquery",
        S.fails(
            "ibwarn: [9] mad_rpc_open_port: can't open UMAD port ((null):0)\n"
            "perfquery: iberror: failed: Failed to open '(null)' port '0'",
            255,
        ),
    )
    node.stubs.add("ethtool", S.fails("Cannot get stats: Operation not permitted", 1))
    node.stubs.add("dmesg", S.fails(DMESG_RESTRICTED, 1))
    node.stubs.add("journalctl", S.fails(JOURNAL_RESTRICTED, 1))
    node.stubs.add("ibstat", S.fails("ibpanic: [3] main: Permission denied", 255))
    # ... and in a container with the host's /sys: no such device for the tools in here
    node.stubs.add("ibv_devinfo", S.fails("Failed to get IB devices list: Function not "
                                          "implemented", 255))  # fmt: skip
    run = node.check()
    show = run.show()
    statuses = {r["check_id"]: r["status"] for r in run.command_results()}
    assert set(statuses.values()) == {"skip"}, show
    assert set(statuses) == COMMAND_CHECKS - {"ethtool.pause"}, show
    assert run.code == 0 and run.report["verdict"] == "OK", show


def test_ethtool_without_statistics_or_on_a_port_that_is_not_active_is_a_skip(node):
    node.stubs.add(
        "ethtool",
        S.by_args(
            {
                "-S ib0": S.fails(
                    "Cannot get stats strings information: Operation not supported", 94
                ),
                "-S ib1": S.fails("Cannot get stats: No such device", 1),
            }
        ),
    )
    Path(node.sysfs, "class", "infiniband", "mlx5_1", "ports", "1", "state").write_text("1: DOWN\n")
    run = node.check()
    show = run.show()
    assert [r["status"] for r in run.of("ethtool.errors")] == ["skip", "skip"], show


def test_ethtool_failing_on_an_active_ports_netdev_warns(node):
    # mlx5_core answers EIO when a firmware command fails: ethtool sees the netdev, and fails
    node.stubs.add("ethtool", S.fails("Cannot get stats information: Input/output error", 1))
    run = node.check()
    show = run.show()
    for device, netdev in (("mlx5_0", "ib0"), ("mlx5_1", "ib1")):
        (result,) = run.of("ethtool.errors", f"{device}:1")
        assert result["status"] == "warn", show
        assert result["message"].startswith(
            f"`ethtool -S {netdev}` on {netdev} of ACTIVE port {device}:1 exited 1:"
        ), show


def test_a_hung_nvidia_smi_warns_where_sysfs_shows_gpus(node):
    from sysfs_builder import write_nvidia_gpus

    write_nvidia_gpus(node.sysfs, 2)
    mark = S.marker()
    node.stubs.add("nvidia-smi", S.hangs(mark))
    run = node.check("--command-timeout", "1")
    show = run.show()
    assert S.wait_no_strays(mark) == [], show
    (result,) = run.of("topology.gpu_hca")
    assert result["status"] == "warn" and result["observed"] == "timed-out", show
    assert result["message"].startswith("`nvidia-smi topo -m` on this node timed out"), show


def test_a_crashing_perfquery_warns_even_when_the_plain_query_stands_in(node):
    node.stubs.add(
        "perfquery",
        S.by_args(
            {
                "-x -C mlx5_0 *": "kill -SEGV $$\n",
                "-x -C *": S.prints(S.fixture(*S.PERFQUERY_X_HEALTHY)),
                "-E -C *": S.prints(S.fixture(*S.PERFQUERY_E)),
                "-X -C *": S.prints_text(S.PERFQUERY_XMIT_SL),
                "-C *": S.prints(S.fixture(*S.PERFQUERY_X_HEALTHY)),
            }
        ),
    )
    node.stubs.add("dmesg", S.prints_text("[    1.000000] Linux version 6.1.0 (quiet boot)"))
    run = node.check()
    show = run.show()
    statuses = [r["status"] for r in run.of("perfquery.errors", "mlx5_0:1")]
    assert statuses == ["warn", "pass"], show  # the crash, then the counters of plain perfquery
    assert run.of("perfquery.errors", "mlx5_0:1")[0]["observed"] == "killed-by-SIGSEGV", show
    assert [r["status"] for r in run.of("perfquery.errors", "mlx5_1:1")] == ["pass"], show
    assert run.code == 1 and run.report["verdict"] == "WARNING", show


def test_the_drain_reason_names_the_hung_query_stably(node):
    mark = S.marker()
    node.stubs.add("perfquery", S.hangs(mark))
    node.stubs.add("dmesg", S.prints_text("[    1.000000] Linux version 6.1.0 (quiet boot)"))
    argv = ["check", "--level", "standard", "--sysfs", node.sysfs, "--procfs", node.procfs]
    result = node.run_cli(*argv, "--reason", "--command-timeout", "1", "--deadline", "3")
    assert S.wait_no_strays(mark) == []
    assert result.exit_code == 1, result.stdout
    assert result.stdout == "ibdiag: mlx5_0:1 perfquery.errors timed-out and more\n"
