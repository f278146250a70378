"""What one run of the far end's chain read, as the chain (planning its next step) and the
interpreter (setting ``Port.partner``) both need it: the PortInfo an ``smpquery portinfo``
printed, and which PMA reading the error counters are graded from."""

from __future__ import annotations

from typing import Callable, Optional, TypeVar

from ibdiag.facts.partner import ERROR_COUNTER, PortInfo
from ibdiag.facts.perfquery import PmaReading
from ibdiag.families.partner.smpquery import parse_portinfo
from ibdiag.model import CommandRun

_Parsed = TypeVar("_Parsed")


def output(run: CommandRun) -> str:
    """What a run printed, as the parsers take it (the tools print errors on both streams)."""
    return run.stdout + "\n" + run.stderr


def parsed(run: Optional[CommandRun], parse: Callable[[str], _Parsed]) -> Optional[_Parsed]:
    """``parse`` of what ``run`` printed, if it exited 0 (None otherwise)."""
    if run is None or not run.succeeded:
        return None
    return parse(output(run))


def port_info_of(run: Optional[CommandRun]) -> Optional[PortInfo]:
    """The PortInfo ``run`` printed, with its role, if it exited 0 (None otherwise)."""
    info = parsed(run, parse_portinfo)
    if info is None or run is None:
        return None
    return info.model_copy(update={"role": run.role})


def pma_counters(
    extended: Optional[PmaReading], basic: Optional[PmaReading]
) -> Optional[PmaReading]:
    """The reading the error counters are graded from: -x's when it carries them, else plain
    perfquery's; -x's data counters alone when that is all there is."""
    if extended is not None and ERROR_COUNTER in extended.counters:
        return extended
    return basic if basic is not None else extended
