"""The fleet's HTML page (``ibdiag.fleet.render_html``): every section of a hand-built
``FleetReport`` shown, an empty section saying "None.", hostile names inert, and the page
loaded for real in headless Chromium - self-contained, fetching nothing - with the helpers
(tests/chromium_pages.py) and the ``chromium`` fixture (tests/conftest.py) the node page's
tests use.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from html import unescape
from pathlib import Path
from typing import Dict

import pytest
from chromium_pages import HOSTILE, assert_renders_in_chromium, assert_self_contained

from ibdiag.fleet import render_html as fleet_html
from ibdiag.fleet.report import (
    Drift,
    DriftValue,
    FleetReport,
    FleetSettings,
    NodeGroup,
    Outlier,
    RailMisplacement,
    ReadProblem,
    SuspectSwitch,
    SwitchPort,
)

ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;&#34;&#39;&amp;"  # HOSTILE, autoescaped
SECTIONS = (
    "drain",
    "switches",
    "outliers",
    "drift",
    "rails",
    "missing",
    "warnings",
    "unknown",
    "read-problems",
    "duplicates",
    "read-notes",
)
WHEN = datetime(2025, 3, 4, 5, 6, 7, tzinfo=timezone.utc)


def full_report(evil: str = HOSTILE) -> FleetReport:
    """Every section filled; ``evil`` in every free-text field a node or switch could set."""
    slow = Outlier(
        host=f"gpu501{evil}",
        metric="ib_write_bw_gbps",
        rail=3,
        value=318.4,
        median=392.25,
        mad=1.5,
        gap=-0.1883,
        peers=20,
        direction="low",
    )
    return FleetReport(
        tool_version="9.8.7",
        generated_at=WHEN,
        settings=FleetSettings(switch_min_nodes=4, outlier_margin=0.15),
        verdict="CRITICAL",
        verdict_reason=f"3 nodes CRITICAL, 1 expected node missing {evil}",
        nodes_read=21,
        counts={"OK": 11, "WARNING": 2, "CRITICAL": 3, "UNKNOWN": 1, "MISSING": 1},
        drain=[
            NodeGroup(reason=f"link.state mlx5_3:1 DOWN {evil}", nodes="gpu[001-002]", count=2),
            NodeGroup(reason="pcie.width mlx5_0 x8", nodes=f"gpu017{evil}", count=1),
        ],
        switch_suspect=[
            NodeGroup(reason="counters.partner symbol_error", nodes="gpu[101-104]", count=4),
        ],
        warnings=[NodeGroup(reason="fw.version old", nodes="gpu[201,203]", count=2)],
        unknown=[NodeGroup(reason="ibstat timed out", nodes="gpu301", count=1)],
        missing=NodeGroup(reason="expected, no report", nodes="gpu[401]", count=1),
        outliers=[
            slow,
            Outlier(
                host="gpu502",
                metric="error_rate:symbol_error",
                rail=1,
                value=42.0,
                median=0.0,
                mad=0.0,
                gap=0.0,
                peers=19,
                direction="high",
            ),
            Outlier(
                host="gpu503",
                metric="nccl_tests_busbw_gbytes",
                rail=None,
                value=151.0,
                median=188.5,
                mad=2.0,
                gap=-0.199,
                peers=21,
                direction="low",
            ),
        ],
        drift=[
            Drift(
                attribute="fw_ver",
                rail=0,
                majority="28.39.1002",
                majority_count=19,
                others=[
                    DriftValue(value=f"28.36.1010{evil}", nodes="gpu601", count=1),
                    DriftValue(value="(unknown)", nodes="gpu602", count=1),
                ],
            ),
            Drift(
                attribute="kernel_release",
                majority="6.1.0-28-amd64",
                majority_count=20,
                others=[DriftValue(value="5.10.0-30-amd64", nodes="gpu603", count=1)],
            ),
        ],
        switches=[
            SuspectSwitch(
                peer_guid="0x7cfe900300aabb01",
                peer_name="leaf09",
                failing_ports=[
                    SwitchPort(peer_port=5, host="gpu701", target="mlx5_2:1", checks=["link.state"])
                ],
                failing_nodes="gpu701",
                failing_node_count=1,
                attached_node_count=16,
                attached_port_count=16,
                suspect=False,
                outlying_ports=[
                    SwitchPort(peer_port=6, host=slow.host, target="mlx5_3:1", outliers=[slow])
                ],
                outlying_nodes=slow.host,
                outlying_node_count=1,
            ),
            SuspectSwitch(
                peer_guid=f"0x7cfe900300aabb07{evil}",
                peer_name=f"leaf07{evil}",
                failing_ports=[
                    SwitchPort(
                        peer_port=21,
                        host="gpu101",
                        target="mlx5_3:1",
                        checks=["counters.partner", "link.partner"],
                    ),
                    SwitchPort(
                        peer_port=None, host=f"gpu102{evil}", target="mlx5_3:1", checks=[evil]
                    ),
                ],
                failing_nodes="gpu[101-104]",
                failing_node_count=4,
                attached_node_count=8,
                attached_port_count=8,
                suspect=True,
            ),
        ],
        rail_misplacements=[
            RailMisplacement(
                host="gpu801",
                rail=2,
                target="mlx5_2:1",
                peer_name=f"leaf05{evil}",
                expected=["leaf03", "leaf04"],
            )
        ],
        read_problems=[
            ReadProblem(source=f"/reports/gpu901{evil}.json", reason="truncated JSON at byte 812"),
            ReadProblem(source="/reports/notes.txt", reason="not an ibdiag report"),
        ],
        duplicates=[NodeGroup(reason="2 reports", nodes=f"gpu[011,013]{evil}", count=2)],
        read_notes=[
            NodeGroup(reason=f"report schema 2 read best-effort{evil}", nodes="gpu014", count=1)
        ],
    )


def empty_report() -> FleetReport:
    """A fleet of healthy nodes: every section empty."""
    return FleetReport(
        tool_version="9.8.7",
        generated_at=WHEN,
        settings=FleetSettings(),
        verdict="OK",
        verdict_reason="every node OK",
        nodes_read=1,
        counts={"OK": 1, "WARNING": 0, "CRITICAL": 0, "UNKNOWN": 0, "MISSING": 0},
    )


def sections(page: str) -> Dict[str, str]:
    """Each ``<h2 id=...>`` section's HTML, up to the next heading of its rank."""
    parts = re.split(r'(?=<h2 id=")', page)
    found = {}
    for part in parts[1:]:
        found[re.match(r'<h2 id="([^"]+)"', part).group(1)] = part
    return found


