#!/usr/bin/env python3
"""What the mlx5 hwmon temperatures add to `ibdiag check --level quick` (issue 24).

Builds two healthy 8-HCA mlx5 sysfs trees (tests/sysfs_builder.py): one without hwmon (a
kernel before 6.5, or the builder's default), one where every HCA has the hwmon device the
kernel's hwmon.c registers, an ASIC and a module sensor (tests/phy/hwmon_tree.py). It times,
in-process, ``read_devices`` over each tree (the sysfs reader, hwmon included), and as separate
processes, round-robin, ``python -m ibdiag check --level quick --sysfs <tree>``: median and p90.

    python benchmarks/bench_hwmon.py --runs 20

On a live node each ``tempN_input/highest/crit`` read is a firmware register access (MTMP) in
the driver: tens of microseconds to a millisecond each, which a tree on disk does not show;
the figures here are ibdiag's own cost. Standard library only, plus the repository's tests/.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [REPO, os.path.join(REPO, "tests"), os.path.join(REPO, "tests", "phy")]

from hwmon_tree import ASIC, MODULE0, write_hwmon  # noqa: E402
from sysfs_builder import mlx5_node, write_node  # noqa: E402

from ibdiag.sources.sysfs import SysfsReader, read_devices  # noqa: E402


def _trees(base: str) -> Dict[str, str]:
    plain, hot = os.path.join(base, "plain", "sys"), os.path.join(base, "hwmon", "sys")
    specs = mlx5_node(8)
    write_node(plain, specs)
    write_node(hot, specs)
    for spec in specs:
        write_hwmon(hot, spec.pci_address, ASIC, MODULE0)
    return {"no-hwmon-8": plain, "hwmon-8": hot}


def _quantiles(samples: List[float]) -> str:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return f"median {statistics.median(ordered) * 1000:7.2f} ms   p90 {p90 * 1000:7.2f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as base:
        trees = _trees(base)
        print("in-process read_devices (8 HCAs):")
        for name, root in trees.items():
            samples = []
            for _ in range(max(args.runs, 1) * 5):
                start = time.perf_counter()
                read_devices(SysfsReader(root))
                samples.append(time.perf_counter() - start)
            print(f"  {name:12s} {_quantiles(samples)}")
        print("python -m ibdiag check --level quick --sysfs TREE (processes, round-robin):")
        timed: Dict[str, List[float]] = {name: [] for name in trees}
        env = dict(os.environ, NO_COLOR="1")
        for index in range(max(args.runs, 1) + 1):
            for name, root in trees.items():
                argv = [sys.executable, "-m", "ibdiag", "check", "--level", "quick"]
                start = time.perf_counter()
                subprocess.run(
                    [*argv, "--sysfs", root],
                    cwd=REPO,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    check=False,
                )
                if index:  # the first round warms the file cache
                    timed[name].append(time.perf_counter() - start)
        for name, samples in timed.items():
            print(f"  {name:12s} {_quantiles(samples)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
