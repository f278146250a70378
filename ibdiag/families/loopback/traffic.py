"""The loopback family's traffic: ib_write_bw per ACTIVE InfiniBand port, all ports at once.

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

Every process runs under a timeout that kills it with everything it started
(``ibdiag.runner.command_runner``): ``bandwidth.perftest_timeout_s`` (duration + start-up
allowance), at most ``--command-timeout`` when one was given, and nothing starts after the
traffic phase's deadline (``ibdiag.families._traffic.Limits``): a run the deadline left no
time for is recorded as never started, with the reason; a retry is only started while time is
left.

Every process is recorded as a CommandRun with the role it was planned for, saying what the
plan knew (``loopback client mlx5_0:1 attempt 1 gpu 0``, ``loopback server mlx5_1:1 for
mlx5_0:1 attempt 1 gpu 1``); the family's ``interpret`` turns them into ``Snapshot.loopback``.
"""

from __future__ import annotations

import functools
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple

from ibdiag import roles
from ibdiag.bandwidth import below_floor, perftest_floor, perftest_timeout_s
from ibdiag.families._traffic import Limits, Progress, unlimited
from ibdiag.model import CommandRun, Device, Port
from ibdiag.runner import interruptible
from ibdiag.thresholds import Thresholds

if TYPE_CHECKING:
    from ibdiag.runner.command_runner import OutputBudget

RETRY_PORT_OFFSET = 100
SERVER_START_S = 1.0  # the server listens well within this; the client then connects
SERVER_GRACE_S = 5.0  # after the client ends, the server has this long to end too


# ------------------------------------------------------------------------- ib_*_bw argv

DEFAULT_TCP_PORT = 18515  # perftest's DEF_PORT
BW_TOOLS = ("ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_atomic_bw")


def perftest_bw_argv(
    tool: str,
    device: str,
    ib_port: int,
    tcp_port: int = DEFAULT_TCP_PORT,
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


# ``ib_write_bw -d DEV -i PORT -p TCP --report_gbits -s SIZE -D SECS -q QPS -F [--use_cuda=N]
# [SERVER]``: ``perftest_bw_argv`` with the tool named (same arguments, in the same order).
ib_write_bw_argv = functools.partial(perftest_bw_argv, "ib_write_bw")


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

    def role(self, side: str) -> roles.Role:
        """What the ``side`` ("server" or "client") run is for: CommandRun.role."""
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


def _slower(*ports: Port) -> Optional[float]:
    """The lower link rate of the ports a test crosses (None when one is unknown)."""
    rates = [port.rate.gbps for port in ports if port.rate is not None]
    return min(rates) if rates and len(rates) == len(ports) else None


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
    budget: Optional[OutputBudget] = None,
) -> Dict[str, CommandRun]:
    """Run every test at once; then, at once again, one retry of each run below its floor
    while the deadline leaves time for it."""
    limits = limits or unlimited()
    runs: Dict[str, CommandRun] = {}
    wave = tests
    while wave:
        targets = ", ".join(test.target for test in wave)
        if time.monotonic() >= limits.deadline_at:  # record them, never started, with why
            outcomes = [_not_started(test, thresholds, limits) for test in wave]
        else:
            if progress is not None:
                progress(f"ib_write_bw attempt {wave[0].attempt}: {targets}")
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


def _not_started(
    test: LoopbackTest, thresholds: Thresholds, limits: Limits
) -> Tuple[CommandRun, CommandRun]:
    """(server run, client run) of a test the deadline left no time for."""
    runner = limits.runner(perftest_timeout_s(thresholds))
    server, client = (
        runner.run(test.argv(thresholds, side), test.role(side)) for side in ("server", "client")
    )
    return server, client


def client_gbps(run: CommandRun) -> Optional[float]:
    """The average Gb/s a client run reported, or None: read as the Snapshot's loopback
    field reads it (the family's ``interpret``)."""
    from ibdiag.families.loopback.parser import parse_run

    if not (run.stdout or run.stderr):
        return None
    return parse_run(run.stdout, run.stderr).average_gbps


def _run_wave(
    tests: List[LoopbackTest],
    thresholds: Thresholds,
    limits: Limits,
    budget: Optional[OutputBudget] = None,
) -> List[Tuple[CommandRun, CommandRun]]:
    """Every test of the wave at once; [(server run, client run)] in the tests' order."""
    from ibdiag.runner.command_runner import Runner

    own = perftest_timeout_s(thresholds)
    # Made before anything starts, so an interrupt at any moment reaches every one of them.
    runners = [limits.runner(own, budget) for _ in tests]

    def one(test: LoopbackTest, runner: Runner) -> Tuple[CommandRun, CommandRun]:
        result: Dict[str, CommandRun] = {}

        def side(role: str) -> CommandRun:
            return runner.run(test.argv(thresholds, role), test.role(role))

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
