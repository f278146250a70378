"""The one way ibdiag runs an external command: ``Runner``, over ``subprocess``.

A stuck ``perfquery`` in a Slurm prolog must never hang the node's job starts, so every command:

- is an argv list, never a shell string (a ``str`` is a programming error: ``TypeError``);
- is found on PATH by the runner itself (so "not installed" and "not executable" are told apart
  before anything runs), then started with ``subprocess.Popen``: a session and process group of
  its own (``start_new_session``), stdin from /dev/null, ``LC_ALL=C`` and ``LANG=C``, stdout and
  stderr through pipes the runner reads itself, no descriptor of ibdiag's inherited;
- dies with ibdiag, and takes everything it started with it (``ibdiag.runner.proctree``): the
  child gets ``PR_SET_PDEATHSIG`` before exec, ibdiag is the child subreaper while commands run,
  every command's environment carries a cookie, and a sentinel process kills what carries this
  ibdiag's cookie when ibdiag is gone, SIGKILLed included;
- has a timeout of ``min(timeout_s, time left before the run's deadline)``; when it passes, the
  command's whole tree is SIGKILLed - its process group, its descendants, and the orphans it
  left that ibdiag adopted, ``setsid`` or not. The same happens to what is left when the command
  exits by itself, so nothing it started outlives it or holds its output pipe;
- keeps the tail of each stream: at most ``output_cap`` bytes (1 MiB) per stream, and per run at
  most ``total_output_cap`` (16 MiB) over all commands beyond a floor of ``output_floor`` (64
  KiB) every stream may keep - trimmed while it reads, so memory is bounded by the caps, not by
  what the tools print. A cut output is recorded (``stdout_truncated``/``stderr_truncated``);
- is recorded as a ``CommandRun`` whatever happened: not installed, permission denied, exec
  format error, timed out, killed by a signal (``rc`` -N), non-zero exit, or never started
  because the run's deadline had passed. Nothing raises out of ``run``/``run_all`` except
  ``TypeError`` for a non-argv argument (and ``KeyboardInterrupt``, after the running commands'
  trees have been killed).

Why ``subprocess`` and not ``sh`` (DESIGN §6: sh where it can do the job without reaching into
its internals). What sh 2.x offers for this is ``_bg=True``, ``_new_session=True``,
``_timeout``/``_timeout_signal``, ``_done`` and ``RunningCommand.kill_group()``; read in its
source, none of them gives the runner's guarantees:

- ``_timeout`` sends ``_timeout_signal`` to the command's pid only (``os.kill(pid)``), never to
  its group, and there is no option to make it do so;
- ``kill_group()`` looks the group up from the live pid (``os.getpgid(pid)``): once the command
  has exited - when its leftovers must be killed, from ``_done`` for instance - it raises
  instead; and neither kills a ``setsid`` child, which has left the group;
- after the command exits, ``wait()`` waits a hard-coded 2 s for its output pipes to close when
  anything still holds them, then stops reading: the ~2.3 s every run cost when a tool left a
  ``setsid`` child behind;
- a failed exec raises ``ForkException`` from the constructor without reaping the child or
  closing the parent's ends of its pipes (four descriptors per failure): only sh's internals
  (the pid in the raising frame) can clean that up;
- it forks with ``os.fork()`` in the calling thread, which CPython 3.12+ warns about in every
  multi-threaded process (the runner's pool is), and ``_bg=True`` makes the child ignore SIGHUP.

``subprocess`` reports a failed exec as an ``OSError`` with its errno in the parent, after
reaping the child and closing the pipes; ``start_new_session`` and ``preexec_fn`` (the prctl)
are its documented options; reading the pipes with ``selectors`` and waiting for the exit in a
thread blocked in ``waitid`` needs no poll loop.

``subprocess``, ``selectors`` and threads are imported with this module: it is only needed from
level standard on, and level quick (every Slurm prolog) never imports it.
"""

from __future__ import annotations

import atexit
import errno
import itertools
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from ibdiag.model import CommandRun, command_key
from ibdiag.roles import Role
from ibdiag.runner import interruptible, proctree

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_DEADLINE_S = 25.0  # well inside Slurm's 60 s HealthCheckTimeout
DEFAULT_MAX_WORKERS = 48  # they mostly wait (MADs, the kernel): an 8-HCA node (35) in one wave
OUTPUT_CAP_BYTES = 1 << 20  # per stream (stdout, stderr) of each command
TOTAL_OUTPUT_CAP_BYTES = 16 << 20  # per run, over all its commands, beyond the floors
OUTPUT_FLOOR_BYTES = 64 << 10  # every stream keeps at least this much of its tail

