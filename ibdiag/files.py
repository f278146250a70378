"""Writing files so that a reader never sees half of one: temp file beside it, then rename."""

from __future__ import annotations

import os
import tempfile


def write_atomically(path: str, text: str, mode: int = 0o644) -> None:
    """Write ``text`` to ``path`` via a temp file in the same directory and ``os.replace``."""
    directory = os.path.dirname(os.path.abspath(path))
    handle, temp = tempfile.mkstemp(prefix=".ibdiag-", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
