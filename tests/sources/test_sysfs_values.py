"""Table-driven tests for the parsers of single sysfs attribute texts (sysfs_values.py).

Every accepted form comes from a kernel or a real capture; every rejected form must raise
ValueError whose message quotes the offending text, so the problem map stays readable.
"""

from __future__ import annotations

import pytest

from ibdiag.model import LinkRate
from ibdiag.sources import sysfs_values as parse

# --- rate -------------------------------------------------------------------------------------

RATES = [
    # text, gbps, lanes, speed, width, describe()
    ("400 Gb/sec (4X NDR)", 400.0, 4, "NDR", "4X", "400 Gb/s (4X NDR)"),
    ("200 Gb/sec (4X HDR)", 200.0, 4, "HDR", "4X", "200 Gb/s (4X HDR)"),
    ("100 Gb/sec (2X HDR)", 100.0, 2, "HDR", "2X", "100 Gb/s (2X HDR)"),
    ("100 Gb/sec (4X EDR)", 100.0, 4, "EDR", "4X", "100 Gb/s (4X EDR)"),
    ("56 Gb/sec (4X FDR)", 56.0, 4, "FDR", "4X", "56 Gb/s (4X FDR)"),
    ("40 Gb/sec (4X FDR10)", 40.0, 4, "FDR10", "4X", "40 Gb/s (4X FDR10)"),
    ("40 Gb/sec (4X QDR)", 40.0, 4, "QDR", "4X", "40 Gb/s (4X QDR)"),
    ("5 Gb/sec (1X DDR)", 5.0, 1, "DDR", "1X", "5 Gb/s (1X DDR)"),
    ("2.5 Gb/sec (1X SDR)", 2.5, 1, "SDR", "1X", "2.5 Gb/s (1X SDR)"),
    # Old kernels print no speed name for SDR (the node_exporter i40iw capture has this).
    ("10 Gb/sec (4X)", 10.0, 4, None, "4X", "10 Gb/s (4X)"),
    ("800 Gb/sec (4X XDR)", 800.0, 4, "XDR", "4X", "800 Gb/s (4X XDR)"),
    # RoCE ports report their Ethernet speed in the same form.
    ("25 Gb/sec (1X EDR)", 25.0, 1, "EDR", "1X", "25 Gb/s (1X EDR)"),
    ("100 Gb/sec (2X HDR100)", 100.0, 2, "HDR100", "2X", "100 Gb/s (2X HDR100)"),
    ("1600 Gb/sec (8X XDR)", 1600.0, 8, "XDR", "8X", "1600 Gb/s (8X XDR)"),
    ("120 Gb/sec (12X QDR)", 120.0, 12, "QDR", "12X", "120 Gb/s (12X QDR)"),
    ("14 Gb/sec (1X FDR)", 14.0, 1, "FDR", "1X", "14 Gb/s (1X FDR)"),
    # As read from the file: trailing newline, stray blanks.
    ("200 Gb/sec (4X HDR)\n", 200.0, 4, "HDR", "4X", "200 Gb/s (4X HDR)"),
    ("  400 Gb/sec (4X NDR)  \n", 400.0, 4, "NDR", "4X", "400 Gb/s (4X NDR)"),
]


@pytest.mark.parametrize(("text", "gbps", "lanes", "speed", "width", "described"), RATES)
def test_parse_rate(text, gbps, lanes, speed, width, described):
    rate = parse.parse_rate(text)
    assert isinstance(rate, LinkRate)
    assert rate.gbps == gbps
    assert isinstance(rate.gbps, float)
    assert rate.lanes == lanes
    assert rate.speed == speed
    assert rate.width == width
    assert rate.describe() == described
    assert rate.raw == text.strip()


@pytest.mark.parametrize("text", [row[0] for row in RATES])
def test_parse_rate_builds_a_valid_model(text):
    """parse_rate uses model_construct: what it builds must survive validation unchanged."""
    rate = parse.parse_rate(text)
    assert LinkRate.model_validate(rate.model_dump()) == rate
    assert LinkRate.model_validate_json(rate.model_dump_json()) == rate


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n",
        "N/A (no PMA)",
        "fast",
        "Gb/sec",
        "400",
        "400 Gb/s (4X NDR)",
        "400 Gbps",
        "400 Gb/sec (NDR)",
        "400 Gb/sec 4X NDR",
        "400 Gb/sec (4X NDR",
        "-400 Gb/sec (4X NDR)",
        "Gb/sec (4X NDR)",
        "400 Gb/sec (4X NDR) extra",
    ],
)
def test_parse_rate_rejects_garbage_with_readable_message(text):
    with pytest.raises(ValueError) as excinfo:
        parse.parse_rate(text)
    message = str(excinfo.value)
    assert repr(text) in message
    assert "Gb/sec" in message  # says what form was expected


# --- enums: state, phys_state, node_type ---------------------------------------------------------

ENUMS = [
    ("4: ACTIVE", 4, "ACTIVE"),
    ("4: ACTIVE\n", 4, "ACTIVE"),
    ("1: DOWN", 1, "DOWN"),
    ("2: INIT", 2, "INIT"),
    ("3: ARMED", 3, "ARMED"),
    ("5: LinkUp", 5, "LinkUp"),
    ("2: Polling", 2, "Polling"),
    ("3: Disabled", 3, "Disabled"),
    ("6: LinkErrorRecovery", 6, "LinkErrorRecovery"),
    ("7: Phy Test", 7, "Phy Test"),  # older kernels spell it with a space
    ("5: ACTIVE_DEFER", 5, "ACTIVE_DEFER"),
    ("0: <unknown>", 0, "<unknown>"),
    ("1: CA", 1, "CA"),
    ("4: RNIC", 4, "RNIC"),
    ("  2 : Polling  \n", 2, "Polling"),
]


