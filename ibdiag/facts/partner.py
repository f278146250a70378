"""The far end of a port's cable: the switch port (or the other HCA of a back-to-back cable) an
ACTIVE InfiniBand port is plugged into, as read from this node (``ibdiag.families.partner``).

``Port.partner`` holds one ``Partner`` per port the chain was run for (a check declaring the
source ``partner``, level standard); None when it was not collected. Healthy: the partner
answers (nodeinfo), its port is ``Active``/``LinkUp`` at the width and speed of ours, and its
error counters do not increase between two snapshots (graded by partner GUID and port, so a
re-cabled port starts afresh).

A value is read only from a run that exited 0; a step that failed, hung or never started leaves
its fields None, and ``Partner.unread`` says why (a later step whose prerequisite failed is
recorded as never started, naming the step that failed). ``roles`` lists every run of the
port's chain, found or not, in chain order, and ``runs`` what became of each (its command
line: the evidence a result names).
"""

import re
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from pydantic import Field

from ibdiag.facts._base import Fact
from ibdiag.facts.fec import PortFec
from ibdiag.facts.outcome import NoData, RunOutcome
from ibdiag.facts.perfquery import PmaReading
from ibdiag.roles import Role, RoleField

_NAME_IN_DESCRIPTION = re.compile(r"^[^;]*;([^:;\s]+)[:;]")  # "MF0;leaf07:MQM9700/U1"
_UNSAFE = re.compile(r"[^\x21-\x7e]+")  # whitespace and anything unprintable
NAME_MAX = 64


WIDTHS = ("1X", "2X", "4X", "8X", "12X")
SPEEDS = ("SDR", "DDR", "QDR", "FDR", "EDR", "HDR", "NDR", "XDR")
ACTIVE_STATE = ("Active", "LinkUp")  # a PortInfo's (LinkState, PhysLinkState) when up
# What PortRcvErrorDetails (perfquery -E) breaks down, by the IBA's definitions: local physical,
# malformed and buffer-overrun errors are counted in PortRcvErrors; DLID mapping, VL mapping
# and looping errors in PortRcvSwitchRelayErrors.
RCV_ERROR_TOTALS = ("PortRcvErrors", "PortRcvSwitchRelayErrors")
# In a PMA reading, it carries the error counters: a -x reading of a PMA without the additional
# PortCountersExtended fields (older switches, the ibsim simulator) holds data counters only.
ERROR_COUNTER = "SymbolErrorCounter"
# PortCountersExtended's error counters (perfquery -x) are 64 bits wide: they never saturate, and
# are counted apart from PortCounters' 16/32-bit ones (plain perfquery; cleared apart too).
EXTENDED_STEP = "perfquery-x"


class PortInfo(Fact):
    """One port's PortInfo as its subnet management agent reports it (``smpquery portinfo``).

    Widths are ``1X 2X 4X 8X 12X``, speeds ``SDR DDR QDR FDR EDR HDR NDR XDR`` (``Port.rate``
    names them the same way; FDR10 reads QDR here). ``speed_active`` is the highest speed
    field in use (the extended ones override the base one); ``*_enabled`` and ``*_supported``
    list every value the port enables / supports, slowest first. ``neighbor_mtu`` (PortInfo's
    NeighborMTU: the MTU the subnet manager set for the link, the same at both ends) and
    ``mtu_cap`` (MtuCap: the largest MTU the port supports) are in bytes, 256 to 4096.
    Values the tool printed that are none of these are left out, with a problem. Parsed
    straight from the text by ``ibdiag.families.partner.smpquery.parse_portinfo``.
    """

    role: Optional[RoleField] = None  # the run it came from (ibdiag.roles.partner)
    port: Optional[int] = None  # the port number queried (0: a switch's management port)
    lid: Optional[int] = None  # 0: no subnet manager has configured it (or a switch's ports)
    sm_lid: Optional[int] = None
    link_state: Optional[str] = None  # "Active", "Armed", "Initialize", "Down"
    phys_link_state: Optional[str] = None  # "LinkUp", "Polling", "Disabled", ...
    width_active: Optional[str] = None  # "4X"
    width_enabled: List[str] = Field(default_factory=list)
    width_supported: List[str] = Field(default_factory=list)
    speed_active: Optional[str] = None  # "HDR"
    speed_enabled: List[str] = Field(default_factory=list)
    speed_supported: List[str] = Field(default_factory=list)
    capabilities: List[str] = Field(default_factory=list)  # under CapMask/CapabilityMask2: IsSM..
    # bytes (256..4096): the MTU the SM set for the link (both ends alike), and the largest
    # this port supports
    neighbor_mtu: Optional[int] = None
    mtu_cap: Optional[int] = None
    problems: List[str] = Field(default_factory=list)
    mad_error: Optional[str] = None  # what the tool said when the query failed


