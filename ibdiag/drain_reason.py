"""The drain reason of a Report: one stable line naming its worst finding.

A pure function of the Report's results (no grading, no I/O), so the renderers, the Slurm hooks
and the fleet read it without reaching into the grader. Healthy: "" (nothing to drain for).
"""

from __future__ import annotations

from typing import Sequence

from ibdiag.model import Report, Result, Status

REASON_PREFIX = "ibdiag:"  # every drain reason ibdiag gives (Slurm, NHC) starts with it


def drain_reason(report: Report) -> str:
    """One stable line naming the report's worst finding, for a drain reason (``check
    --reason``, the Slurm hooks): "" when nothing is wrong.

    Worst: the first fail, else the first error, else the first warning, in the order the
    checks ran ("and more" when that status has others). Slurm groups drained nodes by their
    reason, so it changes only when the finding does: the target, the check, then the result's
    ``subject`` - the counter (``link_downed``, never its increase), or a number the check
    puts in stable words because the number is the finding (``100<200 Gb/s``, ``7/8 HCAs``) -
    else the observed value when that is a word (a state, a kernel-log signature id); never a
    count of errors, a rate per hour, a time or a line number. Printers make it one safe line
    (``ibdiag.render.text.reason_line``).
    """
    return reason_of(report.results)


def reason_of(results: Sequence[Result]) -> str:
    """``drain_reason`` of these results (in the order their checks ran)."""
    for status in (Status.FAIL, Status.ERROR, Status.WARN):
        hits = [result for result in results if result.status == status]
        if hits:
            first = hits[0]
            word = first.subject or (first.observed if isinstance(first.observed, str) else None)
            detail = f" {word}" if word else ""
            more = " and more" if len(hits) > 1 else ""
            return f"{REASON_PREFIX} {first.target} {first.check_id}{detail}{more}"
    return ""
