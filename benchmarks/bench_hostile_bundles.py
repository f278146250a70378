#!/usr/bin/env python3
"""What a small hostile bundle can make `ibdiag report` do: peak RSS, temp disk, time, outcome.

Makes a good 2-HCA bundle with `ibdiag collect --level quick --tarball` (a tests/sysfs_builder
tree), then the hostile bundles of issue 12 item 7 from it (tests/hostile_bundles.py), and runs
`python -m ibdiag report BUNDLE` on each as a separate process:

    good             the bundle as collected
    sparse-2GiB      one member stored sparse: a few hundred bytes, 2 GiB when extracted
    members-100k     100,000 empty members the manifest does not list
    devices-100k     a manifest listing 100,000 HCA names
    manifest-500MB   manifest.json of 500 MB: one list nested 250 million deep
    deep-manifest    a 4 KB-ish manifest whose thresholds nest a list 100,000 deep
    outputs-120MiB   15 command outputs of 8 MiB, each ending in a 4-byte character
    outputs-30MiB    the same at 2 MiB each: within the limits (graded), the most they allow
    listings-limits  1,024 HCAs x 8 ports and 100,000 listed names: the most the limits allow
    no-trailer       the good tarball without gzip's CRC/length trailer
    altered          summary.txt changed after the manifest was written
    bad-level        manifest level "bogus"

For each: the tarball's size, exit code, stderr lines (and the first), the child's peak RSS
(ru_maxrss from wait4), the peak bytes under its TMPDIR (a fresh directory, sampled every 20 ms
by walking it: st_blocks, so what was really allocated), and wall time.

    python benchmarks/bench_hostile_bundles.py                       # this checkout's code
    git archive main | tar -x -C /tmp/ibdiag-main                    # another version's code
    python benchmarks/bench_hostile_bundles.py --code /tmp/ibdiag-main

``--code DIR`` runs ``python -m ibdiag`` with DIR first on PYTHONPATH (DIR holds ``ibdiag/``,
``checks/`` and ``reports/``); the bundles are always made by this checkout's code and builders.
``--only a,b`` runs some cases; ``--json FILE`` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [os.path.join(REPO, "tests")]

import hostile_bundles as H  # noqa: E402
from sysfs_builder import mlx5_node, write_node  # noqa: E402

CASES: Dict[str, Callable[[str, str], str]] = {
    "good": lambda good, dest: shutil.copyfile(good, dest) and dest,
    "sparse-2GiB": lambda good, dest: H.sparse_member(good, dest, 2 << 30),
    "members-100k": lambda good, dest: H.many_members(good, dest, 100_000),
    "devices-100k": lambda good, dest: H.many_devices(good, dest, 100_000),
    "manifest-500MB": lambda good, dest: H.huge_manifest(good, dest, 500 * 10**6),
    "deep-manifest": lambda good, dest: H.deep_manifest(good, dest, 100_000),
    "outputs-120MiB": lambda good, dest: H.big_outputs(good, dest, 15, 8 << 20),
    "outputs-30MiB": lambda good, dest: H.big_outputs(good, dest, 15, 2 << 20),
    "listings-limits": H.listings_at_limits,
    "no-trailer": H.cut_trailer,
    "altered": H.altered_member,
    "bad-level": lambda good, dest: H.with_manifest(
        good, dest, lambda manifest: dict(manifest, level="bogus")
    ),
}


def make_good(tmp: str) -> str:
    sys_root = os.path.join(tmp, "node", "sys")
    write_node(sys_root, mlx5_node(2))
    proc = os.path.join(tmp, "node", "proc")
    os.makedirs(os.path.join(proc, "sys", "kernel", "random"))
    for rel, text in (("sys/kernel/hostname", "node-1\n"), ("sys/kernel/random/boot_id", "b\n")):
        with open(os.path.join(proc, rel), "w") as handle:
            handle.write(text)
    out = os.path.join(tmp, "good")
    done = subprocess.run(
        [sys.executable, "-m", "ibdiag", "collect", "--level", "quick", "--tarball",
         "--sysfs", sys_root, "--procfs", proc, "-o", out],
        cwd=REPO, capture_output=True, text=True, check=True,
    )  # fmt: skip
    line = next(x for x in done.stdout.splitlines() if x.startswith("bundle: "))
    return line[len("bundle: ") :]


def disk_used(top: str) -> int:
    """Bytes allocated under ``top`` (files and directories: st_blocks). scandir, not os.walk:
    no list of 100,000 names grows this process (a child starts with its parent's RSS)."""
    total, pending = 0, [top]
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    try:
                        total += entry.stat(follow_symlinks=False).st_blocks * 512
                        if entry.is_dir(follow_symlinks=False):
                            pending.append(entry.path)
                    except OSError:
                        pass  # removed while we looked
        except OSError:
            pass
    return total


def run_case(bundle: str, code: Optional[str], scratch: str) -> Dict[str, object]:
    tmpdir = tempfile.mkdtemp(prefix="tmpdir-", dir=scratch)
    env = dict(os.environ, TMPDIR=tmpdir)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if code:
        env["PYTHONPATH"] = code + os.pathsep + env.get("PYTHONPATH", "")
    err_path = os.path.join(scratch, "stderr")
    peak = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], disk_used(tmpdir))
            stop.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    with open(os.devnull, "wb") as devnull, open(err_path, "wb") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "ibdiag", "report", bundle],
            cwd=code or REPO, env=env, stdin=subprocess.DEVNULL, stdout=devnull, stderr=err,
        )  # fmt: skip
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
    stop.set()
    sampler.join()
    left = disk_used(tmpdir)
    shutil.rmtree(tmpdir, ignore_errors=True)
    with open(err_path, encoding="utf-8", errors="replace") as handle:
        lines = handle.read().splitlines()
    return {
        "exit": proc.returncode,
        "stderr_lines": len(lines),
        "first_stderr": lines[0] if lines else "",
        "peak_rss_mb": usage.ru_maxrss / 1024,
        "peak_temp_mb": peak[0] / 1e6,
        "temp_left_mb": left / 1e6,
        "wall_s": wall,
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", help="a checkout whose ibdiag to run (default: this one)")
    parser.add_argument("--only", help="comma-separated case names")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument(
        "--build", nargs=3, metavar=("CASE", "GOOD", "DEST"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.build:
        name, good, dest = args.build
        CASES[name](good, dest)
        return 0
    names = args.only.split(",") if args.only else list(CASES)
    unknown = sorted(set(names) - set(CASES))
    if unknown:
        parser.error(f"unknown cases {unknown}; known: {', '.join(CASES)}")
    code = os.path.abspath(args.code) if args.code else None
    figures: List[Dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="ibdiag-bench-hostile-") as tmp:
        good = make_good(tmp)
        print(f"code: {code or REPO}")
        print(f"{'case':15} {'tar KB':>8} {'exit':>4} {'RSS MB':>8} {'temp MB':>9} "
              f"{'time s':>7} {'err lines':>9}  first stderr line")  # fmt: skip
        for name in names:
            bundle = os.path.join(tmp, f"{name}.tar.gz")
            # built by a child, so this process stays small: a child forked from a big parent
            # starts with the parent's peak RSS in its ru_maxrss
            subprocess.run([sys.executable, __file__, "--build", name, good, bundle], check=True)
            row = {"case": name, "tarball_kb": os.path.getsize(bundle) / 1024}
            row.update(run_case(bundle, code, tmp))
            os.unlink(bundle)
            figures.append(row)
            first = str(row["first_stderr"])
            print(f"{name:15} {row['tarball_kb']:8.0f} {row['exit']:4} {row['peak_rss_mb']:8.0f} "
                  f"{row['peak_temp_mb']:9.1f} {row['wall_s']:7.2f} {row['stderr_lines']:9}  "
                  f"{first[:150]}")  # fmt: skip
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"code": code or REPO, "cases": figures}, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
