"""Shared by the command-based checks: find a recorded run and say why it gave nothing usable."""

from __future__ import annotations

from typing import List, Optional, Tuple

from ibdiag.model import CommandRun, Result, Snapshot, Status


def usable_run(snap: Snapshot, argv: List[str]) -> Tuple[Optional[CommandRun], Optional[str]]:
    """(the run, None) when ``argv`` ran successfully; else (None, why not, in one line)."""
    run = snap.command(argv)
    if run is None:
        return None, f"`{' '.join(argv)}` was not collected (level quick, or an older bundle)"
    failure = run.failure()
    if failure is not None:
        return None, failure
    return run, None


def skipped(target: str, reason: str, argv: List[str]) -> Result:
    return Result(target=target, status=Status.SKIP, message=reason, evidence=[" ".join(argv)])
