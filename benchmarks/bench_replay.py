#!/usr/bin/env python3
"""Replaying a 64-HCA support bundle: how long `open_bundle` + `replay` take, in process.

`ibdiag report BUNDLE` and `ibdiag check --from BUNDLE` re-grade a node offline; replay rebuilds
the Snapshot from the bundle's raw files and command outputs (and validates what it read from
outside, `model_validate`). This script collects one level-standard bundle of a generated
--hcas node (tests/sysfs_builder.py; stub tools that print real captures at once, as in
bench_standard.py) with `ibdiag collect` in a child, then times in this process, --runs times
each: opening the bundle (tarball and directory forms) and replaying it, and reports the median
and min of each, with the number of command runs the bundle holds.

    python benchmarks/bench_replay.py                 # 64 HCAs, 15 runs
    python benchmarks/bench_replay.py --hcas 8 --runs 30
"""

from __future__ import annotations

import argparse
import os
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
from bench_standard import write_stubs  # noqa: E402


def collect(tmp: str, hcas: int, tarball: bool) -> str:
    tree = build_tree(os.path.join(tmp, "tarball" if tarball else "dir"), hcas)
    procfs = S.write_procfs(os.path.join(tmp, "proc"), boot_time=time.time() - 3600)
    env = write_stubs(tmp, 0.0, hcas).env(child_env())
    out = os.path.join(tmp, "out-tarball" if tarball else "out-dir")
    argv = [sys.executable, "-m", "ibdiag", "collect", "--sysfs", tree, "--procfs", procfs,
            "--level", "standard", "-o", out] + (["--tarball"] if tarball else [])  # fmt: skip
    subprocess.run(argv, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)
    made = sorted(name for name in os.listdir(out) if name.startswith("ibdiag-"))
    return os.path.join(out, made[0])


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="timed runs of each form")
    parser.add_argument("--hcas", type=int, default=64, help="HCAs in the sysfs tree")
    args = parser.parse_args(argv)

    from ibdiag.bundle.opener import open_bundle
    from ibdiag.bundle.replay import replay

    with tempfile.TemporaryDirectory(prefix="ibdiag-bench-replay-") as tmp:
        bundles = {
            "tarball": collect(tmp, args.hcas, True),
            "directory": collect(tmp, args.hcas, False),
        }
        timings: Dict[str, Dict[str, List[float]]] = {}
        runs = 0
        for form, path in bundles.items():
            opened_s: List[float] = []
            replayed_s: List[float] = []
            for _ in range(args.runs + 1):  # the first round warms caches and is not counted
                start = time.perf_counter()
                with open_bundle(path) as opened:
                    middle = time.perf_counter()
                    snapshot = replay(opened)
                    end = time.perf_counter()
                opened_s.append(middle - start)
                replayed_s.append(end - middle)
            runs = len(snapshot.commands)
            timings[form] = {"open": opened_s[1:], "replay": replayed_s[1:]}
    print(f"{args.hcas} HCAs, level standard, {runs} command runs, {args.runs} runs of each")
    for form, parts in timings.items():
        for part, values in parts.items():
            print(f"{form:9} {part:6}  median {statistics.median(values) * 1000:7.1f} ms  "
                  f"min {min(values) * 1000:7.1f} ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
