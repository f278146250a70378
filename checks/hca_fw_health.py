"""hca.fw_health: the HCA firmware is alive, as the driver's devlink health reporters say."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterator, List, NamedTuple, Optional, Tuple

from ibdiag.model import Device, Result, Snapshot, Status
from ibdiag.outcome_results import skipped, symptom_result
from ibdiag.registry import check
from ibdiag.targets import graded_devices
from ibdiag.thresholds import Thresholds

if TYPE_CHECKING:  # the facts' models are built when a standard-level run grades: a quick run
    # (the Slurm prolog) only registers this module
    from ibdiag.facts.devlink import DevlinkHealth, HealthReporter

_COMMAND = "devlink -j health show"
_NOT_COLLECTED = "devlink health was not collected (level quick, or no HCA with a PCI function)"
_HINT = (
    "save `devlink health dump show pci/<address> reporter fw_fatal` and the kernel log, drain "
    "the node and reset the HCA (mlxfwreset or a reboot); update the firmware, and open a "
    "vendor case with the dump if it recurs"
)
_RANK = {Status.PASS: 0, Status.WARN: 1, Status.FAIL: 2}
# On an increase of their error count: fw_fatal fails (the firmware stopped), fw warns (the
# firmware reported a syndrome it survived). (ibdiag.facts.devlink FIRMWARE_FATAL, FIRMWARE)
_GRADED = (("fw_fatal", Status.FAIL), ("fw", Status.WARN))


class _Finding(NamedTuple):
    status: Status
    text: str


@check(
    "hca.fw_health",
    title="HCA firmware alive: devlink health reporters healthy, no new fw_fatal",
    needs={"devlink_health"},
    level="standard",
)
def fw_health(snap: Snapshot, th: Thresholds, baseline: Optional[Snapshot]) -> Iterator[Result]:
    """Healthy: every devlink health reporter of every HCA reads `healthy`, and the `fw_fatal`
    and `fw` reporters counted no error since the baseline (without a baseline: none since the
    driver loaded).

    Why it matters: `fw_fatal` counts the times the firmware stopped (a fatal assert, a missed
    health counter) and the driver had to dump it and reload; `fw` counts firmware syndromes it
    survived. Between two runs a recovered HCA looks healthy again in every state and counter
    ibdiag reads - only these counts remember, and a firmware that keeps failing fails jobs.
    A reporter in state `error` has not recovered (or may not: auto_recover off).

    What to do: a new fw_fatal error fails (the message says whether the driver recovered it):
    save `devlink health dump show pci/<address> reporter fw_fatal` and the kernel log, drain
    and reset the HCA, update the firmware, open a vendor case if it recurs. A new fw error
    warns: look at `devlink health diagnose ... reporter fw`. Counts from before the driver
    loaded this time are not kept; without a baseline the lifetime counts warn, "since the
    driver loaded". devlink hanging, crashing or unable to execute warns, naming it;
    devlink missing, not permitted (run as root), or no reporters for an HCA (not an mlx5 PF,
    an old kernel) is a skip with the reason.
    """
    from ibdiag.facts.devlink import DevlinkHealth

    devices = list(graded_devices(snap, th))
    facts = {dev.name: dev.facts.get("devlink_health") for dev in devices}
    if not any(isinstance(found, DevlinkHealth) for found in facts.values()):
        yield skipped("node", _NOT_COLLECTED, _COMMAND)
        return
    outcome = next(found.outcome for found in facts.values() if isinstance(found, DevlinkHealth))
    what = outcome.symptom()
    if what and outcome.cut_short:  # hung, crashed, could not run: a symptom of the node
        meaning = "devlink hung or died: the kernel's devlink, a wedged HCA driver?"
        hint = "run it by hand; check the kernel log for mlx5 command timeouts"
        yield symptom_result("node", outcome, what, "this node", meaning, hint)
        return
    earlier = _baseline_reporters(snap, baseline)
    for dev in devices:
        found = facts[dev.name]
        if not isinstance(found, DevlinkHealth):
            yield skipped(dev.name, _why_none(dev), _COMMAND)
            continue
        evidence = found.outcome.command or _COMMAND
        if found.outcome.no_data is not None:
            why = found.outcome.reason or str(found.outcome.no_data.value)
            yield skipped(dev.name, f"devlink health gave no data: {why}", evidence)
            continue
        if not found.reporters:
            yield skipped(
                dev.name,
                f"devlink lists no health reporter for pci/{found.address} (not an mlx5 PF "
                "with devlink health, or a kernel without it)",
                evidence,
            )
            continue
        yield _grade(dev.name, found, earlier, baseline is not None, evidence)


def _why_none(dev: Device) -> str:
    if dev.pci is None:
        return "no PCI function: devlink names HCAs by their PCI address"
    return "no devlink health reading for this HCA"


def _baseline_reporters(
    snap: Snapshot, baseline: Optional[Snapshot]
) -> Optional[Dict[Tuple[str, str], HealthReporter]]:
    """The baseline's reporters by (handle, name); None when the counts cannot be compared
    (no baseline, or one from another boot: the driver has counted again from zero since)."""
    from ibdiag.facts.devlink import DevlinkHealth

    if baseline is None:
        return None
    if snap.boot_id is not None and baseline.boot_id is not None:
        if snap.boot_id != baseline.boot_id:
            return {}
    found: Dict[Tuple[str, str], Any] = {}
    for dev in baseline.devices:
        fact = dev.facts.get("devlink_health")
        if isinstance(fact, DevlinkHealth) and fact.outcome.no_data is None:
            for reporter in fact.reporters:
                found[(reporter.handle, reporter.name)] = reporter
    return found


def _grade(
    target: str,
    found: DevlinkHealth,
    earlier: Optional[Dict[Tuple[str, str], HealthReporter]],
    had_baseline: bool,
    evidence: str,
) -> Result:
    findings: List[_Finding] = []
    for reporter in found.reporters:
        if not reporter.healthy:
            findings.append(
                _Finding(Status.FAIL, f"{reporter.name} state {reporter.state} (not healthy)")
            )
    for name, status in _GRADED:
        for reporter in (one for one in found.reporters if one.name == name):
            finding = _counts(reporter, status, earlier, had_baseline)
            if finding is not None:
                findings.append(finding)
    worst = max((one.status for one in findings), key=_RANK.__getitem__, default=Status.PASS)
    if not findings:
        names = ", ".join(sorted({one.name for one in found.reporters}))
        since = "since the baseline" if had_baseline else "since the driver loaded"
        message = f"pci/{found.address}: {names} healthy; no fw/fw_fatal error {since}"
        observed = "healthy"
    else:
        message = f"pci/{found.address}: " + "; ".join(one.text for one in findings)
        observed = "; ".join(one.text for one in findings if one.status == worst)
    if found.problems:
        message += f" ({len(found.problems)} odd value(s): {found.problems[0]})"
    return Result(
        target=target,
        status=worst,
        message=message,
        observed=observed,
        expected="every reporter healthy; no new fw_fatal/fw error",
        hint=_HINT if worst != Status.PASS else None,
        evidence=[evidence],
    )


def _counts(
    reporter: HealthReporter,
    status: Status,
    earlier: Optional[Dict[Tuple[str, str], HealthReporter]],
    had_baseline: bool,
) -> Optional[_Finding]:
    """A finding when ``reporter`` counted errors since the baseline (or, without one, at all);
    the recoveries counted alongside are said."""
    errors, recovers = reporter.errors, reporter.recovers
    if errors is None:
        return None
    then = earlier.get((reporter.handle, reporter.name)) if earlier is not None else None
    if earlier is not None and then is not None and then.errors is not None:
        if errors >= then.errors:
            new_errors = errors - then.errors
            new_recovers = _delta(recovers, then.recovers)
            since = "since the baseline"
        else:  # counted down: the driver was reloaded since, and counts again from 0
            new_errors, new_recovers = errors, recovers
            since = "since the driver reloaded (after the baseline)"
    elif had_baseline:  # the baseline had no reading of it (another boot, a new reporter)
        new_errors, new_recovers = errors, recovers
        since = "since the driver loaded (the baseline has no comparable count)"
    else:
        new_errors, new_recovers = errors, recovers
        since = "since the driver loaded (no baseline)"
    if not new_errors:
        return None
    if not had_baseline:
        status = Status.WARN  # lifetime counts: worth a look, not a drain on their own
    recovered = _recovered(new_errors, new_recovers)
    return _Finding(status, f"{reporter.name} {new_errors} error(s) {since}{recovered}")


def _delta(now: Optional[int], then: Optional[int]) -> Optional[int]:
    if now is None:
        return None
    if then is None or now < then:
        return now
    return now - then


def _recovered(errors: int, recovers: Optional[int]) -> str:
    if recovers is None:
        return ""
    if recovers >= errors:
        return f", recovered ({recovers} recover(s))"
    if recovers == 0:
        return ", not recovered (0 recovers)"
    return f", {recovers} of them recovered"
