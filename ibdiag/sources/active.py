"""Level full: the tests that move real traffic - ib_write_bw loopback and nccl-tests.

They are the only way to catch a port that is ACTIVE, at full rate and error-free but delivers
half its bandwidth. They run only at ``--level full``, after the read-only commands (so the
GPU topology is known for GPUDirect RDMA pairing), and every process they start runs under a
timeout that kills it with everything it started (``ibdiag.runner.command_runner``).

ib_write_bw loopback, per ACTIVE InfiniBand port, all ports at once:

- a server and a client on the same HCA port (``perftest_pairing = "self"``), or HCA 0's
  client to HCA 1's server and back, 2 with 3, ... (``"pairs"``: the traffic crosses both
  cables and the leaf switch);
- each side pinned to its HCA's NUMA node (``numactl --cpunodebind=N --membind=N``, else
  ``taskset -c <that node's CPUs>``): a process on the far socket gets a third of the
  bandwidth;
- its own TCP port (``perftest_base_port`` + index), ``--report_gbits``, a fixed message size
  and a timed run (``-D``: perftest warms up before it measures);
- with ``perftest_gdr``, ``--use_cuda=<GPU>`` with the GPU nearest the HCA (PIX/PXB in
  ``nvidia-smi topo -m``);
- one retry, on another TCP port (+``RETRY_PORT_OFFSET``), of every run below its floor
  (``ibdiag.bandwidth``): single noisy runs have drained healthy nodes elsewhere.

The traffic phase is bounded (``Limits``, made by ``ibdiag.collect``): nothing starts after its
deadline, and every process's timeout - ``bandwidth.perftest_timeout_s`` (duration + start-up
allowance) for an ib_write_bw attempt, ``nccl_timeout_s`` for nccl-tests, at most
``--command-timeout`` when one was given - is capped by the time left. A run the deadline left
no time for is recorded as never started, with the reason; a retry is only started while time
is left.

Every process is recorded as a CommandRun with the role it was planned for, saying what the
plan knew (``loopback client mlx5_0:1 attempt 1 gpu 0``, ``loopback server mlx5_1:1 for
mlx5_0:1 attempt 1 gpu 1``, ``nccl-tests``); the interpret step turns the loopback runs into
``Snapshot.loopback`` (``interpret.loopback``: ports, attempt and GPU from the roles, the
bandwidth from what the client printed), so a bundle is re-graded from what ran; the
nccl-tests check finds its run by role alone, whatever the configured program is called. Only
runs recorded before roles were kept are read back from their argv
(``loopback_roles_before_roles``).
"""

from __future__ import annotations

import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from ibdiag.bandwidth import below_floor, perftest_floor, perftest_timeout_s
from ibdiag.model import CommandRun, Device
from ibdiag.runner import interruptible
from ibdiag.thresholds import Thresholds

RETRY_PORT_OFFSET = 100
SERVER_START_S = 1.0  # the server listens well within this; the client then connects
SERVER_GRACE_S = 5.0  # after the client ends, the server has this long to end too

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Limits:
    """How long the traffic phase may take: a deadline on the ``time.monotonic()`` clock that
    started at ``started_at``, and a cap on every process's timeout (None: its own)."""

    started_at: float
    deadline_s: float
    deadline_name: str = "the run's deadline"
    cap_s: Optional[float] = None

    @property
    def deadline_at(self) -> float:
        return self.started_at + self.deadline_s

    def timeout(self, own_s: float) -> float:
        return own_s if self.cap_s is None else min(own_s, self.cap_s)

    def runner(self, own_timeout_s: float, budget=None):
        from ibdiag.runner.command_runner import Runner

        return Runner(
            timeout_s=self.timeout(own_timeout_s), deadline_s=self.deadline_s,
            started_at=self.started_at, deadline_name=self.deadline_name, budget=budget,
        )  # fmt: skip


def full_level_bound(thresholds: Thresholds, perftest: bool, nccl_tests: bool) -> float:
    """Level full's own bound when no --deadline is given: two waves of ib_write_bw (the
    attempt and its retry), each its server's head start + duration + start-up allowance,
    then nccl-tests' timeout when they are configured."""
    bound = 0.0
    if perftest:
        bound += 2 * (SERVER_START_S + perftest_timeout_s(thresholds))
    if nccl_tests and thresholds.nccl_tests:
        bound += thresholds.nccl_timeout_s
    return max(bound, 1.0)


def _unlimited() -> Limits:
    return Limits(started_at=time.monotonic(), deadline_s=float("inf"))


