"""The switches at the far end of the nodes' cables: which to blame, and which rails are cabled
to the wrong one.

A switch is known by the GUID its ports report (else by its name, ``leaf07``); only far ends
that are switches (or whose type is not known) count: a back-to-back cable to another HCA is no
switch. Cost: one pass over every node's ports, O(nodes x ports).

**Blame.** A node's port *fails* when its own worst result or its cable's is fail or error.
Healthy is no failing port: nothing is listed. Every switch with a failing port is listed with
those ports (and the checks that failed on them), its failing nodes and the nodes and node
ports cabled to it; it is the *suspect* when ``switch_min_nodes`` nodes fail on it, or when at
least 2 nodes do and their failing ports are at least ``switch_min_share`` of the node ports
cabled to it - then its nodes' tickets go to the switch (``analyze`` moves them from drain to
switch-suspect). The share counts ports, not nodes: a switch is a set of ports, and a node
with two HCAs on one leaf is two chances to see that leaf fail (one failing of its two is half
its ports, not "the node"); k counts nodes, as independent faults to weigh against one switch.

**Outlying ports.** An outlier on rail k of a node (``ibdiag.fleet.outliers``: its ib_write_bw,
or an error counter's rate - its own port's, or the far end's ``partner:`` one) is listed on
the switch its rail-k port lands on, with the metrics, when that port does not fail (outliers
are per rail: an HCA with two ports lists both). A switch with only outlying ports is listed
too, but outliers never make a suspect: the suspect decision moves CRITICAL nodes' tickets from
drain to the switch, so it rests on what the nodes' own checks failed against fixed floors. An
outlier passes its own floor and is only far from its peers - a warning, with no drain ticket
to move - and a spread fleet always has a tail, so counting outliers would let statistics make
suspects. Listed beside the failing ports, they let an admin see a leaf worth a look below k
(two failing and four outlying ports on one leaf). Node-wide metrics (nccl-tests, Inspector)
name no port and stay in the outliers only.

**Rails.** A rail-optimized fabric cables HCA k of every node to the leaf (or leaves, one per
scalable unit) of rail k, so that NCCL's rail-aligned traffic never crosses the spine. Seen from
the far ends: each such leaf carries ports of one rail (or of a few, where a leaf serves two
rails), while a leaf of a non-rail fabric carries every rail of the nodes cabled to it, in equal
numbers. The rule, per switch: its *main* rails are those with more than ``STRAY_SHARE`` as many
ports on it as its most common rail; a rail with fewer is a stray there. The switch is
*rail-aligned* when its main rails are at most half of the rails the fleet has (and the fleet
has two or more). Rail k *shows rails* when at least half of its ports land on rail-aligned
switches that have k among their main rails (those switches are rail k's expected group). A port
of rail k is misplaced when rail k shows rails and the port lands on a rail-aligned switch where
k is a stray - a switch that carries (almost) only other rails' ports.

So a non-rail fabric flags nobody (every rail is main on every leaf: none is rail-aligned), a
leaf that serves a whole scalable unit of one rail flags nobody, a leaf with a single node's
port on it flags nobody (its one rail is main), and two cables swapped between rail 0 and rail 1
on one node name both ports - once a leaf carries at least 1 / ``STRAY_SHARE`` ports of its own
rail, below which one stray cannot be told from a design.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

from ibdiag.fleet.cables import physical_checks
from ibdiag.fleet.node import FarEnd, NodeSummary, PortSummary
from ibdiag.fleet.report import FleetSettings, Outlier, RailMisplacement, SuspectSwitch, SwitchPort
from ibdiag.hostlist import compress
from ibdiag.natural import natural_key

FAILING = ("fail", "error")
# A node port's checks that say its link went down between runs (a flap, a long drop).
FLAP_CHECKS = frozenset({"link.flaps", "link.drop"})
STRAY_SHARE = 0.25  # a rail with <= 1/4 of the ports of a switch's most common rail is a stray
RAILS_SHOWN = 0.5  # share of a rail's ports on its rail-aligned switches for it to show rails


Keys = Callable[[Optional[FarEnd]], Optional[str]]
RailOutliers = Dict[Tuple[str, int], List[Outlier]]  # (host, rail) -> its outliers there


class _Switch:
    """What the fleet's ports say about one switch (built in one pass, then read)."""

    def __init__(self) -> None:
        self.names: Counter = Counter()
        self.guid: Optional[str] = None
        self.attached: Set[str] = set()
        self.ports = 0  # node ports cabled to it
        self.failing: List[SwitchPort] = []
        self.outlying: List[SwitchPort] = []
        self.flapping: Set[Tuple[str, str]] = set()  # (host, node port) whose link flapped
        self.physical: Set[Tuple[str, str]] = set()  # (host, node port) with a phy.* finding
        self.rails: Counter = Counter()  # rail -> node ports of that rail on this switch

    @property
    def name(self) -> str:
        return min(self.names, key=lambda name: (-self.names[name], name))


