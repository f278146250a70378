"""Which read-only commands a standard-level run needs, from what sysfs showed.

- ``perfquery -x``, ``-E`` and ``-X`` for every ACTIVE InfiniBand port, addressed ``-C DEV -P
  PORT`` (a port that is not ACTIVE has no LID to query), and plain ``perfquery`` when ``-x``
  fails (HCAs without extended counters). Never ``-r``/``-R``.
- ``ethtool -S`` for each port's netdev (IPoIB and RoCE).
- the kernel log (``dmesg``; ``journalctl -k`` only when dmesg gives nothing usable).
- ``ibstat`` and ``ibv_devinfo`` for the inventory cross-check.
- ``nvidia-smi topo -m`` where sysfs shows an NVIDIA GPU: which HCA each GPU is nearest
  (GPUDirect RDMA pairing).
"""

from __future__ import annotations

from typing import AbstractSet, List, Optional

from ibdiag.model import Device, Pci
from ibdiag.sources.parsers import IBSTAT_ARGV, IBV_DEVINFO_ARGV
from ibdiag.sources.parsers.ethtool import ethtool_argv
from ibdiag.sources.parsers.kernel_log import journalctl_argv, kernel_log_argv
from ibdiag.sources.parsers.perfquery import perfquery_argv

PERFQUERY_MODES = ("x", "E", "X")  # "basic" only as the fallback of "x"


def _ib_active(port) -> bool:
    return port.state == 4 and port.link_layer in ("InfiniBand", None)


def commands_for(
    devices: List[Device], needs: AbstractSet[str], gpus: Optional[List[Pci]] = None
) -> List[List[str]]:
    """The argv of every command the ``needs`` call for, in a stable order. ``gpus``: the
    NVIDIA GPUs sysfs showed (nvidia-smi runs only where there is one)."""
    planned: List[List[str]] = []
    if "perfquery" in needs:
        for dev in devices:
            for port in dev.ports:
                if _ib_active(port):
                    planned += [perfquery_argv(dev.name, port.number, m) for m in PERFQUERY_MODES]
    if "ethtool" in needs:
        netdevs = {port.netdev.name for dev in devices for port in dev.ports if port.netdev}
        planned += [ethtool_argv(name) for name in sorted(netdevs)]
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


def fallback_for(argv: List[str]) -> List[str]:
    """The command to try when ``argv`` gave nothing usable: journalctl -k for dmesg, plain
    perfquery for perfquery -x."""
    if argv == kernel_log_argv():
        return journalctl_argv()
    if argv[:2] == ["perfquery", "-x"]:
        return ["perfquery", *argv[2:]]
    return []
