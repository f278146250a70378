#!/usr/bin/env python3
"""`ibdiag collect` with the support catalogue on 8 HCAs: wall time, commands, bundle size.

The node is tests/support_node.py's: 8 ConnectX-6 HCAs behind PCIe switches (32 functions for
lspci), 8 GPUs, one ACTIVE InfiniBand port and IPoIB netdev each, a procfs and a root file
system, and a stub for every tool the support catalogue and the standard families run, each
printing output of a real node's size (the module's docstring lists them; about 200 commands).
Each run is the default `ibdiag collect` (level standard, the default --deadline 25 s and
--command-timeout 10 s) as a separate process into a fresh directory. With `--delay S` every
stub sleeps S seconds before it answers: the runner's concurrency shows as a wall time near a
few S, not the sum of ~200 x S. Issue 26's target: <= 30 s on 8 HCAs when every tool answers
promptly.

For each delay it prints the median and the worst wall time, the commands run (and how many
timed out or were not started: the deadline), the sum of their durations, the bundle's files
and bytes (and the tarball's with --tarball), and the children's peak RSS. `--phases` adds one
more run per delay, in a child process with the collection's steps timed (sysfs and files,
commands, grading, writing the bundle), to tell where a slow collect spends its time.

    python benchmarks/bench_collect.py                        # delays 0, 0.5 and 2 s, 5 runs
    python benchmarks/bench_collect.py --runs 9 --delays 0 --phases
    python benchmarks/bench_collect.py --delays 0.3 --tarball --hcas 8
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "tests")]

from bench_quick import REPO, child_env, spawn  # noqa: E402
from support_node import SupportNode  # noqa: E402

# A child that runs the CLI with the collection's steps timed; prints {"step": [seconds, calls]}
# on stderr's last line. Each step is a module attribute the CLI looks up when it runs.
PHASES = r"""
import json, sys, time
import ibdiag.collect as c, ibdiag.pipeline as p, ibdiag.bundle.write as w
spent = {}
def timed(owner, name, label):
    inner = getattr(owner, name)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            entry = spent.setdefault(label, [0.0, 0])
            entry[0] += time.perf_counter() - start
            entry[1] += 1
    setattr(owner, name, wrapper)
timed(c, "collect", "collect (all)")
timed(c, "read_node", "sysfs, procfs, files")
timed(c, "_run_commands", "commands")
timed(p.Pipeline, "grade_snapshot", "grade")
timed(w, "write_bundle", "write bundle")
start = time.perf_counter()
from ibdiag.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
spent["process (after start-up)"] = [time.perf_counter() - start, 1]
sys.stderr.write("\n" + json.dumps(spent) + "\n")
"""


def directory_size(path: str) -> Tuple[int, int]:
    """(files, bytes) under ``path``."""
    count = total = 0
    for directory, _dirs, files in os.walk(path):
        for name in files:
            count += 1
            total += os.path.getsize(os.path.join(directory, name))
    return count, total


def bundle_of(out: str) -> Dict[str, object]:
    """What the run wrote: the directory bundle's size, its commands, the tarball's size."""
    made = glob.glob(os.path.join(out, "ibdiag-*"))
    found: Dict[str, object] = {}
    for path in made:
        if path.endswith(".tar.gz"):
            found["tarball_bytes"] = os.path.getsize(path)
        elif os.path.isdir(path):
            found["files"], found["bytes"] = directory_size(path)
            with open(os.path.join(path, "manifest.json")) as handle:
                commands = json.load(handle)["commands"]
            with open(os.path.join(path, "report.json")) as handle:
                runs = json.load(handle)["snapshot"]["commands"].values()
            found["commands"] = len(commands)
            found["timed_out"] = sum(1 for c in commands if c["timed_out"])
            found["not_started"] = sum(1 for c in commands if c["skipped"])
            found["sum_s"] = sum(run["duration_s"] for run in runs)
    return found


def phases(node: SupportNode, out: str) -> Dict[str, List[float]]:
    """One run with the collection's steps timed (``PHASES``)."""
    proc = subprocess.run(
        [sys.executable, "-c", PHASES, *node.argv(out=out)], cwd=REPO,
        env=node.env(child_env()), stdin=subprocess.DEVNULL, capture_output=True, text=True,
    )  # fmt: skip
    return json.loads(proc.stderr.strip().splitlines()[-1])


