"""Reading a file whose path comes from a tree or from the user without ever blocking on it.

Opening a FIFO for reading waits for a writer, forever; a character device such as
``/dev/zero`` never ends; a socket cannot be read at all. Every path ibdiag reads from a
``--sysfs``/``--procfs`` tree, a ``--baseline``/``--state`` file or a drop-in checks file goes
through here: it is opened ``O_NONBLOCK`` (opening a FIFO then returns at once), ``fstat``-ed,
and read only when it is a regular file - sysfs attributes, procfs files, snapshots and Python
modules all are - and never more than a bound. (The site config loader does the same with a
``stat`` first: ``ibdiag.config``.) Writing one atomically is ``ibdiag.write_files``.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import List, Optional, Tuple

OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK = 1 << 20

_KINDS = (
    (stat.S_ISDIR, "is a directory"),
    (stat.S_ISFIFO, "not a regular file (a FIFO): not read"),
    (stat.S_ISCHR, "not a regular file (a character device): not read"),
    (stat.S_ISBLK, "not a regular file (a block device): not read"),
    (stat.S_ISSOCK, "not a regular file (a socket): not read"),
    (stat.S_ISLNK, "not a regular file (a symlink): not read"),
)


def describe_os_error(exc: OSError) -> str:
    """ "EINVAL (Invalid argument)": the errno name admins grep for, and its meaning."""
    if isinstance(exc, FileNotFoundError):
        return "missing"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if exc.errno == errno.ENXIO:  # open(O_NONBLOCK) of a socket (and of a FIFO opened to write)
        return "not a regular file (a socket or a device with nothing behind it): not read"
    name = errno.errorcode.get(exc.errno or 0, "error")
    return f"{name} ({exc.strerror})" if exc.strerror else name


def not_regular(mode: int) -> Optional[str]:
    """Why a file of this ``st_mode`` is not read ("is a directory", "... (a FIFO) ..."), or
    None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, why in _KINDS:
        if test(mode):
            return why
    return "not a regular file: not read"


def read_fd(fd: int, limit: int, whole: bool) -> Tuple[Optional[bytes], Optional[str]]:
    """Read an open file when it is a regular one: (bytes, None) or (None, why not).

    ``whole=False``: what one ``read`` of at most ``limit`` bytes returns (a sysfs attribute is
    returned whole by one read). ``whole=True``: the file to its end; longer than ``limit`` is
    refused rather than cut.
    """
    try:
        why = not_regular(os.fstat(fd).st_mode)
        if why is not None:
            return None, why
        if not whole:
            return os.read(fd, limit), None
        chunks: List[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - size))
            if not chunk:
                return b"".join(chunks), None
            chunks.append(chunk)
            size += len(chunk)
        return None, f"larger than {limit} bytes: not read"
    except IsADirectoryError:
        return None, "is a directory"
    except OSError as exc:
        return None, describe_os_error(exc)


def read_regular_file(
    path: str, limit: int, *, whole: bool = True, follow_symlinks: bool = True
) -> Tuple[Optional[bytes], Optional[str]]:
    """The bytes of the regular file ``path`` (see ``read_fd``), or (None, why not).

    Never blocks on a FIFO, never reads a device, a socket or a directory. With
    ``follow_symlinks=False`` a symlink as the last component is refused (``ELOOP``).
    """
    flags = OPEN_FLAGS if follow_symlinks else OPEN_FLAGS | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks:
            return None, "not a regular file (a symlink): not read"
        return None, describe_os_error(exc)
    try:
        return read_fd(fd, limit, whole)
    finally:
        os.close(fd)


def regular_file_problem(path: str) -> Optional[str]:
    """Why ``path`` is not a regular file that can be opened for reading, or None when it is:
    opened non-blocking and ``fstat``-ed, nothing read (for files another reader then opens,
    such as a Python module imported by path)."""
    try:
        fd = os.open(path, OPEN_FLAGS)
    except OSError as exc:
        return describe_os_error(exc)
    try:
        return not_regular(os.fstat(fd).st_mode)
    except OSError as exc:
        return describe_os_error(exc)
    finally:
        os.close(fd)
