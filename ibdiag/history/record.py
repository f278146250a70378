"""What a run gives the history and takes from it: this run's sample in, the window out.

A live ``check`` or ``collect`` appends one sample of each port (state, phys_state, rate, the
link counters) and the kernel log's outages, then reads back the outages of the window the
checks grade into ``Snapshot.history``. The store is never on the critical path: when it
cannot be used (locked past ``busy_s``, corrupt, unwritable, full) the Snapshot says so in
``LinkHistory.problem``, the check ``history.store`` warns, and the run grades without it.
A replayed bundle or saved report keeps the history it was taken with.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import List, Optional

from ibdiag.facts.history import LinkHistory, node_keys
from ibdiag.history.kernel_outages import kernel_outages
from ibdiag.history.store import HistoryError, HistoryStore
from ibdiag.history.timeline import PortSample
from ibdiag.model import Port, Snapshot

BUSY_S = 2.0  # a run waits at most this long for another writer (the prolog must not stall)
# The most outages a Snapshot carries (into its report and bundle), the newest: a port flapping
# every second for 12 hours would otherwise make a report of hundreds of MB. Far above any
# flap_fail_count: what is left out changes no verdict, and ``omitted`` says how many.
MAX_OUTAGES = 20_000


def samples_of(snapshot: Snapshot, source: str) -> List[PortSample]:
    """One sample of each port the Snapshot read, at the Snapshot's time."""
    samples = []
    keys = node_keys((dev.name, dev.node_guid) for dev in snapshot.devices)
    for dev in snapshot.devices:
        key = keys[dev.name]
        for port in dev.ports:
            counters = port.counters
            samples.append(
                PortSample(
                    node_guid=key,
                    port=port.number,
                    device=dev.name,
                    at=snapshot.collected_at,
                    boot_id=snapshot.boot_id,
                    state=port.state,
                    phys_state=port.phys_state,
                    rate_gbps=port.rate.gbps if port.rate else None,
                    width=port.rate.width if port.rate else None,
                    link_downed=counters.get("link_downed"),
                    link_error_recovery=counters.get("link_error_recovery"),
                    symbol_error=counters.get("symbol_error"),
                    source=source,
                    far_link_downed=_far(port, "LinkDownedCounter"),
                    far_link_error_recovery=_far(port, "LinkErrorRecoveryCounter"),
                    far_symbol_error=_far(port, "SymbolErrorCounter"),
                    far_end=_far_end(port),
                )
            )
    return samples


def _far_end(port: Port) -> Optional[str]:
    """Which far-end port's counters the run read: "<its node GUID>/<its port>"."""
    far = port.partner
    if far is None or far.counters is None or far.node_guid is None or far.port is None:
        return None
    return f"{far.node_guid}/{far.port}"


def _far(port: Port, counter: str) -> Optional[int]:
    """One of the far end's PMA counters, when they were read (level standard)."""
    reading = port.partner.counters if port.partner is not None else None
    return reading.counters.get(counter) if reading is not None else None


def record_and_read(
    snapshot: Snapshot,
    path: str,
    window_s: float,
    source: str,
    busy_s: float = BUSY_S,
    record: bool = True,
    chosen: bool = True,
) -> Snapshot:
    """``snapshot`` with its ``history``: this run's samples and kernel-log outages written to
    the store at ``path`` (unless not ``record``: a monitor in this process writes them), then
    the outages of the ``window_s`` before the Snapshot's time read back (with the operators'
    tombstones). The default store that this user may not write (``chosen`` False: not named
    by --history or $IBDIAG_HISTORY; a user who is not root) is not tried: the history is
    then ``unavailable``, a skip, never a warning on every run of an unprivileged user."""
    guids = set(node_keys((dev.name, dev.node_guid) for dev in snapshot.devices).values())
    since = snapshot.collected_at - timedelta(seconds=window_s)
    denied = None if chosen else not_writable(path)
    if denied is not None:
        history = LinkHistory(store=path, since=since, problem=denied, unavailable=True)
        return snapshot.model_copy(update={"history": history})
    try:
        with HistoryStore(path, busy_s) as store:
            if record:
                store.record(samples_of(snapshot, source))
                store.add_outages(kernel_outages(snapshot))
            outages = store.outages(guids, since, snapshot.collected_at)
            kept = outages[-MAX_OUTAGES:]
            history = LinkHistory(
                store=path,
                since=since,
                outages=kept,
                omitted=len(outages) - len(kept),
                cleared=store.tombstones(guids),
                samples=store.sample_count(guids, since),
                down_events=store.down_events(guids),
                recorded=record,
                notes=store.notes,
            )
    except HistoryError as exc:
        history = LinkHistory(store=path, since=since, problem=str(exc))
    sources = sorted({*snapshot.sources, "history"})
    return snapshot.model_copy(update={"history": history, "sources": sources})


def not_writable(path: str) -> Optional[str]:
    """Why this user cannot write the store at ``path`` (its file, or the folder that holds or
    would hold it); None when it can, or may (a folder that is not there yet, under one it can
    write)."""
    target = path
    while not os.path.exists(target):
        parent = os.path.dirname(target)
        if parent == target:
            break
        target = parent
    if os.access(target, os.W_OK):
        return None
    return (
        f"the default history store {path} is not writable by this user (uid {os.getuid()}): "
        "run as root, or name one with --history PATH"
    )
