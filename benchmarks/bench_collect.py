#!/usr/bin/env python3
"""`ibdiag collect` on 8 HCAs at level standard: wall time and bundle size.

The same node as bench_standard.py: a generated 8-HCA sysfs tree, a procfs, and stub tools that
each sleep --delay seconds and then print a real capture. Each run writes a bundle (directory
and --tarball alternately into fresh directories); reported: median wall time, peak RSS, and
the size of the tarball and of the directory bundle (files, bytes).

    python benchmarks/bench_collect.py              # 5 runs of each form
    python benchmarks/bench_collect.py --runs 9 --hcas 8 --delay 0.3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "tests")]

import stubs as S  # noqa: E402
from bench_quick import REPO, build_tree, child_env, spawn  # noqa: E402
from bench_standard import write_stubs  # noqa: E402


def directory_size(path: str) -> Tuple[int, int]:
    """(files, bytes) under ``path``."""
    count = total = 0
    for directory, _dirs, files in os.walk(path):
        for name in files:
            count += 1
            total += os.path.getsize(os.path.join(directory, name))
    return count, total


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each form")
    parser.add_argument("--hcas", type=int, default=8, help="HCAs in the sysfs tree")
    parser.add_argument("--delay", type=float, default=0.3, help="seconds every stub sleeps")
    args = parser.parse_args(argv)

    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="ibdiag-bench-collect-") as tmp:
        tree = build_tree(tmp, args.hcas)
        procfs = S.write_procfs(os.path.join(tmp, "proc"), boot_time=time.time() - 3600)
        env = write_stubs(tmp, args.delay, args.hcas).env(child_env())
        os.chdir(REPO)
        walls = {"directory": [], "tarball": []}
        rss: List[int] = []
        sizes = {}
        for run in range(args.runs):
            for form in ("directory", "tarball"):
                out = os.path.join(tmp, f"out-{form}-{run}")
                argv_ = [py, "-m", "ibdiag", "collect", "--sysfs", tree, "--procfs", procfs,
                         "-o", out] + (["--tarball"] if form == "tarball" else [])  # fmt: skip
                sample = spawn(argv_, env)
                if sample["exit"] != 0:
                    raise SystemExit(f"collect exited {sample['exit']}")
                walls[form].append(sample["wall_s"])
                rss.append(sample["maxrss_kb"])
                made = [name for name in os.listdir(out) if name.startswith("ibdiag-")]
                if form == "tarball":
                    archive = next(name for name in made if name.endswith(".tar.gz"))
                    sizes["tarball bytes"] = os.path.getsize(os.path.join(out, archive))
                else:
                    files, total = directory_size(os.path.join(out, made[0]))
                    sizes["directory files"], sizes["directory bytes"] = files, total
    commands = args.hcas * 4 + 3  # perfquery -x/-E/-X and ethtool per port, dmesg, ibstat, ...
    print(f"{args.hcas} HCAs, level standard, ~{commands} stub commands x {args.delay} s, "
          f"{args.runs} runs of each form")  # fmt: skip
    for form, values in walls.items():
        print(f"collect {form:9}  median {statistics.median(values):.3f} s  "
              f"min {min(values):.3f} s")  # fmt: skip
    print(f"peak RSS {max(rss) / 1024:.1f} MB")
    for label, value in sizes.items():
        print(f"{label:16} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
