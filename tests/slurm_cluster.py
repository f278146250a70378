"""A real, single-node Slurm cluster on localhost for tests (not a test module itself).

``SlurmCluster`` starts its own ``munged`` (own key, own socket: the system's ``/run/munge`` is
never used), writes a ``slurm.conf`` for this host with free TCP ports and every state, spool,
pid and log file in a temporary directory, starts ``slurmctld -D`` and ``slurmd -D`` in their own
process groups and waits until the node is IDLE. On exit it stops all of them (SIGTERM, then
SIGKILL) and kills whatever they left behind (slurmstepd, job processes), even when the test
failed::

    with SlurmCluster(tmp_path, prolog=script) as cluster:
        job = cluster.sbatch(wrap="echo hi")
        cluster.wait_for(lambda: cluster.job_state(job)["JobState"] == "COMPLETED", 15)

Needs Debian's ``slurm-wlm`` and ``munge`` (slurmctld, slurmd, munged, scontrol, sbatch) and
root: slurmd runs as root and runs the jobs, Prolog, Epilog and HealthCheckProgram as root.
When either is missing ``start()`` raises ``SlurmClusterError`` with a message saying so, so a
test fails rather than skips.

Written against Slurm 22.05 (Debian bookworm); Python 3.9 compatible.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple, TypeVar, Union

from process_groups import terminate_group

__all__ = ["SlurmCluster", "SlurmClusterError", "parse_scontrol_record", "write_script"]

T = TypeVar("T")
PathLike = Union[str, "os.PathLike[str]"]

#: Programs the cluster needs, and the Debian package that ships each.
REQUIRED_PROGRAMS = {
    "munged": "munge",
    "slurmctld": "slurmctld (slurm-wlm)",
    "slurmd": "slurmd (slurm-wlm)",
    "scontrol": "slurm-client (slurm-wlm)",
    "sbatch": "slurm-client (slurm-wlm)",
}

#: Environment variable set on every daemon (and so inherited by slurmstepd and the jobs) and
#: in ``SlurmCluster.env``; ``stop()`` kills any process still carrying this cluster's value.
MARKER_VARIABLE = "IBDIAG_TEST_SLURM_CLUSTER"

# Unix socket paths are limited to 108 bytes; slurmd puts step sockets
# "<SlurmdSpoolDir>/<node>_<jobid>.<stepid>" in its spool directory, munged its socket and
# "<socket>.lock" wherever it is told. Beyond this length they move to a short /tmp directory.
_MAX_SOCKET_PATH = 100

# `scontrol show` prints some fields alone on a line with a free-text value (spaces, "=").
_WHOLE_LINE_KEYS = frozenset(
    {"Reason", "Comment", "Command", "WorkDir", "StdErr", "StdIn", "StdOut", "OS", "Extra"}
)
_KEY_RE = re.compile(r"(?:^|(?<=\s))([A-Za-z][A-Za-z0-9_:/.\-]*)=")
# Slurm appends " [user@timestamp]" to a node's Reason.
_REASON_SUFFIX_RE = re.compile(r"\s*\[[^\[\]]*@[^\[\]]*\]\s*$")


class SlurmClusterError(RuntimeError):
    """The cluster could not be started, a client command failed, or a wait timed out."""


def write_script(path: PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` as an executable (0755) script and return the path.

    Slurm runs Prolog/Epilog/HealthCheckProgram directly (execve), so ``text`` needs a
    ``#!`` line.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def parse_scontrol_record(text: str) -> Dict[str, str]:
    """Parse one record of multi-line ``scontrol show node|job`` output into a dict.

    Lines hold ``Key=Value`` pairs separated by spaces; a line that starts with a free-text
    key (``Reason=``, ``Comment=``, ``Command=``, ``WorkDir=``, ``StdOut=``, ``OS=`` ...)
    belongs to that key whole. Values are returned as printed (``(null)``, ``N/A`` included).
    """
    fields: Dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        key, sep, rest = line.partition("=")
        if sep and key in _WHOLE_LINE_KEYS:
            fields[key] = rest.strip()
            continue
        matches = list(_KEY_RE.finditer(line))
        for index, match in enumerate(matches):
            end = matches[index + 1].start() if index + 1 < len(matches) else len(line)
            fields[match.group(1)] = line[match.end() : end].strip()
    return fields


def _free_ports(count: int) -> List[int]:
    """``count`` distinct TCP ports that are free on 127.0.0.1 right now."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"({exc})"
    return "\n".join(text.splitlines()[-lines:]) or "(empty)"


