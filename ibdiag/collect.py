"""Collect: run the sources the selected checks need and assemble one Snapshot.

This is the only stage that touches the machine: files, and from level standard on, read-only
commands. What it could not read is recorded in the Snapshot's ``problems``, never raised.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import AbstractSet, Dict, Optional

from ibdiag import __version__
from ibdiag.model import CommandRun, Problems, Snapshot
from ibdiag.sources import COMMAND_SOURCES, procfs, sysfs, topology


def collect(
    sysfs_root: str,
    procfs_root: str,
    needs: AbstractSet[str],
    runner_options: Optional[Dict[str, float]] = None,
) -> Snapshot:
    """Read what ``needs`` names into a Snapshot. Identity is always read.

    Commands run only when a command source is needed (level standard and up), through one
    Runner whose deadline bounds the whole collection; ``runner_options`` are its keyword
    arguments (timeout_s, deadline_s, ...).
    """
    problems: Problems = {}
    host, boot_id = procfs.read_identity(procfs_root, problems)
    boot_time = procfs.read_boot_time(procfs_root, problems) if "kernel_log" in needs else None
    devices = []
    if "sysfs" in needs:
        devices, sysfs_problems = sysfs.read_devices(sysfs.SysfsReader(sysfs_root))
        problems.update(sysfs_problems)
    gpus = modules = None
    if "topology" in needs:
        gpus = topology.read_nvidia_gpus(sysfs.SysfsReader(sysfs_root), problems)
        modules = procfs.read_modules(procfs_root, problems)
    commands = {}
    if needs & COMMAND_SOURCES:
        commands = _run_commands(devices, needs, runner_options or {})
    return Snapshot.model_construct(
        tool_version=__version__,
        host=host,
        boot_id=boot_id,
        boot_time=boot_time,
        collected_at=datetime.now(timezone.utc),
        sysfs_root=sysfs_root,
        procfs_root=procfs_root,
        sources=sorted({"procfs"} | set(needs)),
        devices=devices,
        gpus=gpus,
        kernel_modules=modules,
        commands=commands,
        problems=problems,
    )


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
