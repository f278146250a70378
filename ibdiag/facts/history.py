"""A port's past: outages seen between runs, read from the history store (``ibdiag.history``).

Healthy: within the window the checks ask for (``flap_window_s``, twelve hours by default),
no port left ACTIVE - or, when one did, it came back quickly, once or twice. A port is known by
what survives a rename and a reboot, its HCA's node GUID and its port number (``PortKey``),
never by ``mlx5_N`` alone: ``mlx5_3`` that comes back as ``mlx5_5`` keeps its past.

Nothing here reads a clock: the window ends at the Snapshot's own time, so a replayed bundle
grades as it did on the day it was taken.
"""

from datetime import datetime, timedelta
from typing import Dict, Iterable, List, Literal, NamedTuple, Optional, Tuple

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field


class _Record(BaseModel):
    """Frozen and strict like a ``Fact``, but read from the history store, not parsed from a
    command's run: reinterpreting a recording's runs (``ibdiag.migrate``) keeps it."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


# Where an outage was seen:
# - "sample": two samples of the port's state (a run or the monitor) saw it leave and return;
# - "counter": link_downed rose between two ACTIVE samples - the outage fell between them;
# - "kernel-log": the kernel's link down / link up lines (dmesg, journalctl -k);
# - "far-end": the far end's LinkDownedCounter rose between two ACTIVE samples (the cable).
OutageSource = Literal["sample", "counter", "kernel-log", "far-end"]


class PortKey(NamedTuple):
    """A port as the history knows it: its HCA's node GUID (0x-prefixed, lower case) and number."""

    node_guid: str
    port: int

    def __str__(self) -> str:
        return f"{self.node_guid}/{self.port}"


def guid_key(node_guid: Optional[str], device: str) -> str:
    """How the store names an HCA: its node GUID as 0x and 16 lower-case hex digits (sysfs
    prints ``b859:9f03:00d7:a3bc``), which survives a rename and a reboot; ``name:<device>``
    when it has none worth the name (unreadable, or all zeros as on an unconfigured VF): a
    rename then starts a new past, nothing better being known."""
    digits = (node_guid or "").replace(":", "").strip().lower()
    if digits.startswith("0x"):
        digits = digits[2:]
    valid = len(digits) == 16 and all(c in "0123456789abcdef" for c in digits)
    return "0x" + digits if valid and digits.strip("0") else f"name:{device}"


def node_keys(devices: Iterable[Tuple[str, Optional[str]]]) -> Dict[str, str]:
    """``guid_key`` of each (name, node GUID), except that HCAs sharing one GUID (a copied
    test tree, a misprogrammed card) are each keyed by name: one port's past must never mix
    with another's."""
    keys = {name: guid_key(guid, name) for name, guid in devices}
    seen: Dict[str, int] = {}
    for key in keys.values():
        seen[key] = seen.get(key, 0) + 1
    return {name: key if seen[key] == 1 else f"name:{name}" for name, key in keys.items()}


class Outage(_Record):
    """One time a port was down: from ``start`` until ``end`` (None: still down when last seen).

    ``bounded``: the outage itself was not seen, only that it happened between two samples
    (``start`` and ``end`` are those samples). ``downs``: how many times the link went down in
    it (link_downed's rise; at least 1).
    """

    node_guid: str
    port: int
    device: str  # the HCA's name when the outage was seen (``mlx5_3``)
    start: AwareDatetime
    end: Optional[AwareDatetime] = None
    bounded: bool = False
    downs: int = Field(default=1, ge=1)
    source: OutageSource = "sample"
    boot_id: Optional[str] = None

    @property
    def key(self) -> PortKey:
        return PortKey(self.node_guid, self.port)

    def down_s(self, now: datetime) -> Optional[float]:
        """How long the port was down (until ``now`` when it still is); None for a bounded
        outage, whose length nobody saw."""
        if self.bounded:
            return None
        end = self.end if self.end is not None else now
        return max(0.0, (end - self.start).total_seconds())

    def overlaps(self, other: "Outage") -> bool:
        """Whether the two share a moment (one that starts as the other ends does not: a
        counter's rise right after a seen outage is another one)."""
        far = datetime.max.replace(tzinfo=self.start.tzinfo)
        return self.start < (other.end or far) and other.start < (self.end or far)


class Tombstone(_Record):
    """An operator's word that a port's past is dealt with (``ibdiag history clear``): outages
    that began before ``at`` no longer count."""

    node_guid: str
    port: int
    device: str
    at: AwareDatetime
    who: str
    reason: str


class LinkHistory(_Record):
    """What the store held for the window ``since`` .. the Snapshot's time, or why it could not
    be used (``problem``: locked, corrupt, unwritable; the run grades without it)."""

    store: str  # the store's path
    since: Optional[AwareDatetime] = None
    outages: List[Outage] = Field(default_factory=list)
    cleared: List[Tombstone] = Field(default_factory=list)
    samples: int = 0  # samples of this node's ports in the window
    recorded: bool = False  # this run's own sample went in
    omitted: int = 0  # older outages left out to keep the window bounded (the newest are kept)
    # Each port's link-down events since the store began ("<node guid>/<port>" -> count): an
    # outage seen by several readings counts once; only ever grows (a new store starts again)
    down_events: Dict[str, int] = Field(default_factory=dict)
    problem: Optional[str] = None
    # the default store this user may not write (not root): the problem is a skip, not a warning
    unavailable: bool = False
    notes: List[str] = Field(default_factory=list)  # e.g. a corrupt store moved aside

    def by_port(self) -> Dict[PortKey, List[Outage]]:
        """Each port's outages, oldest first, with those an operator cleared left out and the
        ones seen twice (by a sample and the kernel log, say) merged into one."""
        cleared: Dict[PortKey, datetime] = {}
        for stone in self.cleared:
            key = PortKey(stone.node_guid, stone.port)
            cleared[key] = max(stone.at, cleared.get(key, stone.at))
        ports: Dict[PortKey, List[Outage]] = {}
        for outage in sorted(self.outages, key=lambda o: o.start):
            after = cleared.get(outage.key)
            if after is not None and outage.start < after:
                continue
            ports.setdefault(outage.key, []).append(outage)
        return {key: merged(outages) for key, outages in ports.items()}

    def window(self, now: datetime, seconds: float) -> "LinkHistory":
        """Only the outages that touch the ``seconds`` before ``now``."""
        since = now - timedelta(seconds=seconds)
        kept = [o for o in self.outages if o.end is None or o.end >= since]
        return self.model_copy(update={"outages": [o for o in kept if o.start <= now]})


def merged(outages: List[Outage]) -> List[Outage]:
    """One port's outages (oldest first) with overlapping ones made one: the kernel log, a
    sample and link_downed often see the same outage. A seen outage wins over a bounded one."""
    result: List[Outage] = []
    for outage in outages:
        if result and result[-1].overlaps(outage):
            last = result[-1]
            seen = [o for o in (last, outage) if not o.bounded]
            keep = seen[0] if seen else last
            ends = [o.end for o in (last, outage)]
            end = None if None in ends else max(e for e in ends if e is not None)
            result[-1] = keep.model_copy(
                update={
                    "start": min(last.start, outage.start) if not seen else keep.start,
                    "end": end,
                    "downs": max(last.downs, outage.downs),
                }
            )
            continue
        result.append(outage)
    return result
