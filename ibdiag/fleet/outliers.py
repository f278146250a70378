"""Nodes that stand out from their peers, although each may pass its own floor.

Peers are the nodes that measured the same metric on the same rail (HCA index); node-wide
metrics (nccl-tests, Inspector bus bandwidth) compare whole nodes - the Inspector's per
collective, message size bucket and communicator span (``inspector_busbw_gbps:AllReduce:4-5GB:2n``),
so only nodes that ran the same kind of operation are peers. Healthy is a fleet whose nodes sit
near their rail's median: nothing is listed. Bandwidth is bad when low (``ib_write_bw_gbps``,
``nccl_tests_busbw_gbytes``, ``inspector_busbw_gbps:...``); an error
counter's rate (``error_rate:<counter>``, per hour since each node's baseline) is bad when high,
and only above ``rate_floor_per_hour``, so a fleet of zeros and a stray error flag nobody.

Error rates: a node graded against a baseline (``rate_window_hours`` set) that lists no rate for
a counter on one of its rails had none there - it is a peer at 0. A node without a baseline
does not know its rates and is no peer. The cuts are ``ibdiag.fleet.stats``'s. Cost: one pass
over the nodes' metrics, then one sort per (metric, rail): O(nodes x metrics x log nodes).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Set, Tuple

from ibdiag.fleet import stats
from ibdiag.fleet.node import (
    ERROR_RATE_PREFIX,
    IB_WRITE_BW,
    INSPECTOR_BUSBW_PREFIX,
    NCCL_TESTS_BUSBW,
    NodeSummary,
)
from ibdiag.fleet.report import FleetSettings, Outlier

LOW_IS_BAD = (IB_WRITE_BW, NCCL_TESTS_BUSBW)

Key = Tuple[str, Optional[int]]  # (metric, rail)


def find_outliers(nodes: Sequence[NodeSummary], settings: FleetSettings) -> List[Outlier]:
    """Every node whose metric on a rail is an outlier among that rail's peers (sorted by
    metric, rail, then the largest gap first)."""
    found = _bandwidth(nodes, settings) + _error_rates(nodes, settings)
    return sorted(
        found,
        key=lambda o: (o.metric, -1 if o.rail is None else o.rail, -abs(o.gap), o.host),
    )


def _bandwidth(nodes: Sequence[NodeSummary], settings: FleetSettings) -> List[Outlier]:
    values: Dict[Key, List[Tuple[str, float]]] = {}
    for node in nodes:
        for metric in node.metrics:
            if metric.name in LOW_IS_BAD or metric.name.startswith(INSPECTOR_BUSBW_PREFIX):
                values.setdefault((metric.name, metric.rail), []).append((node.host, metric.value))
    found: List[Outlier] = []
    for key, pairs in values.items():
        found += _judge(key, pairs, settings, stats.LOW, floor=0.0)
    return found


def _error_rates(nodes: Sequence[NodeSummary], settings: FleetSettings) -> List[Outlier]:
    """Rates of nodes with a baseline; a counter a node does not list on a rail it has is 0."""
    floor = settings.rate_floor_per_hour
    listed: Dict[Tuple[str, int], List[Tuple[str, float]]] = {}
    peers_on_rail: Dict[int, List[str]] = {}  # rail -> hosts that know their rates on it
    for node in nodes:
        if node.rate_window_hours is None:
            continue
        for rail in {hca.rail for hca in node.hcas}:
            peers_on_rail.setdefault(rail, []).append(node.host)
        for metric in node.metrics:
            if metric.name.startswith(ERROR_RATE_PREFIX) and metric.rail is not None:
                listed.setdefault((metric.name, metric.rail), []).append((node.host, metric.value))
    found: List[Outlier] = []
    for (name, rail), pairs in listed.items():
        if not any(value > floor for _, value in pairs):
            continue  # nobody above the floor: nobody can stand out (a quiet fleet costs nothing)
        hosts: Set[str] = {host for host, _ in pairs}
        zeros = [(host, 0.0) for host in peers_on_rail.get(rail, ()) if host not in hosts]
        found += _judge((name, rail), pairs + zeros, settings, stats.HIGH, floor=floor)
    return found


def _judge(
    key: Key,
    pairs: List[Tuple[str, float]],
    settings: FleetSettings,
    direction: str,
    floor: float,
) -> List[Outlier]:
    if len(pairs) < settings.outlier_min_nodes:
        return []
    peers = stats.spread([value for _, value in pairs])
    return [
        Outlier(
            host=host,
            metric=key[0],
            rail=key[1],
            value=value,
            median=peers.median,
            mad=peers.mad,
            gap=stats.gap(value, peers, floor),
            peers=peers.peers,
            direction=direction,
        )
        for host, value in pairs
        if stats.is_outlier(value, peers, settings, direction, floor)
    ]
