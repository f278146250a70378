"""Prometheus output, checked by a strict parser here and by the real Prometheus tools.

``promtool check metrics`` lints every rendered exposition; a real ``prometheus-node-exporter``
serves our textfile; a real ``prometheus`` scrapes ``serve``. All come from Debian's
``prometheus`` and ``prometheus-node-exporter`` packages (CI: ``apt-get install -y prometheus
prometheus-node-exporter``). A missing tool fails these tests; it never skips them. Every
process listens on loopback only and is stopped in ``finally``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

import pytest
from conftest import REPO, SCENARIOS_DIR, scenario_names
from loopback import free_port, http_get, prometheus_tool, serve_in_thread, start_prometheus, stop
from prometheus_text import parse, promtool_check
from snapshots import loaded_registry
from sysfs_builder import mlx5_node, write_node

from ibdiag.collect import collect
from ibdiag.grade import grade
from ibdiag.model import Report
from ibdiag.render import prometheus
from ibdiag.render.options import RenderOptions
from ibdiag.thresholds import Thresholds
from ibdiag.write_files import write_output

ODD_COUNTER = 'TxWait, total "x"\\y z'  # hfi1-style: spaces, a comma - plus a quote, backslash


def _report(sys_root: str, proc_root: str = "/nonexistent-proc") -> Report:
    snapshot = collect(sys_root, proc_root, {"sysfs"})
    return grade(snapshot, loaded_registry(), Thresholds(), "quick")


def _builder_report(tmp_path: Path) -> Report:
    hcas = mlx5_node(2)
    hcas[0].ports[0].counters[ODD_COUNTER] = 7
    write_node(str(tmp_path / "sys"), hcas)
    return _report(str(tmp_path / "sys"))


def _value(samples, name: str, **labels: str) -> float:
    key = (name, tuple(labels.items()))
    assert key in samples, f"no sample {key}"
    return samples[key]


# --- rendering -------------------------------------------------------------------------------


def test_builder_tree_renders_strict_and_promtool_clean(tmp_path: Path) -> None:
    report = _builder_report(tmp_path)
    text = prometheus.render(report, RenderOptions(duration_s=0.25))
    samples = parse(text)
    promtool_check(text)

    assert _value(samples, "ibdiag_verdict") == report.verdict.exit_code
    assert _value(samples, "ibdiag_run_duration_seconds") == 0.25
    assert _value(samples, "ibdiag_last_run_timestamp_seconds") == pytest.approx(
        report.snapshot.collected_at.timestamp()
    )
    assert _value(samples, "ibdiag_command_timeouts") == 0
    port = {"device": "mlx5_0", "port": "1", "ib_port": "mlx5_0:1"}
    assert _value(samples, "ibdiag_port_state", **port) == 4
    assert _value(samples, "ibdiag_port_phys_state", **port) == 5
    assert _value(samples, "ibdiag_port_rate_bytes_per_second", **port) == 200e9 / 8
    assert _value(samples, "ibdiag_port_symbol_error_total", **port) == 0
    assert _value(samples, "ibdiag_port_rcv_data_bytes_total", **port) == 9837712934 * 4
    assert _value(samples, "ibdiag_port_xmit_wait_total", **port) == 1931
    assert _value(samples, "ibdiag_port_hw_out_of_sequence_total", **port) == 0
    assert _value(samples, "ibdiag_read_problems", device="mlx5_0") == 0
    # The odd hfi1-style name is a label value, escaped, never a metric name.
    odd = dict(port, source="counters", counter=ODD_COUNTER)
    assert _value(samples, "ibdiag_port_other_value", **odd) == 7
    assert 'counter="TxWait, total \\"x\\"\\\\y z"' in text
    for result in report.results:
        status = _value(samples, "ibdiag_check_status", check=result.check_id, target=result.target)
        assert status == prometheus.STATUS_VALUES[result.status]
    # HELP text comes from the catalogue.
    assert "# HELP ibdiag_port_symbol_error_total counters/symbol_error (error): " in text


@pytest.mark.parametrize("name", scenario_names())
def test_every_scenario_renders_strict_and_promtool_clean(name: str) -> None:
    root = os.path.join(SCENARIOS_DIR, name, "root")
    report = _report(os.path.join(root, "sys"), os.path.join(root, "proc"))
    text = prometheus.render(report, RenderOptions(duration_s=1.5))
    samples = parse(text)
    promtool_check(text)
    assert _value(samples, "ibdiag_verdict") == report.verdict.exit_code
    for device in report.snapshot.devices:
        for port in device.ports:
            labels = {
                "device": device.name,
                "port": str(port.number),
                "ib_port": device.target(port),
            }
            if port.state is not None:
                assert _value(samples, "ibdiag_port_state", **labels) == port.state


def test_render_escapes_hostile_label_values(tmp_path: Path) -> None:
    report = _builder_report(tmp_path)
    hostile = report.results[0].model_copy(update={"target": 'a"b\\c\nd'})
    report = report.model_copy(update={"results": [hostile, *report.results[1:]]})
    text = prometheus.render(report)
    samples = parse(text)
    promtool_check(text)
    assert (
        "ibdiag_check_status",
        (("check", report.results[0].check_id), ("target", 'a"b\\c\nd')),
    ) in samples


@pytest.mark.parametrize("name", scenario_names())
def test_moneo_compat_names_strict_and_promtool_clean(name: str) -> None:
    root = os.path.join(SCENARIOS_DIR, name, "root")
    report = _report(os.path.join(root, "sys"), os.path.join(root, "proc"))
    text = prometheus.render(report, RenderOptions(duration_s=1.5, compat="moneo"))
    samples = parse(text)
    promtool_check(text)
    assert _value(samples, "ibdiag_verdict") == report.verdict.exit_code
    host = report.snapshot.host or ""
    for device in report.snapshot.devices:
        for port in device.ports:
            labels = {"instance": host, "ib_port": f"{device.name}:{port.number}"}
            if port.phys_state is not None:
                assert _value(samples, "ib_port_physical_state", **labels) == port.phys_state
            if "port_rcv_data" in port.counters:
                got = _value(samples, "ib_port_rcv_data", **labels)
                assert got == port.counters["port_rcv_data"]
            for counter, value in port.hw_counters.items():
                assert _value(samples, f"ib_hw_{counter}", **labels) == value


def test_moneo_compat_builder_tree(tmp_path: Path) -> None:
    report = _builder_report(tmp_path)
    text = prometheus.render(report, RenderOptions(duration_s=0.1, compat="moneo"))
    samples = parse(text)
    promtool_check(text)
    labels = {"instance": report.snapshot.host or "", "ib_port": "mlx5_0:1"}
    assert _value(samples, "ib_hw_out_of_sequence", **labels) == 0
    assert _value(samples, "ib_port_xmit_data", **labels) == 9912377104
    assert not any(name.startswith("ib_") and " " in name for name, _ in samples)
    with pytest.raises(ValueError):
        prometheus.render(report, RenderOptions(duration_s=0.1, compat="nope"))


def test_renderer_renders_only(tmp_path: Path) -> None:
    """The renderer holds no server (that is ibdiag.exporter) and loads no networking; the
    textfile has no ibdiag_scrape_timeout, which only a served scrape carries. Only what
    ibdiag itself loads counts: its libraries are imported first, so a pydantic-core that
    imports asyncio (2.46 did) is theirs, not the renderer's."""
    assert not hasattr(prometheus, "make_server") and not hasattr(prometheus, "serve")
    probe = (
        "import sys, click, jinja2, pydantic; before = set(sys.modules); "
        "import ibdiag.render.prometheus; "
        "net = {'asyncio', 'socket', 'http.server', 'socketserver'}; "
        "print(sorted(net & (set(sys.modules) - before)))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()
    assert loaded == "[]"
    assert "ibdiag_scrape_timeout" not in prometheus.render(
        _builder_report(tmp_path), RenderOptions(duration_s=0.1)
    )


def test_readme_names_every_family_that_is_not_a_counter(tmp_path: Path) -> None:
    """README's Prometheus section lists the metric names (counters go by their pattern)."""
    readme = (Path(REPO) / "README.md").read_text()
    section = readme[readme.index("## Prometheus") :]
    section = section[: section.index("\n## ", 1)]
    text = prometheus.render(_builder_report(tmp_path), RenderOptions(duration_s=0.1))
    text += prometheus.render_scrape_timeout(False)
    helps = dict(re.findall(r"^# HELP (\S+) (.*)$", text, re.M))
    listed = [name for name, help_text in helps.items() if "counters/" not in help_text]
    assert "ibdiag_scrape_timeout" in listed and "ibdiag_verdict" in listed
    missing = [name for name in listed if f"`{name}" not in section]
    assert not missing, f"README's Prometheus section does not name {missing}"


# --- textfile --------------------------------------------------------------------------------


def _wait_for(what: str, probe, deadline_s: float, proc=None):
    end = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"{what}: the process exited with {proc.returncode}")
        try:
            found = probe()
            if found:
                return found
        except (OSError, urllib.error.URLError, ValueError) as exc:
            last = exc
        time.sleep(0.2)
    pytest.fail(f"{what}: not within {deadline_s} s (last error: {last})")


