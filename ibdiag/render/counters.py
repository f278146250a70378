"""``ibdiag counters``: every counter of every port as a table, known or not.

One line per counter: target, name, category from the catalogue (``unknown`` for counters it
does not know), the value (data counters also in bytes), and with a baseline the change since.

Not a Report renderer (those share ``render(report, options)``, ``ibdiag.render.options``):
``ibdiag counters`` grades nothing - it shows a Snapshot's raw values beside a baseline's - so
it takes the two Snapshots. Making it take a Report would mean running every check only to
throw the results away, or faking a Report; hence its own name, ``table``.
"""

from __future__ import annotations

from typing import Dict, List, Optional

from ibdiag.counters.catalogue import lookup
from ibdiag.counters.deltas import Comparison, compare
from ibdiag.model import Snapshot
from ibdiag.render.inert import inert


def _rows(target: str, values: Dict[str, int], previous: Optional[Dict[str, int]], comparison):
    changes = (
        {c.name: c for c in comparison.changes(values, previous)}
        if comparison is not None and previous is not None
        else {}
    )
    for name in sorted(values):
        info = lookup(name)
        shown = f"{values[name]}"
        if info.unit == "words":
            shown += f" ({values[name] * 4} B)"
        item = changes.get(name)
        delta = "" if item is None or item.delta is None else f"+{item.delta}"
        if item is not None and item.restarted:
            delta += " (restarted)"
        yield target, name, info.category, shown, delta


def table(snapshot: Snapshot, baseline: Optional[Snapshot], nonzero_only: bool) -> str:
    comparison: Optional[Comparison] = compare(snapshot, baseline) if baseline else None
    rows: List[tuple] = []
    for dev in snapshot.devices:
        then_dev = comparison.previous_device(dev) if comparison else None
        rows += _rows(dev.name, dev.hw_counters, then_dev.hw_counters if then_dev else None,
                      comparison)  # fmt: skip
        for port in dev.ports:
            then = comparison.previous_port(dev, port) if comparison else None
            values = {**port.counters, **port.hw_counters}
            before = {**then.counters, **then.hw_counters} if then else None
            rows += _rows(dev.target(port), values, before, comparison)
    if nonzero_only:
        rows = [row for row in rows if not row[3].startswith("0 ") and row[3] != "0"]
    header = ("target", "counter", "category", "value", "since baseline" if baseline else "")
    widths = [max(len(inert(row[i])) for row in [header, *rows]) for i in range(4)]
    lines = [
        "  ".join(inert(cell).ljust(width) for cell, width in zip(row[:4], widths)) + "  " + row[4]
        for row in [header, *rows]
    ]
    return "\n".join(line.rstrip() for line in lines) + "\n"
