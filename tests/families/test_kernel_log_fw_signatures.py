"""Issue 25's firmware-liveness signatures of the kernel-log catalogue
(ibdiag.families.kernel_log.signatures): NVSentinel's fatal mlx5 patterns (command timeout,
health poll miss count, unrecoverable hardware error, soft lockup in mlx5 NAPI) and the
restricted-PF ACCESS_REG false signal, on the lines in tests/captures/kernel_log (SOURCES.md)
and the real captures of tests/fixtures/dmesg."""

from __future__ import annotations

import os

import pytest
from conftest import read_capture

from ibdiag.families.kernel_log.parser import classify, parse_kernel_log
from ibdiag.families.kernel_log.signatures import SIGNATURES, signature_by_id

HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "captures")


def capture(name: str) -> str:
    with open(os.path.join(HERE, "kernel_log", name), encoding="utf-8") as handle:
        return handle.read()


RESTRICTED = {"0000:05:00.0": "mlx5_0", "0000:05:00.1": "mlx5_1", "0000:d2:00.0": "mlx5_8"}


def test_restricted_pf_access_reg_is_info_and_names_the_pf():
    findings = classify(capture("node-exporter-3434-dgx-restricted-pf-access-reg.txt"), RESTRICTED)
    assert [f.signature for f in findings] == ["mlx5.access_reg_restricted"] * 4
    assert [f.device for f in findings] == ["mlx5_0", "mlx5_0", "mlx5_1", "mlx5_1"]
    signature = signature_by_id("mlx5.access_reg_restricted")
    assert signature.severity == "info"
    assert "ignore_hcas" in signature.hint and "not a fault" in signature.title


def test_restricted_pf_line_in_journal_format():
    findings = classify(capture("gpud-1164-umbriel-cx7-restricted-pf-access-reg.txt"), RESTRICTED)
    assert [(f.signature, f.device) for f in findings] == [("mlx5.access_reg_restricted", "mlx5_8")]


def test_no_warn_or_fail_signature_claims_the_access_reg_line():
    """Whatever the order of the table, the restricted-PF line matches no warn/fail entry: the
    false signal can never drain a node, even if its own entry were removed."""
    import re

    line = parse_kernel_log(capture("node-exporter-3434-dgx-restricted-pf-access-reg.txt"))[0].text
    harsh = [s.id for s in SIGNATURES if s.severity != "info" and re.search(s.regex, line)]
    assert harsh == []


def test_other_access_reg_statuses_and_timeouts_are_not_the_false_signal():
    base = "mlx5_core 0000:05:00.0: "
    other = base + (
        "mlx5_cmd_out_err:838:(pid 1441871): ACCESS_REG(0x805) op_mod(0x1) failed, "
        "status bad resource(0x5), syndrome (0x305684), err(-22)"
    )
    timeout = base + (
        "wait_func_handle_exec_timeout:1108:(pid 2101): ACCESS_REG(0x805) timeout. "
        "Will cause a leak of a command resource"
    )
    assert [f.signature for f in classify(other, RESTRICTED)] == ["mlx5.cmd_failed"]
    assert [f.signature for f in classify(timeout, RESTRICTED)] == ["mlx5.cmd_timeout"]
    assert signature_by_id("mlx5.cmd_timeout").severity == "fail"


def test_real_gpud_access_reg_bad_resource_line_stays_a_command_error():
    log = read_capture(
        "dmesg", "gpud-kmsg-matcher-mlx5-pcie-power-module-hightemp-access-reg-fail.txt"
    )
    found = {f.signature for f in classify(log, {})}
    assert "mlx5.cmd_failed" in found and "mlx5.access_reg_restricted" not in found


def test_health_poll_miss_count_is_fatal():
    findings = classify(
        read_capture(
            "dmesg", "qemu-devel-2025-cx6dx-fw-internal-error-health-miss-count-synd1.txt"
        ),
        {"0000:0d:00.0": "mlx5_2"},
    )
    first = findings[0]
    assert "reached miss count" in first.line
    assert first.signature == "mlx5.fw_fatal" and first.device == "mlx5_2"
    assert signature_by_id(first.signature).severity == "fail"
    assert findings[1].signature == "mlx5.fw_health_error"


def test_real_command_timeout_leak_lines_are_fatal():
    log = read_capture("dmesg", "netdev-2020-s390-mlx5-health-miss-count-cmd-timeouts-leak.txt")
    leaks = [f for f in classify(log, {}) if "Will cause a leak" in f.line]
    assert leaks and {f.signature for f in leaks} == {"mlx5.cmd_timeout"}


@pytest.mark.parametrize(
    "line",
    [
        "mlx5_core 0000:3b:00.0: cmd_work_handler:877:(pid 7): cmd[3]: ENABLE_HCA(0x104) Async, "
        "timeout. Will cause a leak of a command resource",
        "mlx5_core 0000:3b:00.0: ENABLE_HCA(0x104) timeout. "
        "Will cause a leak of a command resource",
    ],
)
def test_command_timeout_forms_of_cmd_c(line):
    # cmd.c's two format strings: cb_timeout_handler ("cmd[%d]: %s(0x%x) Async, timeout. Will
    # cause a leak of a command resource") and wait_func ("%s(0x%x) timeout. Will cause ...");
    # the second is NVSentinel's own injection example.
    (finding,) = classify(line, {"0000:3b:00.0": "mlx5_4"})
    assert finding.signature in ("mlx5.cmd_timeout", "mlx5.cmd_exhausted")
    assert signature_by_id(finding.signature).severity == "fail"


