"""`ibdiag export --textfile` and `ibdiag serve --listen` from the command line.

The ``serve`` tests run the real command as a child process and treat it as a hostile client
would: idle and dripping connections by the hundred, requests cut off half-way, HTTP/0.9, a
collection that hangs. Each waits for a condition with a generous bound; none times anything.
"""

from __future__ import annotations

import os
import re
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from pathlib import Path
from typing import List

import pytest
from conftest import REPO, SCENARIOS_DIR
from loopback import ServeProcess, free_port, raw_request
from partner_stub_node import SWITCH, partner_tools
from prometheus_text import parse, promtool_check

STUCK = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-2ports-stuck-INIT", "root", "sys")


def test_export_writes_the_metrics_file_atomically(run_cli, tmp_path):
    target = tmp_path / "ibdiag.prom"
    target.write_text("old content\n")
    target.chmod(0o600)
    result = run_cli("export", "--sysfs", STUCK, "--textfile", str(target), "--compat", "moneo")
    assert result.exit_code == 0, result.output
    text = target.read_text()
    assert "ibdiag_verdict 2" in text
    assert 'ibdiag_check_status{check="link.state",target="mlx5_6:1"} 2' in text
    assert "ib_port_physical_state{" in text  # the moneo names too
    assert "ibdiag_partner_" not in text  # level quick: the far end is not read
    assert sorted(os.listdir(tmp_path)) == ["ibdiag.prom"], "a temp file was left behind"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # node_exporter may run as anyone


