"""What ``ibdiag fleet run`` records: each node task's one status line (``NodeStatus``), each
expected node's outcome (``NodeOutcome``) and the run's summary, ``DIR/fleet-run.json``
(``FleetRun``).

A healthy run: every expected node ``answered`` (its ``DIR/<node>.json`` is an ibdiag report,
whatever its verdict - ``rc`` 0 to 3 are the node's answer, not a failure), ``never_answered``
empty, ``exit_code`` 0.
"""

from __future__ import annotations

from datetime import datetime
from typing import List, Optional

from pydantic import BaseModel, ConfigDict

from ibdiag.exit_codes import ExitCode

FLEET_RUN_KIND = "ibdiag-fleet-run"  # the summary's "kind": how a reader of DIR tells it apart
FLEET_RUN_SCHEMA_VERSION = 1
SUMMARY_NAME = "fleet-run.json"
# A never-answered node's reason when fleet run did not give it to srun for its Slurm state
# (drained, down, busy): the fleet report lists such a node as not run, not missing.
NOT_RUN_PREFIX = "not run: Slurm state "
# The one line a node task prints on stdout (srun forwards it): the marker, then NodeStatus JSON.
STATUS_MARKER = "ibdiag-fleet-node:"

# fleet run's exit codes: how complete the collection is (the nodes' health is in their
# reports, judged by `ibdiag fleet report`).
EXIT_ALL_ANSWERED = ExitCode.OK
EXIT_SOME_NEVER_ANSWERED = ExitCode.WARNING
EXIT_NOTHING_COLLECTED = ExitCode.UNKNOWN


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NodeStatus(_Frozen):
    """What one node's task says about its check, on one stdout line.

    ``report`` is the file name written in DIR (``None``: no report, ``error`` says why);
    ``rc`` the check's exit code (``None`` when it did not exit by itself: killed at the node
    time limit, or never started); ``size`` the report's bytes, so the launcher can tell a file
    it sees from the one the node wrote."""

    node: str
    rc: Optional[int] = None
    verdict: Optional[str] = None
    report: Optional[str] = None
    size: Optional[int] = None
    started_at: datetime
    ended_at: datetime
    timed_out: bool = False
    error: str = ""

    def line(self) -> str:
        """The stdout line: ``ibdiag-fleet-node: {...}`` (one line: JSON escapes newlines)."""
        return f"{STATUS_MARKER} {self.model_dump_json()}"


class NodeOutcome(_Frozen):
    """One expected node after the run: answered (a report in DIR) or not, and why not."""

    node: str
    answered: bool
    rc: Optional[int] = None  # the check's exit code (0-3 answers), as the node reported it
    verdict: Optional[str] = None
    report: Optional[str] = None  # file name in DIR
    started_at: Optional[datetime] = None  # the check's start and end on the node
    ended_at: Optional[datetime] = None
    duration_s: Optional[float] = None
    reason: str = ""  # why it never answered (one line); "" when it answered


class FleetRun(_Frozen):
    """``DIR/fleet-run.json``: the run as a whole. ``exit_code``: 0 every expected node
    answered; 1 some did not (the reports that came are in DIR); 3 none did, or the run was
    interrupted."""

    kind: str = FLEET_RUN_KIND
    schema_version: int = FLEET_RUN_SCHEMA_VERSION
    tool_version: str
    level: str
    node_timeout_s: float
    started_at: datetime
    ended_at: datetime
    out_dir: str
    srun_argv: List[str]  # empty when srun was never started (no node could run)
    srun_rc: Optional[int] = None
    srun_messages: List[str] = []  # the tail of what srun said (its errors, the tasks' noise)
    interrupted: bool = False
    expected: int
    answered_nodes: List[str]
    never_answered_nodes: List[str]
    unexpected_nodes: List[str] = []  # status lines from nodes not asked for (name mismatch)
    nodes: List[NodeOutcome]
    exit_code: int
