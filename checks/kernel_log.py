"""The kernel log: HCA firmware faults, command timeouts, link flaps, PCIe errors."""

from __future__ import annotations

from collections import OrderedDict
from typing import Dict, Iterator, List, Optional, Tuple

from ibdiag.command_results import symptom, symptom_result, usable_run
from ibdiag.model import Result, Snapshot, Status
from ibdiag.registry import check
from ibdiag.targets import graded_devices
from ibdiag.thresholds import Thresholds

_STATUS = {"fail": Status.FAIL, "warn": Status.WARN, "info": Status.PASS}


def _parser():
    """The kernel-log parser, classifier and argv builders.

    Loaded when a standard-level check runs: a quick run only registers this module.
    """
    from ibdiag.sources.parsers import kernel_log as parser

    return parser


def _signatures():
    from ibdiag.kernel_signatures import SIGNATURES

    return {signature.id: signature for signature in SIGNATURES}


def _kernel_log(snap: Snapshot):
    """The first usable log (dmesg, else journalctl -k), or the reasons neither was."""
    reasons = []
    for argv in (_parser().kernel_log_argv(), _parser().journalctl_argv()):
        run, why = usable_run(snap, argv)
        if run is not None and run.stdout.strip():
            return run, None
        reasons.append(why or f"`{' '.join(argv)}` printed nothing")
    return None, "; ".join(reasons)


def _cutoff(snap: Snapshot, baseline: Optional[Snapshot]) -> Tuple[Optional[float], str]:
    """Seconds after boot from which lines count, and how to say it."""
    if baseline is None or snap.boot_time is None or snap.boot_id != baseline.boot_id:
        return None, "since boot"
    seconds = (baseline.collected_at - snap.boot_time).total_seconds()
    return seconds, "since the baseline"


def _card_functions(bdfs: Dict[str, str]) -> Dict[str, str]:
    """Also map the other functions of each HCA's slot (0000:0d:00.1-.7, its VFs or second
    port without an RDMA device) to the HCA on function .0 of that slot, when there is one."""
    mapped = dict(bdfs)
    for address, name in bdfs.items():
        slot, function = address.rsplit(".", 1)
        if function == "0":
            for other in range(1, 8):
                mapped.setdefault(f"{slot}.{other}", name)
    return mapped


@check(
    "kernel.log",
    title="No HCA fault in the kernel log",
    needs={"kernel_log", "sysfs"},
    level="standard",
)
def kernel_log(snap: Snapshot, th: Thresholds, baseline: Optional[Snapshot]) -> Iterator[Result]:
    """Healthy: since the baseline (or since boot), no kernel-log line about an HCA matches a
    known fault signature: firmware health/fatal/syndrome, command timeouts, cable or module
    unplugged or too hot, insufficient PCIe power, link flaps, PCIe AER on the HCA's BDF,
    "lost carrier" on its IPoIB interface, probe failures.

    Why it matters: many HCA faults show up only here - a firmware syndrome or a flapping link
    leaves port state and counters clean between samples (seed 002, step 5).

    What to do: each finding names its signature, device and hint; firmware faults usually
    need a firmware reset or update and the vendor's attention (send the bundle). When both
    dmesg and journalctl are restricted (a skip), run ibdiag as root or relax
    kernel.dmesg_restrict; one that hangs, crashes or cannot execute warns, naming it.
    """
    # dmesg (or journalctl) hanging, crashing or unable to execute is a symptom of its own,
    # even when the other stood in; failing (restricted: dmesg_restrict) is not.
    hung = 0
    for argv in (_parser().kernel_log_argv(), _parser().journalctl_argv()):
        failed = snap.command(argv)
        what = symptom(failed)
        if failed is not None and what:
            hung += 1
            yield symptom_result("node", failed, what, "this node",
                                 "reading the kernel log hung or died: the kernel, journald?",
                                 "run it by hand; check journald and the kernel")  # fmt: skip
    run, why = _kernel_log(snap)
    if run is None:
        if not hung:  # restricted, absent: nothing to judge, say why
            yield Result(target="node", status=Status.SKIP,
                         message=f"kernel log unavailable: {why}",
                         evidence=[" ".join(_parser().kernel_log_argv())])  # fmt: skip
        return
    signatures = _signatures()
    cutoff, since = _cutoff(snap, baseline)
    lines = [
        line for line in _parser().parse_kernel_log(run.stdout)
        if cutoff is None or line.seconds is None or line.seconds > cutoff
    ]  # fmt: skip
    # Map every HCA (ignored ones too), so a line about an ignored HCA is dropped by name
    # rather than reported against the node.
    bdfs = _card_functions({dev.pci.address: dev.name for dev in snap.devices if dev.pci})
    netdevs = {p.netdev.name: dev.name for dev in snap.devices for p in dev.ports if p.netdev}
    graded = {dev.name for dev in graded_devices(snap, th)}
    grouped: Dict[Tuple[str, Optional[str]], List] = OrderedDict()
    for finding in _parser().classify(lines, bdfs, netdevs):
        if finding.device is not None and finding.device not in graded:
            continue  # an ignored HCA
        grouped.setdefault((finding.signature, finding.device), []).append(finding)
    evidence = [" ".join(run.argv)]
    for (signature_id, device), findings in grouped.items():
        signature = signatures.get(signature_id)
        title = signature.title if signature else signature_id
        last = findings[-1].line.strip()
        yield Result(
            target=device or "node",
            status=_STATUS.get(findings[-1].severity, Status.WARN),
            message=f"{title} ({len(findings)} line(s) {since}); last: {last[:160]}",
            observed=signature_id,  # the stable part: a drain reason names this, not the line
            hint=signature.hint if signature else None,
            evidence=evidence,
        )
    if not grouped:
        yield Result(target="node", status=Status.PASS,
                     message=f"no HCA fault signature in {len(lines)} kernel-log lines {since}",
                     evidence=evidence)  # fmt: skip
