"""Drift: an attribute that should be the same on every node and is not.

Per rail (HCA index): firmware (``fw_ver``), board (``board_id``), model (``hca_type``), and
the partition keys its InfiniBand ports hold (``pkeys``: a node left out of the job's
partition, or given a stray one, is PKey drift - ClusterMAX's "PKey consistency"). Per
node: how it was checked - the ibdiag version that wrote its report (``ibdiag_version``, the
report's ``tool_version``) and the check ``level`` (a node checked at level quick among nodes
at standard read no counters; an older ibdiag checks less, and otherwise) - then
``kernel_release`` and each driver module's version (``driver:<module>``). Healthy is one value
everywhere: nothing is listed. Otherwise the majority value is named with its count and every
other value with its nodes (hostlist-compressed), most nodes first.

A node that does not say (an older ibdiag that did not read it, an unreadable file) is not drift
by itself - a fleet half of whose reports come from an older ibdiag without kernel releases has
no kernel drift - but where the nodes that say disagree, it is listed too, as ``(unknown)``. A
driver module missing from a node that reports the others is ``(not loaded)``: a value, so a node
without nvidia_peermem among nodes with it is drift. The majority is the most common value a
node did say. Cost: one pass over the nodes' HCAs: O(nodes x HCAs).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Set, Tuple

from ibdiag.fleet.node import NodeSummary
from ibdiag.fleet.report import Drift, DriftValue, FleetSettings
from ibdiag.hostlist import compress

UNKNOWN = "(unknown)"
NOT_LOADED = "(not loaded)"
HCA_ATTRIBUTES = ("hca_type", "board_id", "fw_ver", "pkeys")
IBDIAG_VERSION = "ibdiag_version"
LEVEL = "level"
CHECKED = (IBDIAG_VERSION, LEVEL)  # how each node was checked
KERNEL = "kernel_release"
UNSAID = "?"  # NodeSummary's level and tool_version of a report that did not say
DRIVER_PREFIX = "driver:"

Key = Tuple[str, Optional[int]]  # (attribute, rail)


def find_drift(nodes: Sequence[NodeSummary], settings: FleetSettings) -> List[Drift]:
    """The attributes with more than one value across ``nodes`` (``settings``: for symmetry
    with the other analyses; drift has no knobs)."""
    values: Dict[Key, Dict[str, Set[str]]] = {}  # key -> value (None: UNKNOWN) -> hosts
    modules = sorted({module for node in nodes for module in node.driver_versions})
    for node in nodes:
        for hca in node.hcas:
            for attribute in HCA_ATTRIBUTES:
                _add(values, (attribute, hca.rail), getattr(hca, attribute), node.host)
        _add(values, (IBDIAG_VERSION, None), _said(node.tool_version), node.host)
        _add(values, (LEVEL, None), _said(node.level), node.host)
        _add(values, (KERNEL, None), node.kernel_release, node.host)
        for module in modules:
            version = node.driver_versions.get(module)
            if version is None and node.driver_versions:
                version = NOT_LOADED  # it reports the stack's versions, and not this one
            _add(values, (DRIVER_PREFIX + module, None), version, node.host)
    found = [_drift(key, seen) for key, seen in values.items()]
    return sorted((drift for drift in found if drift is not None), key=_order)


def _add(values: Dict[Key, Dict[str, Set[str]]], key: Key, value: Optional[str], host: str):
    values.setdefault(key, {}).setdefault(UNKNOWN if value is None else value, set()).add(host)


def _said(value: str) -> Optional[str]:
    return None if value == UNSAID else value


def _drift(key: Key, seen: Dict[str, Set[str]]) -> Optional[Drift]:
    if len([value for value in seen if value != UNKNOWN]) < 2:
        return None  # one value everywhere (or nobody says), whoever did not say
    ranked = sorted(seen.items(), key=lambda item: (item[0] == UNKNOWN, -len(item[1]), item[0]))
    (majority, hosts), others = ranked[0], ranked[1:]
    return Drift(
        attribute=key[0],
        rail=key[1],
        majority=majority,
        majority_count=len(hosts),
        others=[
            DriftValue(value=value, nodes=compress(hosts), count=len(hosts))
            for value, hosts in sorted(others, key=lambda item: (-len(item[1]), item[0]))
        ],
    )


def _order(drift: Drift) -> Tuple[int, str, int]:
    """HCA attributes by rail first, then how the nodes were checked, the kernel, then the
    drivers by module."""
    if drift.rail is not None:
        return (0, "", drift.rail * len(HCA_ATTRIBUTES) + HCA_ATTRIBUTES.index(drift.attribute))
    if drift.attribute in CHECKED:
        return (1, "", CHECKED.index(drift.attribute))
    return (2 if drift.attribute == KERNEL else 3, drift.attribute, 0)


# --- how a report shows it (text, HTML and the verdict's count alike) --------------------------


def merged_rails(drifts: Sequence[Drift]) -> List[Tuple[Drift, List[int]]]:
    """Drift entries that differ only by rail, as one with their rails (a node on other
    firmware on all eight HCAs is one line, not eight), in their first entry's place."""
    merged: Dict[Tuple[object, ...], Tuple[Drift, List[int]]] = {}
    for drift in drifts:
        key: Tuple[object, ...] = (drift.attribute, drift.rail is None, drift.majority,
                                   drift.majority_count, tuple(drift.others))  # fmt: skip
        if drift.rail is None:
            key += (id(drift),)
        _, rails = merged.setdefault(key, (drift, []))
        if drift.rail is not None:
            rails.append(drift.rail)
    return list(merged.values())


def rail_ranges(numbers: Sequence[int]) -> str:
    """``0-3,5`` of 0, 1, 2, 3, 5."""
    parts: List[str] = []
    ordered = sorted(set(numbers))
    start = previous = ordered[0]
    for number in [*ordered[1:], None]:
        if number is not None and number == previous + 1:
            previous = number
            continue
        parts.append(f"{start}-{previous}" if previous != start else f"{start}")
        if number is not None:
            start = previous = number
    return ",".join(parts)
