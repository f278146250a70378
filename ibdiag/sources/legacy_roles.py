"""Roles for runs recorded before runs kept their role: where a run is known by its argv.

Nothing else finds a run by argv; the two readers of old argvs it calls (``plan.roles_by_argv``,
``active.loopback_roles_before_roles``) serve only this.

Bundles and saved snapshots from ibdiag before roles were recorded (a CommandRun's ``role`` is
None) are still re-graded with today's code: a read-only command gets the role today's plan
gives the same argv on the same devices (``plan.roles_by_argv``); the ib_write_bw runs are read
together, as the perftest check read them before roles (``active.loopback_roles_before_roles``:
a server and its client share a TCP port, attempts go in TCP port order); the nccl-tests run is
the one whose argv holds the program the recorded thresholds configured (``nccl_tests``; ibdiag
put it in the argv as is, after any launcher). A run that matches none keeps no role, and the
checks treat what it was for as not collected.
"""

from __future__ import annotations

from typing import AbstractSet, Dict, List, Optional

from ibdiag import roles
from ibdiag.model import CommandRun, Device, Pci


def restore_roles(
    commands: Dict[str, CommandRun],
    devices: List[Device],
    sources: AbstractSet[str],
    gpus: Optional[List[Pci]] = None,
    nccl_program: Optional[str] = None,
) -> Dict[str, CommandRun]:
    """``commands`` with a role on every run that has none and can be given one; runs with a
    role, and runs none of the rules recognise, are kept as they are (the same dict when no
    run changed). Run by run: ibdiag recorded roles for the traffic tests before it did for the
    read-only commands, so one snapshot may hold both kinds."""
    unnamed = [run for run in commands.values() if run.role is None]
    if not unnamed:
        return commands
    from ibdiag.sources.active import loopback_roles_before_roles
    from ibdiag.sources.plan import roles_by_argv

    planned = roles_by_argv(devices, sources, gpus)
    planned.update(loopback_roles_before_roles(run.argv for run in unnamed))
    restored = {}
    for key, run in commands.items():
        role = _role_of(run, planned, nccl_program) if run.role is None else None
        restored[key] = run if role is None else run.model_copy(update={"role": role})
    return restored


def _role_of(
    run: CommandRun, planned: Dict[str, str], nccl_program: Optional[str]
) -> Optional[str]:
    role = planned.get(run.key)
    if role is not None:
        return role
    if isinstance(nccl_program, str) and nccl_program and nccl_program in run.argv:
        return roles.NCCL_TESTS
    return None