@pytest.mark.parametrize(("text", "code", "name"), ENUMS)
def test_parse_enum(text, code, name):
    assert parse.parse_enum(text) == (code, name)
    assert isinstance(parse.parse_enum(text)[0], int)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "ACTIVE",
        "4",
        ": ACTIVE",
        "four: ACTIVE",
        "-1: DOWN",
        "N/A (no PMA)",
        "4 ACTIVE",
        "0x4: X",
    ],
)
def test_parse_enum_rejects_bad_forms(text):
    with pytest.raises(ValueError) as excinfo:
        parse.parse_enum(text)
    assert repr(text) in str(excinfo.value)
    assert "N: NAME" in str(excinfo.value)


# --- counters and plain integers ---------------------------------------------------------------

U64_MAX = 18446744073709551615


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("0\n", 0),
        ("12345\n", 12345),
        ("  7  ", 7),
        ("4294967295", 4294967295),  # a saturated 32-bit counter (mlx4 port_xmit_wait)
        ("9837712934", 9837712934),
        ("18446744073709551615", U64_MAX),
        ("18446744073709551615\n", U64_MAX),
    ],
)
def test_parse_counter(text, value):
    assert parse.parse_counter(text) == value
    assert type(parse.parse_counter(text)) is int


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("-1", "negative counter"),
        ("-18446744073709551615", "negative counter"),
        ("N/A (no PMA)", "not a number"),
        ("", "not a number"),
        ("\n", "not a number"),
        ("1.5", "not a number"),
        ("0x10", "not a number"),
        ("12 34", "not a number"),
        ("1e3", "not a number"),
        ("lots", "not a number"),
    ],
)
def test_parse_counter_rejects(text, reason):
    with pytest.raises(ValueError) as excinfo:
        parse.parse_counter(text)
    assert reason in str(excinfo.value)
    assert repr(text) in str(excinfo.value)


def test_parse_counter_rejects_values_wider_than_64_bits():
    """The docstring promises "up to 64 bits": 2**64 cannot come from a kernel counter."""
    with pytest.raises(ValueError) as excinfo:
        parse.parse_counter(str(U64_MAX + 1))
    assert str(U64_MAX + 1) in str(excinfo.value)


@pytest.mark.parametrize(("text", "value"), [("-1", -1), ("0", 0), ("1\n", 1), ("4092", 4092)])
def test_parse_int_allows_negative_numa_node(text, value):
    assert parse.parse_int(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1.0", "- 1", "0x1", "N/A"])
def test_parse_int_rejects(text):
    with pytest.raises(ValueError, match="not a number"):
        parse.parse_int(text)


# --- lid / sm_lid ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0x3a4", 932),
        ("0x3a4\n", 932),
        ("0X3A4", 932),
        ("0x0", 0),
        ("0x1", 1),
        ("0xffff", 65535),
        ("0xc000", 49152),
        ("932", 932),
        ("0", 0),
        ("  0x12  ", 18),
    ],
)
def test_parse_hex_or_int(text, value):
    assert parse.parse_hex_or_int(text) == value


@pytest.mark.parametrize("text", ["", "lid", "sm_lid", "0x", "0xg1", "3a4", "0x3a4 0x1", "N/A"])
def test_parse_hex_or_int_rejects(text):
    with pytest.raises(ValueError) as excinfo:
        parse.parse_hex_or_int(text)
    assert str(excinfo.value) == f"not a number: {text!r}"


# --- PCIe link speed and width -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "gts"),
    [
        ("16.0 GT/s PCIe", 16.0),
        ("16.0 GT/s PCIe\n", 16.0),
        ("16 GT/s", 16.0),
        ("16 GT/s\n", 16.0),
        ("8 GT/s", 8.0),
        ("8.0 GT/s PCIe", 8.0),
        ("5.0 GT/s PCIe", 5.0),
        ("2.5 GT/s PCIe", 2.5),
        ("2.5 GT/s", 2.5),
        ("32.0 GT/s PCIe", 32.0),
        ("64.0 GT/s PCIe", 64.0),
    ],
)
def test_parse_pcie_speed(text, gts):
    value = parse.parse_pcie_speed(text)
    assert value == gts
    assert isinstance(value, float)


@pytest.mark.parametrize(
    "text", ["Unknown", "Unknown\n", "Unknown speed", "", "16", "fast", "16.0 Gb/s", "GT/s"]
)
def test_parse_pcie_speed_rejects(text):
    with pytest.raises(ValueError) as excinfo:
        parse.parse_pcie_speed(text)
    assert repr(text) in str(excinfo.value)
    assert "GT/s" in str(excinfo.value)


@pytest.mark.parametrize(
    ("text", "lanes"),
    [("16", 16), ("16\n", 16), ("x8", 8), ("X16", 16), (" x1 \n", 1), ("4", 4), ("32", 32)],
)
def test_parse_pcie_width(text, lanes):
    assert parse.parse_pcie_width(text) == lanes


@pytest.mark.parametrize("text", ["", "x", "sixteen", "16x", "N/A", "8.0", "x16x"])
def test_parse_pcie_width_rejects(text):
    with pytest.raises(ValueError, match="not a number"):
        parse.parse_pcie_width(text)
