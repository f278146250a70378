"""The kernel log: HCA firmware faults, command timeouts, link flaps, PCIe errors."""

from __future__ import annotations

from collections import OrderedDict
from typing import Dict, Iterator, List, Optional, Tuple

from ibdiag import roles
from ibdiag.model import Result, Snapshot, Status
from ibdiag.outcome_results import evidence, symptom_result
from ibdiag.registry import check
from ibdiag.targets import graded_devices
from ibdiag.thresholds import Thresholds

_STATUS = {"fail": Status.FAIL, "warn": Status.WARN, "info": Status.PASS}
_NOT_COLLECTED = "not collected (level quick, or not planned here)"


def _signatures():
    """The signature table (titles, severities, hints), loaded when a standard-level check
    runs: a quick run only registers this module."""
    from ibdiag.families.kernel_log.signatures import SIGNATURES

    return {signature.id: signature for signature in SIGNATURES}


def _cutoff(snap: Snapshot, baseline: Optional[Snapshot]) -> Tuple[Optional[float], str]:
    """Seconds after boot from which lines count, and how to say it."""
    if baseline is None or snap.boot_time is None or snap.boot_id != baseline.boot_id:
        return None, "since boot"
    seconds = (baseline.collected_at - snap.boot_time).total_seconds()
    return seconds, "since the baseline"


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
    log = snap.kernel_log
    tried = log.runs if log is not None else []
    hung = 0
    for outcome in tried:  # dmesg, then journalctl -k
        what = outcome.symptom()
        if what:
            hung += 1
            yield symptom_result("node", outcome, what, "this node",
                                 "reading the kernel log hung or died: the kernel, journald?",
                                 "run it by hand; check journald and the kernel")  # fmt: skip
    if log is None or log.role is None:
        if not hung:  # restricted, absent: nothing to judge, say why
            why = "; ".join(log.unusable) if log is not None else _NOT_COLLECTED
            dmesg = next((one for one in tried if one.role == roles.KERNEL_LOG), None)
            yield Result(target="node", status=Status.SKIP,
                         message=f"kernel log unavailable: {why}",
                         evidence=[evidence(dmesg, roles.KERNEL_LOG)])  # fmt: skip
        return
    signatures = _signatures()
    cutoff, since = _cutoff(snap, baseline)
    graded = {dev.name for dev in graded_devices(snap, th)}
    grouped: Dict[Tuple[str, Optional[str]], List] = OrderedDict()
    for finding in log.findings:
        if cutoff is not None and finding.seconds is not None and finding.seconds <= cutoff:
            continue  # before the baseline
        if finding.device is not None and finding.device not in graded:
            continue  # an ignored HCA (every HCA is mapped, so its lines are not the node's)
        grouped.setdefault((finding.signature, finding.device), []).append(finding)
    read = next((one for one in tried if one.role == log.role), None)
    used = [evidence(read, log.role)]
    for (signature_id, device), findings in grouped.items():
        signature = signatures.get(signature_id)
        title = signature.title if signature else signature_id
        severity = signature.severity if signature else "warn"
        last = findings[-1].line.strip()
        yield Result(
            target=device or "node",
            status=_STATUS.get(severity, Status.WARN),
            message=f"{title} ({len(findings)} line(s) {since}); last: {last[:160]}",
            observed=signature_id,  # the stable part: a drain reason names this, not the line
            hint=signature.hint if signature else None,
            evidence=used,
        )
    if not grouped:
        yield Result(target="node", status=Status.PASS,
                     message=f"no HCA fault signature in {log.lines_after(cutoff)} kernel-log "
                     f"lines {since}",
                     evidence=used)  # fmt: skip
