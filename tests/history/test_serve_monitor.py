"""``ibdiag serve`` with a history store: its background monitor records each flap between
scrapes, and /metrics says so (``ibdiag_port_flapping``, ``..._link_down_events_total``, the
link.flaps check's status) while the port is ACTIVE again at the scrape."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from typing import Dict, Tuple

from prometheus_text import parse, promtool_check
from test_watch import DOWN, UP, Node, closed, started, until

PORT = (("device", "mlx5_0"), ("port", "1"), ("ib_port", "mlx5_0:1"))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def scrape(port: int) -> Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float]:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        answer = b""
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200") or head.startswith(b"HTTP/1.1 200"), head[:100]
    promtool_check(body.decode())
    return parse(body.decode())


def test_serve_records_flaps_between_scrapes_and_exposes_them(tmp_path):
    node = Node(tmp_path)
    port = free_port()
    argv = [sys.executable, "-m", "ibdiag", "serve", "--sysfs", node.sys, "--procfs",
            str(node.proc), "--history", node.db, "--interval", "0.1",
            "--listen", f"127.0.0.1:{port}"]  # fmt: skip
    with open(node.err, "wb") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
    try:
        until("the monitor's first sample", lambda: started(node))
        first = scrape(port)
        assert first[("ibdiag_port_flapping", PORT)] == 0
        assert first[("ibdiag_port_link_down_events_total", PORT)] == 0
        for flap in range(1, 4):
            node.set("mlx5_0", **DOWN)
            until(f"outage {flap} to open", lambda: any(o.end is None for o in node.outages()))
            node.set("mlx5_0", **UP)
            until(f"outage {flap} to close", closed(node, flap))
        after = scrape(port)  # mlx5_0:1 is ACTIVE again now
        assert after[("ibdiag_port_state", PORT)] == 4
        assert after[("ibdiag_port_flapping", PORT)] == 1
        assert after[("ibdiag_port_link_down_events_total", PORT)] == 3
        status = (("check", "link.flaps"), ("target", "mlx5_0:1"))
        assert after[("ibdiag_check_status", status)] == 2  # fail
        other = (("device", "mlx5_1"), ("port", "1"), ("ib_port", "mlx5_1:1"))
        assert after[("ibdiag_port_flapping", other)] == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    assert node.err.read_text() == ""
