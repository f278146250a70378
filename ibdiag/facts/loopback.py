"""The ib_write_bw loopback runs of level full: ``Snapshot.loopback``, one entry per attempt.

Healthy: every ACTIVE InfiniBand port's client moved at least its floor (``ibdiag.bandwidth``;
graded by the perftest check, not here) to its server - the same port, or its partner HCA's
with ``perftest_pairing = "pairs"``. A run below its floor was tried once more (attempt 2).

An attempt is its client run and the server run it wrote to, found by their roles
(``loopback client mlx5_0:1 attempt 1 gpu 0``, ``loopback server mlx5_1:1 for mlx5_0:1
attempt 1 gpu 1``), which say everything here but what the runs printed: ports, attempt and
each side's GPU are what the plan knew, never read back from the argv that ran.
"""

from typing import List, Optional

from pydantic import Field

from ibdiag.facts._base import Fact
from ibdiag.facts.outcome import RunOutcome
from ibdiag.roles import RoleField


class LoopbackAttempt(Fact):
    """One attempt: what ran where, and the bandwidth it gave or why it gave none.

    ``gbps``: BW average in Gb/s at the largest message size the client printed (None: no
    result row). ``why_not`` (only when ``gbps`` is None): the first error line perftest
    printed, the client's before the server's; else why the client run failed
    (``CommandRun.failure()``); else "no result row". ``client_run``: what became of the client
    run (never started, not installed, timed out: ``RunOutcome``), what the check says when
    there is no bandwidth. ``problems``: what the parser could not
    make sense of in the client's output (capped).
    """

    client_device: str
    client_port: int
    server_device: Optional[str] = None  # None: no server run was recorded for it
    server_port: Optional[int] = None
    attempt: int
    gpu: Optional[int] = None  # the client's --use_cuda GPU (GPUDirect RDMA), from its role
    server_gpu: Optional[int] = None
    gbps: Optional[float] = None
    why_not: Optional[str] = None
    client_role: RoleField
    server_role: Optional[RoleField] = None
    client_run: Optional[RunOutcome] = None  # what became of the client run (None: hand-built)
    problems: List[str] = Field(default_factory=list)

    @property
    def client(self) -> str:
        """``mlx5_0:1``: the port the traffic starts from (the result's target)."""
        return f"{self.client_device}:{self.client_port}"

    @property
    def server(self) -> Optional[str]:
        """``mlx5_1:1``: the port the traffic went to; None when no server run was recorded."""
        if self.server_device is None or self.server_port is None:
            return None
        return f"{self.server_device}:{self.server_port}"
