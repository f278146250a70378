"""The far end of a cable in Prometheus terms: label values, state numbers, lanes, rate and
counter-family stems for ``Port.partner`` (``ibdiag.facts.partner``), used by
``ibdiag.render.prometheus`` (its module docstring documents the ``ibdiag_partner_*``
families).

Healthy far end, as these numbers say it: ``ibdiag_partner_port_state`` 4 (Active),
``ibdiag_partner_phys_state`` 5 (LinkUp), the same lanes and rate as our own port's
``ibdiag_port_rate_bytes_per_second``, and error counters that do not move.

Pure functions of the typed facts: no I/O, nothing decided.
"""

from __future__ import annotations

import re
from typing import Dict, Optional, Tuple

from ibdiag.counters.catalogue import catalogue_name
from ibdiag.facts.partner import Partner, short_name
from ibdiag.render.inert import inert

# PortInfo's LinkState and PhysLinkState as libibmad prints them (mad_dump_linkstate,
# mad_dump_physportstate), with their IB specification numbers: the numbers sysfs gives our
# own port (ibdiag_port_state, ibdiag_port_phys_state).
LINK_STATES: Dict[str, int] = {
    "NoChange": 0,
    "Down": 1,
    "Initialize": 2,
    "Armed": 3,
    "Active": 4,
}
PHYS_STATES: Dict[str, int] = {
    "NoChange": 0,
    "Sleep": 1,
    "Polling": 2,
    "Disabled": 3,
    "PortConfigurationTraining": 4,
    "LinkUp": 5,
    "LinkErrorRecovery": 6,
    "PhyTest": 7,
}
# Data rate per lane in Gb/s, as the kernel's sysfs ``rate`` counts it (4X HDR = 200 Gb/sec,
# 4X FDR = 56): so the far end's rate compares with ibdiag_port_rate_bytes_per_second.
LANE_GBPS: Dict[str, float] = {
    "SDR": 2.5,
    "DDR": 5.0,
    "QDR": 10.0,
    "FDR": 14.0,
    "EDR": 25.0,
    "HDR": 50.0,
    "NDR": 100.0,
    "XDR": 200.0,
}
_WIDTH = re.compile(r"([1-9][0-9]?)X")
# CamelCase word boundaries: "PortDLIDMappingErrors" -> Port_DLID_Mapping_Errors.
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")

Labels = Tuple[Tuple[str, str], ...]


def known(partner: Partner) -> bool:
    """Whether anything names the far end (its node GUID or description): a chain that failed
    before that (no nodeinfo, no nodedesc) gives no samples, as it gives no cable name."""
    return partner.node_guid is not None or partner.description is not None


def peer_labels(partner: Partner) -> Labels:
    """``peer_guid`` (its node GUID), ``peer_name`` (``short_name``: ``leaf07``), ``peer_port``
    (its port number); "" for what was not read."""
    return (
        ("peer_guid", partner.node_guid or ""),
        ("peer_name", short_name(partner)),
        ("peer_port", "" if partner.port is None else str(partner.port)),
    )


def info_labels(partner: Partner) -> Labels:
    """``peer_type`` (``Switch``, ``Channel Adapter``) and ``peer_description`` (the node
    description as read): text the far end chose, so made inert as the text renderers make it
    (``ibdiag.render.inert``: controls, NUL, C1 and bidi characters shown as ``\\xNN`` /
    ``\\uNNNN``, never obeyed by a terminal showing ``curl /metrics``), then escaped by the
    renderer as every label value is."""
    return (
        ("peer_type", inert(partner.node_type or "")),
        ("peer_description", inert(partner.description or "")),
    )


def link_state(word: Optional[str]) -> Optional[int]:
    return LINK_STATES.get(word) if word is not None else None


def phys_state(word: Optional[str]) -> Optional[int]:
    return PHYS_STATES.get(word) if word is not None else None


def lanes(width: Optional[str]) -> Optional[int]:
    """``4X`` -> 4; None for anything else."""
    match = _WIDTH.fullmatch(width or "")
    return int(match.group(1)) if match else None


def rate_bytes_per_second(width: Optional[str], speed: Optional[str]) -> Optional[float]:
    """Lanes x the speed's per-lane data rate, in bytes per second (Gb/s x 1e9 / 8)."""
    count = lanes(width)
    per_lane = LANE_GBPS.get(speed or "")
    if count is None or per_lane is None:
        return None
    return count * per_lane * 1e9 / 8


def counter_stem(name: str) -> Tuple[str, str]:
    """(catalogue name, family stem) of a counter as perfquery names it: the catalogue's name
    (``SymbolErrorCounter`` -> ``symbol_error``, ``PortRcvErrors`` -> ``port_rcv_errors``), in
    snake case (``PortLocalPhysicalErrors`` -> ``port_local_physical_errors``), lower-cased,
    with a leading ``port_`` dropped - our own port's rule, so ``ibdiag_partner_<stem>`` pairs
    with ``ibdiag_port_<stem>`` (``rcv_errors``, ``xmit_wait``, ``local_physical_errors``)."""
    named = catalogue_name(name)
    stem = _CAMEL.sub("_", named).lower()
    if stem.startswith("port_"):
        stem = stem[len("port_") :]
    return named, stem
