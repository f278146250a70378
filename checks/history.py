"""Between runs: ports that flapped or dropped within a window, and the history store itself.

The window (``flap_window_s``, 12 hours by default) ends at the Snapshot's own time, never the
clock: a replayed bundle grades as it did on the day. A finding stays for its window even when
the port is ACTIVE and clean now, across restarts and reboots, until an operator's
``ibdiag history clear`` (a recorded tombstone) ends it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Dict, Iterator, List, Optional, Tuple

from ibdiag.durations import span
from ibdiag.facts.history import LinkHistory, Outage, PortKey, node_keys
from ibdiag.facts.partner import cable_name
from ibdiag.model import Device, Port, Result, Snapshot, Status
from ibdiag.registry import check
from ibdiag.targets import graded_ports
from ibdiag.thresholds import Thresholds

_OFF = (
    "history is off (--no-history, or IBDIAG_HISTORY=off): what happened between runs is not seen"
)
_CLEAR = "ibdiag history clear --port {target} --reason TEXT"


def _when(moment: Optional[datetime]) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%SZ") if moment is not None else "now"


def _windowed(
    snap: Snapshot, th: Thresholds
) -> Iterator[Tuple[Device, Port, List[Outage], LinkHistory]]:
    """Each graded port with its outages in the window (cleared ones left out, the same
    outage seen twice merged), when the history was read."""
    history = snap.history
    if history is None or history.problem is not None:
        return
    window = history.window(snap.collected_at, th.flap_window_s)
    by_port = window.by_port()
    keys = node_keys((dev.name, dev.node_guid) for dev in snap.devices)
    for dev, port in graded_ports(snap, th):
        key = PortKey(keys[dev.name], port.number)
        yield dev, port, by_port.get(key, []), window


def _unread(snap: Snapshot) -> Optional[Result]:
    """The one SKIP when the store could not be used (off: ``_windowed`` gives nothing)."""
    history = snap.history
    if history is not None and history.problem is not None:
        return Result(
            target="history",
            status=Status.SKIP,
            message=f"history store unusable: {history.problem} (see history.store)",
        )
    return None


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
    unread = _unread(snap)
    if unread is not None:
        yield unread
        return
    now = snap.collected_at
    window = span(th.flap_window_s)
    for dev, port, outages, history in _windowed(snap, th):
        target = dev.target(port)
        flaps = [outage for outage in outages if _counts_as_flap(outage, th, now)]
        count = sum(outage.downs for outage in flaps)
        expected = f"fewer than {th.flap_fail_count} in {window}"
        if not count:
            yield Result(
                target=target,
                status=Status.PASS,
                message=f"no flap in {window}",
                observed=0,
                expected=expected,
                evidence=[history.store],
            )
            continue
        last = flaps[-1]
        down = last.down_s(now)
        how_long = f" after {span(down)} down" if down is not None else ""
        # the far end saw it: the finding is the cable's, named by both ends
        cable = cable_name(target, port.partner)
        on = f" on {cable}" if cable != target and any(o.source == "far-end" for o in flaps) else ""
        yield Result(
            target=target,
            status=Status.FAIL if count >= th.flap_fail_count else Status.WARN,
            message=f"{count} flap{'s' if count > 1 else ''}{on} in {window}: last back "
            f"ACTIVE at {_when(last.end)}{how_long} ({_sources(flaps)})",
            observed=count,
            expected=expected,
            subject=f"{count} in {window}",
            hint="the link goes down and comes back: reseat or replace the cable/transceiver, "
            f"check the switch port; when repaired, {_CLEAR.format(target=target)}",
            evidence=[history.store],
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
    unread = _unread(snap)
    if unread is not None:
        yield unread
        return
    now = snap.collected_at
    window = span(th.flap_window_s)
    for dev, port, outages, history in _windowed(snap, th):
        target = dev.target(port)
        drops = [o for o in outages if (o.down_s(now) or 0.0) >= th.drop_fail_s]
        expected = f"no outage of {span(th.drop_fail_s)} or more in {window}"
        if not drops:
            yield Result(
                target=target,
                status=Status.PASS,
                message=f"no drop in {window}",
                expected=expected,
                evidence=[history.store],
            )
            continue
        longest = max(drops, key=lambda outage: outage.down_s(now) or 0.0)
        down = span(longest.down_s(now) or 0.0)
        still = " (still down)" if longest.end is None else ""
        yield Result(
            target=target,
            status=Status.FAIL,
            message=f"down {down} from {_when(longest.start)} to {_when(longest.end)}{still}"
            + (f", {len(drops)} drops in {window}" if len(drops) > 1 else ""),
            observed=down,
            expected=expected,
            subject=f"drop in {window}",
            hint=f"check the switch and the cable; when dealt with, {_CLEAR.format(target=target)}",
            evidence=[history.store],
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
