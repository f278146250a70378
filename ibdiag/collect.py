"""Collect: run the sources the selected checks need and assemble one Snapshot.

This is the only stage that touches the machine: files, from level standard on read-only
commands, and at level full the active tests that move traffic (``ibdiag.sources.active``).
What it could not read is recorded in the Snapshot's ``problems``, never raised.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone
from typing import AbstractSet, Any, Callable, Dict, Optional

from ibdiag import __version__
from ibdiag.model import CommandRun, Problems, Snapshot, command_key
from ibdiag.runner.watchdog import DEFAULT_READ_TIMEOUT_S, bounded_read
from ibdiag.sources import ACTIVE_SOURCES, COMMAND_SOURCES, drivers, procfs, sysfs, topology
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
) -> Snapshot:
    """Read what ``needs`` names into a Snapshot. Identity is always read.

    Commands run only when a command source is needed (level standard and up), through one
    Runner whose deadline bounds the whole collection; ``runner_options`` are its keyword
    arguments (timeout_s, deadline_s, ...). One output budget (``OutputBudget``: 16 MiB beyond
    each stream's floor) is shared by every command of the collection.

    Level full's traffic tests run after the read-only commands, bounded: by ``deadline_s``
    counted from the start of the collection when it was given (a plain float), else by level
    full's own bound (``active.full_level_bound``) counted from the start of the traffic phase;
    a ``timeout_s`` given caps every traffic process's own timeout too (``DefaultSeconds``
    marks values that were not given).

    ``recording``: pass an empty ``sysfs.Recording`` to have every file read (its exact bytes,
    or why it could not be read), every directory listing, ``exists`` answer and resolved
    symlink noted in it, keyed ``sys/<path>`` / ``proc/<path>`` - what a support bundle stores
    (``ibdiag.bundle.write.write_bundle``). Commands are recorded in the Snapshot itself.

    Level full (``perftest``, ``nccl_tests``, ``nccl_inspector`` in ``needs``) also needs the
    ``thresholds`` (what to run, the floors a retry is judged by); ``progress`` hears which
    active test starts (for a terminal status line).

    ``read_timeout``: the bound on reading sysfs and procfs (``ibdiag.runner.watchdog``): a
    read that has not answered after this many seconds (a hung HCA) is named on its device and
    the node is graded on the rest; all reading ends by twice this. None: unbounded.
    """
    if recording is None:
        sys_reader = sysfs.SysfsReader(sysfs_root)
        proc_reader = sysfs.SysfsReader(procfs_root)
    else:
        sys_reader = sysfs.RecordingReader(sysfs_root, recording, "sys")
        proc_reader = sysfs.RecordingReader(procfs_root, recording, "proc")
    started = time.monotonic()
    options = dict(runner_options or {})
    fields = bounded_read(
        lambda: read_node(sys_reader, proc_reader, needs), (sys_reader, proc_reader), read_timeout
    )
    commands = {}
    budget = None
    if needs & (COMMAND_SOURCES | ACTIVE_SOURCES):
        from ibdiag.runner.command_runner import OutputBudget

        budget = OutputBudget()
    if needs & COMMAND_SOURCES:
        commands = _run_commands(fields, needs, {**options, "started_at": started}, budget)
        commands.update(_refused_commands(fields, needs))
    if needs & ACTIVE_SOURCES and thresholds is not None:
        limits = _traffic_limits(options, thresholds, needs, started)
        commands.update(
            _run_active(sys_reader, fields, commands, needs, thresholds, progress, limits, budget)
        )
    if "nccl_inspector" in needs and thresholds is not None:
        fields.update(_read_inspector(thresholds, fields["problems"]))
    if commands or fields.get("nccl_inspector") is not None:
        from ibdiag.sources.interpret import interpret

        fields = interpret(fields, commands)
    return Snapshot.model_construct(
        tool_version=__version__,
        collected_at=datetime.now(timezone.utc),
        sysfs_root=sysfs_root,
        procfs_root=procfs_root,
        sources=sorted({"procfs"} | set(needs)),
        commands=commands,
        **fields,
    )


def read_node(
    sys_reader: sysfs.SysfsReader, proc_reader: sysfs.SysfsReader, needs: AbstractSet[str]
) -> Dict[str, Any]:
    """The Snapshot fields that come from files, read through the two readers.

    Shared by ``collect`` (live readers) and ``ibdiag.bundle.replay.replay`` (readers over a
    bundle), so a replayed bundle is parsed by exactly the code a live run uses.
    """
    problems: Problems = {}
    procfs_root = proc_reader.root
    host, boot_id = procfs.read_identity(procfs_root, problems, proc_reader)
    kernel_release = procfs.read_kernel_release(procfs_root, problems, proc_reader)
    boot_time = None
    if "kernel_log" in needs:
        boot_time = procfs.read_boot_time(procfs_root, problems, proc_reader)
    devices = []
    driver_versions = None
    if "sysfs" in needs:
        devices, sysfs_problems = sysfs.read_devices(sys_reader)
        problems.update(sysfs_problems)
        driver_versions = drivers.read_driver_versions(sys_reader, problems)
    gpus = modules = None
    if "topology" in needs:
        gpus = topology.read_nvidia_gpus(sys_reader, problems)
        modules = procfs.read_modules(procfs_root, problems, proc_reader)
    return {
        "host": host,
        "boot_id": boot_id,
        "boot_time": boot_time,
        "kernel_release": kernel_release,
        "driver_versions": driver_versions,
        "devices": devices,
        "gpus": gpus,
        "kernel_modules": modules,
        "problems": problems,
    }


def _run_commands(fields, needs, runner_options, budget) -> Dict[str, CommandRun]:
    """Every planned command under one Runner (one deadline), each recorded with its role.

    A command with a fallback (dmesg -> journalctl -k) runs in its own thread and tries the
    fallback at once when it fails, rather than after the whole batch: a hung perfquery must
    not push the fallback past the deadline. The far end of each cable (``partner`` in
    ``needs``: ``ibdiag.sources.partner``) is read meanwhile, each port's chain in a thread.
    """
    from concurrent.futures import ThreadPoolExecutor

    from ibdiag.runner import interruptible
    from ibdiag.runner.command_runner import Runner  # subprocess and threads from level standard on
    from ibdiag.sources import plan

    runner = Runner(**runner_options, budget=budget)
    planned = plan.commands_for(fields["devices"], needs, fields.get("gpus"))
    chained = [(first, plan.fallback_for(first)) for first in planned if plan.fallback_for(first)]
    alone = [first for first in planned if plan.fallback_for(first) is None]
    with ThreadPoolExecutor(max_workers=len(chained) + 1) as pool:
        chains = [pool.submit(_with_fallback, runner, first, then) for first, then in chained]
        if "partner" in needs:  # the far end of each cable: its own chain per port, meanwhile
            from ibdiag.sources import partner

            chains.append(pool.submit(partner.read_partners, runner, fields["devices"]))
        by_key = runner.run_all([item.argv for item in alone])
        runs = {key: _with_role(by_key[key], item.role) for item in alone
                for key in [command_key(item.argv)]}  # fmt: skip
        for chain in chains:
            runs.update(interruptible.result(chain))
    return runs


def _refused_commands(fields, needs) -> Dict[str, CommandRun]:
    """The commands not run for a name sysfs gave that may not go on a command line, each
    recorded as never started with the reason (``plan.refused_runs``)."""
    from ibdiag.sources import plan

    refused = plan.refused_runs(fields["devices"], needs)
    if "partner" in needs:
        from ibdiag.sources import partner

        refused.update(partner.refused_runs(fields["devices"]))
    return refused


def _with_fallback(runner, first, then) -> Dict[str, CommandRun]:
    run = _with_role(runner.run(first.argv), first.role)
    runs = {run.key: run}
    if not (run.succeeded and run.stdout.strip()):
        second = _with_role(runner.run(then.argv), then.role)
        runs[second.key] = second
    return runs


def _with_role(run: CommandRun, role: str) -> CommandRun:
    """``run`` recorded with the role it was planned for."""
    return run.model_copy(update={"role": role})


def _traffic_limits(options, thresholds, needs, started):
    """Level full's bound (module docstring of ``collect``)."""
    from ibdiag.sources import active

    cap = _given(options.get("timeout_s"))
    deadline = _given(options.get("deadline_s"))
    if deadline is not None:
        return active.Limits(started_at=started, deadline_s=deadline, cap_s=cap)
    bound = active.full_level_bound(thresholds, "perftest" in needs, "nccl_tests" in needs)
    return active.Limits(
        started_at=time.monotonic(), deadline_s=bound, deadline_name="level full's bound",
        cap_s=cap,
    )  # fmt: skip