def test_export_at_level_standard_has_the_far_end_of_each_cable(tmp_path):
    """--level standard runs the read-only commands (here stubs printing the ibsim captures):
    the far ends' series are in the file; the default, quick, runs none and has none."""
    sysfs, procfs, stubs = partner_tools(tmp_path)
    texts, calls = {}, {}
    for level in ("standard", "quick"):
        target = tmp_path / f"{level}.prom"
        argv = [sys.executable, "-m", "ibdiag", "export", "--level", level, "--sysfs", sysfs,
                "--procfs", procfs, "--textfile", str(target)]  # fmt: skip
        proc = subprocess.run(
            argv, cwd=REPO, env=stubs.env(), capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr
        texts[level] = target.read_text()
        calls[level] = len(stubs.calls())
    samples = parse(texts["standard"])
    promtool_check(texts["standard"])
    assert samples[("ibdiag_partner_symbol_error_total", tuple(SWITCH.items()))] == 1234
    assert samples[("ibdiag_partner_port_state", tuple(SWITCH.items()))] == 4
    assert "ibdiag_partner_" not in texts["quick"]
    assert calls["quick"] == calls["standard"] > 0  # quick ran no command


def test_serve_at_level_standard_serves_the_far_end_of_each_cable(tmp_path):
    sysfs, procfs, stubs = partner_tools(tmp_path)
    server = ServeProcess(
        ["--level", "standard", "--sysfs", sysfs, "--procfs", procfs],
        REPO,
        tmp_path,
        env=stubs.env(),
    )
    try:
        text = server.ready()
        samples = parse(text)
        assert samples[("ibdiag_partner_symbol_error_total", tuple(SWITCH.items()))] == 1234
        assert samples[("ibdiag_scrape_timeout", ())] == 0
    finally:
        code, stderr = server.stop()
    assert code == 0, stderr


def test_export_to_an_unwritable_place_is_one_line_exit_3(run_cli, tmp_path):
    result = run_cli("export", "--sysfs", STUCK, "--textfile", str(tmp_path / "no" / "x.prom"))
    assert result.exit_code == 3 and result.stderr.startswith("ibdiag: error:")


def test_serve_answers_metrics_on_loopback_and_stops_on_sigterm(tmp_path):
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "ibdiag", "serve", "--sysfs", STUCK, "--listen",
         f"127.0.0.1:{port}"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        body = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and body is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    body = r.read().decode()
            except OSError:
                time.sleep(0.2)
        assert body is not None, server.stderr.read().decode() if server.poll() else "no answer"
        assert "ibdiag_verdict 2" in body
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert server.returncode in (0, 3, -15)


def test_serve_on_a_taken_port_is_one_line_exit_3(run_cli):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli("serve", "--sysfs", STUCK, "--listen", f"127.0.0.1:{port}")
    assert result.exit_code == 3 and "cannot listen" in result.stderr


@pytest.mark.parametrize(
    "listen", ["abc", ":99999", "127.0.0.1:", "[::1]", "::1:9477", "127.0.0.1:0", "host:http"]
)
def test_serve_listen_that_is_not_host_port_is_one_line_exit_3(run_cli, listen):
    result = run_cli("serve", "--sysfs", STUCK, "--listen", listen)
    assert result.exit_code == 3
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ibdiag: error: "), result.stderr
    assert "--listen" in lines[0] and "internal error" not in lines[0]


WAIT_S = 30
SCRAPE = b"GET /metrics HTTP/1.0\r\n\r\n"
# Prometheus tells how long it waits; serve answers 0.5 s before that (what the old serve ignored)
STALE_SCRAPE = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Prometheus-Scrape-Timeout-Seconds: 2\r\n\r\n"


def _body(answer: bytes) -> str:
    head, sep, body = answer.partition(b"\r\n\r\n")
    assert sep and head.startswith(b"HTTP/1.0 200 "), answer[:300]
    return body.decode()


def _value(text: str, name: str):
    return parse(text).get((name, ()))


@pytest.fixture
def serving(tmp_path: Path):
    started: List[ServeProcess] = []

    def start(*args: str, env=None) -> ServeProcess:
        server = ServeProcess(["--sysfs", STUCK, *args], REPO, tmp_path, env=env)
        started.append(server)
        server.ready()
        return server

    yield start
    for server in started:
        server.stop()


def test_serve_stays_silent_for_clients_that_go_away_half_way(serving):
    server = serving()
    for _ in range(30):  # cut off before the blank line that ends the request
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(b"GET /metrics HTTP/1.0\r\nHost: x\r\n")
    for _ in range(30):  # a whole request, then gone (reset) before the answer
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        sock.close()
    assert "ibdiag_verdict 2" in _body(raw_request(server.port, SCRAPE))
    code, stderr = server.stop()
    assert code == 0
    assert stderr == "", f"serve wrote to stderr:\n{stderr[:3000]}"


def test_serve_answers_http_0_9(serving):
    server = serving()
    answer = raw_request(server.port, b"GET /metrics\r\n", timeout=WAIT_S).decode()
    assert "ibdiag_verdict 2" in answer and not answer.startswith("HTTP/")


def test_serve_slowloris_neither_grows_threads_nor_memory_nor_stops_scrapes(serving):
    server = serving()
    before = server.status()
    idle: List[socket.socket] = []
    try:
        for number in range(300):
            sock = socket.create_connection(("127.0.0.1", server.port))
            if number % 3 == 0:
                sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never finished
            idle.append(sock)
        during = []
        for _ in range(3):  # scrapes still answer while the idle connections are held
            body = _body(raw_request(server.port, SCRAPE, WAIT_S))
            assert "ibdiag_verdict 2" in body
            during.append(server.status())
        threads = max(status["Threads"] for status in during)
        assert threads <= 8, f"{threads} threads with 300 idle connections ({before})"
    finally:
        for sock in idle:
            sock.close()
    assert "ibdiag_verdict 2" in _body(raw_request(server.port, SCRAPE))
    after = server.status()
    grown_mb = (after["VmRSS"] - before["VmRSS"]) / 1024
    assert grown_mb < 32, f"RSS grew {grown_mb:.1f} MB over a slowloris ({before} -> {after})"
    assert after["Threads"] <= 8


_HOLD_CHECK = """
    import os
    import time

    from ibdiag.registry import check


    @check("site.hold", title="Waits while a hold file exists", needs={"sysfs"}, level="quick")
    def hold(snap, th):
        \"\"\"Healthy: always. A test's stand-in for a sysfs read that does not return.\"\"\"
        with open(os.environ["IBDIAG_TEST_LOG"], "a") as log:
            log.write("start\\n")
        while os.path.exists(os.environ["IBDIAG_TEST_HOLD"]):
            time.sleep(0.05)
        with open(os.environ["IBDIAG_TEST_LOG"], "a") as log:
            log.write("end\\n")
        return []
"""


def test_serve_hung_collection_answers_at_the_deadline_and_shares_one_collection(
    serving, tmp_path: Path
):
    """A collection that blocks (a site check stands in for a sysfs read that never returns):
    scrapes answer at Prometheus's deadline with the last complete collection's samples and
    ibdiag_scrape_timeout 1, and concurrent scrapes never start a second collection."""
    checks = tmp_path / "checks.d"
    checks.mkdir()
    (checks / "hold.py").write_text(textwrap.dedent(_HOLD_CHECK))
    log, hold = tmp_path / "collections.log", tmp_path / "hold"
    env = dict(os.environ, IBDIAG_TEST_LOG=str(log), IBDIAG_TEST_HOLD=str(hold))
    server = serving("--checks-dir", str(checks), env=env)
    first = _body(raw_request(server.port, SCRAPE, WAIT_S))
    assert _value(first, "ibdiag_scrape_timeout") == 0
    collections = log.read_text().count("start")
    assert log.read_text().count("end") == collections

    hold.touch()
    answers: List[bytes] = []
    errors: List[BaseException] = []

    def scrape():
        try:
            answers.append(raw_request(server.port, STALE_SCRAPE, WAIT_S))
        except OSError as exc:
            errors.append(exc)

    clients = [threading.Thread(target=scrape) for _ in range(6)]
    for client in clients:
        client.start()
    for client in clients:
        client.join(WAIT_S * 2)
    assert not errors, f"scrapes got no answer while the collection hung: {errors}"
    for answer in answers:
        text = _body(answer)
        assert _value(text, "ibdiag_scrape_timeout") == 1
        assert _value(text, "ibdiag_verdict") == 2  # the last complete collection's
        stamp = "ibdiag_last_run_timestamp_seconds"
        assert _value(text, stamp) == _value(first, stamp)
    promtool_check(_body(answers[0]))
    assert log.read_text().count("start") == collections + 1, "a second collection started"

    hold.unlink()  # the blocked "read" returns
    end = time.monotonic() + WAIT_S
    while log.read_text().count("end") < collections + 1 and time.monotonic() < end:
        time.sleep(0.05)
    fresh = _body(raw_request(server.port, SCRAPE, WAIT_S))
    assert _value(fresh, "ibdiag_scrape_timeout") == 0
    assert re.search(r"^ibdiag_verdict 2$", fresh, re.M)
    code, stderr = server.stop()
    assert code == 0 and stderr == ""
