"""``ibdiag fleet run``: one ``ibdiag check --json`` per node through ONE ``srun`` - the engine
the cluster already has, never a home-made remote executor (DESIGN §10).

The steps, each a function a test can call alone:

1. ``sinfo_argv``/``parse_sinfo``/``plan``: which of the asked-for nodes can run a task. Slurm
   is asked first (``sinfo --Node``) because one node that is down, drained or unknown in an
   srun's node list would fail the whole srun ("Invalid node name") or hold it in the queue
   for good (a drained node never frees up): such nodes are not sent to srun; they are listed
   as never answered with their Slurm state, and the others run. Nodes busy with jobs
   (``busy_states``: allocated; at level full mixed too) are kept from srun the same way by
   default: srun allocates all its nodes or none, so one busy node would hold every node's
   check until the allocation wait ran out, and then none would run.
2. ``srun_argv``: ``srun --nodes=N --ntasks=N --ntasks-per-node=1 --nodelist=...``, with
   ``--kill-on-bad-exit=0`` and ``--no-kill`` (a node that fails or a task that exits non-zero
   must not take the others down), ``--time`` and ``--wait`` a minute beyond the node time
   limit (Slurm's backstop: the task has its own limit, ``ibdiag.fleet.node_task``),
   ``--immediate`` (the nodes allocated within 5 minutes, or srun gives up: Slurm queues a job
   it cannot run now, busy nodes or a request too big, rather than refuse it), and the
   task ``/opt/ibdiag/bin/ibdiag fleet node-task --out-dir DIR --timeout S -- CHECK ARGS``
   (``NODE_IBDIAG``, or ``PYTHON -m ibdiag`` with --python): argv items all the way, no shell
   anywhere.
3. ``launch``: run it; each task's one status line comes back through srun's stdout
   (``ibdiag-fleet-node: {...}``), srun's own messages are passed on to stderr as they come.
   Once every node has answered, srun gets ``ALL_ANSWERED_GRACE_S`` to end before it is
   stopped (a step held by a process stuck in the kernel must not hold the run). srun is the
   one process ibdiag starts outside the one command runner (``ibdiag.runner.command_runner``;
   ``sinfo`` goes through it): the runner returns a command's output once it has ended, where
   srun runs for as long as the slowest node (15 minutes at level full, hours with a wait for
   busy nodes) and its lines must be read as they come - to count the nodes that answered,
   to show progress, to stop srun once all have - and on Ctrl-C srun must get SIGTERM (it then
   cancels the tasks on the nodes), not the runner's SIGKILL.
4. ``collect``: every expected node answered (its ``DIR/<node>.json`` is there, as big as the
   node said) or not, with the reason - not run (Slurm state), its task's error (time limit,
   check crashed, DIR not writable there), or no answer at all (srun failed, the node died).
5. ``FleetRun`` (``DIR/fleet-run.json``) and the exit code: 0 every expected node answered,
   whatever its verdict (the reports say how each node is; ``ibdiag fleet report`` judges);
   1 some never answered; 3 none did, or the run was interrupted.

DIR must be on a filesystem that every node and the launching host mount at the same path
(NFS, Lustre, GPFS ...): each node writes its report there, and the launcher reads it there. It
must be new or empty, so that a report from an earlier run is never taken for this run's answer.
"""

from __future__ import annotations

import collections
import math
import os
import signal
import subprocess
import tempfile
import threading
import time
from datetime import datetime, timezone
from typing import (
    IO,
    AbstractSet,
    Callable,
    Deque,
    Dict,
    FrozenSet,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
)

from pydantic import ValidationError

from ibdiag.errors import IbdiagError
from ibdiag.fleet.node_task import GIVE_UP_S, KILL_GRACE_S
from ibdiag.fleet.run_record import (
    EXIT_ALL_ANSWERED,
    EXIT_NOTHING_COLLECTED,
    EXIT_SOME_NEVER_ANSWERED,
    NOT_RUN_PREFIX,
    STATUS_MARKER,
    FleetRun,
    NodeOutcome,
    NodeStatus,
)
from ibdiag.write_files import TEMP_PREFIX, TEMP_SUFFIX, remove_stale_temps

