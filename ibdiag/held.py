"""Held drain reasons: faults that do not heal by themselves, left for an admin to resume.

A drained node carries no traffic, so an error counter that stops rising, a link that stops
flapping or a kernel log that goes quiet proves nothing: whoever drained the node for one of
those must not resume it when the next check finds no *new* fault. Such a fault is a failure of
a check graded on change since a baseline (``CheckSpec.takes_baseline``: error counters, kernel
log, ...), and its reason is marked ``ibdiag: held: ...``; the Slurm epilog's reasons (errors a
job drove) are ``ibdiag: epilog: ...`` and held too. Every place that drains or resumes honours
the mark: the Slurm hooks (``ibdiag.slurm.scontrol``) and NHC's ``check_ibdiag``
(contrib/nhc/ibdiag.nhc), which read it from ``check --reason``'s line.

Healthy: a held reason is written once, by whichever drains first, and stays until an admin
resumes the node; a fault that is seen to come back (a port stuck in INIT) is never held.
"""

from __future__ import annotations

from typing import AbstractSet, FrozenSet

from ibdiag.drain_reason import REASON_PREFIX
from ibdiag.model import Report, Status
from ibdiag.registry import Registry

# The epilog's reasons: errors a job's traffic drove.
EPILOG_PREFIX = f"{REASON_PREFIX} epilog:"
# Any drain's reason for a fault that does not heal by itself (a counter rise, a flap).
HELD_PREFIX = f"{REASON_PREFIX} held:"
HELD_PREFIXES = (EPILOG_PREFIX, HELD_PREFIX)


def change_checks(registry: Registry, level: str) -> FrozenSet[str]:
    """The ids of the checks of ``level`` graded on change since a baseline: a failure of one
    of them is a held fault."""
    return frozenset(spec.id for spec in registry.for_level(level) if spec.takes_baseline)


def holds(report: Report, changes: AbstractSet[str]) -> bool:
    """True when a check graded on change (``changes``) failed: the drain must be held."""
    return any(
        result.status == Status.FAIL and result.check_id in changes for result in report.results
    )


def report_reason(report: Report, changes: AbstractSet[str]) -> str:
    """The report's drain reason (``check --reason``; "" when nothing is wrong), marked held
    when a check graded on change failed."""
    from ibdiag.render.text import reason_line

    line = reason_line(report)
    return held_reason(line) if line and holds(report, changes) else line


def is_held(reason: str) -> bool:
    """A reason only an admin may resume (held, or the epilog's)."""
    return reason.startswith(HELD_PREFIXES)


def epilog_reason(reason: str) -> str:
    """ "ibdiag: mlx5_3:1 counters.port_errors" -> "ibdiag: epilog: mlx5_3:1 ..."."""
    return _marked(EPILOG_PREFIX, reason)


def held_reason(reason: str) -> str:
    """ "ibdiag: mlx5_3:1 counters.port_errors link_downed" -> "ibdiag: held: mlx5_3:1 ...";
    a reason held already (the epilog's too) is kept as it is."""
    return _marked(HELD_PREFIX, reason)


def _marked(prefix: str, reason: str) -> str:
    line = clean_reason(reason)
    if is_held(line):
        return line
    return clean_reason(f"{prefix} {line[len(REASON_PREFIX) :].strip()}")


def clean_reason(reason: str) -> str:
    """One line with the ``ibdiag:`` prefix, in the safe characters and length of every
    ibdiag drain reason (``ibdiag.render.text.reason_text``)."""
    from ibdiag.render.text import reason_text

    line = " ".join(reason.split())
    if not line.startswith(REASON_PREFIX):
        line = f"{REASON_PREFIX} {line}"
    return reason_text(line)
