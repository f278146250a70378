"""A simulated InfiniBand fabric that the real infiniband-diags tools talk to (not a test module).

``Fabric`` writes an ibnetdiscover-style topology file (NETFILE) from a small ``Topology``
(switches, HCAs, cables with a width and speed), starts Debian's ``ibsim -s NETFILE`` with its
console on a FIFO, starts one ``opensm`` per subnet under ``ibsim-run`` (LD_PRELOAD of
umad2sim), and waits, bounded, until every cabled HCA port is Active with a LID. Tests then run
the real tools as a simulated node (``SIM_HOST``), inject faults through the console
(``PerformanceSet`` counters, ``Unlink``/``ReLink``, ``Error`` MAD drops) and stop everything by
PID (process groups, then any process still carrying this fabric's socket name), even when the
test failed::

    topology = Topology(
        [Switch("leaf07", 36, "MF0;leaf07:MQM9700/U1"), Hca("node01-mlx5_3")],
        [Cable("node01-mlx5_3", 1, "leaf07", 21)],
    )
    with Fabric(tmp_path / "fabric", topology) as fabric:
        fabric.set_counter("leaf07", 21, "SymbolErrorCounter", 1234)
        shims = fabric.shim_dir(tmp_path / "bin", {"mlx5_3": "node01-mlx5_3"})
        # smpquery -C mlx5_3 -P 1 -D nodeinfo 0,1 with shims first on PATH reaches leaf07/21

How ibsim-utils 0.10 behaves, and what the harness does about it:

* **Many fabrics per machine.** ibsim and umad2sim meet on abstract Unix sockets named
  ``<base>:ctl`` / ``<base>:out<n>``, ``<base>`` being ``sim`` unless ``IBSIM_SOCKNAME`` says
  otherwise (both programs read it). Each ``Fabric`` uses its own ``ibdiag-test-<pid>-<random>``,
  so fabrics never meet one another or an ibsim someone else started; no lock is needed.
* **Width and speed belong to the cable.** A port line's ``lid N 4xQDR`` text sets that port's
  enabled width and speed, and the simulator trains the link to what both ends enable. The
  harness writes the cable's width and speed on both ends: with only one end narrowed or
  slowed, the link was back at the full width or speed once opensm had swept. ibsim models
  widths 1X/2X/4X/8X/12X and speeds SDR/DDR/QDR only (Supported is always "1X or 4X or 8X or
  12X or 2X" and "2.5 Gbps or 5.0 Gbps or 10.0 Gbps"). opensm runs with ``force_link_speed 0``,
  ``force_link_speed_ext 0`` and ``force_link_width 0``, so it leaves the enabled fields as the
  topology set them, and ``sweep_interval 1``, so a cable plugged back (``ReLink``) is Active
  again within about a second rather than ten.
* **The console** reads ibsim's stdin. At EOF it spins at 100% CPU, so the harness holds the
  FIFO open read-write for the fabric's life. ``console()`` waits for the next ``sim>`` prompt
  (ibsim answers commands in order, between MADs), so a counter set is in place before the
  next tool runs.
* **umad2sim** writes a ``sys-<pid>/`` tree into its working directory (removed when the tool
  exits normally, left behind when it is killed): every process here runs with the fabric's
  directory as its working directory, the shims too.
* **Clients sit on an HCA's port 1.** ibsim attaches every client (a tool, opensm) to the first
  port of the ``SIM_HOST`` node, and a tool sees that one port as ``ibsim0`` port 1: model each
  device ibdiag sees as its own single-port ``Hca`` (as mlx5 devices are). At most 10 clients
  may be attached at once (``IBSIM_MAX_CLIENTS``; each opensm holds one for its life): the next
  tool fails at once, exit 255, stderr ``sim_ctl: ctl error`` / ``sim_init: connect failed``.
  A level-standard run starts 3 perfquery runs per port plus its far-end chain (2 to 3 tools
  at once per port), so a node with many ports needs several fabrics: ``dispatch_shims``
  writes one PATH for them all, sending each run to the fabric of the device it names.
* **Not root changes nothing.** umad2sim answers the tool's ``open("/dev/infiniband/umadN")``
  itself (no kernel, no file mode) and ibsim listens on an abstract socket (no file mode
  either): as ``nobody`` the tools read the fabric exactly as root does, provided the working
  directory is writable (else umad2sim dies on ``Failed to make directory <./sys-PID>``, a
  failure of its own scratch tree). A node whose umad device is root-only cannot be simulated
  here; ``tests/families/test_partner_fabric.py`` builds one in a mount namespace instead.
* **Faults are instant, a dead simulator is not.** A MAD that ``Error`` drops, or that has no
  route (an unlinked cable, a DR path through a down port), fails at once with the real tools'
  ``_do_madrpc failed`` (ibsim answers with a timeout status; a real fabric would make the tool
  wait ``-t`` ms per try). A tool whose ibsim is gone or stopped (SIGSTOP) waits forever on its
  first control message: only the caller's kill bounds it. And ibsim itself exits (``ibpanic:
  sim_ctl_new_client: can't connect to in socket``) when a client dies between asking to attach
  and being attached, e.g. a tool killed the instant it started while ibsim was busy.
* **One SM per subnet.** A back-to-back cable between two HCAs is a subnet of its own: without
  an SM its ports stay in Initialize with LID 0. ``Fabric`` starts an opensm for each connected
  group of cables, attached (``SIM_HOST``) at its first HCA cabled at port 1.
* **MTU: always 2048.** Every port's PortInfo says NeighborMTU 2048 and MtuCap 2048 (a
  switch's port 0: 256 and 1024): ibsim copies them from its PortInfo templates
  (``sim_net.c``) and its Set(PortInfo) handler (``sim_mad.c do_portinfo``) stores LID, SMLid,
  LMC, states, OperVLs, widths and speeds from the SM, never NeighborMTU; the NETFILE's port
  options are width, speed and extended speed only. So no opensm option, partition ``mtu=`` or
  topology text lowers or raises a link's MTU here: the simulated switch port *is* a port
  capped at 2048, below the 4096 ``link.mtu`` expects (``SIM_IB_MTU``, ``sim_mtu_config``).
  A partition's ``mtu=`` is its multicast groups' MTU only: ``hpc=0x8001,ipoib,mtu=5`` makes
  the IPoIB broadcast group at 4096 (``saquery -g``: Mtu 0x85) over ports capped at 2048, and
  the SA lists a group only to ports of its partition.
* **Partitions.** opensm reads ``partitions.conf`` in the fabric's directory (never the
  machine's /etc/opensm), ``DEFAULT_PARTITIONS`` unless the test gives its text, or a function
  of the running fabric (called once ibsim is up, before opensm starts: ``port_guid`` works
  without an SM). The P_Key tables (``pkeys``: 64 entries, ibsim's PartCap) then hold 0xffff
  and each partition's key, full members with the 0x8000 bit, on the members' ports and the
  switch ports facing them; a port left out holds 0xffff only. ``set_partitions`` restarts the
  SM to apply a new file (opensm reads it at a heavy sweep; a restarted opensm that finds the
  ports Active logs no ``SUBNET UP``: wait for the keys themselves).
* **The SM stopped** (``stop_sm``): the ports keep what it set - Active, their LID, SMLid the
  dead SM's - so nothing on a port says it is gone. A cable bounce (``unlink``/``relink``)
  leaves the LID and SMLid as they were and the port in Initialize/LinkUp (no SM to arm it);
  ``clear`` then ``relink`` (a reset port, as after a reboot) gives Initialize with LID 0 and
  SMLid 0. ``sminfo`` tells nothing apart: with or without an SM it fails at once here
  (exit 255, ``_do_madrpc failed``), as every unanswered MAD does. ``start_sm`` brings the
  ports back to Active with a LID.
* **The node's sysfs.** ``mirror_port`` writes a port's PortInfo and P_Key table into a fake
  sysfs port directory as the kernel shows them (``lid``/``sm_lid`` ``0x%x``, ``state``
  ``4: ACTIVE``, ``phys_state`` ``5: LinkUp``, ``pkeys/N`` ``0x%04x``, every entry), so the
  checks that read sysfs see the simulated port "from the node".
* **Orphans.** Daemons are started in their own session with PR_SET_PDEATHSIG: if the test
  process itself is killed, the kernel kills them too (so start a Fabric on the thread that
  will stop it, e.g. in a pytest fixture).

Needs Debian's ``ibsim-utils`` (ibsim, ibsim-run, libumad2sim.so), ``opensm`` and
``infiniband-diags``. When one is missing ``start()`` raises ``FabricError`` saying which, so a
test fails rather than skips. Runs as any user. Python 3.9 compatible.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple, TypeVar, Union

from process_groups import terminate_group

__all__ = [
    "SHIMMED_TOOLS",
    "SIM_IB_MTU",
    "Cable",
    "Fabric",
    "FabricError",
    "Hca",
    "Switch",
    "Topology",
    "dispatch_shims",
    "leftover_processes",
    "parse_dotted",
    "parse_pkeys",
    "sim_mtu_config",
]

T = TypeVar("T")
PathLike = Union[str, "os.PathLike[str]"]

#: Programs the fabric needs, and the Debian package that ships each.
REQUIRED_PROGRAMS = {
    "ibsim": "ibsim-utils",
    "ibsim-run": "ibsim-utils",
    "opensm": "opensm",
    "smpquery": "infiniband-diags",
    "perfquery": "infiniband-diags",
}

#: The read-only infiniband-diags tools ``shim_dir`` writes a shim for by default.
SHIMMED_TOOLS: Tuple[str, ...] = (
    "smpquery",
    "perfquery",
    "ibstat",
    "ibaddr",
    "sminfo",
    "ibnetdiscover",
    "iblinkinfo",
    "ibqueryerrors",
    "ibroute",
    "ibtracert",
    "saquery",
)

#: Tools whose CA is a positional argument (``ibstat mlx5_0 1``) rather than ``-C``.
POSITIONAL_CA_TOOLS = frozenset({"ibstat"})

#: Every simulated HCA is this CA to the tools, whichever node ``SIM_HOST`` attaches to.
SIM_CA = "ibsim0"

#: The MTU of every simulated link (PortInfo NeighborMTU and MtuCap, bytes): ibsim's own, which
#: nothing the SM or the topology says changes. A standard run on the simulator fails
#: ``link.mtu`` at its default 4096 unless the run's config says ``expect_ib_mtu = 2048``
#: (``sim_mtu_config``).
SIM_IB_MTU = 2048


def sim_mtu_config(path: PathLike) -> Path:
    """Write an ibdiag config expecting the simulator's MTU (``expect_ib_mtu = 2048``) at
    ``path`` and return it."""
    target = Path(path)
    target.write_text(f"expect_ib_mtu = {SIM_IB_MTU}\n")
    return target


WIDTHS = (1, 2, 4, 8, 12)
SPEEDS = ("SDR", "DDR", "QDR")

# ibsim's console reads 128-byte lines; its NETFILE parser 256-byte ones; NodeDescription is a
# 64-byte field. Node ids become SIM_HOST values and console arguments.
_CONSOLE_LINE_MAX = 126
_NODE_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,39}$")
_DESCRIPTION_RE = re.compile(r"^[^\"'\\\n\r\t#]{1,63}$")
_DEVICE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_PROMPT = "sim> "
#: opensm's partitions file unless the test gives one: its own default (every port a full member
#: of the default partition, IPoIB on it), written out so that no /etc/opensm/partitions.conf
#: of the machine running the tests is read.
DEFAULT_PARTITIONS = "Default=0x7fff,ipoib : ALL=full;\n"
# PortInfo's LinkState / PhysLinkState as smpquery prints them -> the kernel's sysfs text
# (drivers/infiniband/core/sysfs.c: state_show "%d: %s", phys_state_show "%u: %s").
SYSFS_STATES = {
    "Down": "1: DOWN",
    "Initialize": "2: INIT",
    "Armed": "3: ARMED",
    "Active": "4: ACTIVE",
}
SYSFS_PHYS_STATES = {
    "Sleep": "1: Sleep",
    "Polling": "2: Polling",
    "Disabled": "3: Disabled",
    "PortConfigurationTraining": "4: PortConfigurationTraining",
    "LinkUp": "5: LinkUp",
    "LinkErrorRecovery": "6: LinkErrorRecovery",
    "PhyTest": "7: Phy Test",
}
_PKEY_ROW = re.compile(r"^\s*(\d+):((?:\s+0x[0-9a-fA-F]{1,4})+)\s*$")
_PR_SET_PDEATHSIG = 1


class FabricError(RuntimeError):
    """The fabric could not be started, a console command failed, or a wait timed out."""


@dataclasses.dataclass(frozen=True)
class Switch:
    """A switch node: ``name`` is its ibsim node id (console commands name it), ``ports`` its
    external port count (port 0, its management port, comes on top), ``description`` its
    NodeDescription (defaults to ``name``)."""

    name: str
    ports: int = 36
    description: Optional[str] = None

    kind = "Switch"


@dataclasses.dataclass(frozen=True)
class Hca:
    """An HCA node: ``name`` is its ibsim node id and the ``SIM_HOST`` that runs tools on it."""

    name: str
    ports: int = 1
    description: Optional[str] = None

    kind = "Hca"


Node = Union[Switch, Hca]


@dataclasses.dataclass(frozen=True)
class Cable:
    """A cable between ``a``'s port ``a_port`` and ``b``'s port ``b_port``, trained at
    ``width`` (1, 2, 4, 8, 12) and ``speed`` (``SDR``, ``DDR``, ``QDR``) on both ends."""

    a: str
    a_port: int
    b: str
    b_port: int
    width: int = 4
    speed: str = "QDR"

    def ends(self) -> Tuple[Tuple[str, int], Tuple[str, int]]:
        return (self.a, self.a_port), (self.b, self.b_port)


@dataclasses.dataclass(frozen=True)
class Topology:
    """Nodes (in NETFILE order) and the cables between them; ``validate()`` on construction."""

    nodes: Sequence[Node]
    cables: Sequence[Cable]

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "cables", tuple(self.cables))
        self.validate()

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(f"no node {name!r} in the topology")

    def validate(self) -> None:
        """Raise ``ValueError`` for what ibsim would reject or misread."""
        names = [node.name for node in self.nodes]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate node names in {names}")
        for node in self.nodes:
            if not _NODE_ID_RE.match(node.name):
                raise ValueError(f"node name {node.name!r}: use [A-Za-z0-9_.:/-], 40 at most")
            if node.description is not None and not _DESCRIPTION_RE.match(node.description):
                raise ValueError(
                    f"description {node.description!r}: 1-63 characters, no quotes, "
                    "backslash, tab, newline or '#'"
                )
            if not 1 <= node.ports <= 254:
                raise ValueError(f"{node.name}: {node.ports} ports (1..254)")
        used: Dict[Tuple[str, int], Cable] = {}
        for cable in self.cables:
            if cable.width not in WIDTHS or cable.speed not in SPEEDS:
                raise ValueError(f"{cable}: width in {WIDTHS}, speed in {SPEEDS}")
            for name, port in cable.ends():
                node = self.node(name)
                if not 1 <= port <= node.ports:
                    raise ValueError(f"{cable}: {name} has ports 1..{node.ports}")
                if (name, port) in used:
                    raise ValueError(
                        f"{name}[{port}] is on two cables: {used[name, port]}, {cable}"
                    )
                used[name, port] = cable
            if cable.ends()[0] == cable.ends()[1]:
                raise ValueError(f"{cable}: a port cannot be cabled to itself")

    def cable_at(self, name: str, port: int) -> Optional[Cable]:
        for cable in self.cables:
            if (name, port) in cable.ends():
                return cable
        return None

    def peer(self, name: str, port: int) -> Optional[Tuple[str, int]]:
        """The (node, port) at the other end of the cable on ``name``'s ``port``."""
        cable = self.cable_at(name, port)
        if cable is None:
            return None
        a, b = cable.ends()
        return b if a == (name, port) else a

    def subnets(self) -> List[List[Tuple[str, int]]]:
        """The cabled ports grouped by subnet (connected cables; through switches), each in
        NETFILE order."""
        parent: Dict[str, str] = {node.name: node.name for node in self.nodes}

        def root(name: str) -> str:
            while parent[name] != name:
                name = parent[name]
            return name

        for cable in self.cables:
            # An HCA's ports are separate end points: only switches join their ports' subnets.
            ends = [self._vertex(name, port) for name, port in cable.ends()]
            for vertex in ends:
                parent.setdefault(vertex, vertex)
            parent[root(ends[0])] = root(ends[1])
        groups: Dict[str, List[Tuple[str, int]]] = {}
        for node in self.nodes:
            for port in range(1, node.ports + 1):
                if self.cable_at(node.name, port) is not None:
                    vertex = self._vertex(node.name, port)
                    groups.setdefault(root(vertex), []).append((node.name, port))
        return list(groups.values())

    def _vertex(self, name: str, port: int) -> str:
        return name if isinstance(self.node(name), Switch) else f"{name}\0{port}"

    def netfile(self) -> str:
        """The topology in ibsim's NETFILE format (ibnetdiscover's, as ibsim 0.10 reads it)."""
        lines = ["# Written by tests/fabric_sim.py", ""]
        for node in self.nodes:
            description = node.description or node.name
            header = f'{node.kind}\t{node.ports} "{node.name}"\t# "{description}"'
            lines.append(header + (" enhanced port 0" if isinstance(node, Switch) else ""))
            for port in range(1, node.ports + 1):
                cable = self.cable_at(node.name, port)
                if cable is None:
                    continue
                far, far_port = self.peer(node.name, port)  # type: ignore[misc]
                far_description = self.node(far).description or far
                link = f"lid 0 {cable.width}x{cable.speed}"
                if isinstance(node, Switch):
                    comment = f'"{far_description}" {link}'
                else:  # an HCA port line starts with its own lid/lmc
                    comment = f'lid 0 lmc 0 "{far_description}" {link}'
                lines.append(f'[{port}]\t"{far}"[{far_port}]\t# {comment}')
            lines.append("")
        return "\n".join(lines)


