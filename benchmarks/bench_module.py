#!/usr/bin/env python3
"""`ibdiag check --level standard` on 8 ports when mlxlink takes 0.8 s a device: inside the
default deadline?

Level standard runs ``mlxlink -d DEV -p PORT -m -c --json`` for every port (the module family:
phy.ber, phy.optics; mstlink is its fallback), concurrently with every other read-only command.
mlxlink reads the module through the firmware's PDDR/PPCNT registers and is slow: about 0.8 s
a device (issue 24's figure, "a public exporter's measurement"; the exporter's page was not
found in this project's search index - the lead has its source). This script writes an 8-HCA
mlx5 sysfs tree (one IB port each: 8 ports), the stub tools of bench_standard (each sleeps
--other-delay s and prints a real capture) and a stub ``mlxlink`` that sleeps --delay s and
prints tests/captures/mlxlink/mlxlink-ndr-osfp-healthy.json, then times, as separate
processes, alternating:

    standard  python -m ibdiag check --level standard --sysfs <tree> --procfs <proc> --json
    quick     python -m ibdiag check --level quick ...   (the same start-up, no command)

and reports the median and worst wall time against the slowest command, the sum of the
mlxlink runs (8 x --delay) and the runner's default deadline
(``ibdiag.runner.command_runner.DEFAULT_DEADLINE_S``, 25 s). One untimed run checks that all
8 ports were read (phy.ber passes on each).

    python benchmarks/bench_module.py                   # 5 timed runs of each
    python benchmarks/bench_module.py --runs 9 --delay 0.8 --other-delay 0.3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE), os.path.join(os.path.dirname(HERE), "tests")]

import stubs as S  # noqa: E402
from bench_quick import REPO, build_tree, child_env, spawn  # noqa: E402
from bench_standard import report_of, write_stubs  # noqa: E402
from stubs import write_procfs  # noqa: E402

from ibdiag.runner.command_runner import DEFAULT_DEADLINE_S, DEFAULT_TIMEOUT_S  # noqa: E402

HEALTHY = os.path.join(REPO, "tests", "captures", "mlxlink", "mlxlink-ndr-osfp-healthy.json")
HCAS = 8


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--delay", type=float, default=0.8, help="mlxlink's seconds a device")
    parser.add_argument("--other-delay", type=float, default=0.3, help="every other tool's")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        tree = build_tree(root, HCAS)
        proc = str(write_procfs(os.path.join(root, "proc")))
        stubs = write_stubs(root, args.other_delay, HCAS)
        stubs.add("mlxlink", S.prints(HEALTHY, delay=args.delay))
        env = stubs.env(child_env())
        base = [sys.executable, "-m", "ibdiag", "check", "--sysfs", tree, "--procfs", proc]
        standard = [*base, "--level", "standard"]
        quick = [*base, "--level", "quick"]
        report = report_of(standard, env)
        ber = {r["target"]: r["status"] for r in report["results"] if r["check_id"] == "phy.ber"}
        commands = report["snapshot"]["commands"].values()
        mlxlink_runs = [c for c in commands if c["argv"][0] == "mlxlink"]
        if len(ber) != HCAS or set(ber.values()) != {"pass"} or len(mlxlink_runs) != HCAS:
            raise SystemExit(f"not every port was read: phy.ber {ber}, {len(mlxlink_runs)} runs")
        walls = {"standard": [], "quick": []}
        for _ in range(args.runs):
            for name, argv in (("standard", standard), ("quick", quick)):
                walls[name].append(spawn([*argv, "--quiet"], env)["wall_s"])
    median = {name: statistics.median(values) for name, values in walls.items()}
    worst = max(walls["standard"])
    python = sys.version.split()[0]
    print(f"8 ports (8 HCAs x 1 IB port); mlxlink {args.delay:g} s a device, other tools "
          f"{args.other_delay:g} s; {args.runs} runs each; python {python}")  # fmt: skip
    print(f"  standard: median {median['standard']:.2f} s, worst {worst:.2f} s")
    print(f"  quick:    median {median['quick']:.2f} s (start-up and files only)")
    print(f"  mlxlink one after another would take {HCAS * args.delay:.1f} s; the slowest "
          f"command {max(args.delay, args.other_delay):.1f} s")  # fmt: skip
    print(f"  default deadline {DEFAULT_DEADLINE_S:g} s (per command {DEFAULT_TIMEOUT_S:g} s): "
          f"worst run uses {100 * worst / DEFAULT_DEADLINE_S:.0f}% of it")  # fmt: skip
    return 0 if worst < DEFAULT_DEADLINE_S else 1


if __name__ == "__main__":
    sys.exit(main())
