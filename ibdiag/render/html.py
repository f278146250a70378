"""HTML: one self-contained page (inline CSS, no script, nothing fetched from the network).

Rendered with jinja2 from reports/templates/report.html.j2 with autoescaping on, so a device
name, hostname or message containing markup stays inert text. The renderer only arranges what
the Report says; it decides no verdict.
"""

from __future__ import annotations

from typing import Dict, List

import jinja2

from ibdiag import resources
from ibdiag.model import Report, Result, Status

_SEVERITY = [Status.PASS, Status.SKIP, Status.WARN, Status.ERROR, Status.FAIL]
_ATTENTION = (Status.FAIL, Status.ERROR, Status.WARN)


def _worst(results: List[Result]) -> str:
    if not results:
        return "none"
    return max((r.status for r in results), key=_SEVERITY.index).value


def port_matrix(report: Report) -> List[Dict[str, object]]:
    """One row per HCA: its own worst status and each port's, for the colour of each cell."""
    by_target: Dict[str, List[Result]] = {}
    for result in report.results:
        by_target.setdefault(result.target, []).append(result)
    rows = []
    for dev in report.snapshot.devices:
        ports = [
            {"port": port, "status": _worst(by_target.get(dev.target(port), []))}
            for port in dev.ports
        ]
        rows.append({"device": dev, "status": _worst(by_target.get(dev.name, [])), "ports": ports})
    return rows


def render(report: Report) -> str:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(resources.templates_dir()),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    attention = [r for r in report.results if r.status in _ATTENTION]
    attention.sort(key=lambda r: _ATTENTION.index(r.status))
    return environment.get_template("report.html.j2").render(
        report=report,
        snapshot=report.snapshot,
        attention=attention,
        others=[r for r in report.results if r.status not in _ATTENTION],
        matrix=port_matrix(report),
        counts=report.counts(),
    )