def _which(program: str) -> Optional[str]:
    """``program`` on PATH or in the sbin directories (a non-root PATH often lacks them)."""
    path = os.pathsep.join([os.environ.get("PATH", os.defpath), "/usr/sbin", "/sbin"])
    return shutil.which(program, path=path)


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"({exc})"
    return "\n".join(text.splitlines()[-lines:]) or "(empty)"


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def leftover_processes(socket_name: str, directory: Optional[PathLike] = None) -> List[int]:
    """PIDs of live processes that belong to a fabric: their environment carries
    ``IBSIM_SOCKNAME=socket_name`` (every process the fabric and its shims start), or their
    working directory is ``directory``. Zombies (already dead, waiting to be reaped) are not
    counted."""
    needle = f"IBSIM_SOCKNAME={socket_name}".encode()
    home = str(Path(directory).resolve()) if directory is not None else None
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            status = (entry / "stat").read_text()
            if status.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                continue
            environ = (entry / "environ").read_bytes().split(b"\0")
            cwd = os.readlink(entry / "cwd") if home else None
        except OSError:
            continue
        if needle in environ or (home is not None and cwd == home):
            found.append(int(entry.name))
    return found


class Fabric:
    """A running simulated fabric (ibsim + one opensm per subnet) under ``directory``.

    Use it as a context manager (or ``start()``/``stop()``). ``directory`` (created) holds
    ``net`` (the NETFILE), ``console`` (the FIFO), ``ibsim.console`` (what the console
    printed), ``ibsim.stderr``, ``opensm.conf``, ``partitions.conf``, ``opensm-<n>.log``
    (``opensm-<n>.<k>.log`` for the k-th restart) and ``cache-<n>/``. ``startup_timeout``
    bounds the wait for the subnets (seconds); ``mad_timeout_ms`` is the ``-t`` of the
    harness's own queries. ``partitions``: opensm's partitions file, its text or a function of
    the fabric giving it (called once ibsim is up); ``sm_host``: the HCA the SM of its subnet
    runs on (default: the subnet's first HCA cabled at port 1).
    """

    def __init__(
        self,
        directory: PathLike,
        topology: Topology,
        startup_timeout: float = 30.0,
        mad_timeout_ms: int = 200,
        partitions: Union[str, Callable[[Fabric], str]] = DEFAULT_PARTITIONS,
        sm_host: Optional[str] = None,
    ) -> None:
        self.directory = Path(directory).resolve()
        self.topology = topology
        self.partitions = partitions
        self.sm_host = sm_host
        if sm_host is not None and not isinstance(topology.node(sm_host), Hca):
            raise ValueError(f"sm_host {sm_host}: the SM runs on an HCA")
        self.startup_timeout = startup_timeout
        self.mad_timeout_ms = mad_timeout_ms
        self.socket_name = f"ibdiag-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.netfile = self.directory / "net"
        self.console_path = self.directory / "console"
        self.console_log = self.directory / "ibsim.console"
        self.env: Dict[str, str] = {}
        self._ibsim: Optional[subprocess.Popen] = None
        self._opensm: List[subprocess.Popen] = []
        self._sm_hosts: List[Tuple[int, str]] = []  # (index, SIM_HOST) of each subnet's SM
        self._sm_log_names: List[Tuple[int, str]] = []  # (index, log file) of each SM start
        self._console_fd: Optional[int] = None
        self._console_lock = threading.Lock()
        self._programs: Dict[str, str] = {}

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Fabric:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> Fabric:
        """Start ibsim and the SMs; return once every cabled HCA port is Active with a LID.

        Raises ``FabricError`` (with the logs' tails) when a program is missing, a daemon
        exits, or the subnets are not up within ``startup_timeout``; everything started so far
        is stopped first.
        """
        self._check_prerequisites()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self.env = self._environment()
            self.netfile.write_text(self.topology.netfile())
            (self.directory / "opensm.conf").write_text(
                "force_link_speed 0\nforce_link_speed_ext 0\nforce_link_width 0\nsweep_interval 1\n"
                f"partition_config_file {self.directory / 'partitions.conf'}\n"
            )
            self._start_ibsim()
            if callable(self.partitions):  # it may ask the fabric (port_guid): ibsim is up
                self.partitions = self.partitions(self)
            (self.directory / "partitions.conf").write_text(self.partitions)
            for index, subnet in enumerate(self.topology.subnets()):
                hcas = [name for name, port in subnet if isinstance(self.topology.node(name), Hca)]
                attach = [name for name, port in subnet if name in hcas and port == 1]
                if self.sm_host in attach:
                    attach.insert(0, self.sm_host)
                if hcas and not attach:
                    raise FabricError(
                        f"subnet {subnet} has no HCA cabled at port 1, where its SM would "
                        "attach (ibsim attaches every client to an HCA's first port)"
                    )
                if attach:
                    self._start_opensm(index, attach[0])
            self.wait_until_up()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the SMs, then ibsim (SIGTERM to each process group, SIGKILL after 3 s), then
        SIGKILL any process still carrying this fabric's socket name (a tool a test or a shim
        left running). Safe to call more than once."""
        for process in [*self._opensm, self._ibsim]:
            if process is not None:
                _terminate_group(process)
        self._opensm, self._ibsim, self._sm_hosts, self._sm_log_names = [], None, [], []
        if self._console_fd is not None:
            os.close(self._console_fd)
            self._console_fd = None
        for _ in range(3):
            pids = leftover_processes(self.socket_name)
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)

    @property
    def pids(self) -> List[int]:
        """PIDs of ibsim and the opensm processes (for tests that check they are gone)."""
        return [p.pid for p in [self._ibsim, *self._opensm] if p is not None]

    # ------------------------------------------------------------------ the tools

    def run(
        self, host: str, tool: str, *args: str, timeout: float = 30.0
    ) -> subprocess.CompletedProcess:
        """Run ``tool args`` (e.g. ``"smpquery", "-D", "nodeinfo", "0,1"``) as the simulated
        HCA ``host``: ``SIM_HOST=host ibsim-run tool args``; stdout/stderr captured as text,
        never raises for a non-zero exit."""
        if not isinstance(self.topology.node(host), Hca):
            raise ValueError(f"{host} is not an HCA: tools run on HCAs")
        return subprocess.run(
            [self._programs["ibsim-run"], self._program(tool), *args],
            env={**self.env, "SIM_HOST": host},
            cwd=str(self.directory),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def portinfo(self, host: str, port: int, path: str = "0", port_number: int = -1) -> Dict:
        """``smpquery -C ibsim0 -P port -D portinfo PATH N`` as ``host``, as a dict of its
        ``Field:....value`` lines (``{}`` when the query failed). ``N`` is ``port_number``;
        by default ``port`` on the local path ``0``, else 0 (a switch's management port)."""
        number = port_number if port_number >= 0 else (port if path == "0" else 0)
        result = self.run(
            host,
            "smpquery",
            *("-C", SIM_CA, "-P", str(port), "-t", str(self.mad_timeout_ms)),
            *("-D", "portinfo", path, str(number)),
        )
        return parse_dotted(result.stdout) if result.returncode == 0 else {}

    def wait_until_up(self, timeout: Optional[float] = None) -> None:
        """Wait until every cabled HCA port is LinkState Active with a LID (the SM's sweep is
        done: LIDs assigned, routes set)."""
        pending = [
            (node.name, port)
            for node in self.topology.nodes
            if isinstance(node, Hca)
            for port in range(1, node.ports + 1)
            if self.topology.cable_at(node.name, port) is not None
        ]
        last: Dict[Tuple[str, int], Dict] = {}

        def all_active() -> bool:
            for end in list(pending):
                info = self.portinfo(*end)
                last[end] = info
                if info.get("LinkState") == "Active" and info.get("Lid", "0") != "0":
                    pending.remove(end)
                else:
                    return False
            return True

        self.wait_for(
            all_active,
            self.startup_timeout if timeout is None else timeout,
            lambda: (
                "HCA ports Active with a LID; still waiting for "
                + ", ".join(
                    f"{n}[{p}] (LinkState {last.get((n, p), {}).get('LinkState', '?')}, "
                    f"Lid {last.get((n, p), {}).get('Lid', '?')})"
                    for n, p in pending
                )
            ),
        )

    def wait_port_state(
        self, host: str, port: int, state: str = "Active", timeout: float = 15.0
    ) -> Dict:
        """Wait until ``host``'s own ``port`` shows LinkState ``state``; return its portinfo."""
        seen: List[Dict] = [{}]

        def reached() -> bool:
            seen[0] = self.portinfo(host, port)
            return seen[0].get("LinkState") == state

        self.wait_for(
            reached,
            timeout,
            lambda: f"{host}[{port}] LinkState {state} (last {seen[0].get('LinkState')})",
        )
        return seen[0]

    def switch_lid(self, host: str, port: int = 1) -> int:
        """The LID of the switch at the far end of ``host``'s ``port`` (its port 0's LID)."""
        info = self.portinfo(host, port, path="0,1", port_number=0)
        if not info.get("Lid", "0").isdigit() or info.get("Lid", "0") == "0":
            raise FabricError(f"no LID for the switch behind {host}[{port}]: {info}")
        return int(info["Lid"])

    def shim_dir(
        self,
        directory: PathLike,
        devices: Dict[str, str],
        tools: Iterable[str] = SHIMMED_TOOLS,
        default_device: Optional[str] = None,
    ) -> Path:
        """Write a PATH shim per tool into ``directory`` (created) and return it.

        ``devices`` maps a device name as ibdiag sees it (``mlx5_3``, from a sysfs tree) to the
        HCA node that plays it. Each shim runs the real tool (absolute path, so the shim does
        not find itself) through ``ibsim-run`` with this fabric's socket name and ``SIM_HOST``
        of the device named by ``-C DEV`` / ``-CDEV`` / ``--Ca DEV`` / ``--Ca=DEV`` (for
        ``ibstat``: its first positional argument), rewritten to ``ibsim0``. Everything else
        in argv is passed unchanged and the tool is ``exec``'d, so its exit status, stdout and
        stderr are the tool's own. A device not in ``devices`` is passed through unchanged
        (the tool then fails as it would for an unknown CA). Without a device the tool runs
        on ``default_device``'s node (default: the first in ``devices``). The tool runs in the
        fabric's directory (umad2sim writes its ``sys-<pid>/`` trees there) with
        ``LD_PRELOAD`` replaced by umad2sim's.
        """
        if not devices:
            raise ValueError("devices is empty: map at least one device to an HCA node")
        for device, host in devices.items():
            if not _DEVICE_RE.match(device):
                raise ValueError(f"device name {device!r}")
            if not isinstance(self.topology.node(host), Hca):
                raise ValueError(f"{device} -> {host}: {host} is not an HCA")
        default_host = devices[default_device or next(iter(devices))]
        target = Path(directory)
        target.mkdir(parents=True, exist_ok=True)
        cases = "\n".join(
            f"    {_shell_quote(device)}) host={_shell_quote(host)}; return 0 ;;"
            for device, host in devices.items()
        )
        for tool in tools:
            real = _which(tool)
            if real is None:
                raise FabricError(f"{tool} not found (install infiniband-diags)")
            script = _SHIM_TEMPLATE.format(
                tool=tool,
                real=_shell_quote(real),
                ibsim_run=_shell_quote(self._programs["ibsim-run"]),
                directory=_shell_quote(str(self.directory)),
                socket_name=_shell_quote(self.socket_name),
                default_host=_shell_quote(default_host),
                cases=cases,
                positional="1" if tool in POSITIONAL_CA_TOOLS else "0",
                ca=SIM_CA,
            )
            path = target / tool
            path.write_text(script)
            path.chmod(0o755)
        return target

    # ------------------------------------------------------------------ the console

    def console(self, command: str, timeout: float = 10.0) -> str:
        """Send one console command (``Unlink "Hca1"[1]``...) and return what ibsim printed
        for it, once it printed its next prompt (the command has then taken effect)."""
        if "\n" in command or len(command) > _CONSOLE_LINE_MAX:
            raise ValueError(f"one console line, {_CONSOLE_LINE_MAX} characters at most")
        if self._console_fd is None:
            raise FabricError("the fabric is not running")
        with self._console_lock:
            before = self._prompts()
            os.write(self._console_fd, command.encode() + b"\n")
            return self.wait_for(
                lambda: self._answer(before),
                timeout,
                f"ibsim's answer to {command!r}",
                interval=0.02,
            )[0]

    def set_counter(self, node: str, port: int, field: str, value: int) -> None:
        """``PerformanceSet "node"[port] PortCounters.field=value``; raises when ibsim does
        not confirm it (a misspelt field, a bad port)."""
        command = f'PerformanceSet "{node}"[{port}] PortCounters.{field}={value}'
        answer = self.console(command)
        if f"{field} has been set to {value}" not in answer:
            raise FabricError(f"{command!r}: ibsim answered {answer!r}")

    def unlink(self, node: str, port: int) -> str:
        """Pull the cable at ``node``'s ``port`` (both ends go Down/Polling)."""
        return self.console(f'Unlink "{node}"[{port}]')

    def relink(self, node: str, port: int) -> str:
        """Plug back a cable ``unlink`` pulled; the SM brings it back to Active."""
        return self.console(f'ReLink "{node}"[{port}]')

    def set_error_rate(self, node: str, port: int, percent: int) -> str:
        """Drop ``percent`` % of the MADs that ``node``'s ``port`` handles (100: every MAD
        through it times out; 0: healthy again)."""
        if not 0 <= percent <= 100:
            raise ValueError("percent is 0..100")
        return self.console(f'Error "{node}"[{port}] {percent}')

    def clear(self, node: str, port: int) -> str:
        """``Clear "node"[port]``: pull the cable and reset the port as a reboot would (PortInfo
        back to ibsim's down template: LID 0, SMLid 0, LMC 0, Down/Polling); ``relink``
        plugs it back, and only an SM brings it past Initialize and gives it a LID again."""
        return self.console(f'Clear "{node}"[{port}]')

    # ------------------------------------------------------------------ the subnet manager

    def stop_sm(self) -> None:
        """Stop every opensm (SIGTERM to its process group, SIGKILL after 3 s): the subnet
        has no SM. The ports keep what the SM set (LID, SMLid, Active) until something
        changes them; ``start_sm`` starts them again."""
        for process in self._opensm:
            _terminate_group(process)
        self._opensm = []

    def start_sm(self, wait: bool = True, host: Optional[str] = None) -> None:
        """Start an opensm for each subnet that had one (after ``stop_sm``), on the same HCA,
        with the same options, partitions file and LID cache (``guid2lid``: ports keep their
        LIDs); ``host``: an HCA its subnet's SM moves to instead (a failover: every port's
        SMLid becomes that HCA's LID). ``wait``: until every HCA port is Active with a LID."""
        if self._opensm:
            raise FabricError("opensm is running: stop_sm() first")
        if host is not None:
            if not isinstance(self.topology.node(host), Hca):
                raise ValueError(f"{host}: the SM runs on an HCA")
            subnet = next(
                (i for i, group in enumerate(self.topology.subnets()) if (host, 1) in group), None
            )
            if subnet is None:
                raise ValueError(f"{host} has no cable at port 1, where an SM attaches")
            self._sm_hosts = [(i, host if i == subnet else h) for i, h in self._sm_hosts]
        for index, where in list(self._sm_hosts):
            self._start_opensm(index, where)
        if wait:
            self.wait_for(self._mastered, self.startup_timeout, "opensm's MASTER state")
            self.wait_until_up()

    def set_partitions(
        self, text: str, settled: Optional[Callable[[], bool]] = None, timeout: float = 15.0
    ) -> None:
        """Write opensm's partitions file anew (``name=PKEY[,ipoib][,mtu=N] : GUID=full, ...;``
        lines; ``port_guid`` gives the GUIDs) and restart the SMs: opensm reads the file at a
        heavy sweep, which nothing here would trigger. Returns once each SM is master, every
        HCA port Active with a LID and ``settled()`` (e.g. a member's ``pkeys`` holding the new
        key) is true: the restarted SM logs no ``SUBNET UP`` to wait for."""
        self.partitions = text
        (self.directory / "partitions.conf").write_text(text)
        self.stop_sm()
        self.start_sm()
        if settled is not None:
            self.wait_for(settled, timeout, "the new partitions in the P_Key tables")

    @property
    def sm_running(self) -> bool:
        return bool(self._opensm) and all(p.poll() is None for p in self._opensm)

    # ------------------------------------------------------------------ what a port holds

    def port_guid(self, host: str, port: int = 1) -> str:
        """The port GUID of ``host``'s ``port`` (``0x`` and 16 hex digits), as nodeinfo says:
        what opensm's partitions file names a port by."""
        result = self.run(
            host, "smpquery", *("-C", SIM_CA, "-P", str(port), "-t", str(self.mad_timeout_ms)),
            *("-D", "nodeinfo", "0"),
        )  # fmt: skip
        guid = parse_dotted(result.stdout).get("PortGuid", "")
        if result.returncode != 0 or not guid.startswith("0x"):
            raise FabricError(f"no PortGuid for {host}[{port}]: {result.stdout}{result.stderr}")
        return f"0x{int(guid, 16):016x}"

    def pkeys(self, host: str, port: int = 1) -> List[int]:
        """``host``'s ``port``'s P_Key table as its SMA holds it (``smpquery pkeys``), every
        entry in order, 0 for an empty one (the kernel's ``ports/N/pkeys/*`` shows them all).
        Raises ``FabricError`` when the query fails."""
        result = self.run(
            host, "smpquery", *("-C", SIM_CA, "-P", str(port), "-t", str(self.mad_timeout_ms)),
            *("-D", "pkeys", "0", str(port)),
        )  # fmt: skip
        table = parse_pkeys(result.stdout)
        if result.returncode != 0 or not table:
            raise FabricError(f"smpquery pkeys on {host}[{port}]: {result.stdout}{result.stderr}")
        return table

    def mirror_port(self, host: str, port_dir: PathLike, port: int = 1) -> Dict[str, str]:
        """Write ``host``'s ``port`` into a fake sysfs port directory (``.../ports/1``) the way
        the kernel shows it (drivers/infiniband/core/sysfs.c): ``lid`` and ``sm_lid``
        (``0x%x``), ``state`` (``4: ACTIVE``), ``phys_state`` (``5: LinkUp``) from its
        PortInfo, and ``pkeys/0``..``pkeys/N-1`` (``0x%04x``, every entry) from its P_Key
        table. Other files (rate, link_layer, counters) are left as they are. Returns what
        was written, by file name."""
        info = self.portinfo(host, port)
        missing = [f for f in ("Lid", "SMLid", "LinkState", "PhysLinkState") if f not in info]
        if missing:
            raise FabricError(f"portinfo of {host}[{port}] lacks {missing}: {info}")
        written = {
            "lid": f"0x{int(info['Lid']):x}",
            "sm_lid": f"0x{int(info['SMLid']):x}",
            "state": SYSFS_STATES.get(info["LinkState"], f"0: {info['LinkState']}"),
            "phys_state": SYSFS_PHYS_STATES.get(info["PhysLinkState"], "0: <unknown>"),
        }
        written.update({f"pkeys/{n}": f"0x{k:04x}" for n, k in enumerate(self.pkeys(host, port))})
        directory = Path(port_dir)
        pkeys = directory / "pkeys"
        if pkeys.is_dir():
            for stale in pkeys.iterdir():
                stale.unlink()
        pkeys.mkdir(parents=True, exist_ok=True)
        for name, value in written.items():
            (directory / name).write_text(value + "\n")
        return written

    # ------------------------------------------------------------------ waiting, logs

    def wait_for(
        self,
        predicate: Callable[[], T],
        timeout: float,
        description: Union[str, Callable[[], str]] = "condition",
        interval: float = 0.1,
    ) -> T:
        """Call ``predicate`` every ``interval`` s until it returns a truthy value (returned).

        After ``timeout`` s raises ``FabricError`` naming ``description`` with the logs'
        tails; raises at once when ibsim or an opensm has exited."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            dead = [p.args[0] for p in [self._ibsim, *self._opensm] if p and p.poll() is not None]
            if dead or time.monotonic() >= deadline:
                what = description() if callable(description) else description
                cause = f"{', '.join(map(str, dead))} exited" if dead else f"timed out ({timeout}s)"
                raise FabricError(f"waiting for {what}: {cause}\n{self.log_tails()}")
            time.sleep(interval)

    def log_tails(self, lines: int = 20) -> str:
        """The last ``lines`` lines of ibsim's console and stderr and of each opensm log."""
        paths = [self.console_log, self.directory / "ibsim.stderr"]
        paths += sorted(self.directory.glob("opensm-*.log"))
        return "\n".join(f"--- {p} ---\n{_tail(p, lines)}" for p in paths if p.exists())

    # ------------------------------------------------------------------ internals

    def _check_prerequisites(self) -> None:
        missing = []
        for program, package in REQUIRED_PROGRAMS.items():
            found = _which(program)
            if found is None:
                missing.append(f"{program} (package {package})")
            else:
                self._programs[program] = found
        if missing:
            raise FabricError(
                "the fabric simulator is not installed; missing: "
                + ", ".join(missing)
                + ". Install with: apt-get install ibsim-utils opensm infiniband-diags"
            )

    def _program(self, tool: str) -> str:
        found = _which(tool)
        if found is None:
            raise FabricError(f"{tool} not found")
        return found

    def _environment(self) -> Dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "SIM_HOST")}
        env["PATH"] = os.pathsep.join([env.get("PATH", os.defpath), "/usr/sbin", "/sbin"])
        env["IBSIM_SOCKNAME"] = self.socket_name
        return env

    def _spawn(self, argv: List[str], stdout, stderr, stdin, env: Dict[str, str]):
        return subprocess.Popen(
            argv,
            env=env,
            cwd=str(self.directory),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,  # own process group, killed as one in stop()
            preexec_fn=_die_with_parent,  # the kernel kills it if the test process dies
        )

    def _start_ibsim(self) -> None:
        if self.console_path.exists():
            self.console_path.unlink()
        os.mkfifo(self.console_path, 0o600)
        # Held read-write for the fabric's life: ibsim never sees EOF on its console (at EOF
        # it would spin), and opening the read end below does not block.
        self._console_fd = os.open(self.console_path, os.O_RDWR)
        reader = os.open(self.console_path, os.O_RDONLY | os.O_NONBLOCK)
        os.set_blocking(reader, True)
        try:
            out = open(self.console_log, "wb")  # closed below, once ibsim has it
            err = open(self.directory / "ibsim.stderr", "wb")
            with out, err:
                argv = [self._programs["ibsim"], "-s", str(self.netfile)]
                self._ibsim = self._spawn(argv, out, err, reader, self.env)
        finally:
            os.close(reader)
        self.wait_for(
            lambda: _PROMPT in self.console_log.read_text(errors="replace"),
            10,
            "ibsim's first console prompt",
            interval=0.02,
        )

    def _start_opensm(self, index: int, host: str) -> None:
        cache = self.directory / f"cache-{index}"
        cache.mkdir(exist_ok=True)
        # each start logs apart (opensm-0.log, then opensm-0.1.log, ...): "SUBNET UP" in the
        # newest log is this SM's first sweep done
        starts = sum(1 for i, _ in self._sm_log_names if i == index)
        log = self.directory / (
            f"opensm-{index}.log" if not starts else f"opensm-{index}.{starts}.log"
        )
        self._sm_log_names.append((index, log.name))
        argv = [
            self._programs["ibsim-run"],
            self._programs["opensm"],
            "-F",
            str(self.directory / "opensm.conf"),
            "-f",
            str(log),
        ]
        env = {**self.env, "SIM_HOST": host, "OSM_CACHE_DIR": str(cache)}
        with open(self.directory / f"opensm-{index}.out", "ab") as out:
            self._opensm.append(self._spawn(argv, out, subprocess.STDOUT, subprocess.DEVNULL, env))
        if (index, host) not in self._sm_hosts:
            self._sm_hosts.append((index, host))

    def _mastered(self) -> bool:
        """Whether every running SM's newest log says ``Entering MASTER state``. (A restarted
        opensm that finds the ports Active logs no ``SUBNET UP``: it sets what differs from
        its configuration, P_Key tables included, and goes on sweeping.)"""
        newest: Dict[int, str] = {}
        for index, name in self._sm_log_names:
            newest[index] = name
        for name in newest.values():
            path = self.directory / name
            if not path.exists() or "Entering MASTER state" not in path.read_text(errors="replace"):
                return False
        return True

    def _prompts(self) -> int:
        return self.console_log.read_text(errors="replace").count(_PROMPT)

    def _answer(self, before: int) -> Optional[Tuple[str]]:
        """What ibsim printed between prompt ``before`` and the next one, once it came."""
        text = self.console_log.read_text(errors="replace")
        parts = text.split(_PROMPT)
        if len(parts) - 1 <= before:
            return None
        return (parts[before],)  # parts[k]: what came after the k-th prompt


