"""Level full's ib_write_bw runs (roles ``loopback client|server ...``) -> ``Snapshot.loopback``.

Each client run is one attempt; its server is the run whose role names the same client port
and attempt. Ports and attempt come from the roles; what a role does not say - the TCP port and
the ``--use_cuda`` GPU of each side - from the argv the role's run ran
(``active.read_loopback_argv``, the inverse of the builder beside it). The bandwidth and the
errors come from perftest's output (``parsers.perftest``), parsed here only: the retry decision
while collecting (``active.client_gbps``) asks ``perftest_output`` too.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ibdiag import roles
from ibdiag.facts.loopback import LoopbackAttempt
from ibdiag.model import CommandRun


def interpret(fields: Dict[str, Any], commands: Dict[str, CommandRun]) -> Dict[str, Any]:
    return {"loopback": read_loopback(commands)}


def read_loopback(commands: Dict[str, CommandRun]) -> Optional[List[LoopbackAttempt]]:
    """Every recorded attempt, in the order the tests were planned (by TCP port: the first
    attempts, then the retries); None when no loopback test ran (below level full, no ACTIVE
    InfiniBand port, an older bundle). A server whose client was not recorded is left out."""
    clients: Dict[Tuple[str, int], Tuple[roles.LoopbackRole, CommandRun]] = {}
    servers: Dict[Tuple[str, int], Tuple[roles.LoopbackRole, CommandRun]] = {}
    for run in commands.values():
        role = roles.read_loopback(run.role)
        if role is not None:
            side = clients if role.side == "client" else servers
            side.setdefault((role.client, role.attempt), (role, run))
    if not clients and not servers:
        return None
    attempts = [
        attempt_of(client, run, servers.get(key, (None, None))[1])
        for key, (client, run) in clients.items()
    ]
    return sorted(attempts, key=_planned_order)


def attempt_of(
    role: roles.LoopbackRole, client: CommandRun, server: Optional[CommandRun]
) -> LoopbackAttempt:
    """One attempt from its client run and the server run it wrote to (None: not recorded)."""
    from ibdiag.sources.active import read_loopback_argv

    device, port = _port(role.client)
    sent = read_loopback_argv(client.argv)
    served = read_loopback_argv(server.argv) if server is not None else None
    server_role = roles.read_loopback(server.role) if server is not None else None
    server_device, server_port = _port(server_role.server) if server_role else (None, None)
    parsed = perftest_output(client)
    gbps = parsed.average_gbps
    why_not = None
    if gbps is None:
        errors = list(parsed.errors)
        if server is not None:
            errors += perftest_output(server).errors
        why_not = errors[0] if errors else (client.failure() or "no result row")
    return LoopbackAttempt.model_construct(
        client_device=device,
        client_port=port,
        server_device=server_device,
        server_port=server_port,
        attempt=role.attempt,
        tcp_port=sent.tcp_port if sent else None,
        gpu=sent.gpu if sent else None,
        server_gpu=served.gpu if served else None,
        gbps=gbps,
        why_not=why_not,
        client_role=client.role,
        server_role=server.role if server is not None else None,
        problems=list(parsed.problems),
    )


def perftest_output(run: CommandRun):
    """perftest's output of one side (stdout, then stderr: its errors go there), parsed."""
    from ibdiag.sources.parsers.perftest import parse_perftest

    return parse_perftest(f"{run.stdout}\n{run.stderr}")


def _port(target: str) -> Tuple[str, int]:
    """``mlx5_0:1`` -> ("mlx5_0", 1): a role names a port as ``Device.target`` does."""
    device, _, number = target.rpartition(":")
    return device, int(number)


def _planned_order(attempt: LoopbackAttempt) -> Tuple[bool, int, int, str]:
    """By TCP port (``perftest_base_port`` + the test's index; a retry ``RETRY_PORT_OFFSET``
    above), as the tests were planned; runs without one after, by attempt and port."""
    tcp = attempt.tcp_port
    return (tcp is None, tcp if tcp is not None else 0, attempt.attempt, attempt.client)
