"""Collect: run the sources the selected checks need and assemble one Snapshot.

This is the only stage that touches the machine: files, from level standard on read-only
commands, and at level full the tests that move traffic (the level-full families of
``ibdiag.families``: ib_write_bw loopback, nccl-tests) and NCCL Inspector's dump files.
What it could not read is recorded in the Snapshot's ``problems``, never raised.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import AbstractSet, Any, Callable, Dict, List, NamedTuple, Optional, Sequence

from ibdiag import __version__
from ibdiag.model import CommandRun, Device, Pci, Problems, Snapshot
from ibdiag.runner.watchdog import DEFAULT_READ_TIMEOUT_S, bounded_read
from ibdiag.sources import FILE_SOURCE_LEVELS, drivers, procfs, sysfs, topology
from ibdiag.sources.char_devices import read_char_devices
from ibdiag.thresholds import Thresholds


class DefaultSeconds(float):
    """A ``--deadline`` or ``--command-timeout`` the user did not give: the option's default,
    marked so that level full's traffic tests keep their own bound (README, "Level full");
    one given on the command line (or by a caller, as a plain float) bounds them too."""


def _given(value: Optional[float]) -> Optional[float]:
    return None if value is None or isinstance(value, DefaultSeconds) else float(value)


def collect(
    sysfs_root: str,
    procfs_root: str,
    needs: AbstractSet[str],
    runner_options: Optional[Dict[str, float]] = None,
    recording: Optional[sysfs.Recording] = None,
    thresholds: Optional[Thresholds] = None,
    progress: Optional[Callable[[str], None]] = None,
    read_timeout: Optional[float] = DEFAULT_READ_TIMEOUT_S,
    rootfs: Optional[str] = None,
) -> Snapshot:
    """Read what ``needs`` names into a Snapshot. Identity is always read.

    Commands run only when a command source is needed (level standard and up), through one
    Runner whose deadline bounds the whole collection; ``runner_options`` are its keyword
    arguments (timeout_s, deadline_s, ...). One output budget (``OutputBudget``: 16 MiB beyond
    each stream's floor) is shared by every command of the collection.

    Level full's traffic tests run after the read-only commands, bounded: by ``deadline_s``
    counted from the start of the collection when it was given (a plain float), else by level
    full's own bound (``families.full_level_bound``) counted from the start of the traffic phase;
    a ``timeout_s`` given caps every traffic process's own timeout too (``DefaultSeconds``
    marks values that were not given).

    ``recording``: pass an empty ``sysfs.Recording`` to have every file read (its exact bytes,
    or why it could not be read), every directory listing, ``exists`` answer and resolved
    symlink noted in it, keyed ``sys/<path>`` / ``proc/<path>`` - what a support bundle stores
    (``ibdiag.bundle.write.write_bundle``). Commands are recorded in the Snapshot itself.

    Level full (``perftest``, ``nccl_tests``, ``nccl_inspector`` in ``needs``: the families
    whose LEVEL is "full") also needs the ``thresholds`` (what to run, the floors a retry is
    judged by); each such family's ``run`` gets them in one ``TrafficContext`` with the phase's
    limits, the output budget, the sysfs reader and ``progress``, which hears which traffic
    test starts (for a terminal status line).

    ``thresholds``' ``ignore_hcas``: the HCAs none of whose firmware-querying files (counters,
    hwmon, partition table) is read (listed with their identity, never graded): reading a
    restricted PF's counters floods the kernel log with firmware errors
    (``sysfs.read_devices``).

    ``rootfs``: where the node's root file system is (``/``; a host's, mounted in a container),
    for the support catalogue's files outside sysfs and procfs (``support_files`` in ``needs``:
    ``ibdiag collect``: /etc's configuration); recorded under ``rootfs/``. None: not read.

    ``read_timeout``: the bound on reading sysfs and procfs (``ibdiag.runner.watchdog``): a
    read that has not answered after this many seconds (a hung HCA) is named on its device and
    the node is graded on the rest; all reading ends by twice this. None: unbounded.
    """
    if recording is None:
        sys_reader = sysfs.SysfsReader(sysfs_root)
        proc_reader = sysfs.SysfsReader(procfs_root)
        rootfs_reader = sysfs.SysfsReader(rootfs) if rootfs else None
    else:
        sys_reader = sysfs.RecordingReader(sysfs_root, recording, "sys")
        proc_reader = sysfs.RecordingReader(procfs_root, recording, "proc")
        rootfs_reader = sysfs.RecordingReader(rootfs, recording, "rootfs") if rootfs else None
    readers = tuple(reader for reader in (sys_reader, proc_reader, rootfs_reader) if reader)
    started = time.monotonic()
    options = dict(runner_options or {})
    ignored = thresholds.ignores if thresholds is not None and thresholds.ignore_hcas else None
    node = bounded_read(
        lambda: read_node(sys_reader, proc_reader, needs, ignored, rootfs_reader),
        readers,
        read_timeout,
    )
    snap = node.snapshot(
        tool_version=__version__,
        collected_at=datetime.now(timezone.utc),
        sysfs_root=sysfs_root,
        procfs_root=procfs_root,
        rootfs=rootfs if rootfs_reader is not None else None,
        sources=sorted({"procfs"} | (set(needs) - {"history"})),  # history: ibdiag.history.record
    )
    full = _family_sources(needs, "full") if thresholds is not None else frozenset()
    budget = None
    read_only = _family_sources(needs, "standard")
    if read_only or full:
        from ibdiag.runner.command_runner import OutputBudget

        budget = OutputBudget()
    if read_only:
        commands = _run_commands(snap, needs, {**options, "started_at": started}, budget)
        snap = snap.model_copy(update={"commands": commands})
    if full and thresholds is not None:
        snap = _run_full(snap, needs, options, thresholds, started, budget, progress, sys_reader)
    if not snap.commands and snap.nccl_inspector is None:
        return snap
    from ibdiag.families import interpret

    return interpret(snap)


class NodeFiles(NamedTuple):
    """What the files alone say about the node (``read_node``): the Snapshot's fields before
    any command ran."""

    host: Optional[str]
    boot_id: Optional[str]
    boot_time: Optional[datetime]
    kernel_release: Optional[str]
    driver_versions: Optional[Dict[str, str]]
    devices: List[Device]
    gpus: Optional[List[Pci]]
    kernel_modules: Optional[List[str]]
    facts: Dict[str, Any]  # node facts read from files (the verbs and MAD devices)
    problems: Problems

    def snapshot(
        self,
        *,
        tool_version: str,
        collected_at: datetime,
        sysfs_root: str,
        procfs_root: str,
        sources: List[str],
        rootfs: Optional[str] = None,
    ) -> Snapshot:
        """The Snapshot of these files, with no runs yet. Built without validation: every
        value here is what ibdiag's own readers built, typed (``model_construct``)."""
        return Snapshot.model_construct(
            tool_version=tool_version,
            collected_at=collected_at,
            sysfs_root=sysfs_root,
            procfs_root=procfs_root,
            rootfs=rootfs,
            sources=sources,
            **self._asdict(),
        )


