"""Hostile sysfs/procfs trees, generated from a seed, run through ibdiag end to end.

Shared by ``tests/sources/test_fuzz_trees.py`` (a bounded run in CI) and
``benchmarks/fuzz_trees.py``
(thousands of cases). A case is a builder node (1-3 ConnectX HCAs, 1-2 ports each, IPoIB or
RoCE, its procfs) with 1-5 mutations drawn from ``MUTATIONS``: names no driver would give
(a space, ``\\r``, ``;``, DEL, byte 0xff, ``²``, ports ``0``/``65536``/``10^23``, a RoCE
``gid_attrs/ndevs/0`` of ``../..``), FIFOs, sockets and device nodes in place of attributes,
symlinks out of the tree to a root-only file or directory, garbage values, directories where
files belong, dangling links and link loops, odd hostnames. ``case(seed, index)`` is the same
tree every time; ``mutations`` says what was done, so a failing case is rebuilt and read by hand.

Every case runs, in-process (click's CliRunner, as ``tests/conftest.py``'s ``run_cli``):

1. ``ibdiag check --level quick --json``;
2. ``ibdiag check --level standard --json`` with stub tools on PATH (``tests/stubs``): perfquery,
   ethtool, dmesg, ibstat, ibv_devinfo print real captures;
3. (every case, or every N-th: ``run(round_trip_every=N)``) ``ibdiag collect --tarball``, every
   other one with ``--redact all``, then ``ibdiag report BUNDLE --json``.

and is judged on what must never happen: a traceback (or "internal error", or a check that
crashed), a hang (the case not done in its time), an exit code outside 0-3, output that is not
JSON where JSON was asked for, the secret of a file outside the tree (its contents, or a name
inside an outside directory) anywhere in the output or in the bundle, and processes left
behind. ``run`` spreads the cases over worker processes (``python tests/fuzz_trees.py
--worker``), so a case that hangs is killed with its worker and counted, and the rest go on.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import random
import select
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
if TESTS_DIR not in sys.path:
    sys.path.insert(0, TESTS_DIR)

import stubs as S  # noqa: E402
from sysfs_builder import HcaSpec, PortSpec, write_node  # noqa: E402

# What a run is judged on; the order of the summary line.
COUNTS = (
    "tracebacks",
    "hangs",
    "exit codes outside 0-3",
    "invalid JSON",
    "files outside the tree in output or bundle",
    "processes left",
)
CASE_TIMEOUT_S = 90.0  # one case, all its runs: far beyond what a healthy one takes
DEADLINE = "4"  # --deadline / --command-timeout of the standard-level runs
COMMAND_TIMEOUT = "2"

# -- what the mutations put in the tree ------------------------------------------------------

ODD_DEVICE_NAMES: Tuple[bytes, ...] = (
    b"mlx5 0", b"mlx5\r0", b"mlx5;0", b"mlx5\x7f0", b"mlx5_\xff", b"mlx5\n0", b"-mlx5_0",
    b"mlx5\\x41", b"mlx5_$(id)", b"mlx5_`id`", b"mlx5_\t0", b"m" * 200, b"\xc3\xa9mlx5",
    b"mlx5_\xe2\x80\xae0", b"mlx5_0 --reset", b"..mlx5", b"mlx5_\x1b[2J",
)  # fmt: skip
ODD_PORT_NAMES: Tuple[bytes, ...] = (
    b"0", b"65536", b"1" + b"0" * 23, b"255", b"\xc2\xb2", b"\xe2\x91\xa0", b"\xd9\xa3", b"01",
    b"-1", b"1 ", b"0x1", b"\xff", b"9" * 200, b"1\n",
)  # fmt: skip
ODD_NETDEV_NAMES: Tuple[bytes, ...] = (
    b"ib 0", b"ib\r0", b"ib;0", b"ib\x7f0", b"ib\xff", b"-ib0", b"ib0$(id)", b"ib\n0",
    b"i" * 40, b"ib\\0",
)  # fmt: skip
ODD_NDEV_CONTENTS: Tuple[bytes, ...] = (
    b"../..", b"../../../../../../etc", b".", b"..", b"a/b", b"ib0;x", b"\xff\xfe", b"-S",
    b"x" * 300, b"ib0\x00x", b"", b"\n\n",
)  # fmt: skip
GARBAGE: Tuple[bytes, ...] = (
    b"", b"\n", b"\xff\xfe\x00\x01", b"-1\n", b"18446744073709551616\n", b"1" * 5000 + b"\n",
    b"N/A (no PMA)\n", b"4: ACTIVE\x00junk", b"9999999: X\n", b"0x\n", b"nan\n",
    b"400 Gb/sec (4X NDR" + b")" * 3 + b"\n", b"\x1b[31mred\x1b[0m\n", b"A" * 70000,
    "\u202e\u200b\ufeff\n".encode(), b"16.0 GT/s PCIe\r\n", b"1e308\n",
)  # fmt: skip
ODD_HOSTNAMES: Tuple[bytes, ...] = (
    b"node\xff01", b"node\r\nIBDIAG OK", b"n\x00de", b"node\x1b[2J", b"-node", b"a" * 300,
    b"node\xc2\xb2", b"node 01;reboot", b"",
)  # fmt: skip


@dataclasses.dataclass
class Case:
    """One generated node, in ``directory``; ``mutations`` says what was done to it."""

    seed: int
    index: int
    directory: str
    sysfs: str
    procfs: str
    stubs: S.StubBin
    secret: str
    mutations: List[str]

    @property
    def name(self) -> str:
        return f"seed {self.seed} case {self.index}"


class _Tree:
    """What a mutation needs to know about the node it changes."""

    def __init__(self, case: Case, rng: random.Random, hcas: List[HcaSpec]) -> None:
        self.case = case
        self.rng = rng
        self.hcas = hcas
        self.outside = os.path.join(case.directory, "outside")
        self.shadow = os.path.join(self.outside, "shadow")
        self.outside_dir = os.path.join(self.outside, "host", "0000:77:00.0")

    # -- where things are (listed afresh: earlier mutations move them) --

    def class_entries(self) -> List[bytes]:
        base = os.path.join(os.fsencode(self.case.sysfs), b"class", b"infiniband")
        return sorted(os.path.join(base, name) for name in _listdir(base))

    def device_dirs(self) -> List[bytes]:
        return [os.path.realpath(entry) for entry in self.class_entries() if os.path.isdir(entry)]

    def port_dirs(self) -> List[bytes]:
        found = []
        for device in self.device_dirs():
            ports = os.path.join(device, b"ports")
            found += [os.path.join(ports, name) for name in _listdir(ports)]
        return sorted(found)

    def net_dirs(self) -> List[bytes]:
        pattern = os.path.join(self.case.sysfs, "devices", "*", "*", "net", "*")
        return sorted(os.fsencode(path) for path in glob.glob(pattern))

    def files(self) -> List[bytes]:
        """Every regular file of the tree (sysfs and procfs), as bytes paths."""
        found = []
        for top in (self.case.sysfs, self.case.procfs):
            for directory, _, names in os.walk(os.fsencode(top)):
                for name in names:
                    path = os.path.join(directory, name)
                    if os.path.isfile(path) and not os.path.islink(path):
                        found.append(path)
        return sorted(found)

    def directories(self) -> List[bytes]:
        found = []
        for top in (self.case.sysfs, self.case.procfs):
            for directory, names, _ in os.walk(os.fsencode(top)):
                found += [os.path.join(directory, name) for name in names]
        return sorted(found)

    def pick(self, items: Sequence):
        if not items:
            raise LookupError("nothing left to change")
        return items[self.rng.randrange(len(items))]

    def shown(self, path: bytes) -> str:
        return os.fsdecode(os.path.relpath(path, os.fsencode(self.case.directory)))


def _listdir(path: bytes) -> List[bytes]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _remove(path: bytes) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


# -- the mutations: each changes the tree and says what it did --------------------------------


def odd_device_name(tree: _Tree) -> str:
    entry = tree.pick(tree.class_entries())
    new = os.path.join(os.path.dirname(entry), tree.pick(ODD_DEVICE_NAMES))
    os.rename(entry, new)
    return f"device {tree.shown(entry)} renamed {os.path.basename(new)!r}"


def odd_port_dir(tree: _Tree) -> str:
    port = tree.pick(tree.port_dirs())
    new = os.path.join(os.path.dirname(port), tree.pick(ODD_PORT_NAMES))
    if os.path.lexists(new):
        raise LookupError("taken")
    os.rename(port, new)
    return f"port {tree.shown(port)} renamed {os.path.basename(new)!r}"


def odd_netdev_name(tree: _Tree) -> str:
    net = tree.pick(tree.net_dirs())
    name = tree.pick(ODD_NETDEV_NAMES)
    os.rename(net, os.path.join(os.path.dirname(net), name))
    link = os.path.join(os.fsencode(tree.case.sysfs), b"class", b"net", os.path.basename(net))
    if os.path.lexists(link):
        os.remove(link)
        new = os.path.join(os.path.dirname(net), name)
        os.symlink(new, os.path.join(os.path.dirname(link), name))
    return f"netdev {tree.shown(net)} renamed {name!r}"


def odd_gid_ndev(tree: _Tree) -> str:
    port = tree.pick(tree.port_dirs())
    path = os.path.join(port, b"gid_attrs", b"ndevs", b"0")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    content = tree.pick(ODD_NDEV_CONTENTS)
    _write(path, content + b"\n")
    return f"{tree.shown(path)} = {content!r}"


def odd_counter_name(tree: _Tree) -> str:
    port = tree.pick(tree.port_dirs())
    directory = os.path.join(port, tree.pick((b"counters", b"hw_counters")))
    name = tree.pick(ODD_DEVICE_NAMES + ODD_NETDEV_NAMES).replace(b"/", b"_")
    os.makedirs(directory, exist_ok=True)
    _write(os.path.join(directory, name), tree.pick((b"3\n", b"x\n", b"")))
    return f"counter {name!r} in {tree.shown(directory)}"


def fifo(tree: _Tree) -> str:
    path = tree.pick(tree.files())
    os.remove(path)
    os.mkfifo(path)
    return f"{tree.shown(path)} is a FIFO"


def unix_socket(tree: _Tree) -> str:
    path = tree.pick(tree.files())
    os.remove(path)
    here = os.getcwd()  # bind() takes at most ~107 bytes: bind by a short relative name
    os.chdir(os.path.dirname(path))
    try:
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(os.path.basename(path))
        listener.close()  # the socket file stays; opening it gives ENXIO
    finally:
        os.chdir(here)
    return f"{tree.shown(path)} is a socket"


def device_node(tree: _Tree) -> str:
    """A character device in place of an attribute: /dev/zero's (never ends) or /dev/null's."""
    path = tree.pick(tree.files())
    minor = tree.pick((5, 3))
    os.remove(path)
    try:
        os.mknod(path, 0o644 | stat.S_IFCHR, os.makedev(1, minor))
    except PermissionError:  # not root: a FIFO stands in
        os.mkfifo(path)
        return f"{tree.shown(path)} is a FIFO (no mknod)"
    return f"{tree.shown(path)} is char device 1:{minor}"


def link_out_to_a_file(tree: _Tree) -> str:
    path = tree.pick(tree.files())
    os.remove(path)
    target = os.fsencode(tree.shadow)
    if tree.rng.random() < 0.5:
        target = os.path.relpath(target, os.path.dirname(path))
    os.symlink(target, path)
    return f"{tree.shown(path)} -> {os.fsdecode(target)}"


def link_out_to_a_directory(tree: _Tree) -> str:
    candidates = tree.directories() + tree.class_entries()
    candidates += [d + b"/device" for d in tree.device_dirs()]
    path = tree.pick(candidates)
    _remove(path)
    os.symlink(os.fsencode(tree.outside_dir), path)
    return f"{tree.shown(path)} -> the outside directory"


def garbage_value(tree: _Tree) -> str:
    path = tree.pick(tree.files())
    value = tree.pick(GARBAGE)
    _write(path, value)
    return f"{tree.shown(path)} = {value[:40]!r}"


def directory_instead(tree: _Tree) -> str:
    path = tree.pick(tree.files())
    os.remove(path)
    os.mkdir(path)
    return f"{tree.shown(path)} is a directory"


def dangling_link(tree: _Tree) -> str:
    path = tree.pick(tree.files() + tree.class_entries())
    _remove(path)
    os.symlink(b"../nowhere/at/all", path)
    return f"{tree.shown(path)} dangles"


def link_loop(tree: _Tree) -> str:
    path = tree.pick(tree.files() + tree.directories())
    _remove(path)
    os.symlink(os.path.basename(path), path)
    return f"{tree.shown(path)} links to itself"


def removed(tree: _Tree) -> str:
    path = tree.pick(tree.files() + tree.directories())
    _remove(path)
    return f"{tree.shown(path)} removed"


def odd_hostname(tree: _Tree) -> str:
    path = os.path.join(os.fsencode(tree.case.procfs), b"sys", b"kernel", b"hostname")
    value = tree.pick(ODD_HOSTNAMES)
    _remove(path)
    _write(path, value + b"\n")
    return f"hostname = {value[:40]!r}"


MUTATIONS: Tuple[Callable[[_Tree], str], ...] = (
    odd_device_name, odd_port_dir, odd_netdev_name, odd_gid_ndev, odd_counter_name, fifo,
    unix_socket, device_node, link_out_to_a_file, link_out_to_a_directory, garbage_value,
    directory_instead, dangling_link, link_loop, removed, odd_hostname,
)  # fmt: skip


def _write(path: bytes, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)


# -- a case ------------------------------------------------------------------------------------


def _hcas(rng: random.Random) -> List[HcaSpec]:
    counters = {"symbol_error": 0, "link_downed": 0, "port_rcv_errors": 0, "port_xmit_data": 9}
    hw = {"out_of_sequence": 0, "rnr_nak_retry_err": 0}
    hcas = []
    netdev = 0
    for index in range(rng.randint(1, 3)):
        ports = []
        for _ in range(rng.randint(1, 2)):
            roce = rng.random() < 0.3
            ports.append(
                PortSpec(
                    link_layer="Ethernet" if roce else "InfiniBand",
                    rate="100 Gb/sec (4X EDR)" if roce else "200 Gb/sec (4X HDR)",
                    netdev=f"enp{netdev}s0" if roce else f"ib{netdev}",
                    state=rng.choice(("4: ACTIVE", "4: ACTIVE", "4: ACTIVE", "1: DOWN")),
                    counters=dict(counters),
                    hw_counters=dict(hw),
                )
            )
            netdev += 1
        # the PCI addresses of the captures the kernel-log stub prints (findings land on them)
        address = ("0000:0d:00.0", "0000:1a:00.0", "0000:3b:00.0")[index]
        hcas.append(HcaSpec(name=f"mlx5_{index}", pci_address=address, ports=ports))
    return hcas


def make_case(seed: int, index: int, parent: str) -> Case:
    """Build case ``index`` of ``seed`` in a new directory under ``parent``."""
    rng = random.Random(f"{seed}:{index}")  # noqa: S311 - reproducible, not secret
    directory = tempfile.mkdtemp(prefix=f"case{index}-", dir=parent)
    secret = f"SECRET{rng.getrandbits(64):016x}"
    case = Case(
        seed=seed,
        index=index,
        directory=directory,
        sysfs=os.path.join(directory, "sys"),
        procfs=os.path.join(directory, "proc"),
        stubs=S.StubBin(os.path.join(directory, "stubs")),
        secret=secret,
        mutations=[],
    )
    hcas = _hcas(rng)
    write_node(case.sysfs, hcas)
    for number, hca in enumerate(hcas):  # RoCE ports name their netdev in the GID table
        for port_number, port in enumerate(hca.ports, start=1):
            if port.link_layer == "Ethernet":
                ndev = os.path.join(
                    case.sysfs, "class", "infiniband", hca.name, "ports", str(port_number),
                    "gid_attrs", "ndevs", "0",
                )  # fmt: skip
                os.makedirs(os.path.dirname(ndev), exist_ok=True)
                _write(os.fsencode(ndev), f"{port.netdev}\n".encode())
        del number
    S.write_procfs(case.procfs, boot_time=time.time() - 3600)
    _write_outside(case)
    _write_stubs(case, len(hcas))
    tree = _Tree(case, rng, hcas)
    for _ in range(rng.randint(1, 5)):
        mutation = rng.choice(MUTATIONS)
        try:
            case.mutations.append(mutation(tree))
        except (OSError, LookupError, ValueError) as exc:
            case.mutations.append(f"{mutation.__name__}: not applied ({exc})")
    return case


def _write_outside(case: Case) -> None:
    """A root-only file and directory beside the tree, holding the secret (contents and a name)."""
    outside = os.path.join(case.directory, "outside")
    host = os.path.join(outside, "host", "0000:77:00.0")  # named like a PCI function
    os.makedirs(host)
    shadow = os.path.join(outside, "shadow")
    _write(os.fsencode(shadow), f"root:{case.secret}:19000:0:99999:7:::\n".encode())
    os.chmod(shadow, 0o600)
    for name in ("numa_node", "fw_ver", "state", "rate", "mtu", "operstate", "symbol_error",
                 "hostname", "boot_id", "vendor", "0", "1"):  # fmt: skip
        _write(os.fsencode(os.path.join(host, name)), f"{case.secret}\n".encode())
    _write(os.fsencode(os.path.join(host, case.secret)), b"1\n")  # a name that must not leak


def _write_stubs(case: Case, count: int) -> None:
    """The tools of level standard, printing real captures. Leaner than ``StubBin.add``'s
    scripts (no call log): one ``exec cat`` each, as a case runs dozens of them."""
    bin_dir = case.stubs.bin
    ibstat = S.fixture("ibstat", "gpud-ibstat-a100-vm-9xMT4126-VF-hdr-all-active.txt")
    captures = {
        "ethtool": S.fixture(*S.ETHTOOL_S),
        "dmesg": S.fixture(*S.DMESG_FW_SYNDROME),
        "ibstat": S.first_blocks(ibstat, "CA '", count, case.stubs.root / "ibstat"),
        "ibv_devinfo": S.fixture(
            "ibv_devinfo", "linux-rdma-2024-cx5-roce-two-pf-before-bonding.txt"
        ),
    }
    xmit_sl = case.stubs.root / "perfquery-X"
    xmit_sl.write_text(S.PERFQUERY_XMIT_SL)
    scripts = {name: f"exec cat {shlex.quote(path)}\n" for name, path in captures.items()}
    scripts["journalctl"] = "echo 'journalctl: not expected' >&2\nexit 1\n"
    healthy, details = S.fixture(*S.PERFQUERY_X_HEALTHY), S.fixture(*S.PERFQUERY_E)
    scripts["perfquery"] = (
        'case "$1" in\n'
        f"-E) exec cat {shlex.quote(details)} ;;\n"
        f"-X) exec cat {shlex.quote(str(xmit_sl))} ;;\n"
        f"*) exec cat {shlex.quote(healthy)} ;;\n"
        "esac\n"
    )
    for name, body in scripts.items():
        script = bin_dir / name
        script.write_text(f"#!/bin/sh\nPATH={shlex.quote(os.defpath)}\n{body}")
        script.chmod(0o755)


# -- running a case ----------------------------------------------------------------------------


@dataclasses.dataclass
class Outcome:
    """What one case did: its zero-counts (``COUNTS``), runs made, and what went wrong."""

    index: int
    counts: Dict[str, int]
    runs: int
    failures: List[str]
    mutations: List[str]
    seconds: float

    def as_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))


def _invoke(args: List[str], path: str) -> Tuple[int, str, str]:
    from click.testing import CliRunner

    from ibdiag.cli import cli

    try:  # click 8.1 mixes stderr into stdout unless told not to; 8.2 never does
        runner = CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        runner = CliRunner()
    env = {"PATH": path, "IBDIAG_DEBUG": None, "NCCL_INSPECTOR_DUMP_DIR": None}
    result = runner.invoke(cli, args, env=env, catch_exceptions=True)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        import traceback

        stderr += "".join(
            traceback.format_exception(
                type(result.exception), result.exception, result.exception.__traceback__
            )
        )
    return result.exit_code, result.stdout, stderr


def run_case(case: Case, round_trip: bool = True, redact: bool = False) -> Outcome:
    """Run ``case`` through quick, standard and (``round_trip``) collect -> report (module
    doc), with ``--redact all`` when ``redact``; its outcome."""
    started = time.monotonic()
    counts = dict.fromkeys(COUNTS, 0)
    failures: List[str] = []
    runs = 0
    secret = case.secret.encode()

    def judge(label: str, code: int, stdout: str, stderr: str, wants_json: bool) -> None:
        nonlocal runs
        runs += 1
        where = f"{label}: exit {code}"
        if "Traceback" in stderr or "internal error" in stderr or "Traceback" in stdout:
            counts["tracebacks"] += 1
            failures.append(f"{where}: {stderr.strip()[-600:]}")
        if code not in (0, 1, 2, 3):
            counts["exit codes outside 0-3"] += 1
            failures.append(f"{where}: exit code outside 0-3")
        if secret in (stdout + stderr).encode("utf-8", "surrogateescape"):
            counts["files outside the tree in output or bundle"] += 1
            failures.append(f"{where}: the secret is in its output")
        if wants_json:
            try:
                report = json.loads(stdout)
            except ValueError:
                counts["invalid JSON"] += 1
                failures.append(f"{where}: not JSON: {stdout[:200]!r} {stderr.strip()[-300:]}")
                return
            crashed = [r for r in report.get("results", []) if "crashed" in r.get("message", "")]
            if crashed:
                counts["tracebacks"] += 1
                failures.append(f"{where}: a check crashed: {crashed[0]['message'][:300]}")

    common = ["--sysfs", case.sysfs, "--procfs", case.procfs]
    limits = ["--deadline", DEADLINE, "--command-timeout", COMMAND_TIMEOUT]
    path = case.stubs.path
    judge("quick", *_invoke(["check", "--json", *common], path), wants_json=True)
    standard = ["check", "--level", "standard", "--json", *common, *limits]
    judge("standard", *_invoke(standard, path), wants_json=True)

    if round_trip:
        _round_trip(case, judge, counts, failures, redact)
    left = S.processes_with(case.directory)
    if left:
        time.sleep(0.5)  # a process killed a moment ago may still be exiting
        left = S.processes_with(case.directory)
    if left:
        counts["processes left"] += len(left)
        failures.append(f"processes left: {left[:3]}")
    return Outcome(
        index=case.index,
        counts=counts,
        runs=runs,
        failures=failures,
        mutations=list(case.mutations),
        seconds=time.monotonic() - started,
    )


def _round_trip(case: Case, judge, counts: Dict[str, int], failures: List[str], redact) -> None:
    """``ibdiag collect --tarball`` (``--redact all`` when ``redact``), then ``ibdiag report
    BUNDLE --json``; the secret must be in no file collect wrote (the redaction map included)."""
    out = os.path.join(case.directory, "bundles")
    os.mkdir(out)
    common = ["--sysfs", case.sysfs, "--procfs", case.procfs]
    limits = ["--deadline", DEADLINE, "--command-timeout", COMMAND_TIMEOUT]
    collect = ["collect", "--tarball", "-o", out, *common, *limits]
    if redact:
        collect += ["--redact", "all"]
    code, stdout, stderr = _invoke(collect, case.stubs.path)
    judge("collect", code, stdout, stderr, wants_json=False)
    bundles = sorted(glob.glob(os.path.join(out, "*.tar.gz")))
    if code == 0 and len(bundles) != 1:
        counts["tracebacks"] += 1
        failures.append(f"collect: exit 0 but {len(bundles)} bundles: {stdout[-300:]}")
    for name in os.listdir(out):
        if _holds(os.path.join(out, name), case.secret.encode()):
            counts["files outside the tree in output or bundle"] += 1
            failures.append(f"collect: the secret is in {name}")
    for bundle in bundles:
        judge("report", *_invoke(["report", "--json", bundle], case.stubs.path), wants_json=True)


def _holds(path: str, secret: bytes) -> bool:
    """Whether the file (a bundle: every member's name and contents) holds ``secret``."""
    if path.endswith(".tar.gz"):
        with tarfile.open(path) as tar:
            for member in tar:
                if secret in member.name.encode("utf-8", "surrogateescape"):
                    return True
                if member.isfile():
                    handle = tar.extractfile(member)
                    if handle is not None and secret in handle.read():
                        return True
        return False
    with open(path, "rb") as handle:
        return secret in handle.read()


def _cleanup(case: Case) -> None:
    """Remove a case's directory (FIFOs, sockets and device nodes included)."""
    shutil.rmtree(case.directory, ignore_errors=True)


# -- many cases over worker processes ----------------------------------------------------------


@dataclasses.dataclass
class Summary:
    seed: int
    cases: int = 0
    runs: int = 0
    seconds: float = 0.0
    counts: Dict[str, int] = dataclasses.field(default_factory=lambda: dict.fromkeys(COUNTS, 0))
    failed: List[Outcome] = dataclasses.field(default_factory=list)

    def add(self, outcome: Outcome) -> None:
        self.cases += 1
        self.runs += outcome.runs
        for key, value in outcome.counts.items():
            self.counts[key] += value
        if outcome.failures:
            self.failed.append(outcome)

    @property
    def clean(self) -> bool:
        return not any(self.counts.values())

    def line(self) -> str:
        zeros = ", ".join(f"{key} {value}" for key, value in self.counts.items())
        return (
            f"fuzz_trees: {self.cases} cases (seed {self.seed}, {self.runs} runs, "
            f"{self.seconds:.1f} s): {zeros}"
        )

    def details(self, limit: int = 10) -> str:
        lines = []
        for outcome in self.failed[:limit]:
            lines.append(f"- case {outcome.index} (--seed {self.seed} --case {outcome.index}):")
            lines += [f"    mutation: {m}" for m in outcome.mutations]
            lines += [f"    {f}" for f in outcome.failures[:5]]
        return "\n".join(lines)


def run(
    seed: int,
    cases: Sequence[int],
    workers: int = 2,
    case_timeout: float = CASE_TIMEOUT_S,
    round_trip_every: int = 1,
    progress: Optional[Callable[[Summary], None]] = None,
) -> Summary:
    """Run ``cases`` of ``seed`` over ``workers`` worker processes; the summary.

    Every ``round_trip_every``-th case also makes a bundle and reports it, every other one of
    those with ``--redact all``."""
    summary = Summary(seed=seed)
    started = time.monotonic()
    todo = list(cases)
    pool: List[_Worker] = []
    with tempfile.TemporaryDirectory(prefix="ibdiag-fuzz-") as parent:
        try:
            while todo or any(w.busy for w in pool):
                pool = [w for w in pool if w.alive]
                while len(pool) < max(1, workers) and todo:
                    pool.append(_Worker(seed, parent))
                for worker in pool:
                    if not worker.busy and todo:
                        worker.give(todo.pop(0), round_trip_every)
                for worker in pool:
                    outcome = worker.poll(case_timeout)
                    if outcome is not None:
                        summary.add(outcome)
                        if progress is not None:
                            progress(summary)
                time.sleep(0.01)
        finally:
            for worker in pool:
                worker.stop()
    summary.seconds = time.monotonic() - started
    return summary


class _Worker:
    """``python tests/fuzz_trees.py --worker SEED PARENT``: reads case numbers on stdin, writes
    one Outcome (JSON) a line. A case not done in time is a hang: the worker's process group is
    killed and the case counted."""

    def __init__(self, seed: int, parent: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", str(seed), parent],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
            cwd=parent,
        )
        self.case: Optional[int] = None
        self.since = 0.0
        self.alive = True
        self._buffer = b""

    @property
    def busy(self) -> bool:
        return self.case is not None

    def give(self, index: int, round_trip_every: int) -> None:
        self.case = index
        self.since = time.monotonic()
        round_trip = index % round_trip_every == 0
        redact = round_trip and (index // round_trip_every) % 2 == 1
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{index} {int(round_trip)} {int(redact)}\n".encode())
        self.proc.stdin.flush()

    def poll(self, timeout: float) -> Optional[Outcome]:
        if self.case is None:
            return None
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 0)
        if ready:
            chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
            if not chunk:  # the worker died
                return self._lost("the worker died", "tracebacks")
            self._buffer += chunk
            if b"\n" in self._buffer:
                line, self._buffer = self._buffer.split(b"\n", 1)
                self.case = None
                return Outcome(**json.loads(line))
        if time.monotonic() - self.since > timeout:
            return self._lost(f"not done in {timeout:g} s", "hangs")
        return None

    def _lost(self, why: str, count: str) -> Outcome:
        index = self.case
        self.case = None
        self.stop()
        counts = dict.fromkeys(COUNTS, 0)
        counts[count] = 1
        return Outcome(index or 0, counts, 0, [why], [], 0.0)

    def stop(self) -> None:
        if not self.alive:
            return
        self.alive = False
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


def _worker_main(seed: int, parent: str) -> None:
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    os.environ.pop("IBDIAG_DEBUG", None)
    site = tempfile.mkdtemp(prefix="site-", dir=parent)  # no machine config, as conftest does
    os.environ["IBDIAG_CONFIG_DIR"] = site
    os.environ["IBDIAG_SLURM_ENV"] = os.path.join(site, "slurm.env")
    # Outcomes go to the parent on a private copy of stdout; anything else written to fd 1
    # (by ibdiag or a stub) goes to stderr and cannot break a line of the protocol.
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    for line in sys.stdin:
        index, round_trip, redact = (int(word) for word in line.split())
        case = make_case(seed, index, parent)
        try:
            outcome = run_case(case, bool(round_trip), bool(redact))
        finally:
            _cleanup(case)
        answers.write(outcome.as_json() + "\n")
        answers.flush()


if __name__ == "__main__" and sys.argv[1:2] == ["--worker"]:
    _worker_main(int(sys.argv[2]), sys.argv[3])
