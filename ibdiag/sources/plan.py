"""Which read-only commands a standard-level run needs, from what sysfs showed.

- ``perfquery -x``, ``-E`` and ``-X`` for every ACTIVE InfiniBand port, addressed ``-C DEV -P
  PORT`` (a port that is not ACTIVE has no LID to query), and plain ``perfquery`` when ``-x``
  fails (HCAs without extended counters). Never ``-r``/``-R``.
- ``ethtool -S`` for each port's netdev (IPoIB and RoCE).
- the kernel log (``dmesg``; ``journalctl -k`` only when dmesg gives nothing usable).
- ``ibstat`` and ``ibv_devinfo`` for the inventory cross-check.
- ``nvidia-smi topo -m`` where sysfs shows an NVIDIA GPU: which HCA each GPU is nearest
  (GPUDirect RDMA pairing).

Names come from sysfs, where anything goes. Only a device or netdev name that
``ibdiag.sources.names`` calls safe on a command line, and a port numbered 1..254, is put in a
command that runs; for any other, ``refused_runs`` records the command it would have been as
never started, with the reason (its ``skipped``), so the check of that port says why it has no
counters, and every other port's commands still run.
"""

from __future__ import annotations

from typing import AbstractSet, Dict, Iterator, List, Optional, Tuple

from ibdiag.model import CommandRun, Device, Pci
from ibdiag.sources import names
from ibdiag.sources.parsers import IBSTAT_ARGV, IBV_DEVINFO_ARGV
from ibdiag.sources.parsers.ethtool import ethtool_argv
from ibdiag.sources.parsers.kernel_log import journalctl_argv, kernel_log_argv
from ibdiag.sources.parsers.perfquery import perfquery_argv

PERFQUERY_MODES = ("x", "E", "X")  # "basic" only as the fallback of "x"


def _ib_active(port) -> bool:
    return port.state == 4 and port.link_layer in ("InfiniBand", None)


def port_problem(number: int) -> Optional[str]:
    """Why a port number may not go on a command line (None: it may)."""
    if isinstance(number, int) and names.PORT_MIN <= number <= names.PORT_MAX:
        return None
    return f"port {number}: {names.NOT_A_PORT}: no command is run for it"


def _perfquery_ports(devices: List[Device]) -> Iterator[Tuple[Device, int, Optional[str]]]:
    """(device, port number, why it may not run or None) for every ACTIVE InfiniBand port."""
    for dev in devices:
        for port in dev.ports:
            if _ib_active(port):
                why = names.device_name_problem(dev.name) or port_problem(port.number)
                yield dev, port.number, why


def _ethtool_netdevs(devices: List[Device]) -> Dict[str, Optional[str]]:
    """netdev name -> why it may not run (None: it may), for every port's netdev."""
    found = {port.netdev.name for dev in devices for port in dev.ports if port.netdev}
    return {name: names.netdev_name_problem(name) for name in sorted(found)}


def commands_for(
    devices: List[Device], needs: AbstractSet[str], gpus: Optional[List[Pci]] = None
) -> List[List[str]]:
    """The argv of every command the ``needs`` call for, in a stable order. ``gpus``: the
    NVIDIA GPUs sysfs showed (nvidia-smi runs only where there is one). Ports and netdevs
    whose names may not go on a command line are left out (``refused_runs``)."""
    planned: List[List[str]] = []
    if "perfquery" in needs:
        for dev, number, why in _perfquery_ports(devices):
            if why is None:
                planned += [perfquery_argv(dev.name, number, m) for m in PERFQUERY_MODES]
    if "ethtool" in needs:
        netdevs = _ethtool_netdevs(devices)
        planned += [ethtool_argv(name) for name, why in netdevs.items() if why is None]
    if "kernel_log" in needs:
        planned.append(kernel_log_argv())
    if "ibstat" in needs:
        planned.append(list(IBSTAT_ARGV))
    if "ibv_devinfo" in needs:
        planned.append(list(IBV_DEVINFO_ARGV))
    if "gpu_topology" in needs and gpus:
        from ibdiag.sources.parsers.nvidia_smi_topo import nvidia_smi_topo_argv

        planned.append(nvidia_smi_topo_argv())
    return planned


def refused_runs(devices: List[Device], needs: AbstractSet[str]) -> Dict[str, CommandRun]:
    """The commands ``commands_for`` left out for a name that may not go on a command line,
    recorded as never started, each with the reason as ``skipped`` (by ``CommandRun.key``)."""
    refused: List[CommandRun] = []
    if "perfquery" in needs:
        for dev, number, why in _perfquery_ports(devices):
            if why is not None:
                argvs = [perfquery_argv(dev.name, number, m) for m in PERFQUERY_MODES]
                refused += [CommandRun(argv=argv, skipped=why) for argv in argvs]
    if "ethtool" in needs:
        for name, why in _ethtool_netdevs(devices).items():
            if why is not None:
                refused.append(CommandRun(argv=ethtool_argv(name), skipped=why))
    return {run.key: run for run in refused}


def fallback_for(argv: List[str]) -> List[str]:
    """The command to try when ``argv`` gave nothing usable: journalctl -k for dmesg, plain
    perfquery for perfquery -x."""
    if argv == kernel_log_argv():
        return journalctl_argv()
    if argv[:2] == ["perfquery", "-x"]:
        return ["perfquery", *argv[2:]]
    return []