# ------------------------------------------------------------------------- ib_*_bw argv

DEFAULT_TCP_PORT = 18515  # perftest's DEF_PORT
BW_TOOLS = ("ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_atomic_bw")


def perftest_bw_argv(
    tool: str,
    device: str,
    ib_port: int,
    tcp_port: int = DEFAULT_TCP_PORT,
    *,
    size: int = 65536,
    duration_s: int = 5,
    qps: int = 1,
    use_cuda: Optional[int] = None,
    server: Optional[str] = None,
    report_gbits: bool = True,
    ignore_cpu_freq: bool = True,
) -> List[str]:
    """The argv of one side of an ``ib_*_bw`` run on local ``device``/``ib_port``.

    ``server=None`` gives the server side (it listens on ``tcp_port``); ``server="localhost"``
    (or a host) the client that connects to it. Both sides need the same size/duration/qps.
    ``-F`` (``ignore_cpu_freq``) stops perftest from refusing to report ("Can't produce a
    report") on a host whose CPU frequency is not pinned. ``use_cuda``: GPU index for
    GPUDirect RDMA (``--use_cuda=N``; needs a CUDA-enabled perftest build).

    It only builds: every value was vetted where it came from, once.

    - ``size``, ``duration_s``, ``qps``: ``Thresholds`` (perftest_size 2..2^30,
      perftest_duration_s 1..600, perftest_qps 1..64; a config outside is refused, exit 3).
    - ``device``: a name from sysfs that ``ibdiag.sources.names.device_name_problem`` passed
      at plan time (``plan_loopback`` plans no test on a device with a name problem): letters,
      digits and ``_.:-``, at most 64, not starting with ``-``.
    - ``ib_port``: a port directory ``names.port_number`` read as 1..254 (``plan_loopback``
      takes only those).
    - ``tcp_port``: ``loopback_tcp_port`` (perftest_base_port 1024..65000 + the test's
      index, + ``RETRY_PORT_OFFSET`` for a retry; stays 1024..65535).
    - ``use_cuda``: the index of a GPU nvidia-smi named ``GPU<digits>``
      (``GpuNic.gpu_index``), or None.
    - ``tool`` and ``server``: literals of the code (``ib_write_bw``, ``"localhost"``).

    No type is checked either: those sources give ints and strs (Thresholds strictly
    validated, the Snapshot's models), and a value that is not a str would make
    ``subprocess`` refuse the argv (TypeError) before anything ran.
    """
    argv = [tool, "-d", device, "-i", str(ib_port), "-p", str(tcp_port)]
    if report_gbits:
        argv.append("--report_gbits")
    if tool != "ib_atomic_bw":  # atomics have a fixed 8-byte size; -s is not an option there
        argv += ["-s", str(size)]
    argv += ["-D", str(duration_s), "-q", str(qps)]
    if ignore_cpu_freq:
        argv.append("-F")
    if use_cuda is not None:
        argv.append(f"--use_cuda={use_cuda}")
    if server is not None:
        argv.append(server)
    return argv


def ib_write_bw_argv(
    device: str,
    ib_port: int,
    tcp_port: int = DEFAULT_TCP_PORT,
    size: int = 65536,
    duration_s: int = 5,
    qps: int = 1,
    use_cuda: Optional[int] = None,
    server: Optional[str] = None,
) -> List[str]:
    """``ib_write_bw -d DEV -i PORT -p TCP --report_gbits -s SIZE -D SECS -q QPS -F
    [--use_cuda=N] [SERVER]`` (see ``perftest_bw_argv``)."""
    return perftest_bw_argv(
        "ib_write_bw",
        device,
        ib_port,
        tcp_port,
        size=size,
        duration_s=duration_s,
        qps=qps,
        use_cuda=use_cuda,
        server=server,
    )


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

    The inverse of ``ib_write_bw_argv``, kept beside it so the two agree, and used only for
    runs recorded before roles were kept (``loopback_roles_before_roles``): today a run's role
    says all the interpreter needs (ports, attempt, GPU), and nothing reads its argv.
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


