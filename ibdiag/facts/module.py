"""The cable's module as the HCA's firmware reads it: BER, optics per lane, temperature and
identity, from ``mlxlink`` (NVIDIA MFT) or ``mstlink`` (mstflint) ``-m -c --json``, typed.

``Port.facts["module"]`` holds one ``ModuleReading`` per port the ``module`` family ran for
(level standard: ``ibdiag.families.module``). Healthy: effective BER at or below 1e-12, every
lane's Rx/Tx power and Tx bias inside the module's own thresholds, no LOS or CDR LOL on a lane,
the module's temperature inside its own range.

Units as the tool prints them: power in dBm, bias in mA, temperature in Celsius, voltage in mV.
The thresholds come from the module itself (its DDM page, read through PDDR): mstflint prints
one ``[low..high]`` range after each value (``getValueAndThresholdsStr``), which the module's
``*_high_th``/``*_low_th`` alarm fields give; so the ranges read are the *alarm* thresholds and
the *warning* ones stay None unless a tool prints them.
"""

import re
from typing import List, Optional, Tuple

from pydantic import Field

from ibdiag.facts._base import Fact
from ibdiag.facts.outcome import RunOutcome
from ibdiag.roles import Role

FAMILY = "module"
MLXLINK = "mlxlink"
MSTLINK = "mstlink"


def module_role(tool: str, target: str) -> Role:
    """``module-mlxlink mlx5_0:1`` (or ``module-mstlink ...``, the fallback)."""
    return Role(FAMILY, tool, target)


class Bounds(Fact):
    """A ``[low..high]`` range; either end None when not read."""

    low: Optional[float] = None
    high: Optional[float] = None

    def outside(self, value: float) -> Optional[str]:
        """``"below"``/``"above"`` when ``value`` is outside the range; None inside it."""
        if self.low is not None and value < self.low:
            return "below"
        if self.high is not None and value > self.high:
            return "above"
        return None

    def __str__(self) -> str:
        return f"[{_num(self.low)}..{_num(self.high)}]"


def _num(value: Optional[float]) -> str:
    return "?" if value is None else f"{value:g}"


class CableIdentity(Fact):
    """Who made the module and which one it is (``Module Info``): what a support ticket, an RMA
    and the fleet's "6 cables of part X, lot Y" need. Every field None when not read."""

    vendor: Optional[str] = None  # "Vendor Name"
    part_number: Optional[str] = None  # "Vendor Part Number"
    serial: Optional[str] = None  # "Vendor Serial Number"
    revision: Optional[str] = None  # "Rev" (mstflint), "Vendor Revision"
    firmware: Optional[str] = None  # "FW Version" (the module's own firmware)
    date_code: Optional[str] = None  # "YYMMDD" (split_date_code)
    lot: Optional[str] = None  # the vendor's 2-character lot code after the date, if any
    length_m: Optional[float] = None  # "Transfer Distance [m]" / "Cable Length [m]"
    cable_type: Optional[str] = None  # "Cable Type": "Optical Module (separated)", ...
    identifier: Optional[str] = None  # "Identifier": OSFP, QSFP28, QSFP-DD...
    oui: Optional[str] = None  # "OUI"
    compliance: Optional[str] = None  # "Compliance"
    wavelength_nm: Optional[float] = None  # "Wavelength [nm]"


_DATE_CODE = re.compile(r"^(\d{2})[_\-/ ]?(\d{2})[_\-/ ]?(\d{2})(?:[_\-/ ]?([A-Za-z0-9]{1,2}))?$")
_ISO_DATE = re.compile(r"^(?:19|20)(\d{2})-(\d{2})-(\d{2})(?:\s+([A-Za-z0-9]{1,2}))?$")


def split_date_code(text: Optional[str]) -> Tuple[Optional[str], Optional[str]]:
    """The one place a module's date code is split into (``YYMMDD``, lot).

    SFF-8636 (bytes 212-219) and CMIS (page 00h bytes 182-189) store 8 ASCII characters:
    year, month, day (2 each) and an optional 2-character vendor lot code. mstflint prints
    them as ``YY_MM_DD_LL`` (``MlxlinkAmBerCollector::getDateCode``: an ``_`` after every
    two characters, blanks and a trailing ``_`` trimmed); ethtool and others print
    ``YYMMDD[LL]`` or ``YYYY-MM-DD``. (None, None) for anything else (N/A, garbage) - a month
    above 12 or a day above 31 is garbage too."""
    if text is None:
        return None, None
    text = text.strip()
    match = _ISO_DATE.match(text) or _DATE_CODE.match(text)
    if match is None:
        return None, None
    year, month, day, lot = match.groups()
    if not (1 <= int(month) <= 12 and 1 <= int(day) <= 31):
        return None, None
    lot = (lot or "").strip() or None
    return f"{year}{month}{day}", lot


