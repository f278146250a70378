"""The HCA firmware's liveness in Prometheus terms: each devlink health reporter's counts and
state, from the typed ``devlink_health`` fact of level standard (``ibdiag.facts.devlink``).

Labels ``device`` (the HCA: ``mlx5_0``), ``reporter`` (``fw``, ``fw_fatal``, ``tx``, ``rx``,
``vnic``...) and ``port_index`` (``""`` for the device's own reporter; the devlink port index,
``65535``, for a port's):

- ``ibdiag_hca_health_errors_total``: errors the reporter counted since the driver loaded
  (devlink's ``error``);
- ``ibdiag_hca_health_recovers_total``: recoveries that succeeded since then (``recover``);
- ``ibdiag_hca_health_healthy``: 1 while the reporter reads ``healthy``, 0 in ``error`` (or
  any other state).

Healthy: ``ibdiag_hca_health_errors_total{reporter="fw_fatal"}`` never moves
(``increase(...[1d]) > 0`` is an alert), ``ibdiag_hca_health_healthy`` 1 everywhere. A count
that was not read (devlink missing, not permitted, an odd value) is no sample, never a 0; both
counts start again from 0 when the driver is reloaded, which Prometheus' ``increase`` takes as
a counter reset.

Pure functions of the Report: no I/O, nothing decided.
"""

from __future__ import annotations

from ibdiag.facts.devlink import DevlinkHealth
from ibdiag.model import Report
from ibdiag.render.inert import inert
from ibdiag.render.prometheus_family import Family, Labels


def add_firmware(family: Family, report: Report) -> None:
    """Add the families above through ``family(name, kind, help)`` (``_Exposition.family``)."""
    errors = family(
        "ibdiag_hca_health_errors_total",
        "counter",
        "Errors a devlink health reporter of the HCA counted since the driver loaded "
        "(devlink health show: error).",
    )
    recovers = family(
        "ibdiag_hca_health_recovers_total",
        "counter",
        "Successful recoveries of a devlink health reporter of the HCA since the driver loaded "
        "(devlink health show: recover).",
    )
    healthy = family(
        "ibdiag_hca_health_healthy",
        "gauge",
        "1 while the devlink health reporter reads healthy, 0 in state error.",
    )
    for dev in report.snapshot.devices:
        found = dev.facts.get("devlink_health")
        if not isinstance(found, DevlinkHealth) or found.outcome.no_data is not None:
            continue
        seen = set()
        for reporter in found.reporters:
            port = "" if reporter.port_index is None else str(reporter.port_index)
            labels: Labels = (
                ("device", dev.name),
                ("reporter", inert(reporter.name)),
                ("port_index", port),
            )
            if labels in seen:  # a reporter listed twice under one handle: the first counts
                continue
            seen.add(labels)
            if reporter.errors is not None:
                errors.add(labels, reporter.errors)
            if reporter.recovers is not None:
                recovers.add(labels, reporter.recovers)
            if reporter.state is not None:
                healthy.add(labels, 1 if reporter.healthy else 0)