# Per-node time limit by level, when --node-timeout is not given: quick reads files (seconds,
# its reads bounded by 2 x --read-timeout); standard adds commands under check's 25 s deadline;
# full moves traffic: 2 x (perftest_duration_s + 31 s) + nccl_timeout_s = 672 s by default.
DEFAULT_NODE_TIMEOUT_S = {"quick": 60.0, "standard": 120.0, "full": 900.0}
JOB_NAME = "ibdiag-fleet"
SLURM_SLACK_S = 60.0  # Slurm's limits: beyond the node limit and its kills (start, write, exit)
# How long srun may wait for the nodes to be allocated (busy with jobs, or a request Slurm
# cannot grant now - it queues it rather than refuse): then it gives up (srun --immediate), and
# the nodes never answered, with srun's reason. Not forever by default: a sweep must end.
DEFAULT_ALLOCATION_WAIT_S = 300.0
ALL_ANSWERED_GRACE_S = 30.0  # every node answered: how long srun may take to end
STOP_GRACE_S = 15.0  # after SIGTERM to srun (it cancels the step): then SIGKILL
VISIBLE_WITHIN_S = 10.0  # a report a node wrote, not yet seen here (NFS attribute cache)
MESSAGES_KEPT = 50  # srun's last lines kept in fleet-run.json
# One argv item may hold at most 128 KiB on Linux (MAX_ARG_STRLEN): a longer node list goes
# to srun as a file (a --nodelist value with a "/" is a file name to srun).
MAX_NODELIST_CHARS = 100_000
# Slurm node states (sinfo %T, flags stripped) in which srun can start a task, now or once the
# node's jobs end; any other (down, drained, draining, fail, future, unknown ...) holds or
# fails the srun. "*" (not responding) too. reserved/maint: pass --srun-arg=--reservation=R.
RUNNABLE_STATES = frozenset(
    {"idle", "mixed", "allocated", "completing", "planned", "reserved", "maint"}
)
# Runnable states in which the node is busy with jobs, by level: not given to srun unless
# asked (--include-busy), as srun would wait for them with every other node. "allocated": all
# its CPUs are a job's, so the task waits for the job's end. "mixed": some are; a quick or
# standard check (a core, reads and MADs for seconds) runs beside the job, but level full moves
# traffic through the HCAs (ib_write_bw, nccl-tests) and must not run beside a job: the job
# would slow down, and the numbers would measure the job.
BUSY_STATES = {
    "quick": frozenset({"allocated"}),
    "standard": frozenset({"allocated"}),
    "full": frozenset({"allocated", "mixed"}),
}
_STATE_FLAGS = "*~#!%$@^-"
# ibdiag as README's node install puts it on every node (python3 -m venv /opt/ibdiag): the
# nodes' own, whatever the launching host's interpreter is (a venv the nodes may not have).
NODE_IBDIAG = "/opt/ibdiag/bin/ibdiag"


class RunError(IbdiagError):
    """The run cannot start (bad DIR, sinfo failed, no node): one line, exit 3."""


# --- 1. which nodes ---------------------------------------------------------------------------


def sinfo_argv(sinfo: str, hostlist: Optional[str], partition: Optional[str]) -> List[str]:
    """``sinfo`` listing each asked-for node once per partition as ``NAME|STATE``."""
    argv = [sinfo, "--noheader", "--Node", "--format=%N|%T"]
    if hostlist:
        argv.append(f"--nodes={hostlist}")
    if partition:
        argv.append(f"--partition={partition}")
    return argv


def parse_sinfo(text: str, odd: Optional[List[str]] = None) -> Dict[str, str]:
    """``{node: state}`` of ``sinfo --Node --format=%N|%T`` output (a node in two partitions is
    listed twice, with one state), in sinfo's order. Each name is a node name
    (``ibdiag.fleet.node.NODE_NAME``): a host list (``gpu[003-009]``, ``a,b``: an sinfo
    without ``--Node``) is expanded; what still is no node name is left out, and appended to
    ``odd`` when given - it would be a node no srun can be given, and none fleet report reads."""
    states: Dict[str, str] = {}
    for line in text.splitlines():
        name, sep, state = line.strip().partition("|")
        if sep and name:
            for node in _node_names(name, odd):
                states.setdefault(node, state.strip())
    return states


