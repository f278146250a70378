"""Between runs: ports that flapped or dropped within a window, and the history store itself.

The window (``flap_window_s``, 12 hours by default) ends at the Snapshot's own time, never the
clock: a replayed bundle grades as it did on the day. A finding stays for its window even when
the port is ACTIVE and clean now, across restarts and reboots, until an operator's
``ibdiag history clear`` (a recorded tombstone) ends it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional

from ibdiag.durations import span
from ibdiag.facts.history import Outage, PortKey, node_keys
from ibdiag.facts.partner import cable_name
from ibdiag.model import Port, Result, Snapshot, Status
from ibdiag.registry import check
from ibdiag.targets import graded_ports
from ibdiag.thresholds import Thresholds

_CLEAR = "ibdiag history clear --port {target} --reason TEXT"


def _when(moment: Optional[datetime]) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%SZ") if moment is not None else "now"


class _Past(NamedTuple):
    """One graded port's outages in the window (cleared ones left out, one outage seen twice
    merged), with what its verdict names: the run's time, the window, the store."""

    target: str  # mlx5_0:1
    port: Port
    outages: List[Outage]
    now: datetime
    window: str  # 12h
    store: str


def _each_port(
    snap: Snapshot, th: Thresholds, judge: Callable[[_Past, Thresholds], Result]
) -> Iterator[Result]:
    """``judge``'s Result for each graded port; nothing when history is off, one SKIP when the
    store could not be used (``history.store`` says why)."""
    history = snap.history
    if history is None:
        return
    if history.problem is not None:
        yield Result(
            target="history",
            status=Status.SKIP,
            message=f"history store unusable: {history.problem} (see history.store)",
        )
        return
    now = snap.collected_at
    by_port = history.window(now, th.flap_window_s).by_port()
    keys = node_keys((dev.name, dev.node_guid) for dev in snap.devices)
    window = span(th.flap_window_s)
    for dev, port in graded_ports(snap, th):
        outages = by_port.get(PortKey(keys[dev.name], port.number), [])
        yield judge(_Past(dev.target(port), port, outages, now, window, history.store), th)


