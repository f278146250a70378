"""The kernel's port module events as kernel-log signatures
(ibdiag.families.kernel_log.signatures): the strings of mlx5_core events.c ``port_module``
(and port.c ``mlx5_port_module_event`` before 5.0), on real captured lines where they exist
(tests/fixtures/dmesg, gpud's) and on lines made from the driver's format string where none
is public: ``"Port module event[error]: module %u, %s, %s"`` with each reason string."""

from __future__ import annotations

import pytest
from conftest import read_capture

from ibdiag.families.kernel_log.parser import classify
from ibdiag.families.kernel_log.signatures import signature_by_id

HCA = "mlx5_core 0000:0c:00.0: "
BDFS = {"0000:0c:00.0": "mlx5_0", "0000:1b:00.1": "mlx5_2", "0000:1a:00.0": "mlx5_0"}


def _only(text: str):
    (finding,) = classify(text, BDFS)
    return finding


def test_real_high_temperature_line_without_a_bdf():
    # gpud's kmsg matcher test line: mlx5_core_err's "func:line:(pid)" prefix, no device
    log = read_capture(
        "dmesg", "gpud-kmsg-matcher-mlx5-pcie-power-module-hightemp-access-reg-fail.txt"
    )
    found = {f.signature: f for f in classify(log, BDFS)}
    hot = found["mlx5.module_high_temp"]
    assert "module 0, Cable error, High Temperature" in hot.line
    assert signature_by_id("mlx5.module_high_temp").severity == "fail"


def test_real_plugged_and_unplugged_lines_name_the_hca_and_module():
    log = read_capture(
        "dmesg", "gpud-h100-boot-mlx5-insufficient-pcie-power-cable-unplugged-link-down.txt"
    )
    findings = classify(log, BDFS)
    unplugged = [f for f in findings if f.signature == "mlx5.module_unplugged"]
    plugged = [f for f in findings if f.signature == "mlx5.module_plugged"]
    mine = [f for f in unplugged if f.device == "mlx5_2"]
    assert len(mine) == 1 and "module 1, Cable unplugged" in mine[0].line
    assert any(f.device == "mlx5_0" and "module 0, Cable plugged" in f.line for f in plugged)
    assert signature_by_id("mlx5.module_unplugged").severity == "warn"
    assert signature_by_id("mlx5.module_plugged").severity == "info"


def _error(reason: str) -> str:
    return HCA + f"Port module event[error]: module 0, Cable error, {reason}"


@pytest.mark.parametrize(
    "text, signature, severity",
    [
        (_error("Power budget exceeded"), "mlx5.module_power", "fail"),
        (
            _error(
                "One or more network ports have been powered down due to insufficient/"
                "unadvertised power on the PCIe slot. Please refer to the card's user manual "
                "for power specifications or contact Mellanox support"
            ),
            "mlx5.module_power",
            "fail",
        ),
        (_error("Long Range for non MLNX cable"), "mlx5.module_unsupported", "fail"),
        (_error("Enforce part number list"), "mlx5.module_unsupported", "fail"),
        (_error("Unknown identifier"), "mlx5.module_unsupported", "fail"),
        (_error("Bus stuck(I2C or data shorted)"), "mlx5.module_error", "fail"),
        (_error("Bus stuck (I2C or data shorted)"), "mlx5.module_error", "fail"),
        (_error("No EEPROM/retry timeout"), "mlx5.module_error", "fail"),
        (_error("Bad or shorted cable/module"), "mlx5.module_error", "fail"),
        (_error("Unknown status"), "mlx5.module_error", "fail"),
        (_error("Unknown error"), "mlx5.module_error", "fail"),
        (_error("High Temperature"), "mlx5.module_high_temp", "fail"),
        (
            HCA + "temp_warn:165:(pid 0): High temperature on sensors with bit set 0 1",
            "mlx5.module_high_temp",
            "fail",
        ),
        (HCA + "Port module event: module 2, Cable unplugged", "mlx5.module_unplugged", "warn"),
        (HCA + "Port module event: module 0, Cable disabled", "mlx5.module_disabled", "warn"),
        (HCA + "Port module event: module 0, Cable plugged", "mlx5.module_plugged", "info"),
    ],
)
def test_each_module_event(text, signature, severity):
    finding = _only(text)
    assert (finding.signature, finding.device) == (signature, "mlx5_0")
    assert signature_by_id(signature).severity == severity


def test_a_reason_whose_prefix_was_cut_still_counts():
    # a line wrapped by a pager or a copy: the reason alone, on an HCA's BDF
    assert _only(HCA + "Cable error, Power budget exceeded").signature == "mlx5.module_power"
    assert _only(HCA + "Bus stuck (I2C or data shorted)").signature == "mlx5.module_error"


def test_insufficient_slot_power_warning_is_not_the_module_power_down():
    line = HCA + "mlx5_pcie_event:299:(pid 9): Detected insufficient power on the PCIe slot (27W)."
    assert _only(line).signature == "mlx5.pcie_power_insufficient"


def test_unknown_identifier_outside_a_module_event_is_not_a_module_fault():
    assert classify(HCA + "Unknown identifier in some other message", BDFS) == []


def test_module_events_on_a_non_hca_give_nothing():
    line = "ixgbe 0000:05:00.0: Port module event: module 0, Cable unplugged"
    assert [f for f in classify(line, BDFS) if f.signature.startswith("mlx5.module")] == []
