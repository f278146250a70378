"""The command runner leaves nothing behind: no process, no file descriptor, no zombie.

Issue 12, items 9 and 13. A command's child that calls ``setsid`` leaves the process group the
runner kills; a grandchild whose parent exits is re-parented out of the command's tree; an
``ibdiag`` killed with SIGKILL runs no clean-up code at all. Each case is driven here by stub
scripts (``setsid sleep <mark>``, double forks, hangs) and checked in /proc: no process whose
argv carries the test's marker may outlive the run, and a thousand runs (failing execs and
timeouts) leave the process's open descriptors and children where they were.

Bounds are generous (a loaded 2-core CI machine) but each still separates "killed" from
"waited for it" or "left it running".
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import List

import pytest
from conftest import REPO
from stubs import assert_no_strays, marker, processes_with

from ibdiag.runner.command_runner import Runner

REPO = Path(REPO)


def open_fds() -> List[int]:
    return sorted(int(fd) for fd in os.listdir("/proc/self/fd"))


def children() -> List[str]:
    """This process's children, zombies included: 'pid state comm' per child."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                stat = handle.read().decode(errors="replace")
        except OSError:
            continue
        comm_end = stat.rindex(")")
        fields = stat[comm_end + 2 :].split()
        if int(fields[1]) == os.getpid():
            found.append(f"{pid} {fields[0]} {stat[stat.index('(') + 1 : comm_end]}")
    return found


