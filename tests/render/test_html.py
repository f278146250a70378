"""The HTML report: one self-contained page, loaded for real in headless Chromium.

Every golden scenario is rendered through the CLI (``ibdiag check --format html -o F``) and the
page is opened with Debian's ``chromium`` (CI installs it: ``apt-get install -y chromium``):
the verdict banner must be in the rendered DOM, a screenshot must come out, and the page must make
no network request. Chromium runs with DNS mapped to nothing and a proxy nobody listens on, and
writes a net log; a request the page itself started carries the page's (``file://``: "null")
initiator there, while Chromium's own background traffic is "not an origin". A control page that
does fetch proves the detector sees page requests.

Hostile text - a hostname, device name, counter name and kernel-log line holding ``<script>``
and quotes - must reach the DOM as inert text. Missing Chromium fails these tests; it never
skips them.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Dict, List

import pytest
from chromium_pages import HOSTILE, assert_renders_in_chromium, assert_self_contained, load
from conftest import SCENARIOS_DIR, scenario_names
from sysfs_builder import mlx5_node, write_node

from ibdiag.model import CommandRun, Report
from ibdiag.render import html


def _verdict(path: Path) -> Dict[str, object]:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", scenario_names())
def test_scenario_page_is_self_contained_and_renders(name, run_cli, chromium, tmp_path):
    root = os.path.join(SCENARIOS_DIR, name, "root", "sys")
    page = tmp_path / "report.html"
    run_cli("check", "--sysfs", root, "--format", "html", "-o", str(page))
    report_json = tmp_path / "report.json"
    run_cli("check", "--sysfs", root, "--format", "json", "-o", str(report_json))
    verdict = _verdict(report_json)["verdict"]

    text = page.read_text(encoding="utf-8")
    assert_self_contained(text)
    assert f"IBDIAG {verdict}" in text
    assert "fetches nothing from the network" in text
    assert "Warning signs" in text and "out_of_buffer" in text

    assert_renders_in_chromium(chromium, page, tmp_path, f"IBDIAG {verdict}")


def test_network_detector_sees_a_page_that_fetches(chromium, tmp_path):
    """The control: were the report to fetch anything, the net log check would catch it."""
    page = tmp_path / "fetches.html"
    page.write_text(
        "<!DOCTYPE html><html><head><style>body{background:url(http://bg.example.invalid/a.png)}"
        '</style></head><body><p>control</p><img src="https://img.example.invalid/x.png">'
        "</body></html>",
        encoding="utf-8",
    )
    dom, requested = load(chromium, page, tmp_path, "--dump-dom")
    assert "control" in dom
    assert "https://img.example.invalid/x.png" in requested
    assert "http://bg.example.invalid/a.png" in requested


def _hostile_report(tmp_path: Path, run_cli) -> Report:
    """A real report of a built node (one error counter non-zero, a hostile hostname), with
    hostile names and command runs - a kernel log among them - added as a bundle could hold."""
    hcas = mlx5_node(2)
    hcas[0].ports[0].counters["symbol_error"] = 7
    write_node(str(tmp_path / "sys"), hcas)
    kernel = tmp_path / "proc" / "sys" / "kernel"
    (kernel / "random").mkdir(parents=True)
    (kernel / "hostname").write_text(f"node{HOSTILE}\n", encoding="utf-8")
    (kernel / "random" / "boot_id").write_text(
        "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0\n", encoding="utf-8"
    )
    out = tmp_path / "report.json"
    run_cli(
        "check",
        "--sysfs",
        str(tmp_path / "sys"),
        "--procfs",
        str(tmp_path / "proc"),
        "--format",
        "json",
        "-o",
        str(out),
    )
    report = Report.model_validate_json(out.read_text(encoding="utf-8"))
    assert report.snapshot.host == f"node{HOSTILE}"

    device = report.snapshot.devices[1]
    evil = device.ports[0].model_copy(
        update={"counters": {**device.ports[0].counters, f"evil{HOSTILE}": 3}}
    )
    device = device.model_copy(
        update={"name": f"mlx5_{HOSTILE}", "ports": [evil, *device.ports[1:]]}
    )
    runs = [
        CommandRun(
            argv=["dmesg", "--kernel", "--nopager"],
            rc=0,
            stdout=f"[  12.5] mlx5_core 0000:10:00.0: {HOSTILE} firmware said \"hi\" 'x'\n",
            duration_s=0.042,
        ),
        CommandRun(
            argv=["perfquery", "-x", "-C", "mlx5_0", "-P", "1"],
            rc=0,
            stdout="# Port extended counters: Lid 18 port 1\nSymbolErrorCounter:..........7\n",
            duration_s=0.113,
        ),
        CommandRun(argv=["ethtool", "-S", "ib0"], timed_out=True, duration_s=5.0),
    ]
    snapshot = report.snapshot.model_copy(
        update={
            "devices": [report.snapshot.devices[0], device, *report.snapshot.devices[2:]],
            "commands": {**report.snapshot.commands, **{run.key: run for run in runs}},
        }
    )
    return report.model_copy(update={"snapshot": snapshot})


def test_hostile_text_stays_inert_and_commands_and_counters_show(run_cli, chromium, tmp_path):
    report = _hostile_report(tmp_path, run_cli)
    text = html.render(report)
    page = tmp_path / "hostile.html"
    page.write_text(text, encoding="utf-8")

    assert_self_contained(text)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&#34;&#39;&amp;" in text
    # The non-zero error counter is highlighted, with the catalogue's meaning on hover.
    assert re.search(r'<tr class="alarm"><td><abbr title="error: Symbol errors[^"]*">', text)
    assert "symbol_error</code>=7" in text
    # Each command: argv, exit status, duration, output.
    assert "dmesg --kernel --nopager" in text
    assert "0.042 s" in text and "0.113 s" in text
    assert "ethtool timed out after 5.0 s and was killed" in text

    dom = assert_renders_in_chromium(chromium, page, tmp_path, f"IBDIAG {report.verdict.value}")
    assert "<script" not in dom.lower(), "hostile text became a script element"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom  # shown as text, escaped again
    for where in (f"node{HOSTILE}", f"mlx5_{HOSTILE}", f"evil{HOSTILE}", "firmware said"):
        escaped = where.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        assert escaped.split('"')[0] in dom, f"{where!r} is not shown as text"


def test_an_altered_bundle_says_so_in_the_banner(run_cli, chromium, tmp_path):
    """A bundle graded with --accept-altered: the banner says "altered bundle" and names the
    files (inert text, the first ten and a count); a report without altered files says nothing."""
    report = _hostile_report(tmp_path, run_cli)
    plain = html.render(report)
    assert "altered bundle" not in plain.lower() and 'id="altered"' not in plain
    names = [f"root/sys/class/infiniband/mlx5_0/ports/1/counters/c{i:02d}" for i in range(11)]
    names[0] = f"summary{HOSTILE}.txt"
    altered = report.model_copy(update={"altered_files": names})
    text = html.render(altered)
    page = tmp_path / "altered.html"
    page.write_text(text, encoding="utf-8")
    assert_self_contained(text)

    dom = assert_renders_in_chromium(chromium, page, tmp_path, "(altered bundle)")
    banner = dom.split('id="verdict"', 1)[1].split("</header>", 1)[0]
    assert f"IBDIAG {report.verdict.value}" in banner and "(altered bundle)</h1>" in banner
    assert "11 files differ from the sha256 in its manifest.json" in banner
    assert "summary&lt;script&gt;alert(1)&lt;/script&gt;" in banner
    assert "<script" not in dom.lower()
    assert f"<code>{names[9]}</code> and 1 more." in banner
    assert names[10] not in banner


def test_what_a_parser_could_not_read_is_in_the_raw_problems_table():
    """Typed command facts keep their parser's problems; the page lists them beside the files',
    naming the run's role, escaped."""
    from snapshots import builtin_registry, device, port, snapshot

    from ibdiag.facts.kernel_log import KernelLog
    from ibdiag.facts.partner import Partner, PortInfo
    from ibdiag.facts.perfquery import PmaReading, PortPma
    from ibdiag.grade import grade
    from ibdiag.thresholds import Thresholds

    reading = PmaReading(role="perfquery-x mlx5_0:1", problems=["line 3: <odd> 'Lid x'"])
    dev = device("mlx5_0", ports=[port(1)])
    far = Partner(
        roles=["partner-nodeinfo mlx5_0:1"],
        port_info=PortInfo(role="partner-portinfo mlx5_0:1", problems=["LinkWidthActive: 3X?"]),
    )
    update = {"perfquery": PortPma(counters=reading), "partner": far}
    ports = [dev.ports[0].model_copy(update=update)]
    log = KernelLog(role="kernel-log dmesg", problems=["log cut to its newest 1 MiB"])
    snap = snapshot([dev.model_copy(update={"ports": ports})]).model_copy(
        update={"kernel_log": log}
    )
    page = html.render(grade(snap, builtin_registry(), Thresholds(), "standard"))
    rows = re.findall(r"<tr><td><code>([^<]*)</code></td><td><code>([^<]*)</code></td>"
                      r"<td>([^<]*)</td></tr>", page)  # fmt: skip
    assert ("node", "kernel-log dmesg", "log cut to its newest 1 MiB") in rows
    assert ("mlx5_0:1", "perfquery-x mlx5_0:1", "line 3: &lt;odd&gt; &#39;Lid x&#39;") in rows
    assert ("mlx5_0:1", "partner-portinfo mlx5_0:1", "LinkWidthActive: 3X?") in rows


