"""A stop signal while ibdiag is still starting is one line and exit 3, never a traceback
(issue 12 item 12: SIGINT in the first ~40 ms printed a KeyboardInterrupt traceback)."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from conftest import REPO

# Send the signal at the very start of importing the command line (click, pydantic, ...): the
# window in which it used to land before any handler was set.
SIGNAL_DURING_IMPORT = """
import os, signal, sys
import ibdiag.entry

STOP = getattr(signal, sys.argv[1])

class SignalOnImport:
    def find_spec(self, name, path=None, target=None):
        if name == "ibdiag.cli":
            os.kill(os.getpid(), STOP)
        return None

sys.meta_path.insert(0, SignalOnImport())
sys.argv = ["ibdiag", "--version"]
ibdiag.entry.main()
"""


@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM", "SIGHUP", "SIGALRM"])
def test_a_stop_signal_while_starting_is_one_line_and_unknown(stop):
    done = subprocess.run(
        [sys.executable, "-c", SIGNAL_DURING_IMPORT, stop],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (3, "", "ibdiag: interrupted\n")


def test_the_handlers_are_set_before_the_command_line_is_imported():
    probe = (
        "import signal, sys\n"
        "import ibdiag.entry\n"
        "class Probe:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'ibdiag.cli':\n"
        "            print(signal.getsignal(signal.SIGINT).__name__)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Probe())\n"
        "sys.argv = ['ibdiag', '--version']\n"
        "ibdiag.entry.main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "_stopped_early"
    assert signal.SIGINT  # (the running pytest's own handlers are untouched)
