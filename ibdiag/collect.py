"""Collect: run the sources the selected checks need and assemble one Snapshot.

This is the only stage that touches the machine. What it could not read is recorded in the
Snapshot's ``problems``, never raised.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import AbstractSet

from ibdiag import __version__
from ibdiag.model import Problems, Snapshot
from ibdiag.sources import procfs, sysfs


def collect(sysfs_root: str, procfs_root: str, needs: AbstractSet[str]) -> Snapshot:
    """Read what ``needs`` names (sysfs, procfs) into a Snapshot. Identity is always read."""
    problems: Problems = {}
    host, boot_id = procfs.read_identity(procfs_root, problems)
    devices = []
    if "sysfs" in needs:
        devices, sysfs_problems = sysfs.read_devices(sysfs.SysfsReader(sysfs_root))
        problems.update(sysfs_problems)
    return Snapshot.model_construct(
        tool_version=__version__,
        host=host,
        boot_id=boot_id,
        collected_at=datetime.now(timezone.utc),
        sysfs_root=sysfs_root,
        procfs_root=procfs_root,
        sources=sorted({"procfs"} | set(needs)),
        devices=devices,
        problems=problems,
    )
