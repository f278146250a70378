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

Healthy: uncorrectable blocks never move, corrected ones grow alike on every lane. A value
that was not read is no sample (never a 0).

Pure functions of the Report: no I/O, nothing decided.
"""

from __future__ import annotations

from typing import Callable, Protocol, Tuple

from ibdiag.facts.fec import RS_FEC, PortFec
from ibdiag.model import Report
from ibdiag.render import prometheus_partner as far_end

Labels = Tuple[Tuple[str, str], ...]


class _Samples(Protocol):
    """A metric family being written: one sample per ``add``."""

    def add(self, labels: Labels, value: float) -> None: ...


Family = Callable[[str, str, str], _Samples]


def add_physical(family: Family, report: Report) -> None:
    """Add the families above through ``family(name, kind, help)`` (``_Exposition.family``)."""
    _add_fec(family, report)


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


def _add_port_fec(corrected: _Samples, uncorrectable: _Samples, base: Labels, fec: PortFec) -> None:
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
