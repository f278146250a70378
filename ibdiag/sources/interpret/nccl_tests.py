"""The nccl-tests run -> ``Snapshot.nccl_tests``.

The run is the one recorded with role ``nccl-tests`` (``ibdiag.roles.NCCL_TESTS``), whatever
program the config named (all_reduce_perf, all_reduce_perf_mpi, a site's wrapper script): its
stdout and stderr together (NCCL writes its WARN lines to either) are parsed into an
``NcclTestsResult`` that records the role. A run that never started (the deadline left no time,
not installed, permission denied) printed nothing to read: the field stays None and the check
says why from the run itself. Parser problems are recorded on the result, never raised.
"""

from __future__ import annotations

from typing import Any, Dict

from ibdiag import roles
from ibdiag.model import CommandRun
from ibdiag.sources.parsers.nccl_tests import parse_nccl_tests


def interpret(fields: Dict[str, Any], commands: Dict[str, CommandRun]) -> Dict[str, Any]:
    """``{"nccl_tests": result}`` for the run of role nccl-tests; ``{}`` (the field stays None)
    when there is none or it never started."""
    run = next((run for run in commands.values() if run.role == roles.NCCL_TESTS), None)
    if run is None or run.skipped or run.not_found or run.permission_denied:
        return {}
    parsed = parse_nccl_tests(f"{run.stdout}\n{run.stderr}")
    return {"nccl_tests": parsed.model_copy(update={"role": run.role})}
