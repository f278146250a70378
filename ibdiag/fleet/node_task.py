"""The task ``ibdiag fleet run`` starts on every node (``ibdiag fleet node-task``, through one
``srun``): run ``ibdiag check --json`` under a time limit of its own, publish the report as
``DIR/<node>.json`` atomically, and say what happened on one stdout line.

Healthy: the check exits by itself with 0-3 (OK, WARNING, CRITICAL, UNKNOWN: each is the
node's answer, not a failure) and prints a report; it appears in DIR whole, under the node's
Slurm name, and the status line names it.

Why files on a shared DIR, and not the reports on srun's stdout: a level-standard report runs
to hundreds of kilobytes, so a fleet's would all flow through the one srun process, where a
node that dies mid-write leaves half a JSON in the stream; srun's ``--output=%N`` files are
written by each node's slurmstepd and so need the shared filesystem just the same. Here each
node writes its report to a temp file in DIR (``.ibdiag-*.tmp``: the launcher removes those a
killed task left, once srun has ended) and renames it once complete and checked: a reader of
DIR sees a whole report or none. Only the small status line (exit code, times, why no report) goes
through srun, so the launcher learns why a node did not answer even when the node could not
write DIR at all (DIR not shared, not mounted there).

The time limit is the task's own (one hung node must not hold the run): at ``timeout_s`` the
check's process group gets SIGTERM (``ibdiag check`` then stops its commands and exits), and
SIGKILL ``grace_s`` later; the task then reports ``timed_out`` without waiting any longer for a
process the kernel will not let die.

Why the check is started here and not by the one command runner (``ibdiag.runner.command_runner``),
which every other command of ibdiag goes through: the runner is made for the tools a check
reads, and two of its guarantees are wrong for the check itself. It keeps each stream's tail
in memory (1 MiB by default), where the check's stdout is the report - up to 256 MiB at level
full - which must reach DIR whole, so it goes straight into the temp file; and at its timeout
it SIGKILLs the command's whole tree at once, where the check must first get SIGTERM and
``grace_s`` to stop its own commands through its own runner and exit (the status line says
which of the two ended it).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import tempfile
from datetime import datetime, timezone
from typing import IO, List, NamedTuple, Optional, Sequence

from ibdiag.fleet.run_record import NodeStatus
from ibdiag.write_files import TEMP_PREFIX, TEMP_SUFFIX

KILL_GRACE_S = 10.0  # after SIGTERM, how long the check may take to stop its commands
GIVE_UP_S = 5.0  # after SIGKILL: a process stuck in the kernel is left behind, reported
ANSWERS = (0, 1, 2, 3)  # check's Nagios exit codes: the node's answer
# A node name that can name a file in DIR: no "/", no leading "." (hidden, or ".."), printable.
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,254}")


def node_name(given: Optional[str]) -> str:
    """The node's name: ``given`` ($SLURMD_NODENAME under srun), else the short hostname."""
    return given or socket.gethostname().split(".", 1)[0]


def check_argv(python: str, check_args: Sequence[str]) -> List[str]:
    """The check this task runs: ``PYTHON -m ibdiag check --json CHECK_ARGS``."""
    return [python, "-m", "ibdiag", "check", "--json", *check_args]


class _Finished(NamedTuple):
    rc: Optional[int]  # None: killed (time limit, interrupted) or never started
    timed_out: bool
    stderr: str
    error: str  # why it did not run to an answer; "" when it exited by itself


