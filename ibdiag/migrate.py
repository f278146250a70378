"""Upgrading what an older ibdiag wrote, in one versioned step at load time.

Every saved Snapshot (a baseline, a state file, a saved report's, a bundle's replay) passes
through ``upgrade`` before anything reads it, so no other module keeps an older format alive.
``SCHEMA_VERSION`` (``ibdiag.model``) says what today's format is; each step below says what
one version changed.

- **1 -> 2**: ``Snapshot.commands`` is keyed by each run's role (it was keyed by argv), and
  every planned run has a role. Runs recorded before roles were kept (``role`` None) get the
  role today's plan gives the same argv on the same devices (each family's ``plan``, its
  fallbacks included); the ib_write_bw runs are read together (a server and its client share a
  TCP port, attempts go in TCP port order: ``loopback_roles_before_roles``); the
  nccl-tests run is the one whose argv holds the program the recorded thresholds configured
  (``nccl_program``; ibdiag put it in the argv as is, after any launcher). A run that matches
  none keeps no role, filed by its argv, and the checks treat what it was for as not
  collected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from ibdiag import roles
from ibdiag.model import SCHEMA_VERSION, CommandRun, Snapshot, command_key


def upgrade(snapshot: Snapshot, nccl_program: Optional[str] = None) -> Snapshot:
    """``snapshot`` in today's format (the same object when it is already)."""
    if snapshot.schema_version >= SCHEMA_VERSION and all(
        run.role is not None and key == run.key for key, run in snapshot.commands.items()
    ):
        return snapshot
    commands = _with_roles(snapshot, nccl_program)
    return snapshot.model_copy(
        update={
            "schema_version": SCHEMA_VERSION,
            "commands": {run.key: run for run in commands.values()},
        }
    )


def reinterpret(snapshot: Snapshot, nccl_program: Optional[str] = None) -> Snapshot:
    """A saved snapshot (a baseline, a state file, a saved report's, a replayed bundle's)
    upgraded to today's format (``ibdiag.migrate``) with its facts parsed anew from its
    recorded runs by today's parsers, exactly as a live run would: what an older ibdiag stored
    in those fields is dropped first. ``nccl_program``: the ``nccl_tests`` of the thresholds
    the snapshot was graded with, when known. A snapshot without runs keeps its facts."""
    snapshot = upgrade(snapshot, nccl_program)
    if not snapshot.commands and snapshot.nccl_inspector is None:
        return snapshot
    from ibdiag.families import interpret, without_facts

    return interpret(without_facts(snapshot))


def _with_roles(snapshot: Snapshot, nccl_program: Optional[str]) -> Dict[str, CommandRun]:
    """The runs, each without a role given the one its argv had in today's plan."""
    unnamed = [run for run in snapshot.commands.values() if run.role is None]
    if not unnamed:
        return snapshot.commands
    planned = roles_by_argv(snapshot)
    planned.update(loopback_roles_before_roles(run.argv for run in unnamed))
    restored = {}
    for key, run in snapshot.commands.items():
        role = _role_of(run, planned, nccl_program) if run.role is None else None
        restored[key] = run if role is None else run.model_copy(update={"role": role})
    return restored


def roles_by_argv(snapshot: Snapshot) -> Dict[str, roles.Role]:
    """command key -> role of every read-only command this node's families would plan, their
    fallbacks included."""
    from ibdiag import families

    found: Dict[str, roles.Role] = {}
    for item in families.plan(snapshot, snapshot.sources):
        for one in (item, item.fallback):
            if one is not None and not one.refused:
                found[command_key(one.argv)] = one.role
    return found


def _role_of(
    run: CommandRun, planned: Dict[str, roles.Role], nccl_program: Optional[str]
) -> Optional[roles.Role]:
    role = planned.get(run.key)
    if role is not None:
        return role
    if isinstance(nccl_program, str) and nccl_program and nccl_program in run.argv:
        return roles.NCCL_TESTS
    return None


# -- the ib_write_bw runs of level full, recorded before roles ------------------------------


@dataclass(frozen=True)
class RecordedLoopback:
    """What one recorded ib_write_bw argv says: which side, which HCA port, TCP port, GPU."""

    side: str  # "server" or "client"
    device: str
    port: int
    tcp_port: int
    gpu: Optional[int]

    @property
    def target(self) -> str:
        return f"{self.device}:{self.port}"


def read_loopback_argv(argv: Sequence[str]) -> Optional[RecordedLoopback]:
    """Read back an argv ``LoopbackTest.argv`` built (after any numactl/taskset prefix); None
    when it is not an ib_write_bw run or lacks -d/-p.

    The inverse of ``ibdiag.families.loopback.traffic.ib_write_bw_argv`` (a test says the two
    agree), used only for runs recorded before roles were kept (``loopback_roles_before_roles``):
    today a run's role says all the interpreter needs (ports, attempt, GPU), and nothing reads
    its argv.
    """
    start = next((i for i, arg in enumerate(argv) if arg.rsplit("/", 1)[-1] == "ib_write_bw"), None)
    if start is None:
        return None
    options: Dict[str, str] = {}
    positional: List[str] = []
    args = list(argv[start + 1 :])
    index = 0
    while index < len(args):
        arg = args[index]
        if arg.startswith("--") and "=" in arg:
            key, value = arg.split("=", 1)
            options[key] = value
        elif arg in ("-d", "-i", "-p", "-s", "-D", "-q") and index + 1 < len(args):
            options[arg] = args[index + 1]
            index += 1
        elif not arg.startswith("-"):
            positional.append(arg)
        index += 1
    try:
        return RecordedLoopback(
            side="client" if positional else "server",
            device=options["-d"],
            port=int(options.get("-i", "1")),
            tcp_port=int(options["-p"]),
            gpu=int(options["--use_cuda"]) if "--use_cuda" in options else None,
        )
    except (KeyError, ValueError):
        return None


def loopback_roles_before_roles(argvs: Iterable[Sequence[str]]) -> Dict[str, roles.Role]:
    """command key -> role of every ib_write_bw run among ``argvs``: the recorded runs of a
    bundle written before runs kept their role.

    One argv alone cannot say its role: a server's argv does not name the client it served
    (``perftest_pairing = "pairs"``), nor does an argv say its attempt. So all of a bundle's
    argvs are read together, as the perftest check read them before roles: a server and its
    client share a TCP port, and a client port's attempts are its runs in TCP port order (a
    retry runs ``RETRY_PORT_OFFSET`` above its first attempt); each role names the
    ``--use_cuda`` GPU its argv ran with, as today's plan names it. A server whose client was
    not recorded gets no role.
    """
    sides: Dict[int, Dict[str, Tuple[str, RecordedLoopback]]] = {}
    for argv in argvs:
        info = read_loopback_argv(argv)
        if info is not None:
            sides.setdefault(info.tcp_port, {})[info.side] = (command_key(list(argv)), info)
    found: Dict[str, roles.Role] = {}
    attempts: Dict[str, int] = {}
    for tcp_port in sorted(sides):
        if "client" not in sides[tcp_port]:
            continue
        key, client = sides[tcp_port]["client"]
        attempt = attempts[client.target] = attempts.get(client.target, 0) + 1
        found[key] = roles.loopback_client(client.target, attempt, client.gpu)
        if "server" in sides[tcp_port]:
            key, server = sides[tcp_port]["server"]
            found[key] = roles.loopback_server(server.target, client.target, attempt, server.gpu)
    return found
