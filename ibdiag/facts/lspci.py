"""ACS (Access Control Services) control of the PCIe bridges between GPUs and HCAs, as
``lspci -vvv -s <BDF>`` prints it (``ibdiag.families.lspci``; level standard).

Sysfs has no text attribute for a bridge's ACS control register; lspci decodes it from the
config space (``ls-ecaps.c``, ``cap_acs``)::

    Capabilities: [2a0 v1] Access Control Services
        ACSCap: SrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans+
        ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-

Extended capabilities are past the 64 bytes of config space a user that is not root may read:
lspci then prints ``Capabilities: <access denied>`` (``denied``), and ACS cannot be judged.

Healthy: on every bridge between a GPU and its HCA, ``ReqRedir-`` and ``CmpltRedir-`` (and
``SrcValid-``): peer-to-peer requests are routed inside the PCIe switch, not redirected up to
the root complex.
"""

from typing import Dict, List, Optional

from pydantic import Field

from ibdiag.facts._base import Fact
from ibdiag.facts.outcome import RunOutcome

REDIRECT_BITS = ("SrcValid", "ReqRedir", "CmpltRedir")


class BridgeAcs(Fact):
    """One bridge's ACS as lspci showed it. ``has_acs``: None when it could not be told (the
    run gave no data, or capabilities were denied); ``acs_ctl``: each ACSCtl bit by name."""

    bdf: str
    outcome: RunOutcome
    denied: bool = False
    has_acs: Optional[bool] = None
    acs_ctl: Dict[str, bool] = Field(default_factory=dict)
    problems: List[str] = Field(default_factory=list)

    def redirects(self) -> List[str]:
        """The redirect bits that are on (``["SrcValid", "ReqRedir", "CmpltRedir"]``)."""
        return [name for name in REDIRECT_BITS if self.acs_ctl.get(name)]


class LspciAcs(Fact, fact_name="lspci_acs"):
    """Each bridge read (``Snapshot.facts["lspci_acs"]``), by BDF."""

    bridges: Dict[str, BridgeAcs] = Field(default_factory=dict)