class ModuleLane(Fact):
    """One lane of the module (lane 0 first, as mlxlink lists its active lanes)."""

    lane: int
    rx_power_dbm: Optional[float] = None
    tx_power_dbm: Optional[float] = None
    tx_bias_ma: Optional[float] = None
    los: Optional[bool] = None  # "Rx LOS [per lane]": no light / signal received
    tx_los: Optional[bool] = None  # "Tx LOS [per lane]"
    cdr_lol: Optional[bool] = None  # "Rx CDR LOL [per lane]": the receiver lost lock
    tx_cdr_lol: Optional[bool] = None  # "Tx CDR LOL [per lane]"
    tx_fault: Optional[bool] = None  # "Tx Fault [per lane]"
    datapath_state: Optional[str] = None  # "DataPath state [per lane]" (CMIS): DPActivated...
    raw_ber: Optional[float] = None  # "Raw Physical BER Per Lane"
    raw_errors: Optional[int] = None  # "Raw Physical Errors Per Lane"


class ModuleReading(Fact, fact_name="module"):
    """One port's ``mlxlink``/``mstlink -m -c --json``, parsed once.

    - ``tool``: which one gave it (``mlxlink`` or its fallback ``mstlink``); None: neither did;
    - ``identity``: the cable (``CableIdentity``); None when no Module Info was printed;
    - ``temperature_c`` with ``temperature_alarm_c`` (the module's own range) and
      ``temperature_warning_c`` (None: mlxlink prints one range);
    - ``voltage_mv`` with ``voltage_alarm_mv``;
    - ``lanes``: per lane Rx/Tx power, Tx bias, LOS, CDR LOL, DataPath state, raw BER;
    - ``rx_power_alarm_dbm``/``_warning_dbm``, ``tx_power_alarm_dbm``/``_warning_dbm``,
      ``tx_bias_alarm_ma``/``_warning_ma``: the module's own thresholds;
    - ``ddm``: the module reports digital diagnostics (optics, temperature); False for a
      passive copper cable ("Digital Diagnostic Monitoring: No"), None when not said;
    - ``effective_ber`` (after FEC: "Effective Physical BER"), ``raw_ber`` (before it:
      "Raw Physical BER"), ``raw_ber_lanes`` (per lane, None where unread), ``symbol_ber``,
      ``effective_errors``;
    - ``state``, ``physical_state``, ``speed``, ``width``: "Operational Info";
    - ``status_code``, ``status_message``: the tool's own ``status`` (0, "success");
    - ``problems``: every value that was N/A, out of range or garbage, one line each;
    - ``outcome``: what became of the run the reading came from (why there is none).
    """

    tool: Optional[str] = None
    identity: Optional[CableIdentity] = None
    temperature_c: Optional[float] = None
    temperature_alarm_c: Optional[Bounds] = None
    temperature_warning_c: Optional[Bounds] = None
    voltage_mv: Optional[float] = None
    voltage_alarm_mv: Optional[Bounds] = None
    lanes: List[ModuleLane] = Field(default_factory=list)
    rx_power_alarm_dbm: Optional[Bounds] = None
    rx_power_warning_dbm: Optional[Bounds] = None
    tx_power_alarm_dbm: Optional[Bounds] = None
    tx_power_warning_dbm: Optional[Bounds] = None
    tx_bias_alarm_ma: Optional[Bounds] = None
    tx_bias_warning_ma: Optional[Bounds] = None
    ddm: Optional[bool] = None
    effective_ber: Optional[float] = None
    raw_ber: Optional[float] = None
    raw_ber_lanes: List[Optional[float]] = Field(default_factory=list)
    symbol_ber: Optional[float] = None
    effective_errors: Optional[int] = None
    state: Optional[str] = None
    physical_state: Optional[str] = None
    speed: Optional[str] = None
    width: Optional[str] = None
    status_code: Optional[int] = None
    status_message: Optional[str] = None
    problems: List[str] = Field(default_factory=list)
    outcome: RunOutcome

    @property
    def has_data(self) -> bool:
        return self.outcome.no_data is None and self.tool is not None

    @property
    def copper(self) -> bool:
        """A cable without optics to grade: no DDM, or a passive copper cable type."""
        kind = ((self.identity.cable_type if self.identity else None) or "").lower()
        return self.ddm is False or "copper" in kind or "passive" in kind