def loopback_roles_before_roles(argvs: Iterable[Sequence[str]]) -> Dict[str, str]:
    """command key -> role of every ib_write_bw run among ``argvs``: the recorded runs of a
    bundle written before runs kept their role (``ibdiag.bundle.replay.replay``).

    One argv alone cannot say its role: a server's argv does not name the client it served
    (``perftest_pairing = "pairs"``), nor does an argv say its attempt. So all of a bundle's
    argvs are read together, as the perftest check read them before roles: a server and its
    client share a TCP port, and a client port's attempts are its runs in TCP port order (a
    retry runs ``RETRY_PORT_OFFSET`` above its first attempt); each role names the
    ``--use_cuda`` GPU its argv ran with, as today's plan names it. A server whose client was
    not recorded gets no role.
    """
    from ibdiag import roles
    from ibdiag.model import command_key

    sides: Dict[int, Dict[str, Tuple[str, RecordedLoopback]]] = {}
    for argv in argvs:
        info = read_loopback_argv(argv)
        if info is not None:
            sides.setdefault(info.tcp_port, {})[info.side] = (command_key(list(argv)), info)
    found: Dict[str, str] = {}
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


@dataclass(frozen=True)
class LoopbackTest:
    """One ib_write_bw run: the client's port sends RDMA writes to the server's port."""

    client_device: str
    client_port: int
    server_device: str
    server_port: int
    tcp_port: int
    attempt: int = 1
    gpu: Optional[int] = None  # --use_cuda index on the client side
    server_gpu: Optional[int] = None
    client_pin: Sequence[str] = ()  # numactl/taskset prefix
    server_pin: Sequence[str] = ()
    link_rate_gbps: Optional[float] = None

    @property
    def target(self) -> str:
        return f"{self.client_device}:{self.client_port}"

    def role(self, side: str) -> str:
        """What the ``side`` ("server" or "client") run is for: CommandRun.role."""
        from ibdiag import roles

        if side == "client":
            return roles.loopback_client(self.target, self.attempt, self.gpu)
        server = f"{self.server_device}:{self.server_port}"
        return roles.loopback_server(server, self.target, self.attempt, self.server_gpu)

    def argv(self, thresholds: Thresholds, role: str) -> List[str]:
        server = role == "server"
        return [
            *(self.server_pin if server else self.client_pin),
            *ib_write_bw_argv(
                self.server_device if server else self.client_device,
                self.server_port if server else self.client_port,
                self.tcp_port,
                size=thresholds.perftest_size,
                duration_s=thresholds.perftest_duration_s,
                qps=thresholds.perftest_qps,
                use_cuda=self.server_gpu if server else self.gpu,
                server=None if server else "localhost",
            ),
        ]


def plan_loopback(
    devices: List[Device],
    thresholds: Thresholds,
    graded: Callable[[Device], bool],
    gpu_near: Callable[[str], Optional[int]],
    pin_for: Callable[[Optional[int]], List[str]],
) -> List[LoopbackTest]:
    """The first attempt of every test, in a stable order (device, port). A device whose name
    may not go on a command line (its "name" problem, ``ibdiag.sources.names``) runs none."""
    from ibdiag.sources.names import device_name_problem

    ports = [
        (dev, port)
        for dev in devices
        if graded(dev) and device_name_problem(dev.name) is None
        for port in dev.ports
        if port.state == 4 and port.is_infiniband and 1 <= port.number <= 254
    ]
    partner = {index: index for index in range(len(ports))}
    if thresholds.perftest_pairing == "pairs":
        for first in range(0, len(ports) - 1, 2):
            partner[first], partner[first + 1] = first + 1, first
    tests = []
    for index, (dev, port) in enumerate(ports):
        server_dev, server_port = ports[partner[index]]
        numa = dev.pci.numa_node if dev.pci else None
        server_numa = server_dev.pci.numa_node if server_dev.pci else None
        gdr = thresholds.perftest_gdr
        tests.append(
            LoopbackTest(
                client_device=dev.name,
                client_port=port.number,
                server_device=server_dev.name,
                server_port=server_port.number,
                tcp_port=loopback_tcp_port(thresholds.perftest_base_port, index),
                gpu=gpu_near(dev.name) if gdr else None,
                server_gpu=gpu_near(server_dev.name) if gdr else None,
                client_pin=tuple(pin_for(numa)),
                server_pin=tuple(pin_for(server_numa)),
                link_rate_gbps=_slower(port, server_port),
            )
        )
    return tests


TCP_PORTS = (1024, 65535)  # the unprivileged TCP ports (perftest_base_port's least is 1024)


def loopback_tcp_port(base: int, index: int) -> int:
    """The TCP port of the ``index``-th test's server: ``base + index``, brought back round to
    1024 past 65535 - ``RETRY_PORT_OFFSET`` so that its retry's port is a TCP port too.

    ``perftest_base_port`` is 1024..65000 (``Thresholds``), so nothing wraps below 436 tests
    (a node has tens of ports); with more, every port stays 1024..65535 and distinct among
    the first 64412 tests (a TCP port perftest cannot take would fail a healthy port)."""
    low, high = TCP_PORTS
    return low + (base - low + index) % (high - RETRY_PORT_OFFSET - low + 1)