def test_unrecoverable_hardware_error_is_fatal_whatever_its_severity():
    findings = classify(
        capture("handmade-health-c-unrecoverable-hardware-error.txt"), {"0000:3b:00.0": "mlx5_4"}
    )
    by_text = {f.line.split(": ", 2)[-1]: f.signature for f in findings}
    unrecoverable = [f for f in findings if "unrecoverable" in f.line]
    assert len(unrecoverable) == 2
    assert {f.signature for f in unrecoverable} == {"mlx5.hw_unrecoverable"}
    assert all(f.device == "mlx5_4" for f in findings)
    assert signature_by_id("mlx5.hw_unrecoverable").severity == "fail"
    assert "mlx5.fw_fatal" in by_text.values()  # the miss count line beside it


def test_unrecoverable_on_a_line_not_about_an_hca_is_nothing():
    assert classify("mce: [Hardware Error]: unrecoverable hardware error on CPU 3", {}) == []


def test_soft_lockup_in_mlx5_napi_is_fatal():
    findings = classify(capture("nvsentinel-mlx5-napi-soft-lockup-lines.txt"), {})
    lockups = [f for f in findings if f.signature == "kernel.soft_lockup_mlx5"]
    assert len(lockups) == 1 and lockups[0].line.startswith("watchdog: BUG: soft lockup")
    assert signature_by_id("kernel.soft_lockup_mlx5").severity == "fail"


def test_soft_lockup_with_only_a_speculative_mlx5_frame_is_not_claimed():
    text = capture("nvsentinel-mlx5-napi-soft-lockup-lines.txt").splitlines()
    # NVSentinel's lockupSpecLine in place of the RIP and frame lines
    speculative = [text[0], text[1], text[2], " ? mlx5e_napi_poll+0x142/0x680 [mlx5_core]"]
    found = [f.signature for f in classify("\n".join(speculative), {})]
    assert "kernel.soft_lockup_mlx5" not in found


def test_soft_lockup_elsewhere_is_not_an_hca_fault():
    text = (
        "watchdog: BUG: soft lockup - CPU#3 stuck for 22s! [kworker/3:1:123]\n"
        "RIP: 0010:native_queued_spin_lock_slowpath+0x40/0x1e0\n"
        " ext4_writepages+0x1c4/0x7a0 [ext4]\n"
    )
    assert classify(text, {}) == []


def test_new_entries_have_titles_hints_and_compile():
    import re

    for signature_id in (
        "mlx5.hw_unrecoverable",
        "mlx5.access_reg_restricted",
        "kernel.soft_lockup_mlx5",
    ):
        signature = signature_by_id(signature_id)
        assert signature is not None and signature.title and signature.hint
        re.compile(signature.regex)
        if signature.context:
            re.compile(signature.context)


# -- through the kernel.log check ----------------------------------------------------------------


def _results(text: str, th=None):
    from snapshots import device, pci, run, snapshot, with_runs

    from ibdiag import roles
    from ibdiag.model import CommandRun

    node = snapshot(
        [device("mlx5_0", pci=pci("0000:05:00.0")), device("mlx5_1", pci=pci("0000:05:00.1"))]
    )
    dmesg = CommandRun(
        argv=["dmesg", "--kernel", "--nopager"], role=roles.KERNEL_LOG, rc=0, stdout=text
    )
    return run("kernel.log", with_runs(node, dmesg), th)


def _graded(text: str, th=None):
    from snapshots import by_target

    return by_target(_results(text, th))


def test_the_false_signal_never_fails_a_node_and_names_each_pf():
    from ibdiag.model import Status

    results = _graded(capture("node-exporter-3434-dgx-restricted-pf-access-reg.txt"))
    assert set(results) == {"mlx5_0", "mlx5_1"}
    for result in results.values():
        assert result.status == Status.PASS, result  # info: kept as evidence, never a fault
        assert result.observed == "mlx5.access_reg_restricted"
        assert "ignore_hcas" in result.hint
    assert "0000:05:00.1" in results["mlx5_1"].message


def test_the_false_signal_of_an_ignored_pf_is_left_out():
    from ibdiag.model import Status
    from ibdiag.thresholds import Thresholds

    text = capture("node-exporter-3434-dgx-restricted-pf-access-reg.txt")
    results = _graded(text, Thresholds(ignore_hcas=["mlx5_*"]))
    assert [(t, r.status) for t, r in results.items()] == [("node", Status.PASS)]


def test_a_fatal_line_beside_the_false_signal_still_fails():
    from ibdiag.model import Status

    text = capture("node-exporter-3434-dgx-restricted-pf-access-reg.txt") + (
        "[11180.000001] mlx5_core 0000:05:00.0: wait_func_handle_exec_timeout:1108:(pid 2101): "
        "ACCESS_REG(0x805) timeout. Will cause a leak of a command resource\n"
    )
    found = {(r.target, r.observed): r.status for r in _results(text)}
    assert found[("mlx5_0", "mlx5.cmd_timeout")] == Status.FAIL
    assert found[("mlx5_0", "mlx5.access_reg_restricted")] == Status.PASS
