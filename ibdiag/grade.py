"""Grade: run the selected checks on a Snapshot and decide the node's verdict and exit code.

Verdict (Nagios plugin convention, worst first): any ``fail`` -> CRITICAL (2); else any
``error`` (a check broke) -> UNKNOWN (3); else any ``warn`` -> WARNING (1); else, when no RDMA
device is left to grade (none found, or all ignored) -> UNKNOWN (3, "nothing could be
collected"); else OK (0).
"""

from __future__ import annotations

import contextlib
import io
from typing import Dict, List, Optional, Tuple

from ibdiag import __version__
from ibdiag.counters.increases import counter_increases
from ibdiag.model import INFINIBAND_CLASS, Report, Result, Snapshot, Status, Verdict
from ibdiag.registry import CheckSpec, Registry, failure_of
from ibdiag.targets import graded_devices
from ibdiag.thresholds import Thresholds

OUTPUT_KEPT = 4096  # characters of what one check printed, kept for `check -v` and the JSON


def run_check(
    spec: CheckSpec,
    snapshot: Snapshot,
    thresholds: Thresholds,
    baseline: Optional[Snapshot] = None,
    printed: Optional[Dict[str, str]] = None,
) -> List[Result]:
    """The check's results stamped with its id; a check that raises becomes one error result.

    Whatever the check prints is captured, never mixed into the report on stdout (a print in a
    site check would corrupt ``--json``): into ``printed[spec.id]`` when a dict is given.
    A check that calls ``sys.exit`` or raises any other BaseException (but Ctrl-C) is an error
    result too: a plug-in never decides ibdiag's exit code.
    """
    output = io.StringIO()
    try:
        args = (snapshot, thresholds, baseline) if spec.takes_baseline else (snapshot, thresholds)
        with contextlib.redirect_stdout(output):
            results = list(spec.func(*args) or ())
        bad = [item for item in results if not isinstance(item, Result)]
        if bad:
            raise TypeError(f"returned {type(bad[0]).__name__}, not Result")
    except KeyboardInterrupt:
        raise
    # The one place a crash turns into a Result: a broken check must not stop the others.
    except BaseException as exc:  # noqa: BLE001
        results = [
            Result(
                target="node",
                status=Status.ERROR,
                message=f"check crashed: {failure_of(exc)}",
                hint=f"a bug in the check ({spec.origin}); the other checks still ran",
            )
        ]
    finally:
        text = output.getvalue()
        if text and printed is not None:
            printed[spec.id] = text[:OUTPUT_KEPT]
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
    printed: Dict[str, str] = {}
    for spec in registry.for_level(level):
        results.extend(run_check(spec, snapshot, thresholds, baseline, printed))
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
        check_output=printed,
        counter_increases=counter_increases(snapshot, baseline),
    )
