"""How a check states its verdicts on one target without repeating what they share."""

from __future__ import annotations

from functools import partial
from typing import List

from ibdiag.model import Result, Scalar


def about(target: str, evidence: List[str], **shared: Scalar) -> partial[Result]:
    """A maker of Results on ``target`` read from ``evidence``: every verdict a check can give
    on one port or HCA names the same target and files (and often the same ``expected``), so a
    check says them once and each verdict gives only what is its own (status, message, hint,
    or another ``evidence`` where that verdict read more)."""
    return partial(Result, target=target, evidence=evidence, **shared)
