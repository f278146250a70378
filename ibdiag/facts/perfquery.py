"""perfquery: a port's PMA counters as the subnet manager reads them, typed.

``Port.perfquery`` holds one ``PortPma`` per port perfquery was run for (level standard, an
ACTIVE InfiniBand port); None when it was not collected. Healthy: ``counters`` read (by
``perfquery -x``, or by plain ``perfquery`` on an HCA without extended counters) with no MAD
error, and no error counter increasing between two snapshots.

A reading is made only of a run that exited 0; what became of every run of the port (why one
gave no data) is in ``PortPma.runs`` (``ibdiag.facts.outcome``).
"""

from typing import Dict, List, Optional

from pydantic import Field

from ibdiag.facts._base import Fact
from ibdiag.facts.outcome import RunOutcome
from ibdiag.roles import RoleField


class PmaReading(Fact):
    """What one perfquery answer printed (``ibdiag.families.perfquery.parse_perfquery``):
    its counters by perfquery's (current) names, decimal counts only.

    ``mad_error``: the tool's own failure line (``ibwarn``/``iberror``: a VM without a PMA, a
    MAD timeout) when it printed one instead of counters. ``problems``: lines the parser could
    not make sense of (capped), e.g. "no counters found in perfquery output". ``header``,
    ``kind`` (``port``, ``extended``, ``rcv_error_details``, ``xmit_data_sl``...), ``lid``,
    ``port`` (from the header), ``port_select`` (the PortSelect field), ``cap_mask`` and the
    hex-valued fields (``CounterSelect``: masks, not counts) say whose answer it is.
    """

    role: Optional[RoleField] = None  # the run it came from (ibdiag.roles.perfquery): evidence
    counters: Dict[str, int] = Field(default_factory=dict)
    mad_error: Optional[str] = None
    problems: List[str] = Field(default_factory=list)
    header: Optional[str] = None
    kind: Optional[str] = None
    lid: Optional[int] = None
    port: Optional[int] = None
    port_select: Optional[int] = None
    cap_mask: Optional[int] = None
    hex_fields: Dict[str, int] = Field(default_factory=dict)


class PortPma(Fact):
    """A port's perfquery readings; each None when its run did not succeed (or did not run).

    - ``counters``: the PortCounters, from ``perfquery -x`` (role ``perfquery-x <target>``) or,
      when -x did not succeed, its fallback plain ``perfquery`` (``perfquery-basic <target>``):
      the error counters and the data/packet counters.
    - ``rcv_error_details``: ``perfquery -E`` PortRcvErrorDetails (local physical vs malformed
      vs overrun receive errors).
    - ``xmit_data_sl``: ``perfquery -X`` PortXmitDataSL (transmit data per service level, in
      4-byte words; optional: old firmware lacks it).
    - ``runs``: what became of each run of the port, by mode (``x``, ``basic``, ``E``, ``X``).
    """

    counters: Optional[PmaReading] = None
    rcv_error_details: Optional[PmaReading] = None
    xmit_data_sl: Optional[PmaReading] = None
    runs: Dict[str, RunOutcome] = Field(default_factory=dict)
