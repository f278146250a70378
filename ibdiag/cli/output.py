"""Where a command's text goes: a file the user named (atomically: ``ibdiag.write_files``) or
stdout, and a status line on a terminal while level full runs.

One helper writes or prints for every command (check, report, snapshot, schema, fleet report,
export's textfile, fleet run's summary): a file that cannot be written is one line naming it and
why - ``cannot write F: why`` - and exit 3 (``UsageFailure``).
"""

from __future__ import annotations

import os
import sys
from typing import Optional, Union

import click

from ibdiag.cli.options import UsageFailure

# -o FILE's extension -> the format, when --format and --json are not given (else text)
_EXTENSIONS = {".json": "json", ".html": "html", ".htm": "html", ".txt": "text"}


def format_for(output: Optional[str], fmt: Optional[str], as_json: bool) -> str:
    """--json, else --format, else -o FILE's extension, else text."""
    if as_json:
        return "json"
    if fmt:
        return fmt
    return _EXTENSIONS.get(os.path.splitext(output or "")[1].lower(), "text")


def write_file(path: str, data: Union[str, bytes], mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` (``ibdiag.write_files.write_output``: atomically, a device or FIFO
    written into); one that cannot be written is ``UsageFailure`` 'cannot write PATH: why'."""
    from ibdiag.write_files import write_output

    try:
        write_output(path, data, mode=mode)
    except OSError as exc:  # strerror is None for an OSError made from a message alone
        raise UsageFailure(f"cannot write {path}: {exc.strerror or exc}") from exc


def write_or_print(
    text: str, output: Optional[str], quiet: bool = False, mode: int = 0o644
) -> bool:
    """``text`` into the file ``output`` names (``write_file``), or - not given, or '-' - on
    stdout unless ``quiet``. True when it went to the file."""
    if output and output != "-":
        write_file(output, text, mode)
        return True
    if not quiet:
        click.echo(text, nl=False)
    return False


def status_line():
    """What level full is running, on stderr when it is a terminal (nothing otherwise)."""
    from ibdiag.render.progress import StatusLine

    return StatusLine(sys.stderr)