# The steps that ask the far end's subnet management agent (link.partner judges what they did),
# and those that ask its PMA (counters.partner).
SMP_STEPS = ("nodeinfo", "nodedesc", "portinfo", "portinfo0", "local-portinfo")
PMA_STEPS = ("perfquery-x", "perfquery", "perfquery-E")
# Unread.kind of a step never started: its reason names the step it needed.
NEVER_RUN = "never-run"
IMPLAUSIBLE = "implausible"


class Unread(Fact):
    """Why one step of a port's chain gave nothing usable, judged once where its run is
    interpreted (``ibdiag.families.partner.unread``), so a check reads this and never the
    tool's text.

    ``kind`` is a stable word: ``not-installed``, ``no-access`` (the umad device may not be
    opened: not root?), ``no-umad`` (no umad device here: ib_umad not loaded, a container),
    ``no-sm`` (LID 0), ``virtual-function`` (a VF cannot reach the far end), ``never-run``,
    ``unread`` (any other failure) - all not possible from here: ``symptom`` False, a skip; and
    the symptoms, a warn: ``no-answer`` (the far end of an ACTIVE port on a PF did not answer),
    ``no-pma`` (it answered SMPs, not the PMA queries every port must answer), ``timed-out``/
    ``killed-by-SIG...``/``cannot-execute`` (the tool was killed at the command timeout, though
    its MAD timeout lets it give up by itself in seconds: a local hang), ``implausible`` (the
    far end answered what cannot be: ``ibdiag.facts.partner_ranges``).

    ``no_data`` is the same judgement as the typed word every family's ``RunOutcome`` uses
    (``ibdiag.facts.outcome.NoData``): ``kind`` keeps the far end's own words (what results
    show as ``observed``); None in a report written before it was recorded.
    """

    step: str  # roles.PARTNER_STEPS
    kind: str
    no_data: Optional[NoData] = None
    symptom: bool = False
    reason: str  # one line: what happened and what it means
    command: str = ""  # the command line, as evidence ("" when none was planned)