def _node_names(name: str, odd: Optional[List[str]]) -> List[str]:
    from ibdiag.fleet.node import NODE_NAME
    from ibdiag.hostlist import expand

    if NODE_NAME.fullmatch(name):
        return [name]
    try:
        names = expand(name)
    except ValueError:  # HostlistError
        names = []
    if names and all(NODE_NAME.fullmatch(node) for node in names):
        return names
    if odd is not None:
        odd.append(name)
    return []


def busy_states(level: str, include_busy: bool = False) -> FrozenSet[str]:
    """The Slurm states whose nodes are not given to srun at ``level`` for being busy with jobs
    (``BUSY_STATES``); none when ``include_busy``."""
    return frozenset() if include_busy else BUSY_STATES.get(level, BUSY_STATES["full"])


def why_not_runnable(
    state: Optional[str],
    partition: Optional[str] = None,
    busy: AbstractSet[str] = BUSY_STATES["quick"],
) -> Optional[str]:
    """Why a node in ``state`` (None: unknown to sinfo) is not given to srun - srun cannot run
    a task there, or it is ``busy`` with jobs; None: it is."""
    if state is None:
        where = f"in partition {partition}" if partition else "to Slurm"
        return f"not run: not a node known {where} (sinfo does not list it)"
    base = state.rstrip(_STATE_FLAGS).lower()
    if base in RUNNABLE_STATES and "*" not in state:
        return f"{NOT_RUN_PREFIX}{state} (busy)" if base in busy else None
    return f"{NOT_RUN_PREFIX}{state}"


class Plan(NamedTuple):
    expected: List[str]  # every node asked for, in order
    to_run: List[str]  # those srun is given
    not_run: Dict[str, str]  # node -> why it was not given to srun


def plan(
    asked: Optional[Sequence[str]],
    states: Dict[str, str],
    partition: Optional[str] = None,
    busy: AbstractSet[str] = BUSY_STATES["quick"],
) -> Plan:
    """The nodes to run on: ``asked`` (None: every node sinfo listed, a partition's) that Slurm
    knows in a runnable state and not in a ``busy`` one (``busy_states``); the others with the
    reason."""
    expected = list(dict.fromkeys(asked if asked is not None else states))
    not_run: Dict[str, str] = {}
    for node in expected:
        reason = why_not_runnable(states.get(node), partition, busy)
        if reason:
            not_run[node] = reason
    return Plan(expected, [node for node in expected if node not in not_run], not_run)


# --- 2. the srun command ----------------------------------------------------------------------


def node_task_argv(
    ibdiag: Sequence[str], out_dir: str, node_timeout_s: float, check_args: Sequence[str]
) -> List[str]:
    """What srun starts on every node: ``IBDIAG fleet node-task ... -- CHECK ARGS``, where
    ``ibdiag`` is how the nodes run ibdiag (``NODE_IBDIAG``, or ``[PYTHON, "-m", "ibdiag"]``)."""
    return [
        *ibdiag,
        "fleet",
        "node-task",
        f"--out-dir={out_dir}",
        f"--timeout={node_timeout_s:g}",
        "--",
        *check_args,
    ]


def slurm_limit_s(node_timeout_s: float) -> float:
    """The longest a task may take: the node limit, then SIGTERM's grace and SIGKILL's wait,
    and a minute for starting Python and writing the report."""
    return node_timeout_s + KILL_GRACE_S + GIVE_UP_S + SLURM_SLACK_S


