"""The results a check gives about a run that gave no data, from its typed ``RunOutcome``
(``ibdiag.facts.outcome``): a skip with the reason, or the warn of a symptom.

Checks use these instead of reading runs: the judging was done once, by the family that
interpreted the run (``ibdiag.families.outcome_of``).
"""

from __future__ import annotations

from typing import Optional

from ibdiag.facts.outcome import RunOutcome
from ibdiag.model import Result, Status
from ibdiag.roles import Role


def not_collected(role: Role) -> str:
    """Why there is no outcome at all for ``role``: it was not planned at this level."""
    return f"`{role}` was not collected (level quick, or not planned here)"


def why_no_data(outcome: Optional[RunOutcome], role: Role) -> str:
    """One line: why ``role`` gave no data (its outcome's reason, or not collected)."""
    if outcome is None:
        return not_collected(role)
    return outcome.reason or f"`{outcome.command}` gave no usable output"


def evidence(outcome: Optional[RunOutcome], role: Role) -> str:
    """What a result about ``role`` names as evidence: the command line as it ran, or the role
    when nothing ran."""
    return outcome.command if outcome is not None else str(role)


def skipped(target: str, reason: str, evidence: str) -> Result:
    """The skip of ``target``: ``reason`` in one line, ``evidence`` the command line (or the
    role, when nothing ran)."""
    return Result(target=target, status=Status.SKIP, message=reason, evidence=[evidence])


def symptom_result(
    target: str,
    outcome: RunOutcome,
    what: str,
    where: str,
    meaning: str,
    hint: Optional[str] = None,
) -> Result:
    """The warn for a run whose failure is a symptom: ``what`` (``RunOutcome.symptom``)
    happened to the command on ``where`` (e.g. "ACTIVE port mlx5_0:1"), which may mean
    ``meaning``."""
    tool = outcome.tool
    if what.startswith(f"{tool} "):  # a failure line already names the tool
        what = what[len(tool) + 1 :]
    return Result(
        target=target,
        status=Status.WARN,
        message=f"`{outcome.command}` on {where} {what} ({meaning})",
        observed=outcome.symptom_kind(),  # stable: a drain reason names this, not the message
        hint=hint,
        evidence=[outcome.command],
    )
