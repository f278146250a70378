"""The kernel-log family (``ibdiag.families.kernel_log``): what it plans, and its recorded dmesg
/ journalctl runs -> ``Snapshot.kernel_log``, on every capture in tests/fixtures/dmesg (facts
hand-read in test_family_kernel_log_parser)."""

from __future__ import annotations

from collections import Counter
from typing import Dict, List, Optional

import pytest
from conftest import capture_names, read_capture
from snapshots import device, netdev, pci, port, snapshot, with_runs
from test_family_kernel_log_parser import FACTS

from ibdiag import families, roles
from ibdiag.facts.kernel_log import KernelFinding, KernelLog
from ibdiag.facts.outcome import NoData
from ibdiag.families import Runs, kernel_log
from ibdiag.model import CommandRun, Device, Snapshot

DMESG = ["dmesg", "--kernel", "--nopager"]
JOURNALCTL = ["journalctl", "-k", "-b", "--no-pager", "-o", "short-monotonic"]
RESTRICTED = "dmesg: read kernel buffer failed: Operation not permitted\n"
QEMU = "qemu-devel-2025-cx6dx-fw-internal-error-health-miss-count-synd1.txt"
S390 = "netdev-2020-s390-mlx5-health-miss-count-cmd-timeouts-leak.txt"


def dmesg(stdout: str = "", rc: int = 0, stderr: str = "", **kwargs) -> CommandRun:
    return CommandRun(
        argv=DMESG, role=roles.KERNEL_LOG, rc=rc, stdout=stdout, stderr=stderr, **kwargs
    )


def journalctl(stdout: str = "", rc: int = 0, stderr: str = "") -> CommandRun:
    return CommandRun(
        argv=JOURNALCTL, role=roles.KERNEL_LOG_FALLBACK, rc=rc, stdout=stdout, stderr=stderr
    )


def log_of(*runs: CommandRun, devices: Optional[List[Device]] = None) -> KernelLog:
    update = kernel_log.interpret(snapshot(devices or []), Runs({run.key: run for run in runs}))
    return update.node["kernel_log"]


def _full(address: str) -> str:
    """A PCI address as sysfs names it: always with its domain."""
    return address if address.count(":") == 2 else f"0000:{address}"


def devices_of(bdfs: Dict[str, str], netdevs: Dict[str, str]) -> List[Device]:
    """One HCA per device the capture's facts map: its PCI address and IPoIB netdev."""
    names = list(dict.fromkeys([*bdfs.values(), *netdevs.values()]))
    address = {name: _full(bdf) for bdf, name in bdfs.items()}
    interface = {name: ifname for ifname, name in netdevs.items()}
    return [
        device(
            name,
            pci=pci(address[name]) if name in address else None,
            ports=[port(1, netdev=netdev(interface[name]) if name in interface else None)],
        )
        for name in names
    ]


def test_the_family_is_found_with_its_level():
    assert kernel_log in families.families()
    assert families.source_levels()["kernel_log"] == "standard"


def test_it_plans_dmesg_with_journalctl_as_its_fallback():
    (planned,) = kernel_log.plan(snapshot([]))
    assert (planned.role, planned.argv, planned.refused) == (roles.KERNEL_LOG, DMESG, None)
    assert planned.fallback == families.Planned(roles.KERNEL_LOG_FALLBACK, JOURNALCTL)


@pytest.mark.parametrize("name", capture_names("dmesg"))
def test_every_capture_becomes_typed_findings(name):
    facts = FACTS[name]
    text = read_capture("dmesg", name)
    log = log_of(dmesg(text), devices=devices_of(facts["bdfs"], facts["netdevs"]))
    assert log.role == roles.KERNEL_LOG
    assert log.unusable == []
    assert len(log.dated) + log.undated == facts["lines"]
    assert log.lines_after(None) == facts["lines"]
    expected = Counter(facts["findings"])
    if name == QEMU:
        # 0d:00.2-.5 are VFs of the card whose function .0 is mlx5_0: their fatal errors land
        # on it (the parser test maps no card functions and leaves them without a device).
        expected[("mlx5.fw_fatal", "mlx5_0")] += expected.pop(("mlx5.fw_fatal", None))
    assert Counter((f.signature, f.device) for f in log.findings) == expected
    lines = text.splitlines()
    for finding in log.findings:
        assert isinstance(finding, KernelFinding)
        assert any(finding.line in line for line in lines), finding.line
    # a line with no seconds-since-boot stamp always counts: recorded once, as a problem
    if log.undated:
        assert log.problems == [
            f"{log.undated} of {facts['lines']} lines carry no seconds-since-boot stamp: they "
            "count whatever the baseline"
        ]
    else:
        assert log.problems == []


def test_a_finding_keeps_its_signature_device_time_and_line():
    log = log_of(
        dmesg(read_capture("dmesg", S390)), devices=devices_of({"0000:00:00.0": "mlx5_0"}, {})
    )
    first = log.findings[0]
    assert first == KernelFinding(
        signature="mlx5.fw_fatal",
        device="mlx5_0",
        seconds=103.257202,
        line="mlx5_core 0000:00:00.0: poll_health:702:(pid 930): Fatal error 1 detected",
    )
    assert log.dated[0] == 103.257202
    assert log.dated == sorted(log.dated)  # the capture's order, which is time order
    assert log.undated == 2  # the two "..." elisions of the mail it was quoted from


