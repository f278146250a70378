"""Rails: which HCA of a node is rail k.

A *rail* is an HCA's index among the node's InfiniBand HCAs in natural name order
(``ibdiag.natural``): ``mlx5_0`` is rail 0, ``mlx5_10`` comes after ``mlx5_9``, and an HCA with
no InfiniBand port (an Ethernet-only / RoCE NIC) has none and does not shift the others. On a
GPU node HCA k of every node is cabled to the same group of leaf switches, so rail k is what
HCA k is compared with across the fleet - healthy: every node's rail k runs at the same rate,
measures the same bandwidth and lands on the same switches.

The one definition, used by ``Snapshot.rails`` (the Prometheus renderer's
``ibdiag_port_rail_info``) and by ``ibdiag.fleet.node`` (which reads Report JSON as plain
dicts): both call ``rail_numbers`` with ``infiniband_port`` deciding which HCAs count.
"""

from __future__ import annotations

from typing import Dict, Iterable, Mapping, Optional, Tuple

from ibdiag.natural import natural_key

INFINIBAND = "InfiniBand"


def infiniband_port(link_layer: Optional[str], problems: Mapping[str, str]) -> bool:
    """The one definition of an InfiniBand port (``Port.is_infiniband``): link layer
    InfiniBand, or no ``link_layer`` file at all (kernels without it predate RoCE). A link
    layer that could not be read (a problem other than "missing") is not assumed to be
    anything."""
    return link_layer == INFINIBAND or (
        link_layer is None and problems.get("link_layer") == "missing"
    )


def rail_numbers(hcas: Iterable[Tuple[str, bool]]) -> Dict[str, int]:
    """HCA name -> rail, from (HCA name, has an InfiniBand port) pairs in any order: the HCAs
    with an InfiniBand port, numbered from 0 in natural name order (a name given twice counts
    once, rail-bearing if either says so)."""
    names = {name for name, infiniband in hcas if infiniband}
    return {name: index for index, name in enumerate(sorted(names, key=natural_key))}
