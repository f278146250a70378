"""A node's Slurm state through ``scontrol``, and the rules for draining and resuming it.

Healthy, from Slurm's side: a node ibdiag found sick is DRAIN with a reason that starts with
``ibdiag:``, and a node ibdiag drained is resumed once it is healthy again - unless its reason
is *held*: a fault that does not heal by itself (a counter that rose, a link that flapped: a
drained node carries no traffic, so the quiet that follows proves nothing). Held reasons start
``ibdiag: held:`` (any hook) or ``ibdiag: epilog:`` (errors a job drove); whichever hook wrote
one, no hook replaces or resumes it: only an admin does (``State=RESUME``). Everything else
belongs to the admin: a reason that does not start with ``ibdiag:`` ("hw repair ticket 4411",
"Not responding", "Prolog error") is never overwritten and never resumed.

Every ``scontrol`` call runs under a short timeout that kills its whole process group (a hung
slurmctld must not hang a prolog); a failed call raises ``SlurmError`` with one line that says
why, never a traceback.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import List, Optional

from ibdiag.drain_reason import REASON_PREFIX
from ibdiag.held import clean_reason, is_held
from ibdiag.slurm import DEFAULT_SCONTROL_TIMEOUT_S

# "Reason=ibdiag: mlx5_6:1 link.state [root@2026-11-21T16:51:00]": who set it and when.
_REASON_STAMP = re.compile(r"\s*\[[^\[\]]*@[^\[\]]*\]\s*$")
_STATE = re.compile(r"(?:^|\s)State=(\S+)")


class SlurmError(Exception):
    """scontrol could not be run, timed out, or refused; the message is one line."""


@dataclass(frozen=True)
class NodeRecord:
    """What ``scontrol show node`` says about one node."""

    name: str
    state: str  # "IDLE", "IDLE+DRAIN", "MIXED+DRAIN", "DOWN+NOT_RESPONDING", ...
    reason: Optional[str]  # without the "[user@time]" stamp; None when there is none

    @property
    def drained(self) -> bool:
        """DRAIN, DRAINING or DRAINED in any form: no new job will be started on it."""
        return "DRAIN" in self.state.upper()

    @property
    def reason_is_ours(self) -> bool:
        return self.reason is not None and self.reason.startswith(REASON_PREFIX)

    @property
    def held(self) -> bool:
        """ibdiag's reason for a fault that does not heal by itself: only an admin resumes."""
        return self.reason is not None and is_held(self.reason)


def parse_show_node(name: str, text: str) -> NodeRecord:
    """The state and reason out of ``scontrol show node NAME`` (its multi-line form)."""
    state = None
    reason = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("Reason="):
            reason = _REASON_STAMP.sub("", stripped[len("Reason=") :]).strip() or None
        elif state is None:
            found = _STATE.search(line)
            if found:
                state = found.group(1)
    if state is None:
        raise SlurmError(f"scontrol show node {name}: no State= in its output")
    return NodeRecord(name=name, state=state, reason=reason)


class Scontrol:
    """``scontrol show node`` / ``update`` for one node, each call under ``timeout_s``.

    ``until``: a ``time.monotonic()`` instant no call may run past (the hook's own deadline);
    a call that would start after it fails at once.
    """

    def __init__(
        self,
        node: str,
        program: str = "scontrol",
        timeout_s: float = DEFAULT_SCONTROL_TIMEOUT_S,
        until: Optional[float] = None,
    ) -> None:
        self.node = node
        self.program = program
        self.timeout_s = float(timeout_s)
        self.until = until

    def show(self) -> NodeRecord:
        return parse_show_node(self.node, self._run(["show", "node", self.node]))

    def drain(self, reason: str) -> None:
        self._run(["update", f"NodeName={self.node}", "State=DRAIN", f"Reason={reason}"])

    def resume(self) -> None:
        self._run(["update", f"NodeName={self.node}", "State=RESUME"])

    def _run(self, args: List[str]) -> str:
        from ibdiag.runner.command_runner import Runner

        timeout = self.timeout_s
        if self.until is not None:
            timeout = min(timeout, self.until - time.monotonic())
        what = f"{self.program} {' '.join(args[:2])}"
        if timeout <= 0:
            raise SlurmError(f"{what}: not run, the deadline had passed")
        run = Runner(timeout_s=timeout, deadline_s=timeout, max_workers=1).run(
            [self.program, *args]
        )
        problem = run.failure()
        if problem is not None:
            raise SlurmError(f"{what}: {problem}")
        return run.stdout


def mark_unhealthy(scontrol: Scontrol, reason: str) -> str:
    """Drain the node with ``reason`` unless someone else's reason is there, or a held one of
    ours (the first fault that does not heal by itself stays until an admin resumes); what
    was done.

    Our own earlier reason is replaced when it differs (the node's problem changed, or the
    same finding is now held); the same reason is not set again (Slurm would restamp its time).
    """
    reason = clean_reason(reason)
    record = scontrol.show()
    if record.reason is not None and not record.reason_is_ours:
        return (
            f"left alone: {record.name} is {record.state} with a reason not ours: {record.reason}"
        )
    if record.drained and record.held:
        return f"already drained, held for an admin: {record.name}: {record.reason}"
    if record.drained and record.reason == reason:
        return f"already drained: {record.name}: {reason}"
    scontrol.drain(reason)
    return f"drained {record.name}: {reason}"


def mark_healthy(scontrol: Scontrol) -> str:
    """Resume the node only when ibdiag drained it (its reason starts with ``ibdiag:``), but
    not for a held reason (a counter rise, a flap, errors a job drove): an admin resumes
    those."""
    record = scontrol.show()
    if not record.drained:
        return f"nothing to resume: {record.name} is {record.state}"
    if not record.reason_is_ours:
        reason = record.reason or "no reason"
        return f"left alone: {record.name} is {record.state} with a reason not ours: {reason}"
    if record.held:
        return (
            f"left drained: {record.name}: {record.reason} (a fault that does not heal by "
            "itself: a drained node's quiet counters prove nothing; resume by hand once "
            f"checked: scontrol update NodeName={record.name} State=RESUME)"
        )
    scontrol.resume()
    return f"resumed {record.name} (was: {record.reason})"
