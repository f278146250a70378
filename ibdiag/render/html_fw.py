"""The HTML report's firmware-liveness rows: per HCA, its devlink health reporters as devlink
read them (state, errors, recoveries, the last dump kept), each row coloured by the HCA's
``hca.fw_health`` result.

Healthy reads as: every reporter ``healthy`` with 0 errors (or counts that stopped moving since
the baseline). The section is left out when no HCA has a reading (level quick, devlink missing).

Arranges what the Report holds; decides nothing (the colour is the check's status).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ibdiag.facts.devlink import DevlinkHealth, HealthReporter
from ibdiag.model import Report

CHECK_ID = "hca.fw_health"


def firmware_rows(report: Report) -> List[Dict[str, Any]]:
    """One row per HCA with a devlink health reading: ``target`` (the HCA), ``address`` (its PCI
    function), ``status`` (its hca.fw_health result's, "none" without one), ``message`` (that
    result's), and ``reporters``: one text per reporter (``reporter_text``)."""
    results = {r.target: r for r in report.results if r.check_id == CHECK_ID}
    rows = []
    for dev in report.snapshot.devices:
        found = dev.facts.get("devlink_health")
        if not isinstance(found, DevlinkHealth) or not found.reporters:
            continue
        result = results.get(dev.name)
        rows.append(
            {
                "target": dev.name,
                "address": found.address,
                "status": result.status.value if result is not None else "none",
                "message": result.message if result is not None else None,
                "reporters": [reporter_text(one) for one in found.reporters],
            }
        )
    return rows


def reporter_text(reporter: HealthReporter) -> str:
    """``fw_fatal: error, 2 errors, 1 recover, last dump 2024-05-01 11:59:40`` (``port 65535``
    for a port's reporter; what was not read is left out)."""
    name = reporter.name
    if reporter.port_index is not None:
        name += f" (port {reporter.port_index})"
    parts = [reporter.state or "state unknown"]
    for count, word in ((reporter.errors, "error"), (reporter.recovers, "recover")):
        if count is not None:
            parts.append(f"{count} {word}{'' if count == 1 else 's'}")
    if reporter.last_dump:
        parts.append(f"last dump {reporter.last_dump}")
    auto = _auto(reporter.auto_recover)
    if auto:
        parts.append(auto)
    return f"{name}: " + ", ".join(parts)


def _auto(flag: Optional[bool]) -> Optional[str]:
    return "auto-recover off" if flag is False else None