KILL_GRACE_S = 2.0  # after a kill: how long the output's EOF and the exit may take
_READ_CHUNK = 64 * 1024

_SEQUENCE = itertools.count(1)
_prefix: Dict[int, str] = {}


def _cookie_prefix() -> str:
    """What every command's cookie starts with: this process (pid and start time)."""
    pid = os.getpid()
    if pid not in _prefix:  # computed per process: a forked copy of ibdiag is another one
        _prefix[pid] = f"{pid}.{proctree.own_start_time()}."
    return _prefix[pid]


class OutputBudget:
    """What the commands of one run may keep beyond their floors, shared between them."""

    def __init__(self, total: int = TOTAL_OUTPUT_CAP_BYTES) -> None:
        if total < 0:
            raise ValueError(f"total_output_cap must not be negative, got {total}")
        self.left = int(total)
        self._lock = threading.Lock()

    def take(self, wanted: int) -> int:
        with self._lock:
            granted = max(0, min(wanted, self.left))
            self.left -= granted
            return granted


class _Tail:
    """A write-only sink that keeps the last bytes written to it, within the caps.

    It may keep ``floor`` bytes of its own and grow up to ``cap`` with what ``budget`` grants
    (no budget: up to ``cap``). It is trimmed on every write, so it never holds more than its
    limit plus one read. One byte more than the limit is kept: it tells whether the tail
    starts at the start of a line.
    """

    __slots__ = ("budget", "buf", "cap", "floor", "granted", "total")

    def __init__(self, cap: int, budget: Optional[OutputBudget] = None, floor: int = 0) -> None:
        self.cap = cap
        self.budget = budget
        self.floor = min(cap, floor) if budget is not None else cap
        self.granted = 0
        self.buf = bytearray()
        self.total = 0

    @property
    def limit(self) -> int:
        return min(self.cap, self.floor + self.granted)

    def write(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if not self.cap:
            return
        self.buf += chunk
        size = len(self.buf)
        if size > self.limit + 1 and self.limit < self.cap and self.budget is not None:
            self.granted += self.budget.take(min(self.cap, size) - self.limit)
        if size > self.limit + 1:
            del self.buf[: size - self.limit - 1]  # from the front: cheap for a bytearray

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def text(self) -> str:
        """The kept bytes decoded as UTF-8 (bad bytes replaced); a cut tail starts on a line."""
        limit = self.limit
        data = bytes(self.buf[-limit:]) if limit else b""
        if self.truncated and data:
            before = len(self.buf) - len(data) - 1  # the byte before the tail, if still kept
            if before < 0 or self.buf[before] != 10:
                newline = data.find(b"\n")
                if 0 <= newline < len(data) - 1:
                    data = data[newline + 1 :]  # cut inside a line: start at the next whole one
                else:
                    skip = 0  # one long line: at least do not start inside a UTF-8 sequence
                    while skip < min(3, len(data)) and 0x80 <= data[skip] <= 0xBF:
                        skip += 1
                    data = data[skip:]
        return data.decode("utf-8", errors="replace")


def _one_line(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _argv_list(argv: Sequence[str]) -> List[str]:
    """The argv as a list of str; a shell string (or anything not an argv) is a TypeError."""
    if isinstance(argv, (str, bytes, bytearray)):
        raise TypeError(
            f"a command must be an argv list, not a shell string: {argv!r}"
        )  # never a shell: a str here is a bug in the caller, not a fact about the node
    try:
        items = list(argv)
    except TypeError:
        raise TypeError(f"a command must be an argv list, got {type(argv).__name__}") from None
    out: List[str] = []
    for item in items:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, os.PathLike):
            out.append(os.fsdecode(os.fspath(item)))
        elif isinstance(item, int) and not isinstance(item, bool):
            out.append(str(item))  # perfquery -P 1
        else:
            raise TypeError(f"argv items must be str, got {type(item).__name__} in {items!r}")
    return out


def _exec_failure(exc: OSError) -> Dict[str, object]:
    """Classify the OSError of a failed exec (the program was found) as CommandRun fields."""
    strerror = exc.strerror or os.strerror(exc.errno or 0)
    if exc.errno in (errno.EACCES, errno.EPERM):
        return {"permission_denied": True}
    if exc.errno == errno.ENOENT:
        return {"error": f"cannot execute: {strerror} (its #! interpreter or loader is missing)"}
    if exc.errno == errno.ENOEXEC:
        why = "not a program for this machine, or a script without #!"
        return {"error": f"cannot execute: {strerror} ({why})"}
    return {"error": f"cannot execute: {strerror}"}


class _CtrlCDeferred:
    """Hold back a Ctrl-C (SIGINT) on the main thread while a command starts.

    A KeyboardInterrupt raised inside ``Popen`` after its fork would lose the child, and the
    command would outlive ibdiag. In the main thread (the only one Python raises it in), SIGINT
    is noted instead, and re-raised (``raise_signal``, to the handler that was there before) as
    soon as the command is known and guarded by a ``finally`` that kills it.
    """

    def __init__(self) -> None:
        self.previous: object = None
        self.received = False

    def _note(self, signum: int, frame: object) -> None:
        self.received = True

    def __enter__(self) -> _CtrlCDeferred:
        if threading.current_thread() is not threading.main_thread():
            return self
        previous = signal.getsignal(signal.SIGINT)
        if previous is None or previous == signal.SIG_IGN:  # not Python's, or nothing to defer
            return self
        try:
            signal.signal(signal.SIGINT, self._note)
        except (ValueError, OSError):
            return self
        self.previous = previous
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)  # type: ignore[arg-type]
            self.previous = None
            if self.received:
                signal.raise_signal(signal.SIGINT)


