"""NCCL Inspector's dump files: the bus bandwidth real jobs saw, per collective and GPU.

With the Inspector plugin loaded (``NCCL_PROFILER_PLUGIN=inspector``) NCCL rewrites, in place,
one file per GPU in ``NCCL_INSPECTOR_DUMP_DIR``: ``nccl_inspector_metrics_<gpu uuid>.prom``
in Prometheus mode (seed 003), JSON lines otherwise. ibdiag reads the recent ones (modified
within ``nccl_inspector_max_age_s``), newest first, as they are at that moment: a file caught
half-written is parsed for what it holds (``ibdiag.sources.parsers.nccl_inspector``).

Only regular files are read (no symlinks, FIFOs or devices: a dump directory is writable by
jobs), at most ``MAX_FILES`` of them and ``MAX_BYTES`` of each.
"""

from __future__ import annotations

import os
import stat
from datetime import datetime, timezone
from typing import List, Tuple

from ibdiag.model import InspectorFile

MAX_FILES = 256
MAX_BYTES = 4 << 20
NAME_PREFIX = "nccl_inspector"


def read_dumps(directory: str, max_age_s: float, now: float) -> Tuple[List[InspectorFile], str]:
    """(files, problem): the recent dump files, newest first; problem "" when all went well."""
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return [], f"{directory}: no such directory"
    except NotADirectoryError:
        return [], f"{directory}: not a directory"
    except OSError as exc:
        return [], f"{directory}: cannot list: {exc.strerror}"
    found = []
    for entry in entries:
        if not entry.name.startswith(NAME_PREFIX):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue  # removed while we looked
        if stat.S_ISREG(info.st_mode) and now - info.st_mtime <= max_age_s:
            found.append((info.st_mtime, entry.name))
    found.sort(reverse=True)
    problems = []
    if len(found) > MAX_FILES:
        problems.append(f"{len(found)} recent dump files: the newest {MAX_FILES} were read")
    files = []
    for mtime, name in found[:MAX_FILES]:
        text, truncated, problem = _read(os.path.join(directory, name))
        if problem:
            problems.append(problem)
            continue
        files.append(
            InspectorFile.model_construct(
                name=name,
                modified_at=datetime.fromtimestamp(mtime, timezone.utc),
                text=text,
                truncated=truncated,
            )
        )
    return files, "; ".join(problems)


def _read(path: str) -> Tuple[str, bool, str]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return "", False, f"{path}: cannot open: {exc.strerror}"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "", False, f"{path}: not a regular file"
        data = b""
        while len(data) <= MAX_BYTES:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            data += chunk
    except OSError as exc:
        return "", False, f"{path}: cannot read: {exc.strerror}"
    finally:
        os.close(fd)
    truncated = len(data) > MAX_BYTES
    return data[:MAX_BYTES].decode("utf-8", errors="replace"), truncated, ""