def read_node(
    sys_reader: sysfs.SysfsReader,
    proc_reader: sysfs.SysfsReader,
    needs: AbstractSet[str],
    ignored: Optional[Callable[[str], bool]] = None,
    rootfs_reader: Optional[sysfs.SysfsReader] = None,
) -> NodeFiles:
    """The Snapshot fields that come from files, read through the two readers.

    Shared by ``collect`` (live readers) and ``ibdiag.bundle.replay.replay`` (readers over a
    bundle), so a replayed bundle is parsed by exactly the code a live run uses.

    ``ignored``: the HCAs (by name) whose firmware-querying files are not read
    (``sysfs.read_devices``): the thresholds' ``ignore_hcas``, when ``collect`` has them. A
    bundle replays without it: what was not read then is not in it.

    ``rootfs_reader``: the node's root file system, for the support catalogue's files outside
    sysfs and procfs (``support_files`` in ``needs``); None: none of them is read.
    """
    problems: Problems = {}
    procfs_root = proc_reader.root
    host, boot_id = procfs.read_identity(procfs_root, problems, proc_reader)
    kernel_release = procfs.read_kernel_release(procfs_root, problems, proc_reader)
    boot_time = None
    if "kernel_log" in needs:
        boot_time = procfs.read_boot_time(procfs_root, problems, proc_reader)
    devices: List[Device] = []
    driver_versions = None
    facts: Dict[str, Any] = {}
    if "sysfs" in needs:
        devices, sysfs_problems = sysfs.read_devices(sys_reader, ignored)
        problems.update(sysfs_problems)
        driver_versions = drivers.read_driver_versions(sys_reader, problems)
        facts["char_devices"] = read_char_devices(sys_reader)
    gpus = modules = None
    if "topology" in needs:
        gpus = topology.read_nvidia_gpus(sys_reader, problems)
        facts.update(topology.read_gpu_paths(sys_reader, gpus))  # their PCIe paths, IOMMU groups
        modules = procfs.read_modules(procfs_root, problems, proc_reader)
    if "support_files" in needs:
        from ibdiag.sources.support_files import read_support_files

        trees = {"sys": sys_reader, "proc": proc_reader, "rootfs": rootfs_reader}
        facts["support_files"] = read_support_files(trees)
    return NodeFiles(
        host=host,
        boot_id=boot_id,
        boot_time=boot_time,
        kernel_release=kernel_release,
        driver_versions=driver_versions,
        devices=devices,
        gpus=gpus,
        kernel_modules=modules,
        facts=facts,
        problems=problems,
    )


