"""Four writer processes and a reader on one store for a minute (ibdiag/history/store.py).

On a node, NHC, the Slurm prolog and epilog and the monitor all write the same store at once.
Healthy: every transition each writer made is in the store afterwards (no lost event), no writer
ever waited past the default ``busy_s`` ("database is locked"), the reader never failed, and
every process ended by its deadline (nothing hung). A minute of work: listed in SLOW_MODULES.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from datetime import datetime, timezone

from ibdiag.history.store import HistoryError, HistoryStore
from ibdiag.history.timeline import ACTIVE, PortSample

DURATION_S = float(os.environ.get("IBDIAG_TEST_HISTORY_S", "60"))
WRITERS = 4
FLIP_EVERY = 12  # a port changes state every this many of its writer's samples
REOPEN_EVERY = 40  # a writer opens the store afresh as often (each run of ibdiag does)
DOWN = 1


def guid(writer: int) -> str:
    return f"0x0002c90300{writer:06x}"


def now() -> datetime:
    return datetime.now(timezone.utc)


def writer(number: int, path: str, until: float, report: str) -> None:
    """Port 1 goes down and comes back every FLIP_EVERY samples; port 2 stays ACTIVE but its
    link_downed rises by one every FLIP_EVERY samples (an outage between two samples)."""
    sample_outages, counter_outages, errors, records = [], [], [], 0
    store = None
    k = 0
    previous_at = None
    while time.time() < until:
        try:
            if store is None or k % REOPEN_EVERY == 0:
                if store is not None:
                    store.close()
                store = HistoryStore(path)
            at = now()
            down = (k // FLIP_EVERY) % 2 == 1
            rise = k > 0 and k % FLIP_EVERY == 0
            downed = k // FLIP_EVERY
            store.record(
                [
                    PortSample(guid(number), 1, "mlx5_0", at, "boot", DOWN if down else ACTIVE),
                    PortSample(guid(number), 2, "mlx5_1", at, "boot", ACTIVE, link_downed=downed),
                ]
            )
            records += 1
            if down and k % FLIP_EVERY == 0:
                sample_outages.append([at.timestamp(), None])
            if not down and k > 0 and k % FLIP_EVERY == 0:
                sample_outages[-1][1] = at.timestamp()
            if rise:
                counter_outages.append([previous_at, at.timestamp()])
            previous_at = at.timestamp()
            k += 1
        except HistoryError as exc:
            errors.append(str(exc))
            store = None
            break  # a lost sample would shift every expected transition after it
        time.sleep(0.002)  # pacing, not synchronisation: leave the others room
    if store is not None:
        store.close()
    with open(report, "w") as f:
        json.dump({"sample": sample_outages, "counter": counter_outages, "errors": errors,
                   "records": records}, f)  # fmt: skip


def reader(path: str, until: float, report: str) -> None:
    errors, reads, backwards = [], 0, 0
    guids = [guid(n) for n in range(WRITERS)]
    since = datetime.fromtimestamp(time.time() - 3600, timezone.utc)
    while time.time() < until:
        try:
            with HistoryStore(path) as store:
                for _ in range(20):
                    found = store.outages(guids, since=since)
                    backwards += sum(1 for o in found if o.end is not None and o.end < o.start)
                    store.last_samples()
                    reads += 1
        except HistoryError as exc:
            errors.append(str(exc))
        time.sleep(0.01)
    with open(report, "w") as f:
        json.dump({"errors": errors, "reads": reads, "backwards": backwards}, f)


def test_four_writers_and_a_reader_for_a_minute_lose_nothing(tmp_path):
    path = str(tmp_path / "lib" / "history.db")
    HistoryStore(path).close()  # made once, as the first run on a node would
    until = time.time() + DURATION_S
    context = multiprocessing.get_context("fork")
    reports = [str(tmp_path / f"writer-{n}.json") for n in range(WRITERS)]
    processes = [
        context.Process(target=writer, args=(n, path, until, reports[n])) for n in range(WRITERS)
    ]
    processes.append(context.Process(target=reader, args=(path, until, str(tmp_path / "r.json"))))
    for process in processes:
        process.start()
    deadline = until + 30.0
    hung = []
    for process in processes:
        process.join(max(0.0, deadline - time.time()))
        if process.is_alive():
            hung.append(process.pid)
            process.kill()
            process.join()
    assert hung == [], f"processes still running 30 s past the end: {hung}"
    assert all(p.exitcode == 0 for p in processes), [p.exitcode for p in processes]

    with open(tmp_path / "r.json") as f:
        read = json.load(f)
    assert read["errors"] == [] and read["reads"] > 0 and read["backwards"] == 0, read
    with HistoryStore(path) as store:
        for n, report in enumerate(reports):
            with open(report) as f:
                wrote = json.load(f)
            assert wrote["errors"] == [], wrote["errors"]
            assert wrote["records"] > 5 * FLIP_EVERY, wrote["records"]  # it did transitions
            since = datetime.fromtimestamp(time.time() - 3600, timezone.utc)
            stored = store.outages([guid(n)], since=since)
            seen = sorted(
                [o.start.timestamp(), o.end.timestamp() if o.end else None]
                for o in stored
                if o.source == "sample"
            )
            counted = sorted(
                [o.start.timestamp(), o.end.timestamp() if o.end else None]
                for o in stored
                if o.source == "counter"
            )
            assert seen == sorted(wrote["sample"]), f"writer {n}"
            assert counted == sorted(wrote["counter"]), f"writer {n}"
            assert all(o.port == 1 for o in stored if o.source == "sample")
            assert all(o.port == 2 and o.downs == 1 for o in stored if o.source == "counter")
    assert os.stat(path).st_mode & 0o077 == 0


def first_open(number: int, path: str, go, report: str) -> None:
    go.wait(30)
    try:
        with HistoryStore(path) as store:
            active = PortSample(guid(number), 1, "mlx5_0", now(), "boot", ACTIVE)
            store.record([active, active._replace(at=now(), state=DOWN)])
        outcome = "ok"
    except HistoryError as exc:
        outcome = str(exc)
    with open(report, "w") as f:
        f.write(outcome)


def test_eight_processes_making_the_store_at_once_all_succeed(tmp_path):
    """The first runs after an install may all start together (the prolog on every job, NHC):
    making the file, setting WAL and creating the tables must not fail any of them."""
    path = str(tmp_path / "new" / "history.db")
    context = multiprocessing.get_context("fork")
    go = context.Event()
    reports = [str(tmp_path / f"open-{n}.txt") for n in range(8)]
    processes = [
        context.Process(target=first_open, args=(n, path, go, reports[n])) for n in range(8)
    ]
    for process in processes:
        process.start()
    go.set()
    for process in processes:
        process.join(60)
        assert not process.is_alive()
    outcomes = []
    for report in reports:
        with open(report) as f:
            outcomes.append(f.read())
    assert outcomes == ["ok"] * 8
    with HistoryStore(path) as store:
        assert len(store.outages([guid(n) for n in range(8)], since=datetime.min.replace(
            tzinfo=timezone.utc))) == 8  # fmt: skip