class Partner(Fact):
    """What is at the far end of one local port's cable, and how its end of the cable is doing.

    - who: ``node_type`` ("Switch", "Channel Adapter", "Router" as smpquery prints it),
      ``node_guid`` / ``port_guid`` / ``system_guid`` (``0x`` and 16 lower-case hex digits),
      ``num_ports``, ``description`` (its node description, e.g. ``MF0;leaf07:MQM9700/U1``);
    - where: ``port``, the partner's port number the cable is in (nodeinfo's LocalPort), and
      ``lid``, where its PMA answers: a switch's LID is its port 0's, a CA's its own port's
      (0: no subnet manager yet - no counters can be read);
    - ``port_info``: the partner port's PortInfo; ``local_port_info``: our own port's, as our
      SMA reports it (the widths and speeds it enables and supports, which sysfs does not show:
      "could be 4X" needs both ends). Read only when ``local_port_info_matters`` (None too when
      it was not needed: the partner enables and supports nothing beyond what the link runs
      at, so no "could be" is possible, and sysfs gave our width and speed);
    - ``counters``: the partner port's PortCounters, from ``perfquery -x`` when it printed the
      error counters (PortCountersExtended with the additional counters), else from plain
      ``perfquery`` (switches and HCAs without them, and when -x failed);
      ``rcv_error_details``: ``perfquery -E`` (PortRcvErrorDetails), read only when
      ``rcv_error_details_matter`` (None too when PortRcvErrors and PortRcvSwitchRelayErrors
      were both 0: the details break those two down, so they were all 0);
    - ``fec``: the partner port's FEC counters per lane (``perfquery -T``,
      PortExtendedSpeedsCounters; ``ibdiag.facts.fec.PortFec``), with what became of the run
      (``fec.outcome``: ``not-supported`` where its PMA does not implement them). Its failure is
      never in ``unread``: the attribute is optional, so a far end without it is no symptom;
    - ``roles``: the runs of this port's chain (``ibdiag.roles.partner``), ``runs``: what
      became of each, by step (``RunOutcome``: its command line is a result's evidence),
      ``problems``: what the parsers could not make sense of, by step;
    - ``unread``: why each step that gave nothing usable did not (``Unread``), in chain order.
      A far end whose answer is implausible (``ibdiag.facts.partner_ranges``) keeps what names
      it, but none of what would be graded (``port_info``, ``local_port_info``, ``counters``,
      ``rcv_error_details``, ``fec`` stay None): nonsense is never a graded cable.
    """

    node_type: Optional[str] = None
    node_guid: Optional[str] = None
    port_guid: Optional[str] = None
    system_guid: Optional[str] = None
    num_ports: Optional[int] = None
    description: Optional[str] = None
    port: Optional[int] = None
    lid: Optional[int] = None
    port_info: Optional[PortInfo] = None
    local_port_info: Optional[PortInfo] = None
    counters: Optional[PmaReading] = None
    rcv_error_details: Optional[PmaReading] = None
    fec: Optional[PortFec] = None
    roles: List[RoleField] = Field(default_factory=list)
    runs: Dict[str, RunOutcome] = Field(default_factory=dict)  # by step
    problems: List[str] = Field(default_factory=list)
    unread: List[Unread] = Field(default_factory=list)

    def first_unread(self, steps: Sequence[str]) -> Optional[Unread]:
        """What stopped ``steps``: the first of them (in chain order) that ran and gave nothing
        usable; else the first never started (its reason names the step it needed)."""
        found = [why for why in self.unread if why.step in steps]
        ran = [why for why in found if why.kind != NEVER_RUN]
        first = ran or found
        return first[0] if first else None

    def symptoms(self, steps: Sequence[str]) -> List[Unread]:
        """The ``unread`` of ``steps`` that are findings (a warn), in chain order."""
        return [why for why in self.unread if why.step in steps and why.symptom]

    def evidence(self, role: Optional[Role]) -> str:
        """What a result about the run of ``role`` names: its command line as it ran; the role
        itself when no run of it was recorded (a hand-built or older far end)."""
        outcome = self.runs.get(role.step) if role is not None else None
        return outcome.command if outcome is not None else str(role)

    @property
    def is_switch(self) -> bool:
        return self.node_type == "Switch"

    @property
    def has_error_counters(self) -> bool:
        """Whether ``counters`` carries the error counters (not just data counters)."""
        return self.counters is not None and ERROR_COUNTER in self.counters.counters

    @property
    def counters_extended(self) -> bool:
        """Whether ``counters`` came from ``perfquery -x`` (64-bit PortCountersExtended) rather
        than plain perfquery (16/32-bit PortCounters): the two are not compared."""
        from ibdiag.roles import partner_step

        return self.counters is not None and partner_step(self.counters.role) == EXTENDED_STEP

    def error_counter_values(self) -> Dict[str, int]:
        """The far end's counters by the catalogue's names (``SymbolErrorCounter`` ->
        ``symbol_error``), the -x (or plain) reading with -E's details over it: graded and
        compared exactly like our own port's."""
        from ibdiag.counters.catalogue import catalogue_name

        values = dict(self.counters.counters) if self.counters is not None else {}
        if self.rcv_error_details is not None:
            values.update(self.rcv_error_details.counters)
        return {catalogue_name(name): value for name, value in values.items()}

    def counts_like(self, other: "Partner") -> bool:
        """Whether ``other``'s counters are the same counters as these, so a change between
        the two means something: both read by perfquery -x, or both by plain perfquery."""
        return self.counters_extended == other.counters_extended

    def fixed_width_counter_values(self) -> Dict[str, int]:
        """``error_counter_values`` less what came from ``perfquery -x``: the counters that
        can saturate at their catalogued width (plain perfquery's, -E's); -x's are 64-bit."""
        from ibdiag.counters.catalogue import catalogue_name

        values = {} if self.counters_extended or self.counters is None else self.counters.counters
        details = self.rcv_error_details.counters if self.rcv_error_details is not None else {}
        return {catalogue_name(name): value for name, value in {**values, **details}.items()}


def short_name(partner: Partner) -> str:
    """How results, drain reasons and metric labels name the far end: ``leaf07`` from
    ``MF0;leaf07:MQM9700/U1``; else the description (whitespace and anything unprintable as
    ``_``, at most 64 characters); else the node GUID; else ``?``."""
    description = (partner.description or "").strip()
    match = _NAME_IN_DESCRIPTION.match(description)
    name = match.group(1) if match else description
    name = _UNSAFE.sub("_", name).strip("_")[:NAME_MAX]
    return name or partner.node_guid or "?"