def srun_argv(
    srun: str,
    nodes: Sequence[str],
    task_argv: Sequence[str],
    node_timeout_s: float,
    partition: Optional[str] = None,
    srun_args: Sequence[str] = (),
    nodelist: Optional[str] = None,
    allocation_wait_s: float = DEFAULT_ALLOCATION_WAIT_S,
    exclusive: bool = False,
) -> List[str]:
    """The one srun: a task per node, the job's time limit and the wait after the first task
    ends both past the node limit (``slurm_limit_s``); ``--immediate``: give up when the nodes
    are not allocated within ``allocation_wait_s`` (0: wait as long as it takes). ``nodelist``:
    the value of --nodelist when not the nodes joined with commas (a file, for a long list).
    ``exclusive`` (level full, which moves traffic): ``--exclusive``, so that no job is started
    beside the check on its nodes while it measures bandwidth."""
    if not nodes:
        raise ValueError("srun needs at least one node")
    count = len(nodes)
    limit = slurm_limit_s(node_timeout_s)
    argv = [
        srun,
        f"--job-name={JOB_NAME}",
        f"--nodes={count}",
        f"--ntasks={count}",
        "--ntasks-per-node=1",
        f"--nodelist={nodelist or ','.join(nodes)}",
    ]
    if partition:
        argv.append(f"--partition={partition}")
    argv += [
        f"--time={math.ceil(limit / 60)}",  # minutes
        f"--wait={math.ceil(limit)}",  # seconds after the first task ends (0 is forever)
        "--kill-on-bad-exit=0",
        "--no-kill",
    ]
    if allocation_wait_s > 0:
        argv.append(f"--immediate={math.ceil(allocation_wait_s)}")
    if exclusive:
        argv.append("--exclusive")
    argv += [
        *srun_args,
        *task_argv,
    ]
    return argv


def needs_nodelist_file(nodes: Sequence[str]) -> bool:
    return len(",".join(nodes)) > MAX_NODELIST_CHARS


def write_nodelist_file(nodes: Sequence[str]) -> str:
    """A private file naming ``nodes`` one a line, for srun's ``--nodelist=FILE``."""
    handle, path = tempfile.mkstemp(prefix="ibdiag-fleet-nodes-", suffix=".txt")
    with os.fdopen(handle, "w") as out:
        out.write("\n".join(nodes) + "\n")
    return path


# --- 3. running it ----------------------------------------------------------------------------


def parse_status_line(line: str) -> Optional[NodeStatus]:
    """The ``NodeStatus`` a task's line carries; None when it carries none (or a broken one)."""
    _, marker, rest = line.partition(STATUS_MARKER)
    if not marker:
        return None
    try:
        return NodeStatus.model_validate_json(rest.strip())
    except ValidationError:
        return None


class Launched(NamedTuple):
    statuses: Dict[str, NodeStatus]  # by node; the first line a node sent
    unexpected: List[str]  # nodes that answered but were not given to srun
    rc: Optional[int]  # srun's exit code; None: it could not start (messages say why)
    messages: List[str]  # the last lines srun and the tasks said besides their status
    interrupted: bool


def launch(
    argv: Sequence[str],
    nodes: Sequence[str],
    on_message: Callable[[str], None],
    all_answered_grace_s: float = ALL_ANSWERED_GRACE_S,
    stop_grace_s: float = STOP_GRACE_S,
) -> Launched:
    """Run srun (``argv``) in a session of its own; gather the status lines of ``nodes``'
    tasks; pass every other line to ``on_message`` as it comes. Returns when srun ends - or
    ``all_answered_grace_s`` after every node answered, srun then stopped; on Ctrl-C or SIGTERM
    (KeyboardInterrupt) srun is stopped (it cancels the tasks) and what came is returned."""
    wanted = set(nodes)
    statuses: Dict[str, NodeStatus] = {}
    unexpected: List[str] = []
    messages: Deque[str] = collections.deque(maxlen=MESSAGES_KEPT)
    lock = threading.Lock()

    def said(line: str) -> None:
        with lock:
            messages.append(line)
        on_message(line)

    def read(stream: IO[bytes], parse: bool) -> None:
        for raw in stream:
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            status = parse_status_line(line) if parse else None
            if status is None:
                if line.strip():
                    said(line)
                continue
            with lock:
                if status.node not in wanted:
                    unexpected.append(status.node)
                statuses.setdefault(status.node, status)

    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # Ctrl-C reaches ibdiag, which stops srun in order
        )
    except OSError as exc:
        said(f"cannot start {argv[0]}: {exc.strerror}")
        return Launched({}, [], None, list(messages), False)
    readers = [
        threading.Thread(target=read, args=(process.stdout, True), daemon=True),
        threading.Thread(target=read, args=(process.stderr, False), daemon=True),
    ]
    for reader in readers:
        reader.start()
    interrupted = False
    try:
        all_answered_at: Optional[float] = None
        while process.poll() is None:
            with lock:
                answered = wanted <= set(statuses)
            if answered and all_answered_at is None:
                all_answered_at = time.monotonic()
            if all_answered_at is not None and (
                time.monotonic() - all_answered_at > all_answered_grace_s
            ):
                said(
                    f"ibdiag: every node answered; srun still running after "
                    f"{all_answered_grace_s:g} s: stopped"
                )
                _stop(process, stop_grace_s)
                break
            time.sleep(0.1)
    except KeyboardInterrupt:
        interrupted = True
        _stop(process, stop_grace_s)
    for reader in readers:
        reader.join(timeout=5)
    with lock:
        return Launched(
            dict(statuses), list(unexpected), process.returncode, list(messages), interrupted
        )


