"""Writing files so that a reader never sees half of one, and never replacing what is not ours.

(Reading one without blocking on it is ``ibdiag.read_files``: kept apart because the quick
check reads on every run and writes rarely, and this module imports ``tempfile`` & co.)

The one atomic writer is :func:`atomic_file`: a temp file ``.ibdiag-*.tmp`` beside the
destination, fsync'ed, then renamed over it - or, with ``replace=False``, linked to it, which
fails rather than replace anything already there (a support bundle never overwrites a file, nor
follows a link someone left in a shared directory). A killed run's temp files (over an hour old,
ours) are removed first. The bundle writer streams its tarball into one.

Every file ibdiag writes where a user points it (``-o``, ``snapshot -o``, ``export --textfile``,
``--state``, the redaction map) goes through :func:`write_output`, built on it:

- a regular file (or none yet) is written atomically: a temp file ``.ibdiag-*.tmp`` beside it,
  fsync'ed, then renamed over it, so a reader (node_exporter, the next NHC run) sees the old
  or the new file, never half of one; the temp files a killed run left there (over an hour
  old, ours) are removed first;
- a symlink is followed: its target is what gets written (atomically, when it is a regular
  file), the link itself stays - a state file linked into another directory stays linked, and
  ``-o /dev/stdout`` (a link to the open file ``/proc/self/fd/1``) writes to stdout;
- an existing file that is not regular (a device such as ``/dev/null``, a FIFO, a terminal) is
  written into directly and never replaced: ``ibdiag check -o /dev/null`` as root must not turn
  /dev/null into a regular file. A FIFO with no reader is an error, not a hang;
- a directory is an error (``IsADirectoryError``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from typing import BinaryIO, Iterator, List, Union

TEMP_PREFIX = ".ibdiag-"
TEMP_SUFFIX = ".tmp"


def write_output(path: str, data: Union[str, bytes], mode: int = 0o644) -> None:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` as the module docstring says.
    Raises OSError."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        found = os.stat(path)  # what the path leads to, through any symlinks
    except FileNotFoundError:
        found = None
    if found is not None and stat.S_ISDIR(found.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    if found is not None and not stat.S_ISREG(found.st_mode):
        _write_into(path, raw, append=False)
        return
    target = os.path.realpath(path)  # the link stays, its target is written
    if found is not None and not _is(target, found):
        # a "magic" link such as /dev/stdout -> /proc/self/fd/1 -> the file a shell opened:
        # write through the open file, appending (a `>` redirect left it empty; `>>` wants it)
        _write_into(path, raw, append=True)
        return
    with atomic_file(target, mode) as out:
        out.write(raw)


def _is(path: str, found: os.stat_result) -> bool:
    try:
        here = os.stat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (found.st_dev, found.st_ino)


@contextlib.contextmanager
def atomic_file(path: str, mode: int = 0o644, replace: bool = True) -> Iterator[BinaryIO]:
    """A binary file to write whose contents appear at ``path`` whole when the block ends, or
    not at all when it raises (KeyboardInterrupt included): a temp file in ``path``'s directory
    (mode ``mode`` from the start), fsync'ed, then ``os.replace``'d over ``path`` - or, with
    ``replace=False``, hard-linked to ``path``: ``FileExistsError`` when anything is there,
    a dangling symlink included, which is never followed. ``path`` is taken as it is: a
    symlink or a device there is replaced, not written through (:func:`write_output` decides
    that for the paths users give)."""
    directory = os.path.dirname(os.path.abspath(path))
    remove_stale_temps(directory)  # what a killed earlier run left here, once old enough
    handle, temp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX, dir=directory)
    try:
        with os.fdopen(handle, "wb") as out:
            os.fchmod(out.fileno(), mode)
            yield out
            out.flush()
            os.fsync(out.fileno())
        if replace:
            os.replace(temp, path)
        else:
            os.link(temp, path)
    finally:
        if os.path.lexists(temp):
            os.unlink(temp)


def _write_into(path: str, data: bytes, append: bool) -> None:
    """Write into what ``path`` already is (a device, a FIFO, a file behind /proc/self/fd/N),
    in place: never created, never truncated, never replaced."""
    flags = os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | (os.O_APPEND * append)
    try:  # a FIFO nobody reads would block forever: ENXIO instead
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, "a FIFO with no reader", path) from None
        raise
    try:
        os.set_blocking(fd, True)  # a reader is there: wait for it as a pipe writer does
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


STALE_TEMP_AGE_S = 3600.0  # no run takes this long: an older temp file is a killed run's


def remove_stale_temps(directory: str, max_age_s: float = STALE_TEMP_AGE_S) -> list:
    """Remove the hidden ``.ibdiag-*.tmp`` files and directories a killed run left in
    ``directory`` (a SIGKILLed ``collect`` runs no clean-up): those older than ``max_age_s``
    (by mtime) and owned by this user - a run still writing its own is never touched, nor is
    anything of another user's in a shared directory. A symlink is removed, never followed.
    Returns the paths removed; a directory that cannot be read is no error."""
    import shutil
    import time

    removed: List[str] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    now = time.time()
    for name in names:
        if not (name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX)):
            continue
        path = os.path.join(directory, name)
        try:
            found = os.lstat(path)
        except OSError:
            continue
        if found.st_uid != os.geteuid() or now - found.st_mtime < max_age_s:
            continue
        try:
            if stat.S_ISDIR(found.st_mode):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except OSError:
            continue
        removed.append(path)
    return removed
