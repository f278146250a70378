"""Slurm's three places to run ibdiag: the job prolog, the job epilog and HealthCheckProgram.

- Prolog (before every job): a quick check. Healthy: exit 0 and the job's baseline saved to
  ``<state dir>/job-<id>.json``. Sick (CRITICAL): drain with ibdiag's stable reason, then exit
  non-zero, which makes Slurm requeue the job on another node.
- Epilog (after every job): grades counter and kernel-log changes since the job's baseline, so
  errors the job itself drove (a cable that fails under load) drain the node before the next
  job lands there - with a reason starting ``ibdiag: epilog:``. The baseline is always removed.
- Health check (every HealthCheckInterval): Slurm ignores its exit code, so it drains by itself
  and resumes nodes ibdiag drained once they are healthy again - except held drains: a drained
  node carries no traffic, so errors that only traffic shows cannot be seen to stop; an admin
  resumes those. Counters are judged on their change since the previous health check.

Held: any hook that drains for a failure of a check graded on change since a baseline (error
counters that rose, a link that went down, a kernel-log fault: ``CheckSpec.takes_baseline``)
writes ``ibdiag: held: ...``; the epilog's ``ibdiag: epilog: ...`` are held too (``ibdiag.held``,
shared with ``check --reason`` and NHC). No hook replaces or resumes a held reason
(``ibdiag.slurm.scontrol``), whichever wrote it first.

Every hook returns ``GO_ON`` (0) or ``SICK`` (2), the exit contract of
``ibdiag.cli.slurm`` and contrib/slurm/ibdiag-slurm-hook: ``GO_ON`` when nothing is left
for Slurm to do (healthy, a warning, not judged, or sick and drained by the epilog or health
check itself), ``SICK`` when Slurm must see a failure (the prolog's job must not start here; the
epilog or health check could not drain the node). A hook that cannot run as configured raises
``HookError`` (exit 3).

A WARNING never drains. UNKNOWN (ibdiag could not judge: no InfiniBand and none expected)
never drains either unless ``strict``: one configuration slip must not drain a whole cluster.

Each hook finishes inside its deadline: the check runs in a worker thread that the hook stops
waiting for (a sysfs read of a hung HCA blocks in the kernel and cannot be interrupted), and
every ``scontrol`` call is bounded by its own timeout and by the same deadline.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Callable, FrozenSet, Optional

from ibdiag.errors import IbdiagError
from ibdiag.exit_codes import ExitCode
from ibdiag.held import epilog_reason, report_reason
from ibdiag.model import Report, Verdict
from ibdiag.slurm.scontrol import Scontrol, SlurmError, mark_healthy, mark_unhealthy

HEALTHCHECK_STATE = "healthcheck.json"
GO_ON = ExitCode.OK  # exit code: nothing left for Slurm to do
SICK = ExitCode.CRITICAL  # exit code: sick and Slurm must see a failure (the script: Slurm's 1)

# grade(baseline_path or None, save_path or None, seconds) -> Report: collect this node, grade
# it (against the baseline when given), save its snapshot to save_path; commands stop in time.
Grader = Callable[[Optional[str], Optional[str], float], Report]


class HookError(IbdiagError):
    """The hook cannot run as configured (bad job id, unusable state dir): one line."""


@dataclass
class HookContext:
    """What every hook needs: where to keep baselines, how to reach Slurm, when to stop."""

    state_dir: str
    scontrol: Scontrol
    deadline_at: float  # time.monotonic() by which the hook must have finished
    log: Callable[[str], None]
    strict: bool = False
    # ids of the checks graded on change since a baseline: a drain for one of their failures
    # is held (the fault does not heal by itself)
    change_checks: FrozenSet[str] = frozenset()

    def seconds_for_check(self) -> float:
        """The deadline less what two scontrol calls (show, update) may take afterwards."""
        reserve = 2 * self.scontrol.timeout_s + 0.5
        return max(1.0, self.deadline_at - time.monotonic() - reserve)


class CheckTimedOut(Exception):
    def __init__(self, seconds: float) -> None:
        super().__init__(f"the node check did not finish within {seconds:.0f} s")
        self.seconds = seconds


def job_baseline_path(state_dir: str, job_id: str) -> str:
    """``<state dir>/job-<id>.json``; the id must be Slurm's (digits, or an array's 12_3)."""
    if not job_id or not all(part.isdigit() for part in job_id.split("_", 1)):
        raise HookError(f"not a Slurm job id: {job_id!r} (is SLURM_JOB_ID set?)")
    return os.path.join(state_dir, f"job-{job_id}.json")


def prolog(ctx: HookContext, grade: Grader, job_id: str) -> int:
    """GO_ON: the job may start (healthy, warning, or not judged); SICK: drained (or the drain
    failed and Slurm drains with "Prolog error"): the job must not start here."""
    path = job_baseline_path(ctx.state_dir, job_id)
    _make_state_dir(ctx.state_dir)
    try:
        report = _run_check(ctx, grade, None, path)
    except CheckTimedOut as exc:
        _drain(ctx, f"ibdiag: prolog check timed out ({exc})")
        return SICK
    sick = report.verdict == Verdict.CRITICAL
    if not sick:
        _note_not_ok(ctx, report)
    if sick or (report.verdict == Verdict.UNKNOWN and ctx.strict):
        _remove(ctx, path)  # the job will not run here: no epilog will want it
        _drain(ctx, _reason(ctx, report) if sick else "ibdiag: could not judge the node")
        return SICK
    return GO_ON


def epilog(ctx: HookContext, grade: Grader, job_id: str) -> int:
    """GO_ON: healthy, or sick and drained by us; SICK: sick but the drain failed (Slurm then
    drains the node with its own "Epilog error"). The job's baseline is removed in every case.

    Graded against the job's baseline, its reasons start ``ibdiag: epilog:`` - errors the job's
    traffic drove, which the health check leaves for an admin to resume. Without a baseline
    (the prolog failed or did not run) it grades since boot, with plain ``ibdiag:`` reasons."""
    path = job_baseline_path(ctx.state_dir, job_id)
    try:
        baseline = path if os.path.lexists(path) else None
        if baseline is None:
            ctx.log(f"no baseline for job {job_id} (did the prolog run?): grading since boot")
        reason_for = epilog_reason if baseline is not None else (lambda reason: reason)
        try:
            report = _run_check(ctx, grade, baseline, None)
        except CheckTimedOut as exc:
            return _drained_or_sick(ctx, reason_for(f"ibdiag: check timed out ({exc})"))
    finally:
        _remove(ctx, path)
    if report.verdict == Verdict.CRITICAL:
        return _drained_or_sick(ctx, _reason(ctx, report, after_job=baseline is not None))
    _note_not_ok(ctx, report)
    if report.verdict == Verdict.UNKNOWN and ctx.strict:
        return _drained_or_sick(ctx, reason_for("ibdiag: could not judge the node"))
    return GO_ON


def healthcheck(ctx: HookContext, grade: Grader) -> int:
    """Drain when sick, resume when ibdiag drained the node and it is healthy again.

    GO_ON: healthy, a warning (logged; never the verdict's Nagios 1), not judged, or sick and
    drained; SICK: sick but the drain failed (the next health check tries again)."""
    _make_state_dir(ctx.state_dir)
    state = os.path.join(ctx.state_dir, HEALTHCHECK_STATE)
    try:
        report = _run_check(ctx, grade, state if os.path.lexists(state) else None, state)
    except CheckTimedOut as exc:
        return _drained_or_sick(ctx, f"ibdiag: health check timed out ({exc})")
    if report.verdict == Verdict.CRITICAL or (report.verdict == Verdict.UNKNOWN and ctx.strict):
        return _drained_or_sick(ctx, _reason(ctx, report) or "ibdiag: could not judge the node")
    _note_not_ok(ctx, report)
    if report.verdict != Verdict.UNKNOWN:  # UNKNOWN: cannot tell, leave the node as it is
        _resume(ctx)
    return GO_ON


# -- internals ---------------------------------------------------------------------------------


def _run_check(ctx: HookContext, grade: Grader, baseline: Optional[str], save: Optional[str]):
    """Run the grader in a worker thread; CheckTimedOut when it is not done in time."""
    seconds = ctx.seconds_for_check()
    outcome: dict = {}

    def work() -> None:
        try:
            outcome["report"] = grade(baseline, save, seconds)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            outcome["error"] = exc

    worker = threading.Thread(target=work, name="ibdiag-check", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise CheckTimedOut(seconds)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["report"]


def _reason(ctx: HookContext, report: Report, after_job: bool = False) -> str:
    """The report's drain reason ("" when nothing is wrong): the epilog's when graded against
    a job's baseline (``after_job``), else held when a check graded on change failed
    (``ibdiag.held``, as ``check --reason`` prints it)."""
    if after_job:
        from ibdiag.render.text import reason_line

        line = reason_line(report)
        return epilog_reason(line) if line else line
    return report_reason(report, ctx.change_checks)


def _drain(ctx: HookContext, reason: str) -> bool:
    """Drain with ``reason``; False only when scontrol failed (the log says why)."""
    try:
        ctx.log(mark_unhealthy(ctx.scontrol, reason))
        return True
    except SlurmError as exc:
        ctx.log(f"could not drain the node ({reason}): {exc}")
        return False


def _drained_or_sick(ctx: HookContext, reason: str) -> int:
    """Drain with ``reason``: GO_ON when that worked (or an admin's reason is kept), else SICK."""
    return GO_ON if _drain(ctx, reason) else SICK


def _resume(ctx: HookContext) -> None:
    try:
        ctx.log(mark_healthy(ctx.scontrol))
    except SlurmError as exc:
        ctx.log(f"could not check or resume the node: {exc}")


def _note_not_ok(ctx: HookContext, report: Report) -> None:
    if report.verdict != Verdict.OK:
        ctx.log(f"{report.verdict.value}: {_reason(ctx, report) or report.verdict_reason}")


def _make_state_dir(path: str) -> None:
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise HookError(f"cannot create the state directory {path}: {exc.strerror}") from exc


def _remove(ctx: HookContext, path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        ctx.log(f"could not remove the job baseline {path}: {exc.strerror}")