# -- what runs now, process-wide -------------------------------------------------------------

_LIVE_LOCK = threading.Lock()
_LIVE: Dict[int, _Command] = {}  # pid -> command, over every Runner of this process
_UNREAPED: List[proctree.Proc] = []  # killed but not yet gone (stuck in the kernel)
_sentinel_pid = 0  # the sentinel's pid, once started (0: not started, or it could not be)
_sentinel_owner = 0  # the pid that started it (a forked copy of ibdiag needs its own)
_sentinel_pipe = -1  # our end of its stdin: held, never written, closed only by our exit
_sentinel_lock = threading.Lock()


def _known_pids() -> Set[int]:
    with _LIVE_LOCK:
        known = set(_LIVE)
    known.add(_sentinel_pid)
    return known


def _start_sentinel() -> None:
    """Start the sentinel (``sentinel.py``) once per process; without it, carry on.

    ``posix_spawn``, not ``Popen``: it is never waited for (it outlives us by design), and a
    Popen still running at exit would be warned about.
    """
    global _sentinel_pid, _sentinel_owner, _sentinel_pipe
    if not sys.executable or not sys.platform.startswith("linux"):
        return
    with _sentinel_lock:
        if _sentinel_owner == os.getpid():
            return
        _sentinel_owner = os.getpid()
        env = {key: val for key, val in os.environ.items() if key != proctree.COOKIE_VARIABLE}
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sentinel.py")
        cookie = f"{proctree.COOKIE_VARIABLE}={_cookie_prefix()}"
        read_end, write_end = os.pipe()  # both close-on-exec: only the dup2'd copy is inherited
        try:
            _sentinel_pid = os.posix_spawn(
                sys.executable,
                [sys.executable, "-I", "-S", script, cookie],
                env,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, read_end, 0),
                    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                ],
                setsid=True,
            )
            _sentinel_pipe = write_end
        except (OSError, ValueError, TypeError):
            os.close(write_end)
        finally:
            os.close(read_end)


_starting = 0  # commands between "about to start" and registered in _LIVE


def _subreaper_needed() -> bool:
    return bool(_LIVE) or _starting > 0


def _begin_start() -> None:
    """Before the fork: ibdiag is the subreaper from now on, so nothing the command starts
    can be orphaned out of reach, however soon it exits."""
    global _starting
    with _LIVE_LOCK:
        if not _subreaper_needed():
            proctree.set_subreaper(True)
        _starting += 1


def _end_start(command: Optional[_Command]) -> None:
    """After the fork: the command is registered (None: it never started)."""
    global _starting
    with _LIVE_LOCK:
        _starting -= 1
        if command is not None:
            _LIVE[command.pid] = command
        elif not _subreaper_needed():
            proctree.set_subreaper(False)