def wait_until(predicate, within: float = 5.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def settled_children(before: List[str], within: float = 5.0) -> List[str]:
    """Children beyond ``before`` that are still there after ``within`` seconds."""
    known = {line.split()[0] for line in before}

    def extra() -> List[str]:
        return [line for line in children() if line.split()[0] not in known]

    wait_until(lambda: not extra(), within)
    return extra()


# -- item 9: processes that escape the process group ------------------------------------------


def escape(mark: str, ready: Path, quiet: bool = False, orphan: bool = False) -> str:
    """Shell lines that start ``sleep <mark>`` in a session of its own (setsid), keeping our
    stdout unless ``quiet``, orphaned at once (a subshell that exits) when ``orphan``, and
    wait until it has left the session: the runner must then find and kill it."""
    redirect = " </dev/null >/dev/null 2>&1" if quiet else ""
    start = f"""setsid sh -c 'touch "$0"; exec sleep {mark}' "{ready}"{redirect} &"""
    if orphan:
        start = f"({start})"
    return f"""{start}\nwhile [ ! -e "{ready}" ]; do sleep 0.01; done\n"""


def test_a_setsid_grandchild_holding_stdout_is_killed_when_the_command_exits(
    tmp_path, stubs, stub_path
):
    mark = marker()
    stubs("escapes", escape(mark, tmp_path / "ready") + "echo done\n")
    run = Runner(timeout_s=30, path=stub_path).run(["escapes"])
    assert run.rc == 0 and not run.timed_out and run.stdout == "done\n", run
    # It holds our stdout pipe: without killing it the runner waits for its EOF.
    assert run.duration_s < 1.5, run
    assert_no_strays(mark)


def test_a_setsid_grandchild_with_its_own_output_is_killed_when_the_command_exits(
    tmp_path, stubs, stub_path
):
    mark = marker()
    stubs("escapes", escape(mark, tmp_path / "ready", quiet=True) + "echo done\n")
    run = Runner(timeout_s=30, path=stub_path).run(["escapes"])
    assert run.rc == 0 and run.stdout == "done\n", run
    assert_no_strays(mark)


def test_an_orphaned_setsid_grandchild_is_killed_at_the_timeout(tmp_path, stubs, stub_path):
    mark = marker()
    # The subshell exits at once: its setsid'd child is orphaned (re-parented) while the
    # command itself hangs.
    ready = tmp_path / "ready"
    stubs("orphans", escape(mark, ready, quiet=True, orphan=True) + f"sleep {mark}\n")
    run = Runner(timeout_s=0.5, path=stub_path).run(["orphans"])
    assert run.timed_out and run.rc is None, run
    assert run.duration_s < 3.0, run
    assert_no_strays(mark)


def test_an_orphaned_setsid_grandchild_is_killed_when_the_command_exits(tmp_path, stubs, stub_path):
    mark = marker()
    stubs("orphans", escape(mark, tmp_path / "ready", quiet=True, orphan=True) + "echo done\n")
    run = Runner(timeout_s=30, path=stub_path).run(["orphans"])
    assert run.rc == 0 and run.stdout == "done\n", run
    assert_no_strays(mark)


def test_a_setsid_grandchild_costs_no_time_beyond_the_timeout(tmp_path, stubs, stub_path):
    """The issue's ~2.3 s per run even at --command-timeout 0.1: the runner waited for the
    output pipe a setsid'd grandchild held after the group was killed."""
    mark = marker()
    stubs("hangs", escape(mark, Path(f"{tmp_path}/ready-$1")) + f"sleep {mark}\n")
    runner = Runner(timeout_s=0.1, deadline_s=30, max_workers=4, path=stub_path)
    started = time.monotonic()
    runs = runner.run_all([["hangs", str(n)] for n in range(4)])
    elapsed = time.monotonic() - started
    for run in runs.values():
        assert run.timed_out and run.duration_s < 1.2, run
    assert elapsed < 2.0, f"4 commands at a 0.1 s timeout took {elapsed:.2f} s"
    assert_no_strays(mark)


def _python(code: str) -> List[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def test_sigkill_of_the_runner_leaves_no_command_nor_grandchild(tmp_path, stubs, stub_path):
    """SIGKILL runs no clean-up code in ibdiag: the commands must die without it."""
    mark = marker()
    stubs("hangs", f"touch '{tmp_path}'/started-$1\nsleep {mark} &\nsleep {mark}\n")
    stubs("escapes", f"touch '{tmp_path}/started-e'\nsetsid sleep {mark} &\nsleep {mark}\n")
    code = f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        from ibdiag.runner.command_runner import Runner
        runner = Runner(timeout_s=60, deadline_s=60, path={stub_path!r})
        runner.run_all([["hangs", "1"], ["hangs", "2"], ["escapes"]])
    """
    proc = subprocess.Popen(_python(code), stdin=subprocess.DEVNULL)
    try:
        started = [tmp_path / f"started-{n}" for n in ("1", "2", "e")]
        assert wait_until(lambda: all(p.exists() for p in started), 20), "never started"
        assert wait_until(lambda: len(processes_with(mark)) >= 6, 5), processes_with(mark)
    finally:
        proc.kill()
        proc.wait()
    assert_no_strays(mark)


def test_commands_still_running_when_the_interpreter_exits_are_killed(tmp_path, stubs, stub_path):
    """A command left running in a daemon thread (an interrupted hook's worker) at exit."""
    mark = marker()
    stubs("hangs", f"touch '{tmp_path}/started'\nsetsid sleep {mark} &\nsleep {mark}\n")
    code = f"""
        import sys, threading, time, os
        sys.path.insert(0, {str(REPO)!r})
        from ibdiag.runner.command_runner import Runner
        runner = Runner(timeout_s=60, deadline_s=60, path={stub_path!r})
        threading.Thread(target=runner.run, args=(["hangs"],), daemon=True).start()
        while not os.path.exists({str(tmp_path / "started")!r}):
            time.sleep(0.01)
        time.sleep(0.2)
        sys.exit(0)
    """
    proc = subprocess.run(_python(code), stdin=subprocess.DEVNULL, timeout=30)
    assert proc.returncode == 0
    assert_no_strays(mark)


def test_one_commands_cookie_never_matches_anothers():
    """Command 1's cookie is a prefix of command 12's: killing 1's tree must not touch 12."""
    from ibdiag.runner import proctree

    env = {**os.environ, proctree.COOKIE_VARIABLE: "123.456.12"}
    proc = subprocess.Popen(["sleep", "30"], env=env)
    try:
        assert wait_until(lambda: proctree.has_cookie(proc.pid, b"IBDIAG_RUNNER=123.456.12"))
        assert not proctree.has_cookie(proc.pid, b"IBDIAG_RUNNER=123.456.1")
        assert proctree.has_cookie(proc.pid, b"IBDIAG_RUNNER=123.456.", prefix=True)
        assert not proctree.has_cookie(proc.pid, b"IBDIAG_RUNNER=123.45", prefix=False)
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/<pid>/task: Linux")
@pytest.mark.parametrize("gone", [True, False])
def test_a_thread_that_exits_while_children_are_read_costs_no_scan_of_proc(monkeypatch, gone):
    """ibdiag's threads come and go (one per running command): a thread listed in
    /proc/<pid>/task that exits before its ``children`` file is read is skipped - scanning
    every process of the machine is only for a kernel without that file (the task there,
    its ``children`` file not)."""
    from ibdiag.runner import proctree

    me = os.getpid()
    ghost = "999999999"  # a thread id no task has: listed, then gone
    real_listdir = os.listdir
    listing = (lambda path: [*real_listdir(path), ghost]) if gone else real_listdir
    scans: List[int] = []
    monkeypatch.setattr(proctree.os, "listdir", lambda path: listing(path))
    monkeypatch.setattr(proctree, "_children_by_scan", lambda pid: scans.append(pid) or [-1])
    if not gone:  # a kernel without CONFIG_PROC_CHILDREN: no task has the file
        real_open = open

        def no_children_file(path, *args, **kwargs):
            if str(path).endswith("/children"):
                raise FileNotFoundError(path)
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr(proctree, "open", no_children_file, raising=False)
    proc = subprocess.Popen(["sleep", "30"])
    try:
        found = proctree.children(me)
    finally:
        proc.kill()
        proc.wait()
    if gone:
        assert scans == [] and proc.pid in found
    else:
        assert scans == [me] and found == [-1]


# -- item 13: nothing leaks, however often it fails --------------------------------------------


def test_a_failed_exec_leaks_no_descriptor_and_no_zombie(stubs, stub_path):
    stubs("no-shebang", "echo hi\n", shebang="")
    runner = Runner(path=stub_path)
    runner.run(["no-shebang"])  # warm up: imports, the first thread's resources
    fds, kids = open_fds(), children()
    for _ in range(20):
        run = runner.run(["no-shebang"])
        assert run.error and "Exec format error" in run.error, run
    assert open_fds() == fds
    assert settled_children(kids) == []


def test_500_failing_execs_and_500_timeouts_leave_no_descriptor_nor_child(stubs, stub_path):
    mark = marker()
    stubs("no-shebang", "echo hi\n", shebang="")
    stubs("bad-interpreter", "echo hi\n", shebang="#!/nonexistent/ibdiag-interpreter\n")
    stubs("hangs", f"setsid sleep {mark} &\nsleep {mark} &\nsleep {mark}\n")
    runner = Runner(timeout_s=0.05, deadline_s=600, max_workers=16, path=stub_path)
    runner.run_all([["no-shebang"], ["hangs", "warm-up"]])  # the pool's threads, imports
    assert_no_strays(mark)
    fds, kids = open_fds(), children()

    failing = [["no-shebang", str(n)] for n in range(250)]
    failing += [["bad-interpreter", str(n)] for n in range(250)]
    runs = runner.run_all(failing)
    assert len(runs) == 500
    for run in runs.values():
        assert run.error and run.error.startswith("cannot execute"), run

    runs = runner.run_all([["hangs", str(n)] for n in range(500)])
    assert len(runs) == 500
    for run in runs.values():
        assert run.timed_out and run.rc is None, run

    assert_no_strays(mark)
    assert settled_children(kids) == []
    assert open_fds() == fds


# -- item 9: a SIGKILLed collect's hidden temp files --------------------------------------------


def test_stale_hidden_temp_files_are_removed_once_old_enough(tmp_path):
    from ibdiag.write_files import remove_stale_temps

    old = time.time() - 7200
    stale_file = tmp_path / ".ibdiag-abc123.tmp"
    stale_file.write_text("half a report")
    stale_dir = tmp_path / ".ibdiag-node1-20240101T000000Z.x1y2.tmp"
    (stale_dir / "ibdiag-node1-20240101T000000Z").mkdir(parents=True)
    (stale_dir / "ibdiag-node1-20240101T000000Z" / "report.json").write_text("{}")
    fresh = tmp_path / ".ibdiag-fresh.tmp"  # a collect running right now
    fresh.write_text("being written")
    other = tmp_path / ".other-abc.tmp"
    other.write_text("not ours")
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "keep").write_text("keep")
    link = tmp_path / ".ibdiag-link.tmp"
    link.symlink_to(target)
    for path in (stale_file, stale_dir, other, link):
        os.utime(path, (old, old), follow_symlinks=False)

    removed = remove_stale_temps(str(tmp_path), max_age_s=3600)

    assert sorted(os.path.basename(p) for p in removed) == sorted(
        [stale_file.name, stale_dir.name, link.name]
    )
    assert not stale_file.exists() and not stale_dir.exists() and not os.path.lexists(link)
    assert fresh.exists() and other.exists()
    assert (target / "keep").read_text() == "keep"  # a link is removed, never followed
    assert remove_stale_temps(str(tmp_path / "no-such-dir")) == []


def test_the_next_collect_removes_a_sigkilled_collects_temp_directory(tmp_path, run_cli):
    from sysfs_builder import mlx5_node, write_node

    sys_root = tmp_path / "sys"
    write_node(str(sys_root), mlx5_node(1))
    out = tmp_path / "bundles"
    left = out / ".ibdiag-node1-20240101T000000Z.k1ll3d.tmp" / "ibdiag-node1-20240101T000000Z"
    left.mkdir(parents=True)
    (left / "report.json").write_text("{}")
    old = time.time() - 2 * 86400
    os.utime(left.parent, (old, old))
    result = run_cli(
        "collect", "--level", "quick", "--sysfs", str(sys_root), "-o", str(out), "--tarball"
    )
    assert result.exit_code == 0, result.stderr
    assert not left.parent.exists()
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_or_ctrl_c_of_ibdiag_kills_setsid_grandchildren(tmp_path, signum):
    """The CLI end to end: a stopped level-standard run leaves none of its tools' processes."""
    import stubs as S
    from sysfs_builder import mlx5_node, write_node

    mark = S.marker()
    sys_root = tmp_path / "sys"
    write_node(str(sys_root), mlx5_node(2))
    procfs = S.write_procfs(tmp_path / "proc", boot_time=time.time() - 3600)
    bin_dir = S.StubBin(tmp_path / "stubs")
    hang = f"touch '{tmp_path}/started'\nsetsid sleep {mark} &\nsleep {mark}\n"
    for tool in ("perfquery", "ethtool", "dmesg", "journalctl", "ibstat", "ibv_devinfo"):
        bin_dir.add(tool, hang)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ibdiag", "check", "--level", "standard", "--sysfs",
         str(sys_root), "--procfs", procfs, "--deadline", "60", "--command-timeout", "60"],
        env=bin_dir.env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, cwd=REPO,
    )  # fmt: skip
    try:
        assert wait_until(lambda: len(S.processes_with(mark)) >= 10, 30), S.processes_with(mark)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 3 and b"interrupted" in err, err
    assert S.wait_no_strays(mark) == []


