#!/usr/bin/env python3
"""`ibdiag check --level full` on 8 HCAs: are the ib_write_bw loopback tests run all at once?

Each ACTIVE InfiniBand port gets a server and a client (16 processes on 8 HCAs). Run one port
after another, a full check would take 8 x (the test's duration + the server's start-up
allowance); ibdiag starts every port's test together, so the wall time should be close to one
test's, whatever the number of HCAs.

This script writes an 8-HCA sysfs tree (tests/sysfs_builder.py), puts a stub ``ib_write_bw``
on PATH that behaves like perftest's (the server waits for its client; the client "runs" for
--duration seconds and prints a real capture from tests/fixtures/perftest), and times, as
separate processes:

    full      python -m ibdiag check --level full --sysfs <tree> --config <duration>
    standard  python -m ibdiag check --level standard ...     (the same node, no traffic)

It reports the median wall time against one test (duration + ibdiag's SERVER_START_S) and
against running the ports one after another, and the children's peak RSS.

    python benchmarks/bench_full.py                 # 5 timed runs, 8 HCAs, 2 s tests
    python benchmarks/bench_full.py --hcas 16 --duration 3 --runs 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "tests")]

import stubs as S  # noqa: E402
from bench_quick import build_tree, child_env, spawn  # noqa: E402

from ibdiag.families.loopback.traffic import SERVER_START_S  # noqa: E402

HEALTHY = S.fixture(
    "perftest", "superbench-ib_write_bw-loopback-8M-azure-hdr-ib0-server-client-interleaved.txt"
)


def write_stub(root: str, duration: float) -> S.StubBin:
    stubs = S.StubBin(os.path.join(root, "stubs"))
    stubs.add(
        "ib_write_bw",
        'last=""; for arg in "$@"; do last="$arg"; done\n'
        f'if [ "$last" = localhost ]; then sleep {duration:g}; cat {S._q(HEALTHY)}; '
        f"else sleep {duration + 0.5:g}; fi\n",
    )
    return stubs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hcas", type=int, default=8)
    parser.add_argument("--duration", type=float, default=2.0, help="seconds each test runs")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ibdiag-bench-full-") as root:
        tree = build_tree(root, args.hcas)
        stubs = write_stub(root, args.duration)
        config = os.path.join(root, "ibdiag.toml")
        with open(config, "w") as handle:
            handle.write(f"perftest_duration_s = {max(1, int(args.duration))}\n")
        env = child_env()
        env["PATH"] = stubs.path
        python = sys.executable
        commands = {
            level: [
                python,
                "-m",
                "ibdiag",
                "check",
                "--level",
                level,
                "--sysfs",
                tree,
                "--config",
                config,
            ]
            for level in ("standard", "full")
        }
        samples = {level: [] for level in commands}
        rss = {level: 0.0 for level in commands}
        for _ in range(args.runs):
            for level, argv in commands.items():
                result = spawn(argv, env)
                samples[level].append(result["wall_s"])
                rss[level] = max(rss[level], result["maxrss_kb"] / 1024)
        one_test = args.duration + SERVER_START_S
        print(f"{args.hcas} HCAs, each test {args.duration:g} s (+{SERVER_START_S:g} s server "
              f"start), {args.runs} runs, {len(stubs.calls())} stub calls")  # fmt: skip
        for level, values in samples.items():
            median = statistics.median(values)
            print(f"  {level:9} median {median:6.2f} s  min {min(values):6.2f} s  "
                  f"peak RSS {rss[level]:5.1f} MB")  # fmt: skip
        full = statistics.median(samples["full"]) - statistics.median(samples["standard"])
        print(f"  traffic phase {full:.2f} s vs one test {one_test:.2f} s "
              f"and one port after another {args.hcas * one_test:.2f} s "
              f"(ratio to sequential {full / (args.hcas * one_test):.2f})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