def _which(program: str) -> Optional[str]:
    """``program`` on PATH or in the sbin directories (a non-root PATH often lacks them)."""
    path = os.pathsep.join([os.environ.get("PATH", os.defpath), "/usr/sbin", "/sbin"])
    return shutil.which(program, path=path)


def _program(program: str) -> str:
    return _which(program) or program


def _clean_environ() -> Dict[str, str]:
    """os.environ without the SLURM_*/SBATCH_*/SALLOC_*/SRUN_* variables of any job or
    cluster this test run itself lives in (they would steer sbatch and scontrol)."""
    prefixes = ("SLURM_", "SBATCH_", "SALLOC_", "SRUN_", "SQUEUE_", "SINFO_")
    return {key: value for key, value in os.environ.items() if not key.startswith(prefixes)}


class SlurmCluster:
    """A real single-node Slurm cluster (munged + slurmctld + slurmd) under ``tmp_path``.

    Use it as a context manager (or call ``start()``/``stop()``). Arguments:

    * ``tmp_path``: an existing or new directory that holds everything: ``slurm.conf``,
      ``munge/`` (key, socket, log), ``state/``, ``spool/``, ``log/`` (daemon logs and their
      stdout/stderr), ``jobs/`` (job scripts and output).
    * ``prolog``, ``epilog``, ``health_check_program``: paths of executables, written to
      ``Prolog=``, ``Epilog=`` and ``HealthCheckProgram=`` (see ``write_script``).
    * ``health_check_interval``: seconds, ``HealthCheckInterval=``. Slurm also runs the
      program once when slurmd starts, before it registers.
    * ``extra_conf``: more slurm.conf lines, appended before the node/partition lines. A
      ``SchedulerParameters=`` line among them is merged into the one the cluster writes
      (``batch_sched_delay=0``, so the scheduler looks at new batch jobs every second
      instead of every 3 s), e.g. ``"SchedulerParameters=nohold_on_prolog_fail"``.
    * ``startup_timeout``: seconds to wait for the node to become IDLE.
    * ``prolog_epilog_timeout``: ``PrologEpilogTimeout=`` seconds, so a hung hook script
      cannot hang a test.
    * ``daemon_environment``: more variables for the daemons (and the client commands of
      ``run()``), as a systemd unit's ``Environment=`` would set them; slurmd passes none of
      them on to Prolog, Epilog or HealthCheckProgram.
    """

    def __init__(
        self,
        tmp_path: PathLike,
        prolog: Optional[PathLike] = None,
        epilog: Optional[PathLike] = None,
        health_check_program: Optional[PathLike] = None,
        health_check_interval: Optional[int] = None,
        extra_conf: Iterable[str] = (),
        startup_timeout: float = 30.0,
        prolog_epilog_timeout: int = 20,
        daemon_environment: Optional[Dict[str, str]] = None,
    ) -> None:
        self.directory = Path(tmp_path).resolve()
        self.prolog = Path(prolog) if prolog is not None else None
        self.epilog = Path(epilog) if epilog is not None else None
        self.health_check_program = (
            Path(health_check_program) if health_check_program is not None else None
        )
        self.health_check_interval = health_check_interval
        self.extra_conf: Tuple[str, ...] = tuple(extra_conf)
        self.startup_timeout = startup_timeout
        self.prolog_epilog_timeout = prolog_epilog_timeout
        self.daemon_environment = dict(daemon_environment or {})

        self.conf_path = self.directory / "slurm.conf"
        self.log_dir = self.directory / "log"
        self.state_dir = self.directory / "state"
        self.jobs_dir = self.directory / "jobs"
        self.munge_dir = self.directory / "munge"
        self.munge_key = self.munge_dir / "munge.key"
        self._short_dir: Optional[Path] = None  # only when tmp_path is too long for sockets
        self.spool_dir = self.directory / "spool"
        self.munge_socket = self.munge_dir / "munge.socket"

        self.node_name = ""
        self.node_spec = ""
        self.ctld_port = 0
        self.slurmd_port = 0
        self.marker = uuid.uuid4().hex
        self.env: Dict[str, str] = {}
        self._processes: Dict[str, subprocess.Popen] = {}
        self._job_counter = 0

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> SlurmCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> SlurmCluster:
        """Start munged, slurmctld and slurmd; return once the node is IDLE.

        Raises ``SlurmClusterError`` (with the daemons' log tails) when a program is missing,
        a daemon exits, or the node is not IDLE within ``startup_timeout``; everything started
        so far is stopped first.
        """
        self._check_prerequisites()
        try:
            self._prepare_directories()
            self.node_name, self.node_spec = self._probe_node()
            self.ctld_port, self.slurmd_port = _free_ports(2)
            self.env = _clean_environ()
            self.env.update(self.daemon_environment)
            self.env.update({"SLURM_CONF": str(self.conf_path), MARKER_VARIABLE: self.marker})
            self._write_config()
            self._start_munged()
            self._start_daemon("slurmctld", ["slurmctld", "-D", "-f", str(self.conf_path)])
            self.wait_for(
                lambda: "is UP" in self.run("scontrol", "ping", check=False).stdout,
                self.startup_timeout,
                f"slurmctld answering on port {self.ctld_port} (scontrol ping)",
            )
            self._start_daemon(
                "slurmd",
                ["slurmd", "-D", "-f", str(self.conf_path), "-N", self.node_name],
            )
            # Registered and idle; a HealthCheckProgram may already have drained it.
            self.wait_for(
                lambda: self.node_state()[0] in ("IDLE", "IDLE+DRAIN"),
                self.startup_timeout,
                lambda: f"node {self.node_name} registered IDLE (last: {self.node_state()})",
            )
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop slurmd, slurmctld and munged (SIGTERM to each process group, SIGKILL after
        5 s), then SIGKILL every leftover process carrying this cluster's marker variable
        (slurmstepd, job processes). Safe to call more than once."""
        for name in ("slurmd", "slurmctld", "munged"):
            process = self._processes.pop(name, None)
            if process is not None:
                self._terminate_group(process)
        self._kill_marked_processes()
        if self._short_dir is not None:
            shutil.rmtree(self._short_dir, ignore_errors=True)
            self._short_dir = None

    # ------------------------------------------------------------------ client helpers

    def run(
        self, *argv: str, check: bool = True, timeout: float = 30.0
    ) -> subprocess.CompletedProcess:
        """Run a Slurm client command (``argv[0]`` is e.g. ``"sinfo"``) against this cluster.

        With ``check`` a non-zero exit raises ``SlurmClusterError`` with its output.
        """
        result = subprocess.run(
            [_program(argv[0]), *argv[1:]],
            env=self.env,
            cwd=str(self.directory),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise SlurmClusterError(
                f"{' '.join(argv)} exited {result.returncode}\nstdout: {result.stdout}\n"
                f"stderr: {result.stderr}"
            )
        return result

    def scontrol(self, *args: str, check: bool = True) -> str:
        """``scontrol ARGS`` against this cluster; returns stdout."""
        return self.run("scontrol", *args, check=check).stdout

    def node_info(self) -> Dict[str, str]:
        """All fields of ``scontrol show node NODE`` (see ``parse_scontrol_record``)."""
        return parse_scontrol_record(self.scontrol("show", "node", self.node_name))

    def node_state(self) -> Tuple[str, Optional[str]]:
        """``(state, reason)`` of the node: state as scontrol prints it (``"IDLE"``,
        ``"IDLE+DRAIN"``, ``"MIXED+DRAIN"``, ``"IDLE+NOT_RESPONDING"`` ...), reason without
        Slurm's `` [user@time]`` suffix, or ``None`` when the node has no reason."""
        info = self.node_info()
        reason = info.get("Reason")
        if reason is not None:
            reason = _REASON_SUFFIX_RE.sub("", reason) or None
        return info.get("State", ""), reason

    def wait_for_node_state(self, state: str, timeout: float = 15.0) -> Tuple[str, Optional[str]]:
        """Wait until ``node_state()[0] == state`` exactly; return ``(state, reason)``."""
        found: List[Tuple[str, Optional[str]]] = []

        def reached() -> bool:
            found[:] = [self.node_state()]
            return found[0][0] == state

        self.wait_for(reached, timeout, lambda: f"node state {state} (last: {found})")
        return found[0]

    def wait_for_job(self, job_id: int, predicate, timeout: float = 20.0) -> Dict[str, str]:
        """Wait until ``predicate(job_state)`` holds; return that job state."""
        states: List[Dict[str, str]] = []

        def check() -> bool:
            states[:] = [self.job_state(job_id)]
            return predicate(states[0])

        self.wait_for(check, timeout, lambda: f"job {job_id} (last state: {states})")
        return states[0]

    def sbatch(
        self,
        script: Optional[str] = None,
        *args: str,
        wrap: Optional[str] = None,
    ) -> int:
        """Submit a batch job; return its id.

        ``script`` is the job script's text (with a ``#!`` line) or, when it has no ``#!``
        line and no ``wrap`` is given, a command line for ``--wrap``. ``args`` are extra
        sbatch options. Output goes to ``jobs/job-<id>.out`` unless ``args`` set ``-o``.
        """
        if wrap is None and script is not None and not script.startswith("#!"):
            wrap, script = script, None
        if (script is None) == (wrap is None):
            raise ValueError("sbatch needs exactly one of a script or wrap=")
        argv = ["sbatch", "--parsable", f"--chdir={self.jobs_dir}"]
        if not any(arg.startswith(("-o", "--output")) for arg in args):
            argv.append(f"--output={self.jobs_dir / 'job-%j.out'}")
        argv.extend(args)
        if wrap is not None:
            argv.append(f"--wrap={wrap}")
        else:
            self._job_counter += 1
            path = write_script(self.jobs_dir / f"script-{self._job_counter}.sh", str(script))
            argv.append(str(path))
        out = self.run(*argv).stdout.strip()
        try:
            return int(out.split(";")[0])
        except ValueError:
            raise SlurmClusterError(f"unexpected sbatch output: {out!r}") from None

    def job_state(self, job_id: int) -> Dict[str, str]:
        """All fields of ``scontrol show job ID`` (``JobState``, ``Reason``, ``Restarts``,
        ``ExitCode``, ``NodeList`` ...) as strings."""
        return parse_scontrol_record(self.scontrol("show", "job", str(job_id)))

    def wait_for(
        self,
        predicate: Callable[[], T],
        timeout: float,
        description: Union[str, Callable[[], str]] = "condition",
        interval: float = 0.1,
    ) -> T:
        """Call ``predicate`` every ``interval`` s until it returns a truthy value (returned).

        After ``timeout`` s raises ``SlurmClusterError`` naming ``description`` (a string or a
        callable producing one) with the daemons' log tails. Also raises at once when a daemon
        has exited. ``SlurmClusterError`` raised by ``predicate`` (e.g. scontrol not answering
        yet) counts as "not yet".
        """
        deadline = time.monotonic() + timeout
        last_error: Optional[BaseException] = None
        while True:
            try:
                value = predicate()
            except SlurmClusterError as exc:
                value, last_error = None, exc  # type: ignore[assignment]
            if value:
                return value
            dead = [name for name, proc in self._processes.items() if proc.poll() is not None]
            if dead or time.monotonic() >= deadline:
                what = description() if callable(description) else description
                cause = f"{', '.join(dead)} exited" if dead else f"timed out after {timeout}s"
                detail = f"\nlast error: {last_error}" if last_error else ""
                raise SlurmClusterError(f"waiting for {what}: {cause}{detail}\n{self.log_tails()}")
            time.sleep(interval)

    def log_tails(self, lines: int = 25) -> str:
        """The last ``lines`` lines of each daemon's log file; of its captured stdout/stderr
        instead when it has no log yet (a daemon that died before opening its log)."""
        logs = {
            "munged": self.munge_dir / "munged.log",
            "slurmctld": self.log_dir / "slurmctld.log",
            "slurmd": self.log_dir / "slurmd.log",
        }
        parts = []
        for name, log in logs.items():
            candidates = [log] if log.is_file() and log.stat().st_size else []
            candidates = candidates or [self.log_dir / f"{name}.{s}" for s in ("stdout", "stderr")]
            for path in candidates:
                if path.is_file() and path.stat().st_size:
                    parts.append(f"--- {path} ---\n{_tail(path, lines)}")
        return "\n".join(parts) or "(no daemon logs)"

    # ------------------------------------------------------------------ internals

    def _check_prerequisites(self) -> None:
        missing = [
            f"{program} (package {package})"
            for program, package in REQUIRED_PROGRAMS.items()
            if _which(program) is None
        ]
        if missing:
            raise SlurmClusterError(
                "Slurm/munge are not installed; missing: "
                + ", ".join(missing)
                + ". Install them with: apt-get install slurm-wlm munge"
            )
        if os.geteuid() != 0:
            raise SlurmClusterError(
                "SlurmCluster needs root (slurmd runs jobs, Prolog and Epilog as root); "
                "run the tests as root, e.g. under sudo"
            )

    def _prepare_directories(self) -> None:
        for path in (self.directory, self.log_dir, self.state_dir, self.jobs_dir):
            path.mkdir(parents=True, exist_ok=True)
        # Step sockets "<spool>/<node>_<job>.<step>" and munged's "<socket>.lock" must fit
        # in a Unix socket path; pytest's tmp_path normally does, a long TMPDIR may not.
        worst = max(
            len(str(self.spool_dir)) + len(socket.gethostname()) + 24,
            len(str(self.munge_socket)) + 5,
        )
        if worst > _MAX_SOCKET_PATH:
            self._short_dir = Path(tempfile.mkdtemp(prefix="slurm-", dir="/tmp"))
            self.spool_dir = self._short_dir / "spool"
            self.munge_socket = self._short_dir / "munge.socket"
        self.spool_dir.mkdir(parents=True, exist_ok=True)
        self.munge_dir.mkdir(mode=0o700, parents=True, exist_ok=True)

    def _probe_node(self) -> Tuple[str, str]:
        """The node's name and hardware line from ``slurmd -C`` (its first line, e.g.
        ``NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1
        RealMemory=24105``)."""
        result = subprocess.run(
            [_program("slurmd"), "-C"],
            env=_clean_environ(),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        first = result.stdout.strip().splitlines()[0] if result.stdout.strip() else ""
        match = re.match(r"NodeName=(\S+)\s", first)
        if result.returncode != 0 or not match:
            raise SlurmClusterError(
                f"slurmd -C failed (rc {result.returncode}): {result.stdout}{result.stderr}"
            )
        return match.group(1), first

    def config_text(self) -> str:
        """The slurm.conf this cluster writes (after ``start()`` has probed node and ports)."""
        d = self.directory
        lines = [
            "# Written by tests/slurm_cluster.py: a throwaway single-node cluster.",
            "ClusterName=ibdiagtest",
            # The controller must be named as this host's short hostname (slurmctld checks);
            # the address in parentheses avoids any DNS lookup.
            f"SlurmctldHost={self.node_name}(127.0.0.1)",
            f"SlurmctldPort={self.ctld_port}",
            f"SlurmdPort={self.slurmd_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            # Read by auth/munge and by cred/munge (job credentials) alike.
            f"AuthInfo=socket={self.munge_socket}",
            f"StateSaveLocation={self.state_dir}",
            f"SlurmdSpoolDir={self.spool_dir}",
            f"SlurmctldPidFile={d / 'slurmctld.pid'}",
            f"SlurmdPidFile={d / 'slurmd.pid'}",
            f"SlurmctldLogFile={self.log_dir / 'slurmctld.log'}",
            f"SlurmdLogFile={self.log_dir / 'slurmd.log'}",
            "SlurmctldDebug=debug",
            "SlurmdDebug=debug",
            f"PlugStackConfig={d / 'plugstack.conf'}",
            "MailProg=/bin/true",
            # No cgroups: processes are tracked through /proc, tasks are not confined.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            "SwitchType=switch/none",
            "SchedulerType=sched/builtin",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            # Trust the node line below rather than drain on small hardware differences.
            "SlurmdParameters=config_overrides",
            "ReturnToService=2",
            "SlurmdTimeout=20",
            "MessageTimeout=5",
            "KillWait=2",
            "InactiveLimit=0",
            "MinJobAge=300",
            f"PrologEpilogTimeout={self.prolog_epilog_timeout}",
        ]
        if self.prolog is not None:
            lines.append(f"Prolog={self.prolog}")
        if self.epilog is not None:
            lines.append(f"Epilog={self.epilog}")
        if self.health_check_program is not None:
            lines.append(f"HealthCheckProgram={self.health_check_program}")
        if self.health_check_interval is not None:
            lines.append(f"HealthCheckInterval={int(self.health_check_interval)}")
        scheduler_parameters = ["batch_sched_delay=0"]
        for line in self.extra_conf:
            key, _, value = line.partition("=")
            if key.strip().lower() == "schedulerparameters":
                scheduler_parameters.extend(v for v in value.strip().split(",") if v)
            else:
                lines.append(line)
        lines.append("SchedulerParameters=" + ",".join(scheduler_parameters))
        lines.append(f"{self.node_spec} NodeAddr=127.0.0.1 State=UNKNOWN")
        lines.append(f"PartitionName=debug Nodes={self.node_name} Default=YES MaxTime=INFINITE")
        return "\n".join(lines) + "\n"

    def _write_config(self) -> None:
        (self.directory / "plugstack.conf").write_text("")  # not /etc/slurm/plugstack.conf
        self.conf_path.write_text(self.config_text())

    def _start_munged(self) -> None:
        # munged wants a 0600 key owned by its user, in a directory others cannot write.
        with open(self.munge_key, "wb") as handle:
            handle.write(os.urandom(1024))
        self.munge_key.chmod(0o600)
        self._start_daemon(
            "munged",
            [
                "munged",
                "--foreground",
                "--force",
                f"--key-file={self.munge_key}",
                f"--socket={self.munge_socket}",
                f"--pid-file={self.munge_dir / 'munged.pid'}",
                f"--log-file={self.munge_dir / 'munged.log'}",
                f"--seed-file={self.munge_dir / 'munged.seed'}",
            ],
        )
        self.wait_for(
            lambda: self._daemons_alive() and self.munge_socket.is_socket(),
            10,
            f"munged socket {self.munge_socket}",
        )

    def _start_daemon(self, name: str, argv: Sequence[str]) -> None:
        out = open(self.log_dir / f"{name}.stdout", "wb")
        err = open(self.log_dir / f"{name}.stderr", "wb")
        with out, err:
            self._processes[name] = subprocess.Popen(
                [_program(argv[0]), *argv[1:]],
                env=self.env,
                cwd=str(self.directory),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,  # own process group, killed as one in stop()
            )

    def _daemons_alive(self) -> bool:
        return all(process.poll() is None for process in self._processes.values())

    @staticmethod
    def _terminate_group(process: subprocess.Popen) -> None:
        terminate_group(process, grace=5.0)

    def _kill_marked_processes(self) -> None:
        """SIGKILL processes whose environment carries this cluster's marker (slurmstepd
        runs in its own session, jobs in theirs: killing the daemons' groups misses them)."""
        needle = f"{MARKER_VARIABLE}={self.marker}".encode()
        for _ in range(3):
            found = False
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit() or int(entry.name) == os.getpid():
                    continue
                try:
                    environ = (entry / "environ").read_bytes()
                except OSError:
                    continue
                if needle in environ.split(b"\0"):
                    found = True
                    try:
                        os.kill(int(entry.name), signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            if not found:
                return
            time.sleep(0.2)
