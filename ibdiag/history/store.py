"""The history store: one SQLite file per node (``/var/lib/ibdiag/history.db`` by default).

Several writers share it at once - NHC every few minutes, the Slurm prolog and epilog, the
monitor every second - so every write is one short ``BEGIN IMMEDIATE`` transaction in WAL mode,
and a writer waits at most ``busy_s`` for the others. The store is never on the critical path:
whatever goes wrong (locked past the wait, a corrupt file, a full disk, no permission) is one
``HistoryError`` line that the run reports as a WARN and grades on without it. A corrupt file is
moved aside (``history.db.corrupt-<time>``) and started afresh, and that is said too.

Bounded: outages and samples older than the retention (7 days by default) go, and past the size
cap the oldest samples go first, then the oldest ended outages - in batches of ``PRUNE_BATCH``
rows, each its own short transaction, so that pruning never holds the others past ``busy_s``.
Versioned: ``meta.schema_version``; an older file is upgraded step by step (``_MIGRATIONS``), a
newer one (a later ibdiag wrote it) is left exactly as it is. Private: the file is 0600 in a
directory made 0700 (its GUIDs and times are the site's business); a looser one is tightened.

Times are stored as seconds since the epoch (UTC), ports by node GUID and port number.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import stat
import time
from datetime import datetime, timezone
from typing import (
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    Union,
)

from pydantic import ValidationError

from ibdiag.errors import IbdiagError
from ibdiag.facts.history import Outage, Tombstone
from ibdiag.history import DEFAULT_PATH
from ibdiag.history.timeline import FAR_FIELDS, PortSample, step

T = TypeVar("T")

SCHEMA_VERSION = 4
RETENTION_S = 7 * 86400
MAX_BYTES = 64 * 1024 * 1024
BUSY_S = 2.0
HEARTBEAT_S = 300.0  # an unchanged port is logged again after this long (samples in a window)
PRUNE_EVERY_S = 3600.0
PRUNE_BATCH = 5000  # rows of each kind a prune transaction drops: the lock is held ~10 ms
VACUUM_PAGES = 2560  # pages one incremental_vacuum gives back (10 MiB of 4 KiB pages)

_SAMPLE_COLUMNS = (
    "node_guid, port, device, at, boot_id, state, phys_state, rate_gbps, width, link_downed, "
    "link_error_recovery, symbol_error, source, far_link_downed, far_link_error_recovery, "
    "far_symbol_error, far_end"
)
# The sample tables as version 1 made them (version 3 adds the far end's counters).
_SAMPLE_TYPES_V1 = (
    "node_guid TEXT NOT NULL, port INTEGER NOT NULL, device TEXT NOT NULL, at REAL NOT NULL, "
    "boot_id TEXT, state INTEGER, phys_state INTEGER, rate_gbps REAL, width TEXT, "
    "link_downed INTEGER, link_error_recovery INTEGER, symbol_error INTEGER, source TEXT"
)
# Each step takes the file from version N-1 to N.
_MIGRATIONS: Tuple[Tuple[Union[str, Callable[[sqlite3.Connection], None]], ...], ...] = (
    (
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        f"CREATE TABLE IF NOT EXISTS last_sample ({_SAMPLE_TYPES_V1}, "
        "PRIMARY KEY (node_guid, port))",
        f"CREATE TABLE IF NOT EXISTS samples ({_SAMPLE_TYPES_V1})",
        "CREATE INDEX IF NOT EXISTS samples_at ON samples (at)",
        "CREATE TABLE IF NOT EXISTS outages (id INTEGER PRIMARY KEY, node_guid TEXT NOT NULL, "
        "port INTEGER NOT NULL, device TEXT NOT NULL, start REAL NOT NULL, end REAL, "
        "bounded INTEGER NOT NULL, downs INTEGER NOT NULL, source TEXT NOT NULL, boot_id TEXT, "
        "UNIQUE (node_guid, port, source, start))",
        "CREATE INDEX IF NOT EXISTS outages_port ON outages (node_guid, port, start)",
        "CREATE INDEX IF NOT EXISTS outages_end ON outages (end)",
        "CREATE TABLE IF NOT EXISTS tombstones (node_guid TEXT NOT NULL, port INTEGER NOT NULL, "
        "device TEXT NOT NULL, at REAL NOT NULL, who TEXT NOT NULL, reason TEXT NOT NULL)",
    ),
    # 2: the window's read (a node's outages that end after ``since``, or are open) walks an
    # index instead of every outage of the node's GUIDs (benchmarks/bench_history.py).
    ("CREATE INDEX IF NOT EXISTS outages_guid_end ON outages (node_guid, end)",),
    # 3: the far end's LinkDownedCounter in each sample, and each port's link-down events since
    # the store began (the counter ibdiag_port_link_down_events_total), counted from the
    # outages already there.
    (
        lambda db: _add_columns(db, far_link_downed="INTEGER"),
        "CREATE TABLE IF NOT EXISTS port_totals (node_guid TEXT NOT NULL, port INTEGER NOT NULL, "
        "downs INTEGER NOT NULL, PRIMARY KEY (node_guid, port))",
        "INSERT OR REPLACE INTO port_totals SELECT node_guid, port, SUM(downs) FROM outages "
        "GROUP BY node_guid, port",
    ),
    # 4: the far end's LinkErrorRecoveryCounter and SymbolErrorCounter too, and which far-end
    # port answered (its counters are compared only while the same one does).
    (
        lambda db: _add_columns(
            db, far_link_error_recovery="INTEGER", far_symbol_error="INTEGER", far_end="TEXT"
        ),
    ),
)


def _add_columns(db: sqlite3.Connection, **columns: str) -> None:
    """Add ``columns`` (name=type) to both sample tables where they are not there yet (a file
    that a development build of a step already gave some of them)."""
    for table in ("last_sample", "samples"):
        have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        for name, kind in columns.items():
            if name not in have:
                db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")


class HistoryError(IbdiagError):
    """The store cannot be used now: one line naming it and why."""


def _epoch(moment: datetime) -> float:
    return moment.timestamp()


def _moment(seconds: Optional[float]) -> Optional[datetime]:
    return None if seconds is None else datetime.fromtimestamp(seconds, timezone.utc)


class HistoryStore:
    """An open store. ``notes`` says what opening it had to do (a corrupt file moved aside)."""

    def __init__(self, path: str = DEFAULT_PATH, busy_s: float = BUSY_S):
        self.path = path
        self.busy_s = busy_s
        self.notes: List[str] = []
        self._inode: Tuple[int, int] = (0, 0)
        self._db = self._open()

    # -- opening ---------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        try:
            try:
                self._prepare_file()
                return self._connect()
            except sqlite3.DatabaseError as exc:
                if not _is_corrupt(exc):
                    raise self._error(exc) from None
                self._move_aside(exc)
                self._prepare_file()
                try:
                    return self._connect()
                except sqlite3.DatabaseError as again:
                    raise self._error(again) from None
        except OSError as exc:
            raise self._os_error(exc) from None

    def _prepare_file(self) -> None:
        """The folder (made 0700 when missing) and the file (created 0600, never through a
        symbolic link; an existing one looser than 0600 is tightened, its -wal/-shm too)."""
        folder = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(folder):
            os.makedirs(folder, mode=0o700, exist_ok=True)
        # Never open and close a file SQLite may already hold in this process (serve's monitor
        # and a scrape both use the store): closing any descriptor of it drops every POSIX lock
        # this process has on it, SQLite's included, and another process may then checkpoint
        # and delete the WAL under the live connection - its writes lost. An existing file is
        # only looked at (lstat: a symbolic link is refused, not followed); a new one is
        # created exclusively, so no connection can hold it yet.
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_NOFOLLOW, 0o600)
            os.close(fd)
        except FileExistsError:
            pass  # another writer made it meanwhile, or it was there: looked at below
        info = os.lstat(self.path)
        if not stat.S_ISREG(info.st_mode):
            why = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a regular file"
            raise OSError(
                errno.ELOOP if stat.S_ISLNK(info.st_mode) else errno.EINVAL, why, self.path
            )
        self._inode = (info.st_dev, info.st_ino)
        for suffix in ("-wal", "-shm"):  # SQLite opens these beside it, following a link
            with contextlib.suppress(FileNotFoundError):
                if not stat.S_ISREG(os.lstat(self.path + suffix).st_mode):
                    raise OSError(errno.ELOOP, "not a regular file", self.path + suffix)
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                mode = os.stat(self.path + suffix, follow_symlinks=False).st_mode
                if stat.S_ISREG(mode) and mode & 0o077:
                    os.chmod(self.path + suffix, 0o600)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=self.busy_s, isolation_level=None)
        try:
            # A newer file is left exactly as it is: its version is read before anything is set.
            version = self._version(db)
            self._check_version(db, version)
            if version == 0:
                # takes only on a file without tables, and only before WAL is set; on any other
                # file it would wait for the write lock for nothing
                db.execute("PRAGMA auto_vacuum=INCREMENTAL")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            self._migrate(db)
        except BaseException:
            db.close()
            raise
        return db

    def _check_version(self, db: sqlite3.Connection, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise HistoryError(
                f"history store {self.path} has schema {version}, newer than this ibdiag's "
                f"{SCHEMA_VERSION}: left alone"
            )

    def _migrate(self, db: sqlite3.Connection) -> None:
        if self._version(db) == SCHEMA_VERSION:
            return
        db.execute("BEGIN IMMEDIATE")
        try:
            version = self._version(db)  # another writer may have done it meanwhile
            self._check_version(db, version)
            for number in range(version + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[number - 1]:
                    if callable(statement):
                        statement(db)
                    else:
                        db.execute(statement)
            db.execute(
                "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    @staticmethod
    def _version(db: sqlite3.Connection) -> int:
        if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone():
            return 0
        row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row and str(row[0]).isdigit() else 0

    def _move_aside(self, why: sqlite3.Error) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        aside = f"{self.path}.corrupt-{stamp}"
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(self.path + suffix):
                os.replace(self.path + suffix, aside + suffix)
        self.notes.append(f"history store {self.path} was corrupt ({why}): moved to {aside}")

    def _recover(self, why: sqlite3.Error) -> None:
        """A file found corrupt after it opened (a truncated file reads until its missing
        pages are needed): moved aside and started afresh, unless another process did so
        already (the path is no longer the file this store opened)."""
        self.close()
        try:
            info = os.stat(self.path)
            if (info.st_dev, info.st_ino) == self._inode:
                self._move_aside(why)
        except OSError:
            pass  # gone already: _open makes it afresh
        self._db = self._open()

    def _error(self, exc: BaseException) -> HistoryError:
        text = " ".join(str(exc).split()) or type(exc).__name__
        if "locked" in text or "busy" in text:
            text = f"locked by another writer for more than {self.busy_s:g} s"
        elif "full" in text:
            text = f"full ({text}): the disk, or the store's page limit"
        elif "readonly" in text or "read-only" in text:
            text = f"not writable ({text})"
        return HistoryError(f"history store {self.path}: {text}")

    def _os_error(self, exc: OSError) -> HistoryError:
        why = exc.strerror or str(exc)
        where = exc.filename if exc.filename and exc.filename != self.path else None
        text = f"{why} ({where})" if where else why
        return HistoryError(f"history store {self.path}: {' '.join(text.split())}")

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._db.close()

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing -----------------------------------------------------------------------------

    def record(self, samples: Sequence[PortSample]) -> List[Outage]:
        """Append ``samples`` (one per port, one reading): the port's last sample is replaced,
        what changed is logged, and transitions open, end or add outages. Returns the outages
        opened or added. One transaction."""

        pruned = []

        def work(db: sqlite3.Connection) -> List[Outage]:
            found: List[Outage] = []
            for sample in samples:
                found.extend(self._record_one(db, sample))
            pruned.append(self._maybe_prune(db, max(s.at for s in samples) if samples else None))
            return found

        found = self._write(work)
        if any(pruned):
            self._vacuum(rounds=1)  # a batch's freed pages back to the file system, bounded
        return found

    def _record_one(self, db: sqlite3.Connection, sample: PortSample) -> List[Outage]:
        previous = self._last(db, sample)
        if previous is not None and sample.far_end is None:
            # the monitor reads no far end: what the last run read of it stands, or the next
            # run would compare the far end's counters with nothing and miss its rise
            sample = sample._replace(**{name: getattr(previous, name) for name in FAR_FIELDS})
        open_id = db.execute(
            "SELECT id FROM outages WHERE node_guid = ? AND port = ? AND end IS NULL "
            "AND source = 'sample' ORDER BY start DESC LIMIT 1",
            (sample.node_guid, sample.port),
        ).fetchone()
        found = step(previous, sample, open_outage=open_id is not None)
        added: List[Outage] = []
        if found.closes and open_id is not None:
            # a clock stepped back still ends the outage no earlier than it started
            db.execute(
                "UPDATE outages SET end = MAX(start, ?) WHERE id = ?",
                (_epoch(sample.at), open_id[0]),
            )
        for outage in (found.opened, found.unseen, found.far):
            if outage is not None and self._insert_outage(db, outage):
                added.append(outage)
        values = self._sample_row(sample)
        db.execute(f"INSERT OR REPLACE INTO last_sample VALUES ({_marks(values)})", values)  # noqa: S608 (only ? marks)
        heartbeat = previous is not None and (
            _epoch(sample.at) - _epoch(previous.at) >= HEARTBEAT_S
        )
        if previous is None or sample.differs(previous) or heartbeat:
            db.execute(f"INSERT INTO samples VALUES ({_marks(values)})", values)  # noqa: S608 (only ? marks)
        return added

    def add_outages(self, outages: Iterable[Outage]) -> int:
        """Outages read elsewhere (the kernel log); one already there (same port, source and
        start) is not added twice. Returns how many were new."""
        given = list(outages)
        return self._write(lambda db: sum(1 for o in given if self._insert_outage(db, o)))

    @staticmethod
    def _insert_outage(db: sqlite3.Connection, outage: Outage) -> bool:
        """Add ``outage``, unless the store has it already (same port, source and start): then
        an end it did not know yet is set (a kernel-log down read while the port was down, its
        up read by a later run). True when it was new."""
        if outage.end is not None:
            db.execute(
                "UPDATE outages SET end = MAX(start, ?), bounded = ? WHERE node_guid = ? "
                "AND port = ? AND source = ? AND start = ? AND end IS NULL",
                (
                    _epoch(outage.end),
                    int(outage.bounded),
                    outage.node_guid,
                    outage.port,
                    outage.source,
                    _epoch(outage.start),
                ),
            )
        cursor = db.execute(
            "INSERT OR IGNORE INTO outages (node_guid, port, device, start, end, bounded, downs, "
            "source, boot_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                outage.node_guid,
                outage.port,
                outage.device,
                _epoch(outage.start),
                None if outage.end is None else _epoch(outage.end),
                int(outage.bounded),
                outage.downs,
                outage.source,
                outage.boot_id,
            ),
        )
        if cursor.rowcount <= 0:
            return False
        # counted once: an outage another reading already has (a sample and the kernel log, our
        # link_downed and the far end's) overlaps it
        start = _epoch(outage.start)
        end = float("inf") if outage.end is None else _epoch(outage.end)
        seen = db.execute(
            "SELECT 1 FROM outages WHERE node_guid = ? AND port = ? AND id != ? "
            "AND start < ? AND (end IS NULL OR end > ?) LIMIT 1",
            (outage.node_guid, outage.port, cursor.lastrowid, end, start),
        ).fetchone()
        if seen is None:
            db.execute(
                "INSERT INTO port_totals VALUES (?, ?, ?) ON CONFLICT (node_guid, port) "
                "DO UPDATE SET downs = downs + excluded.downs",
                (outage.node_guid, outage.port, outage.downs),
            )
        return True

    def down_events(self, node_guids: Iterable[str]) -> Dict[str, int]:
        """Each port's link-down events since the store began: "<guid>/<port>" -> count."""
        guids = sorted(set(node_guids))
        if not guids:
            return {}
        rows = self._query(
            f"SELECT node_guid, port, downs FROM port_totals WHERE node_guid IN ({_marks(guids)})",  # noqa: S608
            tuple(guids),
        )
        return {f"{guid}/{port}": int(downs) for guid, port, downs in rows}

    def clear(self, stone: Tombstone) -> None:
        """An operator's tombstone: the port's outages before ``stone.at`` no longer count."""
        self._write(
            lambda db: db.execute(
                "INSERT INTO tombstones VALUES (?, ?, ?, ?, ?, ?)",
                (
                    stone.node_guid,
                    stone.port,
                    stone.device,
                    _epoch(stone.at),
                    stone.who,
                    stone.reason,
                ),
            )
        )

    def prune(
        self, now: datetime, retention_s: float = RETENTION_S, max_bytes: int = MAX_BYTES
    ) -> None:
        """Drop what is older than the retention (outages still open stay), then the oldest
        samples, then the oldest ended outages, while the pages in use exceed ``max_bytes``;
        the freed pages go back to the file system (``incremental_vacuum``). In transactions
        of at most ``PRUNE_BATCH`` rows of each kind, so that no other writer waits long."""
        moment = _epoch(now)
        while not self._write(lambda db: _prune_step(db, moment, retention_s, max_bytes)):
            pass
        self._write(lambda db: _pruned(db, moment))
        self._vacuum(rounds=1_000_000)  # bounded: each round frees VACUUM_PAGES or ends it

    def _vacuum(self, rounds: int) -> None:
        """Give free pages back to the file system, VACUUM_PAGES a round, at most ``rounds``."""
        try:
            for _ in range(rounds):
                if not self._db.execute("PRAGMA freelist_count").fetchone()[0]:
                    break
                # executescript steps the pragma to its end; execute() would free one page
                self._db.executescript(f"PRAGMA incremental_vacuum({VACUUM_PAGES});")
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    @staticmethod
    def _maybe_prune(db: sqlite3.Connection, now: Optional[datetime]) -> bool:
        """Once an hour (by the samples' clock; a clock stepped back prunes too), a batch of
        pruning in the run's own transaction; batches go on in later runs until all is done."""
        if now is None:
            return False
        row = db.execute("SELECT value FROM meta WHERE key = 'pruned_at'").fetchone()
        last = float(row[0]) if row else 0.0
        moment = _epoch(now)
        if moment - last < PRUNE_EVERY_S and moment >= last:
            return False
        if _prune_step(db, moment, RETENTION_S, MAX_BYTES):
            _pruned(db, moment)
        return True

    # -- reading -----------------------------------------------------------------------------

    def outages(
        self, node_guids: Iterable[str], since: datetime, until: Optional[datetime] = None
    ) -> List[Outage]:
        """The outages of ``node_guids``' ports that touch ``since`` .. ``until``, oldest first."""
        guids = sorted(set(node_guids))
        if not guids:
            return []
        far = _epoch(until) if until is not None else float("inf")
        # Two halves so that each walks outages_guid_end (node_guid, end) over its own range: with
        # "end IS NULL OR end >= ?" SQLite reads every outage of the GUIDs.
        columns = "node_guid, port, device, start, end, bounded, downs, source, boot_id"
        where = f"node_guid IN ({_marks(guids)})"
        rows = self._query(
            f"SELECT {columns} FROM outages WHERE {where} AND end >= ? AND start <= ? "  # noqa: S608
            f"UNION ALL SELECT {columns} FROM outages WHERE {where} AND end IS NULL "
            "AND start <= ? ORDER BY start",
            (*guids, _epoch(since), far, *guids, far),
        )
        with self._readable():
            return [
                Outage(
                    node_guid=row[0],
                    port=row[1],
                    device=row[2],
                    start=_moment(row[3]),
                    end=_moment(row[4]),
                    bounded=bool(row[5]),
                    downs=max(1, row[6]),
                    source=row[7],
                    boot_id=row[8],
                )
                for row in rows
            ]

    def tombstones(self, node_guids: Iterable[str]) -> List[Tombstone]:
        guids = sorted(set(node_guids))
        if not guids:
            return []
        rows = self._query(
            "SELECT node_guid, port, device, at, who, reason FROM tombstones "  # noqa: S608
            f"WHERE node_guid IN ({_marks(guids)}) ORDER BY at",
            tuple(guids),
        )
        with self._readable():
            return [
                Tombstone(
                    node_guid=r[0], port=r[1], device=r[2], at=_moment(r[3]), who=r[4], reason=r[5]
                )
                for r in rows
            ]

    def sample_count(self, node_guids: Iterable[str], since: datetime) -> int:
        guids = sorted(set(node_guids))
        if not guids:
            return 0
        row = self._query(
            f"SELECT COUNT(*) FROM samples WHERE node_guid IN ({_marks(guids)}) AND at >= ?",  # noqa: S608
            (*guids, _epoch(since)),
        )
        return int(row[0][0])

    def last_samples(self) -> List[PortSample]:
        """Every port's latest sample (``ibdiag history`` shows which ports it knows)."""
        rows = self._query(f"SELECT {_SAMPLE_COLUMNS} FROM last_sample ORDER BY node_guid, port")  # noqa: S608
        with self._readable():
            return [_sample(row) for row in rows]

    def _last(self, db: sqlite3.Connection, sample: PortSample) -> Optional[PortSample]:
        row = db.execute(
            f"SELECT {_SAMPLE_COLUMNS} FROM last_sample WHERE node_guid = ? AND port = ?",  # noqa: S608
            (sample.node_guid, sample.port),
        ).fetchone()
        with self._readable():
            return _sample(row) if row else None

    @contextlib.contextmanager
    def _readable(self) -> Iterator[None]:
        """A row that SQLite's loose types let in but ibdiag cannot read (an outage source it
        does not know, text where a time should be: a later ibdiag's, or a hand-edited store) is
        one HistoryError, never a traceback."""
        try:
            yield
        except (ValidationError, TypeError, ValueError, OverflowError) as exc:
            why = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            raise HistoryError(f"history store {self.path}: a row it cannot read ({why})") from None

    def _query(self, sql: str, values: Tuple = ()) -> List[tuple]:
        for attempt in (1, 2):
            try:
                return self._db.execute(sql, values).fetchall()
            except sqlite3.Error as exc:
                if attempt == 2 or not _is_corrupt(exc):
                    raise self._error(exc) from None
                self._recover(exc)
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _sample_row(sample: PortSample) -> tuple:
        return (*sample[:3], _epoch(sample.at), *sample[4:])

    def _write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` in one transaction; a file found corrupt meanwhile is moved aside and the
        work done once more on a fresh one. Any other failure is one ``HistoryError``."""
        for attempt in (1, 2):
            try:
                return self._transaction(work)
            except sqlite3.Error as exc:
                if attempt == 2 or not _is_corrupt(exc):
                    raise self._error(exc) from None
                self._recover(exc)
        raise AssertionError("unreachable")  # pragma: no cover

    def _transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """One ``BEGIN IMMEDIATE`` .. ``COMMIT``: the write lock is taken at once (waiting at
        most ``busy_s``), so two writers never deadlock upgrading a read to a write."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            result = work(self._db)
            self._db.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise
        return result

    def _rollback(self) -> None:
        try:
            self._db.execute("ROLLBACK")
        except sqlite3.DatabaseError:
            pass  # nothing was begun, or the connection is gone: nothing to undo


def _prune_step(db: sqlite3.Connection, now: float, retention_s: float, max_bytes: int) -> bool:
    """One batch of pruning (at most ``PRUNE_BATCH`` rows of each kind); True when nothing is
    left to do."""
    batch = PRUNE_BATCH
    cutoff = now - retention_s
    old_samples = db.execute(
        "DELETE FROM samples WHERE rowid IN (SELECT rowid FROM samples WHERE at < ? LIMIT ?)",
        (cutoff, batch),
    ).rowcount
    old_outages = db.execute(
        "DELETE FROM outages WHERE id IN (SELECT id FROM outages WHERE end < ? LIMIT ?)",
        (cutoff, batch),
    ).rowcount
    db.execute(
        "DELETE FROM tombstones WHERE at < ? AND NOT EXISTS (SELECT 1 FROM outages o "
        "WHERE o.node_guid = tombstones.node_guid AND o.port = tombstones.port "
        "AND o.end IS NULL AND o.start < tombstones.at)",
        (cutoff,),
    )  # a tombstone whose outage is still open goes on clearing it
    if old_samples >= batch or old_outages >= batch:
        return False
    page_size = db.execute("PRAGMA page_size").fetchone()[0]
    used = (
        db.execute("PRAGMA page_count").fetchone()[0]
        - db.execute("PRAGMA freelist_count").fetchone()[0]
    ) * page_size
    if used <= max_bytes:
        return True
    # the share of rows over the cap, a little more (a few rounds, not all at once)
    share = (used - max_bytes) / used * 1.1
    for table, key, order in (("samples", "rowid", "at"), ("outages", "id", "end")):
        count = db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]  # noqa: S608
        rows = min(batch, max(100, int(count * share)))
        gone = db.execute(
            f"DELETE FROM {table} WHERE {key} IN (SELECT {key} FROM {table} "  # noqa: S608
            f"WHERE {order} IS NOT NULL ORDER BY {order} LIMIT ?)",
            (rows,),
        ).rowcount
        if gone:
            return False
    return True  # nothing left that may go (open outages, last samples): as small as it gets


def _pruned(db: sqlite3.Connection, now: float) -> None:
    db.execute("INSERT OR REPLACE INTO meta VALUES ('pruned_at', ?)", (str(now),))


def _marks(values: Sequence) -> str:
    return ", ".join("?" for _ in values)


def _sample(row: Sequence) -> PortSample:
    values = list(row)
    values[3] = _moment(values[3])
    return PortSample(*values)


def _is_corrupt(exc: sqlite3.Error) -> bool:
    text = str(exc)
    return "not a database" in text or "malformed" in text
