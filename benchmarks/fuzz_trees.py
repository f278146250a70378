#!/usr/bin/env python3
"""The tree fuzzer's long run: thousands of seeded hostile sysfs/procfs trees through ibdiag.

Each case (tests/fuzz_trees.py says how they are made and judged) runs ``check --level quick``,
``check --level standard`` with stub tools on PATH, and ``collect --tarball`` then ``report
BUNDLE`` (every other bundle with ``--redact all``), in worker processes; a case not done in
``--case-timeout`` seconds is a hang: its worker is killed and the run goes on. At the end it
prints the count of cases and the zero counts:

    fuzz_trees: 3000 cases (seed 1, 12000 runs, 2150.3 s): tracebacks 0, hangs 0, exit codes
    outside 0-3 0, invalid JSON 0, files outside the tree in output or bundle 0, processes left 0

and, for any case that counted something, the command line that runs that case alone and what
was done to its tree. Exit status 0 when every count is zero, 1 otherwise.

    python benchmarks/fuzz_trees.py --cases 3000 --seed 1
    python benchmarks/fuzz_trees.py --seed 1 --case 1234        # one case again
    python benchmarks/fuzz_trees.py --cases 500 --workers 4 --json results/fuzz.json

Run it from the venv ibdiag is installed in (the stubs print the real captures in
tests/fixtures).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))

import fuzz_trees as F  # noqa: E402


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1, help="the seed (default 1)")
    parser.add_argument("--cases", type=int, default=1000, help="how many (default 1000)")
    parser.add_argument("--first", type=int, default=0, help="the first case number (default 0)")
    parser.add_argument("--case", type=int, action="append", help="run only this case (again)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--case-timeout", type=float, default=60.0, metavar="SECONDS")
    parser.add_argument(
        "--round-trip-every", type=int, default=1, metavar="N",
        help="collect and report only every N-th case (default 1: all)",
    )  # fmt: skip
    parser.add_argument("--json", metavar="FILE", help="also write the summary as JSON")
    args = parser.parse_args()

    # Stopped (Ctrl-C, kill, a closed terminal, or SIGINT ignored by a background job's shell):
    # unwind, so that run() kills its workers and removes its directory.
    for stop in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(stop, _interrupt)
    cases = args.case or range(args.first, args.first + args.cases)
    last = [time.monotonic()]

    def progress(summary: F.Summary) -> None:
        now = time.monotonic()
        if (now - last[0] >= 30 and sys.stderr.isatty()) or now - last[0] >= 120:
            last[0] = now
            print(f"... {summary.cases}/{len(cases)}: {summary.line()}", file=sys.stderr)

    try:
        summary = F.run(
            args.seed,
            cases,
            workers=args.workers,
            case_timeout=args.case_timeout,
            round_trip_every=args.round_trip_every,
            progress=progress,
        )
    except KeyboardInterrupt:
        print("fuzz_trees: interrupted (workers stopped)", file=sys.stderr)
        return 130
    if summary.failed:
        print(summary.details(limit=50))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(
                {
                    "seed": summary.seed,
                    "cases": summary.cases,
                    "runs": summary.runs,
                    "seconds": round(summary.seconds, 1),
                    "counts": summary.counts,
                    "failed": [dataclasses.asdict(outcome) for outcome in summary.failed],
                },
                handle,
                indent=1,
            )
    print(summary.line())
    return 0 if summary.clean else 1


if __name__ == "__main__":
    sys.exit(main())
