"""Durations as an admin writes them: ``12h``, ``30m``, ``4m10s``, ``7d``."""

from __future__ import annotations

import re
from typing import Optional

_SPAN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_SMALLER = {"d": ("h", 3600), "h": ("m", 60), "m": ("s", 1)}


def span(seconds: float) -> str:
    """``seconds`` in its largest unit and the next one when not whole: 12h, 4m10s, 2d3h, 45s."""
    whole = round(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if whole >= size:
            first, rest = divmod(whole, size)
            name, step = _SMALLER[unit]
            tail = rest // step
            return f"{first}{unit}{tail}{name}" if tail else f"{first}{unit}"
    return f"{whole}s"


def parse_span(text: str) -> Optional[float]:
    """``24h``, ``30m``, ``7d``, ``90s`` or plain seconds, as seconds; None when it is not one
    (or not above zero)."""
    match = _SPAN.match(text)
    if not match or float(match.group(1)) <= 0:
        return None
    return float(match.group(1)) * _UNITS[match.group(2).lower()]
