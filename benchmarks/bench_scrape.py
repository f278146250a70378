#!/usr/bin/env python3
"""Scrape latency of ``serve``'s /metrics beside node_exporter's infiniband collector.

For 8 and 64 generated ConnectX-6 HCAs: ibdiag's scrape (collect + grade quick + render, timed
in-process over HTTP on loopback) and ``prometheus-node-exporter --collector.infiniband`` on the
same tree, whose cost is its own ``node_scrape_collector_duration_seconds{collector=
"infiniband"}``. Reported: median of each, and their ratio.

    python benchmarks/bench_scrape.py                # 15 scrapes, 8 and 64 HCAs
    python benchmarks/bench_scrape.py --scrapes 31 --hcas 8 64
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), os.path.join(os.path.dirname(HERE), "tests")]

from loopback import free_port, http_get  # noqa: E402
from sysfs_builder import mlx5_node, write_node  # noqa: E402

from ibdiag import exporter  # noqa: E402
from ibdiag.collect import collect  # noqa: E402
from ibdiag.grade import grade  # noqa: E402
from ibdiag.registry import load_registry  # noqa: E402
from ibdiag.thresholds import Thresholds  # noqa: E402

_DURATION = re.compile(
    r'^node_scrape_collector_duration_seconds\{collector="infiniband"\} (\S+)$', re.M
)


def bench_ibdiag(sys_root: str, scrapes: int) -> List[float]:
    registry = load_registry()

    def make_report():
        start = time.monotonic()
        snapshot = collect(sys_root, "/nonexistent-proc", {"sysfs"})
        return grade(snapshot, registry, Thresholds(), "quick"), time.monotonic() - start

    port = free_port()
    server = exporter.make_server(f"127.0.0.1:{port}", make_report)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        http_get(f"http://127.0.0.1:{port}/metrics", timeout=30)  # warm-up
        times = []
        for _ in range(scrapes):
            start = time.perf_counter()
            http_get(f"http://127.0.0.1:{port}/metrics", timeout=30)
            times.append(time.perf_counter() - start)
        return times
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def bench_node_exporter(binary: str, sys_root: str, scrapes: int) -> List[float]:
    port = free_port()
    proc = subprocess.Popen(
        [
            binary,
            f"--path.sysfs={sys_root}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--collector.disable-defaults",
            "--collector.infiniband",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                http_get(f"http://127.0.0.1:{port}/metrics", timeout=30)
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("node_exporter did not start") from None
                time.sleep(0.1)
        times = []
        for _ in range(scrapes):
            match = _DURATION.search(http_get(f"http://127.0.0.1:{port}/metrics", timeout=30))
            if not match:
                raise RuntimeError("node_exporter reported no infiniband collector duration")
            times.append(float(match.group(1)))
        return times
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scrapes", type=int, default=15, help="timed scrapes of each")
    parser.add_argument("--hcas", type=int, nargs="+", default=[8, 64])
    args = parser.parse_args(argv)
    binary = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    if not binary:
        print("prometheus-node-exporter is not installed", file=sys.stderr)
        return 2
    print(f"{'HCAs':>5} {'ibdiag /metrics':>16} {'node_exporter ib':>17} {'ratio':>7}")
    with tempfile.TemporaryDirectory(prefix="ibdiag-bench-scrape-") as tmp:
        for count in args.hcas:
            sys_root = os.path.join(tmp, f"hca{count}", "sys")
            write_node(sys_root, mlx5_node(count))
            ours = statistics.median(bench_ibdiag(sys_root, args.scrapes))
            theirs = statistics.median(bench_node_exporter(binary, sys_root, args.scrapes))
            print(
                f"{count:>5} {ours * 1000:>13.1f} ms {theirs * 1000:>14.1f} ms "
                f"{ours / theirs:>6.1f}x"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
