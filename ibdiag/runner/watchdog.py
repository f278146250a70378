"""A bound on reading sysfs and procfs: a read that never returns cannot hang the run.

Reading a sysfs attribute runs the driver's ``show()``: a counter read on an HCA whose firmware
stopped answering waits for the firmware command's own timeout (a minute on mlx5), or for ever.
No signal interrupts a thread blocked in the kernel, so ``bounded_read`` runs the reading in a
worker thread and watches every file read, listing and link resolution it makes:

- a single one that has not answered after ``timeout`` seconds is **hung**. The device it
  belongs to (``class/infiniband/<dev>``; for any other file, its directory) is given up on:
  what was read of it before stays, any file of it not yet read is "not read: <attribute>
  hung", and its ``ports`` listing is refused with that reason - so ``link.state`` fails that
  HCA naming the attribute (a hung read is a symptom: the HCA cannot be judged healthy). The
  rest of the node is read again from what was read (nothing is read twice) and, for what was
  not, live - in a fresh worker, watched the same way;
- all reading ends by twice ``timeout`` in any case: the read in flight then is hung as above,
  whatever was still unread is "not read: reading sysfs took longer than N s", and the node is
  graded on the rest.

A worker given up on is abandoned, not joined (it cannot be stopped): it is a daemon thread, it
stops at its next read if that one ever returns, and whatever it returns is dropped - it never
writes into a Snapshot or a bundle's recording after it was given up on.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Set, Tuple

from ibdiag.model import INFINIBAND_CLASS


class WatchedReader(Protocol):
    """What a bounded read needs of a reader (``ibdiag.sources.sysfs.SysfsReader`` is one): its
    root, and a ``watch`` slot through which it routes every call while ``watch`` is set."""

    root: str
    watch: Optional[Any]


DEFAULT_READ_TIMEOUT_S = 5.0
THREAD_NAME = "ibdiag-read"
_POLL_S = 0.02


class _Abandoned(BaseException):
    """Raised in a worker the watchdog gave up on (BaseException: no reader code catches it)."""


_NONE = object()  # no answer yet


def _refusal(op: str, reason: str) -> Any:
    """What a reader call answers for something it did not read (or may not read)."""
    if op == "read":
        return None, reason
    if op == "listdir":
        return [], reason
    if op == "exists":
        return False
    return ""  # "target": resolves to nothing


class _Watch:
    """Shared by the readers of one bounded read: the answers so far, what is in flight, what
    was given up on. Every reader call goes through ``call``."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.lock = threading.Lock()
        # Threads, not their idents: a thread given up on may end and its ident be reused.
        self.worker: Optional[threading.Thread] = None  # the thread whose calls are watched
        self.abandoned: Set[threading.Thread] = set()  # given up on: their calls raise
        self.offline: Optional[str] = None  # set: nothing more is read live, this is why
        self.answers: Dict[Tuple[str, str, str], Any] = {}
        # thread -> its call in flight (root, op, rel, since) or None: one slot per thread, so
        # a worker given up on never clears the current worker's
        self.flights: Dict[threading.Thread, Optional[Tuple[str, str, str, float]]] = {}
        self.hung: Dict[Tuple[str, str, str], str] = {}  # the calls that hung -> refusal
        self.scopes: List[Tuple[str, str, bool, str]] = []  # root, prefix, is_device, reason

    def call(self, reader: WatchedReader, op: str, rel: str, live: Callable[[str], Any]) -> Any:
        """``live(rel)``, watched; or what was answered before; or a refusal.

        No lock on this path, which every file read takes: each step is one atomic operation
        under the GIL, and ``give_up`` marks a worker abandoned before it stops being the
        current one, so a worker given up on can never store an answer nor read again.
        """
        me = threading.current_thread()
        if me is not self.worker:
            if me in self.abandoned:
                raise _Abandoned
            return live(rel)  # not the bounded read's (after it: level full's cpulist, say)
        root = reader.root
        rel = rel.strip("/")
        key = (root, op, rel)
        if self.scopes or self.offline is not None:  # only once something was given up on
            refused = self._given_up(key)
            if refused is not None:
                return refused
        answer = self.answers.get(key, _NONE)
        if answer is not _NONE:
            return answer
        self.flights[me] = (root, op, rel, time.monotonic())
        answer = live(rel)
        self.flights[me] = None
        if me in self.abandoned:
            raise _Abandoned
        self.answers[key] = answer
        return answer

    def _given_up(self, key: Tuple[str, str, str]) -> Any:
        """The refusal for a call given up on (module doc), or None to answer it."""
        root, op, rel = key
        if key in self.hung:
            return _refusal(op, self.hung[key])
        forced = self._forced(root, op, rel)
        if forced is not None:
            return _refusal(op, forced)
        if key in self.answers:
            return None
        why = self.offline or (self._scope(root, rel) if op == "read" else None)
        return _refusal(op, why) if why is not None else None

    def _scope(self, root: str, rel: str) -> Optional[str]:
        """Why a file read is refused: it is in a device given up on (the device's whole
        tree), or directly in a directory given up on; None when neither."""
        for scope_root, prefix, is_device, reason in self.scopes:
            if scope_root != root:
                continue
            if rel.startswith(prefix + "/") and (is_device or "/" not in rel[len(prefix) + 1 :]):
                return reason
        return None

    def _forced(self, root: str, op: str, rel: str) -> Optional[str]:
        """A given-up device's ``ports`` listing: refused, whatever was read before."""
        if op != "listdir":
            return None
        for scope_root, prefix, is_device, reason in self.scopes:
            if is_device and scope_root == root and rel == f"{prefix}/ports":
                return reason
        return None

    def start(self, thread: threading.Thread) -> None:
        with self.lock:
            self.worker = thread

    def give_up(self, ending: bool = False) -> None:
        """Abandon the current worker. When a call of it has been in flight for ``timeout``
        seconds - or at all, when reading is ``ending`` - that call is hung, and its device or
        directory is given up on."""
        with self.lock:
            worker = self.worker
            if worker is None:
                return
            self.abandoned.add(worker)
            self.worker = None
            flight = self.flights.get(worker)
            if flight is None:
                return
            root, op, rel, since = flight
            waited = time.monotonic() - since
            if waited >= self.timeout:
                within = f"no answer within {self.timeout:g} s"
            elif ending:
                within = f"no answer after {waited:.1f} s, when reading had to end"
            else:
                return
            self.hung[(root, op, rel)] = (
                f"{within}: the read hung (the HCA or its driver is not responding)"
            )
            parts = rel.split("/")
            is_device = rel.startswith(INFINIBAND_CLASS + "/") and len(parts) > 3
            prefix = "/".join(parts[:3]) if is_device else "/".join(parts[:-1])
            self.scopes.append((root, prefix, is_device, f"not read: {rel} hung ({within})"))

    def hung_too_long(self) -> bool:
        flight = self.flights.get(self.worker)  # type: ignore[arg-type]
        return flight is not None and time.monotonic() - flight[3] >= self.timeout


