"""Level full's ib_write_bw runs (roles ``loopback client|server ...``) -> ``Snapshot.loopback``.

Each client run is one attempt; its server is the run whose role names the same client port
and attempt. Ports, attempt and the ``--use_cuda`` GPU of each side come from the roles alone
(``loopback client mlx5_0:1 attempt 2 gpu 3``: what the plan knew when it planned the run),
never from the argv that ran - numactl may prefix it, a site may wrap it. The bandwidth and
the errors come from perftest's output (``parsers.perftest``), parsed here only: the retry
decision while collecting (``active.client_gbps``) asks ``perftest_output`` too.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from ibdiag import roles
from ibdiag.facts.loopback import LoopbackAttempt
from ibdiag.model import CommandRun, Device


def interpret(fields: Dict[str, Any], commands: Dict[str, CommandRun]) -> Dict[str, Any]:
    return {"loopback": read_loopback(commands, fields.get("devices") or [])}


def read_loopback(
    commands: Dict[str, CommandRun], devices: Sequence[Device] = ()
) -> Optional[List[LoopbackAttempt]]:
    """Every recorded attempt, in the order the tests were planned: the first attempts, then
    the retries, each in ``devices``' port order (``active.plan_loopback``'s; a port not among
    them after, by name). None when no loopback test ran (below level full, no ACTIVE
    InfiniBand port, an older bundle). A server whose client was not recorded is left out."""
    clients: Dict[Tuple[str, Optional[int]], Tuple[roles.Role, CommandRun]] = {}
    servers: Dict[Tuple[str, Optional[int]], Tuple[roles.Role, CommandRun]] = {}
    for run in commands.values():
        role = run.role
        if role is not None and role.family == "loopback":
            side = clients if role.step == "client" else servers
            side.setdefault((role.target, role.attempt), (role, run))
    if not clients and not servers:
        return None
    attempts = [
        attempt_of(client, run, *servers.get(key, (None, None)))
        for key, (client, run) in clients.items()
    ]
    ports = [dev.target(port) for dev in devices for port in dev.ports]
    planned = {target: index for index, target in reversed(list(enumerate(ports)))}
    return sorted(attempts, key=lambda attempt: _planned_order(attempt, planned))


def attempt_of(
    role: roles.Role,
    client: CommandRun,
    server_role: Optional[roles.Role] = None,
    server: Optional[CommandRun] = None,
) -> LoopbackAttempt:
    """One attempt from its client run and the server run it wrote to (None: not recorded),
    each with what its role says."""
    device, port = _port(role.target)
    server_device, server_port = (None, None)
    if server_role is not None and server_role.server:
        server_device, server_port = _port(server_role.server)
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
        gpu=role.gpu,
        server_gpu=server_role.gpu if server_role else None,
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


def _planned_order(attempt: LoopbackAttempt, planned: Dict[str, int]) -> Tuple[int, int, str]:
    """First attempts before retries (a retry's wave runs after the first), then the port's
    place in the plan; ports the devices do not list last, by name."""
    client = attempt.client
    return (attempt.attempt, planned.get(client, len(planned)), client)
