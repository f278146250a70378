"""Each port's past in Prometheus terms, from ``Snapshot.history`` (``ibdiag.history``).

Each with the labels of every ``ibdiag_port_*`` family: ``device``, ``port``, ``ib_port``.

- ``ibdiag_port_link_down_events_total``: the port's link-down events since the history store
  began (an outage seen by several readings counts once; a new store starts at 0, which
  Prometheus reads as a counter reset).
- ``ibdiag_port_last_state_change_timestamp_seconds``: when the port last went down or came
  back, of the outages in the graded window (absent when it had none there).
- ``ibdiag_port_flapping``: 1 while ``link.flaps`` or ``link.drop`` warns or fails on the port
  (a finding is sticky for its window), else 0.

Healthy: the events counter does not move and flapping is 0. None of these is written when the
run read no history (``--no-history``).

Pure functions of the Report: no I/O, nothing decided (the flapping gauge is the checks' word).
"""

from __future__ import annotations

from typing import Set

from ibdiag.facts.history import PortKey, node_keys
from ibdiag.model import Report, Status
from ibdiag.render.prometheus_family import Family, Labels

_FLAP_CHECKS = ("link.flaps", "link.drop")
_FLAPPING = (Status.WARN, Status.FAIL)


def add_history(family: Family, report: Report) -> None:
    """Add the families above through ``family(name, kind, help)`` (``_Exposition.family``)."""
    snapshot = report.snapshot
    history = snapshot.history
    if history is None:
        return
    events = family(
        "ibdiag_port_link_down_events_total",
        "counter",
        "Link-down events of the port since the history store began (each outage once).",
    )
    changed = family(
        "ibdiag_port_last_state_change_timestamp_seconds",
        "gauge",
        "Unix time the port last went down or came back (outages of the graded window).",
    )
    flapping = family(
        "ibdiag_port_flapping",
        "gauge",
        "1 while link.flaps or link.drop warns or fails on the port within its window, else 0.",
    )
    flagged: Set[str] = {
        result.target
        for result in report.results
        if result.check_id in _FLAP_CHECKS and result.status in _FLAPPING
    }
    keys = node_keys((dev.name, dev.node_guid) for dev in snapshot.devices)
    by_port = history.by_port()
    now = snapshot.collected_at
    for dev in snapshot.devices:
        for port in dev.ports:
            labels: Labels = (
                ("device", dev.name),
                ("port", str(port.number)),
                ("ib_port", dev.target(port)),  # as every ibdiag_port_* family has it
            )
            key = PortKey(keys[dev.name], port.number)
            events.add(labels, history.down_events.get(str(key), 0))
            moments = [
                moment
                for outage in by_port.get(key, [])
                for moment in (outage.start, outage.end)
                if moment is not None and moment <= now
            ]
            if moments:
                changed.add(labels, max(moments).timestamp())
            flapping.add(labels, 1 if dev.target(port) in flagged else 0)
