"""FEC: a port's forward-error-correction counters per lane, as ``perfquery -T`` reads its
PortExtendedSpeedsCounters, typed.

``Port.facts["fec"]`` holds one ``PortFec`` per port ``perfquery -T`` was run for (level
standard, an ACTIVE InfiniBand port: ``ibdiag.families.perfquery_fec``); the far end's is
``Partner.fec``. Healthy: no uncorrectable block since the baseline (none at all since the
last reset, without one), and corrected blocks spread evenly over the lanes in use: FEC
correcting more and more on one lane is the early sign of a failing cable or optic.

perfquery prints one of two layouts (rdma-core ``infiniband-diags/perfquery.c``
``extended_speeds_query``, fields from ``libibmad/fields.c``):

- ``extended-speeds`` (header ``# PortExtendedSpeedsCounters counters: ...``): the base
  layout - ``SyncHeaderErrorCounter``, ``UnknownBlockCounter``, then per lane 0..11
  ``ErrorDetectionCounterLaneN`` (16 bits), ``FECCorrectableBlockCtrLaneN`` and
  ``FECUncorrectableBlockCtrLaneN`` (32 bits);
- ``rs-fec`` (header ``# PortExtendedSpeedsCounters with RS-FEC Active counters: ...``,
  printed when the PMA's ClassPortInfo CapabilityMask has bit 14 (libibmad
  ``IS_PM_RSFEC_COUNTERS_SUP``) and the port's PortInfoExtended, which says it supports FEC
  modes, has FECModeActive RS-FEC (2) or RS-FEC2 (4)): ``SyncHeaderErrorCounter``,
  ``UnknownBlockCounter``, per lane ``FECCorrectableSymbolCtrLaneN`` (corrected symbols), and
  the port's ``PortFECCorrectableBlockCtr``, ``PortFECUncorrectableBlockCtr``,
  ``PortFECCorrectedSymbolCtr``.

Every lane is printed (12), whatever the link's width: a 4X link counts on lanes 0-3 only.
A value that is not a count, or a field missing (perfquery's 1536-byte buffer cuts the
extended-speeds layout short when its values are wide), is a recorded problem, never an error.
"""

from typing import Dict, List, Optional

from pydantic import Field

from ibdiag.facts._base import Fact
from ibdiag.facts.outcome import RunOutcome
from ibdiag.roles import Role

EXTENDED_SPEEDS = "extended-speeds"  # per-lane FEC blocks, corrected and uncorrectable
RS_FEC = "rs-fec"  # RS-FEC active: per-lane corrected symbols, port block totals
LAYOUTS = (EXTENDED_SPEEDS, RS_FEC)
LANES = 12
FAMILY = "perfquery_fec"  # the family (and source) that reads the local ports


def fec_role(target: str) -> Role:
    """``perfquery_fec-T mlx5_0:1``: the ``perfquery -T`` of one local port."""
    return Role(FAMILY, "T", target)


_WIDTH_LANES = {"1X": 1, "2X": 2, "4X": 4, "8X": 8, "12X": 12}


class FecLane(Fact):
    """One lane's counters (None: not in this layout, or not read).

    ``corrected_blocks`` (``FECCorrectableBlockCtrLaneN``), ``uncorrected_blocks``
    (``FECUncorrectableBlockCtrLaneN``) and ``error_detection`` (``ErrorDetectionCounterLaneN``)
    are the extended-speeds layout's; ``corrected_symbols`` (``FECCorrectableSymbolCtrLaneN``)
    the RS-FEC layout's."""

    lane: int
    corrected_blocks: Optional[int] = None
    uncorrected_blocks: Optional[int] = None
    corrected_symbols: Optional[int] = None
    error_detection: Optional[int] = None

    @property
    def corrected(self) -> Optional[int]:
        """What FEC corrected on this lane, in the layout's unit (blocks, or RS-FEC symbols)."""
        blocks = self.corrected_blocks
        return blocks if blocks is not None else self.corrected_symbols


