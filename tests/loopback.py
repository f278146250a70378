"""Helpers for tests (and benchmarks) that run real servers on loopback: ports, GETs, a
Prometheus scraping one target, and stopping what they started."""

from __future__ import annotations

import socket
import subprocess
import urllib.request
from pathlib import Path
from typing import Tuple


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http_get(url: str, timeout: float = 10) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback
        return response.read().decode()


def start_prometheus(binary: str, workdir: Path, target_port: int) -> Tuple[subprocess.Popen, int]:
    """A real Prometheus on loopback scraping 127.0.0.1:target_port every second; (process, its
    port). Its log is workdir/prometheus.log; stop it with ``stop``."""
    port = free_port()
    config = workdir / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n"
        "  - job_name: ibdiag\n    scrape_interval: 1s\n    scrape_timeout: 1s\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
    )
    with open(workdir / "prometheus.log", "wb") as log:  # the child keeps its own copy
        proc = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    return proc, port


def stop(proc: subprocess.Popen) -> None:
    """Terminate, then kill if it will not go; wait either way."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