def bounded_read(
    read: Callable[[], Any], readers: Sequence[WatchedReader], timeout: Optional[float]
) -> Any:
    """``read()`` (which reads through ``readers``), bounded as the module doc says; its result.

    ``timeout`` None or not above 0: ``read()`` as it is, unbounded. An exception ``read``
    raises is raised here. The readers stay watched afterwards, so that a worker given up on
    can never read through them again; anyone else's calls go straight through.
    """
    if timeout is None or timeout <= 0:
        return read()
    watch = _Watch(timeout)
    for reader in readers:
        reader.watch = watch
    try:
        hard_stop = time.monotonic() + 2 * timeout
        while watch.offline is None:
            done, result = _round(read, watch, hard_stop)
            if done:
                return result
        watch.start(threading.current_thread())  # the last pass, offline: it cannot block
        return read()
    finally:
        with watch.lock:
            watch.worker = None  # the bounded read is over: other threads' calls go through


def _round(read: Callable[[], Any], watch: _Watch, hard_stop: float) -> Tuple[bool, Any]:
    """One worker reading until done, a call of it hangs, or ``hard_stop``: (done, result)."""
    outcome: Dict[str, Any] = {}
    started = threading.Event()

    def work() -> None:
        watch.start(threading.current_thread())
        started.set()
        try:
            outcome["result"] = read()
        except _Abandoned:
            pass
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            outcome["error"] = exc

    worker = threading.Thread(target=work, name=THREAD_NAME, daemon=True)
    worker.start()
    started.wait()
    while True:
        worker.join(_POLL_S)
        if not worker.is_alive():
            if "error" in outcome:
                raise outcome["error"]
            return True, outcome.get("result")
        if time.monotonic() >= hard_stop:
            watch.give_up(ending=True)
            watch.offline = (
                f"not read: reading sysfs took longer than {2 * watch.timeout:g} s "
                "(a read that hung first is named on its device)"
            )
            return False, None
        if watch.hung_too_long():
            watch.give_up()
            return False, None
