"""``ibdiag watch``: the passive monitor - every port's state and link counters every second,
each change into the history store, so that no flap falls between two runs of ``ibdiag check``.

A pass reads every port (``ibdiag.history.sampler``) and compares it with the port's previous
sample, kept in memory: only a port that changed (``PortSample.differs``), or whose last
recorded sample is ``HEARTBEAT_S`` old, is written - nothing at all in the steady state, one
short transaction when a link moves. Each state change (and each ``link_downed`` rise, rename,
port that appears or vanishes) is also one line on stdout, unless ``--quiet``.

Ticks are on the monotonic clock, ``--interval`` apart with no drift; a pass that overran skips
the ticks it missed rather than bunching up. The store never stops the sampling: a write that
fails (locked past ``busy_s`` - at most the interval, at most ``BUSY_S`` - corrupt, disk full,
unwritable) is one line on stderr, said again only when the reason changes, and its samples are
kept (bounded) and written, in order, by a later pass: the next one, then after twice as many
intervals each time it fails again, up to ``RETRY_MAX_S`` (a store that stays broken costs no
CPU); the store is reopened when the file was replaced or removed under it. SIGTERM, SIGINT and
SIGHUP end it after the write in progress, with the store closed: exit 0.

Healthy: nothing printed after the start line; the store gains a row per port every few minutes.
"""

from __future__ import annotations

import os
import select
import signal
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Protocol, Set, Tuple

import click

from ibdiag.cli.options import (
    UsageFailure,
    history_options,
    ignore_options,
    seconds_option,
    source_options,
)

if TYPE_CHECKING:
    from ibdiag.facts.history import PortKey
    from ibdiag.history.store import HistoryStore
    from ibdiag.history.timeline import PortSample

