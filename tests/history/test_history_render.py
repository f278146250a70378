"""Where a port's past shows: the HTML report's timeline strips and the text report's finding."""

from __future__ import annotations

import re
from datetime import timedelta

from snapshots import device, loaded_registry, snapshot
from test_history_checks import ACTIVE, DOWN, T0, Node, clear

from ibdiag.grade import grade
from ibdiag.render.html import history_strips, render
from ibdiag.render.text import render as render_text
from ibdiag.thresholds import Thresholds


def graded(snap):
    return grade(snap, loaded_registry(), Thresholds(), "quick")


def flapped(tmp_path):
    node = Node(str(tmp_path / "h.db"))
    node.run(T0, ACTIVE)
    for hour in (1, 3, 5):
        node.flap(T0 + timedelta(hours=hour), 600)
    node.run(T0 + timedelta(hours=12), DOWN)
    return graded(node.run(T0 + timedelta(hours=13), DOWN))


def test_each_outage_is_a_segment_where_it_fell_in_the_window(tmp_path):
    section = history_strips(flapped(tmp_path))
    assert section is not None and section["window"] == "12h" and section["outages"] == 4
    (strip,) = section["strips"]
    assert strip["target"] == "mlx5_3:1"
    lefts = [segment["left"] for segment in strip["segments"]]
    assert lefts == [0.0, 16.67, 33.33, 91.67]  # 21:00, 23:00, 01:00, 08:00 of 21:00..09:00
    assert [segment["open"] for segment in strip["segments"]] == [False, False, False, True]
    assert strip["segments"][0]["width"] == 1.39  # 10 minutes of 12 hours
    assert strip["segments"][0]["title"] == (
        "2026-11-26 21:00:00Z - 21:10:00Z, down 10m, seen by sample"
    )


def test_the_page_draws_the_strips_and_escapes_what_an_operator_wrote(tmp_path):
    node = Node(str(tmp_path / "h.db"))
    node.run(T0, ACTIVE)
    node.flap(T0 + timedelta(hours=1), 30)
    clear(node, T0 + timedelta(hours=2), "<script>alert(1)</script> swapped")
    page = render(graded(node.run(T0 + timedelta(hours=3), ACTIVE)))
    assert "<h2>Link history (last 12h)</h2>" in page
    assert len(re.findall(r'<div class="strip">', page)) == 1
    assert "&lt;script&gt;alert(1)&lt;/script&gt; swapped" in page and "<script>" not in page


def test_no_history_no_section():
    page = render(graded(snapshot([device("mlx5_0")])))
    assert "Link history" not in page and history_strips(graded(snapshot())) is None


def test_the_text_report_names_the_flap_count_and_the_last_outage(tmp_path):
    text = render_text(flapped(tmp_path))
    line = next(line for line in text.splitlines() if "link.flaps" in line)
    assert "3 flaps in 12h: last back ACTIVE at 2026-11-27 01:10:00Z after 10m down" in line
