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
from ibdiag.facts.hwmon import HcaSensors
from ibdiag.facts.module import CableIdentity, ModuleReading
from ibdiag.facts.partner import CABLE
from ibdiag.model import Device, Report, Result
from ibdiag.render.html_status import findings, worst

PHYSICAL_PREFIX = "phy."


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
            module = port.facts.get("module")
            module = module if isinstance(module, ModuleReading) and module.has_data else None
            cells = {
                "cable": cable_text(module.identity) if module and module.identity else None,
                "temperature": temperature_text(dev, port.number, module),
                "ber": ber_text(module) if module else None,
                "optics": optics_text(module) if module else None,
                "fec": fec_text(mine) if isinstance(mine, PortFec) else None,
                "far_fec": fec_text(far) if far is not None else None,
            }
            if not any(cells.values()):
                continue
            found = results.get(target, [])
            rows.append(
                {
                    "target": target,
                    "status": worst(found),
                    "findings": findings(found),
                    **cells,
                }
            )
    return rows


def cable_text(identity: CableIdentity) -> str:
    """``CLT T-F4GS-BV0 rev A0, serial CWJH05025502589, lot 230612AB, OSFP 50 m Optical
    Module (separated)``: what an RMA asks for."""
    make = " ".join(part for part in (identity.vendor, identity.part_number) if part)
    parts = [make or "unknown make"]
    if identity.revision:
        parts[0] += f" rev {identity.revision}"
    if identity.serial:
        parts.append(f"serial {identity.serial}")
    lot = (identity.date_code or "") + (identity.lot or "")
    if lot:
        parts.append(f"lot {lot}")
    if identity.firmware:
        parts.append(f"firmware {identity.firmware}")
    kind = [identity.identifier or ""]
    if identity.length_m is not None:
        kind.append(f"{identity.length_m:g} m")
    kind.append(identity.cable_type or "")
    if any(kind):
        parts.append(" ".join(part for part in kind if part))
    return ", ".join(parts)


def temperature_text(dev: Device, number: int, module: Optional[ModuleReading]) -> Optional[str]:
    """The port's module and its HCA's ASIC: ``module 57 °C (crit 70); asic 47 °C (crit 105)``,
    from hwmon and, where hwmon has no module sensor, from mlxlink."""
    parts = []
    sensors = dev.facts.get("hwmon")
    if isinstance(sensors, HcaSensors):
        for sensor in sensors.sensors:
            if sensor.input_c is None or (sensor.kind == "module" and sensor.port != number):
                continue
            crit = f" (crit {sensor.crit_c:g})" if sensor.crit_c is not None else ""
            parts.append(f"{sensor.name} {sensor.input_c:g} °C{crit}")
    hwmon_module = any(part.startswith("module") for part in parts)
    if module is not None and module.temperature_c is not None and not hwmon_module:
        limits = module.temperature_alarm_c
        bounds = f" (alarm {limits})" if limits is not None else ""
        parts.insert(0, f"module {module.temperature_c:g} °C{bounds}")
    return "; ".join(parts) or None


def ber_text(module: ModuleReading) -> Optional[str]:
    """``effective 1.5e-254, raw 2e-09``."""
    parts = []
    if module.effective_ber is not None:
        parts.append(f"effective {module.effective_ber:.2g}")
    if module.raw_ber is not None:
        parts.append(f"raw {module.raw_ber:.2g}")
    return ", ".join(parts) or None


def optics_text(module: ModuleReading) -> Optional[str]:
    """``Rx -1.2..2.3 dBm, Tx 0.5..1.1 dBm over 4 lanes; LOS on lane 2``."""
    if module.copper:
        return "copper: no optics"
    parts = []
    for field, what, unit in (("rx_power_dbm", "Rx", "dBm"), ("tx_power_dbm", "Tx", "dBm")):
        values = [getattr(lane, field) for lane in module.lanes]
        found = [value for value in values if value is not None]
        if found:
            parts.append(f"{what} {min(found):g}..{max(found):g} {unit}")
    text = ", ".join(parts)
    if text:
        text += f" over {len(module.lanes)} lanes"
    lost = [str(lane.lane) for lane in module.lanes if lane.los or lane.cdr_lol]
    if lost:
        text += f"; LOS/LOL on lane {', '.join(lost)}"
    return text or None


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
