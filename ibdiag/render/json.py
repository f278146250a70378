"""JSON: the whole Report (results, effective thresholds and the Snapshot they came from)."""

from __future__ import annotations

from ibdiag.model import Report


def render(report: Report) -> str:
    return report.model_dump_json(indent=2) + "\n"
