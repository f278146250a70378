"""The kernel-log runs -> ``Snapshot.kernel_log``: lines parsed and classified once.

The lines come from the first usable run: dmesg (role ``kernel-log dmesg``), else the
``journalctl -k`` that stood in for it (``kernel-log journalctl``); a run is usable when it
succeeded and printed something. Each line is classified against ``ibdiag.kernel_signatures``
and attributed to the HCA it names (``parsers.kernel_log.classify``): by RDMA device name, by
the PCI address of the HCA - or of another function of its card (a VF, a second port with no
RDMA device of its own) - or by its netdev. Every HCA is mapped, ``--ignore-hca`` ones too: the
check drops those by name rather than report their lines against the node.

No kernel-log run at all (level quick, a bundle without one): no field.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ibdiag import roles
from ibdiag.facts.kernel_log import KernelFinding, KernelLog
from ibdiag.families._text import cap
from ibdiag.model import CommandRun, Device
from ibdiag.sources import plan
from ibdiag.sources.parsers.kernel_log import classify, kernel_log_restriction, parse_kernel_log

# In the order they are tried, with the argv each would have had (to say which was not run).
_TRIED = (
    (roles.KERNEL_LOG, plan.kernel_log_argv),
    (roles.KERNEL_LOG_FALLBACK, plan.journalctl_argv),
)
_ROLES = frozenset(role for role, _ in _TRIED)


def interpret(fields: Dict[str, Any], commands: Dict[str, CommandRun]) -> Dict[str, Any]:
    runs = {run.role: run for run in commands.values() if run.role in _ROLES}
    if not runs:
        return {}
    return {"kernel_log": read(runs, fields.get("devices") or [])}


def read(runs: Dict[str, CommandRun], devices: List[Device]) -> KernelLog:
    """The KernelLog of the first usable run in ``runs`` (by role)."""
    run, unusable = _first_usable(runs)
    if run is None:
        return KernelLog(unusable=unusable)
    lines = parse_kernel_log(run.stdout)
    bdfs, netdevs = _maps(devices)
    findings = [
        KernelFinding.model_construct(
            signature=found.signature, device=found.device, seconds=found.seconds, line=found.line
        )
        for found in classify(lines, bdfs, netdevs)
    ]
    dated = [line.seconds for line in lines if line.seconds is not None]
    undated = len(lines) - len(dated)
    problems = []
    if run.stdout_truncated:
        problems.append("the log is longer than ibdiag keeps: only its newest part was read")
    restricted = kernel_log_restriction(run.stderr)
    if restricted:
        problems.append(f"part of the log may be hidden: {restricted}")
    if undated:
        problems.append(
            f"{undated} of {len(lines)} lines carry no seconds-since-boot stamp: "
            "they count whatever the baseline"
        )
    return KernelLog(
        role=run.role,
        unusable=unusable,
        findings=findings,
        dated=dated,
        undated=undated,
        problems=cap(problems),
    )


def _first_usable(runs: Dict[str, CommandRun]) -> Tuple[Optional[CommandRun], List[str]]:
    """(the first run that succeeded and printed something, why each before it did not)."""
    unusable: List[str] = []
    for role, argv in _TRIED:
        run = runs.get(role)
        if run is None:
            command = " ".join(argv())
            unusable.append(f"`{command}` was not collected (level quick, or an older bundle)")
            continue
        why = run.failure()
        if why is None and run.stdout.strip():
            return run, unusable
        unusable.append(why or f"`{' '.join(run.argv)}` printed nothing")
    return None, unusable


def _maps(devices: List[Device]) -> Tuple[Dict[str, str], Dict[str, str]]:
    """(PCI address -> HCA, netdev -> HCA) for every HCA sysfs shows."""
    bdfs = _card_functions({dev.pci.address: dev.name for dev in devices if dev.pci})
    netdevs = {port.netdev.name: dev.name for dev in devices for port in dev.ports if port.netdev}
    return bdfs, netdevs


def _card_functions(bdfs: Dict[str, str]) -> Dict[str, str]:
    """Also map the other functions of each HCA's slot (0000:0d:00.1-.7, its VFs or second
    port without an RDMA device) to the HCA on function .0 of that slot, when there is one."""
    mapped = dict(bdfs)
    for address, name in bdfs.items():
        slot, _, function = address.rpartition(".")
        if slot and function == "0":
            for other in range(1, 8):
                mapped.setdefault(f"{slot}.{other}", name)
    return mapped
