"""ibdiag.render.prometheus_fw: the devlink health reporters as Prometheus families, on their own
(the lead hooks ``add_firmware`` into render/prometheus.py), checked by promtool."""

from __future__ import annotations

import os

from prometheus_text import parse, promtool_check
from snapshots import builtin_registry, device, snapshot, with_runs

from ibdiag.families import devlink_health as family
from ibdiag.grade import grade
from ibdiag.model import CommandRun
from ibdiag.render.prometheus import _Exposition
from ibdiag.render.prometheus_fw import add_firmware
from ibdiag.thresholds import Thresholds

FOLDER = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "captures", "devlink"
)


def capture(name: str) -> str:
    with open(os.path.join(FOLDER, name), encoding="utf-8") as handle:
        return handle.read()


def metrics(run: CommandRun):
    snap = with_runs(snapshot([device("mlx5_0"), device("mlx5_1")]), run)
    report = grade(snap, builtin_registry(), Thresholds(), "standard")
    exposition = _Exposition()
    add_firmware(exposition.family, report)
    text = exposition.text()
    if not text:
        return {}
    promtool_check(text)
    return parse(text)


def ran(stdout: str = "", **kwargs) -> CommandRun:
    return CommandRun(argv=list(family.ARGV), role=family.ROLE, stdout=stdout, **kwargs)


def key(name, dev, reporter, port=""):
    return (name, (("device", dev), ("reporter", reporter), ("port_index", port)))


def test_each_reporter_of_each_hca_is_a_sample():
    samples = metrics(ran(capture("handmade-fw-fatal-error-state.json"), rc=0))
    assert samples[key("ibdiag_hca_health_errors_total", "mlx5_0", "fw_fatal")] == 2
    assert samples[key("ibdiag_hca_health_recovers_total", "mlx5_0", "fw_fatal")] == 1
    assert samples[key("ibdiag_hca_health_healthy", "mlx5_0", "fw_fatal")] == 0
    assert samples[key("ibdiag_hca_health_errors_total", "mlx5_0", "fw")] == 3
    assert samples[key("ibdiag_hca_health_healthy", "mlx5_1", "fw_fatal")] == 1


def test_port_reporters_carry_their_port_index():
    samples = metrics(ran(capture("handmade-two-pfs-healthy.json"), rc=0))
    assert samples[key("ibdiag_hca_health_errors_total", "mlx5_1", "tx", "65535")] == 0
    assert samples[key("ibdiag_hca_health_healthy", "mlx5_0", "vnic", "65535")] == 1


def test_no_reading_is_no_sample_never_a_zero():
    assert metrics(ran(rc=None, not_found=True)) == {}
    assert metrics(ran("garbage", rc=0)) == {}


def test_odd_values_and_hostile_names_stay_valid_exposition():
    text = (
        '{"health":{"pci/0000:0c:00.0":[{"reporter":"fw\\n\\"x\\\\","state":"weird",'
        '"error":-4,"recover":"1"},{"reporter":"fw","error":1},{"reporter":"fw","error":9}]}}'
    )
    samples = metrics(ran(text, rc=0))
    names = {labels[1][1] for _, labels in samples}
    assert names == {"fw"}  # the odd name is left out (a problem on the fact), "fw" once
    assert samples[key("ibdiag_hca_health_errors_total", "mlx5_0", "fw")] == 1


# -- the HTML rows (ibdiag.render.html_fw) -------------------------------------------------------


def test_html_rows_one_per_hca_with_the_check_status():
    from ibdiag.render.html_fw import firmware_rows

    snap = with_runs(
        snapshot([device("mlx5_0"), device("mlx5_1")]),
        ran(capture("handmade-fw-fatal-error-state.json"), rc=0),
    )
    rows = firmware_rows(grade(snap, builtin_registry(), Thresholds(), "standard"))
    assert [(row["target"], row["status"]) for row in rows] == [
        ("mlx5_0", "fail"),
        ("mlx5_1", "pass"),
    ]
    assert rows[0]["address"] == "0000:0c:00.0"
    assert (
        "fw_fatal: error, 2 errors, 1 recover, last dump 2024-05-01 11:59:40, auto-recover off"
        in rows[0]["reporters"]
    )


def test_html_rows_none_without_a_reading():
    from ibdiag.render.html_fw import firmware_rows

    snap = with_runs(snapshot([device("mlx5_0")]), ran(rc=None, not_found=True))
    assert firmware_rows(grade(snap, builtin_registry(), Thresholds(), "standard")) == []


def test_the_html_report_has_the_firmware_section_with_those_rows():
    from ibdiag.render import html

    snap = with_runs(
        snapshot([device("mlx5_0"), device("mlx5_1")]),
        ran(capture("handmade-fw-fatal-error-state.json"), rc=0),
    )
    page = html.render(grade(snap, builtin_registry(), Thresholds(), "standard"))
    section = page[page.index("<h2>Firmware health</h2>") :]
    assert "<code>0000:0c:00.0</code>" in section and '<tr class="s-fail">' in section
    assert "fw_fatal: error, 2 errors, 1 recover" in section
