"""The kernel log (``dmesg``, else ``journalctl -k``) as read: its HCA findings, typed.

Healthy: the log was readable and no line about an HCA matches a fault signature. Which
signatures are faults, and since when lines count (boot, or a baseline), is the check's to
say (``checks/kernel_log.py``); here are the findings as the log gave them, each classified
once against the family's catalogue (``ibdiag.families.kernel_log.signatures``) and
attributed to the HCA it concerns.
"""

from typing import List, Optional

from pydantic import Field

from ibdiag.facts._base import Fact
from ibdiag.facts.outcome import RunOutcome
from ibdiag.roles import RoleField


class KernelFinding(Fact):
    """One log line that matches a signature (``ibdiag.families.kernel_log.signatures``)."""

    signature: str  # KernelSignature.id, e.g. "mlx5.fw_fatal"
    device: Optional[str] = None  # the RDMA device it lands on; None: no HCA named (a probe
    # that failed before the device existed, a line naming only IPoIB or mlx in general)
    seconds: Optional[float] = None  # seconds since boot, when the line carries them
    line: str  # the message, its time stamp and host/tag removed


class KernelLog(Fact):
    """What the kernel log said about the HCAs, and where it came from.

    ``runs``: what became of each run tried (dmesg, then journalctl -k), in that order.
    ``role`` is the run the lines were read from (``kernel-log dmesg``, or ``kernel-log
    journalctl`` when dmesg gave nothing usable); None when neither did, and ``unusable`` then
    says why each was not (restricted by ``kernel.dmesg_restrict``, not installed, hung...),
    in the order they were tried. ``dated`` holds the seconds since boot of every line that
    carries them, in log order, and ``undated`` counts the others: what a baseline's cutoff
    needs to say how many lines it looked at (``lines_after``).
    """

    runs: List[RunOutcome] = Field(default_factory=list)
    role: Optional[RoleField] = None
    unusable: List[str] = Field(default_factory=list)
    findings: List[KernelFinding] = Field(default_factory=list)
    dated: List[float] = Field(default_factory=list)
    undated: int = 0
    problems: List[str] = Field(default_factory=list)

    def lines_after(self, cutoff: Optional[float]) -> int:
        """How many lines count from ``cutoff`` (seconds since boot; None: all of them).
        A line without a time stamp always counts: nothing says it came before."""
        if cutoff is None:
            return len(self.dated) + self.undated
        return sum(1 for seconds in self.dated if seconds > cutoff) + self.undated
