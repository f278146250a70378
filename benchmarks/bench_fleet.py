#!/usr/bin/env python3
"""`ibdiag fleet report` on 1,000 and 10,000 generated node reports: wall time, peak RSS, and
whether the cost is linear in nodes.

The reports are level-standard sized (tests/fleet_gen.py: 8 HCAs, every command's capture,
the far end of each cable, level full's loopback and nccl-tests; about 0.75 MB each as `ibdiag
check --json` writes them), with planted faults and their truth. They are generated once and
cached (--cache, default $TMPDIR/ibdiag-bench-fleet), keyed by node count, seed and a hash of
the generator's and ibdiag's sources, so a second run times the report alone.

For each size it runs, as a child process, round-robin over --runs rounds:

    python -m ibdiag fleet report DIR --json -o out.json

and reports the median wall time, the CPU time of the child and its children, its peak RSS
(ru_maxrss from os.wait4: the largest single process of the tree) and the peak of the whole
tree's RSS summed (sampled from /proc every 0.1 s: the parent and its reading pool), the
throughput (nodes/s, MB of reports/s), whether the report found exactly the
planted faults (outliers, suspect switches, rail misplacements, drift), and the ratio of the
10k run to the 1k run (linear: 10; per node: 1.0). Targets (issue 15): 10,000 nodes in at most
60 s and 1 GiB on a 2-core machine.

    python benchmarks/bench_fleet.py                            # 1,000 and 10,000 nodes
    python benchmarks/bench_fleet.py --generate-only            # just build the cache
    python benchmarks/bench_fleet.py --nodes 1000 --runs 3 --json benchmarks/results/fleet.json

Standard library only, plus the repository's tests/ helpers (the generator) and ibdiag; the
children use the interpreter running this script.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "tests")]

import fleet_gen  # noqa: E402
from bench_quick import REPO, child_env  # noqa: E402

TARGET_WALL_S = 60.0  # 10,000 nodes
TARGET_RSS_MB = 1024.0
TARGET_NODES = 10_000
FLEET_PACKAGE = os.path.join(REPO, "ibdiag", "fleet")


def source_key() -> str:
    """A hash of everything a generated report depends on: the generator and the test helpers
    it uses, ibdiag (but ibdiag.fleet, what is timed) and the built-in checks. Another version
    regenerates the cache."""
    digest = hashlib.sha256()
    for folder in ("ibdiag", "checks"):
        for root, dirs, names in os.walk(os.path.join(REPO, folder)):
            dirs[:] = sorted(d for d in dirs if os.path.join(root, d) != FLEET_PACKAGE)
            for name in sorted(names):
                if name.endswith(".py"):
                    with open(os.path.join(root, name), "rb") as handle:
                        digest.update(name.encode() + handle.read())
    for name in ("fleet_gen.py", "snapshots.py", "sysfs_builder.py"):
        with open(os.path.join(REPO, "tests", name), "rb") as handle:
            digest.update(handle.read())
    return digest.hexdigest()[:12]


def generated(cache: str, nodes: int, seed: int, workers: int) -> Dict[str, Any]:
    """The cached fleet of ``nodes`` (generated now if missing): its directory, truth and how
    long generating it took (None when it came from the cache)."""
    root = os.path.join(cache, f"n{nodes}-s{seed}-{source_key()}")
    truth_path = os.path.join(root, fleet_gen.TRUTH)
    seconds = None
    if not os.path.exists(truth_path):  # written last: its absence means incomplete
        shutil.rmtree(root, ignore_errors=True)
        print(f"generating {nodes} reports in {root} ({workers} workers) ...", flush=True)
        started = time.perf_counter()
        fleet_gen.write_fleet(root, nodes, seed, workers=workers)
        seconds = time.perf_counter() - started
        with open(os.path.join(root, "generated.json"), "w", encoding="utf-8") as handle:
            json.dump({"seconds": seconds, "workers": workers, "cpus": os.cpu_count()}, handle)
    with open(truth_path, encoding="utf-8") as handle:
        truth = json.load(handle)
    with open(os.path.join(root, "generated.json"), encoding="utf-8") as handle:
        made = json.load(handle)
    return {
        "nodes": nodes,
        "directory": os.path.join(root, fleet_gen.REPORTS),
        "truth": truth,
        "generated_now": seconds is not None,
        "generation_s": made["seconds"],
        "generation_workers": made["workers"],
        "bytes": truth["bytes"],
        "avg_report_kb": truth["bytes"] / nodes / 1024,
    }


def compare(report: Dict[str, Any], truth: Dict[str, Any]) -> List[str]:
    """What the fleet report found that the truth does not say, or missed (one line each)."""
    from ibdiag.hostlist import expand

    def diff(name: str, found: set, expected: set) -> List[str]:
        lines = [f"{name}: missed {item}" for item in sorted(expected - found, key=str)]
        return lines + [f"{name}: not planted {item}" for item in sorted(found - expected, key=str)]

    lines = diff(
        "outlier",
        {(o["host"], o["metric"], o["rail"]) for o in report.get("outliers", [])},
        {(o["host"], o["metric"], o["rail"]) for o in truth["outliers"]},
    )
    lines += diff(
        "switch",
        {(s["peer_name"], s["suspect"]) for s in report.get("switches", [])},
        {(s["peer_name"], s["suspect"]) for s in truth["switches"]},
    )
    lines += diff(
        "rail misplacement",
        {(m["host"], m["rail"]) for m in report.get("rail_misplacements", [])},
        {(m["host"], m["rail"]) for m in truth["rail_misplacements"]},
    )
    lines += diff(
        "drift",
        {
            (d["attribute"], d["rail"], o["value"], tuple(expand(o["nodes"])))
            for d in report.get("drift", [])
            for o in d["others"]
        },
        {
            (d["attribute"], d["rail"], value, tuple(hosts))
            for d in truth["drift"]
            for value, hosts in d["others"].items()
        },
    )
    return lines


def tree_rss_kb(root: int) -> int:
    """The summed VmRSS (kB) of process ``root`` and every descendant (its reading pool)."""
    parents: Dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as handle:
                    stat = handle.read()
            except OSError:
                continue
            parents[int(name)] = int(stat[stat.rindex(b")") + 2 :].split()[1])
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        tree.add(pid)
        todo += [child for child, parent in parents.items() if parent == pid]
    total = 0
    for pid in tree:
        try:
            with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
                total += next((int(line.split()[1]) for line in handle
                               if line.startswith("VmRSS:")), 0)  # fmt: skip
        except OSError:
            continue
    return total


def spawn(argv: Sequence[str], env: Dict[str, str]) -> Dict[str, Any]:
    """Run once with stdout/stderr to /dev/null: wall seconds, exit code, CPU seconds of it
    and its children, ru_maxrss (the largest single process: ``wait4`` reports the child's own
    or its largest descendant's), and the sampled peak of the whole tree's RSS, summed (every
    0.1 s: the reading pool's workers and the parent at once)."""
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
    ]
    peak = [0]
    done = threading.Event()
    start = time.perf_counter()
    pid = os.posix_spawn(argv[0], list(argv), env, file_actions=actions)

    def sample() -> None:
        while not done.wait(0.1):
            peak[0] = max(peak[0], tree_rss_kb(pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    return {
        "wall_s": wall,
        "exit": os.waitstatus_to_exitcode(status),
        "maxrss_kb": usage.ru_maxrss,
        "tree_rss_kb": peak[0],
        "cpu_s": usage.ru_utime + usage.ru_stime,
    }


def time_report(fleet: Dict[str, Any], out_dir: str, env: Dict[str, str]) -> Dict[str, Any]:
    """One timed ``fleet report`` of the fleet (stdout and stderr to /dev/null)."""
    out = os.path.join(out_dir, f"fleet-{fleet['nodes']}.json")
    argv = [sys.executable, "-m", "ibdiag", "fleet", "report", fleet["directory"], "--json",
            "-o", out]  # fmt: skip
    sample = spawn(argv, env)
    sample["argv"] = argv
    sample["out"] = out
    return sample


def explain_failure(argv: Sequence[str], env: Dict[str, str]) -> str:
    proc = subprocess.run(
        list(argv), cwd=REPO, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    return (proc.stderr or proc.stdout).strip()[-2000:]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", default="1000,10000", metavar="N,N,...",
                        help="fleet sizes (at least 128 each)")  # fmt: skip
    parser.add_argument("--runs", type=int, default=1, help="timed runs of each size")
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="processes generating the reports")  # fmt: skip
    parser.add_argument(
        "--cache", default=os.path.join(tempfile.gettempdir(), "ibdiag-bench-fleet"),
        help="where generated fleets are kept between runs",
    )  # fmt: skip
    parser.add_argument(
        "--generate-only", action="store_true",
        help="generate (or find) the fleets and report their sizes; time nothing",
    )  # fmt: skip
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)
    sizes = sorted({int(n) for n in args.nodes.split(",") if n.strip()})
    if not sizes or min(sizes) < 128 or args.runs < 1 or args.workers < 1:
        parser.error("sizes of at least 128 nodes, --runs and --workers at least 1")

    print(f"python {platform.python_version()} ({sys.executable}), {os.cpu_count()} CPUs")
    fleets = [generated(args.cache, n, args.seed, args.workers) for n in sizes]
    print()
    print(f"{'nodes':>7} {'avg report KB':>14} {'total MB':>9} {'generation s':>13} "
          f"{'nodes/s':>8} {'workers':>8}")  # fmt: skip
    for fleet in fleets:
        rate = fleet["nodes"] / fleet["generation_s"]
        note = "" if fleet["generated_now"] else "  (cached)"
        print(f"{fleet['nodes']:>7} {fleet['avg_report_kb']:>14.1f} "
              f"{fleet['bytes'] / 1e6:>9.1f} {fleet['generation_s']:>13.1f} {rate:>8.1f} "
              f"{fleet['generation_workers']:>8}{note}")  # fmt: skip

    results: Dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "executable": sys.executable,
        "cpus": os.cpu_count(),
        "seed": args.seed,
        "fleets": [{k: v for k, v in f.items() if k != "truth"} for f in fleets],
    }
    if not args.generate_only:
        results.update(run_reports(fleets, args.runs))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(results, out, indent=2)
            out.write("\n")
        print(f"wrote {args.json}")
    return 1 if results.get("failed") else 0


