"""A sysfs read that never returns (a hung HCA) is bounded at level quick too (issue 12, item 3).

No FUSE here, and a FIFO is refused before it could block (tests/sources/test_sysfs_source.py),
so the
hang is a test double: ``SysfsReader._read_bytes`` - the one place a file is opened and read -
blocks on the chosen attribute until the test ends, in the thread that reads it, exactly as a
read blocked in the kernel would: nothing can interrupt it and the run must not wait for it.
Through the CLI the same double is installed in a subprocess before ``ibdiag.cli.main`` runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from typing import Iterator, List

import pytest
from stubs import write_procfs
from sysfs_builder import mlx5_node, write_node

from ibdiag.bundle.opener import open_bundle
from ibdiag.bundle.replay import replay
from ibdiag.bundle.write import write_bundle
from ibdiag.collect import collect
from ibdiag.grade import grade
from ibdiag.registry import load_registry
from ibdiag.sources import sysfs
from ibdiag.sources.sysfs import Recording
from ibdiag.thresholds import Thresholds

HUNG = "class/infiniband/mlx5_0/ports/1/counters/symbol_error"
TIMEOUT = 0.4
SLACK = 6.0  # a loaded 2-core CI machine: far below "for ever", well above 2 x TIMEOUT


@pytest.fixture
def node(tmp_path):
    sys_root = str(tmp_path / "sys")
    write_node(sys_root, mlx5_node(3))
    proc = tmp_path / "proc"
    write_procfs(proc, hostname="node042", boot_id="6d0bd3a5", boot_time=None, modules=None)
    return sys_root, str(proc)


@pytest.fixture
def hang(monkeypatch) -> Iterator[List[str]]:
    """Append a path (relative to its root) to the list: reading it blocks until the test ends."""
    hung: List[str] = []
    release = threading.Event()
    real = sysfs.SysfsReader._read_bytes

    def blocking(self, rel):
        if rel.strip("/") in hung:
            release.wait()
        return real(self, rel)

    monkeypatch.setattr(sysfs.SysfsReader, "_read_bytes", blocking)
    yield hung
    release.set()  # let the abandoned readers finish (their answers are dropped)


def timed_collect(*args, **kwargs):
    started = time.monotonic()
    snapshot = collect(*args, **kwargs)
    return snapshot, time.monotonic() - started


def test_a_hung_counter_read_fails_its_hca_naming_it_and_the_rest_is_graded(node, hang):
    sys_root, proc = node
    hang.append(HUNG)
    snap, seconds = timed_collect(sys_root, proc, {"sysfs"}, read_timeout=TIMEOUT)
    assert seconds < TIMEOUT + SLACK
    hung, *healthy = snap.devices
    why = f"not read: {HUNG} hung (no answer within {TIMEOUT:g} s)"
    assert hung.name == "mlx5_0" and hung.ports == []
    assert hung.problems["ports"] == why
    assert hung.node_type == 1  # what was read before the hang is kept
    assert [dev.name for dev in healthy] == ["mlx5_1", "mlx5_2"]
    assert all(dev.problems == {} and dev.ports[0].counters for dev in healthy)
    assert snap.host == "node042"

    report = grade(snap, load_registry(), Thresholds(), "quick")
    [fail] = [r for r in report.results if r.status.value == "fail"]
    assert (fail.check_id, fail.target) == ("link.state", "mlx5_0")
    assert HUNG in fail.message and f"{TIMEOUT:g} s" in fail.message
    assert report.verdict.exit_code == 2
    json.loads(report.model_dump_json())


def test_a_hung_hostname_read_falls_back_and_names_it(node, hang, monkeypatch):
    sys_root, proc = node
    hang.append("sys/kernel/hostname")
    monkeypatch.setattr("ibdiag.sources.procfs.kernel_hostname", lambda: "kernel-name")
    snap, seconds = timed_collect(sys_root, proc, {"sysfs"}, read_timeout=TIMEOUT)
    assert seconds < TIMEOUT + SLACK
    assert snap.host == "kernel-name"
    assert snap.problems["procfs:sys/kernel/hostname"] == (
        f"no answer within {TIMEOUT:g} s: the read hung (the HCA or its driver is not responding)"
    )
    assert snap.boot_id == "6d0bd3a5"
    assert [len(dev.ports) for dev in snap.devices] == [1, 1, 1]


def test_a_hung_netdev_attribute_is_named_on_the_netdev(node, hang):
    sys_root, proc = node
    hang.append("class/net/ib1/operstate")
    snap, _ = timed_collect(sys_root, proc, {"sysfs"}, read_timeout=TIMEOUT)
    netdev = snap.devices[1].ports[0].netdev
    assert netdev.operstate is None
    assert netdev.problems["operstate"].startswith(f"no answer within {TIMEOUT:g} s")
    assert netdev.problems["mtu"] == (
        f"not read: class/net/ib1/operstate hung (no answer within {TIMEOUT:g} s)"
    )
    assert snap.devices[1].ports[0].state == 4  # the port itself is fine
    assert snap.devices[2].problems == {} and snap.devices[2].ports[0].netdev.operstate == "up"


def test_reading_ends_by_twice_the_timeout_whatever_hangs(node, hang):
    """Every HCA hangs: each is named on its own or not read, and the run still ends."""
    sys_root, proc = node
    hang.extend(f"class/infiniband/mlx5_{n}/ports/1/counters/symbol_error" for n in range(3))
    snap, seconds = timed_collect(sys_root, proc, {"sysfs"}, read_timeout=TIMEOUT)
    assert seconds < 2 * TIMEOUT + SLACK
    assert [dev.ports for dev in snap.devices] == [[], [], []]
    problems = [dev.problems["ports"] for dev in snap.devices]
    assert problems[0] == f"not read: {hang[0]} hung (no answer within {TIMEOUT:g} s)"
    assert all(problem.startswith("not read: ") for problem in problems)


def test_without_a_hang_the_bounded_read_is_the_plain_read(node):
    sys_root, proc = node
    bounded = collect(sys_root, proc, {"sysfs", "topology"}, read_timeout=TIMEOUT)
    plain = collect(sys_root, proc, {"sysfs", "topology"}, read_timeout=None)
    assert bounded.model_copy(update={"collected_at": plain.collected_at}) == plain


def test_a_bundle_of_a_hung_run_replays_to_the_same_snapshot(node, hang, tmp_path):
    sys_root, proc = node
    hang.append(HUNG)
    recording = Recording()
    snap = collect(sys_root, proc, {"sysfs"}, recording=recording, read_timeout=TIMEOUT)
    assert HUNG.replace("class", "sys/class", 1) not in recording.files
    report = grade(snap, load_registry(), Thresholds(), "quick")
    path = write_bundle(snap, report, recording, str(tmp_path / "out"), tarball=False)
    with open_bundle(path) as opened:
        replayed = replay(opened)
    assert replayed.devices == snap.devices


def test_the_check_command_exits_within_its_bound_naming_the_hung_attribute(node, tmp_path):
    """The whole CLI, as NHC or the Slurm prolog runs it: it reports and exits, the reader
    thread still blocked (never joined)."""
    sys_root, proc = node
    code = textwrap.dedent(
        f"""
        import sys, threading
        from ibdiag.sources import sysfs
        real = sysfs.SysfsReader._read_bytes
        def blocking(self, rel):
            if rel.strip("/") == {HUNG!r}:
                threading.Event().wait()  # for ever, like a read stuck in the kernel
            return real(self, rel)
        sysfs.SysfsReader._read_bytes = blocking
        from ibdiag.cli import main
        main(sys.argv[1:])
        """
    )
    argv = [sys.executable, "-c", code, "check", "--json", "--sysfs", sys_root, "--procfs", proc]
    started = time.monotonic()
    done = subprocess.run(
        [*argv, "--read-timeout", str(TIMEOUT)],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        env={**os.environ, "PATH": str(tmp_path)},
    )  # fmt: skip
    assert time.monotonic() - started < TIMEOUT + SLACK + 5
    assert done.returncode == 2, done.stderr
    report = json.loads(done.stdout)
    [fail] = [r for r in report["results"] if r["status"] == "fail"]
    assert fail["target"] == "mlx5_0" and HUNG in fail["message"]


def test_read_timeout_must_be_positive(run_cli, node):
    sys_root, proc = node
    result = run_cli("check", "--sysfs", sys_root, "--procfs", proc, "--read-timeout", "0")
    assert result.exit_code == 3
    assert "--read-timeout" in result.stderr