def _stop(process: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM to srun (it cancels the step's tasks), SIGKILL to its group ``grace_s`` later."""
    try:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        process.wait()
    except ProcessLookupError:
        pass


# --- 4. what came back ------------------------------------------------------------------------


def collect(
    out_dir: str,
    expected: Sequence[str],
    not_run: Dict[str, str],
    statuses: Dict[str, NodeStatus],
    silent_reason: str = "no answer: its task never ran, or died before it could say",
    visible_within_s: float = VISIBLE_WITHIN_S,
) -> List[NodeOutcome]:
    """Each expected node's outcome, in order. A node answered when its report is in
    ``out_dir`` as the node said (its size), or - its status line lost - when the file there is
    an ibdiag report. ``silent_reason``: why a node that was run said nothing (srun's error)."""
    outcomes = []
    for node in expected:
        if node in not_run:
            outcomes.append(NodeOutcome(node=node, answered=False, reason=not_run[node]))
        elif node in statuses:
            outcomes.append(_from_status(out_dir, statuses[node], visible_within_s))
        else:
            outcomes.append(_from_file(out_dir, node, silent_reason))
    return outcomes


def _from_status(out_dir: str, status: NodeStatus, within_s: float) -> NodeOutcome:
    times = {
        "started_at": status.started_at,
        "ended_at": status.ended_at,
        "duration_s": round((status.ended_at - status.started_at).total_seconds(), 3),
        "rc": status.rc,
    }
    if status.report is None:
        reason = status.error or "its task wrote no report and did not say why"
        return NodeOutcome(node=status.node, answered=False, reason=reason, **times)
    path = os.path.join(out_dir, status.report)
    problem = _visible(path, status.size, within_s)
    if problem:
        return NodeOutcome(node=status.node, answered=False, reason=problem, **times)
    return NodeOutcome(
        node=status.node, answered=True, verdict=status.verdict, report=status.report, **times
    )


def _visible(path: str, size: Optional[int], within_s: float) -> str:
    """ "" when ``path`` is here with ``size`` bytes (waiting up to ``within_s`` for a shared
    filesystem to show it); otherwise why not."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            os.listdir(os.path.dirname(path))  # a fresh lookup of the directory (NFS)
            found: Optional[int] = os.stat(path).st_size
        except OSError:
            found = None
        if found is not None and (size is None or found == size):
            return ""
        if time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    where = os.path.dirname(path)
    if found is None:
        return (
            f"its task wrote {os.path.basename(path)} but {where} has no such file here: is "
            "it on a filesystem every node mounts at the same path?"
        )
    return f"its report {os.path.basename(path)} has {found} bytes here, the node wrote {size}"


def _from_file(out_dir: str, node: str, silent_reason: str) -> NodeOutcome:
    """A node whose status never came: answered if its report is in DIR all the same."""
    import json

    from ibdiag.fleet.node import NotAReport, summarize

    name = f"{node}.json"
    path = os.path.join(out_dir, name)
    try:
        with open(path, "rb") as handle:
            data = json.load(handle)
        verdict = summarize(data, path).verdict
    except FileNotFoundError:
        return NodeOutcome(node=node, answered=False, reason=silent_reason)
    except OSError as exc:
        return NodeOutcome(node=node, answered=False, reason=f"{name}: {exc.strerror}")
    except (ValueError, UnicodeDecodeError, NotAReport) as exc:
        why = (
            str(exc) if isinstance(exc, NotAReport) else f"not JSON ({' '.join(str(exc).split())})"
        )
        return NodeOutcome(node=node, answered=False, reason=f"{name} is unreadable: {why}")
    return NodeOutcome(node=node, answered=True, verdict=verdict, report=name)


def exit_code(outcomes: Sequence[NodeOutcome], interrupted: bool = False) -> int:
    """0 every node answered; 1 some did not; 3 none did, or the run was interrupted."""
    answered = sum(outcome.answered for outcome in outcomes)
    if interrupted or not answered:
        return EXIT_NOTHING_COLLECTED
    return EXIT_ALL_ANSWERED if answered == len(outcomes) else EXIT_SOME_NEVER_ANSWERED


# --- the output directory ---------------------------------------------------------------------


def prepare_out_dir(path: str) -> str:
    """``path`` made absolute (the nodes are told it), created if missing, and empty (but for
    a killed run's temp files): a report of an earlier run must not pass for this run's."""
    directory = os.path.abspath(path)
    try:
        os.makedirs(directory, exist_ok=True)
        left = [
            name
            for name in os.listdir(directory)
            if not (name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX))
        ]
    except OSError as exc:
        raise RunError(f"cannot use {directory} as the output directory: {exc.strerror}") from exc
    if left:
        raise RunError(
            f"{directory} is not empty ({len(left)} entries, e.g. {sorted(left)[0]}): give a new "
            "directory for each run, so no earlier report passes for this run's"
        )
    return directory


def now() -> datetime:
    return datetime.now(timezone.utc)


def no_answer_reason(rc: Optional[int], messages: Sequence[str]) -> str:
    """Why a node that was given to srun said nothing: srun's last error, when it gave one."""
    errors = [line for line in messages if "error" in line.lower()]
    last = " ".join((errors or list(messages) or [""])[-1].split())
    if rc is None:
        return "no answer: srun did not start" + (f" ({last})" if last else "")
    detail = f"; srun exited {rc}" + (f": {last}" if last else "")
    return f"no answer: its task never ran, or died before it could say{detail}"


def split_outcomes(outcomes: Sequence[NodeOutcome]) -> Tuple[List[str], List[str]]:
    """(answered nodes, never-answered nodes)."""
    return (
        [outcome.node for outcome in outcomes if outcome.answered],
        [outcome.node for outcome in outcomes if not outcome.answered],
    )


# --- the whole run ----------------------------------------------------------------------------


class RunRequest(NamedTuple):
    """What ``ibdiag fleet run`` was asked (its options)."""

    out_dir: str
    level: str = "quick"
    hostlist: Optional[str] = None
    partition: Optional[str] = None
    node_timeout_s: Optional[float] = None  # None: DEFAULT_NODE_TIMEOUT_S of the level
    srun: str = "srun"
    sinfo: str = "sinfo"
    srun_args: Tuple[str, ...] = ()
    # How the nodes run ibdiag: the install README's node set-up puts on every node, by
    # default; ``(PYTHON, "-m", "ibdiag")`` for --python.
    ibdiag: Tuple[str, ...] = (NODE_IBDIAG,)
    allocation_wait_s: float = DEFAULT_ALLOCATION_WAIT_S
    check_args: Tuple[str, ...] = ()  # passed to `ibdiag check` on every node
    include_busy: bool = False  # give srun the nodes busy with jobs too (BUSY_STATES), and wait


SINFO_TIMEOUT_S = 60.0
MAX_SINFO_BYTES = 64 << 20  # sinfo --Node of 100,000 nodes in two partitions: about 3 MiB


def execute(request: RunRequest, on_message: Callable[[str], None]) -> FleetRun:
    """Run the request: ask Slurm which nodes can run, run them in one srun, collect. Raises
    ``RunError`` (one line) when it cannot start; anything the nodes do is in the FleetRun."""
    from ibdiag import __version__
    from ibdiag.hostlist import HostlistError, expand

    started = now()
    out_dir = prepare_out_dir(request.out_dir)
    try:
        asked = expand(request.hostlist) if request.hostlist else None
    except HostlistError as exc:
        raise RunError(f"--nodes: {exc}") from exc
    if asked is not None and not asked:
        raise RunError("--nodes names no node")
    from ibdiag.fleet.node import NODE_NAME

    for node in asked or ():
        if not NODE_NAME.fullmatch(node):
            raise RunError(f"--nodes: {node[:64]!r} cannot be a node name")
    odd: List[str] = []
    states = _slurm_states(request, odd)
    for name in odd:
        on_message(f"ibdiag: sinfo listed {name[:64]!r}, which names no node: left out")
    busy = busy_states(request.level, request.include_busy)
    nodes = plan(asked, states, request.partition, busy)
    if not nodes.expected:
        raise RunError(f"partition {request.partition} has no nodes (sinfo lists none)")
    timeout = request.node_timeout_s or DEFAULT_NODE_TIMEOUT_S[request.level]
    argv: List[str] = []
    launched = Launched({}, [], None, [], False)
    if nodes.to_run:
        check_args = ("--level", request.level, *request.check_args)
        task = node_task_argv(request.ibdiag, out_dir, timeout, check_args)
        listfile = write_nodelist_file(nodes.to_run) if needs_nodelist_file(nodes.to_run) else None
        try:
            argv = srun_argv(
                request.srun,
                nodes.to_run,
                task,
                timeout,
                request.partition,
                request.srun_args,
                listfile,
                request.allocation_wait_s,
                exclusive=request.level == "full",
            )
            launched = launch(argv, nodes.to_run, on_message)
        finally:
            if listfile:
                os.unlink(listfile)
            # A task killed mid-check (srun's SIGKILL when the run is interrupted, a node
            # that died) leaves its temp file: DIR was empty of them, so they are this run's.
            remove_stale_temps(out_dir, max_age_s=0)
    outcomes = collect(
        out_dir,
        nodes.expected,
        nodes.not_run,
        launched.statuses,
        "no answer: the run was interrupted"
        if launched.interrupted
        else no_answer_reason(launched.rc, launched.messages),
    )
    answered, never = split_outcomes(outcomes)
    return FleetRun(
        tool_version=__version__,
        level=request.level,
        node_timeout_s=timeout,
        started_at=started,
        ended_at=now(),
        out_dir=out_dir,
        srun_argv=argv,
        srun_rc=launched.rc,
        srun_messages=launched.messages,
        interrupted=launched.interrupted,
        expected=len(nodes.expected),
        answered_nodes=answered,
        never_answered_nodes=never,
        unexpected_nodes=launched.unexpected,
        nodes=outcomes,
        exit_code=exit_code(outcomes, launched.interrupted),
    )


def _slurm_states(request: RunRequest, odd: Optional[List[str]] = None) -> Dict[str, str]:
    """Slurm's state of the asked-for nodes: ``sinfo`` run by the one command runner."""
    from ibdiag.runner.command_runner import Runner

    argv = sinfo_argv(request.sinfo, request.hostlist, request.partition)
    runner = Runner(
        timeout_s=SINFO_TIMEOUT_S,
        deadline_s=SINFO_TIMEOUT_S,
        max_workers=1,
        output_cap=MAX_SINFO_BYTES,
        total_output_cap=None,
        deadline_name="sinfo's time limit",
    )
    done = runner.run(argv)
    if done.timed_out:
        raise RunError(f"{argv[0]} did not answer in {SINFO_TIMEOUT_S:g} s")
    if done.not_found:
        raise RunError(f"cannot run {argv[0]}: No such file or directory")
    if done.permission_denied:
        raise RunError(f"cannot run {argv[0]}: Permission denied")
    if done.error or done.skipped:
        raise RunError(f"cannot run {argv[0]}: {done.error or done.skipped}")
    if done.rc != 0:
        said = done.stderr.strip().splitlines()
        raise RunError(f"{argv[0]} exited {done.rc}" + (f": {said[-1].strip()}" if said else ""))
    if done.stdout_truncated:  # its head is gone: nodes would be missing without a word
        raise RunError(f"{argv[0]} printed more than {MAX_SINFO_BYTES >> 20} MiB")
    return parse_sinfo(done.stdout, odd)
