"""Helpers for tests (and benchmarks) that run real servers on loopback: ports, GETs (urllib, or
raw bytes), ``ibdiag serve`` as a child process, a Prometheus scraping one or more targets, and
stopping what they started."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http_get(url: str, timeout: float = 10) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback
        return response.read().decode()


def start_prometheus(
    binary: str, workdir: Path, *target_ports: int, interval_s: float = 1.0
) -> Tuple[subprocess.Popen, int]:
    """A real Prometheus on loopback scraping 127.0.0.1:<each of target_ports> every
    ``interval_s`` (its scrape timeout as long); (process, its port). Its log is
    workdir/prometheus.log; stop it with ``stop``."""
    port = free_port()
    config = workdir / "prometheus.yml"
    every = f"{interval_s:g}s"
    targets = ", ".join(f"'127.0.0.1:{target}'" for target in target_ports)
    config.write_text(
        f"global:\n  scrape_interval: {every}\n  evaluation_interval: {every}\n"
        "scrape_configs:\n"
        f"  - job_name: ibdiag\n    scrape_interval: {every}\n    scrape_timeout: {every}\n"
        f"    static_configs:\n      - targets: [{targets}]\n"
    )
    with open(workdir / "prometheus.log", "wb") as log:  # the child keeps its own copy
        proc = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    return proc, port


def serve_in_thread(make_report, **options: Any) -> Tuple[Any, threading.Thread, int]:
    """``ibdiag serve``'s server (``ibdiag.exporter.make_server`` over ``make_report``, with
    ``options``) on a free loopback port, in a daemon thread: (server, thread, port). Stop it
    with ``server.shutdown()`` and ``server.server_close()``."""
    from ibdiag import exporter

    port = free_port()
    server = exporter.make_server(f"127.0.0.1:{port}", make_report, **options)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread, port


def stop(proc: subprocess.Popen) -> None:
    """Terminate, then kill if it will not go; wait either way."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


def raw_request(port: int, request: bytes, timeout: float = 30) -> bytes:
    """Send ``request`` as is to 127.0.0.1:port and return every byte of the answer, read until
    the server closes; socket.timeout if it has not within ``timeout`` seconds in all."""
    end = time.monotonic() + timeout
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        chunks = []
        while True:
            sock.settimeout(max(end - time.monotonic(), 0.001))
            chunk = sock.recv(1 << 16)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


class ServeProcess:
    """``python -m ibdiag serve ARGS --listen 127.0.0.1:<free port>`` as a child process (from
    ``cwd``, whose ``ibdiag`` it runs), its stdout and stderr in files under ``workdir`` (a pipe
    nobody reads could fill and stall it). ``ready`` waits for /metrics; ``stop`` sends SIGTERM
    and returns (exit status, stderr)."""

    def __init__(self, args: Sequence[str], cwd: str, workdir: Path, env=None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        self.stderr_path = Path(workdir) / f"serve-{self.port}.stderr"
        with open(self.stderr_path, "wb") as err:  # the child keeps its own copy
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "ibdiag", "serve", *args,
                 "--listen", f"127.0.0.1:{self.port}"],
                cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=err,
            )  # fmt: skip

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def ready(self, timeout: float = 60) -> str:
        """The first /metrics body; RuntimeError if the server exits or does not answer."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited with {self.proc.returncode}: {self.stderr()}")
            try:
                return http_get(self.url, timeout=timeout)
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"serve did not answer within {timeout} s: {self.stderr()}")

    def status(self) -> Dict[str, int]:
        """Threads and VmRSS (kB) from /proc/PID/status."""
        found = {}
        with open(f"/proc/{self.proc.pid}/status") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key in ("Threads", "VmRSS"):
                    found[key] = int(value.split()[0])
        return found

    def stop(self) -> Tuple[Optional[int], str]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)
        return self.proc.returncode, self.stderr()


def prometheus_tool(name: str) -> str:
    """The path of ``name`` (``prometheus``, ``promtool``, ``prometheus-node-exporter``); fails
    the test, never skips it, when Debian's package is not installed."""
    found = shutil.which(name) or (
        f"/usr/bin/{name}" if os.access(f"/usr/bin/{name}", os.X_OK) else None
    )
    if not found:
        import pytest  # benchmarks import this module too: pytest only when a tool is missing

        pytest.fail(
            f"{name} is not installed: these tests need Debian's prometheus and "
            "prometheus-node-exporter (apt-get install -y prometheus prometheus-node-exporter)"
        )
    return found