def _keys(nodes: Sequence[NodeSummary]) -> Keys:
    """The key of a far end's switch: its GUID; a far end read without one (by name only) gets
    the GUID other ports gave that name, when they gave exactly one; None: no switch."""
    guids: Dict[str, Set[str]] = {}
    for node in nodes:
        for port in node.ports:
            far = port.far_end
            if far is not None and far.peer_guid and far.peer_name:
                guids.setdefault(far.peer_name, set()).add(far.peer_guid)
    by_name = {name: next(iter(found)) for name, found in guids.items() if len(found) == 1}

    def key(far: Optional[FarEnd]) -> Optional[str]:
        if far is None or far.peer_type not in (None, "Switch"):
            return None  # not read, or a back-to-back cable to another HCA
        if far.peer_guid:
            return far.peer_guid
        return by_name.get(far.peer_name or "", far.peer_name)

    return key


def _switches(
    nodes: Sequence[NodeSummary], keys: Keys, outlying: Optional[RailOutliers] = None
) -> Dict[str, _Switch]:
    switches: Dict[str, _Switch] = {}
    for node in nodes:
        for port in node.ports:
            key = keys(port.far_end)
            if key is None or port.far_end is None:
                continue
            far = port.far_end
            switch = switches.setdefault(key, _Switch())
            switch.names[far.peer_name or far.peer_guid or key] += 1
            switch.guid = switch.guid or far.peer_guid
            switch.attached.add(node.host)
            switch.ports += 1
            if port.rail is not None:
                switch.rails[port.rail] += 1
            if FLAP_CHECKS & set(port.failing_checks):
                switch.flapping.add((node.host, port.target))
            if physical_checks(port):
                switch.physical.add((node.host, port.target))
            if fails(port):
                switch.failing.append(
                    SwitchPort(
                        peer_port=far.peer_port,
                        host=node.host,
                        target=port.target,
                        checks=list(port.failing_checks),
                    )
                )
            elif outlying and port.rail is not None and (node.host, port.rail) in outlying:
                switch.outlying.append(
                    SwitchPort(
                        peer_port=far.peer_port,
                        host=node.host,
                        target=port.target,
                        outliers=outlying[(node.host, port.rail)],
                    )
                )
    return switches


def fails(port: PortSummary) -> bool:
    """A port fails when its own worst result, or its cable's, is fail or error."""
    return port.status in FAILING or port.cable_status in FAILING


