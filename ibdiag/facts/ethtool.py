"""ethtool -S: the statistics of the physical port behind a netdev (RoCE and IPoIB), typed.

``NetDev.ethtool`` holds them for every netdev ``ethtool -S <netdev>`` was run for (level
standard); None when it was not collected. A run that gave no data leaves ``counters`` empty
and says why in ``outcome`` (``ibdiag.facts.outcome``: not installed, no statistics from this
driver, timed out...). Healthy: no error counter (``*_phy`` symbol/CRC errors, discards,
``link_down_events_phy``) increasing between two snapshots.
"""

from typing import Dict, List, Optional

from pydantic import Field

from ibdiag.facts._base import Fact
from ibdiag.facts.outcome import RunOutcome
from ibdiag.roles import RoleField


class EthtoolStats(Fact):
    """The counters ``ethtool -S`` printed, by the driver's names (``rx_crc_errors_phy``).

    ``error``: ethtool's own complaint when it printed one instead of counters ("Cannot get
    stats information", "no stats available"); ``problems``: lines the parser could not read
    (capped), e.g. "no counters in ethtool -S output". ``outcome``: what became of the run (its
    ``no_data`` None: it exited 0 and these counters are what it printed).
    """

    role: Optional[RoleField] = None  # the run it came from (ibdiag.roles.ethtool_stats)
    counters: Dict[str, int] = Field(default_factory=dict)
    error: Optional[str] = None
    problems: List[str] = Field(default_factory=list)
    outcome: Optional[RunOutcome] = None  # None: a reading stored without one
