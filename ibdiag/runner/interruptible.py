"""Waiting on worker threads from the main thread so that a stop signal still lands at once.

CPython runs signal handlers in the main thread only, between bytecodes or when a blocking
call there returns EINTR. The kernel hands a process-directed signal (Slurm's SIGTERM, NHC's
SIGALRM) to any thread that does not block it. When it lands on a worker thread, a main thread
parked in an untimed wait (``Future.result()``, ``Thread.join()``) sees no EINTR, and the
handler - the one that kills the running commands - waits until that wait ends: up to the
command timeout, 60 s at level standard. Waiting in short slices lets the interpreter run a
pending handler after each slice. Healthy: a stopped run unwinds within ``SLICE_S``.
"""

from __future__ import annotations

import threading
import time
from concurrent import futures
from typing import Optional, TypeVar

T = TypeVar("T")

SLICE_S = 0.1  # how late a stop signal delivered to a worker thread may be handled


def result(future: futures.Future[T]) -> T:
    """``future.result()``, waited for in slices so a stop signal interrupts the wait."""
    while not future.done():
        futures.wait([future], timeout=SLICE_S)
    return future.result()


def join(thread: threading.Thread, timeout: Optional[float] = None) -> None:
    """``thread.join(timeout)``, waited for in slices so a stop signal interrupts the wait."""
    ends = None if timeout is None else time.monotonic() + timeout
    while thread.is_alive():
        left = SLICE_S if ends is None else min(SLICE_S, ends - time.monotonic())
        if left <= 0:
            return
        thread.join(left)
