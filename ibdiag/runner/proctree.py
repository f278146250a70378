"""The processes a command leaves behind: find them in /proc, kill them, reap them (Linux).

A command's process group is not all it can start. A child that calls ``setsid`` leaves the
group (and the session); a grandchild whose parent exits is re-parented out of the command's
tree. The runner therefore

- marks every command's environment with a cookie, ``IBDIAG_RUNNER=<ibdiag pid>.<its start
  time>.<command number>``, inherited by everything the command starts (unless it clears its
  environment);
- makes ibdiag the *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``) while commands run, so
  an orphan of any command is re-parented to ibdiag rather than to init, where it can be found
  (``/proc/<ibdiag>/task/*/children``) and reaped;
- gives every command ``PR_SET_PDEATHSIG`` = SIGKILL in the child before exec, so a command
  dies with ibdiag even when ibdiag is SIGKILLed and runs no clean-up code;
- when a command ends or times out, kills its whole tree: the command's process group, every
  descendant of the command, and every orphan ibdiag adopted that belongs to it (same process
  group or session, a session already found to be the command's, or the command's cookie),
  with their own descendants - in rounds, until a round finds nothing new - then reaps the
  ones that became ibdiag's children.

Processes are named by (pid, start time): a pid that was reused is never killed or reaped.
Elsewhere than Linux, or without /proc, only the process group is killed (``killpg``) and the
prctl calls do nothing; nothing here raises.

Limits, stated: a descendant that both leaves the session *and* clears its environment, and
whose parent exits before the runner looks, cannot be told from another program's process and
is left alone; an orphan that leaves the session and exits on its own before the runner looks
stays a zombie until ibdiag exits (it holds a pid, nothing else).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Set, Tuple

COOKIE_VARIABLE = "IBDIAG_RUNNER"
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
KILL_ROUNDS = 8  # a round kills what the last one found; their children show up in the next

_LINUX = sys.platform.startswith("linux")


@dataclass(frozen=True)
class Proc:
    """One line of /proc/<pid>/stat, the fields the runner needs."""

    pid: int
    state: str
    ppid: int
    pgid: int
    sid: int
    start: int  # clock ticks after boot: with the pid, the process's identity

    @property
    def zombie(self) -> bool:
        return self.state in ("Z", "X", "x")


def stat(pid: int) -> Optional[Proc]:
    """The process's /proc stat, or None when it is gone (or there is no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    try:
        end = raw.rindex(b")")  # the command name may hold spaces and parentheses
        fields = raw[end + 2 :].split()
        return Proc(
            pid=pid,
            state=fields[0].decode("ascii", "replace"),
            ppid=int(fields[1]),
            pgid=int(fields[2]),
            sid=int(fields[3]),
            start=int(fields[19]),
        )
    except (ValueError, IndexError):
        return None


def children(pid: int) -> List[int]:
    """The pids whose parent is ``pid`` (any of its threads), zombies included."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: List[int] = []
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as handle:
                found.extend(int(child) for child in handle.read().split())
        except FileNotFoundError:
            if os.path.isdir(f"/proc/{pid}/task/{task}"):  # no CONFIG_PROC_CHILDREN: ask all
                return _children_by_scan(pid)
            continue  # the thread exited since the listing (its children went to another)
        except (OSError, ValueError):
            continue
    return found


# ibdiag's own children are read from every one of its threads' /proc children file - a
# hundred files with 35 commands running (each has a reading and a waiting thread) - and every
# command that times out at the run's deadline asks at the same moment. A reading that began
# after a caller asked is as good as its own: concurrent callers share one.
_own_children: Tuple[float, int, List[int]] = (-1.0, 0, [])  # (when read, pid, children)
_own_children_lock = threading.Lock()


def own_children(asked: float) -> List[int]:
    """``children(os.getpid())`` as read at or after ``asked`` (time.monotonic())."""
    global _own_children
    me = os.getpid()
    with _own_children_lock:
        began, pid, found = _own_children
        if pid != me or began < asked:
            began = time.monotonic()
            found = children(me)
            _own_children = (began, me, found)
        return list(found)


def _children_by_scan(pid: int) -> List[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            info = stat(int(name))
            if info is not None and info.ppid == pid:
                found.append(info.pid)
    return found


def has_cookie(pid: int, cookie: bytes, prefix: bool = False) -> bool:
    """Whether the process's environment (as it was exec'd) holds ``cookie`` (VAR=value) -
    exactly (command 1's cookie is not command 12's), or as the start of a value when
    ``prefix``."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = b"\0" + handle.read()
    except OSError:
        return False
    return (b"\0" + cookie + (b"" if prefix else b"\0")) in environ


def kill(info: Proc) -> None:
    """SIGKILL the process ``info`` names, unless its pid now belongs to another process."""
    now = stat(info.pid)
    if now is None or now.start != info.start:
        return
    try:
        os.kill(info.pid, signal.SIGKILL)
    except OSError:  # ESRCH: gone meanwhile; EPERM: not ours to kill
        pass


def killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:  # ESRCH: nothing left; EPERM: only a setuid member we cannot touch
        pass


