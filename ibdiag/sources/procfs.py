"""Node identity from procfs (``/proc`` unless ``--procfs`` moves it): hostname and boot id.

The boot id changes at every boot; later, counter baselines use it to tell a reboot (counters
restarted from zero) from a counter that really went backwards.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import List, Optional, Tuple

from ibdiag.model import Problems
from ibdiag.sources.names import shown
from ibdiag.sources.sysfs import SysfsReader


def read_identity(
    procfs_root: str, problems: Problems, reader: Optional[SysfsReader] = None
) -> Tuple[Optional[str], Optional[str]]:
    """(hostname, boot_id); the hostname falls back to the kernel's own when procfs lacks it.

    ``reader`` (here and below): a reader over ``procfs_root`` to use instead of a plain one,
    e.g. a RecordingReader for a support bundle or a bundle's replay reader.
    """
    reader = reader or SysfsReader(procfs_root)  # procfs files read exactly like sysfs attributes
    host, problem = reader.read_text("sys/kernel/hostname")
    if problem is not None:
        problems["procfs:sys/kernel/hostname"] = problem
        host = kernel_hostname()
    boot_id, problem = reader.read_text("sys/kernel/random/boot_id")
    if problem is not None:
        problems["procfs:sys/kernel/random/boot_id"] = problem
    # A hostname is any bytes sethostname(2) took: control characters are shown escaped.
    return (shown(host.strip()) if host else None), (boot_id.strip() if boot_id else None)


def read_kernel_release(
    procfs_root: str, problems: Problems, reader: Optional[SysfsReader] = None
) -> Optional[str]:
    """The running kernel's release (``uname -r``, /proc/sys/kernel/osrelease): the fleet's
    drift view names a node left on another kernel. None when it was not recorded (a bundle
    from before this was read); a file there that cannot be read is a problem."""
    reader = reader or SysfsReader(procfs_root)
    rel = "sys/kernel/osrelease"
    if not reader.exists(rel):
        return None
    text, problem = reader.read_text(rel)
    if problem is not None:
        problems[f"procfs:{rel}"] = problem
        return None
    return shown(text.strip()[:KERNEL_RELEASE_MAX]) if text and text.strip() else None


KERNEL_RELEASE_MAX = 128


def read_boot_time(
    procfs_root: str, problems: Problems, reader: Optional[SysfsReader] = None
) -> Optional[datetime]:
    """When the node booted (``btime`` in /proc/stat): dmesg timestamps count from it."""
    text, problem = (reader or SysfsReader(procfs_root)).read_text("stat")
    for line in (text or "").splitlines():
        if line.startswith("btime "):
            try:
                return datetime.fromtimestamp(int(line.split()[1]), tz=timezone.utc)
            except (ValueError, IndexError, OverflowError, OSError):
                break
    problems["procfs:stat"] = problem or "no btime line"
    return None


def read_modules(
    procfs_root: str, problems: Problems, reader: Optional[SysfsReader] = None
) -> Optional[List[str]]:
    """Names of the loaded kernel modules (/proc/modules), or None when unreadable."""
    text, problem = (reader or SysfsReader(procfs_root)).read_text("modules")
    if problem is not None:
        problems["procfs:modules"] = problem
        return None
    return sorted({line.split()[0] for line in (text or "").splitlines() if line.strip()})


def kernel_hostname() -> str:
    """The kernel's own hostname, as gethostname(2) gives it (``uname -n``), without importing
    ``socket`` on a quick check's path."""
    return os.uname().nodename