def run_task(
    node: str,
    out_dir: str,
    argv: Sequence[str],
    timeout_s: float,
    grace_s: float = KILL_GRACE_S,
) -> NodeStatus:
    """Run ``argv`` (the check) with stdout into a temp file in ``out_dir``; publish it as
    ``out_dir/<node>.json`` when it is an ibdiag report; the status says what happened.
    Never raises for what the check or the filesystem did: that is the status's ``error``."""
    started = _now()

    def status(**fields) -> NodeStatus:
        return NodeStatus(node=node, started_at=started, ended_at=_now(), **fields)

    if not NODE_NAME.fullmatch(node):
        return status(error=f"node name {node!r} cannot name a report file")
    try:
        handle, temp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX, dir=out_dir)
    except OSError as exc:
        return status(
            error=f"cannot write into {out_dir}: {exc.strerror}: is it on a filesystem every "
            "node mounts at the same path?"
        )
    try:
        with os.fdopen(handle, "wb") as out:
            finished = _run(argv, out, timeout_s, grace_s)
            out.flush()
            os.fsync(out.fileno())
        if finished.error:
            return status(rc=finished.rc, timed_out=finished.timed_out, error=finished.error)
        if finished.rc not in ANSWERS:
            return status(
                rc=finished.rc,
                error=f"check exited {finished.rc}{_said(finished.stderr)}",
            )
        verdict, problem = _verdict_of(temp)
        if problem:
            return status(
                rc=finished.rc,
                error=f"check exited {finished.rc} without a report ({problem})"
                f"{_said(finished.stderr)}",
            )
        name = f"{node}.json"
        os.chmod(temp, 0o644)
        size = os.path.getsize(temp)
        os.replace(temp, os.path.join(out_dir, name))
        return status(rc=finished.rc, verdict=verdict, report=name, size=size)
    except OSError as exc:
        return status(error=f"cannot write the report into {out_dir}: {exc.strerror}")
    finally:
        if os.path.lexists(temp):
            os.unlink(temp)


def _run(argv: Sequence[str], out: IO[bytes], timeout_s: float, grace_s: float) -> _Finished:
    """Run ``argv`` in a session of its own, stdout to ``out``; stop it at ``timeout_s``."""
    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: killed whole
        )
    except OSError as exc:
        return _Finished(None, False, "", f"cannot start {argv[0]}: {exc.strerror}")
    try:
        _, err = process.communicate(timeout=timeout_s)
        _kill_group(process, signal.SIGKILL)  # whatever it left behind
        return _Finished(process.returncode, False, _text(err), "")
    except subprocess.TimeoutExpired:
        stopped = _stop(process, grace_s)
        return _Finished(
            None,
            True,
            "",
            f"check still running after the node time limit ({timeout_s:g} s): {stopped}",
        )
    except KeyboardInterrupt:  # srun's SIGTERM: the job was cancelled or hit its time limit
        _stop(process, min(grace_s, 2.0))
        return _Finished(None, False, "", "interrupted: the Slurm job was cancelled or ran out")


def _stop(process: subprocess.Popen, grace_s: float) -> str:
    """SIGTERM the group, SIGKILL it ``grace_s`` later; how it ended, in words."""
    _kill_group(process, signal.SIGTERM)
    try:
        process.communicate(timeout=grace_s)
        _kill_group(process, signal.SIGKILL)  # what it left behind
        return "stopped"
    except subprocess.TimeoutExpired:
        _kill_group(process, signal.SIGKILL)
    try:
        process.communicate(timeout=GIVE_UP_S)
        return f"killed (it ignored SIGTERM for {grace_s:g} s)"
    except subprocess.TimeoutExpired:  # stuck in the kernel (D state): leave it, say so
        return "it did not die even after SIGKILL (stuck in the kernel?)"


def _kill_group(process: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(process.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass  # already gone (a reaped leader's group may be empty)


def _verdict_of(path: str):
    """``(verdict, None)`` when ``path`` holds an ibdiag report as ``fleet report`` reads it;
    ``(None, why not)`` otherwise."""
    from ibdiag.fleet.node import NotAReport, summarize

    if os.path.getsize(path) == 0:
        return None, "it printed nothing"
    try:
        with open(path, "rb") as handle:
            data = json.load(handle)
    except (ValueError, UnicodeDecodeError) as exc:
        return None, f"its output is not JSON: {_one_line(str(exc))}"
    try:
        return summarize(data, path).verdict, None
    except NotAReport as exc:
        return None, str(exc)


def _said(stderr: str) -> str:
    """``": <the last line it printed on stderr>"``, or nothing."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    return f": {_one_line(lines[-1])}" if lines else ""


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _text(data: Optional[bytes]) -> str:
    return (data or b"").decode("utf-8", errors="replace")


def _now() -> datetime:
    return datetime.now(timezone.utc)
