#!/usr/bin/env python3
"""Scrape latency of ``ibdiag serve``'s /metrics beside node_exporter's infiniband collector.

For generated ConnectX-6 trees of 8 and 64 HCAs (tests/sysfs_builder.py) it starts, as separate
processes on loopback ports:

    ibdiag         python -m ibdiag serve --sysfs <tree> --listen 127.0.0.1:PORT
    node_exporter  prometheus-node-exporter --path.sysfs=<tree> --collector.disable-defaults
                   --collector.infiniband --web.listen-address=127.0.0.1:PORT

and times a whole ``GET /metrics`` on each with the same client (raw socket, a new connection
per scrape, no gzip), alternating between the two so machine noise falls on both alike: HTTP
and rendering included on both sides. Reported per tree: the median and p90 wall time of each,
their ratio (target <= 2.0 at 8 HCAs), the body size, ibdiag's own collect+grade time
(``ibdiag_run_duration_seconds``) and node_exporter's own collector time
(``node_scrape_collector_duration_seconds{collector="infiniband"}``), for reference.

    python benchmarks/bench_scrape.py                      # 41 scrapes each, 8 and 64 HCAs
    python benchmarks/bench_scrape.py --scrapes 101 --hcas 8 --json benchmarks/results/s.json
    python benchmarks/bench_scrape.py --source /tmp/main-src   # another checkout's ibdiag
    python benchmarks/bench_scrape.py --history    # serve with a store: its monitor, the window
    python benchmarks/bench_scrape.py --history --max-age 30   # answered from the last collection
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))

from sysfs_builder import mlx5_node, write_node  # noqa: E402

TARGET_RATIO = 2.0
_NE_DURATION = re.compile(
    rb'^node_scrape_collector_duration_seconds\{collector="infiniband"\} (\S+)$', re.M
)
_IBDIAG_DURATION = re.compile(rb"^ibdiag_run_duration_seconds(?:\{[^}]*\})? (\S+)$", re.M)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def scrape(port: int, timeout: float = 30.0) -> Tuple[float, bytes]:
    """One ``GET /metrics`` on a new connection: (wall seconds, body). OSError if refused."""
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        chunks = []
        while True:
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    wall = time.perf_counter() - start
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    if not re.match(rb"HTTP/1\.[01] 200 ", head):
        raise RuntimeError(f"port {port}: {head[:80]!r}")
    return wall, body


def wait_ready(port: int, proc: subprocess.Popen, name: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            scrape(port)
            return
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"{name} did not start") from None
            time.sleep(0.05)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def child_env(source: str) -> Dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed ibdiag has its bytecode compiled
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, env.get("PYTHONPATH")]))
    return env


def start_ibdiag(
    source: str,
    sys_root: str,
    proc_root: str,
    history: Optional[str] = None,
    max_age: float = 0.0,
) -> Tuple[subprocess.Popen, int]:
    port = free_port()
    store = ["--history", history] if history else []
    store += ["--max-age", str(max_age)] if max_age else []
    proc = subprocess.Popen(
        [sys.executable, "-m", "ibdiag", "serve", "--sysfs", sys_root, "--procfs", proc_root,
         "--listen", f"127.0.0.1:{port}", *store],
        cwd=source, env=child_env(source), stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return proc, port


def start_node_exporter(binary: str, sys_root: str) -> Tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen(
        [binary, f"--path.sysfs={sys_root}", f"--web.listen-address=127.0.0.1:{port}",
         "--collector.disable-defaults", "--collector.infiniband"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return proc, port


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def own_time(pattern: re.Pattern[bytes], body: bytes) -> Optional[float]:
    match = pattern.search(body)
    return float(match.group(1)) if match else None


def bench_tree(
    binary: str,
    source: str,
    sys_root: str,
    proc_root: str,
    scrapes: int,
    history: Optional[str] = None,
    max_age: float = 0.0,
) -> dict:
    ours, our_port = start_ibdiag(source, sys_root, proc_root, history, max_age)
    theirs, their_port = start_node_exporter(binary, sys_root)
    try:
        wait_ready(our_port, ours, "ibdiag serve")
        wait_ready(their_port, theirs, "node_exporter")
        targets = {
            "ibdiag": (our_port, _IBDIAG_DURATION),
            "node_exporter": (their_port, _NE_DURATION),
        }
        walls: Dict[str, List[float]] = {name: [] for name in targets}
        owns: Dict[str, List[float]] = {name: [] for name in targets}
        sizes: Dict[str, int] = {}
        names = list(targets)
        for index in range(scrapes + 2):  # two warm-up rounds
            for name in names if index % 2 == 0 else names[::-1]:
                port, pattern = targets[name]
                wall, body = scrape(port)
                if index < 2:
                    continue
                walls[name].append(wall)
                sizes[name] = len(body)
                value = own_time(pattern, body)
                if value is not None:
                    owns[name].append(value)
    finally:
        stop(ours)
        stop(theirs)
    result = {}
    for name in names:
        result[name] = {
            "median_ms": statistics.median(walls[name]) * 1000,
            "p90_ms": percentile(walls[name], 0.9) * 1000,
            "min_ms": min(walls[name]) * 1000,
            "own_median_ms": statistics.median(owns[name]) * 1000 if owns[name] else None,
            "body_bytes": sizes[name],
            "samples_ms": [w * 1000 for w in walls[name]],
        }
    result["ratio"] = result["ibdiag"]["median_ms"] / result["node_exporter"]["median_ms"]
    return result


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scrapes", type=int, default=41, help="timed scrapes of each")
    parser.add_argument("--hcas", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--source", default=REPO, help="checkout whose ibdiag/ to serve")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument(
        "--history",
        action="store_true",
        help="serve with a history store (in the temporary folder): its monitor samples every "
        "port each second in the background and each scrape reads the window",
    )
    parser.add_argument(
        "--max-age",
        type=float,
        default=0.0,
        help="serve --max-age: scrapes answered from the last collection while it is younger",
    )
    args = parser.parse_args(argv)
    binary = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    if not binary:
        print("prometheus-node-exporter is not installed", file=sys.stderr)
        return 2
    results = {}
    with tempfile.TemporaryDirectory(prefix="ibdiag-bench-scrape-") as tmp:
        proc_root = os.path.join(tmp, "proc")
        os.makedirs(proc_root)
        for count in args.hcas:
            sys_root = os.path.join(tmp, f"hca{count}", "sys")
            write_node(sys_root, mlx5_node(count))
            history = os.path.join(tmp, f"hca{count}", "history.db") if args.history else None
            results[count] = bench_tree(
                binary,
                os.path.abspath(args.source),
                sys_root,
                proc_root,
                args.scrapes,
                history,
                args.max_age,
            )
    store = ", ibdiag with a history store and its monitor" if args.history else ""
    store += f", --max-age {args.max_age:g}" if args.max_age else ""
    print(f"{args.scrapes} scrapes of each, alternating; {os.cpu_count()} CPUs{store}")
    print(
        f"{'HCAs':>4} {'side':<14} {'median ms':>10} {'p90 ms':>8} {'min ms':>8} "
        f"{'own ms':>7} {'body B':>8}"
    )
    for count, result in results.items():
        for name in ("ibdiag", "node_exporter"):
            r = result[name]
            own = f"{r['own_median_ms']:>7.1f}" if r["own_median_ms"] is not None else f"{'-':>7}"
            print(
                f"{count:>4} {name:<14} {r['median_ms']:>10.1f} {r['p90_ms']:>8.1f} "
                f"{r['min_ms']:>8.1f} {own} {r['body_bytes']:>8}"
            )
        met = "met" if result["ratio"] <= TARGET_RATIO else "NOT met"
        print(f"{count:>4} ibdiag / node_exporter  {result['ratio']:.2f}  (target <= 2.0: {met})")
    if len(results) > 1:
        counts = sorted(results)
        low, high = counts[0], counts[-1]
        for name in ("ibdiag", "node_exporter"):
            grow = results[high][name]["median_ms"] / results[low][name]["median_ms"]
            print(f"{name}: {high} / {low} HCAs {grow:.2f}")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"scrapes": args.scrapes, "results": results}, out, indent=2)
            out.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
