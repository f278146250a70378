"""``ibdiag watch`` as it runs on a node: a real process sampling a fake sysfs tree every 0.1 s
into a real store, its ports stepped through outages by rewriting their files (atomically, as
the kernel's attributes change), each step awaited in the store with a deadline. Slow: each test
starts the monitor as its own process."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Callable, Iterator, List, TypeVar

import pytest
from sysfs_builder import mlx5_node, write_node

from ibdiag.facts.history import Outage
from ibdiag.history.store import HistoryStore

T = TypeVar("T")

GUIDS = ("b859:9f03:00d7:a3bc", "b859:9f03:00d7:a3bd")
GUID0, GUID1 = "0xb8599f0300d7a3bc", "0xb8599f0300d7a3bd"
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
DEADLINE_S = 20.0  # generous: 2 CPUs shared; each wait ends as soon as its condition holds
INTERVAL = "0.1"
DOWN = {"state": "1: DOWN", "phys_state": "2: Polling"}
UP = {"state": "4: ACTIVE", "phys_state": "5: LinkUp"}


class Node:
    """A fake node (two HCAs, one port each) and the monitor's paths."""

    def __init__(self, tmp_path) -> None:
        hcas = mlx5_node(2)
        for hca, guid in zip(hcas, GUIDS):
            hca.node_guid = guid
        self.sys = str(tmp_path / "sys")
        write_node(self.sys, hcas)
        self.proc = tmp_path / "proc"
        (self.proc / "sys" / "kernel" / "random").mkdir(parents=True)
        (self.proc / "sys" / "kernel" / "random" / "boot_id").write_text("boot-1\n")
        self.db = str(tmp_path / "h.db")
        self.out = tmp_path / "watch.out"
        self.err = tmp_path / "watch.err"

    def port(self, device: str) -> str:
        return os.path.join(self.sys, "class", "infiniband", device, "ports", "1")

    def set(self, device: str, **files: str) -> None:
        """Rewrite the port's files (names relative to ports/1), each atomically."""
        self.write(self.port(device), **files)

    @staticmethod
    def write(port: str, **files: str) -> None:
        for name, text in files.items():
            path = os.path.join(port, name)
            temporary = f"{path}.new"
            with open(temporary, "w") as handle:
                handle.write(text + "\n")
            os.replace(temporary, path)

    def rename(self, old: str, new: str) -> None:
        """The device comes back under another name (a driver reload renumbering it)."""
        link = os.path.join(self.sys, "class", "infiniband", old)
        real = os.path.realpath(link)
        moved = os.path.join(os.path.dirname(real), new)
        os.rename(real, moved)
        os.symlink(os.path.relpath(moved, os.path.dirname(link)), link.replace(old, new))
        os.remove(link)

    def outages(self, guid: str = GUID0) -> List[Outage]:
        with HistoryStore(self.db, busy_s=5) as store:
            return store.outages([guid], since=EPOCH)

    def last_samples(self):
        with HistoryStore(self.db, busy_s=5) as store:
            return store.last_samples()