def measure(tmp: str, args: argparse.Namespace, delay: float) -> Dict[str, object]:
    node = SupportNode(os.path.join(tmp, f"node-{delay:g}"), hcas=args.hcas, delay=delay)
    env = node.env(child_env())
    walls: List[float] = []
    rss: List[int] = []
    bundle: Dict[str, object] = {}
    for run in range(args.runs):
        out = os.path.join(tmp, f"out-{delay:g}-{run}")
        extra = ["--tarball"] if args.tarball else []
        sample = spawn([sys.executable, "-m", "ibdiag", *node.argv(*extra, out=out)], env)
        if sample["exit"] not in (0, 1, 2):
            raise SystemExit(f"collect exited {sample['exit']} (delay {delay:g} s)")
        walls.append(sample["wall_s"])
        rss.append(int(sample["maxrss_kb"]))
        if not args.tarball or run == 0:
            # the directory form carries the manifest; with --tarball, one directory run too
            if args.tarball:
                out = os.path.join(tmp, f"out-{delay:g}-dir")
                spawn([sys.executable, "-m", "ibdiag", *node.argv(out=out)], env)
            bundle.update(bundle_of(out))
        if args.tarball:
            bundle.update({k: v for k, v in bundle_of(out).items() if k == "tarball_bytes"})
    row: Dict[str, object] = {
        "delay_s": delay,
        "median_s": statistics.median(walls),
        "max_s": max(walls),
        "rss_mb": max(rss) / 1024,
        **bundle,
    }
    if args.phases:
        row["phases"] = phases(node, os.path.join(tmp, f"out-{delay:g}-phases"))
    return row


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per delay")
    parser.add_argument("--hcas", type=int, default=8, help="HCAs (and GPUs) on the node")
    parser.add_argument(
        "--delays", default="0,0.5,2", metavar="S,S,...",
        help="seconds every stub sleeps before answering, one table row each",
    )  # fmt: skip
    parser.add_argument("--tarball", action="store_true", help="time the --tarball form")
    parser.add_argument("--phases", action="store_true", help="also time the steps (one run)")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    delays = [float(d) for d in args.delays.split(",") if d.strip()]
    if args.runs < 1 or args.hcas < 1 or any(d < 0 for d in delays):
        parser.error("--runs and --hcas must be at least 1, delays not negative")

    rows = []
    with tempfile.TemporaryDirectory(prefix="ibdiag-bench-collect-") as tmp:
        for delay in delays:
            rows.append(measure(tmp, args, delay))
    print(
        f"ibdiag collect, level standard, default --deadline 25 s and --command-timeout 10 s; "
        f"{args.hcas} HCAs, {args.hcas} GPUs; {args.runs} runs per delay; {os.cpu_count()} CPUs"
    )
    head = ("delay", "median", "max", "commands", "timed out", "not started", "sum of runs",
            "bundle files", "bundle bytes", "peak RSS")  # fmt: skip
    print(" | ".join(head) + (" | tarball bytes" if args.tarball else ""))
    for row in rows:
        cells = [
            f"{row['delay_s']:g} s", f"{row['median_s']:.2f} s", f"{row['max_s']:.2f} s",
            str(row.get("commands")), str(row.get("timed_out")), str(row.get("not_started")),
            f"{row.get('sum_s', 0):.1f} s", str(row.get("files")), f"{row.get('bytes', 0):,}",
            f"{row['rss_mb']:.0f} MB",
        ]  # fmt: skip
        if args.tarball:
            cells.append(f"{row.get('tarball_bytes', 0):,}")
        print(" | ".join(cells))
    for row in rows:
        if "phases" in row:
            steps = ", ".join(
                f"{name} {seconds:.2f} s" + (f" ({calls} calls)" if calls > 1 else "")
                for name, (seconds, calls) in row["phases"].items()  # type: ignore[union-attr]
            )
            print(f"steps at delay {row['delay_s']:g} s: {steps}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