def _slower(*ports) -> Optional[float]:
    """The lower link rate of the ports a test crosses (None when one is unknown)."""
    rates = [port.rate.gbps if port.rate else None for port in ports]
    return None if None in rates else min(rates)


def numa_pinning(
    runner_path: str, cpulists: Dict[int, str]
) -> Callable[[Optional[int]], List[str]]:
    """The argv prefix that pins a process to NUMA node N: numactl, else taskset, else none."""
    numactl = shutil.which("numactl", path=runner_path)
    taskset = shutil.which("taskset", path=runner_path)

    def pin(node: Optional[int]) -> List[str]:
        if node is None or node < 0:
            return []
        if numactl:
            return ["numactl", f"--cpunodebind={node}", f"--membind={node}"]
        if taskset and cpulists.get(node):
            return ["taskset", "-c", cpulists[node]]
        return []

    return pin


def run_loopback(
    tests: List[LoopbackTest],
    thresholds: Thresholds,
    progress: Optional[Progress] = None,
    limits: Optional[Limits] = None,
    budget=None,
) -> Dict[str, CommandRun]:
    """Run every test at once; then, at once again, one retry of each run below its floor
    while the deadline leaves time for it."""
    limits = limits or _unlimited()
    runs: Dict[str, CommandRun] = {}
    wave = tests
    while wave:
        targets = ", ".join(test.target for test in wave)
        if time.monotonic() >= limits.deadline_at:  # record them, never started, with why
            outcomes = [_not_started(test, thresholds, limits) for test in wave]
        else:
            _say(progress, f"ib_write_bw attempt {wave[0].attempt}: {targets}")
            outcomes = _run_wave(wave, thresholds, limits, budget)
        retry = []
        for test, (server, client) in zip(wave, outcomes):
            runs[server.key] = server
            runs[client.key] = client
            floor, _ = perftest_floor(test.link_rate_gbps, thresholds, test.gpu is not None)
            if test.attempt == 1 and not client.skipped and below_floor(client_gbps(client), floor):
                retry.append(replace(test, attempt=2, tcp_port=test.tcp_port + RETRY_PORT_OFFSET))
        wave = retry  # past the deadline, each is recorded as never started
    return runs


def _not_started(test: LoopbackTest, thresholds: Thresholds, limits: Limits):
    """(server run, client run) of a test the deadline left no time for."""
    runner = limits.runner(perftest_timeout_s(thresholds))
    return tuple(
        _with_role(runner.run(test.argv(thresholds, side)), test.role(side))
        for side in ("server", "client")
    )


def client_gbps(run: CommandRun) -> Optional[float]:
    """The average Gb/s a client run reported, or None: read as the Snapshot's loopback
    field reads it (``interpret.loopback``)."""
    from ibdiag.sources.interpret.loopback import perftest_output

    if not (run.stdout or run.stderr):
        return None
    return perftest_output(run).average_gbps


def _run_wave(tests: List[LoopbackTest], thresholds: Thresholds, limits: Limits, budget=None):
    """Every test of the wave at once; [(server run, client run)] in the tests' order."""
    from ibdiag.runner.command_runner import Runner

    own = perftest_timeout_s(thresholds)
    # Made before anything starts, so an interrupt at any moment reaches every one of them.
    runners = [limits.runner(own, budget) for _ in tests]

    def one(test: LoopbackTest, runner: Runner):
        result: Dict[str, CommandRun] = {}

        def side(role: str) -> CommandRun:
            return _with_role(runner.run(test.argv(thresholds, role)), test.role(role))

        server = threading.Thread(
            target=lambda: result.update(server=side("server")),
            name=f"ibdiag-perftest-server-{test.tcp_port}",
            daemon=True,
        )
        server.start()
        time.sleep(SERVER_START_S)
        client = side("client")
        interruptible.join(server, SERVER_GRACE_S)
        if server.is_alive():  # the client failed or hung up: the server waits forever
            runner.stop()
            interruptible.join(server)
        return result["server"], client

    pool = ThreadPoolExecutor(max_workers=max(1, len(tests)), thread_name_prefix="ibdiag-bw")
    try:
        futures = [pool.submit(one, test, runner) for test, runner in zip(tests, runners)]
        return [interruptible.result(future) for future in futures]
    except BaseException:  # Ctrl-C, SIGTERM: kill every server and client, then re-raise
        for runner in runners:
            runner.stop()
        raise
    finally:
        pool.shutdown(wait=True)


