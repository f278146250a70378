"""Grade: run the selected checks on a Snapshot and decide the node's verdict and exit code.

Verdict (Nagios plugin convention, worst first): any ``fail`` -> CRITICAL (2); else any
``error`` (a check broke) -> UNKNOWN (3); else any ``warn`` -> WARNING (1); else, when no RDMA
device is left to grade (none found, or all ignored) -> UNKNOWN (3, "nothing could be
collected"); else OK (0).
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from ibdiag import __version__
from ibdiag.model import Report, Result, Snapshot, Status, Verdict
from ibdiag.registry import CheckSpec, Registry
from ibdiag.sources.sysfs import INFINIBAND_CLASS
from ibdiag.targets import graded_devices
from ibdiag.thresholds import Thresholds


def run_check(
    spec: CheckSpec,
    snapshot: Snapshot,
    thresholds: Thresholds,
    baseline: Optional[Snapshot] = None,
) -> List[Result]:
    """The check's results stamped with its id; a check that raises becomes one error result."""
    try:
        args = (snapshot, thresholds, baseline) if spec.takes_baseline else (snapshot, thresholds)
        results = list(spec.func(*args) or ())
        bad = [item for item in results if not isinstance(item, Result)]
        if bad:
            raise TypeError(f"returned {type(bad[0]).__name__}, not Result")
    # The one place a crash turns into a Result: a broken check must not stop the others.
    except Exception as exc:  # noqa: BLE001
        return [
            Result(
                check_id=spec.id,
                target="node",
                status=Status.ERROR,
                message=f"check crashed: {type(exc).__name__}: {exc}",
                hint=f"a bug in the check ({spec.origin}); the other checks still ran",
            )
        ]
    return [result.model_copy(update={"check_id": spec.id}) for result in results]


def verdict_of(
    results: List[Result], snapshot: Snapshot, thresholds: Thresholds
) -> Tuple[Verdict, str]:
    statuses = [result.status for result in results]
    counts = ", ".join(
        f"{statuses.count(status)} {status.value}"
        for status in (Status.FAIL, Status.ERROR, Status.WARN)
        if status in statuses
    )
    if Status.FAIL in statuses:
        return Verdict.CRITICAL, counts
    if Status.ERROR in statuses:
        return Verdict.UNKNOWN, counts
    if Status.WARN in statuses:
        return Verdict.WARNING, counts
    if not any(graded_devices(snapshot, thresholds)):
        where = f"{snapshot.sysfs_root.rstrip('/')}/{INFINIBAND_CLASS}"
        return Verdict.UNKNOWN, f"no InfiniBand devices found under {where}"
    return Verdict.OK, f"{statuses.count(Status.PASS)} pass"


def grade(
    snapshot: Snapshot,
    registry: Registry,
    thresholds: Thresholds,
    level: str = "quick",
    baseline: Optional[Snapshot] = None,
) -> Report:
    """Run every check of ``level`` (counter checks grade change since ``baseline``)."""
    results: List[Result] = []
    for spec in registry.for_level(level):
        results.extend(run_check(spec, snapshot, thresholds, baseline))
    verdict, reason = verdict_of(results, snapshot, thresholds)
    # Built from already-validated parts: no need to re-validate the whole Snapshot here.
    return Report.model_construct(
        tool_version=__version__,
        level=level,
        verdict=verdict,
        verdict_reason=reason,
        results=results,
        thresholds=thresholds,
        snapshot=snapshot,
    )
