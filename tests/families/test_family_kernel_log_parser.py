"""The kernel-log family's parser and signature classifier (``ibdiag.families.kernel_log``), on
every capture in tests/fixtures/dmesg."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from conftest import FIXTURES_DIR, capture_names, captures_without_facts, read_capture
from hypothesis import given, settings
from hypothesis import strategies as st

from ibdiag.facts.kernel_log import KernelFinding
from ibdiag.families.kernel_log import journalctl_argv, kernel_log_argv
from ibdiag.families.kernel_log.parser import (
    KernelLine,
    classify,
    kernel_log_restriction,
    parse_kernel_log,
)
from ibdiag.families.kernel_log.signatures import (
    SEVERITIES,
    SIGNATURES,
    KernelSignature,
    signature_by_id,
)

FIXTURES = Path(FIXTURES_DIR)
FOLDER = FIXTURES / "dmesg"


def severity(finding: KernelFinding) -> str:
    """The severity of a finding's signature (the fact names the signature only)."""
    signature = signature_by_id(finding.signature)
    assert signature is not None, finding.signature
    return signature.severity


# The 12 HCAs of the gpud H100 boot log (BDFs from the log; device names invented for the test).
GPUD_BDFS = {
    "0000:1a:00.0": "mlx5_0",
    "0000:1b:00.0": "mlx5_1",
    "0000:1b:00.1": "mlx5_2",
    "0000:3c:00.0": "mlx5_3",
    "0000:4d:00.0": "mlx5_4",
    "0000:5e:00.0": "mlx5_5",
    "0000:9c:00.0": "mlx5_6",
    "0000:9d:00.0": "mlx5_7",
    "0000:9d:00.1": "mlx5_8",
    "0000:bc:00.0": "mlx5_9",
    "0000:cc:00.0": "mlx5_10",
    "0000:dc:00.0": "mlx5_11",
}

