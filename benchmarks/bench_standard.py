#!/usr/bin/env python3
"""`ibdiag check --level standard` on 8 HCAs where every command takes 0.3 s: concurrent or not?

Level standard runs read-only commands: perfquery (plain, -x, -E, -X) per ACTIVE InfiniBand
port, ethtool -S per netdev, dmesg, ibstat and ibv_devinfo - 43 commands on an 8-HCA node. Run
one after another they would take the sum of their times; ibdiag runs them concurrently in a
bounded pool, so the wall time should be close to the slowest command (or to the pool's waves:
ceil(commands / workers) x 0.3 s), not to the sum.

This script writes an 8-HCA mlx5 sysfs tree (tests/sysfs_builder.py) and a procfs directory,
puts stub executables on PATH (tests/stubs: each sleeps --delay seconds, then prints a real
capture from tests/fixtures), and times, as separate processes, round-robin:

    standard  python -m ibdiag check --level standard --sysfs <tree> --procfs <proc>
    quick     python -m ibdiag check --level quick ...   (the same start-up, no command)

It reports the median wall time against the slowest single command (--delay) and the sum of
all commands (count x --delay), the ratio wall / sum, and the children's peak RSS (ru_maxrss
from os.wait4). A second, in-process part runs the same 43 commands through the Runner alone
with several pool sizes (--sweep), to show where the wall time goes.

    python benchmarks/bench_standard.py                 # 7 timed runs of each
    python benchmarks/bench_standard.py --runs 15 --json benchmarks/results/standard.json

Standard library only, plus the repository's tests/ helpers and ibdiag itself (the Runner
sweep); every run uses the interpreter running this script.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
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

# tests/stubs writes the stub tools; bench_quick has the tree, spawn and RSS helpers.
import stubs as S  # noqa: E402
from bench_quick import REPO, build_tree, child_env, percentile, spawn  # noqa: E402

TOOLS = ("perfquery", "ethtool", "dmesg", "journalctl", "ibstat", "ibv_devinfo")


def write_stubs(root: str, delay: float, hcas: int) -> S.StubBin:
    """Every tool sleeps ``delay`` s, then prints a real capture (journalctl: not reached)."""
    stubs = S.StubBin(os.path.join(root, "stubs"))
    x = S.fixture(*S.PERFQUERY_X_HEALTHY)
    stubs.add(
        "perfquery",
        S.by_args(
            {
                "-x -C *": S.prints(x, delay=delay),
                "-E -C *": S.prints(S.fixture(*S.PERFQUERY_E), delay=delay),
                "-X -C *": S.prints_text(S.PERFQUERY_XMIT_SL, delay=delay),
                "-C *": S.prints(x, delay=delay),
            }
        ),
    )
    stubs.add("ethtool", S.prints(S.fixture(*S.ETHTOOL_S), delay=delay))
    stubs.add("dmesg", S.prints(S.fixture(*S.DMESG_PCIE_POWER), delay=delay))
    stubs.add("journalctl", S.prints(S.fixture(*S.DMESG_PCIE_POWER), delay=delay))
    ibstat = S.fixture("ibstat", "gpud-ibstat-a100-vm-9xMT4126-VF-hdr-all-active.txt")
    listing = S.first_blocks(ibstat, "CA '", min(hcas, 9), os.path.join(root, "ibstat.txt"))
    stubs.add("ibstat", S.prints(listing, delay=delay))
    devinfo = S.fixture("ibv_devinfo", "linux-rdma-2024-cx5-roce-two-pf-before-bonding.txt")
    stubs.add("ibv_devinfo", S.prints(devinfo, delay=delay))
    return stubs


def report_of(argv: Sequence[str], env: Dict[str, str], source: str = REPO) -> dict:
    """One untimed run with --json: the verdict and every command's recorded run."""
    proc = subprocess.run(
        [*argv, "--json"], cwd=source, env=env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode not in (0, 1, 2):
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stderr}")
    return json.loads(proc.stdout)