def _leave(command: _Command) -> None:
    with _LIVE_LOCK:
        _LIVE.pop(command.pid, None)
        if not _subreaper_needed():
            proctree.set_subreaper(False)
        stuck = list(_UNREAPED)
        _UNREAPED.clear()
    me = os.getpid()
    still = [info for info in stuck if not proctree.reap_if_ours(info, me)]
    if still:
        with _LIVE_LOCK:
            _UNREAPED.extend(still)


@atexit.register
def _kill_everything_left() -> None:
    """At interpreter exit: kill the tree of every command still running (daemon threads)."""
    with _LIVE_LOCK:
        commands = list(_LIVE.values())
    for command in commands:
        command.tree.kill(leader=True)


class _Command:
    """One started command: its Popen, its tree, and the thread that waits for its exit."""

    def __init__(self, popen: subprocess.Popen, cookie: str) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.tree = proctree.Tree(popen.pid, cookie, _known_pids)
        self.rc: Optional[int] = None
        self.exited = threading.Event()  # the command's own process has ended and been reaped
        self.leader_killed = False
        self._waiter = threading.Thread(
            target=self._wait, name=f"ibdiag-wait-{popen.pid}", daemon=True
        )

    def start_waiting(self) -> None:
        self._waiter.start()

    def _wait(self) -> None:
        """Wait for the command's exit; kill what it left while it is a zombie (its pid and
        process group cannot be reused yet), then reap it."""
        try:
            if hasattr(os, "waitid"):
                try:
                    os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
                except ChildProcessError:
                    pass
                try:
                    self.tree.kill(leader=False)
                finally:
                    self.rc = self.popen.wait()
            else:  # no waitid (macOS): reap first, then kill what is left of the group
                self.rc = self.popen.wait()
                self.tree.kill(leader=False)
        finally:
            self.exited.set()

    def kill(self) -> None:
        """SIGKILL the command and its whole tree (a timeout, an interrupt)."""
        if not self.exited.is_set():
            self.leader_killed = True
            self.tree.kill(leader=True)


