"""The NCCL Inspector family (source ``nccl_inspector``, level full): the dump files NCCL's
Inspector plugin writes during jobs -> ``Snapshot.nccl_inspector_dumps``. It runs no command.

**What it reads** (``run``, at the end of level full's phase): the recent dump files of
``nccl_inspector_dir`` (else ``$NCCL_INSPECTOR_DUMP_DIR``; neither: nothing is looked for and
``Snapshot.nccl_inspector`` stays None), newest first, bounded in age, size and number
(``files.read_dumps``); their text goes to ``Snapshot.nccl_inspector`` (kept for the bundle),
and why none could be read to the node's problems (``nccl_inspector``).

**What it gives**: each file parsed once, by its name (``.prom``: Prometheus mode,
``.json``/``.jsonl``/``.log``: JSON mode), into an ``InspectorDump`` of per-GPU,
per-collective samples that records the file's ``name``, in the files' order. A file caught
half-written or holding junk gives what could be read and its ``problems``; nothing raises.
"""

from __future__ import annotations

import os

from ibdiag.families import Runs, Update
from ibdiag.families._traffic import TrafficContext
from ibdiag.model import Snapshot

SOURCE = "nccl_inspector"
LEVEL = "full"
ORDER = 90  # after the traffic tests: the files of the jobs before this run


def run(snap: Snapshot, context: TrafficContext) -> Snapshot:
    """``snap`` with the recent dump files and where they were read (module docstring)."""
    import time

    from ibdiag.families.nccl_inspector.files import read_dumps

    thresholds = context.thresholds
    directory = thresholds.nccl_inspector_dir or os.environ.get("NCCL_INSPECTOR_DUMP_DIR")
    if not directory:
        return snap
    files, problem = read_dumps(directory, thresholds.nccl_inspector_max_age_s, time.time())
    problems = {**snap.problems, "nccl_inspector": problem} if problem else snap.problems
    update = {"nccl_inspector_dir": directory, "nccl_inspector": files, "problems": problems}
    return snap.model_copy(update=update)


def interpret(snap: Snapshot, runs: Runs) -> Update:
    """``Snapshot.nccl_inspector_dumps`` when dumps were read; no update when none were looked
    for (``nccl_inspector`` None)."""
    if snap.nccl_inspector is None:
        return Update()
    from ibdiag.families.nccl_inspector.parser import parse_inspector_file

    dumps = [parse_inspector_file(found.name, found.text) for found in snap.nccl_inspector]
    return Update(node={"nccl_inspector_dumps": dumps})