def parse_dotted(text: str) -> Dict[str, str]:
    """``Field:.......value`` lines (smpquery, perfquery) as ``{"Field": "value"}``; lines in
    another shape (the ``# ...`` header, continuation lines) are skipped."""
    fields: Dict[str, str] = {}
    for line in text.splitlines():
        match = re.match(r"^([A-Za-z][A-Za-z0-9 _]*?):\.+(.*)$", line)
        if match:
            fields[match.group(1)] = match.group(2).strip()
    return fields


def parse_pkeys(text: str) -> List[int]:
    """``smpquery pkeys`` rows (``   0: 0xffff 0x8001 0x0000 ...``) as the table's entries in
    order (the ``N pkeys capacity`` trailer and anything else is skipped)."""
    table: List[int] = []
    for line in text.splitlines():
        match = _PKEY_ROW.match(line)
        if match and int(match.group(1)) == len(table):
            table.extend(int(value, 16) for value in match.group(2).split())
    return table


def dispatch_shims(
    directory: PathLike,
    shims: Dict[str, PathLike],
    tools: Iterable[str] = SHIMMED_TOOLS,
    default_device: Optional[str] = None,
) -> Path:
    """Write a PATH shim per tool into ``directory`` (created) that hands each run to the shim
    directory of the device it names, and return ``directory``: a node whose HCAs sit on
    several fabrics (ibsim attaches at most 10 clients at once, so a standard run on 8 ports
    needs more than one).

    ``shims`` maps a device name (``mlx5_3``) to a directory ``Fabric.shim_dir`` wrote for it
    (any directory holding an executable per tool will do). The device is found as
    ``shim_dir``'s shims find it (``-C DEV``, ``-CDEV``, ``--Ca DEV``, ``--Ca=DEV``; ``ibstat``:
    its first positional argument; the last one named wins); argv is passed on unchanged and
    the shim ``exec``'d, so exit status and streams are the tool's. A run naming no device, or
    a device not in ``shims``, goes to ``default_device``'s directory (default: the first in
    ``shims``), whose shim passes an unknown device to the tool unchanged.
    """
    if not shims:
        raise ValueError("shims is empty: map at least one device to a shim directory")
    tools = list(tools)
    for device, shim_dir in shims.items():
        if not _DEVICE_RE.match(device):
            raise ValueError(f"device name {device!r}")
        for tool in tools:
            if not os.access(Path(shim_dir) / tool, os.X_OK):
                raise ValueError(f"{device} -> {shim_dir}: no executable {tool} there")
    default_dir = Path(shims[default_device or next(iter(shims))]).resolve()
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    for tool in tools:
        cases = "\n".join(
            f"    {_shell_quote(device)}) shim={_shell_quote(str(Path(d).resolve() / tool))} ;;"
            for device, d in shims.items()
        )
        script = _DISPATCH_TEMPLATE.format(
            tool=tool,
            cases=cases,
            default=_shell_quote(str(default_dir / tool)),
            positional="1" if tool in POSITIONAL_CA_TOOLS else "0",
        )
        path = target / tool
        path.write_text(script)
        path.chmod(0o755)
    return target


