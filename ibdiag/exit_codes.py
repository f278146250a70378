"""What every ibdiag command exits with: the Nagios plugin convention, which Slurm, NHC and
monitoring tools already speak.

``OK`` 0 healthy; ``WARNING`` 1 a finding to look at, nothing that stops a job; ``CRITICAL`` 2
a fail (drain the node); ``UNKNOWN`` 3 ibdiag could not judge: bad usage, a bad config or input,
an internal error, or nothing could be collected. A usage error is 3, not click's default 2, so
that a Slurm prolog or NHC never mistakes a typo for a sick node.

Only the enum: ``ibdiag.entry`` imports it before anything else is loaded.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """The one table of exit codes (``Verdict.exit_code``, the fleet's, the Slurm hooks')."""

    OK = 0
    WARNING = 1
    CRITICAL = 2
    UNKNOWN = 3

    # Written as the number everywhere (a Prometheus sample, a test's "EXIT 2"), on Python 3.9
    # and 3.10 too, where an IntEnum's str() is "ExitCode.OK" (3.11 made it the number).
    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, format_spec: str) -> str:
        return format(self.value, format_spec)