def _far_end_cells(page: str) -> List[str]:
    return re.findall(r'<div class="cell (s-[a-z]+) far-end">(.*?)</div>', page, re.S)


def test_the_matrix_shows_each_ports_far_end_coloured_by_the_cable_checks():
    """The "Far end" column: the switch port each port's cable lands on (named as the partner
    checks name it), its state, width and speed, GUID and description (escaped), coloured by
    the worst result naming the cable by both ends; a far end that could not be read says
    why; a port whose far end was not collected says "not read"."""
    from partner_builders import partner, port_info, with_runs
    from snapshots import builtin_registry, device, port, replaced, snapshot

    from ibdiag.grade import grade
    from ibdiag.model import CommandRun
    from ibdiag.thresholds import Thresholds

    qdr = "40 Gb/sec (4X QDR)"
    snap = snapshot([device(f"mlx5_{i}", ports=[port(1, rate_text=qdr)]) for i in range(4)])
    snap = replaced(snap, "mlx5_0:1", partner=partner())
    slow = partner(port=22, port_info=port_info(port=22, speed_active="SDR"),
                   description="MF0;leaf07:<b>MQM9700</b>/U1")  # fmt: skip
    snap = replaced(snap, "mlx5_1:1", partner=slow)
    unknown = partner(node_guid=None, description=None, port=None, port_info=None, counters=None)
    snap = replaced(snap, "mlx5_2:1", partner=unknown)
    failed = CommandRun(
        argv=["smpquery", "-C", "mlx5_2", "-P", "1", "-D", "nodeinfo", "0,1"],
        role="partner-nodeinfo mlx5_2:1",
        rc=1,
        stderr="ibwarn: _do_madrpc failed; dport (DR path slid 0)",
    )
    snap = with_runs(snap, failed)
    page = html.render(grade(snap, builtin_registry(), Thresholds(), "standard"))

    assert "<th>Far end</th>" in page
    cells = _far_end_cells(page)
    assert len(cells) == 3, cells  # mlx5_3: partner not collected
    (ok_class, ok), (slow_class, slowed), (unread_class, unread) = cells
    assert ok_class == "s-pass" and "<code>leaf07/21</code>" in ok
    assert "Switch" in ok and "Active / LinkUp" in ok and "4X QDR" in ok
    assert 'GUID <code class="name">0x0002c90300a1b2c3</code> LID 5' in ok
    assert slow_class == "s-fail" and "<code>leaf07/22</code>" in slowed and "4X SDR" in slowed
    assert "MF0;leaf07:&lt;b&gt;MQM9700&lt;/b&gt;/U1" in slowed and "<b>MQM9700" not in page
    assert unread_class == "s-warn" and "no-answer" in unread  # an ACTIVE PF port: warns
    assert re.search(r'<div class="cell s-none"><b>1</b> <span class="hint">not read</span>', page)


