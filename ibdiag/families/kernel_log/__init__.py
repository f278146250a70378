"""The kernel-log family: ``dmesg``, else ``journalctl -k``, read once for the HCA faults it
shows (firmware syndromes, command timeouts, link flaps, PCIe AER on an HCA's BDF...).

**What it plans** (level standard): ``dmesg --kernel --nopager`` (role ``kernel-log dmesg``),
with ``journalctl -k`` (``kernel-log journalctl``) as its fallback, tried at once when dmesg
gives nothing usable (``kernel.dmesg_restrict=1`` for a user that is not root).

**What it gives**: ``Snapshot.kernel_log`` (``ibdiag.facts.kernel_log.KernelLog``) when either
ran. The lines come from the first usable run: one that succeeded and printed something. Each
line is parsed (``parser.parse_kernel_log``), classified against the signature catalogue
(``signatures``: data, the family's own) and attributed to the HCA it names
(``parser.classify``): by RDMA device name, by the PCI address of the HCA - or of another
function of its card (a VF, a second port with no RDMA device of its own) - or by its netdev.
Every HCA is mapped, ``--ignore-hca`` ones too: the check drops those by name rather than report
their lines against the node. What became of each run tried is on the fact (``runs``), and why
each gave nothing usable (``unusable``), in the order they were tried.

No kernel-log run at all (level quick, not planned here): no field.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ibdiag import roles
from ibdiag.facts.kernel_log import KernelLog
from ibdiag.families import Planned, Runs, Update, outcome_of
from ibdiag.families._text import cap
from ibdiag.families.kernel_log.parser import classify, kernel_log_restriction, parse_kernel_log
from ibdiag.model import CommandRun, Device, Snapshot

SOURCE = "kernel_log"
LEVEL = "standard"
ORDER = 10


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


# In the order they are tried, with the argv each would have had (to say which was not run).
_TRIED = (
    (roles.KERNEL_LOG, kernel_log_argv),
    (roles.KERNEL_LOG_FALLBACK, journalctl_argv),
)


def plan(snap: Snapshot) -> List[Planned]:
    """dmesg, with journalctl -k as its fallback (module docstring)."""
    fallback = Planned(roles.KERNEL_LOG_FALLBACK, journalctl_argv())
    return [Planned(roles.KERNEL_LOG, kernel_log_argv(), fallback)]


def interpret(snap: Snapshot, runs: Runs) -> Update:
    """``Snapshot.kernel_log`` when dmesg or journalctl -k ran (module docstring)."""
    found = {role: runs.get(role) for role, _ in _TRIED}
    if not any(found.values()):
        return Update()
    return Update(node={"kernel_log": read(found, snap.devices)})


def read(runs: Dict[roles.Role, Optional[CommandRun]], devices: List[Device]) -> KernelLog:
    """The KernelLog of the first usable run in ``runs`` (by role)."""
    tried = [outcome_of(run) for role, _ in _TRIED for run in [runs.get(role)] if run is not None]
    run, unusable = _first_usable(runs)
    if run is None:
        return KernelLog(unusable=unusable, runs=tried)
    lines = parse_kernel_log(run.stdout)
    bdfs, netdevs = _maps(devices)
    findings = classify(lines, bdfs, netdevs)
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
    return KernelLog(role=run.role, unusable=unusable, findings=findings, dated=dated,
                     undated=undated, problems=cap(problems), runs=tried)  # fmt: skip


def _first_usable(
    runs: Dict[roles.Role, Optional[CommandRun]],
) -> Tuple[Optional[CommandRun], List[str]]:
    """(the first run that succeeded and printed something, why each before it did not)."""
    unusable: List[str] = []
    for role, argv in _TRIED:
        run = runs.get(role)
        if run is None:
            command = " ".join(argv())
            unusable.append(f"`{command}` was not collected (level quick, or not planned here)")
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
