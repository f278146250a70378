"""The mlxlink/mstlink ``--json`` texts the module tests read (tests/captures/mlxlink, see its
SOURCES.md) and the degraded copies made from the healthy one, each mutation named here."""

from __future__ import annotations

import copy
import json
import os
from typing import Any, Callable, Dict

FOLDER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "captures",
                      "mlxlink")  # fmt: skip
HEALTHY_NAME = "mlxlink-ndr-osfp-healthy.json"
MODULE = "Module Info"
COUNTERS = "Physical Counters and BER Info"


def path(name: str) -> str:
    return os.path.join(FOLDER, name)


def capture(name: str) -> str:
    with open(path(name), encoding="utf-8") as handle:
        return handle.read()


def healthy() -> Dict[str, Any]:
    return json.loads(capture(HEALTHY_NAME))


def _output(doc: Dict[str, Any], section: str) -> Dict[str, Any]:
    return doc["result"]["output"][section]


def ber_1e8(doc: Dict[str, Any]) -> None:
    """Effective Physical BER 1E-8 (fails phy.ber)."""
    _output(doc, COUNTERS)["Effective Physical BER"] = "1E-8"


def ber_warn(doc: Dict[str, Any]) -> None:
    """Effective Physical BER 5E-11 (between 1e-12 and 1e-9: warns phy.ber)."""
    _output(doc, COUNTERS)["Effective Physical BER"] = "5E-11"


def rx_under_low_alarm(doc: Dict[str, Any]) -> None:
    """Rx power of lane 1 -12.5 dBm, under the low alarm -10.41."""
    _output(doc, MODULE)["Rx Power Current [dBm]"] = "1.886,-12.5,2.281,1.976 [-10.41..6]"


def los_lane_2(doc: Dict[str, Any]) -> None:
    """Rx LOS on lane 2."""
    _output(doc, MODULE)["Rx LOS [per lane]"] = {"values": ["0", "0", "1", "0"]}


def cdr_lol_lane_3(doc: Dict[str, Any]) -> None:
    """Rx CDR LOL on lane 3."""
    _output(doc, MODULE)["Rx CDR LOL [per lane]"] = {"values": ["0", "0", "0", "1"]}


def hot(doc: Dict[str, Any]) -> None:
    """Module temperature 78 C, over its 75 C high alarm."""
    _output(doc, MODULE)["Temperature [C]"] = "78 [-5..75]"


def status_error(doc: Dict[str, Any]) -> None:
    """status.code 1 and no counters (as when mlxlink fails a register read)."""
    doc["status"] = {"code": 1, "message": "-E- Failed to get PDDR register"}
    del doc["result"]["output"][COUNTERS]


def not_available(doc: Dict[str, Any]) -> None:
    """ "N/A" everywhere a link down or a module without DDM prints it."""
    module = _output(doc, MODULE)
    for key in ("Temperature [C]", "Rx Power Current [dBm]", "Tx Power Current [dBm]",
                "Bias Current [mA]", "Vendor Serial Number", "Transfer Distance [m]"):  # fmt: skip
        module[key] = "N/A"
    module["Rx LOS [per lane]"] = {"values": ["N/A", "N/A", "N/A", "N/A"]}
    counters = _output(doc, COUNTERS)
    counters["Effective Physical BER"] = "N/A"
    counters["Raw Physical BER"] = "N/A"


def odd_ranges(doc: Dict[str, Any]) -> None:
    """Values with range suffixes that are odd: a unit in the value, a range with low above
    high, a range that is not numbers, a garbage lane."""
    module = _output(doc, MODULE)
    module["Transfer Distance [m]"] = "50m"
    module["Temperature [C]"] = "54 [75..-5]"
    module["Voltage [mV]"] = "3261.2 [low..high]"
    module["Tx Power Current [dBm]"] = "1.562,abc,1.559,1.761 [-8.508..5]"


def copper(doc: Dict[str, Any]) -> None:
    """A passive copper cable (DAC): no DDM, no optics, no temperature."""
    module = _output(doc, MODULE)
    module["Cable Type"] = "Passive copper cable"
    module["Digital Diagnostic Monitoring"] = "No"
    for key in ("Temperature [C]", "Voltage [mV]", "Rx Power Current [dBm]",
                "Tx Power Current [dBm]", "Bias Current [mA]", "Wavelength [nm]"):  # fmt: skip
        module[key] = "N/A"
    for key in list(module):
        if key.endswith("[per lane]"):
            del module[key]


MUTATIONS: Dict[str, Callable[[Dict[str, Any]], None]] = {
    "ber-1e-8": ber_1e8,
    "ber-5e-11": ber_warn,
    "rx-under-low-alarm": rx_under_low_alarm,
    "los-lane-2": los_lane_2,
    "cdr-lol-lane-3": cdr_lol_lane_3,
    "hot": hot,
    "status-error": status_error,
    "n-a": not_available,
    "odd-ranges": odd_ranges,
    "copper": copper,
}


def degraded(name: str) -> str:
    """The healthy capture with mutation ``name`` applied, as mlxlink's JSON text."""
    doc = copy.deepcopy(healthy())
    MUTATIONS[name](doc)
    return json.dumps(doc, indent="\t")
