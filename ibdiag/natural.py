"""Natural order of names: ``mlx5_2`` before ``mlx5_10``, port 2 before port 10.

One definition, used wherever ibdiag lists HCAs, ports or files in the order a person reads
them, and wherever an order means something (``ibdiag.rails``: HCA k of a node is rail k).
"""

from __future__ import annotations

import re
from typing import Tuple

_DIGITS = re.compile(r"([0-9]+)")


def natural_key(name: str) -> Tuple[object, ...]:
    """Sort mlx5_2 before mlx5_10 and port 2 before port 10 (ASCII digits only: ``²`` and
    ``①`` are text, never numbers)."""
    parts = _DIGITS.split(name)
    return tuple(int(part) if index % 2 else part for index, part in enumerate(parts))