def runner_sweep(
    tree: str, stubs: S.StubBin, workers: Sequence[int], deadline: float
) -> List[Dict[str, float]]:
    """The same planned commands through the Runner alone (in-process), per pool size."""
    from datetime import datetime, timezone

    from ibdiag import __version__, families
    from ibdiag.model import Snapshot
    from ibdiag.runner.command_runner import Runner
    from ibdiag.sources import sysfs

    devices, _ = sysfs.read_devices(sysfs.SysfsReader(tree))
    node = Snapshot(tool_version=__version__, host="bench", collected_at=datetime.now(timezone.utc),
                    sysfs_root=tree, procfs_root="/proc", devices=devices)  # fmt: skip
    needs = ["perfquery", "ethtool", "kernel_log", "ibstat", "ibv_devinfo"]
    commands = [item for item in families.plan(node, needs) if not item.refused]
    rows = []
    for count in workers:
        runner = Runner(timeout_s=deadline, deadline_s=deadline, max_workers=count, path=stubs.path)
        started = time.perf_counter()
        runs = runner.run_all([planned.argv for planned in commands])
        wall = time.perf_counter() - started
        bad = [key for key, run in runs.items() if not run.succeeded]
        if bad:
            raise SystemExit(f"runner sweep: commands failed with {count} workers: {bad[:3]}")
        rows.append({"workers": count, "commands": len(runs), "wall_s": wall,
                     "sum_s": sum(run.duration_s for run in runs.values())})  # fmt: skip
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs of each command")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    parser.add_argument("--hcas", type=int, default=8, help="HCAs in the sysfs tree")
    parser.add_argument("--delay", type=float, default=0.3, help="seconds every stub sleeps")
    parser.add_argument(
        "--sweep", default="1,4,8,16,48", metavar="N,N,...",
        help="pool sizes for the in-process Runner sweep ('' to leave it out)",
    )  # fmt: skip
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument(
        "--source", default=REPO,
        help="checkout whose ibdiag/ runs (e.g. a git archive of main; use --sweep '' with it)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    source = os.path.abspath(args.source)
    if args.runs < 1 or args.hcas < 1 or args.delay < 0:
        parser.error("--runs and --hcas must be at least 1, --delay not negative")
    sweep = [int(n) for n in args.sweep.split(",") if n.strip()]

    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="ibdiag-bench-std-") as tmp:
        tree = build_tree(tmp, args.hcas)
        procfs = S.write_procfs(os.path.join(tmp, "proc"), boot_time=time.time() - 3600)
        stubs = write_stubs(tmp, args.delay, args.hcas)
        env = stubs.env(child_env())
        common = ["--sysfs", tree, "--procfs", procfs]
        cases = {
            "standard": [py, "-m", "ibdiag", "check", "--level", "standard", *common],
            "quick": [py, "-m", "ibdiag", "check", "--level", "quick", *common],
        }
        report = report_of(cases["standard"], env, source)
        recorded = report["snapshot"]["commands"]
        # The far end of each cable (roles partner-*) has no stub here: bench_partner.py's.
        far_end = {key for key, run in recorded.items() if str(run["role"]).startswith("partner-")}
        failed = [key for key, run in recorded.items() if run["rc"] != 0 and key not in far_end]
        if failed:
            raise SystemExit(f"stub commands failed: {failed[:5]}")
        calls_before = len(stubs.calls())

        os.chdir(source)  # python -m ibdiag runs the ibdiag/ of the working directory
        names = list(cases)
        samples: Dict[str, List[Dict[str, float]]] = {name: [] for name in names}
        for round_index in range(args.warmup + args.runs):
            shift = round_index % len(names)
            for name in names[shift:] + names[:shift]:
                sample = spawn(cases[name], env)
                if sample["exit"] not in (0, 1, 2):
                    raise SystemExit(f"{name} exited {sample['exit']}: {' '.join(cases[name])}")
                if round_index >= args.warmup:
                    samples[name].append(sample)
        per_run = (len(stubs.calls()) - calls_before) / (args.warmup + args.runs)
        rows = runner_sweep(tree, stubs, sweep, deadline=60.0) if sweep else []

    count = len(recorded)
    slowest = args.delay
    total = count * args.delay
    from ibdiag.runner.command_runner import DEFAULT_MAX_WORKERS

    waves = math.ceil(count / DEFAULT_MAX_WORKERS) * args.delay
    summary = {}
    for name in names:
        walls = [s["wall_s"] for s in samples[name]]
        rss = [s["maxrss_kb"] for s in samples[name]]
        summary[name] = {
            "median_s": statistics.median(walls),
            "p90_s": percentile(walls, 0.9),
            "min_s": min(walls),
            "peak_rss_mb": max(rss) / 1024,
        }
    wall = summary["standard"]["median_s"]
    command_phase = wall - summary["quick"]["median_s"]
    recorded_sum = sum(run["duration_s"] for run in recorded.values())
    recorded_max = max(run["duration_s"] for run in recorded.values())
    ratios = {
        "wall / slowest command": wall / slowest if slowest else float("nan"),
        "wall / sum of commands": wall / total if total else float("nan"),
        "command phase / sum": command_phase / total if total else float("nan"),
        "command phase / pool waves": command_phase / waves if waves else float("nan"),
    }

    print(f"python {platform.python_version()} ({py}), {os.cpu_count()} CPUs, {args.hcas} HCAs")
    print(f"{args.runs} runs each (+{args.warmup} warm-up rounds), round-robin; every stub "
          f"sleeps {args.delay:g} s then prints a real capture")  # fmt: skip
    print()
    print(f"commands per standard run: {count} (stub invocations per round: {per_run:.0f}); "
          f"pool: {DEFAULT_MAX_WORKERS} workers")  # fmt: skip
    print(f"slowest single command: {slowest:.3f} s   sum of all commands: {total:.3f} s")
    print(f"pool waves, ceil({count}/{DEFAULT_MAX_WORKERS}) x {args.delay:g} s: {waves:.3f} s "
          "(the least a pool of that size can take)")  # fmt: skip
    print(f"recorded in the report: sum of durations {recorded_sum:.3f} s, "
          f"longest {recorded_max:.3f} s")  # fmt: skip
    print()
    print(f"{'command':<10} {'median s':>9} {'p90 s':>7} {'min s':>7} {'peak RSS MB':>12}")
    for name in names:
        s = summary[name]
        print(f"{name:<10} {s['median_s']:>9.3f} {s['p90_s']:>7.3f} {s['min_s']:>7.3f} "
              f"{s['peak_rss_mb']:>12.1f}")  # fmt: skip
    print()
    print(f"command phase (standard - quick, medians): {command_phase:.3f} s")
    for label, value in ratios.items():
        print(f"{label:<28} {value:6.3f}")
    if rows:
        print()
        print("Runner alone, in-process, the same commands (one run per pool size):")
        print(f"{'workers':>8} {'wall s':>8} {'sum of durations s':>19} {'wall / sum':>11} "
              f"{'ideal waves s':>14}")  # fmt: skip
        for row in rows:
            ideal = math.ceil(row["commands"] / row["workers"]) * args.delay
            print(f"{row['workers']:>8} {row['wall_s']:>8.3f} {row['sum_s']:>19.3f} "
                  f"{row['wall_s'] / row['sum_s']:>11.3f} {ideal:>14.3f}")  # fmt: skip
    print()
    print(f"verdict of the standard run: {report['verdict']} - {report['verdict_reason']}")

    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        result = {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "python": platform.python_version(),
            "executable": py,
            "cpus": os.cpu_count(),
            "runs": args.runs,
            "warmup": args.warmup,
            "hcas": args.hcas,
            "delay_s": args.delay,
            "commands": count,
            "pool_workers": DEFAULT_MAX_WORKERS,
            "slowest_s": slowest,
            "sum_s": total,
            "pool_waves_s": waves,
            "recorded_sum_s": recorded_sum,
            "summary": summary,
            "ratios": ratios,
            "runner_sweep": rows,
            "samples": samples,
        }
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(result, out, indent=2)
            out.write("\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
