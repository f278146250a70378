"""mlxlink/mstlink ``-m -c --json``: each typed field of the parser, each mutation, the date
code split, and odd input (never an exception, always a recorded problem)."""

from __future__ import annotations

import pytest
from module_captures import HEALTHY_NAME, capture, degraded

from ibdiag.facts.module import Bounds, split_date_code
from ibdiag.families.module import parse_module

HEALTHY = parse_module(capture(HEALTHY_NAME))


def test_healthy_identity_fields():
    identity = HEALTHY.identity
    assert identity is not None
    assert identity.vendor == "CLT"
    assert identity.part_number == "T-F4GS-BV0"
    assert identity.serial == "CWJH05025502589"
    assert identity.revision == "A0"
    assert identity.firmware is None  # "N/A" in the capture
    assert identity.date_code == "230612" and identity.lot == "AB"
    assert identity.length_m == 50.0
    assert identity.cable_type == "Optical Module (separated)"
    assert identity.identifier == "OSFP"
    assert identity.oui == "Other"
    assert identity.compliance == "400GBASE-SR4"
    assert identity.wavelength_nm == 850.0


def test_healthy_module_values_and_thresholds():
    assert HEALTHY.temperature_c == 54.0
    assert HEALTHY.temperature_alarm_c == Bounds(low=-5.0, high=75.0)
    assert HEALTHY.temperature_warning_c is None
    assert HEALTHY.voltage_mv == 3261.2
    assert HEALTHY.voltage_alarm_mv == Bounds(low=2970.0, high=3630.0)
    assert HEALTHY.rx_power_alarm_dbm == Bounds(low=-10.41, high=6.0)
    assert HEALTHY.tx_power_alarm_dbm == Bounds(low=-8.508, high=5.0)
    assert HEALTHY.tx_bias_alarm_ma == Bounds(low=2.0, high=15.0)
    assert HEALTHY.ddm is True and HEALTHY.copper is False


def test_healthy_lanes():
    lanes = HEALTHY.lanes
    assert [lane.lane for lane in lanes] == [0, 1, 2, 3]
    assert [lane.rx_power_dbm for lane in lanes] == [1.886, 1.989, 2.281, 1.976]
    assert [lane.tx_power_dbm for lane in lanes] == [1.562, 1.427, 1.559, 1.761]
    assert [lane.tx_bias_ma for lane in lanes] == [8.38] * 4
    assert [lane.los for lane in lanes] == [False] * 4
    assert [lane.tx_los for lane in lanes] == [False] * 4
    assert [lane.cdr_lol for lane in lanes] == [False] * 4
    assert [lane.tx_cdr_lol for lane in lanes] == [False] * 4
    assert [lane.tx_fault for lane in lanes] == [False] * 4
    assert [lane.datapath_state for lane in lanes] == ["DPActivated"] * 4
    assert [lane.raw_ber for lane in lanes] == [2e-9, 2e-9, 3e-9, 2e-9]
    assert [lane.raw_errors for lane in lanes] == [1052, 986, 1210, 1131]


def test_healthy_ber_operational_and_status():
    assert HEALTHY.effective_ber == pytest.approx(15e-255)
    assert HEALTHY.raw_ber == 2e-9
    assert HEALTHY.raw_ber_lanes == [2e-9, 2e-9, 3e-9, 2e-9]
    assert HEALTHY.symbol_ber == pytest.approx(15e-255)
    assert HEALTHY.effective_errors == 0
    assert (HEALTHY.state, HEALTHY.physical_state) == ("Active", "LinkUp")
    assert (HEALTHY.speed, HEALTHY.width) == ("IB-NDR", "4x")
    assert (HEALTHY.status_code, HEALTHY.status_message) == (0, "success")
    assert HEALTHY.problems == ["FW Version: N/A"]  # "LOS Alarm" (always N/A) is not read


def test_ber_1e8():
    assert parse_module(degraded("ber-1e-8")).effective_ber == 1e-8


def test_rx_under_low_alarm():
    reading = parse_module(degraded("rx-under-low-alarm"))
    assert reading.lanes[1].rx_power_dbm == -12.5
    assert reading.rx_power_alarm_dbm.outside(-12.5) == "below"


def test_los_on_lane_2():
    assert [lane.los for lane in parse_module(degraded("los-lane-2")).lanes] == [
        False, False, True, False,
    ]  # fmt: skip


