"""The MTU of each link in Prometheus terms (``link.mtu``'s data), from the typed facts of level
standard:

- ``ibdiag_port_active_mtu_bytes`` / ``ibdiag_port_max_mtu_bytes`` (labels ``device``,
  ``port``, ``ib_port``): our port's active and largest MTU as ``ibv_devinfo`` lists them
  (``Snapshot.inventory.ibv_devinfo``), InfiniBand and RoCE ports alike;
- ``ibdiag_partner_neighbor_mtu_bytes`` / ``ibdiag_partner_mtu_cap_bytes`` (plus ``peer_guid``,
  ``peer_name``, ``peer_port`` as every ``ibdiag_partner_*`` family): the far end's PortInfo
  NeighborMTU (the MTU the subnet manager set for the link) and MtuCap (the largest its port
  supports), ``smpquery portinfo`` over the cable.

Healthy: all four at the fabric's MTU (4096 on InfiniBand); a partner MtuCap below it is a
switch port capped lower. A value that was not read is no sample (never a 0).

Pure functions of the Report: no I/O, nothing decided.
"""

from __future__ import annotations

from ibdiag.model import Report
from ibdiag.render import prometheus_partner as far_end
from ibdiag.render.prometheus_family import Family, Labels


def add_mtu(family: Family, report: Report) -> None:
    """Add the families above through ``family(name, kind, help)`` (``_Exposition.family``)."""
    active = family(
        "ibdiag_port_active_mtu_bytes",
        "gauge",
        "The port's active MTU in bytes (ibv_devinfo active_mtu).",
    )
    largest = family(
        "ibdiag_port_max_mtu_bytes",
        "gauge",
        "The largest MTU the port supports, in bytes (ibv_devinfo max_mtu).",
    )
    neighbor = family(
        "ibdiag_partner_neighbor_mtu_bytes",
        "gauge",
        "The MTU the subnet manager set for the link, as the far end's port says it "
        "(PortInfo NeighborMTU), in bytes.",
    )
    cap = family(
        "ibdiag_partner_mtu_cap_bytes",
        "gauge",
        "The largest MTU the far end's port supports (PortInfo MtuCap), in bytes.",
    )
    snapshot = report.snapshot
    listing = snapshot.inventory.ibv_devinfo if snapshot.inventory is not None else None
    listed = {
        (ca.name, p.number): p
        for ca in (listing.cas if listing is not None else [])
        for p in ca.ports
    }
    for dev in snapshot.devices:
        for port in dev.ports:
            base: Labels = (
                ("device", dev.name),
                ("port", str(port.number)),
                ("ib_port", dev.target(port)),
            )
            mine = listed.get((dev.name, port.number))
            if mine is not None and mine.active_mtu is not None:
                active.add(base, mine.active_mtu)
            if mine is not None and mine.max_mtu is not None:
                largest.add(base, mine.max_mtu)
            partner = port.partner
            info = partner.port_info if partner is not None else None
            if partner is None or info is None or not far_end.known(partner):
                continue
            labels = base + far_end.peer_labels(partner)
            if info.neighbor_mtu is not None:
                neighbor.add(labels, info.neighbor_mtu)
            if info.mtu_cap is not None:
                cap.add(labels, info.mtu_cap)