def _family_sources(needs: AbstractSet[str], level: str) -> AbstractSet[str]:
    """The sources in ``needs`` that the command families collect at ``level`` (standard:
    read-only commands; full: each family's ``run``). The families are imported only when
    ``needs`` has a source that is not a file (a quick check imports none)."""
    if not set(needs) - set(FILE_SOURCE_LEVELS):
        return frozenset()
    from ibdiag import families

    return set(needs) & families.sources_at(level)


def _run_commands(snap, needs, runner_options, budget) -> Dict[str, CommandRun]:
    """Every planned command under one Runner (one deadline), each recorded with its role.

    A command with a fallback (dmesg -> journalctl -k) runs in its own thread and tries the
    fallback at once when it fails, rather than after the whole batch: a hung perfquery must
    not push the fallback past the deadline. A family whose commands depend on earlier answers
    (its ``collect(snap, runner)``: the far end of each cable) runs them meanwhile, in a thread
    of its own, through the same runner. A command planned refused (a name that may not go on
    a command line) is recorded as never started, with why.
    """
    from concurrent.futures import Future, ThreadPoolExecutor

    from ibdiag import families
    from ibdiag.runner import interruptible
    from ibdiag.runner.command_runner import Runner  # subprocess and threads from standard on

    runner = Runner(**runner_options, budget=budget)
    planned = families.plan(snap, needs)
    runs = {str(item.role): families.refused_run(item) for item in planned if item.refused}
    runnable = [item for item in planned if not item.refused]
    chained = [item for item in runnable if item.fallback is not None]
    alone = [(item.role, item.argv, item.timeout_s) for item in runnable if item.fallback is None]
    collectors = families.collectors(needs)
    with ThreadPoolExecutor(max_workers=len(chained) + len(collectors) + 1) as pool:
        try:
            chains: List[Future[Dict[str, CommandRun]]] = [
                pool.submit(_with_fallback, runner, item) for item in chained
            ]
            chains += [pool.submit(collect, snap, runner) for collect in collectors]
            runs.update(runner.run_planned(alone))
            for chain in chains:
                done: Dict[str, CommandRun] = interruptible.result(chain)
                runs.update(done)
        except BaseException:  # a stop signal while a chain is awaited: kill every command
            runner.stop()  # first, or leaving the pool would wait for each one to end
            raise
    return runs


def _with_fallback(runner: Any, item: Any) -> Dict[str, CommandRun]:
    run = runner.run(item.argv, item.role, item.timeout_s)
    runs = {run.key: run}
    if not (run.succeeded and run.stdout.strip()):
        second = runner.run(item.fallback.argv, item.fallback.role, item.fallback.timeout_s)
        runs[second.key] = second
    return runs


def _run_full(snap, needs, options, thresholds, started, budget, progress, sys_reader):
    """Level full: every level-full family's ``run``, in ORDER, under one context."""
    from ibdiag import families
    from ibdiag.families._traffic import TrafficContext

    context = TrafficContext(
        thresholds=thresholds, limits=_traffic_limits(options, thresholds, sorted(needs), started),
        budget=budget, progress=progress, sysfs=sys_reader,
    )  # fmt: skip
    return families.run_full(snap, sorted(needs), context)


def _traffic_limits(
    options: Dict[str, float], thresholds: Thresholds, needs: Sequence[str], started: float
):
    """Level full's bound (module docstring of ``collect``)."""
    from ibdiag import families
    from ibdiag.families._traffic import Limits

    cap = _given(options.get("timeout_s"))
    deadline = _given(options.get("deadline_s"))
    if deadline is not None:
        return Limits(started_at=started, deadline_s=deadline, cap_s=cap)
    bound = families.full_level_bound(thresholds, needs)
    return Limits(
        started_at=time.monotonic(), deadline_s=bound, deadline_name="level full's bound",
        cap_s=cap,
    )  # fmt: skip
