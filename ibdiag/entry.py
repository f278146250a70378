"""The ``ibdiag`` console script and ``python -m ibdiag``: stop signals are quiet from the start.

Importing the command line (click, pydantic) takes tens of milliseconds. A Ctrl-C, or the
SIGTERM a Slurm prolog gets when it is cancelled, in that window would print a Python
KeyboardInterrupt traceback and exit 1 or 130 - neither a one-line message nor the UNKNOWN (3)
every other failure to run exits with. So the signals are answered here first, before the
import: ``ibdiag: interrupted`` and exit 3. Nothing has started yet, so there is nothing to
clean up. ``ibdiag.cli.main`` then sets the handlers that unwind a running check.
"""

from __future__ import annotations

import os
import signal
import sys

from ibdiag.exit_codes import ExitCode  # the enum alone: signal imports enum already

_STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGALRM")


def _stopped_early(signum: int, frame: object) -> None:
    try:
        os.write(2, b"ibdiag: interrupted\n")
    finally:
        os._exit(ExitCode.UNKNOWN)


def main() -> None:
    for name in _STOP_SIGNALS:
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), _stopped_early)
    from ibdiag.cli import main as cli_main

    signal.signal(signal.SIGINT, signal.default_int_handler)  # click turns it into "interrupted"
    try:
        cli_main()
    except KeyboardInterrupt:  # between the handler and click's own main: still one line
        sys.stderr.write("ibdiag: interrupted\n")
        sys.exit(int(ExitCode.UNKNOWN))