@pytest.fixture
def stop_signal_raises():
    """SIGUSR1 raises KeyboardInterrupt, as ibdiag's SIGTERM handler does, for this test only."""

    def stop(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGUSR1, stop)
    yield signal.SIGUSR1
    signal.signal(signal.SIGUSR1, previous)


def _signal_a_thread_named(prefix: str, signum: int, when) -> threading.Thread:
    """Once ``when()`` holds, send ``signum`` to a thread whose name starts with ``prefix``
    (not to the process: the kernel would pick the main thread, which hides the defect)."""

    def send() -> None:
        assert wait_until(when, 10)
        for thread in threading.enumerate():
            if thread.name.startswith(prefix):
                signal.pthread_kill(thread.ident, signum)
                return

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    return sender


def test_a_stop_signal_delivered_to_a_worker_thread_stops_run_all_at_once(
    stubs, stub_path, stop_signal_raises
):
    """Slurm's SIGTERM goes to the process; the kernel may hand it to any thread. CPython then
    runs the handler in the main thread only when that thread wakes: parked in an untimed
    ``Future.result()`` it slept until the commands' 30 s timeout (the CI hang at 773f237)."""
    mark = marker()
    for name in ("hang1", "hang2", "hang3"):
        stubs(name, f"sleep {mark}\n")
    runner = Runner(timeout_s=30, deadline_s=60, path=stub_path)
    _signal_a_thread_named("ibdiag-run", stop_signal_raises,
                           lambda: len(processes_with(mark)) == 3)  # fmt: skip
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        runner.run_all([["hang1"], ["hang2"], ["hang3"]])
    assert time.monotonic() - started < 10, "the handler waited for the commands"
    assert_no_strays(mark)