def run_reports(fleets: List[Dict[str, Any]], runs: int) -> Dict[str, Any]:
    env = child_env()
    os.chdir(REPO)
    samples: Dict[int, List[Dict[str, Any]]] = {f["nodes"]: [] for f in fleets}
    findings: Dict[int, List[str]] = {}
    failed = False
    with tempfile.TemporaryDirectory(prefix="ibdiag-bench-fleet-out-") as out_dir:
        for _ in range(runs):
            for fleet in fleets:
                sample = time_report(fleet, out_dir, env)
                if sample["exit"] not in (0, 1, 2):
                    why = explain_failure(sample["argv"], env)
                    print(f"\nfleet report on {fleet['nodes']} nodes exited {sample['exit']}:"
                          f"\n{why}")  # fmt: skip
                    return {"failed": True, "error": why}
                with open(sample["out"], encoding="utf-8") as handle:
                    findings[fleet["nodes"]] = compare(json.load(handle), fleet["truth"])
                samples[fleet["nodes"]].append(
                    {k: v for k, v in sample.items() if k not in ("argv", "out")}
                )

    print()
    print(f"{'nodes':>7} {'median s':>9} {'cpu s':>7} {'maxrss MB':>10} {'tree RSS MB':>12} "
          f"{'nodes/s':>8} {'MB/s':>7} {'exit':>5}  planted faults")  # fmt: skip
    summary = {}
    for fleet in fleets:
        n = fleet["nodes"]
        wall = statistics.median(s["wall_s"] for s in samples[n])
        cpu = statistics.median(s["cpu_s"] for s in samples[n])
        rss_mb = max(s["maxrss_kb"] for s in samples[n]) / 1024
        tree_mb = max(s["tree_rss_kb"] for s in samples[n]) / 1024
        misses = findings[n]
        summary[n] = {
            "median_s": wall, "cpu_s": cpu, "peak_rss_mb": rss_mb, "tree_rss_mb": tree_mb,
            "nodes_per_s": n / wall,
            "mb_per_s": fleet["bytes"] / 1e6 / wall, "exit": samples[n][-1]["exit"],
            "exact": not misses, "differences": misses,
        }  # fmt: skip
        found = "all found, nothing else" if not misses else f"{len(misses)} differences"
        mb_s = fleet["bytes"] / 1e6 / wall
        print(f"{n:>7} {wall:>9.2f} {cpu:>7.2f} {rss_mb:>10.1f} {tree_mb:>12.1f} "
              f"{n / wall:>8.0f} {mb_s:>7.1f} {samples[n][-1]['exit']:>5}  {found}")  # fmt: skip
        for line in misses[:20]:
            print(f"          {line}")
        failed = failed or bool(misses)

    checks: Dict[str, Any] = {}
    small, large = min(summary), max(summary)
    if large > small:
        ratio = summary[large]["median_s"] / summary[small]["median_s"]
        per_node = ratio / (large / small)
        checks["linearity"] = {"nodes_ratio": large / small, "wall_ratio": ratio,
                               "per_node_ratio": per_node}  # fmt: skip
        print()
        print(f"{large} / {small} nodes: wall x{ratio:.2f} for x{large / small:g} nodes "
              f"(per node x{per_node:.2f}; linear is 1.0)")  # fmt: skip
    if TARGET_NODES in summary:
        at = summary[TARGET_NODES]
        rss = max(at["peak_rss_mb"], at["tree_rss_mb"])  # the stricter of the two
        checks["target"] = {
            "wall_s": at["median_s"], "wall_ok": at["median_s"] <= TARGET_WALL_S,
            "rss_mb": rss, "rss_ok": rss <= TARGET_RSS_MB,
        }  # fmt: skip
        print(f"target at {TARGET_NODES} nodes: {at['median_s']:.1f} s (<= {TARGET_WALL_S:g}: "
              f"{'yes' if checks['target']['wall_ok'] else 'NO'}), {rss:.0f} MB, the process "
              f"tree's sampled sum or the largest process (<= {TARGET_RSS_MB:g}: "
              f"{'yes' if checks['target']['rss_ok'] else 'NO'})")  # fmt: skip
    return {"runs": runs, "summary": summary, "checks": checks, "samples": samples,
            "failed": failed}  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