CABLE = "<->"  # a cable named by both ends: mlx5_3:1<->leaf07/21


def cable_name(local: str, partner: Optional[Partner]) -> str:
    """How results name a port's cable: ``mlx5_3:1<->leaf07/21`` (our port ``local``, the far
    end's ``short_name`` and port number, ``?`` when that was not read); just ``local`` while
    nothing names the far end (no node GUID, no description)."""
    if partner is None or (partner.node_guid is None and partner.description is None):
        return local
    far_port = partner.port if partner.port is not None else "?"
    return f"{local}{CABLE}{short_name(partner)}/{far_port}"


def link_speed(name: Optional[str]) -> Optional[str]:
    """A speed as PortInfo names it: sysfs's FDR10 is QDR there; "HDR100"-style -> HDR."""
    if not name:
        return None
    if name.upper().startswith("FDR10"):
        return "QDR"
    for speed in SPEEDS:
        if name.upper().startswith(speed):
            return speed
    return None


def _above(order: Sequence[str], active: Optional[str], lists: Iterable[List[str]]) -> bool:
    """Whether some value faster/wider than ``active`` is in every non-empty list (all of
    ``order`` when every list is empty: nothing rules it out)."""
    if active not in order:
        return False
    wanted = set(order[order.index(active) + 1 :])
    for values in lists:
        if values:
            wanted &= set(values)
    return bool(wanted)


def local_port_info_matters(
    info: Optional[PortInfo], width: Optional[str], speed: Optional[str]
) -> bool:
    """Whether ``link.partner`` could use our own port's PortInfo (``local-portinfo``), given
    the partner port's PortInfo ``info`` and our width and speed from sysfs (None: unknown).

    It is used only where the check reaches it: the partner's port read (``info``), Active/
    LinkUp, its width and speed known and the same as ours - then to fill our width or speed
    when sysfs did not give them, and for "could be": the best width (speed) both ends enable
    and support is above the one the link runs at. That best value is in every non-empty
    enabled/supported list of the partner's, so when none of theirs goes above what runs, no
    "could be" is possible whatever ours says, and the check's verdict is the same without it.

    And for ``link.mtu``, when the partner's port runs below what it can (``mtu_below_cap``):
    only our own MtuCap says whether our end caps the link. A healthy link (NeighborMTU equal
    to the far end's MtuCap) costs no run: ``ibv_devinfo``'s active_mtu gives ours.
    """
    if info is None or (info.link_state, info.phys_link_state) != ACTIVE_STATE:
        return False
    if mtu_below_cap(info):
        return True
    if info.width_active is None or info.speed_active is None:
        return False  # nothing of theirs to compare: the check skips
    if width is None or speed is None:
        return True
    if (info.width_active or width) != width or (info.speed_active or speed) != speed:
        return False  # a mismatch fails before "could be"
    return _above(WIDTHS, width, (info.width_enabled, info.width_supported)) or _above(
        SPEEDS, speed, (info.speed_enabled, info.speed_supported)
    )


def mtu_below_cap(info: Optional[PortInfo]) -> bool:
    """Whether the link's MTU as the partner's PortInfo ``info`` shows it (NeighborMTU) is
    below the largest the partner's port supports (MtuCap): our end, or the subnet manager,
    holds the link below what the switch port can do."""
    if info is None or info.neighbor_mtu is None or info.mtu_cap is None:
        return False
    return info.neighbor_mtu < info.mtu_cap


def our_width_speed(rate) -> Tuple[Optional[str], Optional[str]]:
    """(width, speed) of our port's sysfs ``rate`` (a ``LinkRate``; None: unknown), as PortInfo
    names them."""
    if rate is None:
        return None, None
    return rate.width, link_speed(rate.speed)


def rcv_error_details_matter(counters: Dict[str, int]) -> bool:
    """Whether ``perfquery -E`` (PortRcvErrorDetails) could read anything but zeros, given the
    far end's PortCounters (perfquery names): only when PortRcvErrors or
    PortRcvSwitchRelayErrors is not 0, or not known. The details break those two totals down;
    both 0 means every detail is 0 (counters cleared apart - ``perfquery -R -E`` - aside: even
    then a detail cannot grow without its total growing, when -E is read again)."""
    return any(counters.get(name) != 0 for name in RCV_ERROR_TOTALS)
