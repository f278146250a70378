"""ethtool -S: the statistics of the physical port behind a netdev (RoCE and IPoIB), typed.

``NetDev.ethtool`` holds them when ``ethtool -S <netdev>`` exited 0 (level standard); None when
it was not collected or gave no usable output - ``Snapshot.run(role)`` then says why
(``ibdiag.command_results``). Healthy: no error counter (``*_phy`` symbol/CRC errors,
discards, ``link_down_events_phy``) increasing between two snapshots.
"""

from typing import Dict, List, Optional

from pydantic import Field

from ibdiag.facts._base import Fact
from ibdiag.roles import RoleField


class EthtoolStats(Fact):
    """The counters ``ethtool -S`` printed, by the driver's names (``rx_crc_errors_phy``).

    ``error``: ethtool's own complaint when it printed one instead of counters ("Cannot get
    stats information", "no stats available"); ``problems``: lines the parser could not read
    (capped), e.g. "no counters in ethtool -S output".
    """

    role: RoleField  # the run it came from (ibdiag.roles.ethtool_stats)
    counters: Dict[str, int] = Field(default_factory=dict)
    error: Optional[str] = None
    problems: List[str] = Field(default_factory=list)
