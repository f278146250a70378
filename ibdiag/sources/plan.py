"""Which read-only commands a standard-level run needs, from what sysfs showed, for the
families not yet in ``ibdiag.families`` (perfquery and the GPU topology are there).

- ``ethtool -S`` for each port's netdev (IPoIB and RoCE).
- the kernel log (``dmesg``; ``journalctl -k`` only when dmesg gives nothing usable).
- ``ibstat`` and ``ibv_devinfo`` for the inventory cross-check.

Names come from sysfs, where anything goes. Only a device or netdev name that
``ibdiag.sources.names`` calls safe on a command line, and a port numbered 1..254, is put in a
command that runs; for any other, ``refused_runs`` records the command it would have been as
never started, with the reason (its ``skipped``), so the check of that port says why it has no
counters, and every other port's commands still run.
"""

from __future__ import annotations

from typing import AbstractSet, Dict, List, NamedTuple, Optional

from ibdiag import roles
from ibdiag.model import CommandRun, Device
from ibdiag.sources import names

IBSTAT_ARGV = ("ibstat",)
IBV_DEVINFO_ARGV = ("ibv_devinfo",)


class Planned(NamedTuple):
    """One command to run: what it is for (``ibdiag.roles``) and its argv."""

    role: roles.Role
    argv: List[str]


def ethtool_argv(netdev: str) -> List[str]:
    """``ethtool -S NETDEV`` (read-only statistics); the name is vetted by ``commands_for``."""
    return ["ethtool", "-S", netdev]


def kernel_log_argv() -> List[str]:
    """``dmesg`` with raw ``[seconds]`` stamps (no -T: wall-clock conversion is wrong after
    suspend and needs parsing). ``--kernel`` (-k) keeps to kernel messages; ``--nopager`` makes
    sure no pager starts. Both exist in util-linux since 2.23 (RHEL 7: 2.23, RHEL 8: 2.32,
    Debian 11/12: 2.36/2.38). dmesg pipes to a pager only with -H and prints no colour when
    stdout is not a terminal, so the output is the plain raw format.
    """
    return ["dmesg", "--kernel", "--nopager"]


def journalctl_argv() -> List[str]:
    """The fallback when dmesg is restricted (kernel.dmesg_restrict=1): this boot's kernel
    messages with monotonic stamps, the same clock as dmesg. No ``-q``: its warnings about
    journals a user cannot read are the reason to report when this is restricted too."""
    return ["journalctl", "-k", "-b", "--no-pager", "-o", "short-monotonic"]


def _ethtool_netdevs(devices: List[Device]) -> Dict[str, Optional[str]]:
    """netdev name -> why it may not run (None: it may), for every port's netdev."""
    found = {port.netdev.name for dev in devices for port in dev.ports if port.netdev}
    return {name: names.netdev_name_problem(name) for name in sorted(found)}


def commands_for(devices: List[Device], needs: AbstractSet[str]) -> List[Planned]:
    """Every command the ``needs`` call for, with its role, in a stable order. Ports and
    netdevs whose names may not go on a command line are left out (``refused_runs``)."""
    planned: List[Planned] = []
    if "ethtool" in needs:
        for name, why in _ethtool_netdevs(devices).items():
            if why is None:
                planned.append(Planned(roles.ethtool_stats(name), ethtool_argv(name)))
    if "kernel_log" in needs:
        planned.append(Planned(roles.KERNEL_LOG, kernel_log_argv()))
    if "ibstat" in needs:
        planned.append(Planned(roles.IBSTAT, list(IBSTAT_ARGV)))
    if "ibv_devinfo" in needs:
        planned.append(Planned(roles.IBV_DEVINFO, list(IBV_DEVINFO_ARGV)))
    return planned


def refused_runs(devices: List[Device], needs: AbstractSet[str]) -> Dict[str, CommandRun]:
    """The commands ``commands_for`` left out for a name that may not go on a command line,
    recorded as never started, each with its role and the reason as ``skipped`` (by
    ``CommandRun.key``)."""
    refused: List[CommandRun] = []
    if "ethtool" in needs:
        for name, why in _ethtool_netdevs(devices).items():
            if why is not None:
                refused.append(
                    CommandRun(argv=ethtool_argv(name), role=roles.ethtool_stats(name), skipped=why)
                )
    return {run.key: run for run in refused}


def fallback_for(planned: Planned) -> Optional[Planned]:
    """The command to try when ``planned`` gave nothing usable: journalctl -k for dmesg; None
    when it has none."""
    if planned.role == roles.KERNEL_LOG:
        return Planned(roles.KERNEL_LOG_FALLBACK, journalctl_argv())
    return None