class Tree:
    """What one command started, as far as /proc can tell: found, killed and reaped.

    ``pid`` is the command (a session and process group leader: pid == pgid == sid). Thread
    safe: the runner's reading thread (at the timeout) and the command's waiter thread (when
    it exits) may both kill it.
    """

    def __init__(self, pid: int, cookie: str, known: Callable[[], Set[int]]) -> None:
        self.pid = pid
        self.cookie = cookie.encode()
        self.known = known  # pids that are some command's own process or the sentinel
        self.sessions: Set[int] = {pid}  # sessions and groups found to be this command's
        self.killed: Dict[int, Proc] = {}
        self._lock = threading.Lock()

    def kill(self, leader: bool) -> None:
        """SIGKILL the group and every process found to be the command's; the command itself
        too when ``leader`` (it has not exited: a timeout, an interrupt)."""
        with self._lock:
            killpg(self.pid)
            for _ in range(KILL_ROUNDS):
                new = []
                for info in self._find(leader, asked=time.monotonic()):
                    self.sessions.update((info.sid, info.pgid))
                    seen = self.killed.get(info.pid)
                    if seen is None or seen.start != info.start:
                        self.killed[info.pid] = info
                        if not info.zombie:
                            new.append(info)
                for info in new:
                    kill(info)
                killpg(self.pid)
                if not new:
                    return

    def _find(self, leader: bool, asked: float) -> List[Proc]:
        """The command's descendants and the orphans ibdiag adopted from it, with theirs."""
        if not _LINUX:
            return []
        me = os.getpid()
        roots: List[Proc] = []
        if leader:
            info = stat(self.pid)
            if info is not None and info.ppid == me:
                roots.append(info)
        known = self.known()
        for pid in own_children(asked):
            if pid == self.pid or pid in known:
                continue
            info = stat(pid)
            if info is not None and self._owns(info):
                roots.append(info)
        found: Dict[int, Proc] = {}
        stack = list(roots)
        while stack:
            info = stack.pop()
            if info.pid in found:
                continue
            found[info.pid] = info
            for child in children(info.pid):
                child_info = stat(child)
                if child_info is not None and child_info.ppid == info.pid:
                    stack.append(child_info)
        if not leader:
            found.pop(self.pid, None)
        return list(found.values())

    def _owns(self, info: Proc) -> bool:
        if info.pgid in self.sessions or info.sid in self.sessions:
            return True
        if info.pid in self.killed and self.killed[info.pid].start == info.start:
            return True
        return not info.zombie and has_cookie(info.pid, self.cookie)

    def reap(self, within: float) -> List[Proc]:
        """Wait (up to ``within`` s) for the processes killed to end, reaping those that are
        ibdiag's children now; returns those still there (unkillable: stuck in the kernel)."""
        me = os.getpid()
        pending = {pid: info for pid, info in self.killed.items() if pid != self.pid}
        end = time.monotonic() + within
        pause = 0.001
        while pending:
            for pid, info in list(pending.items()):
                if reap_if_ours(info, me):
                    pending.pop(pid)
            if not pending or time.monotonic() >= end:
                break
            time.sleep(pause)  # SIGKILL is asynchronous: a moment for the kernel
            pause = min(pause * 2, 0.02)
        return list(pending.values())


def reap_if_ours(info: Proc, me: int) -> bool:
    """Reap ``info`` if it is ibdiag's exited child; True when it is gone (reaped by us or by
    its parent). Never waits for a pid that now names another process."""
    now = stat(info.pid)
    if now is None or now.start != info.start:
        return True
    if now.ppid != me or not now.zombie:
        return False
    try:
        os.waitpid(info.pid, os.WNOHANG)
    except ChildProcessError:
        pass
    return stat(info.pid) is None


# -- prctl ------------------------------------------------------------------------------------


def _load_prctl() -> Optional[Callable[..., int]]:
    if not _LINUX:
        return None
    try:  # the interpreter is linked against libc: no library search (it may run ldconfig)
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        try:
            prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
        except (OSError, AttributeError):
            return None
    prctl.restype = ctypes.c_int
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return prctl


_PRCTL = _load_prctl()


def set_subreaper(on: bool) -> bool:
    """Make this process the child subreaper of its descendants (or stop); False elsewhere."""
    if _PRCTL is None:
        return False
    return _PRCTL(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0


def child_hook(parent: int) -> Optional[Callable[[], None]]:
    """A ``preexec_fn``: SIGKILL this child when ``parent`` (ibdiag) dies; None elsewhere.

    It runs between fork and exec, so it only calls prctl and getppid (no allocation, no
    lock); if ibdiag already died before the prctl took effect, the child kills itself.
    """
    prctl = _PRCTL
    if prctl is None:
        return None
    kill_signal = int(signal.SIGKILL)

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, kill_signal, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), kill_signal)

    return hook


def own_start_time() -> str:
    """This process's start time in clock ticks (its identity beside the pid)."""
    info = stat(os.getpid())
    return str(info.start) if info is not None else str(time.time_ns())