def cells(html: str) -> str:
    """The text of ``html`` as a reader sees it (tags dropped, entities decoded, whitespace
    squeezed), for content asserts."""
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html))).strip()


def test_every_section_of_a_full_report_is_shown():
    page = fleet_html.render_html(full_report(evil=""))
    assert_self_contained(page)
    found = sections(page)
    assert set(SECTIONS) | {"settings"} <= set(found)
    for name in SECTIONS:
        assert "None." not in found[name], f"{name} is filled but says None."

    banner = cells(page.split('<h2 id="drain"')[0].split("<body>")[1])
    assert "IBDIAG FLEET CRITICAL" in banner and "21 nodes read" in banner
    assert "3 nodes CRITICAL, 1 expected node missing" in banner and "exit code 2" in banner
    assert "OK 11 WARNING 2 CRITICAL 3 UNKNOWN 1 MISSING 1" in banner
    assert 'class="banner v-CRITICAL"' in page

    drain = cells(found["drain"])
    assert "Drain (3 nodes)" in drain
    assert "link.state mlx5_3:1 DOWN gpu[001-002] 2" in drain
    assert "pcie.width mlx5_0 x8 gpu017 1" in drain

    switches = cells(found["switches"])
    assert "Switch suspects (1)" in switches
    assert "at least 4 nodes fail, or at least 2 nodes on at least 50% of the node ports" in (
        switches
    )  # the settings used
    # The suspect first, with its GUID, its counts and its ports (switch port <-> node port).
    suspect, below = switches.split("below the threshold (1)")
    assert "leaf07 GUID 0x7cfe900300aabb07 suspect: open a ticket" in suspect
    assert "4 of 8 attached nodes (2 of 8 node ports) fail on it: gpu[101-104]" in suspect
    assert "leaf07/21 ↔ gpu101 mlx5_3:1 counters.partner , link.partner" in suspect
    assert "leaf07/? ↔ gpu102 mlx5_3:1" in suspect
    assert "Nodes on suspect switches (4)" in suspect
    assert "counters.partner symbol_error gpu[101-104] 4" in suspect
    assert "leaf09 GUID 0x7cfe900300aabb01" in below and "1 of 16 attached nodes" in below
    assert "leaf09/5" in below and "gpu701 mlx5_2:1 link.state" in below
    assert "leaf09" not in suspect
    # its outlying port, with the metric, beside its failing one
    assert (
        "1 of 16 attached nodes (1 of 16 node ports) outlying against their rail's peers: gpu501"
    ) in below
    assert (
        "leaf09/6 ↔ gpu501 mlx5_3:1 outlier: ib_write_bw loopback bandwidth 318.4 Gb/s vs "
        "median 392.2 Gb/s (-18.8%)"
    ) in below
    assert "outlier:" not in suspect and "gpu501" not in suspect

    outliers = cells(found["outliers"])
    assert "Outliers (3)" in outliers and "by more than 15%" in outliers
    assert (
        "gpu501 3 ib_write_bw loopback bandwidth ( ib_write_bw_gbps , low) "
        "318.4 Gb/s 392.2 Gb/s 1.5 -18.8% 20" in outliers
    )
    assert (
        "gpu502 1 symbol_error error rate ( error_rate:symbol_error , high) "
        "42.0 per hour 0 per hour 0 +0.0% 19" in outliers
    )
    assert "gpu503 node-wide nccl-tests bus bandwidth" in outliers
    assert "151.0 GB/s 188.5 GB/s 2 -19.9% 21" in outliers

    drift = cells(found["drift"])
    assert "fw_ver 0 28.39.1002 19 28.36.1010 on 1: gpu601 (unknown) on 1: gpu602" in drift
    assert "kernel_release node-wide 6.1.0-28-amd64 20 5.10.0-30-amd64 on 1: gpu603" in drift

    rails = cells(found["rails"])
    assert "gpu801 2 mlx5_2:1 leaf05 leaf03 , leaf04" in rails

    assert "expected, no report gpu[401] 1" in cells(found["missing"])
    assert "Missing (1)" in cells(found["missing"])
    assert "Warnings (2)" in cells(found["warnings"])
    assert "fw.version old gpu[201,203] 2" in cells(found["warnings"])
    assert "ibstat timed out gpu301 1" in cells(found["unknown"])
    problems = cells(found["read-problems"])
    assert "/reports/gpu901.json truncated JSON at byte 812" in problems
    assert "/reports/notes.txt not an ibdiag report" in problems
    assert "2 reports gpu[011,013] 2" in cells(found["duplicates"])
    assert "report schema 2 read best-effort" in cells(found["read-notes"])

    footer = cells(page.split("<footer>")[1])
    assert "ibdiag 9.8.7 (fleet schema 1) at 2025-03-04 05:06:07 UTC" in footer
    assert "fetches nothing from the network" in footer


