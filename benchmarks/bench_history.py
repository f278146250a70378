#!/usr/bin/env python3
"""The history store at its worst: a million outages, read, graded and pruned.

A port that flaps all week on every HCA of a 64-HCA node is the most the store ever holds. This
script fills a store with --outages outages (default 1,000,000) and two samples for each (the
one that saw the port leave ACTIVE, the one that saw it come back), spread evenly over --days
(default 10, so that the 7-day retention has some to drop) across --hcas node GUIDs, then times:

- ``outages(guids, since=now-12h)``: the read a run does for its window, all GUIDs and one;
  the same read without the version-2 index ``outages_guid_end``, for comparison;
- building ``LinkHistory`` from it and ``by_port()`` (``merged`` per port): the grading cost;
- ``sample_count(guids, since=now-12h)``;
- ``prune(now)`` with the 7-day retention and no size cap, then again with the default 64 MiB
  cap, with the file's size (after a checkpoint) before and after each.

The store is made by ``HistoryStore`` (so its schema is the real one, migrations and all) and
filled with ``executemany`` straight into its tables in big transactions: ``record()`` reads and
writes several rows per sample and would take an hour for two million samples; what is timed
goes through the public API.

    python benchmarks/bench_history.py                   # 1,000,000 outages, 64 HCAs
    python benchmarks/bench_history.py --outages 100000 --runs 10
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from typing import Callable, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE)]

from ibdiag.facts.history import LinkHistory  # noqa: E402
from ibdiag.history.store import MAX_BYTES, RETENTION_S, HistoryStore  # noqa: E402

WINDOW_S = 12 * 3600.0
BATCH = 100_000


def guid(n: int) -> str:
    return f"0x0002c90300{n:06x}"


def fill(path: str, outages: int, hcas: int, days: float, now: float) -> None:
    HistoryStore(path).close()  # the schema, as a run makes it
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous=OFF")
    span = days * 86400.0
    every = span / outages  # the whole node's outages, evenly apart
    outage_rows: List[tuple] = []
    sample_rows: List[tuple] = []

    def flush() -> None:
        db.execute("BEGIN")
        db.executemany(
            "INSERT INTO outages (node_guid, port, device, start, end, bounded, downs, source, "
            "boot_id) VALUES (?, 1, ?, ?, ?, 0, 1, 'sample', 'boot')",
            outage_rows,
        )
        db.executemany(
            "INSERT INTO samples VALUES (?, 1, ?, ?, 'boot', ?, 5, 200.0, '4X', ?, 0, 0, 'check', "
            "NULL, NULL, NULL, NULL)",
            sample_rows,
        )
        db.execute("COMMIT")
        outage_rows.clear()
        sample_rows.clear()

    for n in range(outages):
        hca = n % hcas
        start = now - span + n * every
        end = start + min(30.0, every * hcas / 2)
        downed = n // hcas
        device = f"mlx5_{hca}"
        outage_rows.append((guid(hca), device, start, end))
        sample_rows.append((guid(hca), device, start, 1, downed + 1))
        sample_rows.append((guid(hca), device, end, 4, downed + 1))
        if len(outage_rows) >= BATCH:
            flush()
    if outage_rows:
        flush()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def timed(runs: int, work: Callable[[], object]) -> List[float]:
    spent = []
    for _ in range(runs + 1):  # the first round warms the page cache and is not counted
        start = time.perf_counter()
        work()
        spent.append(time.perf_counter() - start)
    return spent[1:] or spent


def show(name: str, spent: List[float], extra: str = "") -> None:
    print(f"{name:44} median {statistics.median(spent) * 1000:9.1f} ms  "
          f"min {min(spent) * 1000:9.1f} ms  {extra}")  # fmt: skip


def size(store: HistoryStore) -> str:
    store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return f"{os.path.getsize(store.path) / 1e6:.1f} MB"


def transactions(store: HistoryStore) -> List[float]:
    """How long each of the store's transactions from now on holds the write lock."""
    held: List[float] = []
    original = store._transaction

    def timing(work: Callable[[sqlite3.Connection], object]) -> object:
        start = time.perf_counter()
        try:
            return original(work)
        finally:
            held.append(time.perf_counter() - start)

    store._transaction = timing  # type: ignore[method-assign]
    return held


