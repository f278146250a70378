"""Between runs: each port's samples and outages in a SQLite store, and how they are read.

- ``timeline``: what two samples of one port mean (a transition, an outage nobody saw, a
  reboot, a counter reset) - pure, no store.
- ``store``: the SQLite file (WAL, several writers, bounded, versioned) and its failures as one
  line each, never a hang.
- ``kernel_outages``: the kernel log's link down/up lines as outages, for a first run.
- ``record``: what a run appends and reads back into the Snapshot (``LinkHistory``).
"""

from __future__ import annotations

import os
from typing import Mapping, Optional

DEFAULT_PATH = "/var/lib/ibdiag/history.db"
ENVIRONMENT = "IBDIAG_HISTORY"  # a path, or "off"; --history and --no-history win over it


def store_path(
    given: Optional[str],
    off: bool = False,
    environ: Mapping[str, str] = os.environ,
    sysfs_root: str = "/sys",
) -> Optional[str]:
    """The store a run uses: None when history is off (``--no-history``, ``IBDIAG_HISTORY=off``),
    else ``--history PATH``, else ``$IBDIAG_HISTORY``, else ``/var/lib/ibdiag/history.db`` -
    the default only for this machine's own ports: a run reading another sysfs tree
    (``--sysfs``: a capture, a test tree, a host's /sys mounted elsewhere) keeps a past only in
    a store it names, never mixing foreign ports into the machine's."""
    if off:
        return None
    if given:
        return given
    chosen = environ.get(ENVIRONMENT, "").strip()
    if chosen.lower() in ("off", "none", "no", "0"):
        return None
    if chosen:
        return chosen
    return DEFAULT_PATH if os.path.normpath(sysfs_root) == "/sys" else None
