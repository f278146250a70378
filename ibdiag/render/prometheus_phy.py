"""The physical layer in Prometheus terms: FEC per lane, module and ASIC temperatures, BER,
optical power and the cable's identity, from the typed facts of level standard (and the mlx5
hwmon sensors of level quick).

Each port family with the labels of every ``ibdiag_port_*`` family (``device``, ``port``,
``ib_port``); the far end's with ``peer_guid``, ``peer_name``, ``peer_port`` as every
``ibdiag_partner_*`` family:

- ``ibdiag_port_fec_corrected_total`` / ``ibdiag_partner_fec_corrected_total`` (label ``lane``
  and ``unit``: ``blocks``, or ``symbols`` where RS-FEC is active): what FEC corrected on the
  lane since the counters were last reset (``perfquery -T``);
- ``ibdiag_port_fec_uncorrectable_blocks_total`` and the ``ibdiag_partner_`` one: blocks FEC
  could not correct (``lane=""``: the port's total; per lane where the layout counts them);
- ``ibdiag_hca_temperature_celsius`` and ``ibdiag_hca_temperature_crit_celsius`` (labels
  ``device``, ``sensor``: ``asic``, ``module 0``, and ``kind``: asic/module/other): the mlx5
  hwmon sensors (level quick) and their own critical thresholds;
- ``ibdiag_port_module_temperature_celsius``: the cable module's temperature as mlxlink/mstlink
  reads it;
- ``ibdiag_port_effective_ber`` / ``ibdiag_port_raw_ber``: the bit error rate after and before
  FEC (mlxlink/mstlink);
- ``ibdiag_port_module_rx_power_dbm``, ``_tx_power_dbm``, ``_tx_bias_amperes`` (label
  ``lane``): the module's optics per lane (bias in amperes, Prometheus' base unit: mA / 1000);
- ``ibdiag_port_cable_info`` (always 1): the cable's identity as labels (``vendor``,
  ``part_number``, ``serial``, ``revision``, ``firmware``, ``date_code``, ``lot``, ``length_m``,
  ``cable_type``, ``identifier``), for joins in dashboards and the fleet's lots.

Healthy: uncorrectable blocks never move, corrected ones grow alike on every lane, every
temperature far below its crit, effective BER at most 1e-12. A value that was not read is no
sample (never a 0). Text the module chose (vendor, part number) is made inert as every label.

Pure functions of the Report: no I/O, nothing decided.
"""

from __future__ import annotations

from ibdiag.facts.fec import RS_FEC, PortFec
from ibdiag.facts.hwmon import HcaSensors
from ibdiag.facts.module import ModuleReading
from ibdiag.model import Report
from ibdiag.render import prometheus_partner as far_end
from ibdiag.render.inert import inert
from ibdiag.render.prometheus_family import Family, Labels, Samples


def add_physical(family: Family, report: Report) -> None:
    """Add the families above through ``family(name, kind, help)`` (``_Exposition.family``)."""
    _add_fec(family, report)
    _add_hwmon(family, report)
    _add_module(family, report)


def _add_hwmon(family: Family, report: Report) -> None:
    reading = family(
        "ibdiag_hca_temperature_celsius",
        "gauge",
        "Temperature of an HCA sensor (the ASIC, the cable module) from the mlx5 hwmon device.",
    )
    crit = family(
        "ibdiag_hca_temperature_crit_celsius",
        "gauge",
        "The sensor's own critical temperature (mlx5 hwmon tempN_crit).",
    )
    for dev in report.snapshot.devices:
        sensors = dev.facts.get("hwmon")
        if not isinstance(sensors, HcaSensors):
            continue
        for sensor in sensors.sensors:
            labels: Labels = (
                ("device", dev.name),
                ("sensor", sensor.name),
                ("kind", sensor.kind),
            )
            if sensor.input_c is not None:
                reading.add(labels, sensor.input_c)
            if sensor.crit_c is not None:
                crit.add(labels, sensor.crit_c)


_IDENTITY = (
    "vendor",
    "part_number",
    "serial",
    "revision",
    "firmware",
    "date_code",
    "lot",
    "length_m",
    "cable_type",
    "identifier",
)


