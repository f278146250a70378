"""Level full's traffic phase: its limits and what the collector hands each level-full family.

The families of level full (``LEVEL = "full"``: the ib_write_bw loopback, nccl-tests, NCCL
Inspector's dump files) do not plan read-only commands: they run after the read-only phase, one
after the other in their ``ORDER``, each through its ``run(snap, context)`` hook
(``ibdiag.families.run_full``). ``context`` (``TrafficContext``) is everything the phase
shares: the thresholds (what to run, the floors a retry is judged by), the phase's ``Limits``
(one deadline, a cap on every process's timeout), the output budget every command of the
collection shares, the progress callback (a terminal status line) and the sysfs reader (what a
family reads from files there is recorded in a bundle like every other read).

The phase is bounded: by ``--deadline`` counted from the start of the collection when it was
given, else by level full's own bound (``full_level_bound``: the sum of each family's
``bound_s(thresholds)``) counted from the start of the phase; a ``--command-timeout`` given caps
every process's own timeout too. Nothing starts after the deadline: a run it left no time for
is recorded as never started, with the reason.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

from ibdiag.thresholds import Thresholds

if TYPE_CHECKING:  # the runner (subprocess, threads) is imported where a process starts
    from ibdiag.runner.command_runner import OutputBudget, Runner

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Limits:
    """How long the traffic phase may take: a deadline on the ``time.monotonic()`` clock that
    started at ``started_at``, and a cap on every process's timeout (None: its own)."""

    started_at: float
    deadline_s: float
    deadline_name: str = "the run's deadline"
    cap_s: Optional[float] = None

    @property
    def deadline_at(self) -> float:
        return self.started_at + self.deadline_s

    @property
    def passed(self) -> bool:
        """The deadline has passed: nothing more may start."""
        return time.monotonic() >= self.deadline_at

    def timeout(self, own_s: float) -> float:
        return own_s if self.cap_s is None else min(own_s, self.cap_s)

    def runner(self, own_timeout_s: float, budget: Optional[OutputBudget] = None) -> Runner:
        """A Runner on the phase's clock whose processes time out after ``own_timeout_s``
        (capped), sharing ``budget``."""
        from ibdiag.runner.command_runner import Runner

        return Runner(
            timeout_s=self.timeout(own_timeout_s), deadline_s=self.deadline_s,
            started_at=self.started_at, deadline_name=self.deadline_name, budget=budget,
        )  # fmt: skip


def unlimited() -> Limits:
    """No deadline (a caller that runs a traffic test alone, outside a collection)."""
    return Limits(started_at=time.monotonic(), deadline_s=float("inf"))


@dataclass(frozen=True)
class TrafficContext:
    """What the collector hands every level-full family's ``run(snap, context)``."""

    thresholds: Thresholds
    limits: Limits
    budget: Optional[OutputBudget] = None  # shared with every command of the collection
    progress: Optional[Progress] = None  # hears which test starts (a terminal status line)
    sysfs: Any = None  # the collection's SysfsReader (``read_text(path)``); None: read nothing

    def say(self, message: str) -> None:
        if self.progress is not None:
            self.progress(message)