# Read from each file by hand:
#   lines: how many KernelLines; first: (seconds, wallclock, level, tag, text prefix) of line 1;
#   bdfs/netdevs: the mapping passed to classify; findings: Counter of (signature, device) —
#   exactly these, nothing else; quiet: texts (prefixes) that must give no finding.
FACTS = {
    "azurehpc-health-checks-syslog-ib6-link-flapping.txt": {
        "lines": 14,
        "first": (None, "Aug 17 00:00:24", None, "systemd[1]", "logrotate.service: Deactivated"),
        "bdfs": {},
        "netdevs": {"ib6": "mlx5_6", "ib0": "mlx5_0"},
        "findings": {
            ("link.carrier_lost", "mlx5_6"): 6,
            ("link.carrier_gained", "mlx5_6"): 6,
        },
        "quiet": ("logrotate.service", "Finished Rotate log files"),
    },
    "cx5-sriov-enable-pf1-pci_enable_sriov-failed-eio-unknown-header-7f.txt": {
        "lines": 6,
        "first": (2090.926758, None, None, None, "mlx5_core 0000:01:00.1: E-Switch: Enable"),
        "bdfs": {"0000:01:00.0": "mlx5_0", "01:00.1": "mlx5_1"},  # domain may be left out
        "netdevs": {},
        "findings": {("mlx5.sriov_enable_failed", "mlx5_1"): 1},
        "quiet": ("pci 0000:01:01.2: unknown header type", "mlx5_core 0000:01:00.1: E-Switch"),
    },
    "gpud-h100-boot-mlx5-insufficient-pcie-power-cable-unplugged-link-down.txt": {
        "lines": 96,
        "first": (
            None,
            "2025-01-17T15:36:26,128279+00:00",
            "info",
            None,
            "mlx5_core 0000:1a:00.0: firmware version: 28.39.1002",
        ),
        "bdfs": GPUD_BDFS,
        "netdevs": {"bootnet": "mlx5_1"},
        "findings": {
            **{("mlx5.pcie_power_insufficient", device): 1 for device in GPUD_BDFS.values()},
            ("mlx5.module_unplugged", "mlx5_2"): 1,
            ("mlx5.module_unplugged", "mlx5_8"): 1,
            ("link.down", "mlx5_2"): 1,
            ("link.down", "mlx5_7"): 1,
            ("link.down", "mlx5_8"): 1,
            ("link.up", "mlx5_1"): 1,
            **{
                ("mlx5.module_plugged", GPUD_BDFS[bdf]): 1
                for bdf in (
                    "0000:1a:00.0",
                    "0000:1b:00.0",
                    "0000:3c:00.0",
                    "0000:4d:00.0",
                    "0000:5e:00.0",
                    "0000:9c:00.0",
                    "0000:9d:00.0",
                    "0000:bc:00.0",
                    "0000:cc:00.0",
                    "0000:dc:00.0",
                )
            },
        },
        "quiet": ("RPC: Registered rdma transport module.", "nfs-bundle: rpcrdma loading"),
    },
    "gpud-kmsg-matcher-mlx5-pcie-power-module-hightemp-access-reg-fail.txt": {
        "lines": 3,
        "first": (None, None, None, "kernel", "mlx5_core 0000:5c:00.0: mlx5_pcie_event"),
        "bdfs": {"0000:5c:00.0": "mlx5_3"},
        "netdevs": {},
        "findings": {
            ("mlx5.pcie_power_insufficient", "mlx5_3"): 1,
            ("mlx5.module_high_temp", None): 1,
            ("mlx5.cmd_failed", None): 1,
        },
        "quiet": (),
    },
    (
        "kernel-commit-0e2909c6-mlx5-cmd_work_handler-failed-alloc-command-entry-"
        "hung-task-aarch64.txt"
    ): {
        "lines": 22,
        "first": (None, None, None, None, "mlx5_core 0000:01:00.0: cmd_work_handler:877"),
        "bdfs": {"0000:01:00.0": "mlx5_0"},
        "netdevs": {},
        "findings": {
            ("mlx5.cmd_exhausted", "mlx5_0"): 1,
            ("kernel.hung_task_ib", None): 1,
            ("kernel.call_trace_ib", None): 1,
        },
        "quiet": ("Not tainted", "__switch_to+0xe8/0x150", "mlx5_cmd_exec+0x54/0x80"),
    },
    "linux-rdma-2020-mlx4-ipoib-null-deref-port_pkey_list_insert-calltrace.txt": {
        "lines": 53,
        "first": (None, "Feb 20 23:49:53", None, "kernel", "Call Trace:"),
        "bdfs": {},
        "netdevs": {"ib0": "mlx4_0"},
        "findings": {("kernel.call_trace_ib", None): 1},
        "quiet": ("ipoib_init_qp+0x77/0x190 [ib_ipoib]", "__dev_open+0xcd/0x160"),
    },
    "netdev-2020-s390-mlx5-health-miss-count-cmd-timeouts-leak.txt": {
        "lines": 14,
        "first": (103.257202, None, None, None, "mlx5_core 0000:00:00.0: poll_health:702"),
        "bdfs": {"0000:00:00.0": "mlx5_0"},
        "netdevs": {},
        "findings": {
            ("mlx5.fw_fatal", "mlx5_0"): 2,
            ("mlx5.fw_health_report", "mlx5_0"): 2,
            ("mlx5.cmd_timeout", "mlx5_0"): 7,
        },
        "quiet": ("...", "infiniband mlx5_0: destroy_qp_common"),
    },
    "qemu-devel-2025-cx6dx-fw-internal-error-health-miss-count-synd1.txt": {
        "lines": 42,
        "first": (445.937186, None, None, None, "mlx5_core 0000:0d:00.0: poll_health:801"),
        # the two PFs; 0d:00.2-.5 are VFs nobody mapped: their findings have no device
        "bdfs": {"0000:0d:00.0": "mlx5_0", "0000:0d:00.1": "mlx5_1"},
        "netdevs": {},
        "findings": {
            ("mlx5.fw_fatal", "mlx5_0"): 1,
            ("mlx5.fw_fatal", "mlx5_1"): 1,
            ("mlx5.fw_fatal", None): 4,
            ("mlx5.fw_health_error", "mlx5_0"): 1,
            ("mlx5.fw_health_error", "mlx5_1"): 1,
            ("mlx5.fw_health_report", "mlx5_0"): 17,
            ("mlx5.fw_health_report", "mlx5_1"): 17,
        },
        "quiet": (),
    },
    "rp-ext-issue129-cx4121-connectx4lx-handle_hca_cap-failed-probe-22.txt": {
        "lines": 4,
        "first": (5.376443, None, None, None, "mlx5_core 0000:01:00.0: firmware version"),
        "bdfs": {},  # the HCA never came up: no RDMA device to map it to
        "netdevs": {},
        "findings": {("mlx5.probe_failed", None): 3},
        "quiet": ("mlx5_core 0000:01:00.0: firmware version: 14.32.1010",),
    },
    "tinycore-redpill-issue9-connectx4lx-probe-failed-handle_hca_cap-einval.txt": {
        "lines": 6,
        "first": (12.925245, None, None, None, "mlx5_core 0000:03:00.0: enabling device"),
        "bdfs": {},
        "netdevs": {},
        "findings": {("mlx5.probe_failed", None): 3},
        "quiet": (
            "mlx5_core 0000:03:00.0: 0000:03:00.0:handle_hca_cap:438",  # log_max_qp notice
            "mlx5_core 0000:03:00.0: enabling device",
        ),
    },
}