def left(store: HistoryStore, guids: List[str], moment: datetime) -> str:
    ever = moment - timedelta(days=3650)
    outages = len(store.outages(guids, since=ever))
    return f"outages left {outages:,}, samples left {store.sample_count(guids, since=ever):,}"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--outages", type=int, default=1_000_000)
    parser.add_argument("--hcas", type=int, default=64)
    parser.add_argument("--days", type=float, default=10.0, help="spread over this many days")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each read")
    args = parser.parse_args(argv)

    now = time.time()
    moment = datetime.fromtimestamp(now, timezone.utc)
    since = moment - timedelta(seconds=WINDOW_S)
    guids = [guid(n) for n in range(args.hcas)]
    with tempfile.TemporaryDirectory(prefix="ibdiag-bench-history-") as tmp:
        path = os.path.join(tmp, "history.db")
        began = time.perf_counter()
        fill(path, args.outages, args.hcas, args.days, now)
        print(f"filled {args.outages:,} outages, {2 * args.outages:,} samples, {args.hcas} HCAs, "
              f"{args.days:g} days in {time.perf_counter() - began:.1f} s "
              f"(direct executemany into HistoryStore's schema)")  # fmt: skip
        with HistoryStore(path) as store:
            print(f"size {size(store)}")
            found = store.outages(guids, since=since)
            plan = store._db.execute(
                "EXPLAIN QUERY PLAN SELECT * FROM outages WHERE node_guid IN (?, ?) "
                "AND end >= ? AND start <= ? UNION ALL SELECT * FROM outages WHERE "
                "node_guid IN (?, ?) AND end IS NULL AND start <= ? ORDER BY start",
                (guids[0], guids[1], 0.0, 1.0, guids[0], guids[1], 1.0),
            ).fetchall()
            print("plan: " + "; ".join(row[-1] for row in plan))
            show(f"outages(64 guids, 12 h) -> {len(found):,}",
                 timed(args.runs, lambda: store.outages(guids, since=since)))  # fmt: skip
            one = store.outages(guids[:1], since=since)
            show(f"outages(1 guid, 12 h) -> {len(one):,}",
                 timed(args.runs, lambda: store.outages(guids[:1], since=since)))  # fmt: skip

            def grade() -> int:
                history = LinkHistory(store=path, since=since, outages=found)
                return sum(len(v) for v in history.by_port().values())

            show(f"LinkHistory + by_port over {len(found):,}", timed(args.runs, grade),
                 f"-> {grade():,} after merging")  # fmt: skip
            show("sample_count(64 guids, 12 h)",
                 timed(args.runs, lambda: store.sample_count(guids, since=since)))  # fmt: skip

            store._db.execute("DROP INDEX outages_guid_end")
            show("outages(64 guids, 12 h) WITHOUT outages_guid_end",
                 timed(args.runs, lambda: store.outages(guids, since=since)))  # fmt: skip
            show("outages(1 guid, 12 h) WITHOUT outages_guid_end",
                 timed(args.runs, lambda: store.outages(guids[:1], since=since)))  # fmt: skip
            store._db.execute("CREATE INDEX outages_guid_end ON outages (node_guid, end)")

            for name, cap in (("no size cap", 1 << 62), (f"{MAX_BYTES >> 20} MiB cap", MAX_BYTES)):
                before = size(store)
                held = transactions(store)
                spent = timed(0, lambda cap=cap: store.prune(moment, RETENTION_S, cap))
                show(f"prune(7 days, {name})", spent, f"{before} -> {size(store)}")
                print(f"  {len(held)} transactions, the longest held the write lock "
                      f"{max(held) * 1000:.1f} ms; {left(store, guids, moment)}")  # fmt: skip
            show("outages(64 guids, 12 h) after prune",
                 timed(args.runs, lambda: store.outages(guids, since=since)))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
