"""Cable lots: the physical-layer findings of the fleet, grouped by who made the cable and
which batch.

A cable or optical module that degrades (BER climbing, FEC correcting more and more, Rx power
sagging, a module running hot) is one node's finding; the same finding on several cables of
one part number and one lot is a bad batch, and the ticket goes to the vendor with the lot,
not to each node. Each node port whose ``phy.*`` checks (phy.temperature, phy.fec, phy.ber,
phy.optics) warned or failed on it or its cable, and whose module named a part number
(``ModuleReading.identity``: read at level standard with mlxlink/mstlink), counts for its
(part number, lot); a group is listed when ``cable_lot_min_ports`` of its ports have such a
finding, with how many cables of that part and lot the fleet has in all, so "6 of 8 cables of
lot 230512" reads differently from "6 of 4,000".

Healthy: no lot is listed. Cost: one pass over every node's ports.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Set, Tuple

from ibdiag.fleet.node import CableMake, NodeSummary, PortSummary
from ibdiag.fleet.report import CableLot, CablePort, FleetSettings
from ibdiag.hostlist import compress
from ibdiag.natural import natural_key

PHYSICAL_PREFIX = "phy."  # the physical layer's checks: phy.temperature, phy.fec, phy.ber, ...

LotKey = Tuple[str, Optional[str], Optional[str]]  # part number, lot, vendor


def physical_checks(port: PortSummary) -> List[str]:
    """The physical-layer checks that warned, failed or erred on the port or its cable."""
    return [check for check in port.failing_checks if check.startswith(PHYSICAL_PREFIX)]


def find_cable_lots(nodes: Sequence[NodeSummary], settings: FleetSettings) -> List[CableLot]:
    """Every (part number, lot) with ``cable_lot_min_ports`` or more ports whose physical layer
    is not healthy; the most such ports first."""
    cables: Dict[LotKey, int] = {}
    findings: Dict[LotKey, List[CablePort]] = {}
    for node in nodes:
        for port in node.ports:
            if port.cable is None:
                continue
            key = _key(port.cable)
            cables[key] = cables.get(key, 0) + 1
            checks = physical_checks(port)
            if checks:
                findings.setdefault(key, []).append(
                    CablePort(host=node.host, target=port.target, checks=checks, far_end=_far(port))
                )
    lots = []
    for (part_number, lot, vendor), ports in findings.items():
        if len(ports) < settings.cable_lot_min_ports:
            continue
        hosts: Set[str] = {port.host for port in ports}
        lots.append(
            CableLot(
                vendor=vendor,
                part_number=part_number,
                lot=lot,
                ports=sorted(ports, key=lambda p: (natural_key(p.host), p.target)),
                nodes=compress(hosts),
                node_count=len(hosts),
                port_count=len(ports),
                cable_count=cables[(part_number, lot, vendor)],
                checks=sorted({check for port in ports for check in port.checks}),
                switches=sorted(
                    {port.far_end.rsplit("/", 1)[0] for port in ports if port.far_end},
                    key=natural_key,
                ),
            )
        )
    return sorted(
        lots, key=lambda lot: (-lot.port_count, lot.part_number, lot.lot or "", lot.vendor or "")
    )


def _key(cable: CableMake) -> LotKey:
    return (cable.part_number, cable.lot, cable.vendor)


def _far(port: PortSummary) -> Optional[str]:
    """The cable's far end as the checks name it: ``leaf07/21``."""
    far = port.far_end
    if far is None or not far.peer_name:
        return None
    return f"{far.peer_name}/{far.peer_port}" if far.peer_port is not None else far.peer_name