class Runner:
    """Runs argv lists under a per-command timeout and one deadline for the whole run.

    The deadline clock starts when the Runner is made (or at ``started_at``, a
    ``time.monotonic()`` instant, to share one clock between runners): build one per run.
    ``deadline_name`` says whose deadline it is in the reason of a command never started.
    """

    def __init__(
        self,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_workers: int = DEFAULT_MAX_WORKERS,
        output_cap: int = OUTPUT_CAP_BYTES,
        path: Optional[str] = None,  # PATH to search; None: os.environ["PATH"]
        total_output_cap: Optional[int] = TOTAL_OUTPUT_CAP_BYTES,
        output_floor: int = OUTPUT_FLOOR_BYTES,
        budget: Optional[OutputBudget] = None,  # share one between runners of a run
        started_at: Optional[float] = None,
        deadline_name: str = "the run's deadline",
    ) -> None:
        self.started_at = time.monotonic() if started_at is None else float(started_at)
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        if output_cap < 0 or output_floor < 0:
            raise ValueError(f"output caps must not be negative, got {output_cap}")
        self.timeout_s = float(timeout_s)
        self.deadline_s = float(deadline_s)
        self.deadline_at = self.started_at + self.deadline_s
        self.deadline_name = deadline_name
        self.max_workers = int(max_workers)
        self.output_cap = int(output_cap)
        self.output_floor = int(output_floor)
        if budget is None and total_output_cap is not None:
            budget = OutputBudget(total_output_cap)
        self.budget = budget
        self.path = path if path is not None else os.environ.get("PATH", os.defpath)
        self.env = dict(os.environ)
        self.env.pop(proctree.COOKIE_VARIABLE, None)
        self.env.update(LC_ALL="C", LANG="C")
        if path is not None:
            self.env["PATH"] = path
        self._search_paths = self.path.split(os.pathsep)
        self._lock = threading.Lock()
        self._live: Set[_Command] = set()  # the commands this Runner is running now
        self._interrupted = threading.Event()
        self._child_hook = proctree.child_hook(os.getpid())

    # -- public API ----------------------------------------------------------------------------

    def run_all(self, commands: Sequence[Sequence[str]]) -> Dict[str, CommandRun]:
        """Run every command (each distinct argv once) concurrently; results by command_key."""
        if isinstance(commands, (str, bytes, bytearray)):
            raise TypeError(f"run_all takes a list of argv lists, not a string: {commands!r}")
        unique: Dict[str, Tuple[Optional[Role], List[str], Optional[float]]] = {}
        for argv in commands:
            args = _argv_list(argv)
            unique.setdefault(command_key(args), (None, args, None))
        return self._run_concurrently(unique)

    def run_planned(self, planned: Sequence[Tuple[Any, ...]]) -> Dict[str, CommandRun]:
        """Run every (role, argv) or (role, argv, timeout_s) concurrently, each recorded with
        its role; results by role (``CommandRun.key``). A role planned twice runs once.
        ``timeout_s``: that command's own timeout, at most the Runner's (None: the Runner's)."""
        unique: Dict[str, Tuple[Optional[Role], List[str], Optional[float]]] = {}
        for role, argv, *timeout in planned:
            unique.setdefault(str(role), (role, _argv_list(argv), timeout[0] if timeout else None))
        return self._run_concurrently(unique)

    def _run_concurrently(
        self, unique: Dict[str, Tuple[Optional[Role], List[str], Optional[float]]]
    ) -> Dict[str, CommandRun]:
        if len(unique) <= 1 or self.max_workers == 1:
            return {
                key: self.run(args, role, timeout) for key, (role, args, timeout) in unique.items()
            }

        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(
            max_workers=min(self.max_workers, len(unique)), thread_name_prefix="ibdiag-run"
        )
        try:
            futures = {
                key: pool.submit(self.run, args, role, timeout)
                for key, (role, args, timeout) in unique.items()
            }
            return {key: interruptible.result(future) for key, future in futures.items()}
        except BaseException:  # KeyboardInterrupt: start nothing more, kill what runs, re-raise
            self._interrupt()
            raise
        finally:
            pool.shutdown(wait=True)

    def stop(self) -> None:
        """Start nothing more and kill every command this Runner is running (their trees)."""
        self._interrupt()

    def run(
        self, argv: Sequence[str], role: Optional[Role] = None, timeout_s: Optional[float] = None
    ) -> CommandRun:
        """Run one command to completion, timeout or refusal; never raises (but TypeError).
        ``role``: what the run is for (``ibdiag.roles``), recorded on it; ``timeout_s``: its own
        timeout, at most the Runner's ``timeout_s`` (None: the Runner's)."""
        args = _argv_list(argv)
        started = time.monotonic()
        limit = self.timeout_s if timeout_s is None else min(float(timeout_s), self.timeout_s)
        try:
            run = self._run(args, started, limit)
        except Exception as exc:  # noqa: BLE001 - a runner failure is data, never a traceback
            run = self._record(args, started, error=_one_line(f"runner failed: {exc!r}"))
        return run if role is None else run.model_copy(update={"role": role})

    # -- internals -----------------------------------------------------------------------------

    def _record(self, args: List[str], started: float, **fields: Any) -> CommandRun:
        duration = round(time.monotonic() - started, 6)
        return CommandRun.model_construct(argv=args, duration_s=duration, **fields)

    def _run(self, args: List[str], started: float, limit: float) -> CommandRun:
        if not args:
            return self._record(args, started, error="empty command line")
        if self._interrupted.is_set():
            return self._record(args, started, skipped="the run was interrupted")
        left = self.deadline_at - started
        if left <= 0:
            why = f"{self.deadline_name} of {self.deadline_s:g} s had passed"
            return self._record(args, started, skipped=why)
        timeout = min(limit, left)

        executable = self._which(args[0])
        if executable is None:
            if self._exists_not_executable(args[0]):
                return self._record(args, started, permission_denied=True)
            return self._record(args, started, not_found=True)

        out = _Tail(self.output_cap, self.budget, self.output_floor)
        err = _Tail(self.output_cap, self.budget, self.output_floor)
        command = None
        try:
            with _CtrlCDeferred():  # a Ctrl-C while it starts lands once it is guarded
                try:
                    command = self._start(executable, args)
                except OSError as exc:
                    if exc.filename is not None:  # the exec itself failed, in the child
                        return self._record(args, started, **_exec_failure(exc))
                    # fork or pipe: EAGAIN, EMFILE, ENOMEM
                    return self._record(args, started, error=_one_line(f"could not start: {exc}"))
                except (ValueError, subprocess.SubprocessError) as exc:  # a NUL in an argument
                    return self._record(args, started, error=_one_line(f"could not start: {exc}"))
            if self._interrupted.is_set():  # started just as run_all was interrupted
                command.kill()
            until = time.monotonic() + timeout
            if self._pump(command, out, err, until) or not command.exited.wait(
                max(0.0, until - time.monotonic())
            ):
                command.kill()  # the timeout came first
            self._pump(command, out, err, time.monotonic() + KILL_GRACE_S)  # what is left
            command.exited.wait(KILL_GRACE_S)
        finally:
            if command is not None:
                self._finish(command)
        exited = command.exited.is_set()
        timed_out = command.leader_killed and not self._interrupted.is_set()
        rc = command.rc if exited else None
        fields: Dict[str, object] = {}
        if not exited:  # SIGKILLed, yet not gone: stuck in the kernel (D state)
            fields["error"] = f"killed, but had not exited {KILL_GRACE_S:g} s later"
        return self._record(
            args,
            started,
            rc=None if timed_out else rc,
            timed_out=timed_out,
            stdout=out.text(),
            stderr=err.text(),
            stdout_truncated=out.truncated,
            stderr_truncated=err.truncated,
            **fields,
        )

    def _start(self, executable: str, args: List[str]) -> _Command:
        """Start the command, register it (so an interrupt or exit reaches it), then its waiter."""
        _start_sentinel()
        cookie = f"{_cookie_prefix()}{next(_SEQUENCE)}"
        env = dict(self.env)
        env[proctree.COOKIE_VARIABLE] = cookie
        _begin_start()
        command = None
        try:
            popen = subprocess.Popen(
                args, executable=executable, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, env=env, start_new_session=True, close_fds=True,
                bufsize=0, preexec_fn=self._child_hook,
            )  # fmt: skip
            command = _Command(popen, f"{proctree.COOKIE_VARIABLE}={cookie}")
        finally:
            _end_start(command)
        with self._lock:
            self._live.add(command)
        command.start_waiting()
        return command

    def _pump(self, command: _Command, out: _Tail, err: _Tail, until: float) -> bool:
        """Read both pipes into their tails until both close; True when ``until`` came first."""
        streams = [(command.popen.stdout, out), (command.popen.stderr, err)]
        buffer = bytearray(_READ_CHUNK)  # read into one buffer: no 64 KiB object per read
        view = memoryview(buffer)
        with selectors.DefaultSelector() as selector:
            for stream, sink in streams:
                if stream is not None and not stream.closed:
                    selector.register(stream.fileno(), selectors.EVENT_READ, (stream, sink))
            while selector.get_map():
                left = until - time.monotonic()
                if left <= 0:
                    return True
                for key, _ in selector.select(left):
                    stream, sink = key.data
                    try:
                        size = stream.readinto(view) or 0
                    except OSError:
                        size = 0
                    if size:
                        sink.write(view[:size])
                    else:
                        selector.unregister(key.fd)
                        stream.close()
        return False

    def _finish(self, command: _Command) -> None:
        """Whatever happened: kill what is left, close the pipes, reap what was killed."""
        try:
            if not command.exited.is_set():
                command.kill()  # KeyboardInterrupt, or the runner itself failed
                command.exited.wait(KILL_GRACE_S)
            for stream in (command.popen.stdout, command.popen.stderr):
                if stream is not None:
                    stream.close()
            stuck = command.tree.reap(KILL_GRACE_S)
            if stuck:
                with _LIVE_LOCK:
                    _UNREAPED.extend(stuck)
        finally:
            with self._lock:
                self._live.discard(command)
            _leave(command)

    def _which(self, name: str) -> Optional[str]:
        """The executable file ``name`` runs, as execvp would find it; None when there is none."""
        if os.sep in name:
            candidates = [name]
        else:
            candidates = [os.path.join(folder or os.curdir, name) for folder in self._search_paths]
        for candidate in candidates:
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
        return None

    def _exists_not_executable(self, name: str) -> bool:
        """Whether a "not found" is really a file on the path that is not executable."""
        if os.sep in name:
            candidates = [name]
        else:
            candidates = [os.path.join(folder or os.curdir, name) for folder in self._search_paths]
        return any(os.path.isfile(candidate) for candidate in candidates)

    def _interrupt(self) -> None:
        """Start nothing more and SIGKILL every command this Runner still runs, with its tree."""
        self._interrupted.set()
        with self._lock:
            commands = list(self._live)
        for command in commands:
            command.kill()