def _dmesg(name):
    return read_capture("dmesg", name)


def test_fixture_folder_present():
    assert FOLDER.is_dir(), f"{FOLDER} is missing: the kernel-log tests read the real captures"


def test_every_capture_has_facts():
    missing = captures_without_facts("dmesg", FACTS)
    assert not missing, f"captures without facts in {__file__}: {missing}"


@pytest.mark.parametrize("name", capture_names("dmesg"))
def test_capture(name):
    text = _dmesg(name)
    facts = FACTS.get(name)
    assert facts is not None, f"write the facts of {name} into FACTS"
    lines = parse_kernel_log(text)
    assert len(lines) == facts["lines"]
    seconds, wallclock, level, tag, prefix = facts["first"]
    first = lines[0]
    assert first.seconds == seconds
    assert first.wallclock == wallclock
    assert first.level == level
    assert first.tag == tag
    assert first.text.startswith(prefix), first.text
    # decorations are gone from every line
    for line in lines:
        assert not re.match(r"^\[\s*\d+\.\d+\]", line.text), line.text
        assert not line.text.startswith(("kern  :", "Aug 17", "Feb 20"))
    findings = classify(lines, facts["bdfs"], facts["netdevs"])
    assert Counter((f.signature, f.device) for f in findings) == Counter(facts["findings"])
    for finding in findings:
        signature = signature_by_id(finding.signature)
        assert signature is not None
        assert isinstance(finding, KernelFinding)
        assert finding.line in {line.text for line in lines}
    found_texts = {f.line for f in findings}
    for quiet in facts["quiet"]:
        assert not any(t.startswith(quiet) for t in found_texts), quiet
        assert any(line.text.startswith(quiet) for line in lines), f"{quiet!r} not in capture"
    # classify also takes the raw text
    assert Counter(f.signature for f in classify(text, facts["bdfs"], facts["netdevs"])) == (
        Counter(f.signature for f in findings)
    )