def _terminate_group(process: subprocess.Popen) -> None:
    terminate_group(process, grace=3.0)


# POSIX sh: rebuilds argv with the device rewritten (the "set -- ... shift" rotation keeps every
# argument's bytes, spaces included), then execs the real tool under ibsim-run.
_SHIM_TEMPLATE = """#!/bin/sh
# {tool} on a simulated fabric: written by tests/fabric_sim.py (Fabric.shim_dir).
# Maps the device of -C/--Ca (or ibstat's first argument) to its simulated HCA node, runs the
# real tool as that node through ibsim-run with the device rewritten to {ca}.
host=
map() {{
  case "$1" in
{cases}
  esac
  return 1
}}
positional={positional}
expect=0
n=$#
while [ "$n" -gt 0 ]; do
  a=$1
  shift
  n=$((n - 1))
  if [ "$expect" = 1 ]; then
    expect=0
    if map "$a"; then a={ca}; fi
  else
    case "$a" in
      -C|--Ca) expect=1 ;;
      --Ca=*) if map "${{a#--Ca=}}"; then a=--Ca={ca}; fi ;;
      -C*) if map "${{a#-C}}"; then a=-C{ca}; fi ;;
      -*) ;;
      *) if [ "$positional" = 1 ]; then positional=0; if map "$a"; then a={ca}; fi; fi ;;
    esac
  fi
  set -- "$@" "$a"
done
[ -n "$host" ] || host={default_host}
cd {directory} || exit 127
unset LD_PRELOAD
SIM_HOST=$host IBSIM_SOCKNAME={socket_name}
export SIM_HOST IBSIM_SOCKNAME
exec {ibsim_run} {real} "$@"
"""


# POSIX sh: finds the device as _SHIM_TEMPLATE does (without rewriting anything), then execs the
# shim of that device's fabric with argv unchanged.
_DISPATCH_TEMPLATE = """#!/bin/sh
# {tool} for a node on several simulated fabrics: written by tests/fabric_sim.py
# (dispatch_shims). Runs the shim of the fabric that holds the device named by -C/--Ca (or
# ibstat's first argument), with every argument unchanged.
shim=
pick() {{
  shim=
  case "$1" in
{cases}
  esac
}}
positional={positional}
expect=0
for a in "$@"; do
  if [ "$expect" = 1 ]; then
    expect=0
    pick "$a"
  else
    case "$a" in
      -C|--Ca) expect=1 ;;
      --Ca=*) pick "${{a#--Ca=}}" ;;
      -C*) pick "${{a#-C}}" ;;
      -*) ;;
      *) if [ "$positional" = 1 ]; then positional=0; pick "$a"; fi ;;
    esac
  fi
done
[ -n "$shim" ] || shim={default}
exec "$shim" "$@"
"""
