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