@pytest.mark.parametrize("name", capture_names("dmesg"))
def test_capture_truncated(name):
    text = _dmesg(name)
    for cut in (1, len(text) // 2, len(text) - 2):
        classify(parse_kernel_log(text[:cut]), {"0000:00:00.0": "mlx5_0"}, {"ib0": "mlx5_0"})


def test_link_flapping_without_a_netdev_map_still_counts_for_ib_netdevs():
    findings = classify(_dmesg("azurehpc-health-checks-syslog-ib6-link-flapping.txt"))
    assert Counter(f.signature for f in findings) == {
        "link.carrier_lost": 6,
        "link.carrier_gained": 6,
    }
    assert {f.device for f in findings} == {None}


def test_insufficient_power_capture_gives_power_signature_per_hca():
    text = read_capture(
        "dmesg", "gpud-h100-boot-mlx5-insufficient-pcie-power-cable-unplugged-link-down.txt"
    )
    power = [f for f in classify(text, GPUD_BDFS) if f.signature == "mlx5.pcie_power_insufficient"]
    assert sorted(f.device for f in power) == sorted(GPUD_BDFS.values())
    assert all(severity(f) == "warn" for f in power)


def test_fatal_syndrome_capture_gives_firmware_fail():
    text = read_capture(
        "dmesg", "qemu-devel-2025-cx6dx-fw-internal-error-health-miss-count-synd1.txt"
    )
    findings = classify(text, {"0000:0d:00.0": "mlx5_0"})
    fails = {(f.signature, f.device) for f in findings if severity(f) == "fail"}
    assert ("mlx5.fw_fatal", "mlx5_0") in fails
    assert ("mlx5.fw_health_error", "mlx5_0") in fails
    synd = [f for f in findings if "synd 0x1: firmware internal error" in f.line]
    assert synd and synd[0].signature == "mlx5.fw_health_report"


def test_null_deref_header_before_the_ib_call_trace():
    """The capture's call trace with the 'BUG:' header of the same oops put back in front."""
    trace = read_capture(
        "dmesg", "linux-rdma-2020-mlx4-ipoib-null-deref-port_pkey_list_insert-calltrace.txt"
    )
    text = (
        "Feb 20 23:49:53 T630 kernel: BUG: kernel NULL pointer dereference, address: "
        "0000000000000010\n"
        "Feb 20 23:49:53 T630 kernel: #PF: supervisor read access in kernel mode\n"
        "Feb 20 23:49:53 T630 kernel: Modules linked in: mlx4_ib ib_ipoib ib_core mlx4_core\n"
        + trace
    )
    findings = classify(text)
    assert [(f.signature, severity(f)) for f in findings] == [
        ("kernel.null_deref_ib", "fail"),
        ("kernel.call_trace_ib", "warn"),
    ]


UNRELATED = """\
[  100.000001] e1000e 0000:00:1f.6 eno1: NIC Link is Down
[  100.000002] e1000e 0000:00:1f.6 eno1: NIC Link is Up 1000 Mbps Full Duplex
[  100.000003] pcieport 0000:00:01.0: AER: Corrected error received: 0000:05:00.0
[  100.000004] nvidia 0000:05:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Data
[  100.000005] nvme nvme0: I/O 12 QID 3 timeout, aborting
[  100.000006] eth0: lost carrier
[  100.000007] usb 1-1: USB disconnect, device number 2
[  100.000008] i40e 0000:3b:00.0: probe of 0000:3b:00.0 failed with error -5
[  100.000009] BUG: kernel NULL pointer dereference, address: 0000000000000008
[  100.000010] RIP: 0010:nvme_complete_rq+0x1c/0x1e0 [nvme_core]
[  100.000011] Modules linked in: mlx5_ib mlx5_core ib_core nvme
[  100.000012] Call Trace:
[  100.000013]  blk_mq_end_request+0x20/0x30
[  100.000014]  nvme_pci_complete_rq+0x50/0x60 [nvme]
[  100.000015] ---[ end trace 0123456789abcdef ]---
[  200.000000] INFO: task jbd2/sda1-8:412 blocked for more than 120 seconds.
[  200.000001] Call Trace:
[  200.000002]  jbd2_journal_commit_transaction+0x1a1/0x1d40 [jbd2]
[  200.000003] thermal thermal_zone0: critical temperature reached (105 C), shutting down
[  200.000004] CPU3: Core temperature above threshold, cpu clock throttled
[  200.000005] Fatal error 3 detected by the BMC watchdog
"""


def test_unrelated_lines_give_no_findings():
    bdfs = {"0000:0c:00.0": "mlx5_0"}
    assert classify(parse_kernel_log(UNRELATED), bdfs, {"ib0": "mlx5_0"}) == []
    assert classify(parse_kernel_log(UNRELATED)) == []


def test_aer_on_an_hca_bdf():
    text = (
        "[  10.1] pcieport 0000:00:01.1: AER: Corrected error received: 0000:0c:00.0\n"
        "[  10.2] mlx5_core 0000:0c:00.0: PCIe Bus Error: severity=Corrected, type=Physical "
        "Layer, (Receiver ID)\n"
        "[  10.3] pcieport 0000:00:01.1: AER: Uncorrected (Non-Fatal) error received: "
        "0000:0c:00.0\n"
        "[  10.4] pcieport 0000:00:01.1: AER: Uncorrected (Fatal) error received: 0000:0C:00.0\n"
        "[  10.5] pcieport 0000:00:02.1: AER: Corrected error received: 0000:0d:00.0\n"
    )
    findings = classify(text, {"0000:0c:00.0": "mlx5_0"})
    assert [(f.signature, f.device, f.seconds) for f in findings] == [
        ("pcie.aer_corrected", "mlx5_0", 10.1),
        ("pcie.aer_corrected", "mlx5_0", 10.2),
        ("pcie.aer_nonfatal", "mlx5_0", 10.3),
        ("pcie.aer_fatal", "mlx5_0", 10.4),
    ]
    assert [severity(f) for f in findings] == ["warn", "warn", "fail", "fail"]


def test_device_attribution_by_name_netdev_and_child_interface():
    text = (
        "[ 1.0] infiniband mlx5_3: mlx5_ib_event: port 1 lost carrier\n"
        "[ 2.0] mlx5_ib0: Link down\n"
        "[ 3.0] ib4: lost carrier\n"
        "[ 4.0] ib4.8001: Gained carrier\n"
        "[ 5.0] enp27s0f0np0: Link up\n"
    )
    findings = classify(text, {}, {"ib4": "mlx5_6", "enp27s0f0np0": "mlx5_1"})
    assert [(f.signature, f.device) for f in findings] == [
        ("link.carrier_lost", "mlx5_3"),
        ("link.down", "mlx5_ib0"),
        ("link.carrier_lost", "mlx5_6"),
        ("link.carrier_gained", "mlx5_6"),
        ("link.up", "mlx5_1"),
    ]


@pytest.mark.parametrize(
    "line, expected",
    [
        ("[ 1234.567890] mlx5_core 0000:0c:00.0: msg", (1234.56789, None, None, None)),
        ("kern  :err   : [ 12.5] mlx5_core 0000:0c:00.0: msg", (12.5, "err", None, None)),
        (
            "[   12.345678] node17 kernel: mlx5_core 0000:0c:00.0: msg",
            (12.345678, None, None, "kernel"),
        ),
        (
            "Mar  1 12:00:00 node17 kernel: [ 7.25] mlx5_core 0000:0c:00.0: msg",
            (7.25, None, "Mar  1 12:00:00", "kernel"),
        ),
        (
            "[Mon Mar  1 12:00:00 2021] mlx5_core 0000:0c:00.0: msg",
            (None, None, "Mon Mar  1 12:00:00 2021", None),
        ),
        ("<3>[ 9.0] mlx5_core 0000:0c:00.0: msg", (9.0, "err", None, None)),
        ("4,1234,5678901,-;mlx5_core 0000:0c:00.0: msg", (5.678901, "warn", None, None)),
        (
            "2025-01-17T15:36:26+0000 node17 kernel: mlx5_core 0000:0c:00.0: msg",
            (None, None, "2025-01-17T15:36:26+0000", "kernel"),
        ),
        ("node17 kernel: mlx5_core 0000:0c:00.0: msg", (None, None, None, "kernel")),
        ("   mlx5_core 0000:0c:00.0: msg", (None, None, None, None)),
    ],
)
def test_line_formats(line, expected):
    (parsed,) = parse_kernel_log(line)
    assert (parsed.seconds, parsed.level, parsed.wallclock, parsed.tag) == expected
    assert parsed.text == "mlx5_core 0000:0c:00.0: msg"


def test_journal_markers_and_blank_lines_dropped():
    text = "-- Logs begin at Mon 2024-01-01 --\n\n[ 1.0] a\n-- Boot 1234abcd --\n[ 2.0] b\n"
    assert [line.text for line in parse_kernel_log(text)] == ["a", "b"]


@pytest.mark.parametrize(
    "junk",
    ["", "\n\n\n", "\x00\x01\xff" * 100, "[ 1.0]", "[", "kern  :", "A" * 200_000, "\r\n" * 10],
)
def test_garbage_never_raises(junk):
    lines = parse_kernel_log(junk)
    assert all(isinstance(line, KernelLine) for line in lines)
    assert classify(lines, {"bad key": "x", "0000:0c:00.0": ""}, {"": "mlx5_0"}) == []


def test_binary_and_odd_arguments_never_raise():
    data = bytes(range(256)) * 16
    assert isinstance(parse_kernel_log(data), list)
    classify(data, None, None)
    classify(None)
    classify([KernelLine(None, "mlx5_core 0000:0c:00.0: Link down")], {1: 2}, {None: 3})
    bad = (KernelSignature("x.bad", "([unclosed", "fail", "t", "h"),)
    assert classify("mlx5_0: Link down", signatures=bad) == []


@settings(max_examples=150, deadline=None)
@given(st.text())
def test_any_text_never_raises(text):
    classify(parse_kernel_log(text), {"0000:0c:00.0": "mlx5_0"}, {"ib0": "mlx5_0"})


def test_large_log_is_fast():
    import time

    text = read_capture(
        "dmesg", "gpud-h100-boot-mlx5-insufficient-pcie-power-cable-unplugged-link-down.txt"
    )
    big = (text + "\n" + UNRELATED) * 200  # ~24k lines
    start = time.perf_counter()
    findings = classify(parse_kernel_log(big), GPUD_BDFS, {"ib0": "mlx5_0"})
    assert len(findings) == 28 * 200
    assert time.perf_counter() - start < 10


def test_restriction_reason():
    assert kernel_log_restriction(
        "dmesg: read kernel buffer failed: Operation not permitted\n"
    ).startswith("dmesg: read kernel buffer failed")
    assert "insufficient permissions" in kernel_log_restriction(
        "No journal files were opened due to insufficient permissions.\n"
    )
    assert kernel_log_restriction("[ 1.0] mlx5_core: all fine\n") is None
    assert kernel_log_restriction(b"\xff\xfe") is None


def test_argv():
    argv = kernel_log_argv()
    assert argv[0] == "dmesg"
    # never clear the ring buffer, never wall-clock stamps, never follow
    for flag in ("-c", "-C", "--clear", "--read-clear", "-T", "--ctime", "-w", "--follow"):
        assert flag not in argv
    assert journalctl_argv() == ["journalctl", "-k", "-b", "--no-pager", "-o", "short-monotonic"]


REQUIRED = {
    "mlx5.fw_fatal",
    "mlx5.fw_health_error",
    "mlx5.fw_health_report",
    "mlx5.cmd_timeout",
    "mlx5.cmd_exhausted",
    "mlx5.module_unplugged",
    "mlx5.module_high_temp",
    "mlx5.pcie_power_insufficient",
    "link.down",
    "link.up",
    "link.carrier_lost",
    "link.carrier_gained",
    "pcie.aer_corrected",
    "pcie.aer_nonfatal",
    "pcie.aer_fatal",
    "mlx5.probe_failed",
    "mlx5.sriov_enable_failed",
    "kernel.null_deref_ib",
    "kernel.call_trace_ib",
    "kernel.hung_task_ib",
}


def test_signature_table_is_well_formed():
    ids = [s.id for s in SIGNATURES]
    assert len(ids) == len(set(ids))
    assert REQUIRED <= set(ids)
    for signature in SIGNATURES:
        assert re.fullmatch(r"[a-z0-9_]+\.[a-z0-9_]+", signature.id), signature.id
        assert signature.severity in SEVERITIES
        re.compile(signature.regex)
        if signature.context:
            re.compile(signature.context)
            assert signature.context_lines > 0
        assert signature.title and signature.hint
        # a drain reason names the signature, never a time or a line number
        assert not re.search(r"\d{1,2}:\d{2}|\[\s*\d+\.\d+\]|line \d", signature.title)
        with pytest.raises(AttributeError):
            signature.severity = "info"  # type: ignore[misc]


HCA = "mlx5_core 0000:0c:00.0: "


@pytest.mark.parametrize(
    "text, signature",
    [
        (HCA + "poll_health:702:(pid 9): Fatal error 1 detected", "mlx5.fw_fatal"),
        (HCA + "health poll failed", "mlx5.fw_fatal"),
        (HCA + "print_health_info:3:(pid 0): assert_var[0] 0x1", "mlx5.fw_health_report"),
        (
            HCA + "wait_func:1008:(pid 73): DESTROY_CQ(0x401) timeout. Will cause a leak of a "
            "command resource",
            "mlx5.cmd_timeout",
        ),
        (
            HCA + "cmd_work_handler:877:(pid 1): failed to allocate command entry",
            "mlx5.cmd_exhausted",
        ),
        (HCA + "Port module event: module 0, Cable unplugged", "mlx5.module_unplugged"),
        (
            HCA + "Port module event[error]: module 0, Cable error, Bad or shorted cable/module",
            "mlx5.module_error",
        ),
        (
            HCA
            + "mlx5_pcie_event:299:(pid 9): Detected insufficient power on the PCIe slot (27W).",
            "mlx5.pcie_power_insufficient",
        ),
        ("mlx5_core 0000:0c:00.0 enp12s0np0: Link down", "link.down"),
        ("mlx5_core: probe of 0000:0c:00.0 failed with error -22", "mlx5.probe_failed"),
        (
            HCA + "mlx5_sriov_enable:195:(pid 1): pci_enable_sriov failed : -5",
            "mlx5.sriov_enable_failed",
        ),
    ],
)
def test_each_signature_on_a_typical_line(text, signature):
    (finding,) = classify(text, {"0000:0c:00.0": "mlx5_0"})
    assert finding.signature == signature and finding.device == "mlx5_0"