def test_a_vf_line_lands_on_the_hca_of_its_card():
    log = log_of(
        dmesg(read_capture("dmesg", QEMU)),
        devices=devices_of({"0000:0d:00.0": "mlx5_0", "0000:0d:00.1": "mlx5_1"}, {}),
    )
    on_vf = [f for f in log.findings if "0000:0d:00.3:" in f.line]
    assert on_vf and {f.device for f in on_vf} == {"mlx5_0"}
    assert {f.seconds for f in on_vf} == {446.51319}


def test_no_hca_in_sysfs_still_gives_the_findings_without_a_device():
    log = log_of(dmesg(read_capture("dmesg", QEMU)))
    assert log.findings and {f.device for f in log.findings} == {None}


def test_lines_after_a_cutoff_count_the_later_and_the_undated_ones():
    log = log_of(dmesg(read_capture("dmesg", S390)))
    assert log.lines_after(None) == 14
    assert log.lines_after(0.0) == 14
    assert log.lines_after(103.257202) == 11 + 2  # the first line is at the cutoff itself
    assert log.lines_after(1e9) == 2  # only the undated ones


def test_journalctl_stands_in_when_dmesg_is_restricted():
    capture = read_capture("dmesg", QEMU)
    monotonic = "".join(
        line.replace("] ", "] node001 kernel: ", 1) + "\n" for line in capture.splitlines()
    )
    log = log_of(
        dmesg(rc=1, stderr=RESTRICTED),
        journalctl(monotonic),
        devices=devices_of({"0000:0d:00.0": "mlx5_0", "0000:0d:00.1": "mlx5_1"}, {}),
    )
    assert log.role == roles.KERNEL_LOG_FALLBACK
    assert log.unusable == [
        "dmesg exited 1: dmesg: read kernel buffer failed: Operation not permitted"
    ]
    assert [(str(run.role), run.no_data) for run in log.runs] == [
        ("kernel-log dmesg", NoData.NO_PERMISSION),
        ("kernel-log journalctl", None),
    ]
    assert len(log.dated) == 42 and log.undated == 0
    assert Counter(f.device for f in log.findings if f.signature == "mlx5.fw_fatal") == {
        "mlx5_0": 5,
        "mlx5_1": 1,
    }


def test_both_unusable_say_why_each_in_order_and_find_nothing():
    log = log_of(
        dmesg(rc=1, stderr=RESTRICTED),
        journalctl("", stderr="No journal files were opened due to insufficient permissions.\n"),
    )
    assert log.role is None
    assert log.unusable == [
        "dmesg exited 1: dmesg: read kernel buffer failed: Operation not permitted",
        f"`{' '.join(JOURNALCTL)}` printed nothing",
    ]
    assert (log.findings, log.dated, log.undated) == ([], [], 0)


def test_a_fallback_never_run_is_said_to_be_not_collected():
    log = log_of(dmesg("   \n"))
    assert log.role is None
    assert log.unusable == [
        f"`{' '.join(DMESG)}` printed nothing",
        f"`{' '.join(JOURNALCTL)}` was not collected (level quick, or not planned here)",
    ]
    assert [run.command for run in log.runs] == [" ".join(DMESG)]


def test_a_journal_warning_on_a_usable_run_and_a_cut_log_are_recorded_problems():
    log = log_of(
        journalctl(
            "[   12.000001] node001 kernel: mlx5_core 0000:0c:00.0: firmware version: 1.2.3\n",
            stderr="No journal files were opened due to insufficient permissions.\n",
        ),
        dmesg(rc=1, stderr=RESTRICTED),
    )
    assert log.role == roles.KERNEL_LOG_FALLBACK
    assert log.problems == [
        "part of the log may be hidden: No journal files were opened due to insufficient "
        "permissions."
    ]
    cut = log_of(dmesg("[    1.000000] mlx5_core: hello\n", stdout_truncated=True))
    assert cut.problems == ["the log is longer than ibdiag keeps: only its newest part was read"]


@pytest.mark.parametrize(
    "junk",
    [
        "\x00\xff\xfe garbage \x1b[31m\n" * 40,
        "\ufffd" * 5000,
        "no newline at all",
        "-- No entries --\n",
    ],
)
def test_garbage_output_is_a_recorded_problem_not_a_crash(junk):
    log = log_of(dmesg(junk))
    assert log.role == roles.KERNEL_LOG
    assert log.findings == []
    assert log.dated == []
    if log.undated:
        assert log.problems and "no seconds-since-boot stamp" in log.problems[0]


def test_no_kernel_log_run_leaves_the_field_unset():
    other = CommandRun(argv=["ibstat"], role=roles.IBSTAT, rc=0, stdout="")
    assert kernel_log.interpret(snapshot([]), Runs({other.key: other})).node == {}
    assert with_runs(snapshot([]), other).kernel_log is None


def test_interpret_sets_the_snapshot_field_and_it_round_trips():
    capture = read_capture("dmesg", S390)
    devices = devices_of({"0000:00:00.0": "mlx5_0"}, {})
    snap = with_runs(snapshot(devices), dmesg(capture))
    assert "interpret.kernel_log" not in snap.problems
    again = Snapshot.model_validate_json(snap.model_dump_json())
    assert again.kernel_log == snap.kernel_log
    assert isinstance(again.kernel_log, KernelLog)
    assert again.kernel_log.findings[0].seconds == 103.257202