@check("history.store", title="The link-event history store is usable", needs={"history"})
def history_store(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: the history store (``--history``, default /var/lib/ibdiag/history.db) opened,
    took this run's sample and gave back the window.

    Why it matters: without it a port that flapped overnight and is ACTIVE now passes; the
    run still grades everything else. With history off (``--no-history``,
    ``IBDIAG_HISTORY=off``), this check and link.flaps and link.drop give no result.

    What to do: locked - another ibdiag held it past the wait (look for a stuck process);
    unwritable or full - fix the directory's permissions or free space; a corrupt file is
    moved aside and started afresh by itself (its past is lost: say so in the ticket).
    """
    history = snap.history
    if history is None:
        return  # off by choice (--no-history, IBDIAG_HISTORY=off), or a recording without it
    evidence = [history.store]
    if history.problem is not None and history.unavailable:
        yield Result(target="history", status=Status.SKIP, message=history.problem)
        return
    if history.problem is not None:
        yield Result(
            target="history",
            status=Status.WARN,
            message=history.problem,
            observed="unusable",
            hint="the run graded without the ports' past: fix the store (permissions, space, "
            "a stuck writer) or point --history elsewhere",
            evidence=evidence,
        )
        return
    for note in history.notes:
        yield Result(
            target="history",
            status=Status.WARN,
            message=note,
            observed="started afresh",
            hint="the ports' past before this run is lost; keep the moved file for the ticket",
            evidence=evidence,
        )
    if not history.notes:
        window = span((snap.collected_at - history.since).total_seconds()) if history.since else "?"
        yield Result(
            target="history",
            status=Status.PASS,
            message=f"{history.samples} samples and {len(history.outages)} outages "
            f"in the last {window}",
            evidence=evidence,
        )


def _counts_as_flap(outage: Outage, th: Thresholds, now: datetime) -> bool:
    """Back ACTIVE, and down long enough: an outage nobody saw the length of (one found by
    link_downed between two samples) counts only when any length counts. (An end after
    ``now`` is a clock stepped back since: the outage still happened.)"""
    if outage.end is None:
        return False
    down = outage.down_s(now)
    return th.flap_min_down_s <= 0 if down is None else down >= th.flap_min_down_s


@check("link.flaps", title="No port flapped within the window", needs={"sysfs", "history"})
def link_flaps(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: no port went down and came back within ``flap_window_s`` (12 h) of this run.

    Why it matters: a flapping cable is ACTIVE and clean most of the time - at the prolog,
    say - and hangs NCCL jobs when it drops. ``flap_fail_count`` (3) returns to ACTIVE fail,
    fewer warn. Each outage shorter than ``flap_min_down_s`` (0: none) is left out. Outages come
    from every run's and the monitor's samples (``ibdiag watch``), from link_downed rising
    between two samples, and from the kernel log's link down/up lines.

    What to do: reseat or replace the cable or transceiver and check the switch port's
    counters; once repaired, ``ibdiag history clear --port mlx5_0:1 --reason TEXT``.
    """
    yield from _each_port(snap, th, _flaps)


def _flaps(past: _Past, th: Thresholds) -> Result:
    flaps = [outage for outage in past.outages if _counts_as_flap(outage, th, past.now)]
    count = sum(outage.downs for outage in flaps)
    about = dict(target=past.target, observed=count, evidence=[past.store])
    expected = f"fewer than {th.flap_fail_count} in {past.window}"
    if not count:
        return Result(
            status=Status.PASS, message=f"no flap in {past.window}", expected=expected, **about
        )
    last = flaps[-1]
    down = last.down_s(past.now)
    how_long = f" after {span(down)} down" if down is not None else ""
    # the far end saw it: the finding is the cable's, named by both ends
    cable = cable_name(past.target, past.port.partner)
    far = any(outage.source == "far-end" for outage in flaps)
    on = f" on {cable}" if far and cable != past.target else ""
    return Result(
        status=Status.FAIL if count >= th.flap_fail_count else Status.WARN,
        message=f"{count} flap{'s' if count > 1 else ''}{on} in {past.window}: last back "
        f"ACTIVE at {_when(last.end)}{how_long} ({_sources(flaps)})",
        expected=expected,
        subject=f"{count} in {past.window}",
        hint="the link goes down and comes back: reseat or replace the cable/transceiver, "
        f"check the switch port; when repaired, {_CLEAR.format(target=past.target)}",
        **about,
    )


@check("link.drop", title="No port was down for long within the window", needs={"sysfs", "history"})
def link_drop(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: no port was down for ``drop_fail_s`` (4 min) or more within ``flap_window_s``
    (12 h) of this run, even if it is ACTIVE now.

    Why it matters: a drop that long kills the jobs that were using the port; a port that
    dropped once is likely to again (a failing transceiver, a switch reboot).

    What to do: find why (the switch's logs, the kernel log, the cable); once dealt with,
    ``ibdiag history clear --port mlx5_0:1 --reason TEXT``.
    """
    yield from _each_port(snap, th, _drops)


def _drops(past: _Past, th: Thresholds) -> Result:
    now = past.now
    drops = [o for o in past.outages if (o.down_s(now) or 0.0) >= th.drop_fail_s]
    expected = f"no outage of {span(th.drop_fail_s)} or more in {past.window}"
    about = dict(target=past.target, expected=expected, evidence=[past.store])
    if not drops:
        return Result(status=Status.PASS, message=f"no drop in {past.window}", **about)
    longest = max(drops, key=lambda outage: outage.down_s(now) or 0.0)
    down = span(longest.down_s(now) or 0.0)
    still = " (still down)" if longest.end is None else ""
    more = f", {len(drops)} drops in {past.window}" if len(drops) > 1 else ""
    return Result(
        status=Status.FAIL,
        message=f"down {down} from {_when(longest.start)} to {_when(longest.end)}{still}{more}",
        observed=down,
        subject=f"drop in {past.window}",
        hint="check the switch and the cable; when dealt with, "
        + _CLEAR.format(target=past.target),
        **about,
    )


def _sources(outages: List[Outage]) -> str:
    """Which readings saw them: "seen by samples, kernel log"."""
    names: Dict[str, str] = {
        "sample": "samples",
        "counter": "link_downed",
        "kernel-log": "kernel log",
        "far-end": "the far end's LinkDowned",
    }
    seen = sorted({names[outage.source] for outage in outages})
    return "seen by " + ", ".join(seen)