def test_the_settings_used_are_all_shown():
    settings = FleetSettings(
        outlier_mad_factor=2.5,
        outlier_margin=0.2,
        outlier_min_nodes=7,
        rate_floor_per_hour=0.5,
        switch_min_nodes=2,
        switch_min_share=0.75,
    )
    report = empty_report().model_copy(update={"settings": settings})
    table = cells(sections(fleet_html.render_html(report))["settings"])
    for name in FleetSettings.model_fields:
        value = getattr(settings, name)
        assert f"{name} {value} " in table, name
        assert f"{value} {fleet_html.SETTINGS[name]}" in table, name


def test_an_empty_fleet_says_none_in_every_section():
    page = fleet_html.render_html(empty_report())
    assert_self_contained(page)
    found = sections(page)
    for name in SECTIONS:
        assert "None." in found[name], f"empty section {name} does not say None."
    assert "below the threshold" not in page  # no such switches: no heading for them
    assert 'class="banner v-OK"' in page and "IBDIAG FLEET OK" in page
    assert "OK 1 WARNING 0 CRITICAL 0 UNKNOWN 0 MISSING 0" in cells(page)
    assert "exit code 0" in page
    # A missing group with no node (no --expect-nodes shortfall) is none too.
    report = empty_report().model_copy(
        update={"missing": NodeGroup(reason="expected, no report", nodes="", count=0)}
    )
    assert "None." in sections(fleet_html.render_html(report))["missing"]


