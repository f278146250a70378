"""The ``ibdiag`` console script and ``python -m ibdiag``: stop signals are quiet from the start.

Importing the command line (click, pydantic) takes tens of milliseconds. A Ctrl-C, or the
SIGTERM a Slurm prolog gets when it is cancelled, in that window would print a Python
KeyboardInterrupt traceback and exit 1 or 130 - neither a one-line message nor the UNKNOWN (3)
every other failure to run exits with. So the signals are answered here first, before the
import: ``ibdiag: interrupted`` and exit 3. Nothing has started yet, so there is nothing to
clean up. ``ibdiag.cli.main`` then sets the handlers that unwind a running check.

pydantic's plugins are off (``PYDANTIC_DISABLE_PLUGINS=__all__`` unless the environment says
otherwise: ibdiag uses none), and so is the import that would look for them (``_no_plugin_scan``).
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import types

EXIT_UNKNOWN = 3
_STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGALRM")
_PLUGINS_VARIABLE = "PYDANTIC_DISABLE_PLUGINS"
_PLUGINS_OFF = ("__all__", "1", "true")  # what pydantic reads as "no plugin at all"
_PLUGIN_LOADER = "pydantic.plugin._loader"


def _stopped_early(signum: int, frame: object) -> None:
    try:
        os.write(2, b"ibdiag: interrupted\n")
    finally:
        os._exit(EXIT_UNKNOWN)


def _no_plugin_scan() -> None:
    """Turn pydantic's plugins off, and skip importing what would look for them.

    The first time a model validates, pydantic imports ``pydantic.plugin._loader`` and asks
    it for plugins. With ``PYDANTIC_DISABLE_PLUGINS=__all__`` the answer is "none" without
    looking - but importing that module imports ``importlib.metadata`` (email, zipfile, csv,
    ...): 6-11 ms, the largest single import of a quick check after pydantic itself. So while
    plugins are off, a stand-in answers ``get_plugins()`` the same way; should the variable
    change later, or pydantic ask the module for anything else, the real module answers.
    """
    os.environ.setdefault(_PLUGINS_VARIABLE, "__all__")
    if os.environ[_PLUGINS_VARIABLE] not in _PLUGINS_OFF or _PLUGIN_LOADER in sys.modules:
        return
    sys.modules[_PLUGIN_LOADER] = _STAND_IN


def _get_plugins():
    if os.environ.get(_PLUGINS_VARIABLE) in _PLUGINS_OFF:
        return ()
    return _real_loader("get_plugins")()


def _real_loader(name: str):
    """An attribute of pydantic's own plugin loader, imported in place of the stand-in."""
    if name.startswith("__"):  # the import system asks any module for __path__, __spec__, ...
        raise AttributeError(name)
    if sys.modules.get(_PLUGIN_LOADER) is _STAND_IN:
        del sys.modules[_PLUGIN_LOADER]
    return getattr(importlib.import_module(_PLUGIN_LOADER), name)


_STAND_IN = types.ModuleType(_PLUGIN_LOADER, "ibdiag's stand-in: no pydantic plugins")
_STAND_IN.get_plugins = _get_plugins  # type: ignore[attr-defined]
_STAND_IN.__getattr__ = _real_loader  # type: ignore[attr-defined] # anything else: the real one


def main() -> None:
    for name in _STOP_SIGNALS:
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), _stopped_early)
    _no_plugin_scan()
    from ibdiag.cli import main as cli_main

    signal.signal(signal.SIGINT, signal.default_int_handler)  # click turns it into "interrupted"
    try:
        cli_main()
    except KeyboardInterrupt:  # between the handler and click's own main: still one line
        sys.stderr.write("ibdiag: interrupted\n")
        sys.exit(EXIT_UNKNOWN)
