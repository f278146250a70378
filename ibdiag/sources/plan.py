"""Which read-only commands a standard-level run needs, from what sysfs showed, for the
families not yet in ``ibdiag.families`` (perfquery and ethtool are there).

- the kernel log (``dmesg``; ``journalctl -k`` only when dmesg gives nothing usable).
- ``ibstat`` and ``ibv_devinfo`` for the inventory cross-check.
- ``nvidia-smi topo -m`` where sysfs shows an NVIDIA GPU: which HCA each GPU is nearest
  (GPUDirect RDMA pairing).
"""

from __future__ import annotations

from typing import AbstractSet, List, NamedTuple, Optional

from ibdiag import roles
from ibdiag.model import Device, Pci

IBSTAT_ARGV = ("ibstat",)
IBV_DEVINFO_ARGV = ("ibv_devinfo",)


class Planned(NamedTuple):
    """One command to run: what it is for (``ibdiag.roles``) and its argv."""

    role: roles.Role
    argv: List[str]


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


def nvidia_smi_topo_argv() -> List[str]:
    """The argv that prints the GPU/NIC topology matrix (read-only)."""
    return ["nvidia-smi", "topo", "-m"]


def commands_for(
    devices: List[Device], needs: AbstractSet[str], gpus: Optional[List[Pci]] = None
) -> List[Planned]:
    """Every command the ``needs`` call for, with its role, in a stable order. ``gpus``: the
    NVIDIA GPUs sysfs showed (nvidia-smi runs only where there is one)."""
    planned: List[Planned] = []
    if "kernel_log" in needs:
        planned.append(Planned(roles.KERNEL_LOG, kernel_log_argv()))
    if "ibstat" in needs:
        planned.append(Planned(roles.IBSTAT, list(IBSTAT_ARGV)))
    if "ibv_devinfo" in needs:
        planned.append(Planned(roles.IBV_DEVINFO, list(IBV_DEVINFO_ARGV)))
    if "gpu_topology" in needs and gpus:
        planned.append(Planned(roles.GPU_TOPOLOGY, nvidia_smi_topo_argv()))
    return planned


def fallback_for(planned: Planned) -> Optional[Planned]:
    """The command to try when ``planned`` gave nothing usable: journalctl -k for dmesg; None
    when it has none."""
    if planned.role == roles.KERNEL_LOG:
        return Planned(roles.KERNEL_LOG_FALLBACK, journalctl_argv())
    return None