class PortFec(Fact, fact_name="fec"):
    """One port's ``perfquery -T`` (PortExtendedSpeedsCounters), parsed once.

    - ``layout``: ``extended-speeds`` or ``rs-fec`` (module doc); None when nothing was read;
    - ``lid``, ``port``: whose counters (the header's ``Lid N port P``);
    - ``sync_header_errors`` (``SyncHeaderErrorCounter``), ``unknown_blocks``
      (``UnknownBlockCounter``);
    - ``lanes``: lanes 0..11 as printed (``FecLane``);
    - the port's totals: ``corrected_blocks`` and ``uncorrected_blocks`` (RS-FEC:
      ``PortFECCorrectableBlockCtr``/``PortFECUncorrectableBlockCtr``; extended-speeds: the sum
      over the lanes), ``corrected_symbols`` (RS-FEC: ``PortFECCorrectedSymbolCtr``);
    - ``mad_error``: perfquery's own failure line (``cannot query PortExtendedSpeedsCounters``:
      the port's PMA does not implement them - the ibsim simulator, older HCAs and switches);
    - ``problems``: what could not be read (garbage, "N/A", a truncated field list);
    - ``outcome``: what became of the run (``RunOutcome``; ``no_data`` ``not-supported`` when the
      PMA does not implement the attribute). None on a hand-built fact.
    """

    layout: Optional[str] = None
    lid: Optional[int] = None
    port: Optional[int] = None
    sync_header_errors: Optional[int] = None
    unknown_blocks: Optional[int] = None
    lanes: List[FecLane] = Field(default_factory=list)
    corrected_blocks: Optional[int] = None
    uncorrected_blocks: Optional[int] = None
    corrected_symbols: Optional[int] = None
    mad_error: Optional[str] = None
    problems: List[str] = Field(default_factory=list)
    outcome: Optional[RunOutcome] = None

    @property
    def read(self) -> bool:
        """Whether counters were read (a layout, and the run gave data)."""
        no_data = self.outcome is not None and self.outcome.no_data is not None
        return self.layout is not None and not no_data and self.mad_error is None

    def lane_corrected(self) -> Dict[int, int]:
        """What FEC corrected per lane (blocks, or RS-FEC symbols), for the lanes read."""
        found = {lane.lane: lane.corrected for lane in self.lanes}
        return {lane: value for lane, value in found.items() if value is not None}

    def lanes_in_use(self, width: Optional[str]) -> List[int]:
        """The lanes a link of ``width`` (``4X``) counts on: the first N of them; without a
        width, the lanes up to the last one that counted anything (at least lane 0)."""
        count = _WIDTH_LANES.get((width or "").upper())
        if count is None:
            counted = [lane.lane for lane in self.lanes if any(
                (lane.corrected, lane.uncorrected_blocks, lane.error_detection)
            )]  # fmt: skip
            count = max(counted) + 1 if counted else 1
        return list(range(count))

    def saturated(self) -> List[str]:
        """The counters stuck at their width's maximum (65535, 4294967295): a PMA counter
        stops there instead of wrapping, so it counts nothing more until it is reset."""
        fields = [
            ("SyncHeaderErrorCounter", self.sync_header_errors, 16),
            ("UnknownBlockCounter", self.unknown_blocks, 16),
        ]
        if self.layout == RS_FEC:  # the extended-speeds totals are sums of lanes, not counters
            fields += [
                ("PortFECCorrectableBlockCtr", self.corrected_blocks, 32),
                ("PortFECUncorrectableBlockCtr", self.uncorrected_blocks, 32),
                ("PortFECCorrectedSymbolCtr", self.corrected_symbols, 32),
            ]
        found = [name for name, value, bits in fields if value == 2**bits - 1]
        for lane in self.lanes:
            for name, value, bits in (
                ("ErrorDetectionCounterLane", lane.error_detection, 16),
                ("FECCorrectableBlockCtrLane", lane.corrected_blocks, 32),
                ("FECUncorrectableBlockCtrLane", lane.uncorrected_blocks, 32),
                ("FECCorrectableSymbolCtrLane", lane.corrected_symbols, 32),
            ):
                if value == 2**bits - 1:
                    found.append(f"{name}{lane.lane}")
        return found

    @property
    def lane_unit(self) -> str:
        return "corrected symbols" if self.layout == RS_FEC else "corrected blocks"
