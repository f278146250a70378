"""Which error counters increased since the baseline, per target: the numbers behind the
counter checks' verdicts, kept on the Report so that ``ibdiag fleet report`` can compare the
nodes' error rates (a node whose symbol errors climb ten times faster than its peers') without
the baselines themselves.

The far end of each cable (``Port.partner``) is listed under our port's target with its
counters named ``partner:<counter>`` (``partner:symbol_error``), against the baseline's reading
of the same far-end port (node GUID and port), as ``counters.partner`` grades it: a node reboot
does not restart a switch's counters.

Only counters the catalogue files as ``error`` (``ibdiag explain``) and only those that went
up are listed: a node whose listing is empty had none increase over ``hours``. Deltas follow
``ibdiag.counters.deltas`` (never negative; a counter that restarted counts from zero). Pure
functions.
"""

from __future__ import annotations

from typing import Dict, Optional

from ibdiag.counters.catalogue import lookup
from ibdiag.counters.deltas import Comparison, compare, previous_partner
from ibdiag.facts.partner import Partner
from ibdiag.model import CounterIncreases, Snapshot


def counter_increases(
    snapshot: Snapshot, baseline: Optional[Snapshot]
) -> Optional[CounterIncreases]:
    """The increases since ``baseline`` (None without one, or when it is from another host)."""
    if baseline is None:
        return None
    comparison = compare(snapshot, baseline)
    if comparison.other_host:
        return None
    targets: Dict[str, Dict[str, int]] = {}

    def add(
        target: str, directory: str, now: Dict[str, int], then: Optional[Dict[str, int]]
    ) -> None:
        if then is None:
            return
        for change in comparison.changes(now, then):
            if change.delta and lookup(change.name, directory).category == "error":
                targets.setdefault(target, {})[change.name] = change.delta

    for dev in snapshot.devices:
        for port in dev.ports:
            _add_partner(targets, dev.target(port), port.partner, comparison)
        previous = comparison.previous_device(dev)
        add(dev.name, "hw_counters", dev.hw_counters, previous.hw_counters if previous else None)
        for port in dev.ports:
            then = comparison.previous_port(dev, port)
            target = dev.target(port)
            add(target, "counters", port.counters, then.counters if then else None)
            add(target, "hw_counters", port.hw_counters, then.hw_counters if then else None)
    return CounterIncreases(hours=comparison.hours, rebooted=comparison.rebooted, targets=targets)


PARTNER_PREFIX = "partner:"


def _add_partner(
    targets: Dict[str, Dict[str, int]],
    target: str,
    partner: Optional[Partner],
    comparison: Comparison,
) -> None:
    """The far end's error counters that went up since the baseline's reading of that port."""
    if partner is None or partner.counters is None or partner.counters.mad_error:
        return
    then = previous_partner(comparison.baseline, partner)
    if then is None or not partner.counts_like(then):
        return  # no reading of that port, or one by the other perfquery: not comparable
    changes = comparison._replace(rebooted=False).changes(
        partner.error_counter_values(), then.error_counter_values()
    )
    for change in changes:
        if change.delta and lookup(change.name, "counters").category == "error":
            targets.setdefault(target, {})[PARTNER_PREFIX + change.name] = change.delta