def test_node_exporter_serves_our_textfile(tmp_path: Path) -> None:
    exporter = prometheus_tool("prometheus-node-exporter")
    report = _builder_report(tmp_path)
    directory = tmp_path / "textfile"
    directory.mkdir()
    write_output(
        str(directory / "ibdiag.prom"), prometheus.render(report, RenderOptions(duration_s=0.3))
    )
    port = free_port()
    log = open(tmp_path / "node_exporter.log", "wb")
    proc = subprocess.Popen(
        [
            exporter,
            f"--collector.textfile.directory={directory}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--collector.disable-defaults",
            "--collector.textfile",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        body = _wait_for(
            "node_exporter /metrics",
            lambda: http_get(f"http://127.0.0.1:{port}/metrics"),
            30,
            proc,
        )
        assert re.search(rf"^ibdiag_verdict {report.verdict.exit_code}$", body, re.M), body[:2000]
        assert "ibdiag_port_symbol_error_total{" in body
        # node_exporter reports a textfile it could not parse through this gauge.
        assert not re.search(r"^node_textfile_scrape_error 1", body, re.M), body[:2000]
    finally:
        stop(proc)
        log.close()


# --- serve -----------------------------------------------------------------------------------


def _serving(tmp_path: Path):
    sys_root = str(tmp_path / "sys")
    hcas = mlx5_node(2)
    hcas[0].ports[0].counters[ODD_COUNTER] = 7
    write_node(sys_root, hcas)

    def make_report():
        start = time.monotonic()
        report = _report(sys_root)
        return report, time.monotonic() - start

    return serve_in_thread(make_report)


def test_serve_answers_fresh_metrics_each_scrape(tmp_path: Path) -> None:
    server, thread, port = _serving(tmp_path)
    try:
        assert server.server_address[0] == "127.0.0.1"
        first = parse(http_get(f"http://127.0.0.1:{port}/metrics"))
        time.sleep(0.05)
        second_text = http_get(f"http://127.0.0.1:{port}/metrics")
        second = parse(second_text)
        promtool_check(second_text)
        stamp = "ibdiag_last_run_timestamp_seconds"
        assert _value(second, stamp) > _value(first, stamp), "a scrape served a stale report"
        assert abs(_value(second, stamp) - datetime.now(timezone.utc).timestamp()) < 60
        assert _value(second, "ibdiag_scrape_timeout") == 0
        assert "/metrics" in http_get(f"http://127.0.0.1:{port}/")
        with pytest.raises(urllib.error.HTTPError) as error:
            http_get(f"http://127.0.0.1:{port}/nothing")
        assert error.value.code == 404
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_real_prometheus_scrapes_serve(tmp_path: Path) -> None:
    binary = prometheus_tool("prometheus")
    server, thread, port = _serving(tmp_path)
    proc, prom_port = start_prometheus(binary, tmp_path, port)
    api = f"http://127.0.0.1:{prom_port}/api/v1/query?query=ibdiag_verdict"

    def verdict_series():
        answer = json.loads(http_get(api))
        return answer["status"] == "success" and answer["data"]["result"]

    try:
        try:
            result = _wait_for("ibdiag_verdict in Prometheus", verdict_series, 45, proc)
        except BaseException:
            print((tmp_path / "prometheus.log").read_text(errors="replace")[-4000:])
            raise
        assert result[0]["metric"]["job"] == "ibdiag"
        assert result[0]["value"][1] in {"0", "1", "2", "3"}
        targets = json.loads(http_get(f"http://127.0.0.1:{prom_port}/api/v1/targets"))
        health = [t["health"] for t in targets["data"]["activeTargets"]]
        assert health == ["up"], targets
    finally:
        stop(proc)
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
