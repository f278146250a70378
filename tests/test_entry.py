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


# --- pydantic's plugins: off, and not looked for (issue 13, lean quick path) -----------------

QUICK_CHECK_MODULES = """
import json, sys
sys.argv = ["ibdiag", "check", "--sysfs", sys.argv[1], "-q"]
import ibdiag.entry
try:
    ibdiag.entry.main()
except SystemExit as exc:
    code = exc.code
loader = sys.modules.get("pydantic.plugin._loader")
print(json.dumps({
    "exit": code,
    "metadata": "importlib.metadata" in sys.modules,
    "stand_in": loader is ibdiag.entry._STAND_IN,
}))
"""


def _quick_check(env_value=None):
    import json
    import os

    env = {key: value for key, value in os.environ.items() if key != "PYDANTIC_DISABLE_PLUGINS"}
    if env_value is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = env_value
    sample = os.path.join(REPO, "examples", "sample-node", "sys")
    done = subprocess.run(
        [sys.executable, "-c", QUICK_CHECK_MODULES, sample],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("env_value", [None, "__all__", "1", "true"])
def test_a_quick_check_never_imports_what_looks_for_pydantic_plugins(env_value):
    """Models validate in a quick check (every Result), and pydantic's first validator
    imports its plugin loader, which imports importlib.metadata (~10 ms): with plugins off,
    ibdiag's stand-in answers "none" instead, and the check grades as ever."""
    assert _quick_check(env_value) == {"exit": 0, "metadata": False, "stand_in": True}


def test_plugins_a_site_turns_on_are_looked_for_by_pydantic_itself():
    # Only some plugins disabled (by name): pydantic's own loader runs, as without ibdiag.
    assert _quick_check("some_plugin") == {"exit": 0, "metadata": True, "stand_in": False}


def test_the_stand_in_hands_over_to_pydantic_for_anything_else(monkeypatch):
    import ibdiag.entry as entry

    monkeypatch.delitem(sys.modules, "pydantic.plugin._loader", raising=False)
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "__all__")
    entry._no_plugin_scan()
    assert sys.modules["pydantic.plugin._loader"] is entry._STAND_IN
    assert list(entry._STAND_IN.get_plugins()) == []
    # An attribute pydantic's own module has and the stand-in not: the real module answers,
    # and takes the stand-in's place.
    assert entry._STAND_IN.PYDANTIC_ENTRY_POINT_GROUP == "pydantic"
    assert sys.modules["pydantic.plugin._loader"] is not entry._STAND_IN
    # Plugins turned on after start: get_plugins asks pydantic's loader too.
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "none_of_them")
    real = sys.modules["pydantic.plugin._loader"].get_plugins()
    assert list(entry._STAND_IN.get_plugins()) == list(real)