# --- the HCA x port matrix as a browser lays it out ---------------------------------------------

# Appended to a copy of the page (the page itself has no script): measures the matrix - the
# table whose header has "Far end" - and writes what it found into <body data-measured>, which
# --dump-dom prints. Per row: the line boxes of the HCA name and of the PCIe address (1: not
# wrapped), the HCA cell's background, the far-end cell's height; the legend's fail colour; and
# whether the matrix fits its scroll box (a long far-end text stretches it otherwise).
MEASURE_MATRIX = """<script>
const table = [...document.querySelectorAll("table")].find(
  t => [...t.querySelectorAll("th")].some(th => th.textContent === "Far end"));
const rows = [...table.querySelectorAll("tr")].slice(1).map(tr => {
  const td = tr.children;
  return {
    hca: td[0].querySelector("code").textContent,
    hca_lines: td[0].querySelector("code").getClientRects().length,
    guid_lines: td[1].querySelector("code").getClientRects().length,
    pci_lines: td[3].querySelector("code").getClientRects().length,
    hca_colour: getComputedStyle(td[0]).backgroundColor,
    far_end_height: td[6].getBoundingClientRect().height,
  };
});
const box = table.parentElement;
document.body.setAttribute("data-measured", JSON.stringify({
  rows: rows,
  fail_colour: getComputedStyle(document.querySelector(".legend .s-fail")).backgroundColor,
  pass_colour: getComputedStyle(document.querySelector(".legend .s-pass")).backgroundColor,
  table_width: table.getBoundingClientRect().width,
  box_width: box.clientWidth,
}));
</script>"""