def until(what: str, condition: Callable[[], T]) -> T:
    """``condition()``'s first true value, polled until DEADLINE_S; else the test fails."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {DEADLINE_S:g} s waiting for {what}")
        time.sleep(0.02)


@contextmanager
def watching(node: Node, *extra: str) -> Iterator[subprocess.Popen]:
    argv = [sys.executable, "-m", "ibdiag", "watch", "--interval", INTERVAL, "--history",
            node.db, "--sysfs", node.sys, "--procfs", str(node.proc), *extra]  # fmt: skip
    with open(node.out, "wb") as out, open(node.err, "wb") as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def stop(proc: subprocess.Popen, how: int = signal.SIGTERM) -> int:
    proc.send_signal(how)
    return proc.wait(timeout=10)


def started(node: Node) -> bool:
    return os.path.exists(node.db) and len(node.last_samples()) == 2


def closed(node: Node, count: int) -> Callable[[], List[Outage]]:
    def check() -> List[Outage]:
        seen = [o for o in node.outages() if o.source == "sample" and o.end is not None]
        return seen if len(seen) >= count else []

    return check


def test_flaps_a_counted_outage_and_a_rename_all_land_in_the_store(tmp_path):
    node = Node(tmp_path)
    with watching(node) as proc:
        until("the first sample of both ports", lambda: started(node))
        windows = []
        for flap in range(1, 4):
            went_down = datetime.now(timezone.utc)
            node.set("mlx5_0", **DOWN)
            until(
                f"outage {flap} to open",
                lambda: any(o.end is None and o.source == "sample" for o in node.outages()),
            )
            came_up = datetime.now(timezone.utc)
            node.set("mlx5_0", **UP)
            until(f"outage {flap} to close", closed(node, flap))
            windows.append((went_down, came_up, datetime.now(timezone.utc)))

        bumped = datetime.now(timezone.utc)
        node.set("mlx5_0", **{"counters/link_downed": "1"})  # down and up between two samples
        counted = until(
            "the counter outage",
            lambda: [o for o in node.outages() if o.source == "counter"],
        )

        node.rename("mlx5_0", "mlx5_5")
        until(
            "the renamed device's sample",
            lambda: any(s.device == "mlx5_5" and s.node_guid == GUID0 for s in node.last_samples()),
        )
        assert stop(proc) == 0

    outages = node.outages()
    flaps = [o for o in outages if o.source == "sample"]
    assert len(flaps) == 3 and len(outages) == 4  # the rename opened nothing
    for outage, (went_down, came_up, seen_up) in zip(flaps, windows):
        assert (outage.port, outage.device, outage.bounded, outage.boot_id) == (
            1, "mlx5_0", False, "boot-1",
        )  # fmt: skip
        # seen within a pass of each change (the deadline's slack for a loaded machine)
        assert went_down <= outage.start <= came_up
        assert came_up <= outage.end <= seen_up
        assert 0 < outage.down_s(seen_up) < DEADLINE_S
    (counter,) = counted
    assert counter.bounded and counter.downs == 1 and counter.end is not None
    # from the last sample before the rise to the first after it
    assert windows[-1][1] <= counter.start <= bumped <= counter.end
    assert (counter.end - counter.start).total_seconds() < DEADLINE_S
    assert node.outages(GUID1) == []
    by_guid = {s.node_guid: s for s in node.last_samples()}
    assert set(by_guid) == {GUID0, GUID1}  # no third port: the renamed one continues
    assert (by_guid[GUID0].device, by_guid[GUID0].link_downed) == ("mlx5_5", 1)

    printed = node.out.read_text()
    assert printed.count("mlx5_0:1 (0xb8599f0300d7a3bc) ACTIVE -> DOWN (Polling)") == 3
    assert printed.count("mlx5_0:1 (0xb8599f0300d7a3bc) DOWN (Polling) -> ACTIVE") == 3
    assert "mlx5_0:1 (0xb8599f0300d7a3bc) link_downed 0 -> 1" in printed
    assert "mlx5_5:1 (0xb8599f0300d7a3bc) renamed from mlx5_0" in printed
    assert "mlx5_1" not in printed.split("\n", 1)[1]  # the steady port: not a word
    assert node.err.read_text() == ""


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stopping_signal_ends_it_cleanly(tmp_path, how):
    node = Node(tmp_path)
    with watching(node, "--interval", "30") as proc:  # asleep for 30 s: the signal wakes it
        until("the first sample", lambda: started(node))
        began = time.monotonic()
        assert stop(proc, how) == 0
        assert time.monotonic() - began < 5
    assert node.err.read_text() == ""
    assert node.out.read_text().startswith("ibdiag watch: 2 ports on 2 HCAs every 30 s into")


def test_a_locked_store_delays_the_record_but_loses_nothing(tmp_path):
    node = Node(tmp_path)
    with watching(node) as proc:
        until("the first sample", lambda: started(node))
        blocker = sqlite3.connect(node.db, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # another writer holds the lock
        try:
            went_down = datetime.now(timezone.utc)
            node.set("mlx5_0", **DOWN)
            until("the transition printed", lambda: "-> DOWN" in node.out.read_text())
            node.set("mlx5_0", **UP)
            until("the return printed", lambda: "-> ACTIVE" in node.out.read_text())
            until("one complaint", lambda: "locked by another writer" in node.err.read_text())
            released = datetime.now(timezone.utc)
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        (outage,) = until("the kept samples written", closed(node, 1))
        assert went_down <= outage.start < outage.end <= released  # their own times
        until("the recovery said", lambda: "written again" in node.err.read_text())
        assert stop(proc) == 0
    complaints = node.err.read_text().splitlines()
    assert len([line for line in complaints if "locked by another writer" in line]) == 1, complaints


def test_a_store_removed_underneath_is_reopened(tmp_path):
    node = Node(tmp_path)
    with watching(node) as proc:
        until("the first sample", lambda: started(node))
        # The database last: once it is gone the monitor may open a new one at once, whose
        # -wal a later removal here would take from under it (its writes then unseen).
        for suffix in ("-wal", "-shm", ""):
            if os.path.exists(node.db + suffix):
                os.remove(node.db + suffix)
        node.set("mlx5_0", **DOWN)
        until("the outage in the new file", lambda: os.path.exists(node.db) and node.outages())
        assert stop(proc) == 0
    assert oct(os.stat(node.db).st_mode & 0o777) == "0o600"


def test_a_corrupt_store_is_moved_aside_said_and_started_afresh(tmp_path):
    node = Node(tmp_path)
    with open(node.db, "wb") as handle:
        handle.write(b"this is not an SQLite file" * 200)
    with watching(node) as proc:  # (opening the store here would move it aside first)
        until("the note", lambda: "was corrupt" in node.err.read_text())
        node.set("mlx5_1", **DOWN)
        until("the outage", lambda: node.outages(GUID1))
        assert stop(proc) == 0
    (said,) = node.err.read_text().splitlines()
    assert said.startswith(f"ibdiag watch: history store {node.db} was corrupt")
    assert [p.name for p in tmp_path.glob("h.db.corrupt-*")] != []


def test_a_port_that_vanishes_and_returns_is_said_once_each_way(tmp_path):
    node = Node(tmp_path)
    link = os.path.join(node.sys, "class", "infiniband", "mlx5_1")
    with watching(node) as proc:
        until("the first sample", lambda: started(node))
        target, port = os.readlink(link), os.path.realpath(node.port("mlx5_1"))
        os.remove(link)  # the driver let go of the device
        until("gone said", lambda: "gone" in node.out.read_text())
        node.write(port, **DOWN)
        os.symlink(target, link)
        until("the outage of the returned port", lambda: node.outages(GUID1))
        assert stop(proc) == 0
    printed = node.out.read_text()
    assert printed.count("mlx5_1:1 (0xb8599f0300d7a3bd) gone") == 1
    assert printed.count("mlx5_1:1 (0xb8599f0300d7a3bd) back DOWN (Polling)") == 1
    assert "mlx5_1:1 (0xb8599f0300d7a3bd) ACTIVE -> DOWN (Polling)" in printed


def test_a_reader_that_goes_away_stops_the_printing_not_the_monitor(tmp_path):
    node = Node(tmp_path)
    argv = [sys.executable, "-m", "ibdiag", "watch", "--interval", INTERVAL, "--history",
            node.db, "--sysfs", node.sys, "--procfs", str(node.proc)]  # fmt: skip
    with open(node.err, "wb") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err)
    try:
        proc.stdout.readline()  # the start line: it is running
        proc.stdout.close()  # as `ibdiag watch | head -1` does
        for flap in range(1, 3):  # the first line after the close fails, the second is not tried
            node.set("mlx5_0", **DOWN)
            until("the outage open", lambda: any(o.end is None for o in node.outages()))
            node.set("mlx5_0", **UP)
            until("the outage closed", closed(node, flap))
        assert stop(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert node.err.read_text() == ""


def test_count_stops_after_that_many_passes(tmp_path):
    node = Node(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "ibdiag", "watch", "--interval", "0.05", "--count", "3", "-q",
         "--history", node.db, "--sysfs", node.sys, "--procfs", str(node.proc)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert {s.node_guid for s in node.last_samples()} == {GUID0, GUID1}


@pytest.mark.parametrize("how", ["flag", "config"])
def test_an_ignored_hca_is_never_sampled(tmp_path, how):
    node = Node(tmp_path)
    if how == "flag":
        extra = ["--ignore-hca", "mlx5_1"]
    else:
        config = tmp_path / "site.toml"
        config.write_text('ignore_hcas = ["mlx5_1"]\n')
        extra = ["--config", str(config)]
    done = subprocess.run(
        [sys.executable, "-m", "ibdiag", "watch", "--interval", "0.05", "--count", "2", "-q",
         "--history", node.db, "--sysfs", node.sys, "--procfs", str(node.proc), *extra],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (0, "")
    assert {s.node_guid for s in node.last_samples()} == {GUID0}


def test_a_bad_config_is_one_line_and_exit_3(run_cli, tmp_path):
    node = Node(tmp_path)
    config = tmp_path / "site.toml"
    config.write_text("ignore_hcas = 3\n")
    result = run_cli("watch", "--sysfs", node.sys, "--history", node.db, "--config", str(config))
    assert result.exit_code == 3 and result.stdout == ""
    assert result.stderr.startswith("ibdiag: error: ") and len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    "args, env",
    [(["--no-history"], {}), ([], {"IBDIAG_HISTORY": "off"})],
)
def test_without_a_store_it_refuses_in_one_line(run_cli, tmp_path, args, env):
    node = Node(tmp_path)
    result = run_cli("watch", "--sysfs", node.sys, *args, env=env)
    assert result.exit_code == 3
    assert result.stdout == ""
    assert result.stderr.startswith("ibdiag: error: watch needs a history store")
    assert len(result.stderr.splitlines()) == 1


def test_an_interval_under_the_floor_is_a_usage_error(run_cli, tmp_path):
    result = run_cli("watch", "--interval", "0.01", "--history", str(tmp_path / "h.db"))
    assert result.exit_code == 3 and "--interval" in result.stderr
    assert not os.path.exists(tmp_path / "h.db")


UNIT = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    "contrib",
    "systemd",
    "ibdiag-watch.service",
)


def test_the_systemd_unit_verifies_clean(tmp_path):
    """systemd's own parser finds nothing to say about the unit (an unknown key or a bad value
    is only a warning there: any line naming the unit fails this)."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail(
            "systemd-analyze is needed to verify contrib/systemd/ibdiag-watch.service and is "
            "not installed: run `apt-get install -y systemd` (Debian/Ubuntu)"
        )
    with open(UNIT) as handle:
        text = handle.read()
    assert "\nExecStart=/usr/bin/ibdiag watch --quiet\n" in text
    # verify wants the command to exist: the same unit, run by a binary that is there
    copy = tmp_path / "ibdiag-watch.service"
    copy.write_text(text.replace("ExecStart=/usr/bin/ibdiag ", "ExecStart=/bin/true "))
    done = subprocess.run(
        [analyze, "verify", str(copy)], capture_output=True, text=True, timeout=120
    )
    said = [line for line in (done.stdout + done.stderr).splitlines() if "ibdiag" in line]
    assert (done.returncode, said) == (0, [])


