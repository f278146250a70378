"""JSON: the whole Report (results, effective thresholds and the Snapshot they came from)."""

from __future__ import annotations

from ibdiag.model import Report
from ibdiag.render.options import DEFAULT, RenderOptions


def render(report: Report, options: RenderOptions = DEFAULT) -> str:
    """The Report as indented JSON (no option applies: the JSON is always the whole Report)."""
    return report.model_dump_json(indent=2) + "\n"