def blame_switches(
    nodes: Sequence[NodeSummary], settings: FleetSettings, outliers: Sequence[Outlier] = ()
) -> List[SuspectSwitch]:
    """Every switch with a failing port, a flapping one (``FLAP_CHECKS`` warned or failed on it:
    a flap that fails is also a failing port, which can make a suspect; one that only warns is
    counted, like an outlier, never for ``suspect``), one with a physical-layer finding
    (``phy.*``, counted alike), or a port of a rail in ``outliers`` (those the report lists);
    suspects first, then by failing, flapping, physical and outlying nodes."""
    by_rail: RailOutliers = {}
    for outlier in outliers:
        if outlier.rail is not None:
            by_rail.setdefault((outlier.host, outlier.rail), []).append(outlier)
    found = []
    for switch in _switches(nodes, _keys(nodes), by_rail).values():
        if not (switch.failing or switch.outlying or switch.flapping or switch.physical):
            continue
        failing_nodes = {port.host for port in switch.failing}
        outlying_nodes = {port.host for port in switch.outlying}
        count = len(failing_nodes)
        suspect = count >= settings.switch_min_nodes or (
            count >= 2 and len(switch.failing) >= settings.switch_min_share * switch.ports
        )
        found.append(
            SuspectSwitch(
                peer_guid=switch.guid,
                peer_name=switch.name,
                failing_ports=sorted(switch.failing, key=_port_order),
                failing_nodes=compress(failing_nodes),
                failing_node_count=count,
                attached_node_count=len(switch.attached),
                attached_port_count=switch.ports,
                suspect=suspect,
                outlying_ports=sorted(switch.outlying, key=_port_order),
                outlying_nodes=compress(outlying_nodes),
                outlying_node_count=len(outlying_nodes),
                flapping_port_count=len(switch.flapping),
                flapping_nodes=compress({host for host, _ in switch.flapping}),
                physical_port_count=len(switch.physical),
                physical_nodes=compress({host for host, _ in switch.physical}),
            )
        )
    return sorted(
        found,
        key=lambda s: (
            not s.suspect,
            -s.failing_node_count,
            -s.flapping_port_count,
            -s.physical_port_count,
            -s.outlying_node_count,
            natural_key(s.peer_name),
        ),
    )


def _port_order(port: SwitchPort) -> Tuple[int, Tuple[object, ...], str]:
    return (port.peer_port or 0, natural_key(port.host), port.target)


def suspect_ports(switches: Sequence[SuspectSwitch]) -> Set[Tuple[str, str]]:
    """(host, port target) of every failing port on a suspect switch."""
    return {(p.host, p.target) for s in switches if s.suspect for p in s.failing_ports}


def find_rail_misplacements(
    nodes: Sequence[NodeSummary], settings: FleetSettings
) -> List[RailMisplacement]:
    """The ports cabled to a switch of other rails (the rule: this module's docstring;
    ``settings``: for symmetry with the other analyses)."""
    keys = _keys(nodes)
    switches = _switches(nodes, keys)
    fleet_rails = {rail for switch in switches.values() for rail in switch.rails}
    if len(fleet_rails) < 2:
        return []
    main = {key: _main_rails(switch.rails) for key, switch in switches.items()}
    aligned = {key for key, rails in main.items() if len(rails) <= len(fleet_rails) / 2}
    expected: Dict[int, List[str]] = {}
    for rail in fleet_rails:
        ports = sum(switch.rails[rail] for switch in switches.values())
        group = [key for key in aligned if rail in main[key]]
        if sum(switches[key].rails[rail] for key in group) >= RAILS_SHOWN * ports:
            expected[rail] = sorted((switches[key].name for key in group), key=natural_key)
    found = [
        RailMisplacement(
            host=node.host,
            rail=port.rail,
            target=port.target,
            peer_name=switches[key].name,
            expected=expected[port.rail],
        )
        for node in nodes
        for port in node.ports
        if port.rail in expected
        and (key := keys(port.far_end)) in aligned
        and port.rail not in main[key]
    ]
    return sorted(found, key=lambda m: (m.rail, natural_key(m.host), m.target))


def _main_rails(rails: Counter) -> Set[int]:
    most = max(rails.values(), default=0)
    return {rail for rail, count in rails.items() if count > STRAY_SHARE * most}