def test_status_code_non_zero_is_kept_and_a_problem():
    reading = parse_module(degraded("status-error"))
    assert reading.status_code == 1
    assert reading.status_message == "-E- Failed to get PDDR register"
    assert "status.code 1: -E- Failed to get PDDR register" in reading.problems
    assert reading.effective_ber is None and reading.identity is not None


def test_n_a_values_are_none_and_problems():
    reading = parse_module(degraded("n-a"))
    assert reading.temperature_c is None and reading.temperature_alarm_c is None
    assert reading.effective_ber is None and reading.raw_ber is None
    assert reading.identity.serial is None and reading.identity.length_m is None
    assert all(lane.rx_power_dbm is None and lane.los is None for lane in reading.lanes)
    for expected in ("Temperature [C]: N/A", "Effective Physical BER: N/A",
                     "Vendor Serial Number: N/A", "Rx LOS [per lane]: lane 2 N/A"):  # fmt: skip
        assert expected in reading.problems


def test_odd_range_suffixes():
    reading = parse_module(degraded("odd-ranges"))
    assert reading.identity.length_m == 50.0  # "50m"
    assert reading.temperature_c == 54.0 and reading.temperature_alarm_c is None
    assert reading.voltage_mv == 3261.2
    assert reading.voltage_alarm_mv == Bounds(low=None, high=None)
    assert [lane.tx_power_dbm for lane in reading.lanes] == [1.562, None, 1.559, 1.761]
    text = "\n".join(reading.problems)
    assert "Temperature [C]: range [75..-5] has low above high: left out" in text
    assert "Voltage [mV]: range [low..high] is not two numbers" in text
    assert "Tx Power Current [dBm]: 'abc' is not a number" in text


def test_copper_cable():
    reading = parse_module(degraded("copper"))
    assert reading.ddm is False and reading.copper is True
    assert reading.identity.cable_type == "Passive copper cable"
    assert reading.temperature_c is None


@pytest.mark.parametrize(
    "text, expected",
    [
        ("23_06_12_AB", ("230612", "AB")),
        ("23_06_12", ("230612", None)),
        ("230612", ("230612", None)),
        ("2306121A", ("230612", "1A")),
        ("2023-06-12", ("230612", None)),
        ("23_13_12", (None, None)),
        ("N/A", (None, None)),
        ("", (None, None)),
        (None, (None, None)),
    ],
)
def test_split_date_code(text, expected):
    assert split_date_code(text) == expected


def test_bad_date_code_is_a_problem():
    text = capture(HEALTHY_NAME).replace("23_06_12_AB", "someday")
    reading = parse_module(text)
    assert reading.identity.date_code is None
    assert "date code 'someday' is not YYMMDD[LL]" in reading.problems


@pytest.mark.parametrize(
    "text",
    ["", "not json", "[]", "{}", '{"result": 3}', '{"result": {"output": {}}}',
     '{"result": {"output": {"Module Info": 7}}, "status": {"code": "x"}}', b"\xff\xfe",
     "\x1b[31m \n\x1b[0m \n"],
)  # fmt: skip
def test_garbage_never_raises(text):
    reading = parse_module(text)
    assert reading.identity is None or reading.identity.vendor is None
    assert reading.effective_ber is None


def test_ber_out_of_range_and_not_a_number():
    text = capture(HEALTHY_NAME).replace('"Effective Physical BER" : "15E-255"',
                                         '"Effective Physical BER" : "3E+2"')  # fmt: skip
    text = text.replace('"Raw Physical BER" : "2E-9"', '"Raw Physical BER" : "lots"')
    reading = parse_module(text)
    assert reading.effective_ber is None and reading.raw_ber is None
    assert "effective_ber 300 is not a bit error ratio (0..1): left out" in reading.problems
    assert "Raw Physical BER: 'lots' is not a number" in reading.problems


def test_per_lane_values_as_a_comma_string():
    text = capture(HEALTHY_NAME).replace(
        '"Rx LOS [per lane]" : { "values" : [ "0", "0", "0", "0" ] }',
        '"Rx LOS [per lane]" : "No,No,Yes,No"',
    )
    assert [lane.los for lane in parse_module(text).lanes] == [False, False, True, False]