def _run_active(
    sys_reader, fields, commands, needs, thresholds, progress, limits, budget
) -> Dict[str, CommandRun]:
    """Level full: ib_write_bw loopback on every ACTIVE IB port, then nccl-tests."""
    from ibdiag.sources import active
    from ibdiag.targets import is_graded

    runs: Dict[str, CommandRun] = {}
    devices = fields["devices"]
    if "perftest" in needs:
        cpulists = {}
        for node in {dev.pci.numa_node for dev in devices if dev.pci} - {None}:
            text, _ = sys_reader.read_text(f"devices/system/node/node{node}/cpulist")
            if text and text.strip():
                cpulists[node] = text.strip()
        tests = active.plan_loopback(
            devices,
            thresholds,
            graded=lambda dev: is_graded(dev, thresholds),
            gpu_near=_gpu_near(commands),
            pin_for=active.numa_pinning(os.environ.get("PATH", os.defpath), cpulists),
        )
        runs.update(active.run_loopback(tests, thresholds, progress, limits, budget))
    if "nccl_tests" in needs:
        gpus = len(fields["gpus"] or []) if fields.get("gpus") is not None else 0
        runs.update(active.run_nccl_tests(thresholds, gpus, progress, limits, budget))
    return runs


def _gpu_near(commands: Dict[str, CommandRun]) -> Callable[[str], Optional[int]]:
    """HCA name -> index of its GPU (PIX/PXB rail pairing), from nvidia-smi topo -m if it ran:
    the interpreter's reading (``interpret.topology``), the one that fills the Snapshot."""
    from ibdiag.sources.interpret.topology import read_gpu_topology

    # The one-to-one rail pairing, not each HCA's nearest GPU: on a DGX A100 two HCAs share
    # a PCIe switch with two GPUs, and two loopbacks on one GPU would halve both.
    topology = read_gpu_topology(commands)
    return (topology.rail_gpus() if topology is not None else {}).get


def _read_inspector(thresholds, problems) -> Dict[str, Any]:
    """NCCL Inspector's recent dumps, from nccl_inspector_dir or $NCCL_INSPECTOR_DUMP_DIR."""
    import time

    from ibdiag.sources.inspector_files import read_dumps

    directory = thresholds.nccl_inspector_dir or os.environ.get("NCCL_INSPECTOR_DUMP_DIR")
    if not directory:
        return {"nccl_inspector_dir": None, "nccl_inspector": None}
    files, problem = read_dumps(directory, thresholds.nccl_inspector_max_age_s, time.time())
    if problem:
        problems["nccl_inspector"] = problem
    return {"nccl_inspector_dir": directory, "nccl_inspector": files}
