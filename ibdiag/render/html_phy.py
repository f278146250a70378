"""The HTML report's physical-layer table: per port, what the cable and its two ends say -
the cable's identity, module and ASIC temperatures, BER, optical power, FEC on our end and on
the far end's - each cell coloured by the worst ``phy.*`` result on that port or its cable.

Healthy reads as: a known cable, temperatures well below their critical marks, BER below
1e-12, optical power inside the module's own warning marks, and FEC corrections spread evenly
over the lanes with no uncorrectable block. The section is left out when no port has any of
it (level quick on a node without mlx5 hwmon).

Arranges what the Report holds; decides nothing (the colours are the checks' statuses).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ibdiag.facts.fec import RS_FEC, PortFec
from ibdiag.model import Report, Result, Status

_SEVERITY = [Status.SKIP, Status.PASS, Status.WARN, Status.ERROR, Status.FAIL]
PHYSICAL_PREFIX = "phy."
CABLE = "<->"


def physical_rows(report: Report) -> List[Dict[str, Any]]:
    """One row per port with any physical-layer reading: ``target``, ``status`` (the worst
    phy.* result on the port or its cable; "none"), and the cells' texts (None: not read)."""
    results: Dict[str, List[Result]] = {}
    for result in report.results:
        if result.check_id.startswith(PHYSICAL_PREFIX):
            results.setdefault(result.target.split(CABLE, 1)[0], []).append(result)
    rows = []
    for dev in report.snapshot.devices:
        for port in dev.ports:
            target = dev.target(port)
            mine = port.facts.get("fec")
            far = port.partner.fec if port.partner is not None else None
            cells = {
                "fec": fec_text(mine) if isinstance(mine, PortFec) else None,
                "far_fec": fec_text(far) if far is not None else None,
            }
            if not any(cells.values()):
                continue
            found = results.get(target, [])
            rows.append(
                {
                    "target": target,
                    "status": _worst(found),
                    "findings": [r.message for r in found if r.status in _SEVERITY[2:]],
                    **cells,
                }
            )
    return rows


def fec_text(fec: PortFec) -> Optional[str]:
    """``corrected 12, 9, 15, 11 blocks (lanes 0-3); uncorrectable 0`` - or why none was read."""
    if not fec.read:
        outcome = fec.outcome
        why = fec.mad_error or (outcome.reason if outcome is not None else None)
        return f"not read: {why}" if why else None
    corrected = fec.lane_corrected()
    shown = [corrected[lane] for lane in sorted(corrected) if lane < 4 or corrected[lane]]
    unit = "symbols" if fec.layout == RS_FEC else "blocks"
    text = f"corrected {', '.join(map(str, shown))} {unit} (lanes 0-{len(shown) - 1})"
    if fec.uncorrected_blocks is not None:
        text += f"; uncorrectable {fec.uncorrected_blocks}"
    return text


def _worst(results: List[Result]) -> str:
    if not results:
        return "none"
    return max((r.status for r in results), key=_SEVERITY.index).value
