"""The HTML report's physical-layer table (``ibdiag.render.html_phy``): FEC of both ends,
coloured by the phy.* checks, and left out when nothing physical was read."""

from __future__ import annotations

from snapshots import builtin_registry, device, port, snapshot
from test_fec_check import EXTENDED, RS, degraded, fec
from test_phy_metrics import node

from ibdiag.grade import grade
from ibdiag.render.html import render
from ibdiag.render.html_phy import physical_rows
from ibdiag.thresholds import Thresholds


def report(snap):
    return grade(snap, builtin_registry(), Thresholds(), "standard")


def test_a_port_with_uncorrectable_blocks_shows_both_ends_and_the_finding():
    mine = fec(degraded(EXTENDED, FECUncorrectableBlockCtrLane1=3))
    graded = report(node(mine, fec(RS)))
    (row,) = physical_rows(graded)
    assert row["target"] == "mlx5_0:1" and row["status"] == "warn"
    assert row["fec"].endswith(f"; uncorrectable {mine.uncorrected_blocks}")
    assert row["fec"].startswith("corrected ") and "blocks (lanes 0-" in row["fec"]
    assert "symbols" in row["far_fec"]
    assert any("uncorrectable" in text for text in row["findings"])
    page = render(graded)
    assert "<h2>Physical layer</h2>" in page and row["fec"] in page


def test_no_physical_reading_no_section():
    graded = report(snapshot([device("mlx5_0", [port(1)])]))
    assert physical_rows(graded) == []
    assert "<h2>Physical layer</h2>" not in render(graded)


def test_text_from_the_far_end_is_escaped():
    far = fec(RS).model_copy(update={"layout": None, "mad_error": "<b>cannot query</b>"})
    page = render(report(node(fec(EXTENDED), far)))
    assert "not read: &lt;b&gt;cannot query&lt;/b&gt;" in page and "<b>cannot query" not in page


def module_reading(**identity):
    from module_captures import HEALTHY_NAME, capture

    from ibdiag.facts.outcome import RunOutcome
    from ibdiag.families.module import parse_module

    reading = parse_module(capture(HEALTHY_NAME))
    update = {"tool": "mlxlink", "outcome": RunOutcome(command="mlxlink")}
    if identity:
        update["identity"] = reading.identity.model_copy(update=identity)
    return reading.model_copy(update=update)


def test_cable_temperatures_ber_and_optics_of_a_port():
    from test_phy_temperature import asic, hca, module

    dev = hca(asic(), module(now=57.0))
    ib = dev.ports[0].model_copy(update={"facts": {"module": module_reading()}})
    graded = report(snapshot([dev.model_copy(update={"ports": [ib]})]))
    (row,) = physical_rows(graded)
    assert row["cable"] == (
        "CLT T-F4GS-BV0 rev A0, serial CWJH05025502589, lot 230612AB, "
        "OSFP 50 m Optical Module (separated)"
    )
    # hwmon's module sensor is the port's: mlxlink's module temperature is not shown twice
    assert row["temperature"] == "asic 47 °C (crit 105); module 0 57 °C (crit 70)"
    assert row["ber"].startswith("effective ") and row["ber"].endswith(", raw 2e-09")
    assert row["optics"].startswith("Rx ") and row["optics"].endswith(" over 4 lanes")
    assert row["status"] == "pass" and row["findings"] == []


def test_mlxlink_temperature_without_hwmon_and_a_module_vendor_is_escaped():
    ib = port(1).model_copy(
        update={"facts": {"module": module_reading(vendor="<script>x</script>")}}
    )
    graded = report(snapshot([device("mlx5_0", [ib])]))
    (row,) = physical_rows(graded)
    assert row["temperature"] == "module 54 °C (alarm [-5..75])"
    page = render(graded)
    assert "&lt;script&gt;x&lt;/script&gt; T-F4GS-BV0" in page and "<script>x" not in page
