"""What two samples of one port mean: the port's timeline, step by step.

A sample is one reading of a port's cheap sysfs files (state, phys_state, rate, link_downed,
link_error_recovery, symbol_error) at a time, by a run or the monitor. Between the previous
sample and this one:

- the port left ACTIVE: an outage opens (its start is this sample);
- it came back to ACTIVE: the open outage ends here;
- it was ACTIVE both times but ``link_downed`` rose: the link went down and came back between
  the two, unseen - a *bounded* outage from one sample to the other, ``downs`` = the rise;
- the boot id changed: counters started again from zero, so no rise is read (a reboot is not a
  flap); an outage still open is closed where the port is seen ACTIVE again;
- the far end's ``LinkDownedCounter`` rose between two ACTIVE samples of one boot: the cable
  went down unseen, counted at the switch's end (source ``far-end``; a rise across our reboot is
  the reboot's own link down, not a flap);
- ``link_downed`` fell on the same boot (``perfquery -r``, a driver reload): the new value is the
  new reference, nothing more.

An outage opens only when the port was seen ACTIVE before on the same boot: a port found down
by the first sample after a reboot (INIT or Polling until the subnet manager brings it up) or by
the first sample ever is no flap (link.state grades it as it is).

Healthy: ACTIVE every time, ``link_downed`` unchanged.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple, Optional

from ibdiag.facts.history import Outage, OutageSource, PortKey

ACTIVE = 4


# The fields a sample takes from the far end (a run at level standard reads them; the monitor
# does not, and the store carries the last ones read over its samples).
FAR_FIELDS = ("far_link_downed", "far_link_error_recovery", "far_symbol_error", "far_end")


class PortSample(NamedTuple):
    """One reading of one port (what the store keeps as the port's last sample)."""

    node_guid: str
    port: int
    device: str
    at: datetime
    boot_id: Optional[str] = None
    state: Optional[int] = None
    phys_state: Optional[int] = None
    rate_gbps: Optional[float] = None
    width: Optional[str] = None
    link_downed: Optional[int] = None
    link_error_recovery: Optional[int] = None
    symbol_error: Optional[int] = None
    source: str = "check"
    # The far end's counters (the switch port's, read over the cable at level standard): the
    # other end of the same cable, which our reboot does not reset. LinkDownedCounter makes
    # outages; the error counters are recorded for the timeline (``ibdiag history``).
    far_link_downed: Optional[int] = None
    far_link_error_recovery: Optional[int] = None
    far_symbol_error: Optional[int] = None
    far_end: Optional[str] = None  # which far-end port answered: "<its node GUID>/<its port>"

    @property
    def key(self) -> PortKey:
        return PortKey(self.node_guid, self.port)

    @property
    def is_down(self) -> Optional[bool]:
        """Whether the port is not ACTIVE; None when its state could not be read."""
        return None if self.state is None else self.state != ACTIVE

    def differs(self, other: PortSample) -> bool:
        """Whether anything but the time and the reader differ (a sample worth logging)."""
        same = ("at", "source")
        return any(
            getattr(self, name) != getattr(other, name) for name in self._fields if name not in same
        )


class Step(NamedTuple):
    """What ``step`` found: an outage to open, whether the open one ends, an unseen one."""

    opened: Optional[Outage] = None
    closes: bool = False
    unseen: Optional[Outage] = None
    far: Optional[Outage] = None  # the far end's LinkDowned rose: the cable went down unseen


def step(previous: Optional[PortSample], sample: PortSample, open_outage: bool) -> Step:
    """What ``sample`` means after ``previous`` (None: the port's first sample), given whether
    an outage of the port is open in the store."""
    down = sample.is_down
    if down is None:
        return Step()  # unreadable: nothing can be said, the outage (if any) stays open
    same_boot = previous is not None and previous.boot_id == sample.boot_id
    if down:
        # only a port seen ACTIVE on this boot can go down: the first sample after a reboot
        # finds it INIT or Polling until the subnet manager brings it up, which is no flap
        if open_outage or not same_boot or previous is None or previous.is_down is not False:
            return Step()
        return Step(opened=_outage(sample, sample.at, None, bounded=False, downs=1))
    if open_outage:
        return Step(closes=True)
    # an unreadable previous state still has a counter to compare; a down one had its outage
    if previous is None or previous.boot_id != sample.boot_id or previous.is_down:
        return Step()
    # a clock stepped back still gives an outage that ends after it starts
    early, late = sorted((previous.at, sample.at))
    rise = _rise(previous.link_downed, sample.link_downed)
    # the far end's counter means something only while the same far-end port answers (a cable
    # moved to another switch port has that port's count)
    same_far = sample.far_end is not None and previous.far_end == sample.far_end
    far_rise = _rise(previous.far_link_downed, sample.far_link_downed) if same_far else 0
    return Step(
        unseen=_outage(sample, early, late, bounded=True, downs=rise) if rise else None,
        far=_outage(sample, early, late, bounded=True, downs=far_rise, source="far-end")
        if far_rise
        else None,
    )


def _rise(before: Optional[int], now: Optional[int]) -> int:
    """How much a counter rose; 0 when unknown or when it fell (a reset is not an event)."""
    if before is None or now is None or now <= before:
        return 0
    return now - before


def _outage(
    sample: PortSample,
    start: datetime,
    end: Optional[datetime],
    *,
    bounded: bool,
    downs: int,
    source: Optional[OutageSource] = None,
) -> Outage:
    return Outage(
        node_guid=sample.node_guid,
        port=sample.port,
        device=sample.device,
        start=start,
        end=end,
        bounded=bounded,
        downs=downs,
        source=source or ("counter" if bounded else "sample"),
        boot_id=sample.boot_id,
    )
