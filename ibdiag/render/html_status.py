"""How the HTML report's tables colour a row: the worst status of the results on it, ranked as
the verdict ranks them (a fail above an error above a warn above a pass above a skip), and the
findings worth reading beside it. Shared by the port matrix and every per-topic table
(physical layer, configuration, PCIe path). Decides nothing: the statuses are the checks'."""

from __future__ import annotations

from typing import Iterable, List

from ibdiag.model import Result, Status

SEVERITY = (Status.SKIP, Status.PASS, Status.WARN, Status.ERROR, Status.FAIL)
_NOTEWORTHY = SEVERITY[2:]  # warn, error, fail


def worst(results: Iterable[Result]) -> str:
    """The worst status of ``results`` as its value ("fail"); "none" when there are none."""
    statuses = [result.status for result in results]
    return max(statuses, key=SEVERITY.index).value if statuses else "none"


def findings(results: Iterable[Result]) -> List[str]:
    """The messages of the results that are not a pass or a skip, in order."""
    return [result.message for result in results if result.status in _NOTEWORTHY]
