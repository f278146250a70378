"""The one way ibdiag runs an external command: ``Runner``, over the ``sh`` library.

A stuck ``perfquery`` in a Slurm prolog must never hang the node's job starts, so every command:

- is an argv list, never a shell string (a ``str`` is a programming error: ``TypeError``);
- runs in its own session (``_new_session``), stdin from /dev/null, ``LC_ALL=C`` and ``LANG=C``,
  stdout and stderr through pipes (``_tty_out=False``), captured separately;
- has a timeout of ``min(timeout_s, time left before the run's deadline)``; when it passes, the
  command's whole process group gets SIGKILL, so neither a child that ignores SIGTERM nor a
  grandchild holding the pipe open can keep the run waiting. The group is also killed when the
  command exits by itself: nothing it left behind outlives it or holds its output pipe;
- keeps at most ``output_cap`` bytes of each stream - the tail - while it reads, so a command
  printing a gigabyte costs a bounded amount of memory;
- is recorded as a ``CommandRun`` whatever happened: not installed, permission denied, exec
  format error, timed out, non-zero exit, or never started because the run's deadline had passed.
  Nothing raises out of ``run``/``run_all`` except ``TypeError`` for a non-argv argument (and
  ``KeyboardInterrupt``, after the running commands' process groups have been killed).

Why not ``sh``'s own ``_timeout``: on timeout it signals only the command's pid (``os.kill``), not
its process group, and gives up reading its output; a grandchild would survive. The runner starts
each command with ``_bg=True``, waits on it itself, and ``os.killpg``s the group recorded at start.

``sh`` is imported on first use: this module is only needed from level standard on, and level
quick (every Slurm prolog) must not pay for it.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import threading
import time
from typing import Dict, List, Optional, Sequence, Set

from ibdiag.model import CommandRun, command_key

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_DEADLINE_S = 25.0  # well inside Slurm's 60 s HealthCheckTimeout
DEFAULT_MAX_WORKERS = 48  # they mostly wait (MADs, the kernel): an 8-HCA node (35) in one wave
OUTPUT_CAP_BYTES = 1 << 20

_READ_CHUNK = 64 * 1024  # sh reads and hands over output in chunks of this size
_POLL_FIRST_S = 0.001  # waiting for a command: poll often at first, then every _POLL_MAX_S
_POLL_MAX_S = 0.01
_ERRNO = re.compile(r"\[Errno (\d+)\] ([^:\n]+)")


class _Tail:
    """A write-only sink for sh that keeps the last ``cap`` bytes written to it.

    sh hands raw ``bytes`` to an object with a ``write`` method and no ``encoding`` attribute
    (it must not be callable either: sh would decode for a callback). The buffer is trimmed
    whenever it grows past twice the cap, so memory stays bounded however much is written. One
    byte more than the cap is kept: it tells whether the tail starts at the start of a line.
    """

    __slots__ = ("buf", "cap", "total")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.buf = bytearray()
        self.total = 0

    def write(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if not self.cap:
            return
        self.buf += chunk
        if len(self.buf) > 2 * self.cap:
            del self.buf[: -(self.cap + 1)]

    @property
    def truncated(self) -> bool:
        return self.total > self.cap

    def text(self) -> str:
        """The kept bytes decoded as UTF-8 (bad bytes replaced); a cut tail starts on a line."""
        data = bytes(self.buf[-self.cap :]) if self.cap else b""
        if self.truncated and data and self.buf[-self.cap - 1] != ord("\n"):
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


def _kill_group(pgid: int) -> None:
    """SIGKILL every process left in the group; an empty group is not an error."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:  # ESRCH: nothing left; EPERM: only a setuid member we cannot touch
        pass


def _exec_failure(message: str) -> Dict[str, object]:
    """Classify sh's ForkException (the child's traceback of a failed exec) as CommandRun fields."""
    found = _ERRNO.findall(message)
    if not found:
        lines = [line for line in message.splitlines() if line.strip()]
        return {"error": "could not start: " + _one_line(lines[-1] if lines else "unknown error")}
    code, strerror = int(found[-1][0]), found[-1][1].strip()
    if code == errno.EACCES:
        return {"permission_denied": True}
    if code == errno.ENOENT:
        return {"error": f"cannot execute: {strerror} (its #! interpreter or loader is missing)"}
    if code == errno.ENOEXEC:
        why = "not a program for this machine, or a script without #!"
        return {"error": f"cannot execute: {strerror} ({why})"}
    return {"error": f"cannot execute: {strerror}"}


