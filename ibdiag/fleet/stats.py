"""Robust statistics for comparing a node with its peers: median, MAD, and the outlier test.

Healthy peers cluster: their median is the typical value and their spread (the median absolute
deviation, scaled by 1.4826 so that it estimates the standard deviation of normal jitter) is
small. A value is an outlier only when it is beyond *both* cuts of ``FleetSettings``: more
than ``outlier_mad_factor`` robust deviations from the median, and more than
``outlier_margin`` of the median away - so a tight fleet does not flag noise, and a fleet where
most nodes are exactly equal (MAD 0) still flags the one that is really off (the margin alone
decides then). A fleet where everybody is equal flags nobody; fewer than
``outlier_min_nodes`` peers say nothing. Medians and MADs use no more than a sort: O(n log n).
"""

from __future__ import annotations

import math
import sys
from typing import NamedTuple, Optional, Sequence

from ibdiag.fleet.report import FleetSettings

MAD_SCALE = 1.4826  # MAD x this estimates the standard deviation of normally spread values
LOW, HIGH = "low", "high"  # which side is bad: bandwidth low, error rates high


class Spread(NamedTuple):
    """The peers of one metric: their median, scaled MAD and how many they are."""

    median: float
    mad: float
    peers: int


def median(values: Sequence[float]) -> float:
    """The median; ``ValueError`` on no values."""
    if not values:
        raise ValueError("median of no values")
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[middle])
    return ordered[middle - 1] / 2.0 + ordered[middle] / 2.0  # halves: no sum past float's range


def mad(values: Sequence[float], center: Optional[float] = None) -> float:
    """The median absolute deviation from ``center`` (the median by default), x1.4826."""
    center = median(values) if center is None else center
    return MAD_SCALE * median([abs(value - center) for value in values])


def spread(values: Sequence[float]) -> Spread:
    center = median(values)
    return Spread(center, mad(values, center), len(values))


def gap(value: float, peers: Spread, floor: float = 0.0) -> float:
    """How far ``value`` is from the median, relative to it: -0.2 = 20% below. Against a median
    of 0 (the error rate of a quiet fleet) there is no relative gap: it is then counted in
    units of ``floor`` (or of 1 when there is no floor), so it stays a finite number - as does
    a huge value over a tiny median (a JSON number, never an infinity)."""
    scale = abs(peers.median) or floor or 1.0
    relative = (value - peers.median) / scale
    if math.isinf(relative):  # a huge value over a tiny median: as far as a float goes
        return math.copysign(sys.float_info.max, relative)
    return relative


def is_outlier(
    value: float, peers: Spread, settings: FleetSettings, direction: str, floor: float = 0.0
) -> bool:
    """Whether ``value`` stands out from ``peers`` on its bad side (``LOW`` or ``HIGH``): beyond
    the MAD cut and the margin, with enough peers, and (``HIGH``) above ``floor``."""
    if peers.peers < settings.outlier_min_nodes:
        return False
    distance = peers.median - value if direction == LOW else value - peers.median
    if direction == HIGH and value <= floor:
        return False
    return (
        distance > settings.outlier_mad_factor * peers.mad
        and distance > settings.outlier_margin * abs(peers.median)
        and distance > 0
    )
