#!/usr/bin/env python3
"""The long run of the hostile-config and drop-in fuzzer (tests/fuzz_inputs.py).

    python benchmarks/fuzz_inputs.py --cases 2000 --seed 1

Prints progress every 50 cases, then the count of cases, the exit codes seen and the zero
counts (tracebacks, hangs, exit codes outside 0-3, invalid JSON, refusals not one line), and
the first few offending seeds of each kind (re-run one with --seed N --cases 1).
Exits 1 when any zero count is not zero.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
)

import fuzz_inputs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ibdiag-fuzz-inputs-") as root:
        tally = fuzz_inputs.run(Path(root), args.seed, args.cases, progress=print)
    print(f"{tally.summary()} in {time.monotonic() - started:.0f} s")
    for kind, found in tally.bad.items():
        for seed, detail in found[:3]:
            print(f"  {kind}: seed {seed}: {detail!r}")
    return 1 if any(tally.zero_counts().values()) else 0


if __name__ == "__main__":
    sys.exit(main())