class _CtrlCDeferred:
    """Hold back a Ctrl-C (SIGINT) on the main thread while sh starts a command.

    A KeyboardInterrupt raised inside sh after its fork would lose the child's pid, and the
    command would outlive ibdiag. In the main thread (the only one Python raises it in), SIGINT
    is noted instead, and re-raised (``raise_signal``, to the handler that was there before) as
    soon as the command's process group is known and guarded by a ``finally`` that kills it.
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


def _reap_failed_child(exc: BaseException) -> None:
    """Wait for the child whose exec failed, so it does not stay a zombie until ibdiag exits.

    sh raises ForkException from ``OProc.__init__`` without waiting for that child (nor closing
    the parent's ends of its pipes: four file descriptors per failed exec, left alone here since
    closing a number sh might have closed and another thread reused would be far worse). The
    child's pid is only in the raising frame. If a later sh changes that, nothing is found and
    nothing is done; ``waitpid`` of a pid that is not our child is a harmless ECHILD.
    """
    tb = exc.__traceback__
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        pid = getattr(owner, "pid", None) if type(owner).__name__ == "OProc" else None
        if isinstance(pid, int) and pid > 0:
            end = time.monotonic() + 1.0  # it is exiting: it has just written its traceback
            try:
                while os.waitpid(pid, os.WNOHANG) == (0, 0) and time.monotonic() < end:
                    time.sleep(0.001)
            except ChildProcessError:
                pass
            return
        tb = tb.tb_next


class Runner:
    """Runs argv lists under a per-command timeout and one deadline for the whole run.

    The deadline clock starts when the Runner is made: build one per ibdiag run.
    """

    def __init__(
        self,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_workers: int = DEFAULT_MAX_WORKERS,
        output_cap: int = OUTPUT_CAP_BYTES,
        path: Optional[str] = None,  # PATH to search; None: os.environ["PATH"]
    ) -> None:
        self.started_at = time.monotonic()
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        if output_cap < 0:
            raise ValueError(f"output_cap must not be negative, got {output_cap}")
        self.timeout_s = float(timeout_s)
        self.deadline_s = float(deadline_s)
        self.deadline_at = self.started_at + self.deadline_s
        self.max_workers = int(max_workers)
        self.output_cap = int(output_cap)
        self.path = path if path is not None else os.environ.get("PATH", os.defpath)
        self.env = dict(os.environ)
        self.env.update(LC_ALL="C", LANG="C")
        if path is not None:
            self.env["PATH"] = path
        self._search_paths = self.path.split(os.pathsep)
        self._lock = threading.Lock()
        self._live_groups: Set[int] = set()  # process groups of the commands running now
        self._interrupted = threading.Event()

    # -- public API ----------------------------------------------------------------------------

    def run_all(self, commands: Sequence[Sequence[str]]) -> Dict[str, CommandRun]:
        """Run every command (each distinct argv once) concurrently; results by command_key."""
        if isinstance(commands, (str, bytes, bytearray)):
            raise TypeError(f"run_all takes a list of argv lists, not a string: {commands!r}")
        unique: Dict[str, List[str]] = {}
        for argv in commands:
            args = _argv_list(argv)
            unique.setdefault(command_key(args), args)
        if len(unique) <= 1 or self.max_workers == 1:
            return {key: self.run(args) for key, args in unique.items()}

        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(
            max_workers=min(self.max_workers, len(unique)), thread_name_prefix="ibdiag-run"
        )
        try:
            futures = {key: pool.submit(self.run, args) for key, args in unique.items()}
            return {key: future.result() for key, future in futures.items()}
        except BaseException:  # KeyboardInterrupt: start nothing more, kill what runs, re-raise
            self._interrupt()
            raise
        finally:
            pool.shutdown(wait=True)

    def stop(self) -> None:
        """Start nothing more and kill every command this Runner is running (their groups)."""
        self._interrupt()

    def run(self, argv: Sequence[str]) -> CommandRun:
        """Run one command to completion, timeout or refusal; never raises (but TypeError)."""
        args = _argv_list(argv)
        started = time.monotonic()
        try:
            return self._run(args, started)
        except Exception as exc:  # noqa: BLE001 - a runner failure is data, never a traceback
            return self._record(args, started, error=_one_line(f"runner failed: {exc!r}"))

    # -- internals -----------------------------------------------------------------------------

    def _record(self, args: List[str], started: float, **fields: object) -> CommandRun:
        duration = round(time.monotonic() - started, 6)
        return CommandRun.model_construct(argv=args, duration_s=duration, **fields)

    def _run(self, args: List[str], started: float) -> CommandRun:
        if not args:
            return self._record(args, started, error="empty command line")
        if self._interrupted.is_set():
            return self._record(args, started, skipped="the run was interrupted")
        left = self.deadline_at - started
        if left <= 0:
            return self._record(
                args, started, skipped=f"the run's deadline of {self.deadline_s:g} s had passed"
            )
        timeout = min(self.timeout_s, left)

        import sh

        try:
            command = sh.Command(args[0], search_paths=self._search_paths)
        except sh.CommandNotFound:
            if self._exists_not_executable(args[0]):
                return self._record(args, started, permission_denied=True)
            return self._record(args, started, not_found=True)

        out, err = _Tail(self.output_cap), _Tail(self.output_cap)
        proc = None
        try:
            with _CtrlCDeferred():  # a Ctrl-C while sh starts it lands once its group is known
                try:
                    proc = self._start(command, args[1:], out, err)
                except sh.ForkException as exc:  # the exec itself failed in the child
                    _reap_failed_child(exc)
                    return self._record(args, started, **_exec_failure(str(exc)))
                except OSError as exc:  # fork or pipe: EAGAIN, EMFILE, ENOMEM
                    return self._record(args, started, error=_one_line(f"could not start: {exc}"))
                self._hold(proc.pgid)
            if self._interrupted.is_set():  # started just as run_all was interrupted
                _kill_group(proc.pgid)
            expired = self._wait(proc, time.monotonic() + timeout)
        finally:
            if proc is not None:
                _kill_group(proc.pgid)  # on timeout, on exit (leftovers), on KeyboardInterrupt
                self._release(proc.pgid)
        try:
            proc.wait()
            rc = 0
        except sh.ErrorReturnCode as exc:  # non-zero exit, or killed (SignalException)
            rc = exc.exit_code
        timed_out = expired and rc == -signal.SIGKILL
        return self._record(
            args,
            started,
            rc=None if timed_out else rc,
            timed_out=timed_out,
            stdout=out.text(),
            stderr=err.text(),
            stdout_truncated=out.truncated,
            stderr_truncated=err.truncated,
        )

    def _start(self, command: object, args: List[str], out: _Tail, err: _Tail) -> object:
        """Start the command in the background under sh; returns sh's RunningCommand."""
        with open(os.devnull, "rb") as devnull:  # sh dup()s it into the child
            return command(  # type: ignore[operator] - an sh.Command
                *args,
                _bg=True,
                _bg_exc=False,  # no exception printed from sh's background thread
                _new_session=True,  # its own session and process group: pgid == pid
                _env=self.env,
                _in=devnull,
                _out=out,
                _err=err,
                _tty_out=False,  # pipes, not a pty
                _out_bufsize=_READ_CHUNK,
                _err_bufsize=_READ_CHUNK,
                _no_pipe=True,
            )

    def _wait(self, proc: object, until: float) -> bool:
        """Wait for the command's own process to end; True when ``until`` passed first."""
        delay = _POLL_FIRST_S
        while proc.is_alive():  # type: ignore[attr-defined] - sh's RunningCommand
            left = until - time.monotonic()
            if left <= 0:
                return True
            time.sleep(min(delay, left))
            delay = min(delay * 2, _POLL_MAX_S)
        return False

    def _exists_not_executable(self, name: str) -> bool:
        """Whether sh's "not found" is really a file on the path that is not executable."""
        if os.sep in name:
            candidates = [name]
        else:
            candidates = [os.path.join(folder or os.curdir, name) for folder in self._search_paths]
        return any(os.path.isfile(candidate) for candidate in candidates)

    def _hold(self, pgid: int) -> None:
        with self._lock:
            self._live_groups.add(pgid)

    def _release(self, pgid: int) -> None:
        with self._lock:
            self._live_groups.discard(pgid)

    def _interrupt(self) -> None:
        """Start nothing more and SIGKILL every command group still running."""
        self._interrupted.set()
        with self._lock:
            groups = list(self._live_groups)
        for pgid in groups:
            _kill_group(pgid)