# -- nccl-tests --------------------------------------------------------------------------------

LAUNCHERS = ("plain", "mpirun", "srun")  # how nccl-tests start: see nccl_tests_argv


def nccl_tests_argv(
    binary: str,
    launcher: str = "plain",
    gpus: int = 8,
    min_bytes: str = "8",
    max_bytes: str = "8G",
    step_factor: int = 2,
    iters: int = 20,
    warmup_iters: int = 5,
    check: int = 1,
    extra: Sequence[str] = (),
    launcher_args: Sequence[str] = (),
) -> List[str]:
    """The argv of one nccl-tests run over ``gpus`` local GPUs.

    ``plain``: one process drives every GPU (``-g GPUS``). ``mpirun`` (``-np GPUS --bind-to
    numa``) and ``srun`` (``--ntasks-per-node=GPUS --gpus-per-task=1``) start one process per
    GPU (``-g 1``; the binary must be built with MPI=1). ``extra`` goes to the binary (e.g.
    ``("-d", "bfloat16")``), ``launcher_args`` to mpirun/srun (e.g. ``--allow-run-as-root``).
    Options (nccl-tests README): ``-b`` min bytes, ``-e`` max bytes, ``-f`` step factor, ``-g``
    GPUs per thread, ``-n`` iterations, ``-w`` warm-up iterations, ``-c`` check (validation)
    iterations. Sizes take nccl-tests' K/M/G suffixes ("8", "128M", "8G") or a byte count.

    It only builds: ``binary``, ``launcher``, ``min_bytes``, ``max_bytes`` and
    ``launcher_args`` are ``Thresholds``' nccl_tests (a program path, not starting with
    ``-``), nccl_launcher (one of ``LAUNCHERS``), nccl_min_bytes/nccl_max_bytes (a byte count)
    and nccl_launcher_args (each non-empty, no NUL), refused by the config when they are not
    (exit 3). ``gpus`` is nccl_gpus (1..64), else the number of NVIDIA GPUs sysfs listed, else
    1 (``run_nccl_tests``). The iteration counts and ``extra`` are the code's own (their
    defaults: ``run_nccl_tests`` passes none of them).
    """
    per_process = gpus if launcher == "plain" else 1
    args = [
        binary,
        "-b",
        min_bytes,
        "-e",
        max_bytes,
        "-f",
        str(step_factor),
        "-g",
        str(per_process),
        "-n",
        str(iters),
        "-w",
        str(warmup_iters),
        "-c",
        str(check),
        *extra,
    ]
    if launcher == "mpirun":
        return ["mpirun", "-np", str(gpus), "--bind-to", "numa", *launcher_args, *args]
    if launcher == "srun":
        return [
            "srun",
            f"--ntasks-per-node={gpus}",
            "--gpus-per-task=1",
            *launcher_args,
            *args,
        ]
    return args


def run_nccl_tests(
    thresholds: Thresholds,
    gpu_count: int,
    progress: Optional[Progress] = None,
    limits: Optional[Limits] = None,
    budget=None,
) -> Dict[str, CommandRun]:
    """nccl-tests once, as configured (``nccl_tests``, ``nccl_launcher``, sizes, GPUs)."""
    from ibdiag.roles import NCCL_TESTS as NCCL_TESTS_ROLE

    if not thresholds.nccl_tests:
        return {}
    limits = limits or _unlimited()
    gpus = thresholds.nccl_gpus or gpu_count or 1
    argv = nccl_tests_argv(
        thresholds.nccl_tests,
        launcher=thresholds.nccl_launcher,
        gpus=gpus,
        min_bytes=thresholds.nccl_min_bytes,
        max_bytes=thresholds.nccl_max_bytes,
        launcher_args=thresholds.nccl_launcher_args,
    )
    runner = limits.runner(float(thresholds.nccl_timeout_s), budget)
    if time.monotonic() < limits.deadline_at:
        _say(progress, f"nccl-tests on {gpus} GPU(s): {' '.join(argv)}")
    run = _with_role(runner.run(argv), NCCL_TESTS_ROLE)
    return {run.key: run}


def _with_role(run: CommandRun, role: str) -> CommandRun:
    """``run`` recorded with the role it was planned for."""
    return run.model_copy(update={"role": role})


def _say(progress: Optional[Progress], message: str) -> None:
    if progress is not None:
        progress(message)
