"""Counter change since a baseline: deltas, rates per hour, and restarts. Pure functions.

Lifetime counters say little (3 symbol errors in 90 days is fine); what matters is change since
a baseline Snapshot (the prolog's, the previous run's state file, or ``ibdiag snapshot``).

A counter restarted from zero when the node rebooted (the boot id changed) or when its value
went down (driver reload, someone ran ``perfquery -r``, or a narrow counter wrapped): its
delta is then counted from zero, and the result says so. A delta is never negative.

Devices are matched by name and, where both snapshots know it, node GUID: a baseline from
another host (or with a swapped HCA) matches nothing there and is graded on lifetime values.
"""

from __future__ import annotations

import math
from typing import Dict, List, NamedTuple, Optional, Tuple

from ibdiag.facts.partner import Partner
from ibdiag.model import Device, Port, Snapshot

MIN_RATE_WINDOW_HOURS = 1.0  # rates over shorter intervals are judged as if over one hour
LOCAL_RESET_CAUSE = "reset by a driver reload or perfquery -r"  # why our own counter went down


class Change(NamedTuple):
    """One counter now versus at the baseline."""

    name: str
    value: int
    previous: Optional[int] = None  # None: the baseline has no value for it
    delta: Optional[int] = None  # None without a baseline value; never negative
    restarted: Optional[str] = None  # why the counter restarted from zero, if it did
    per_hour: Optional[float] = None  # None when the interval is unknown or not positive
    hours: Optional[float] = None  # the interval since the baseline

    @property
    def judged_per_hour(self) -> Optional[float]:
        """The rate a limit is compared with: over at least one hour.

        A burst of 2 errors in a 10-second prolog-to-epilog job is not "720 per hour": over a
        short interval the count itself must exceed one hour's allowance.
        """
        if self.delta is None or self.hours is None or self.hours <= 0:
            return None

        return self.delta / max(self.hours, MIN_RATE_WINDOW_HOURS)


def change(
    name: str,
    value: int,
    previous: Optional[int],
    hours: Optional[float],
    rebooted: bool,
    reset_cause: str = LOCAL_RESET_CAUSE,
) -> Change:
    if previous is None:
        return Change(name, value)
    if rebooted:
        delta, restarted = value, "the node rebooted since the baseline"
    elif value < previous:
        delta = value
        restarted = f"went down from {previous} to {value} ({reset_cause})"
    else:
        delta, restarted = value - previous, None
    per_hour = delta / hours if hours is not None and hours > 0 else None
    if per_hour is not None and not math.isfinite(per_hour):
        per_hour = None  # an interval too small to mean anything
    return Change(name, value, previous, delta, restarted, per_hour, hours)


def _same_device(now: Device, then: Device, strict: bool) -> bool:
    """Same name and, where known, same GUID; ``strict`` (another host): the GUID must match."""
    if now.name != then.name:
        return False
    if now.node_guid is None or then.node_guid is None:
        return not strict
    return now.node_guid == then.node_guid


class Comparison(NamedTuple):
    """A Snapshot against its baseline: what matched, the interval, and whether it rebooted."""

    baseline: Snapshot
    hours: Optional[float]  # None when the baseline is not older than the snapshot
    rebooted: bool
    other_host: bool
    ports: Dict[Tuple[str, int], Port]  # matched baseline ports by (device name, port number)
    devices: Dict[str, Device]  # matched baseline devices by name
    unmatched: List[str]  # targets of the snapshot with no counterpart in the baseline
    reset_cause: str = LOCAL_RESET_CAUSE  # what a counter that went down says happened

    def previous_port(self, device: Device, port: Port) -> Optional[Port]:
        return self.ports.get((device.name, port.number))

    def previous_device(self, device: Device) -> Optional[Device]:
        return self.devices.get(device.name)

    def changes(self, values: Dict[str, int], previous: Optional[Dict[str, int]]) -> List[Change]:
        """A Change per counter in ``values``; without a matched baseline, lifetime only."""
        return [
            change(
                name,
                value,
                previous.get(name) if previous is not None else None,
                self.hours,
                self.rebooted,
                self.reset_cause,
            )
            for name, value in values.items()
        ]


def compare(snapshot: Snapshot, baseline: Snapshot) -> Comparison:
    seconds = (snapshot.collected_at - baseline.collected_at).total_seconds()
    rebooted = bool(snapshot.boot_id and baseline.boot_id and snapshot.boot_id != baseline.boot_id)
    other_host = bool(snapshot.host and baseline.host and snapshot.host != baseline.host)
    by_name = {dev.name: dev for dev in baseline.devices}
    devices: Dict[str, Device] = {}
    ports: Dict[Tuple[str, int], Port] = {}
    unmatched: List[str] = []
    for dev in snapshot.devices:
        then = by_name.get(dev.name)
        if then is None or not _same_device(dev, then, strict=other_host):
            unmatched.append(dev.name)
            continue
        devices[dev.name] = then
        then_ports = {port.number: port for port in then.ports}
        for port in dev.ports:
            if port.number in then_ports:
                ports[(dev.name, port.number)] = then_ports[port.number]
            else:
                unmatched.append(dev.target(port))
    return Comparison(
        baseline=baseline,
        hours=seconds / 3600 if seconds > 0 else None,
        rebooted=rebooted,
        other_host=other_host,
        ports=ports,
        devices=devices,
        unmatched=unmatched,
    )


def previous_partner(baseline: Snapshot, partner: Partner) -> Optional[Partner]:
    """The baseline's reading of the same far-end port's error counters (same node GUID and
    port number), on whichever of our ports it was; None when the baseline had none
    (re-cabled, new, or its reading held no error counters)."""
    if partner.node_guid is None or partner.port is None:
        return None
    for dev in baseline.devices:
        for port in dev.ports:
            then = port.partner
            if (
                then is not None
                and then.counters is not None
                and then.has_error_counters
                and not then.counters.mad_error
                and then.node_guid == partner.node_guid
                and then.port == partner.port
            ):
                return then
    return None


def read_far_ends(baseline: Snapshot) -> bool:
    """Whether ``baseline`` read any far end's error counters at all (a level quick snapshot,
    or one taken as a user who may not open the umad device, read none)."""
    return any(
        port.partner is not None and port.partner.has_error_counters
        for dev in baseline.devices
        for port in dev.ports
    )
