"""Shared by the command-based checks: find a recorded run by its role (``ibdiag.roles``) and
say what its failure means.

A command that gave nothing usable is one of two things:

- **not applicable here** - a ``skip`` with the reason: not collected (level quick, an older
  bundle), never started (the run's deadline had passed), not installed, permission denied, or
  a failure the tool itself explains as not being able to reach the device from here: no access
  (``Operation not permitted``, a MAD device it may not open as this user) or no such device
  for it (a module not loaded, a container whose network namespace or /dev lacks what the
  host's sysfs shows: ``No such device``, ``No IB devices found``, ``can't be found``);
- **a symptom** - a ``warn`` naming the command and its target: it timed out (and was killed),
  was killed by a signal (SIGSEGV...), could not be executed, or exited non-zero *on a target
  the node shows* (an ACTIVE port, HCAs that sysfs lists) - a perfquery that hangs on an ACTIVE
  port is a hung firmware or a wedged MAD agent, not a tool to shrug off.

A check says whether a non-zero exit counts (``failing_counts``): an optional query (perfquery
-X, nvidia-smi) failing is no finding; the main query of a port failing is.
"""

from __future__ import annotations

import re
import signal
from typing import Optional, Tuple

from ibdiag.model import CommandRun, Result, Snapshot, Status

# What a tool prints when it cannot reach the device from here (this user's access, a module
# not loaded, another namespace): no finding about the node. A tool that reaches the device and
# whose query then fails, or that hangs or crashes, is one.
_NOT_HERE = re.compile(
    r"Permission denied|Operation not permitted|not permitted|insufficient permissions"
    r"|can't open UMAD port|Failed to open '[^']*' port|is ib_umad module loaded"
    r"|No such device|No such file or directory|can't be found|stat of IB device"
    r"|No IB devices found"
    r"|Failed to get IB devices list|Function not implemented",
    re.IGNORECASE,
)
_NOT_SUPPORTED = ("Operation not supported", "no stats available", "not supported")


def usable_run(snap: Snapshot, role: str) -> Tuple[Optional[CommandRun], Optional[str]]:
    """(the run, None) when the run of ``role`` (``ibdiag.roles``) succeeded; else (None, why
    not, in one line)."""
    run = snap.run(role)
    if run is None:
        return None, f"`{role}` was not collected (level quick, or an older bundle)"
    failure = run.failure()
    if failure is not None:
        return None, failure
    return run, None


def command_line(snap: Snapshot, role: str, otherwise: Optional[str] = None) -> str:
    """The evidence a result about ``role`` names: the command line of its run, as it ran;
    ``otherwise`` (else the role itself) when no run was recorded for it."""
    run = snap.run(role)
    if run is not None:
        return " ".join(run.argv)
    return otherwise if otherwise is not None else role


def skipped(target: str, reason: str, evidence: str) -> Result:
    """The skip of ``target``: ``reason`` in one line, ``evidence`` the command line (or the
    role, when nothing ran)."""
    return Result(target=target, status=Status.SKIP, message=reason, evidence=[evidence])


def not_supported(run: CommandRun) -> bool:
    """The tool says the device has nothing to give (ethtool's "Operation not supported" or
    "no stats available" from a driver without statistics): no finding about the node."""
    text = f"{run.stderr}\n{run.stdout}"
    return any(phrase in text for phrase in _NOT_SUPPORTED)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def symptom(run: Optional[CommandRun], failing_counts: bool = False) -> Optional[str]:
    """What the run's failure says about the node, in a phrase ("timed out after 1.0 s and was
    killed", "was killed by signal 11 (SIGSEGV)"); None when it is no symptom: it succeeded,
    was not collected or never started, is not installed, or could not reach the device from
    here - or exited non-zero and ``failing_counts`` is false."""
    if run is None or run.succeeded or run.skipped or run.not_found or run.permission_denied:
        return None
    if run.timed_out:
        return f"timed out after {run.duration_s:.1f} s and was killed"
    if run.error:
        return f"could not be run: {run.error}"
    if run.rc is not None and run.rc < 0:
        return f"was killed by signal {-run.rc} ({signal_name(-run.rc)})"
    if not failing_counts or run.rc is None:
        return None
    text = f"{run.stderr}\n{run.stdout}"
    if _NOT_HERE.search(text):
        return None
    return run.failure()  # "perfquery exited 5: ibwarn: ..."


def symptom_result(
    target: str, run: CommandRun, what: str, where: str, meaning: str, hint: Optional[str] = None
) -> Result:
    """The warn for a command whose failure is a symptom: ``what`` (from ``symptom``) happened
    to the command on ``where`` (e.g. "ACTIVE port mlx5_0:1"), which may mean ``meaning``."""
    command = " ".join(run.argv)
    tool = run.argv[0] if run.argv else "command"
    if what.startswith(f"{tool} "):  # a failure() line already names the tool
        what = what[len(tool) + 1 :]
    return Result(
        target=target,
        status=Status.WARN,
        message=f"`{command}` on {where} {what} ({meaning})",
        observed=symptom_kind(run),  # stable: a drain reason names this, not the message
        hint=hint,
        evidence=[command],
    )


def symptom_kind(run: CommandRun) -> str:
    """The stable word for a symptom: ``timed-out``, ``cannot-execute``, ``killed-by-SIGSEGV``,
    ``exit-5``."""
    if run.timed_out:
        return "timed-out"
    if run.error:
        return "cannot-execute"
    if run.rc is not None and run.rc < 0:
        return f"killed-by-{signal_name(-run.rc)}"
    return f"exit-{run.rc}"