STATES = {1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
PHYS_STATES = {
    1: "Sleep",
    2: "Polling",
    3: "Disabled",
    4: "PortConfigurationTraining",
    5: "LinkUp",
    6: "LinkErrorRecovery",
    7: "PhyTest",
}
# Samples kept while the store cannot be written (about a day of heartbeats on 64 ports, a few
# MB); past it the oldest go, and how many is said when the store is written again.
MAX_PENDING = 20_000
RETRY_MAX_S = 60.0  # failed writes are retried after 1, 2, 4, ... intervals, at most this long
_STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@click.command("watch")
@seconds_option(
    "--interval", minimum=0.05, default=1.0, help="Read every port this often (monotonic clock)."
)
@history_options
@source_options
@ignore_options
@click.option(
    "--count", type=click.IntRange(min=1), metavar="N", help="Stop after N passes (tests)."
)
@click.option("-q", "--quiet", is_flag=True, help="Print no transitions (errors still go).")
def watch_command(
    interval: float,
    history_path: Optional[str],
    no_history: bool,
    sysfs_root: str,
    procfs_root: str,
    count: Optional[int],
    quiet: bool,
    profile: Optional[str],
    config_path: Optional[str],
    ignore_hcas: Tuple[str, ...],
) -> int:
    """Sample every port's state and link counters each --interval into the history store
    (devices the profile, config or --ignore-hca leave out are never read)."""
    from ibdiag.history import store_path
    from ibdiag.pipeline import PipelineOptions, effective_config

    site = PipelineOptions(profile=profile, config_path=config_path, ignore_hcas=ignore_hcas)
    thresholds = effective_config(site).thresholds

    path = store_path(history_path, no_history, sysfs_root=sysfs_root)
    if path is None:
        raise UsageFailure(
            "watch needs a history store (--history PATH; not --no-history or "
            "IBDIAG_HISTORY=off; another --sysfs tree than /sys needs one named)"
        )
    ignored = thresholds.ignores if thresholds.ignore_hcas else None
    watcher = Watcher(path, interval, sysfs_root, procfs_root, quiet, ignored)
    try:
        with _Stopper() as stopper:
            try:
                watcher.run(stopper, count)
            finally:
                watcher.close()  # still under the handlers: a second signal cannot cut it
    except KeyboardInterrupt:  # a signal before the handlers were in place (main's mapping)
        watcher.close()
    return 0


class Stopping(Protocol):
    """What tells the loop to stop: a flag read between passes, and a sleep it cuts short."""

    @property
    def stopped(self) -> bool: ...

    def wait(self, seconds: float) -> None: ...


class Watcher:
    """The loop's state: each port's previous sample, what is waiting to be written, the store."""

    def __init__(
        self,
        path: str,
        interval: float,
        sysfs_root: str,
        procfs_root: str,
        quiet: bool,
        ignored: Optional[Callable[[str], bool]] = None,
    ) -> None:
        from ibdiag.history.sampler import read_ports
        from ibdiag.history.store import BUSY_S, HEARTBEAT_S

        self._read_ports = read_ports
        self.ignored = ignored  # devices never read (ignore_hcas): Thresholds.ignores
        self._heartbeat_s = HEARTBEAT_S
        self.path = path
        self.interval = interval
        self.busy_s = min(interval, BUSY_S)
        self.sysfs_root = sysfs_root
        self.procfs_root = procfs_root
        self.quiet = quiet
        # key -> (the last sample seen and queued, the monotonic time it was queued)
        self.seen: Dict[PortKey, Tuple[PortSample, float]] = {}
        self.gone: Set[PortKey] = set()
        self.pending: List[PortSample] = []
        self.written: Dict[PortKey, PortSample] = {}  # each port's last sample in the store
        self.dropped = 0
        self.failures = 0
        self._retry_at = 0.0
        self.passes = 0
        self.store: Optional[HistoryStore] = None
        self._inode: Optional[Tuple[int, int]] = None
        self._said: Optional[str] = None

    # -- the loop --------------------------------------------------------------------------

    def run(self, stopper: Stopping, count: Optional[int]) -> None:
        tick = time.monotonic()
        while not stopper.stopped:
            self.one_pass(time.monotonic())
            if count is not None and self.passes >= count:
                return
            tick += self.interval
            now = time.monotonic()
            if now >= tick:  # overran: skip the missed ticks, keep the phase
                tick += ((now - tick) // self.interval + 1) * self.interval
            stopper.wait(tick - now)

    def one_pass(self, mono: float) -> None:
        samples = self._read_ports(self.sysfs_root, self.procfs_root, ignored=self.ignored)
        first = self.passes == 0
        self.passes += 1
        present = set()
        for sample in samples:
            key = sample.key
            present.add(key)
            previous = self.seen.get(key)
            if previous is None:
                self._queue(sample, mono)
                if not first and not self.quiet:
                    self._say(sample, "appeared", _describe(sample))
                continue
            last, queued_at = previous
            if key in self.gone:
                self.gone.discard(key)
                if not self.quiet:
                    self._say(sample, "back", _describe(sample))
            if sample.differs(last):
                self._queue(sample, mono)
                if not self.quiet:
                    for change in _changes(last, sample):
                        self._say(sample, change)
            elif (
                mono - queued_at >= self._heartbeat_s
                or (sample.at - last.at).total_seconds() >= self._heartbeat_s
            ):
                self._queue(sample, mono)
        for key in self.seen.keys() - present - self.gone:
            self.gone.add(key)
            if not self.quiet:
                self._say(self.seen[key][0], "gone", "(not in this reading)")
        if first and not self.quiet:
            devices = len({sample.device for sample in samples})
            self._print(
                f"ibdiag watch: {len(samples)} ports on {devices} HCAs every "
                f"{self.interval:g} s into {self.path}"
            )
        if self.pending and mono >= self._retry_at:
            self._write(mono)

    def _queue(self, sample: PortSample, mono: float) -> None:
        self.seen[sample.key] = (sample, mono)
        self.pending.append(sample)
        if len(self.pending) > MAX_PENDING:
            extra = len(self.pending) - MAX_PENDING
            del self.pending[:extra]
            self.dropped += extra

    # -- the store -------------------------------------------------------------------------

    def _write(self, mono: float) -> None:
        import sqlite3

        from ibdiag.history.store import HistoryError

        try:
            self.store = self._open()
            self.store.record(self.pending)
        except (HistoryError, sqlite3.Error, OSError) as exc:
            self._complain(str(exc) or type(exc).__name__)
            self._drop_store()
            self.failures += 1
            wait = min(RETRY_MAX_S, self.interval * 2 ** min(self.failures - 1, 30))
            self._retry_at = mono + wait - self.interval / 2  # due on the pass at that tick
            return
        for sample in self.pending:
            self.written[sample.key] = sample
        self.pending = []
        self.failures = 0
        self._retry_at = 0.0
        if self._said is not None:
            lost = f" ({self.dropped} samples dropped meanwhile)" if self.dropped else ""
            _err(f"ibdiag watch: history store {self.path} written again{lost}")
            self._said = None
            self.dropped = 0

    def _open(self) -> HistoryStore:
        """Open the store, or reopen it when its file was replaced or removed since (moved
        aside as corrupt by another writer, deleted by hand): writing on into the old inode
        would record into nothing anybody reads."""
        from ibdiag.history.store import HistoryStore

        replaced = self.store is not None and self._inode != _inode(self.path)
        if replaced:
            self._drop_store()
        if self.store is None:
            before = self._inode
            self.store = HistoryStore(self.path, busy_s=self.busy_s)
            self._inode = _inode(self.path)
            for note in self.store.notes:
                _err(f"ibdiag watch: {note}")
            # ``replaced`` too: a file removed and made anew may get the freed inode number
            if replaced or (before is not None and (self._inode != before or self.store.notes)):
                # a new file knows none of the ports: their last written samples go first, so
                # that a port going down now is seen leaving ACTIVE there (an outage opens only
                # after an ACTIVE sample on the same boot)
                self.pending = [*self.written.values(), *self.pending]
        return self.store

    def _drop_store(self) -> None:
        if self.store is not None:
            import sqlite3

            try:
                self.store.close()
            except sqlite3.Error:
                pass  # a connection that cannot close is gone anyway
        self.store = None

    def _complain(self, why: str) -> None:
        line = f"ibdiag watch: {why}; {len(self.pending)} samples kept, to be written later"
        if why != self._said:
            _err(line)
            self._said = why

    def close(self) -> None:
        """Last words: try the pending samples once more, then close the store."""
        if self.pending:
            self._write(time.monotonic())
        self._drop_store()

    # -- what is printed -------------------------------------------------------------------

    def _say(self, sample: PortSample, what: str, detail: str = "") -> None:
        from ibdiag.render.inert import inert

        stamp = _stamp(sample.at)
        tail = f" {detail}" if detail else ""
        port = f"{inert(sample.device)}:{sample.port} ({inert(sample.node_guid)})"
        self._print(f"{stamp} {port} {what}{tail}")

    def _print(self, line: str) -> None:
        """A line on stdout; a stdout that is gone (``watch | head``, a closed terminal) only
        ends the printing, never the monitor."""
        try:
            click.echo(line)
        except OSError:
            self.quiet = True
            _silence(1)


def _changes(last: PortSample, now: PortSample) -> List[str]:
    """What moved between two samples of a port, as words: a state change, a rate or width
    change on a link that stayed ACTIVE (a lane lost), a rename, a link_downed change, a new
    boot (the error counters are recorded, not printed)."""
    changes = []
    if (last.state, last.phys_state) != (now.state, now.phys_state):
        changes.append(f"{_state(last)} -> {_state(now)}")
    elif now.is_down is False and (last.rate_gbps, last.width) != (now.rate_gbps, now.width):
        changes.append(f"rate {_rate(last)} -> {_rate(now)}")
    if last.device != now.device:
        changes.append(f"renamed from {last.device}")
    if (
        last.link_downed is not None
        and now.link_downed is not None
        and now.link_downed != last.link_downed
    ):
        changes.append(f"link_downed {last.link_downed} -> {now.link_downed}")
    if last.boot_id != now.boot_id:
        changes.append("boot id changed")
    return changes


def _state(sample: PortSample) -> str:
    if sample.state is None:
        return "unreadable"
    name = STATES.get(sample.state, str(sample.state))
    if sample.phys_state is None or sample.phys_state == 5:
        return name
    return f"{name} ({PHYS_STATES.get(sample.phys_state, sample.phys_state)})"


def _rate(sample: PortSample) -> str:
    if sample.rate_gbps is None:
        return "unreadable"
    return f"{sample.rate_gbps:g} Gb/s" + (f" ({sample.width})" if sample.width else "")


def _describe(sample: PortSample) -> str:
    return f"{_state(sample)} {_rate(sample)}"


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _inode(path: str) -> Optional[Tuple[int, int]]:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _err(line: str) -> None:
    from ibdiag.render.inert import inert

    try:
        click.echo(inert(line), err=True)
    except OSError:
        _silence(2)


def _silence(fd: int) -> None:
    """Point a standard stream whose reader is gone at /dev/null, so that whatever still
    flushes to it (Python's own exit) writes into nothing instead of failing."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except OSError:
        pass  # nothing better to do: the stream is already gone


class BackgroundMonitor:
    """``ibdiag serve``'s sampler: a ``Watcher`` (quiet: its errors still go to stderr) in a
    daemon thread beside the server, stopped by ``stop`` after the write in progress. A sysfs
    read that hangs holds this thread only, never a scrape."""

    def __init__(
        self,
        path: str,
        interval: float,
        sysfs_root: str,
        procfs_root: str,
        ignored: Optional[Callable[[str], bool]] = None,
    ) -> None:
        import threading

        self.watcher = Watcher(path, interval, sysfs_root, procfs_root, True, ignored)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ibdiag-monitor", daemon=True)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def wait(self, seconds: float) -> None:
        self._stop.wait(max(0.0, seconds))

    def start(self) -> None:
        self._thread.start()

    def stop(self, within: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout=within)

    def _run(self) -> None:
        try:
            self.watcher.run(self, None)
        finally:
            self.watcher.close()


class _Stopper:
    """SIGTERM, SIGINT and SIGHUP as a flag the loop reads between passes - never an exception
    in the middle of a write - and a sleep that a signal cuts short (the signal module's wakeup
    fd on a pipe): the monitor stops within the write in progress, whatever the interval."""

    def __init__(self) -> None:
        self.stopped = False
        self._previous: Dict[int, Any] = {}
        self._pipe: Optional[Tuple[int, int]] = None
        self._old_fd = -1

    def __enter__(self) -> _Stopper:
        read, write = os.pipe()
        os.set_blocking(write, False)
        os.set_blocking(read, False)
        self._pipe = (read, write)
        self._old_fd = signal.set_wakeup_fd(write)
        for number in _STOPS:
            self._previous[number] = signal.signal(number, self._stop)
        return self

    def __exit__(self, *exc: object) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        signal.set_wakeup_fd(self._old_fd)
        if self._pipe is not None:
            for fd in self._pipe:
                os.close(fd)

    def _stop(self, signum: int, frame: object) -> None:
        self.stopped = True

    def wait(self, seconds: float) -> None:
        """Sleep ``seconds``, or until a stopping signal arrives (another one - SIGCHLD,
        SIGWINCH - wakes the select too, and the sleep goes on to its end)."""
        deadline = time.monotonic() + seconds
        while not self.stopped and self._pipe is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            readable, _, _ = select.select([self._pipe[0]], [], [], left)
            if readable:
                try:
                    os.read(self._pipe[0], 512)
                except OSError:
                    pass  # drained meanwhile
