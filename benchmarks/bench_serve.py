#!/usr/bin/env python3
"""``ibdiag serve`` under load and under hostile clients: req/s, latency, threads and RSS.

Starts ``python -m ibdiag serve`` (the ``ibdiag`` package of ``--source``, default this
checkout: point it at an export of another branch to compare) on a generated sysfs tree
(``tests/sysfs_builder.py``, ``--hcas`` ConnectX-6 HCAs) and measures, from this process:

1. **single**: ``--single`` scrapes one after another (one client): the cost of a collection.
2. **load**: ``--clients`` threads scraping /metrics back to back for ``--duration`` seconds
   (a new connection per scrape, HTTP/1.0): requests per second, p50/p95/max latency, errors.
3. **slowloris**: ``--idle`` connections opened and held for ``--hold`` seconds (a third of
   them send half a request head and stop); meanwhile scrapes one after another (latency,
   failures), the server's threads and RSS; then all closed, and the time until /metrics
   answers again (``recovery``), the server's RSS and threads once it does and after a
   ``--settle`` second pause.
4. **half-sent**: ``--half-sent`` connections that send half a request head and disconnect,
   and as many that send a whole request and reset before the answer; then the number of
   ``Traceback`` lines the server wrote to stderr.

Threads and RSS are the server's ``Threads`` and ``VmRSS`` in /proc/PID/status. Standard
library only (plus ``tests/``); nothing here passes or fails, the figures depend on the machine.

    python benchmarks/bench_serve.py
    git archive main | tar -x -C /tmp/main-src
    python benchmarks/bench_serve.py --source /tmp/main-src --json before.json
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [os.path.join(REPO, "tests")]

from loopback import free_port  # noqa: E402
from sysfs_builder import mlx5_node, write_node  # noqa: E402

REQUEST = b"GET /metrics HTTP/1.0\r\nHost: bench\r\n\r\n"
HALF = b"GET /metrics HTTP/1.1\r\nHost: bench\r\n"  # no blank line: the head never ends
LINGER_RESET = b"\x01\x00\x00\x00\x00\x00\x00\x00"  # SO_LINGER on, 0 s: close sends RST


def scrape(port: int, timeout: float) -> Tuple[bool, float]:
    """One GET /metrics on a new connection: (answered 200 in full, seconds)."""
    start = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(REQUEST)
            chunks = []
            while True:
                chunk = sock.recv(1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
    except OSError:
        return False, time.perf_counter() - start
    data = b"".join(chunks)
    head, _, body = data.partition(b"\r\n\r\n")
    ok = head.startswith(b"HTTP/1.0 200") and f"Content-Length: {len(body)}".encode() in head
    return ok, time.perf_counter() - start


def proc_status(pid: int) -> Dict[str, int]:
    found = {}
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            key, _, value = line.partition(":")
            if key in ("Threads", "VmRSS"):
                found[key] = int(value.split()[0])
    return {"threads": found["Threads"], "rss_mb": round(found["VmRSS"] / 1024, 1)}


def percentile(values: Sequence[float], fraction: float) -> Optional[float]:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def ms(value: Optional[float]) -> Optional[float]:
    return None if value is None else round(value * 1000, 1)


class Server:
    def __init__(self, source: str, sys_root: str, extra: Sequence[str], workdir: str) -> None:
        self.port = free_port()
        self.stderr_path = os.path.join(workdir, "serve.stderr")
        env = dict(os.environ, PYTHONPATH=source)
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "ibdiag", "serve", "--sysfs", sys_root,
                 "--listen", f"127.0.0.1:{self.port}", *extra],
                cwd=source, env=env, stdout=subprocess.DEVNULL, stderr=err,
            )  # fmt: skip
        end = time.monotonic() + 60
        while not scrape(self.port, 10)[0]:
            if self.proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError(f"serve did not start: {self.stderr()[-2000:]}")
            time.sleep(0.1)

    def stderr(self) -> str:
        with open(self.stderr_path, errors="replace") as handle:
            return handle.read()

    def status(self) -> Dict[str, int]:
        return proc_status(self.proc.pid)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)


def bench_single(server: Server, count: int) -> Dict:
    times = [scrape(server.port, 30)[1] for _ in range(count)]
    return {"scrapes": count, "p50_ms": ms(statistics.median(times))}


def bench_load(server: Server, clients: int, duration: float) -> Dict:
    latencies: List[float] = []
    errors = [0]
    lock = threading.Lock()
    end = time.monotonic() + duration

    def client() -> None:
        while time.monotonic() < end:
            ok, seconds = scrape(server.port, 30)
            with lock:
                if ok:
                    latencies.append(seconds)
                else:
                    errors[0] += 1

    threads = [threading.Thread(target=client) for _ in range(clients)]
    start = time.monotonic()
    for thread in threads:
        thread.start()
    peak = server.status()
    while any(thread.is_alive() for thread in threads):
        time.sleep(0.25)
        if server.proc.poll() is None:
            now = server.status()
            peak = {key: max(peak[key], now[key]) for key in peak}
    elapsed = time.monotonic() - start
    return {
        "clients": clients,
        "seconds": round(elapsed, 1),
        "requests": len(latencies),
        "errors": errors[0],
        "req_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": ms(percentile(latencies, 0.50)),
        "p95_ms": ms(percentile(latencies, 0.95)),
        "max_ms": ms(max(latencies) if latencies else None),
        "server_peak": peak,
    }


def bench_slowloris(server: Server, idle: int, hold: float, settle: float) -> Dict:
    before = server.status()
    sockets: List[socket.socket] = []
    refused = 0
    start = time.monotonic()
    for number in range(idle):
        try:
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            if number % 3 == 0:
                sock.sendall(HALF)
            sockets.append(sock)
        except OSError:
            refused += 1
    opened_s = time.monotonic() - start
    during_scrapes: List[float] = []
    during_failed = 0
    peak = server.status()
    end = time.monotonic() + hold
    while time.monotonic() < end:
        ok, seconds = scrape(server.port, 30)
        if ok:
            during_scrapes.append(seconds)
        else:
            during_failed += 1
        now = server.status()
        peak = {key: max(peak[key], now[key]) for key in peak}
    for sock in sockets:
        sock.close()
    closed = time.monotonic()
    recovery = None
    while time.monotonic() - closed < 120:
        if scrape(server.port, 30)[0]:
            recovery = time.monotonic() - closed
            break
        time.sleep(0.05)
    after = server.status()
    time.sleep(settle)
    scrape(server.port, 30)
    settled = server.status()
    return {
        "idle": idle,
        "connect_failed": refused,
        "open_s": round(opened_s, 2),
        "before": before,
        "during_peak": peak,
        "during_scrapes_ok": len(during_scrapes),
        "during_scrapes_failed": during_failed,
        "during_p50_ms": ms(percentile(during_scrapes, 0.5)),
        "during_max_ms": ms(max(during_scrapes) if during_scrapes else None),
        "recovery_ms": ms(recovery),
        "after": after,
        "after_settle": settled,
    }


def bench_half_sent(server: Server, count: int) -> Dict:
    for _ in range(count):
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
                sock.sendall(HALF)
        except OSError:
            pass
    for _ in range(count):
        try:
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RESET)
            sock.sendall(REQUEST)
            sock.close()
        except OSError:
            pass
    time.sleep(2)  # let the server finish with them
    ok, _ = scrape(server.port, 30)
    stderr = server.stderr()
    return {
        "half_sent": count,
        "reset": count,
        "tracebacks": stderr.count("Traceback"),
        "stderr_lines": len(stderr.splitlines()),
        "answers_after": ok,
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default=REPO, help="tree whose ibdiag/ to run")
    parser.add_argument("--hcas", type=int, default=8)
    parser.add_argument("--single", type=int, default=20, help="sequential scrapes")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--duration", type=float, default=10.0, help="load phase, seconds")
    parser.add_argument("--idle", type=int, default=1500, help="slowloris connections")
    parser.add_argument("--hold", type=float, default=5.0, help="seconds they are held")
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--half-sent", type=int, default=500)
    parser.add_argument("--serve-arg", action="append", default=[], help="extra serve option")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    results: Dict = {"source": os.path.abspath(args.source), "hcas": args.hcas}
    with tempfile.TemporaryDirectory(prefix="ibdiag-bench-serve-") as tmp:
        sys_root = os.path.join(tmp, "sys")
        write_node(sys_root, mlx5_node(args.hcas))
        server = Server(args.source, sys_root, args.serve_arg, tmp)
        try:
            results["started"] = server.status()
            results["single"] = bench_single(server, args.single)
            print(f"single   {results['single']}", flush=True)
            results["load"] = bench_load(server, args.clients, args.duration)
            print(f"load     {results['load']}", flush=True)
            results["slowloris"] = bench_slowloris(server, args.idle, args.hold, args.settle)
            print(f"slowloris {results['slowloris']}", flush=True)
            results["half_sent"] = bench_half_sent(server, args.half_sent)
            print(f"half-sent {results['half_sent']}", flush=True)
        finally:
            server.stop()
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
