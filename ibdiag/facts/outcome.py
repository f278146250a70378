"""Why a run gave no data, as a typed fact: a family records one ``RunOutcome`` on its fact for
each run the fact came from, so a check explains a missing reading without ever seeing the run
(``ibdiag.families.outcome_of`` judges the run once, where the tool's text is read).

Healthy: ``no_data`` None - the run exited 0 and its output was read. Otherwise ``no_data``
says why, in a word a check can branch on (``NoData``), and ``reason`` in one line a person
reads ("perfquery timed out after 5.0 s and was killed").

Two kinds of "no data" (what ``symptom`` separates):
- **not applicable here** - never started (the deadline had passed, a name that may not go on a
  command line), not installed, no permission, no such device from here (a module not loaded, a
  container without /dev/infiniband), not supported by the device: a check skips with the
  reason;
- **a symptom** - timed out (and was killed), killed by a signal, could not be executed, or
  exited non-zero on a target the node shows (where the check counts such failures): a check
  warns, naming the command, the target and the stable word ``symptom_kind``.
"""

import enum
import signal
from typing import Optional

from ibdiag.facts._base import Fact
from ibdiag.roles import RoleField


class NoData(str, enum.Enum):
    """Why a run gave nothing usable. The first group is judged from any run by
    ``ibdiag.families.outcome_of``; a family may judge its own runs further (the far end's
    ``no-pma``, ``no-answer``...) from what only it knows."""

    NOT_STARTED = "not-started"  # never started: the deadline had passed, a refused name
    NOT_INSTALLED = "not-installed"  # not found on PATH
    NO_PERMISSION = "no-permission"  # permission denied / not permitted (not root?)
    NO_DEVICE = "no-device"  # the tool cannot reach the device from here (module, namespace)
    NOT_SUPPORTED = "not-supported"  # the device has nothing to give (a driver without stats)
    TIMED_OUT = "timed-out"  # killed at its timeout, with everything it started
    KILLED = "killed"  # killed by a signal (crashed)
    CANNOT_EXECUTE = "cannot-execute"  # exec format error, not executable, ...
    FAILED = "failed"  # exited non-zero having reached the device
    GARBAGE = "garbage"  # exited 0 but printed nothing a parser could read
    # The far end's own judgements (``ibdiag.families.partner.unread``):
    NO_UMAD = "no-umad"  # no umad device here (ib_umad not loaded, a container without it)
    NO_SM = "no-sm"  # no subnet manager has configured the far end yet (LID 0)
    VIRTUAL_FUNCTION = "virtual-function"  # a VF cannot send SMPs off the node
    NO_ANSWER = "no-answer"  # the far end of an ACTIVE port did not answer (MAD timeout)
    NO_PMA = "no-pma"  # the far end answers SMPs but not the PMA queries every port must
    IMPLAUSIBLE = "implausible"  # the far end answered what cannot be


# A run of these is cut short whatever the check: a hung or crashed tool is a symptom.
_ALWAYS_SYMPTOMS = (NoData.TIMED_OUT, NoData.KILLED, NoData.CANNOT_EXECUTE)


def signal_name(number: int) -> str:
    """``SIGSEGV`` for 11; ``signal 99`` for a number no signal has."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class RunOutcome(Fact):
    """What became of one run: its role and command line (the evidence a result names), and
    why it gave no data (``no_data`` None: it did)."""

    role: Optional[RoleField] = None  # None: a run an older ibdiag recorded without one
    command: str  # the command line as it ran
    no_data: Optional[NoData] = None
    reason: Optional[str] = None  # one line: why there is no data (None when there is)
    rc: Optional[int] = None  # exit status; negative: killed by that signal
    duration_s: float = 0.0
    error: Optional[str] = None  # why it could not be executed (CANNOT_EXECUTE)

    @property
    def tool(self) -> str:
        return self.command.split(" ", 1)[0] if self.command else "command"

    def symptom(self, failing_counts: bool = False) -> Optional[str]:
        """What the failure says about the node, in a phrase ("timed out after 1.0 s and was
        killed", "was killed by signal 11 (SIGSEGV)"); None when it is no symptom: it gave
        data, never started, is not installed, cannot reach the device from here - or exited
        non-zero and ``failing_counts`` is false (an optional query failing is no finding)."""
        if self.no_data == NoData.TIMED_OUT:
            return f"timed out after {self.duration_s:.1f} s and was killed"
        if self.no_data == NoData.CANNOT_EXECUTE:
            return f"could not be run: {self.error}"
        if self.no_data == NoData.KILLED and self.rc is not None:
            return f"was killed by signal {-self.rc} ({signal_name(-self.rc)})"
        if self.no_data == NoData.FAILED and failing_counts:
            return self.reason
        return None

    @property
    def cut_short(self) -> bool:
        """It hung, crashed or could not be executed: a symptom wherever it ran."""
        return self.no_data in _ALWAYS_SYMPTOMS

    def symptom_kind(self) -> str:
        """The stable word for a symptom (a drain reason names it, never the message):
        ``timed-out``, ``cannot-execute``, ``killed-by-SIGSEGV``, ``exit-5``."""
        if self.no_data == NoData.TIMED_OUT:
            return "timed-out"
        if self.no_data == NoData.CANNOT_EXECUTE:
            return "cannot-execute"
        if self.no_data == NoData.KILLED and self.rc is not None:
            return f"killed-by-{signal_name(-self.rc)}"
        return f"exit-{self.rc}"
