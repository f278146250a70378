"""The loopback family (source ``perftest``, level full): ``ib_write_bw`` between two
processes of the node on every ACTIVE InfiniBand port -> ``Snapshot.loopback``.

It is the only way to catch a port that is ACTIVE, at full rate and error-free but delivers
half its bandwidth.

**What it runs** (``run``, in level full's traffic phase, after the read-only commands): one
test per ACTIVE InfiniBand port of a graded HCA, all at once, each pinned to its HCA's NUMA
node, with ``--use_cuda`` on the HCA's rail GPU (from the GPU topology family's reading of
``nvidia-smi topo -m``) when ``perftest_gdr`` is set, and one retry of every run below its
floor while the phase's deadline leaves time: ``ibdiag.families.loopback.traffic``.

**What it gives**: ``Snapshot.loopback``, one ``LoopbackAttempt`` per attempt. Each client run
is one attempt; its server is the run whose role names the same client port and attempt. Ports,
attempt and the ``--use_cuda`` GPU of each side come from the roles alone (``loopback client
mlx5_0:1 attempt 2 gpu 3``: what the plan knew when it planned the run), never from the argv
that ran - numactl may prefix it, a site may wrap it. The bandwidth and the errors come from
perftest's output (``parser``), parsed here only: the retry decision while collecting
(``traffic.client_gbps``) reads it with the same ``parser.parse_run``. What became of the client run
(``RunOutcome``: never started, not installed, timed out...) is on the attempt, for the check.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple

from ibdiag import roles
from ibdiag.facts.loopback import LoopbackAttempt
from ibdiag.families import Runs, Update, outcome_of
from ibdiag.model import CommandRun, Device, Snapshot
from ibdiag.thresholds import Thresholds

if TYPE_CHECKING:
    from ibdiag.families._traffic import TrafficContext
    from ibdiag.families.loopback.parser import PerftestResult

SOURCE = "perftest"
LEVEL = "full"
ORDER = 70  # after the GPU topology (60): its rails pick each HCA's --use_cuda GPU


def bound_s(thresholds: Thresholds) -> float:
    """Its share of level full's bound: two waves of ib_write_bw (the attempt and its retry),
    each its server's head start + duration + start-up allowance."""
    from ibdiag.bandwidth import perftest_timeout_s
    from ibdiag.families.loopback.traffic import SERVER_START_S

    return 2 * (SERVER_START_S + perftest_timeout_s(thresholds))


def run(snap: Snapshot, context: TrafficContext) -> Snapshot:
    """``snap`` with every ib_write_bw run of the node recorded (module docstring)."""
    from ibdiag.families.loopback import traffic
    from ibdiag.targets import is_graded

    thresholds = context.thresholds
    cpulists: Dict[int, str] = {}
    numa_nodes = {dev.pci.numa_node for dev in snap.devices if dev.pci is not None}
    for node in sorted(n for n in numa_nodes if n is not None) if context.sysfs else ():
        text, _ = context.sysfs.read_text(f"devices/system/node/node{node}/cpulist")
        if text and text.strip():
            cpulists[node] = text.strip()
    tests = traffic.plan_loopback(
        snap.devices,
        thresholds,
        graded=lambda dev: is_graded(dev, thresholds),
        gpu_near=gpu_near(snap),
        pin_for=traffic.numa_pinning(os.environ.get("PATH", os.defpath), cpulists),
    )
    runs = traffic.run_loopback(tests, thresholds, context.progress, context.limits, context.budget)
    return snap.model_copy(update={"commands": {**snap.commands, **runs}})


def gpu_near(snap: Snapshot) -> Callable[[str], Optional[int]]:
    """HCA name -> index of its GPU (PIX/PXB rail pairing), from ``nvidia-smi topo -m`` if it
    ran: the GPU topology family's reading, the one that fills ``Snapshot.gpu_topology``."""
    from ibdiag.families.gpu_topology import read_gpu_topology

    # The one-to-one rail pairing, not each HCA's nearest GPU: on a DGX A100 two HCAs share
    # a PCIe switch with two GPUs, and two loopbacks on one GPU would halve both.
    topology = read_gpu_topology(Runs(snap.commands))
    return (topology.rail_gpus() if topology is not None else {}).get


def interpret(snap: Snapshot, runs: Runs) -> Update:
    """``Snapshot.loopback`` from the loopback runs (None: none ran)."""
    return Update(node={"loopback": read_loopback(runs, snap.devices)})


def read_loopback(runs: Runs, devices: Sequence[Device] = ()) -> Optional[List[LoopbackAttempt]]:
    """Every recorded attempt, in the order the tests were planned: the first attempts, then
    the retries, each in ``devices``' port order (``traffic.plan_loopback``'s; a port not among
    them after, by name). None when no loopback test ran (below level full, no ACTIVE
    InfiniBand port, an older bundle). A server whose client was not recorded is left out."""
    clients: Dict[Tuple[str, Optional[int]], Tuple[roles.Role, CommandRun]] = {}
    servers: Dict[Tuple[str, Optional[int]], Tuple[roles.Role, CommandRun]] = {}
    for recorded in runs.of("loopback"):
        role = recorded.role
        if role is not None:
            side = clients if role.step == "client" else servers
            side.setdefault((role.target, role.attempt), (role, recorded))
    if not clients and not servers:
        return None
    attempts = [
        attempt_of(client, recorded, *servers.get(key, (None, None)))
        for key, (client, recorded) in clients.items()
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
        attempt=role.attempt or 1,  # a loopback role always names its attempt (1, 2)
        gpu=role.gpu,
        server_gpu=server_role.gpu if server_role else None,
        gbps=gbps,
        why_not=why_not,
        client_role=role,
        server_role=server_role if server is not None else None,
        client_run=outcome_of(client),
        problems=list(parsed.problems),
    )


def perftest_output(recorded: CommandRun) -> PerftestResult:
    """perftest's output of one side (stdout, then stderr: its errors go there), parsed."""
    from ibdiag.families.loopback.parser import parse_run

    return parse_run(recorded.stdout, recorded.stderr)


def _port(target: str) -> Tuple[str, int]:
    """``mlx5_0:1`` -> ("mlx5_0", 1): a role names a port as ``Device.target`` does."""
    device, _, number = target.rpartition(":")
    return device, int(number)


def _planned_order(attempt: LoopbackAttempt, planned: Dict[str, int]) -> Tuple[int, int, str]:
    """First attempts before retries (a retry's wave runs after the first), then the port's
    place in the plan; ports the devices do not list last, by name."""
    client = attempt.client
    return (attempt.attempt, planned.get(client, len(planned)), client)
