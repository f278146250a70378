"""NCCL Inspector's dump files: the bus bandwidth real jobs saw, per collective and GPU.

With the Inspector plugin loaded (``NCCL_PROFILER_PLUGIN=inspector``) NCCL writes into
``NCCL_INSPECTOR_DUMP_DIR``: in Prometheus mode one file per GPU,
``nccl_inspector_metrics_<gpu uuid>.prom``, rewritten in place (seed 003); in its default JSON
mode one file per process, ``<hostname>-pid<pid>.log``, appended to. ibdiag reads the recent
ones (modified within ``nccl_inspector_max_age_s``), newest first, as they are at that moment:
a file caught half-written is parsed for what it holds (``parser``); of a file larger than
``MAX_BYTES`` the newest part is kept, from a line start.

A dump directory is writable by jobs and ibdiag may run as root, so only regular files with a
single link are read (no symlinks, FIFOs, devices, nor a hard link to a file elsewhere), with
O_NOFOLLOW, at most ``MAX_FILES`` of them and ``MAX_TOTAL_BYTES`` in all.
"""

from __future__ import annotations

import os
import stat
from datetime import datetime, timezone
from typing import List, Tuple

from ibdiag.model import InspectorFile

MAX_FILES = 256
MAX_BYTES = 4 << 20
MAX_TOTAL_BYTES = 64 << 20
NAME_PREFIX = "nccl_inspector"
DUMP_SUFFIXES = (".prom", ".log", ".json", ".jsonl")


def is_dump_name(name: str) -> bool:
    return name.startswith(NAME_PREFIX) or name.endswith(DUMP_SUFFIXES)


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
    problems = []
    for entry in entries:
        if not is_dump_name(entry.name):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue  # removed while we looked
        if not stat.S_ISREG(info.st_mode) or now - info.st_mtime > max_age_s:
            continue
        if info.st_nlink != 1:
            problems.append(f"{entry.name}: a hard link ({info.st_nlink} names): not read")
            continue
        found.append((info.st_mtime, entry.name))
    found.sort(reverse=True)
    if len(found) > MAX_FILES:
        problems.append(f"{len(found)} recent dump files: the newest {MAX_FILES} were read")
    files: List[InspectorFile] = []
    budget = MAX_TOTAL_BYTES
    for mtime, name in found[:MAX_FILES]:
        if budget <= 0:
            problems.append(f"{MAX_TOTAL_BYTES >> 20} MiB read: older dumps left out")
            break
        text, truncated, problem = _read_tail(os.path.join(directory, name), min(MAX_BYTES, budget))
        if problem:
            problems.append(problem)
            continue
        budget -= len(text)
        files.append(
            InspectorFile.model_construct(
                name=name,
                modified_at=datetime.fromtimestamp(mtime, timezone.utc),
                text=text,
                truncated=truncated,
            )
        )
    return files, "; ".join(problems)


def _read_tail(path: str, limit: int) -> Tuple[str, bool, str]:
    """(text, truncated, problem): the file, or its last ``limit`` bytes from a line start."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return "", False, f"{path}: cannot open: {exc.strerror}"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            return "", False, f"{path}: not a regular file with one link"
        truncated = info.st_size > limit
        if truncated:
            os.lseek(fd, info.st_size - limit, os.SEEK_SET)
        chunks = []
        left = limit
        while left > 0:
            chunk = os.read(fd, min(1 << 16, left))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        return "", False, f"{path}: cannot read: {exc.strerror}"
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if truncated:
        data = data[data.find(b"\n") + 1 :]  # from the first whole line
    return data.decode("utf-8", errors="replace"), truncated, ""
