#!/usr/bin/env python3
"""`ibdiag check --level standard` where every command prints megabytes of binary junk.

A broken or hostile tool (a wrapper that cats a core file, a driver spewing garbage) must cost
ibdiag a bounded amount of memory and time: what the runner keeps is capped per stream and in
all, so the report, its JSON and the time spent parsing are bounded by the caps, not by what
the tools print.

This script writes a 12-HCA mlx5 sysfs tree (tests/sysfs_builder.py: one IB port and one IPoIB
netdev each), a procfs directory, and stub tools (tests/stubs) that each print the same
``--megabytes`` of random bytes - 51 commands: perfquery -x, -E, -X per port (36), ethtool -S
per netdev (12), dmesg, ibstat, ibv_devinfo. It then runs, as separate processes:

    text   python -m ibdiag check --level standard --deadline 20 --sysfs <tree> --procfs <proc>
    json   the same with --json, stdout to a file (its size is reported)

and reports per case the median wall time, ibdiag's own peak RSS (VmHWM, read from /proc while
it runs; ru_maxrss from os.wait4 beside it, which also counts what forked children were
charged) and, for json, the report's size and how many bytes of command output it kept.

    python benchmarks/bench_flood.py                    # 3 runs of each
    python benchmarks/bench_flood.py --runs 1 --json benchmarks/results/flood.json

Standard library only, plus the repository's tests/ helpers; every run uses the interpreter
running this script.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "tests")]

import stubs as S  # noqa: E402
from bench_quick import REPO, build_tree, child_env  # noqa: E402

TOOLS = ("perfquery", "ethtool", "dmesg", "journalctl", "ibstat", "ibv_devinfo")


def write_junk(path: str, megabytes: float) -> str:
    """``megabytes`` (10^6 bytes) of random bytes, NULs and invalid UTF-8 included."""
    size = int(megabytes * 1000 * 1000)
    with open(path, "wb") as out:
        out.write(os.urandom(size))
    return path


def run_measured(argv: Sequence[str], env: Dict[str, str], out_path: str) -> Dict[str, float]:
    """Run once, stdout to ``out_path``: wall seconds, exit code, ibdiag's own peak RSS
    (``VmHWM`` from /proc, read until it exits) and ``ru_maxrss`` from ``wait4``.

    ``ru_maxrss`` of a process also covers its reaped children, and a child forked from ibdiag
    is charged ibdiag's resident pages until it execs: VmHWM is ibdiag's own peak.
    """
    start = time.perf_counter()
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(
            list(argv), env=env, stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
    hwm_kb = 0
    while True:
        try:
            with open(f"/proc/{proc.pid}/status", encoding="ascii", errors="replace") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        hwm_kb = max(hwm_kb, int(line.split()[1]))
        except (OSError, ValueError):
            pass
        pid, code, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(code)
            break
        time.sleep(0.02)
    return {
        "wall_s": time.perf_counter() - start,
        "exit": proc.returncode,
        "vmhwm_kb": hwm_kb,
        "maxrss_kb": usage.ru_maxrss,
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each case")
    parser.add_argument("--hcas", type=int, default=12, help="HCAs (12: 51 commands)")
    parser.add_argument("--megabytes", type=float, default=3.0, help="what each command prints")
    parser.add_argument("--deadline", type=float, default=20.0, help="ibdiag's --deadline")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.hcas < 1 or args.megabytes <= 0:
        parser.error("--runs and --hcas must be at least 1, --megabytes positive")

    py = sys.executable
    samples: Dict[str, List[Dict[str, float]]] = {"text": [], "json": []}
    sizes: List[int] = []
    kept: List[int] = []
    commands = 0
    with tempfile.TemporaryDirectory(prefix="ibdiag-bench-flood-") as tmp:
        tree = build_tree(tmp, args.hcas)
        procfs = S.write_procfs(os.path.join(tmp, "proc"), boot_time=time.time() - 3600)
        junk = write_junk(os.path.join(tmp, "junk.bin"), args.megabytes)
        stubs = S.StubBin(os.path.join(tmp, "stubs"))
        for tool in TOOLS:
            stubs.add(tool, S.prints(junk))
        env = stubs.env(child_env())
        base = [py, "-m", "ibdiag", "check", "--level", "standard", "--deadline",
                f"{args.deadline:g}", "--sysfs", tree, "--procfs", procfs]  # fmt: skip
        out_path = os.path.join(tmp, "report.json")
        os.chdir(REPO)
        for _ in range(args.runs):
            sample = run_measured(base, env, os.devnull)
            if sample["exit"] not in (0, 1, 2):
                raise SystemExit(f"text run exited {sample['exit']}: {' '.join(base)}")
            samples["text"].append(sample)
            sample = run_measured([*base, "--json"], env, out_path)
            if sample["exit"] not in (0, 1, 2):
                raise SystemExit(f"json run exited {sample['exit']}")
            samples["json"].append(sample)
            sizes.append(os.path.getsize(out_path))
            with open(out_path, encoding="utf-8") as handle:
                recorded = json.load(handle)["snapshot"]["commands"]
            commands = len(recorded)
            kept.append(
                sum(
                    len(run["stdout"].encode()) + len(run["stderr"].encode())
                    for run in recorded.values()
                )
            )

    summary = {
        name: {
            "median_s": statistics.median(s["wall_s"] for s in runs),
            "max_s": max(s["wall_s"] for s in runs),
            "peak_rss_mb": max(s["vmhwm_kb"] for s in runs) / 1024,
            "ru_maxrss_mb": max(s["maxrss_kb"] for s in runs) / 1024,
        }
        for name, runs in samples.items()
    }
    summary["json"]["report_mb"] = max(sizes) / 1e6
    summary["json"]["kept_output_mb"] = max(kept) / 1e6
    print(f"python {platform.python_version()} ({py}), {os.cpu_count()} CPUs, {args.hcas} HCAs")
    print(f"{commands} commands, each printing {args.megabytes:g} MB of random bytes; "
          f"--deadline {args.deadline:g}; {args.runs} run(s) of each case")  # fmt: skip
    print()
    print(f"{'case':6} {'median s':>9} {'max s':>7} {'peak RSS MB':>12} {'ru_maxrss MB':>13}")
    for name, row in summary.items():
        print(f"{name:6} {row['median_s']:9.2f} {row['max_s']:7.2f} {row['peak_rss_mb']:12.1f} "
              f"{row['ru_maxrss_mb']:13.1f}")  # fmt: skip
    print()
    print(
        f"JSON report: {summary['json']['report_mb']:.1f} MB; command output kept in it: "
        f"{summary['json']['kept_output_mb']:.1f} MB (UTF-8, after replacement of bad bytes)"
    )
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(
                {
                    "when": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                    "python": platform.python_version(),
                    "cpus": os.cpu_count(),
                    "args": vars(args),
                    "commands": commands,
                    "summary": summary,
                    "samples": samples,
                },
                out,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
