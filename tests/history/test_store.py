"""The history store (ibdiag/history/store.py) when things go right and when they do not.

Healthy: what is recorded reads back, an outage open in the store stays open across runs until
an ACTIVE sample ends it, the file stays within its retention and size, 0600 in a 0700 folder.
Unhealthy - locked, corrupt, newer, unwritable, full - is one ``HistoryError`` line naming the
store, within about ``busy_s``, never a hang or a traceback; a corrupt file is moved aside.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import subprocess
import time
from datetime import datetime, timedelta, timezone
from typing import List

import pytest

from ibdiag.facts.history import Outage, Tombstone
from ibdiag.history import store as store_module
from ibdiag.history.store import SCHEMA_VERSION, HistoryError, HistoryStore
from ibdiag.history.timeline import ACTIVE, PortSample

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=timezone.utc)
DOWN = 1
GUID = "0x0002c90300a1b2c3"
OTHER = "0x0002c90300ffffff"
DAY = 86400.0


def sample(seconds, state=ACTIVE, link_downed=0, guid=GUID, port=1, device="mlx5_0", boot="b"):
    return PortSample(
        node_guid=guid,
        port=port,
        device=device,
        at=NOW + timedelta(seconds=seconds),
        boot_id=boot,
        state=state,
        link_downed=link_downed,
    )


def kernel_outage(start_s, end_s=None, guid=GUID) -> Outage:
    return Outage(
        node_guid=guid,
        port=1,
        device="mlx5_0",
        start=NOW + timedelta(seconds=start_s),
        end=None if end_s is None else NOW + timedelta(seconds=end_s),
        source="kernel-log",
    )


@pytest.fixture
def path(tmp_path) -> str:
    return str(tmp_path / "var" / "history.db")


def everything(store: HistoryStore, *guids: str) -> List[Outage]:
    return store.outages(guids or (GUID,), since=NOW - timedelta(days=3650))


def one_line(error: pytest.ExceptionInfo, path: str) -> str:
    text = str(error.value)
    assert "\n" not in text and path in text, text
    return text


# -- what goes in comes out --------------------------------------------------------------------


def test_record_and_read_back_an_outage(path):
    with HistoryStore(path) as store:
        assert store.record([sample(0)]) == []
        opened = store.record([sample(60, state=DOWN, link_downed=1)])
        assert [o.start for o in opened] == [NOW + timedelta(seconds=60)]
        (still,) = everything(store)
        assert still.end is None and still.source == "sample"
        store.record([sample(120, link_downed=1)])
        (outage,) = everything(store)
        assert outage.start == NOW + timedelta(seconds=60)
        assert outage.end == NOW + timedelta(seconds=120)
        assert outage.down_s(NOW) == 60.0 and not outage.bounded
        assert store.sample_count([GUID], since=NOW) == 3
        assert store.sample_count([OTHER], since=NOW) == 0
        assert [s.state for s in store.last_samples()] == [ACTIVE]


def test_counter_rise_is_stored_as_a_bounded_outage(path):
    with HistoryStore(path) as store:
        store.record([sample(0, link_downed=2)])
        (added,) = store.record([sample(60, link_downed=5)])
        (outage,) = everything(store)
        assert outage == added
        assert (outage.source, outage.bounded, outage.downs) == ("counter", True, 3)


def test_outages_read_only_the_window_and_the_guids_asked(path):
    with HistoryStore(path) as store:
        store.add_outages(
            [
                kernel_outage(-3 * DAY, -3 * DAY + 10),  # ended before the window
                kernel_outage(-5 * DAY),  # began long before, still open: in it
                kernel_outage(-60, -30),
                kernel_outage(-60, -30, guid=OTHER),
            ]
        )
        found = store.outages([GUID], since=NOW - timedelta(hours=12))
        assert [o.start for o in found] == [NOW - timedelta(days=5), NOW - timedelta(seconds=60)]
        until = store.outages([GUID], since=NOW - timedelta(days=6), until=NOW - timedelta(days=4))
        assert [o.start for o in until] == [NOW - timedelta(days=5)]
        assert store.outages([], since=NOW) == []


def test_an_open_outage_survives_reopening_and_is_closed_later(path):
    with HistoryStore(path) as store:
        store.record([sample(0)])
        store.record([sample(60, state=DOWN)])
    with HistoryStore(path) as store:
        (outage,) = everything(store)
        assert outage.end is None  # still open: a new run must not forget it
        assert store.record([sample(90, state=DOWN)]) == []  # still down opens no second one
        store.record([sample(120)])
    with HistoryStore(path) as store:
        (outage,) = everything(store)
        assert outage.end == NOW + timedelta(seconds=120)


def test_a_renamed_hca_closes_its_own_outage(path):
    with HistoryStore(path) as store:
        store.record([sample(0, device="mlx5_3")])
        store.record([sample(60, state=DOWN, device="mlx5_3")])
        store.record([sample(120, device="mlx5_5")])
        (outage,) = everything(store)
        assert outage.end == NOW + timedelta(seconds=120) and outage.device == "mlx5_3"


def test_a_clock_stepped_back_never_ends_an_outage_before_it_began(path):
    with HistoryStore(path) as store:
        store.record([sample(0)])
        store.record([sample(600, state=DOWN)])
        store.record([sample(60)])  # the clock went back 9 minutes
        (outage,) = everything(store)
        assert outage.end is not None and outage.start <= outage.end


def test_add_outages_adds_each_once(path):
    with HistoryStore(path) as store:
        assert store.add_outages([kernel_outage(-60, -30), kernel_outage(-10)]) == 2
        assert store.add_outages(o for o in [kernel_outage(-60, -30), kernel_outage(-10)]) == 0
        assert len(everything(store)) == 2


def test_tombstones_are_kept_per_guid(path):
    stone = Tombstone(node_guid=GUID, port=1, device="mlx5_0", at=NOW, who="ops", reason="fixed")
    with HistoryStore(path) as store:
        store.clear(stone)
    with HistoryStore(path) as store:
        assert store.tombstones([GUID]) == [stone]
        assert store.tombstones([OTHER]) == []


# -- bounded -------------------------------------------------------------------------------------


def test_prune_drops_what_is_past_retention_and_keeps_the_rest(path):
    with HistoryStore(path) as store:
        store.record([sample(-9 * DAY, guid=OTHER)])
        store.record([sample(-9 * DAY)])
        store.record([sample(-9 * DAY + 60, state=DOWN)])  # opened 9 days ago, still open
        store.add_outages([kernel_outage(-8 * DAY, -8 * DAY + 5), kernel_outage(-DAY, -DAY + 5)])
        old = Tombstone(node_guid=GUID, port=1, device="d", at=NOW - timedelta(days=8), who="a",
                        reason="old")  # fmt: skip
        new = old.model_copy(update={"at": NOW - timedelta(days=1), "reason": "new"})
        other = old.model_copy(update={"node_guid": OTHER, "reason": "other"})
        store.clear(old)
        store.clear(new)
        store.clear(other)
        store.record([sample(-60, guid=OTHER, link_downed=1)])
        store.prune(NOW, retention_s=7 * DAY)
        starts = sorted((o.start - NOW).total_seconds() for o in everything(store))
        assert starts == [-9 * DAY + 60, -DAY]
        # the old tombstone still clears the outage open since before it: kept with it
        assert store.tombstones([GUID]) == [old, new]
        assert store.tombstones([OTHER]) == []  # old, and nothing open it clears: gone
        since_ever = NOW - timedelta(days=3650)
        assert store.sample_count([GUID], since=since_ever) == 0
        assert store.sample_count([OTHER], since=since_ever) == 1


def used_bytes(path: str) -> int:
    db = sqlite3.connect(path)
    try:
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        free = db.execute("PRAGMA freelist_count").fetchone()[0]
        return (pages - free) * db.execute("PRAGMA page_size").fetchone()[0]
    finally:
        db.close()


def test_prune_brings_the_file_under_its_size_cap(path):
    cap = 256 * 1024
    with HistoryStore(path) as store:
        for n in range(40):
            store.record(
                [sample(-3600 + n, port=p, link_downed=n, boot=f"boot-{n}") for p in range(200)]
            )
        assert used_bytes(path) > 2 * cap
        store.prune(NOW, max_bytes=cap)
        assert used_bytes(path) <= cap
        assert store.sample_count([GUID], since=NOW - timedelta(days=1)) > 0  # newest kept
        store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    # the freed pages went back to the file system, not only onto the free list
    assert os.path.getsize(path) <= cap + 64 * 1024


# -- versions ------------------------------------------------------------------------------------


def meta(path: str, key: str):
    db = sqlite3.connect(path)
    try:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None
    finally:
        db.close()


def test_a_new_file_gets_the_current_version_wal_and_incremental_vacuum(path):
    HistoryStore(path).close()
    assert meta(path, "schema_version") == str(SCHEMA_VERSION) == "4"
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
    finally:
        db.close()


def test_a_newer_file_is_refused_and_left_exactly_as_it_was(path):
    os.makedirs(os.path.dirname(path))
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("INSERT INTO meta VALUES ('schema_version', '99')")
    db.commit()
    db.close()
    with open(path, "rb") as f:
        before = f.read()
    with pytest.raises(HistoryError) as error:
        HistoryStore(path)
    assert "schema 99" in one_line(error, path)
    with open(path, "rb") as f:
        assert f.read() == before
    assert not os.path.exists(path + "-wal")
    assert sorted(os.listdir(os.path.dirname(path))) == ["history.db"]


def write_version_0(path: str, how: str) -> None:
    os.makedirs(os.path.dirname(path))
    if how == "empty":
        sqlite3.connect(path).close()  # a zero-length file: SQLite's empty database
        return
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("INSERT INTO meta VALUES ('schema_version', '0')")
    db.commit()
    db.close()


@pytest.mark.parametrize("how", ["empty", "meta-0"])
def test_a_version_0_file_is_migrated(path, how):
    write_version_0(path, how)
    with HistoryStore(path) as store:
        store.record([sample(-1), sample(0, state=DOWN)])
        assert len(everything(store)) == 1
    assert meta(path, "schema_version") == str(SCHEMA_VERSION)


def test_a_version_1_file_is_migrated_keeping_its_outages(path):
    os.makedirs(os.path.dirname(path))
    db = sqlite3.connect(path, isolation_level=None)
    for statement in store_module._MIGRATIONS[0]:
        db.execute(statement)
    db.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    db.execute(
        "INSERT INTO outages (node_guid, port, device, start, end, bounded, downs, source) "
        "VALUES (?, 1, 'mlx5_0', ?, NULL, 0, 1, 'sample')",
        (GUID, NOW.timestamp() - 60),
    )
    db.close()
    with HistoryStore(path) as store:
        (outage,) = everything(store)
        assert outage.end is None
        store.record([sample(0)])  # the outage that was open in version 1 is closed now
        assert everything(store)[0].end == NOW
        # version 3 counted the outages already there into the per-port totals
        assert store.down_events([GUID]) == {f"{GUID}/1": 1}
    assert meta(path, "schema_version") == "4"
    db = sqlite3.connect(path)
    try:
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        columns = {r[1] for r in db.execute("PRAGMA table_info(samples)")}
    finally:
        db.close()
    assert "outages_guid_end" in names
    assert {"far_link_downed", "far_link_error_recovery", "far_symbol_error"} <= columns


# -- private -------------------------------------------------------------------------------------


def mode(path: str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_file_0600_in_a_new_0700_folder_with_wal_and_shm_no_looser(path):
    old = os.umask(0o022)
    try:
        with HistoryStore(path) as store:
            store.record([sample(0)])
            assert mode(os.path.dirname(path)) == 0o700
            assert mode(path) == 0o600
            for suffix in ("-wal", "-shm"):
                assert os.path.exists(path + suffix)
                assert mode(path + suffix) & 0o077 == 0, suffix
    finally:
        os.umask(old)


def test_a_looser_existing_file_is_tightened(path):
    with HistoryStore(path) as store:
        store.record([sample(0)])
    os.chmod(path, 0o644)
    with HistoryStore(path) as store:
        store.record([sample(60)])
        assert mode(path) == 0o600
        assert mode(path + "-wal") & 0o077 == 0


# -- broken --------------------------------------------------------------------------------------


def test_a_garbage_file_is_moved_aside_and_a_fresh_store_works(path):
    os.makedirs(os.path.dirname(path))
    with open(path, "wb") as f:
        f.write(b"this is not SQLite \x00\xff" * 500)
    with HistoryStore(path) as store:
        (note,) = store.notes
        assert "corrupt" in note and path in note and "\n" not in note
        store.record([sample(-1), sample(0, state=DOWN)])
        assert len(everything(store)) == 1
    aside = [n for n in os.listdir(os.path.dirname(path)) if ".corrupt-" in n]
    assert len(aside) == 1 and aside[0] in note
    with open(os.path.join(os.path.dirname(path), aside[0]), "rb") as f:
        assert f.read().startswith(b"this is not SQLite")


def filled(path: str) -> None:
    with HistoryStore(path) as store:
        for n in range(30):
            store.record([sample(n, port=p, link_downed=n) for p in range(100)])
            store.add_outages([kernel_outage(n * 10 + p, n * 10 + p + 1) for p in range(50)])
    assert not os.path.exists(path + "-wal")  # the last close checkpointed it into the file


@pytest.mark.parametrize("keep", [0.9, 0.5, 0.1])
def test_a_truncated_file_is_moved_aside_when_found_and_a_fresh_store_works(path, keep):
    filled(path)
    size = os.path.getsize(path)
    os.truncate(path, int(size * keep) // 4096 * 4096)
    with HistoryStore(path) as store:
        # the damage shows when the missing pages are read: at opening or at the first use
        store.record([sample(9_999), sample(10_000, state=DOWN)])
        found = everything(store)
        assert store.notes and "corrupt" in store.notes[0] and path in store.notes[0]
        assert [o.start for o in found] == [NOW + timedelta(seconds=10_000)]
    assert any(".corrupt-" in n for n in os.listdir(os.path.dirname(path)))


def test_a_locked_store_fails_within_busy_s_and_works_once_released(path):
    with HistoryStore(path) as store:
        store.record([sample(0)])
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("INSERT INTO meta VALUES ('held', 'yes')")
        with HistoryStore(path, busy_s=0.5) as store:
            began = time.monotonic()
            with pytest.raises(HistoryError) as error:
                store.record([sample(60, state=DOWN)])
            waited = time.monotonic() - began
            assert 0.4 <= waited < 1.5, waited
            assert "locked" in one_line(error, path)
            holder.execute("COMMIT")
            store.record([sample(60, state=DOWN)])
            assert len(everything(store)) == 1
    finally:
        holder.close()


def test_a_folder_where_the_file_should_be_is_one_line(path):
    os.makedirs(path)
    with pytest.raises(HistoryError) as error:
        HistoryStore(path)
    one_line(error, path)


def test_a_file_where_the_folder_should_be_is_one_line(tmp_path):
    (tmp_path / "var").write_text("a file, not a folder\n")
    path = str(tmp_path / "var" / "history.db")
    with pytest.raises(HistoryError) as error:
        HistoryStore(path)
    assert str(tmp_path / "var") in one_line(error, path)


def test_a_symbolic_link_is_not_followed(tmp_path):
    path = str(tmp_path / "history.db")
    os.symlink(str(tmp_path / "elsewhere.db"), path)
    with pytest.raises(HistoryError) as error:
        HistoryStore(path)
    one_line(error, path)
    assert not os.path.exists(tmp_path / "elsewhere.db")


def test_a_place_nobody_can_write_is_one_line():
    """/proc refuses new files even to root (the tests run as root in CI: modes alone would
    not stop them)."""
    path = f"/proc/{os.getpid()}/history.db"
    with pytest.raises(HistoryError) as error:
        HistoryStore(path)
    one_line(error, path)


def test_a_full_store_is_one_line_and_nothing_half_written(path):
    """A full disk, as SQLite sees it: ``max_page_count`` on the store's own connection makes
    the next page it needs fail with SQLITE_FULL, as a full file system would."""
    with HistoryStore(path) as store:
        store.record([sample(0)])
        pages = store._db.execute("PRAGMA page_count").fetchone()[0]
        store._db.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(HistoryError) as error:
            store.record([sample(60, port=p, state=DOWN) for p in range(2000)])
        assert "full" in one_line(error, path)
        assert everything(store) == []  # the failed transaction left nothing behind
        store._db.execute("PRAGMA max_page_count = 1000000")
        store.record([sample(60, state=DOWN)])
        assert len(everything(store)) == 1


def test_a_damaged_table_found_only_in_use_is_moved_aside_then(path):
    """Page 1 and ``meta`` intact, so the file opens; the outages' pages are garbage, which
    shows only when a run reads or writes them. That run moves it aside and goes on afresh."""
    filled(path)
    db = sqlite3.connect(path)
    page_size = db.execute("PRAGMA page_size").fetchone()[0]
    roots = [
        r[0] for r in db.execute("SELECT rootpage FROM sqlite_master WHERE tbl_name='outages'")
    ]
    db.close()
    with open(path, "r+b") as f:
        for root in roots:
            f.seek((root - 1) * page_size)
            f.write(b"\xde\xad" * (page_size // 2))
    with HistoryStore(path) as store:
        assert store.notes == []  # it opened: the damage is not seen yet
        store.record([sample(9_999), sample(10_000, state=DOWN)])
        assert store.notes and "corrupt" in store.notes[0]
        assert [o.start for o in everything(store)] == [NOW + timedelta(seconds=10_000)]


def chattr(flag: str, target: str) -> bool:
    try:
        done = subprocess.run(["chattr", flag, target], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@pytest.mark.parametrize("what", ["file", "folder"])
def test_an_immutable_store_is_one_line_even_for_root(path, what):
    """Root ignores file modes; an immutable file (or folder, where -wal cannot be made) stops
    root too. Where the file system has no such attribute (tmpfs), there is nothing to test."""
    with HistoryStore(path) as store:
        store.record([sample(0)])
    target = path if what == "file" else os.path.dirname(path)
    if not chattr("+i", target):
        pytest.skip(f"chattr +i is not supported on {target}'s file system")
    try:
        with pytest.raises(HistoryError) as error:
            with HistoryStore(path, busy_s=0.5) as store:
                store.record([sample(60, state=DOWN)])
        one_line(error, path)
    finally:
        assert chattr("-i", target)
    with HistoryStore(path) as store:
        assert everything(store) == []  # nothing half-written while it was immutable


def test_prune_goes_in_small_transactions_until_done(path, monkeypatch):
    monkeypatch.setattr(store_module, "PRUNE_BATCH", 7)
    with HistoryStore(path) as store:
        store.add_outages(kernel_outage(-9 * DAY + n, -9 * DAY + n + 1) for n in range(50))
        store.add_outages([kernel_outage(-60, -30)])
        store.record([sample(-9 * DAY + n, port=n % 5, link_downed=n) for n in range(40)])
        began = store._transaction
        count = []
        monkeypatch.setattr(store, "_transaction", lambda work: count.append(1) or began(work))
        store.prune(NOW, retention_s=7 * DAY)
        assert len(count) >= 50 // 7  # one transaction could not have dropped them all
        assert [o.start for o in everything(store)] == [NOW - timedelta(seconds=60)]
        assert store.sample_count([GUID], since=NOW - timedelta(days=3650)) == 0


def test_recording_prunes_by_itself_once_an_hour(path, monkeypatch):
    """No cron job: the runs themselves keep the store small, a batch per run until done."""
    monkeypatch.setattr(store_module, "PRUNE_BATCH", 10)
    with HistoryStore(path) as store:
        store.record([sample(-9 * DAY)])
        store.add_outages(kernel_outage(-9 * DAY + n, -9 * DAY + n + 1) for n in range(25))
        store.record([sample(-9 * DAY + 60)])  # within the hour: nothing pruned
        assert len(everything(store)) == 25
        for n in range(3):  # 25 outages, 10 a run
            store.record([sample(n)])
        assert everything(store) == []
        store.add_outages([kernel_outage(-8 * DAY, -8 * DAY + 1)])
        store.record([sample(60)])  # pruned a minute ago: not again yet
        assert len(everything(store)) == 1


def test_a_closed_store_is_one_line_not_a_traceback(path):
    store = HistoryStore(path)
    store.close()
    store.close()  # twice is no harm
    for use in (lambda: store.record([sample(0)]), lambda: everything(store)):
        with pytest.raises(HistoryError) as error:
            use()
        one_line(error, path)


def test_a_store_locked_while_it_opens_fails_within_busy_s(path):
    """An older file needs its migration (the write lock) while another holds the lock."""
    os.makedirs(os.path.dirname(path))
    db = sqlite3.connect(path, isolation_level=None)
    for statement in store_module._MIGRATIONS[0]:
        db.execute(statement)
    db.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    db.execute("BEGIN EXCLUSIVE")
    try:
        began = time.monotonic()
        with pytest.raises(HistoryError) as error:
            HistoryStore(path, busy_s=0.5)
        assert time.monotonic() - began < 1.5
        assert "locked" in one_line(error, path)
    finally:
        db.execute("ROLLBACK")
        db.close()
    HistoryStore(path).close()
    assert meta(path, "schema_version") == "4"


def test_a_second_store_in_one_process_never_costs_the_first_its_writes(path):
    """serve's monitor keeps a store open while each scrape opens and closes another in the same
    process. Opening the file outside SQLite and closing it there would drop every POSIX lock
    the process holds on it - the monitor's too - and another process's last close would then
    checkpoint and delete the WAL under the live connection: its next writes lost."""
    import subprocess
    import sys

    def another_process(code: str) -> str:
        script = f"import sys\nfrom ibdiag.history.store import HistoryStore\n{code}"
        found = subprocess.run(
            [sys.executable, "-c", script, path],
            capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        return found.stdout.strip()

    come_and_go = "for _ in range(3): HistoryStore(sys.argv[1]).close()"  # NHC's checks, say
    seen = (
        "import sqlite3\n"
        "print(sqlite3.connect(sys.argv[1]).execute('select start, end from outages').fetchall())"
    )
    start, end = (
        (NOW + timedelta(seconds=10)).timestamp(),
        (NOW + timedelta(seconds=20)).timestamp(),
    )
    monitor = HistoryStore(path)
    try:
        monitor.record([sample(0)])
        HistoryStore(path).close()  # a scrape's store, opened and closed beside it
        another_process(come_and_go)
        monitor.record([sample(10, DOWN)])
        monitor.record([sample(20)])
        another_process(come_and_go)
        # read while the monitor runs on, as a scrape or `ibdiag history` does
        assert another_process(seen) == repr([(start, end)])
    finally:
        monitor.close()


@pytest.mark.parametrize("suffix", ["-wal", "-shm"])
def test_a_link_beside_the_store_is_refused_not_followed(path, suffix, tmp_path):
    HistoryStore(path).close()
    for leftover in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path + leftover)
    target = tmp_path / "elsewhere"
    os.symlink(target, path + suffix)
    with pytest.raises(HistoryError) as raised:
        HistoryStore(path)
    assert path + suffix in str(raised.value) and "\n" not in str(raised.value)
    assert not target.exists()


def test_a_row_ibdiag_cannot_read_is_one_error_not_a_traceback(path):
    with HistoryStore(path) as store:
        store.record([sample(0), sample(60, state=DOWN)])
    db = sqlite3.connect(path)
    db.execute("UPDATE outages SET source = 'a-later-ibdiag'")
    db.commit()
    db.close()
    with HistoryStore(path) as store, pytest.raises(HistoryError) as raised:
        everything(store)
    assert "a row it cannot read" in str(raised.value) and path in str(raised.value)


@pytest.mark.parametrize("extra", [(), ("far_link_error_recovery", "far_symbol_error")])
def test_a_version_3_file_gets_the_far_ends_other_columns(path, extra):
    """Version 3 added far_link_downed (a development build also two of version 4's columns):
    version 4 adds what is missing, keeps the rows, and a far end is then recorded whole."""
    os.makedirs(os.path.dirname(path))
    db = sqlite3.connect(path, isolation_level=None)
    for step in store_module._MIGRATIONS[:3]:
        for statement in step:
            statement(db) if callable(statement) else db.execute(statement)
    for table in ("last_sample", "samples"):
        for column in extra:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} INTEGER")
    db.execute("INSERT INTO meta VALUES ('schema_version', '3')")
    db.execute("INSERT INTO port_totals VALUES (?, 1, 5)", (GUID,))
    db.close()
    with HistoryStore(path) as store:
        store.record([sample(0)._replace(far_link_downed=7, far_symbol_error=2, far_end="0xab/21")])
        (last,) = store.last_samples()
        assert (last.far_link_downed, last.far_symbol_error, last.far_end) == (7, 2, "0xab/21")
        assert store.down_events([GUID]) == {f"{GUID}/1": 5}
    assert meta(path, "schema_version") == "4"
