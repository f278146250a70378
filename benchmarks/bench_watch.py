#!/usr/bin/env python3
"""The CPU ``ibdiag watch`` costs: CPU seconds per pass, and what that is at a 1 s interval.

The monitor runs every second on every node, so its steady-state cost is paid all the time.
Target (issue 23): at most 0.5% of one core at a 1 s interval on 8 HCAs. For each HCA count
(``--hcas``, default 8 and 64; ``--ports`` per HCA, 1 or 2) this writes a healthy ConnectX-6
sysfs tree (``tests/sysfs_builder.py``, unique node GUIDs) and measures with
``time.process_time`` (user + system CPU of this process, the sampler's syscalls included):

    steady     ``Watcher.one_pass`` - read every port, compare with the previous sample - with
               nothing changed, so no store write: what the monitor does 86,400 times a day
    sampler    ``read_ports`` alone (the sysfs reads and parsing)
    write-all  a pass, then every port's sample written to a real store as changed (one
               transaction, a samples row a port): the worst tick, every link moving at once
    process    the real command, ``python -m ibdiag watch --interval 0.05 --count N`` minus
               the same with ``--count 1`` (start-up and the first write), from the children's
               rusage: the loop as shipped, its sleeps and signal handling included

and prints, per variant, CPU ms per pass and the % of one core at a 1 s interval
(= CPU s per pass / 1 s x 100).

    python benchmarks/bench_watch.py                        # 8 and 64 HCAs, 1 port each
    python benchmarks/bench_watch.py --hcas 8 --ports 2 --passes 5000 --json out.json

Run it from the venv ibdiag is installed in. Nothing here passes or fails: the figures depend on
the machine (and on sysfs: a real kernel's attributes cost more to read than tmpfs files).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from typing import Callable, Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [REPO, os.path.join(REPO, "tests")]

from sysfs_builder import PortSpec, mlx5_node, write_node  # noqa: E402

from ibdiag.cli.watch import Watcher  # noqa: E402
from ibdiag.history.sampler import read_ports  # noqa: E402
from ibdiag.history.store import HistoryStore  # noqa: E402

TARGET_PERCENT_8 = 0.5
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def build(root: str, hcas: int, ports: int) -> Dict[str, str]:
    specs = mlx5_node(hcas)
    for index, hca in enumerate(specs):
        hca.node_guid = f"b859:9f03:00d7:{index:04x}"
        hca.ports = [PortSpec(netdev=f"ib{index}")] + [PortSpec() for _ in range(ports - 1)]
    sys_root = os.path.join(root, "sys")
    write_node(sys_root, specs)
    proc = os.path.join(root, "proc", "sys", "kernel", "random")
    os.makedirs(proc)
    with open(os.path.join(proc, "boot_id"), "w") as handle:
        handle.write("9a1c3f2e-0d4b-4e55-8f6a-2b7c1d0e9f31\n")
    return {"sys": sys_root, "proc": os.path.join(root, "proc"), "db": os.path.join(root, "h.db")}


def cpu_per_pass(passes: int, one: Callable[[], None]) -> float:
    for _ in range(min(50, passes)):  # warm: caches, the page cache, the bytecode
        one()
    began = time.process_time()
    for _ in range(passes):
        one()
    return (time.process_time() - began) / passes


def bench_steady(paths: Dict[str, str], passes: int) -> float:
    watcher = Watcher(paths["db"], 1.0, paths["sys"], paths["proc"], quiet=True)
    watcher.one_pass(time.monotonic())  # the first pass writes every port once
    written = _files(paths["db"])
    cost = cpu_per_pass(passes, lambda: watcher.one_pass(time.monotonic()))
    guids = {sample.node_guid for sample in read_ports(paths["sys"], paths["proc"])}
    if watcher.pending or watcher.store is None:
        raise RuntimeError("the store could not be written")
    if watcher.store.sample_count(guids, _EPOCH) != len(watcher.seen) or written != _files(
        paths["db"]
    ):
        raise RuntimeError("the steady state wrote to the store: not what was to be measured")
    watcher.close()
    return cost


def _files(db: str) -> List[tuple]:
    """Size and mtime of the store and its WAL: what any write would change."""
    found = []
    for path in (db, db + "-wal"):
        there = os.stat(path) if os.path.exists(path) else None
        found.append((there.st_size, there.st_mtime_ns) if there else None)
    return found


def bench_sampler(paths: Dict[str, str], passes: int) -> float:
    return cpu_per_pass(passes, lambda: read_ports(paths["sys"], paths["proc"]))


def bench_write_all(paths: Dict[str, str], passes: int) -> float:
    db = paths["db"] + ".all"
    store = HistoryStore(db, busy_s=1.0)
    flip = [0]

    def one() -> None:
        flip[0] += 1
        samples = read_ports(paths["sys"], paths["proc"])
        store.record([s._replace(symbol_error=flip[0]) for s in samples])

    cost = cpu_per_pass(passes, one)
    store.close()
    return cost


def bench_process(paths: Dict[str, str], passes: int) -> float:
    def run(count: int) -> float:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(
            [sys.executable, "-m", "ibdiag", "watch", "--interval", "0.05", "--count",
             str(count), "--quiet", "--history", paths["db"] + ".proc", "--sysfs",
             paths["sys"], "--procfs", paths["proc"]],
            check=True, cwd=REPO,
        )  # fmt: skip
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    run(1)  # bytecode cache, store created
    base = min(run(1) for _ in range(3))
    return max(0.0, run(passes + 1) - base) / passes


VARIANTS = (
    ("steady", bench_steady),
    ("sampler", bench_sampler),
    ("write-all", bench_write_all),
    ("process", bench_process),
)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hcas", type=int, action="append", help="HCA count (repeatable)")
    parser.add_argument("--ports", type=int, default=1, choices=(1, 2), help="ports per HCA")
    parser.add_argument("--passes", type=int, default=2000, help="timed passes per variant")
    parser.add_argument("--write-passes", type=int, default=200, help="passes of write-all")
    parser.add_argument("--process-passes", type=int, default=500, help="passes of process")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    counts: List[int] = args.hcas or [8, 64]
    results: Dict = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "ports_per_hca": args.ports,
        "runs": {},
    }
    print(f"{'hcas':>5} {'ports':>5} {'variant':<10} {'ms/pass':>8} {'% core @1s':>10}")
    for hcas in counts:
        with tempfile.TemporaryDirectory(prefix="ibdiag-bench-watch-") as tmp:
            paths = build(tmp, hcas, args.ports)
            for name, bench in VARIANTS:
                passes = {"write-all": args.write_passes, "process": args.process_passes}.get(
                    name, args.passes
                )
                cost = bench(paths, passes)
                percent = cost / 1.0 * 100
                results["runs"][f"{hcas}/{name}"] = {
                    "hcas": hcas,
                    "ports": hcas * args.ports,
                    "variant": name,
                    "passes": passes,
                    "cpu_s_per_pass": cost,
                    "percent_core_at_1s": percent,
                }
                print(
                    f"{hcas:>5} {hcas * args.ports:>5} {name:<10} {cost * 1000:>8.3f} "
                    f"{percent:>9.3f}%",
                    flush=True,
                )
    steady8 = results["runs"].get("8/steady")
    if steady8 is not None and args.ports == 1:
        verdict = "met" if steady8["percent_core_at_1s"] <= TARGET_PERCENT_8 else "MISSED"
        print(f"target: steady on 8 HCAs <= {TARGET_PERCENT_8}% of one core at 1 s: {verdict}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
