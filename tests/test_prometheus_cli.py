"""`ibdiag export --textfile` and `ibdiag serve --listen` from the command line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request

from conftest import REPO, SCENARIOS_DIR
from loopback import free_port

STUCK = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-2ports-stuck-INIT", "root", "sys")


def test_export_writes_the_metrics_file_atomically(run_cli, tmp_path):
    target = tmp_path / "ibdiag.prom"
    result = run_cli("export", "--sysfs", STUCK, "--textfile", str(target), "--compat", "moneo")
    assert result.exit_code == 0, result.output
    text = target.read_text()
    assert "ibdiag_verdict 2" in text
    assert 'ibdiag_check_status{check="link.state",target="mlx5_6:1"} 2' in text
    assert "ib_port_physical_state{" in text  # the moneo names too
    assert sorted(os.listdir(tmp_path)) == ["ibdiag.prom"]


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
