"""Parse once: the recorded command runs become typed Snapshot fields.

After the command phase, ``interpret`` hands every family of runs not yet in
``ibdiag.families`` (ethtool per netdev, the kernel log, the inventory tools) to its
interpreter, which
finds its runs by role (``ibdiag.roles``), parses their text with ``ibdiag.sources.parsers``
and returns the typed fields (``ibdiag.facts``) to set on the Snapshot, its devices, ports
and netdevs. Checks read those fields only; the raw text stays in ``Snapshot.commands`` for
bundles and the HTML.

The same step runs live (``ibdiag.collect``) and on a replayed bundle (``ibdiag.bundle``), so a
bundle re-graded with today's code is parsed by today's parsers. A parser never raises on odd
input; what it could not make sense of is a problem recorded on the field it was filling.

Each interpreter is ``interpret(fields, commands) -> updates``: ``fields`` are the Snapshot
fields read so far (``collect.read_node``'s dict: devices, gpus, boot_time, problems...) and
``updates`` the fields it replaces (devices rebuilt with their typed port fields, or a new
top-level field). They run in order; a later one sees the earlier ones' updates.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Dict, List, Optional

from ibdiag.model import CommandRun, Device, Port

# Modules of this package, each with ``interpret(fields, commands) -> Dict[str, Any]``.
FAMILIES: tuple = (
    "kernel_log",
    "inventory",
    "ethtool",
)


def interpret(fields: Dict[str, Any], commands: Dict[str, CommandRun]) -> Dict[str, Any]:
    """``fields`` with every family's typed fields set (a new dict; ``fields`` is not changed).

    An interpreter that breaks (a bug, not odd input: parsers take any text) costs only its own
    fields: the reason is recorded in the node's problems as ``interpret.<family>`` and the
    run goes on, as a check that raises becomes one error result.
    """
    result = dict(fields)
    problems = dict(result.get("problems") or {})
    for family in FAMILIES:
        module = importlib.import_module(f"{__name__}.{family}")
        try:
            result.update(module.interpret(result, commands))
        except Exception as exc:  # noqa: BLE001 - one family's bug must not lose the run
            problems[f"interpret.{family}"] = f"{type(exc).__name__}: {exc}"
    result["problems"] = problems
    return result


def runs_by_role(commands: Dict[str, CommandRun], prefix: str) -> Dict[str, CommandRun]:
    """role -> run for every run whose role starts with ``prefix`` (``"perfquery-"``); the
    first run of a role when two share it, as ``Snapshot.run`` finds it."""
    found: Dict[str, CommandRun] = {}
    for run in commands.values():
        if run.role and str(run.role).startswith(prefix):
            found.setdefault(str(run.role), run)
    return found


def with_ports(
    devices: List[Device], port_update: Callable[[Device, Port], Optional[Dict[str, Any]]]
) -> List[Device]:
    """``devices`` with each port updated by ``port_update(device, port)`` (the fields to set,
    or None to keep the port as it is): new Device and Port models, as models are frozen; a
    device none of whose ports changed is the same object."""
    rebuilt = []
    for dev in devices:
        ports = []
        for port in dev.ports:
            update = port_update(dev, port)
            ports.append(port if update is None else port.model_copy(update=update))
        changed = any(new is not old for new, old in zip(ports, dev.ports))
        rebuilt.append(dev.model_copy(update={"ports": ports}) if changed else dev)
    return rebuilt
