"""Every Report renderer has one signature, ``render(report, options) -> str``.

The command line, the bundle writer and the exporter pick a renderer by format and call it the
same way; each renderer reads the options that concern it and ignores the rest.
"""

from __future__ import annotations

import importlib
import inspect
import json

import pytest
from snapshots import builtin_registry, device, port, snapshot

from ibdiag.grade import grade
from ibdiag.model import Report
from ibdiag.render.options import RenderOptions
from ibdiag.thresholds import Thresholds

RENDERERS = ("text", "json", "html", "prometheus")


def _report() -> Report:
    """One healthy HCA and one whose port is down (a fail to show)."""
    snap = snapshot(devices=[device("mlx5_0"), device("mlx5_1", ports=[port(1, state=1)])])
    return grade(snap, builtin_registry(), Thresholds())


@pytest.mark.parametrize("name", RENDERERS)
def test_every_renderer_takes_a_report_and_options(name):
    module = importlib.import_module(f"ibdiag.render.{name}")
    parameters = list(inspect.signature(module.render).parameters.values())
    assert [p.name for p in parameters] == ["report", "options"]
    assert parameters[1].default == RenderOptions()
    report = _report()
    every_option = RenderOptions(color=True, verbose=True, duration_s=2.5, compat="moneo")
    for options in (RenderOptions(), every_option):
        text = module.render(report, options)
        assert isinstance(text, str) and text.strip()
    assert module.render(report) == module.render(report, RenderOptions())


def test_options_are_immutable():
    options = RenderOptions(color=True)
    with pytest.raises(AttributeError):
        options.color = False  # type: ignore[misc]
    assert options._replace(verbose=True) == RenderOptions(color=True, verbose=True)


def test_text_reads_color_and_verbose():
    from ibdiag.render import text

    report = _report()
    plain = text.render(report)
    assert "\033[" not in plain and "PASS " not in plain
    assert "\033[" in text.render(report, RenderOptions(color=True))
    assert "PASS " in text.render(report, RenderOptions(verbose=True))


def test_prometheus_reads_duration_and_compat():
    from ibdiag.render import prometheus

    report = _report()
    assert "ibdiag_run_duration_seconds 2.5\n" in prometheus.render(
        report, RenderOptions(duration_s=2.5)
    )
    assert "ib_port_physical_state" not in prometheus.render(report)
    assert "ib_port_physical_state" in prometheus.render(report, RenderOptions(compat="moneo"))


def test_json_and_html_show_the_whole_report_whatever_the_options():
    from ibdiag.render import html
    from ibdiag.render import json as json_render

    report = _report()
    loud = RenderOptions(color=True, verbose=True)
    assert json.loads(json_render.render(report, loud)) == json.loads(json_render.render(report))
    assert html.render(report, loud) == html.render(report)