LONG_DESCRIPTION = "MF0;leaf07:" + "Q" * 9_980 + '<b>"x"</b>'  # no place to break a line


def _matrix_report() -> Report:
    """Three HCAs with long-ish names (mlx5_ib0..2): mlx5_ib1's only port is INIT (fails),
    mlx5_ib2's far end describes itself in 10,000 characters with markup in them."""
    from partner_builders import partner
    from snapshots import builtin_registry, device, port, replaced, snapshot

    from ibdiag.grade import grade
    from ibdiag.thresholds import Thresholds

    qdr = "40 Gb/sec (4X QDR)"
    snap = snapshot([device(f"mlx5_ib{i}", ports=[port(1, rate_text=qdr, state=2 if i == 1 else 4)])
                     for i in range(3)])  # fmt: skip
    for i in range(3):
        snap = replaced(snap, f"mlx5_ib{i}:1", partner=partner())
    snap = replaced(snap, "mlx5_ib2:1", partner=partner(description=LONG_DESCRIPTION))
    return grade(snap, builtin_registry(), Thresholds(), "standard")


def _measured(chromium: str, page: str, tmp_path: Path) -> dict:
    probe = tmp_path / "measured.html"
    probe.write_text(page.replace("</body>", MEASURE_MATRIX + "</body>"), encoding="utf-8")
    dom, requested = load(chromium, probe, tmp_path, "--dump-dom")
    assert requested == []
    found = re.search(r'data-measured="([^"]*)"', dom)
    assert found, dom[-2000:]
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def test_matrix_hca_names_pci_addresses_and_guids_never_wrap_mid_word(chromium, tmp_path):
    page = html.render(_matrix_report())
    measured = _measured(chromium, page, tmp_path)
    assert [row["hca"] for row in measured["rows"]] == ["mlx5_ib0", "mlx5_ib1", "mlx5_ib2"]
    lines = [(row["hca_lines"], row["pci_lines"], row["guid_lines"]) for row in measured["rows"]]
    assert lines == [(1, 1, 1)] * 3


def test_an_hca_cell_shows_its_worst_port(chromium, tmp_path):
    report = _matrix_report()
    [fail] = [r for r in report.results if r.status.value == "fail"]
    assert fail.target == "mlx5_ib1:1"  # the port fails; nothing fails on mlx5_ib1 itself
    measured = _measured(chromium, html.render(report), tmp_path)
    colours = {row["hca"]: row["hca_colour"] for row in measured["rows"]}
    assert colours["mlx5_ib1"] == measured["fail_colour"] != measured["pass_colour"]
    rows = {row["device"].name: row["status"] for row in html.port_matrix(report)}
    assert rows["mlx5_ib1"] == "fail"


def test_a_10000_character_far_end_description_is_cut_with_the_whole_in_its_title(
    chromium, tmp_path
):
    page = html.render(_matrix_report())
    measured = _measured(chromium, page, tmp_path)
    assert measured["table_width"] <= measured["box_width"] + 1, measured
    heights = [row["far_end_height"] for row in measured["rows"]]
    assert heights[2] < 3 * heights[0], heights  # a line or two more, not 10,000 characters
    [cell] = [text for _, text in _far_end_cells(page) if "QQQQ" in text]
    shown = re.search(r'<span class="cut" title="([^"]*)">([^<]*)</span>', cell)
    assert shown, cell
    title, text = shown.groups()
    assert title == html_escape(LONG_DESCRIPTION)  # whole and escaped
    assert len(text) <= html.DESCRIPTION_SHOWN + 1 and text.endswith("\u2026")
    assert '<b>"x"' not in page and "&lt;b&gt;&#34;x&#34;&lt;/b&gt;" in title
    assert page.count(html_escape(LONG_DESCRIPTION)) == 1  # the title, nowhere else whole


def html_escape(text: str) -> str:
    """As jinja2's autoescape writes text: & < > " ' as entities."""
    from markupsafe import escape

    return str(escape(text))
