"""Collect: run the sources the selected checks need and assemble one Snapshot.

This is the only stage that touches the machine: files, and from level standard on, read-only
commands. What it could not read is recorded in the Snapshot's ``problems``, never raised.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import AbstractSet, Any, Dict, Optional

from ibdiag import __version__
from ibdiag.model import CommandRun, Problems, Snapshot
from ibdiag.sources import COMMAND_SOURCES, procfs, sysfs, topology


def collect(
    sysfs_root: str,
    procfs_root: str,
    needs: AbstractSet[str],
    runner_options: Optional[Dict[str, float]] = None,
    recording: Optional[sysfs.Recording] = None,
) -> Snapshot:
    """Read what ``needs`` names into a Snapshot. Identity is always read.

    Commands run only when a command source is needed (level standard and up), through one
    Runner whose deadline bounds the whole collection; ``runner_options`` are its keyword
    arguments (timeout_s, deadline_s, ...).

    ``recording``: pass an empty ``sysfs.Recording`` to have every file read (its exact bytes,
    or why it could not be read), every directory listing, ``exists`` answer and resolved
    symlink noted in it, keyed ``sys/<path>`` / ``proc/<path>`` - what a support bundle stores
    (``ibdiag.bundle.write_bundle``). Commands are recorded in the Snapshot itself.
    """
    if recording is None:
        sys_reader = sysfs.SysfsReader(sysfs_root)
        proc_reader = sysfs.SysfsReader(procfs_root)
    else:
        sys_reader = sysfs.RecordingReader(sysfs_root, recording, "sys")
        proc_reader = sysfs.RecordingReader(procfs_root, recording, "proc")
    fields = read_node(sys_reader, proc_reader, needs)
    commands = {}
    if needs & COMMAND_SOURCES:
        commands = _run_commands(fields["devices"], needs, runner_options or {})
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

    Shared by ``collect`` (live readers) and ``ibdiag.bundle.replay`` (readers over a bundle),
    so a replayed bundle is parsed by exactly the code a live run uses.
    """
    problems: Problems = {}
    procfs_root = proc_reader.root
    host, boot_id = procfs.read_identity(procfs_root, problems, proc_reader)
    boot_time = None
    if "kernel_log" in needs:
        boot_time = procfs.read_boot_time(procfs_root, problems, proc_reader)
    devices = []
    if "sysfs" in needs:
        devices, sysfs_problems = sysfs.read_devices(sys_reader)
        problems.update(sysfs_problems)
    gpus = modules = None
    if "topology" in needs:
        gpus = topology.read_nvidia_gpus(sys_reader, problems)
        modules = procfs.read_modules(procfs_root, problems, proc_reader)
    return {
        "host": host,
        "boot_id": boot_id,
        "boot_time": boot_time,
        "devices": devices,
        "gpus": gpus,
        "kernel_modules": modules,
        "problems": problems,
    }


def _run_commands(devices, needs, runner_options) -> Dict[str, CommandRun]:
    """Every planned command under one Runner (one deadline).

    A command with a fallback (dmesg -> journalctl -k) runs in its own thread and tries the
    fallback at once when it fails, rather than after the whole batch: a hung perfquery must
    not push the fallback past the deadline.
    """
    from concurrent.futures import ThreadPoolExecutor

    from ibdiag.sources import plan
    from ibdiag.sources.commands import Runner  # sh and threads only at level standard

    runner = Runner(**runner_options)
    planned = plan.commands_for(devices, needs)
    chained = [argv for argv in planned if plan.fallback_for(argv)]
    with ThreadPoolExecutor(max_workers=max(1, len(chained))) as pool:
        chains = [pool.submit(_with_fallback, runner, argv, plan.fallback_for(argv))
                  for argv in chained]  # fmt: skip
        runs = runner.run_all([argv for argv in planned if argv not in chained])
        for chain in chains:
            runs.update(chain.result())
    return runs


def _with_fallback(runner, argv, fallback) -> Dict[str, CommandRun]:
    first = runner.run(argv)
    runs = {first.key: first}
    if not (first.succeeded and first.stdout.strip()):
        second = runner.run(fallback)
        runs[second.key] = second
    return runs
