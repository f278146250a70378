"""The far end of a port's cable: the switch port (or the other HCA of a back-to-back cable) an
ACTIVE InfiniBand port is plugged into, as read from this node (``ibdiag.sources.partner``).

``Port.partner`` holds one ``Partner`` per port the chain was run for (a check declaring the
source ``partner``, level standard); None when it was not collected. Healthy: the partner
answers (nodeinfo), its port is ``Active``/``LinkUp`` at the width and speed of ours, and its
error counters do not increase between two snapshots (graded by partner GUID and port, so a
re-cabled port starts afresh).

A value is read only from a run that exited 0; a step that failed, hung or never started leaves
its fields None, and ``Snapshot.run(role)`` says why (its ``failure()``: a later step whose
prerequisite failed is recorded as never started, naming the step that failed). ``roles``
lists every run of the port's chain, found or not, in chain order: the evidence.
"""

import re
from typing import Dict, List, Optional

from pydantic import Field

from ibdiag.facts._base import Fact
from ibdiag.facts.perfquery import PmaReading

_NAME_IN_DESCRIPTION = re.compile(r"^[^;]*;([^:;\s]+)[:;]")  # "MF0;leaf07:MQM9700/U1"
_UNSAFE = re.compile(r"[^\x21-\x7e]+")  # whitespace and anything unprintable
NAME_MAX = 64


class PortInfo(Fact):
    """One port's PortInfo as its subnet management agent reports it (``smpquery portinfo``).

    Widths are ``1X 2X 4X 8X 12X``, speeds ``SDR DDR QDR FDR EDR HDR NDR XDR`` (``Port.rate``
    names them the same way; FDR10 reads QDR here). ``speed_active`` is the highest speed
    field in use (the extended ones override the base one); ``*_enabled`` and ``*_supported``
    list every value the port enables / supports, slowest first. Values the tool printed that
    are none of these are left out, with a problem.
    """

    role: str  # the run it came from (ibdiag.roles.partner)
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
    problems: List[str] = Field(default_factory=list)


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
      "could be 4X" needs both ends);
    - ``counters``: the partner port's PortCounters, from ``perfquery -x`` when it printed the
      error counters (PortCountersExtended with the additional counters), else from plain
      ``perfquery`` (switches and HCAs without them, and when -x failed);
      ``rcv_error_details``: ``perfquery -E`` (PortRcvErrorDetails);
    - ``roles``: the runs of this port's chain (``ibdiag.roles.partner``), ``problems``: what
      the parsers could not make sense of, by step.
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
    roles: List[str] = Field(default_factory=list)
    problems: List[str] = Field(default_factory=list)

    @property
    def is_switch(self) -> bool:
        return self.node_type == "Switch"

    def error_counter_values(self) -> Dict[str, int]:
        """The far end's counters by the catalogue's names (``SymbolErrorCounter`` ->
        ``symbol_error``), the -x (or plain) reading with -E's details over it: graded and
        compared exactly like our own port's."""
        from ibdiag.catalogue import catalogue_name

        values = dict(self.counters.counters) if self.counters is not None else {}
        if self.rcv_error_details is not None:
            values.update(self.rcv_error_details.counters)
        return {catalogue_name(name): value for name, value in values.items()}


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