def _add_module(family: Family, report: Report) -> None:
    temperature = family(
        "ibdiag_port_module_temperature_celsius",
        "gauge",
        "Temperature of the port's cable module (mlxlink/mstlink -m).",
    )
    effective = family(
        "ibdiag_port_effective_ber",
        "gauge",
        "Bit error rate after FEC (mlxlink/mstlink Effective Physical BER).",
    )
    raw = family(
        "ibdiag_port_raw_ber",
        "gauge",
        "Bit error rate before FEC (mlxlink/mstlink Raw Physical BER).",
    )
    optics = {
        field: family(name, "gauge", text)
        for field, name, text in (
            ("rx_power_dbm", "ibdiag_port_module_rx_power_dbm", "Received optical power per lane."),
            ("tx_power_dbm", "ibdiag_port_module_tx_power_dbm", "Sent optical power per lane."),
            (
                "tx_bias_ma",
                "ibdiag_port_module_tx_bias_amperes",
                "Laser bias current per lane, in amperes.",
            ),
        )
    }
    scale = {"tx_bias_ma": 1e-3}  # Prometheus' base unit (amperes) for the tool's mA
    info = family(
        "ibdiag_port_cable_info",
        "gauge",
        "Always 1; the port's cable (module) identity as labels, as its EEPROM says it.",
    )
    for dev in report.snapshot.devices:
        for port in dev.ports:
            module = port.facts.get("module")
            if not isinstance(module, ModuleReading) or not module.has_data:
                continue
            base: Labels = (
                ("device", dev.name),
                ("port", str(port.number)),
                ("ib_port", dev.target(port)),
            )
            for value, samples in (
                (module.temperature_c, temperature),
                (module.effective_ber, effective),
                (module.raw_ber, raw),
            ):
                if value is not None:
                    samples.add(base, value)
            for lane in module.lanes:
                for field, samples in optics.items():
                    value = getattr(lane, field)
                    if value is not None:
                        samples.add((*base, ("lane", str(lane.lane))), value * scale.get(field, 1))
            identity = module.identity
            if identity is not None:
                labels = tuple((name, inert(_text(getattr(identity, name)))) for name in _IDENTITY)
                info.add(base + labels, 1)


def _text(value: object) -> str:
    if value is None:
        return ""
    return f"{value:g}" if isinstance(value, float) else str(value)


def _add_fec(family: Family, report: Report) -> None:
    corrected = {
        side: family(
            f"ibdiag_{side}_fec_corrected_total",
            "counter",
            f"What FEC corrected on one lane of the {what} (perfquery -T; unit blocks, or symbols "
            "where RS-FEC is active), since the counters were last reset.",
        )
        for side, what in (("port", "port"), ("partner", "far end's port"))
    }
    uncorrectable = {
        side: family(
            f"ibdiag_{side}_fec_uncorrectable_blocks_total",
            "counter",
            f'Blocks FEC could not correct on the {what} (lane="": the port\'s total; '
            "perfquery -T), since the counters were last reset.",
        )
        for side, what in (("port", "port"), ("partner", "far end's port"))
    }
    for dev in report.snapshot.devices:
        for port in dev.ports:
            base: Labels = (
                ("device", dev.name),
                ("port", str(port.number)),
                ("ib_port", dev.target(port)),
            )
            mine = port.facts.get("fec")
            if isinstance(mine, PortFec):
                _add_port_fec(corrected["port"], uncorrectable["port"], base, mine)
            partner = port.partner
            if partner is not None and partner.fec is not None and far_end.known(partner):
                labels = base + far_end.peer_labels(partner)
                _add_port_fec(corrected["partner"], uncorrectable["partner"], labels, partner.fec)


def _add_port_fec(corrected: Samples, uncorrectable: Samples, base: Labels, fec: PortFec) -> None:
    if not fec.read:
        return
    unit = "symbols" if fec.layout == RS_FEC else "blocks"
    for lane, value in sorted(fec.lane_corrected().items()):
        corrected.add((*base, ("lane", str(lane)), ("unit", unit)), value)
    for reading in fec.lanes:
        if reading.uncorrected_blocks is not None:
            uncorrectable.add((*base, ("lane", str(reading.lane))), reading.uncorrected_blocks)
    if fec.uncorrected_blocks is not None:
        uncorrectable.add((*base, ("lane", "")), fec.uncorrected_blocks)