def test_the_systemd_unit_can_do_its_job():
    """Hardened, yet it may read /sys and /proc and write its state directory, 0700."""
    with open(UNIT) as handle:
        lines = {
            line.partition("=")[0]: line.partition("=")[2]
            for line in handle.read().splitlines()
            if "=" in line and not line.startswith("#")
        }
    assert lines["Type"] == "simple" and lines["Restart"] == "on-failure"
    assert (lines["StateDirectory"], lines["StateDirectoryMode"]) == ("ibdiag", "0700")
    assert lines["ProtectSystem"] == "strict"  # all read-only but the StateDirectory
    for flag in ("NoNewPrivileges", "PrivateTmp", "ProtectHome"):
        assert lines[flag] == "yes", flag
    assert lines["CPUQuota"].endswith("%") and 0 < float(lines["CPUQuota"][:-1]) <= 10
    assert int(lines["Nice"]) > 0
    assert "InaccessiblePaths" not in lines and "ReadOnlyPaths" not in lines


class FakeClock:
    """The monotonic clock of ``ibdiag.cli.watch``, moved only by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


class FakeStopper:
    """``_Stopper``'s part the loop uses: waiting moves the fake clock on."""

    stopped = False

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.waits: List[float] = []

    def wait(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.clock.now += max(0.0, seconds)


def test_passes_keep_to_the_tick_and_skip_the_ones_an_overrun_missed(tmp_path, monkeypatch):
    from ibdiag.cli import watch

    clock = FakeClock()
    monkeypatch.setattr(watch.time, "monotonic", clock.monotonic)
    watcher = watch.Watcher(str(tmp_path / "h.db"), 1.0, str(tmp_path), str(tmp_path), True)
    costs = iter([0.2, 0.3, 2.5, 0.1, 1.0, 0.4])  # the third pass overran 2 ticks and a half
    starts: List[float] = []

    def one_pass(mono: float) -> None:
        starts.append(mono - 1000.0)
        watcher.passes += 1
        clock.now += next(costs)

    monkeypatch.setattr(watcher, "one_pass", one_pass)
    watcher.run(FakeStopper(clock), count=6)  # type: ignore[arg-type]
    # on the grid (no drift from the passes' own cost); ticks 3 and 4 skipped; a pass that
    # took exactly one interval starts the next one on the following tick
    assert [round(start, 6) for start in starts] == [0, 1, 2, 5, 6, 8]


def test_an_unchanged_port_is_written_again_after_the_heartbeat(tmp_path, monkeypatch):
    from ibdiag.cli import watch
    from ibdiag.history.store import HEARTBEAT_S

    node = Node(tmp_path)
    watcher = watch.Watcher(node.db, 1.0, node.sys, str(node.proc), quiet=True)
    written: List[int] = []
    real = HistoryStore.record

    def record(store, samples):
        written.append(len(samples))
        return real(store, samples)

    monkeypatch.setattr(HistoryStore, "record", record)
    watcher.one_pass(0.0)
    watcher.one_pass(1.0)
    watcher.one_pass(HEARTBEAT_S - 1)
    assert written == [2]  # the first pass only: nothing changed since
    watcher.one_pass(HEARTBEAT_S + 0.5)  # monotonic: 300 s since they were written
    assert written == [2, 2]
    node.set("mlx5_1", **{"counters/symbol_error": "3"})
    watcher.one_pass(HEARTBEAT_S + 1.5)
    assert written == [2, 2, 1]
    watcher.close()


def test_a_store_made_anew_on_the_freed_inode_number_still_gets_the_ports_first(
    tmp_path, monkeypatch
):
    """A store file removed and made anew may get the inode number the old one freed: the
    monitor reopens it all the same and writes each port's last sample there first, so a port
    going down next opens an outage (it once wrote the DOWN sample alone: no outage, ever)."""
    from ibdiag.cli import watch

    node = Node(tmp_path)
    monkeypatch.setattr(watch, "_inode", lambda path: (7, 7) if os.path.exists(path) else None)
    watcher = watch.Watcher(node.db, 1.0, node.sys, str(node.proc), quiet=True)
    watcher.one_pass(0.0)
    for suffix in ("-wal", "-shm", ""):
        if os.path.exists(node.db + suffix):
            os.remove(node.db + suffix)
    node.set("mlx5_0", **DOWN)
    watcher.one_pass(1.0)
    assert len(node.last_samples()) == 2
    watcher.one_pass(2.0)
    node.set("mlx5_0", **UP)
    watcher.one_pass(3.0)
    watcher.close()
    assert [o.end is not None for o in node.outages()] == [True]


def test_what_is_printed_of_a_change():
    from ibdiag.cli.watch import _changes
    from ibdiag.history.timeline import PortSample

    at = datetime(2026, 11, 27, 16, 0, 1, tzinfo=timezone.utc)
    up = PortSample(GUID0, 1, "mlx5_0", at, "boot-1", 4, 5, 400.0, "4X", 0, 0, 0)
    assert _changes(up, up) == []
    assert _changes(up, up._replace(symbol_error=9, link_error_recovery=1)) == []
    assert _changes(up, up._replace(state=1, phys_state=2, rate_gbps=None)) == [
        "ACTIVE -> DOWN (Polling)"
    ]
    assert _changes(up, up._replace(state=None)) == ["ACTIVE -> unreadable"]
    assert _changes(up, up._replace(rate_gbps=200.0, width="2X")) == [
        "rate 400 Gb/s (4X) -> 200 Gb/s (2X)"
    ]
    assert _changes(up, up._replace(device="mlx5_5", link_downed=2, boot_id="boot-2")) == [
        "renamed from mlx5_0",
        "link_downed 0 -> 2",
        "boot id changed",
    ]