def test_hostile_names_stay_inert_text():
    page = fleet_html.render_html(full_report())
    assert_self_contained(page)  # no <script, no src=/href=: nothing escaped the escaping
    # Each hostile field shows, escaped, where it belongs.
    found = sections(page)
    assert f"DOWN {ESCAPED}" in found["drain"] and f"gpu017{ESCAPED}" in found["drain"]
    assert f"leaf07{ESCAPED}" in found["switches"]
    assert f"0x7cfe900300aabb07{ESCAPED}" in found["switches"]
    assert f"gpu102{ESCAPED}" in found["switches"]
    assert f"gpu501{ESCAPED}</code></td>" in found["switches"]  # an outlying port's node
    assert f"<code>{ESCAPED}</code>" in found["switches"]  # a failing check's name
    assert f"gpu501{ESCAPED}" in found["outliers"]
    assert f"28.36.1010{ESCAPED}" in found["drift"]
    assert f"leaf05{ESCAPED}" in found["rails"]
    assert f"gpu901{ESCAPED}.json" in found["read-problems"]
    assert f"gpu[011,013]{ESCAPED}" in found["duplicates"]
    assert f"missing {ESCAPED}" in page.split('<h2 id="drain"')[0]
    assert "alert(1)</script>" not in page and HOSTILE not in page  # never raw


@pytest.mark.parametrize(
    "value, shown",
    [(392.25, "392.2"), (1234.5, "1,234.5"), (0.25, "0.25"), (3.0, "3"), (0.0001234, "0.000123")],
)
def test_numbers_read_as_an_admin_reads_them(value, shown):
    assert fleet_html.number(value) == shown


def test_metric_names_get_their_meaning_and_unit():
    assert fleet_html.metric_label("ib_write_bw_gbps") == ("ib_write_bw loopback bandwidth", "Gb/s")
    assert fleet_html.metric_label("inspector_busbw_gbps:AllReduce:4-5GB:2n") == (
        "NCCL Inspector AllReduce 4-5GB bus bandwidth, 2-node communicator",
        "Gb/s",
    )
    assert fleet_html.metric_label("inspector_busbw_gbps:AllGather:1-2MB") == (
        "NCCL Inspector AllGather 1-2MB bus bandwidth",
        "Gb/s",
    )
    assert fleet_html.metric_label("nccl_tests_busbw_gbytes")[1] == "GB/s"
    assert fleet_html.metric_label("error_rate:link_downed") == (
        "link_downed error rate",
        "per hour",
    )
    assert fleet_html.metric_label("something_new") == ("something_new", "")


def test_the_full_page_renders_in_chromium_and_fetches_nothing(chromium, tmp_path: Path):
    page = tmp_path / "fleet.html"
    page.write_text(fleet_html.render_html(full_report()), encoding="utf-8")
    dom = assert_renders_in_chromium(chromium, page, tmp_path, "IBDIAG FLEET CRITICAL")
    assert "<script" not in dom.lower(), "hostile text became a script element"
    assert f"leaf07{ESCAPED.split('&#34;')[0]}" in dom  # shown as text, escaped again
    for heading in ("Switch suspects (1)", "Outliers (3)", "Drift (2)", "Settings"):
        assert heading in dom


def test_the_empty_page_renders_in_chromium(chromium, tmp_path: Path):
    page = tmp_path / "fleet.html"
    page.write_text(fleet_html.render_html(empty_report()), encoding="utf-8")
    dom = assert_renders_in_chromium(chromium, page, tmp_path, "IBDIAG FLEET OK")
    assert dom.count("None.") >= len(SECTIONS)