@pytest.mark.parametrize("wait", ["result", "join"])
def test_interruptible_waits_let_a_signal_sent_to_the_awaited_thread_through(
    wait, stop_signal_raises
):
    from concurrent.futures import ThreadPoolExecutor

    from ibdiag.runner import interruptible

    release = threading.Event()
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="awaited")
    future = pool.submit(release.wait, 30)
    worker = next(t for t in threading.enumerate() if t.name.startswith("awaited"))
    started = time.monotonic()
    # Sent once the main thread is parked in the wait below.
    _signal_a_thread_named("awaited", stop_signal_raises, lambda: time.monotonic() > started + 0.5)
    try:
        with pytest.raises(KeyboardInterrupt):
            interruptible.result(future) if wait == "result" else interruptible.join(worker)
        assert time.monotonic() - started < 5
    finally:
        release.set()
        pool.shutdown(wait=True)


def test_interruptible_join_returns_at_its_timeout():
    from ibdiag.runner import interruptible

    release = threading.Event()
    worker = threading.Thread(target=release.wait, args=(30,), daemon=True)
    worker.start()
    started = time.monotonic()
    interruptible.join(worker, 0.3)
    waited = time.monotonic() - started
    release.set()
    assert 0.3 <= waited < 3, waited


def test_level_standard_at_a_tenth_of_a_second_kills_setsid_grandchildren_at_once(
    tmp_path, run_cli, monkeypatch
):
    """The issue's scenario: every tool leaves a setsid'd child and hangs; at --deadline 1
    --command-timeout 0.1 each command cost ~2.3 s and the children stayed behind."""
    import json

    import stubs as S
    from sysfs_builder import mlx5_node, write_node

    mark = S.marker()
    sys_root = tmp_path / "sys"
    write_node(str(sys_root), mlx5_node(2))
    procfs = S.write_procfs(tmp_path / "proc", boot_time=time.time() - 3600)
    bin_dir = S.StubBin(tmp_path / "stubs")
    for tool in ("perfquery", "ethtool", "dmesg", "journalctl", "ibstat", "ibv_devinfo"):
        bin_dir.add(tool, escape(mark, Path(f"{tmp_path}/ready-{tool}-$$")) + f"sleep {mark}\n")
    monkeypatch.setenv("PATH", bin_dir.path)
    started = time.monotonic()
    result = run_cli(
        "check", "--level", "standard", "--json", "--sysfs", str(sys_root), "--procfs", procfs,
        "--deadline", "1", "--command-timeout", "0.1",
    )  # fmt: skip
    wall = time.monotonic() - started
    commands = json.loads(result.stdout)["snapshot"]["commands"]
    for key, command in commands.items():
        assert command["skipped"] or command["duration_s"] < 0.1 + 1.0, (key, command)
    assert wall < 1 + 4.0, f"{wall:.1f} s"
    assert_no_strays(mark)
