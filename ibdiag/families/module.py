"""The module family: each port's cable module - BER, optics per lane, temperature, identity -
from ``mlxlink`` (NVIDIA MFT) or, when it is not installed, ``mstlink`` (the open mstflint).

**What it plans** (level standard): ``mlxlink -d DEV -p PORT -m -c --json`` for every port of
every NVIDIA/Mellanox HCA (InfiniBand and Ethernet alike), with ``mstlink`` and the same
arguments as its ``fallback`` (tried at once when mlxlink gives nothing usable: not installed,
failed). All ports run concurrently under the runner's deadline and its per-command timeout
(``--command-timeout``, 10 s by default; mlxlink takes about 0.8 s a device). Read-only: never
``mst start``, never a ``--port_state``, ``--pc`` (counter clear) or any other setting. Never
in ``/metrics``: ``serve`` renders no tool. Planned ``refused`` (recorded as never started, with
why): a device or port name that may not go on a command line; a device that is no NVIDIA/
Mellanox HCA (mlxlink reads the NVIDIA firmware's PDDR/PPCNT registers: an ``rxe``, ``irdma``,
``hfi1``... has none); an SR-IOV virtual function (``ibdiag.hca_capabilities.is_virtual_function``:
"mlxlink needs the PF": the registers are the physical function's; run it on the host).

**What it gives**: ``Port.facts["module"]`` (``ibdiag.facts.module.ModuleReading``) on every
port it planned, with the outcome: read, or why not - not installed (neither tool), no device
(mstflint's ``-E- Failed to open device``: no mst/PCI access from here, a container),
not-supported (``No plugged cable detected``), refused, timed out.

**The JSON** (mstflint ``mlxlink/modules/printutil/mlxlink_cmd_print.cpp``
``MlxlinkCmdPrint::toJsonFormat`` and ``mlxlink_commander.cpp``)::

    {"result": {"output": {"Operational Info": {"State": "Active", ...},
                           "Module Info": {"Temperature [C]": "48 [-5..75]",
                                           "Rx Power Current [dBm]": "0,2,-9,0 [-8..6]",
                                           "Rx LOS [per lane]": {"values": ["0", ...]}, ...},
                           "Physical Counters and BER Info": {"Effective Physical BER": "15E-255",
                                                              ...}}},
     "status": {"code": 0, "message": "success"}}

Each section title a key of ``result.output``; each record a string, or ``{"values": [...]}``
for a per-lane record. A value with its thresholds is ``VALUE [LOW..HIGH]``
(``getValueAndThresholdsStr``), per-lane values joined by commas; ``N/A`` when not read.
Parsers never raise: odd values are recorded problems.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Tuple, Union

from ibdiag.facts.module import (
    MLXLINK,
    MSTLINK,
    Bounds,
    CableIdentity,
    ModuleLane,
    ModuleReading,
    module_role,
    split_date_code,
)
from ibdiag.facts.outcome import NoData, RunOutcome
from ibdiag.families import Planned, Runs, Update, outcome_of
from ibdiag.families._text import as_text
from ibdiag.hca_capabilities import is_virtual_function
from ibdiag.model import CommandRun, Device, Snapshot
from ibdiag.sources import names

SOURCE = "module"
LEVEL = "standard"
ORDER = 40

NVIDIA_VENDOR = "0x15b3"
VF_REFUSED = (
    "{dev} is an SR-IOV virtual function: mlxlink needs the PF (the module's registers are the "
    "physical function's; read it on the host)"
)
NOT_NVIDIA = "{dev} is no NVIDIA/Mellanox HCA: mlxlink/mstlink read only their firmware's registers"
NEITHER = "neither mlxlink (NVIDIA MFT) nor mstlink (mstflint) is installed"

_NO_DEVICE = re.compile(r"Failed to open device|Unable to read link|No such device", re.I)
_NO_CABLE = re.compile(r"No plugged cable|No cable|No module", re.I)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RANGE = re.compile(r"^(.*?)\s*\[\s*([^\]]*?)\s*\.\.\s*([^\]]*?)\s*\]\s*$")
_NA = ("n/a", "na", "")

OPERATIONAL = "Operational Info"
MODULE = "Module Info"
COUNTERS = "Physical Counters and BER Info"
RAW_BER_LANES = "Raw Physical BER Per Lane"
RAW_ERRORS_LANES = "Raw Physical Errors Per Lane"


def argv(tool: str, device: str, port: int) -> List[str]:
    return [tool, "-d", device, "-p", str(port), "-m", "-c", "--json"]


def refusal(dev: Device, port_number: int) -> Optional[str]:
    """Why ``mlxlink`` may not run for this port (module docstring); None: it may."""
    why = names.device_name_problem(dev.name) or names.port_problem(port_number)
    if why:
        return why
    vendor = (dev.pci.vendor_id or "").strip().lower() if dev.pci else ""
    if not dev.name.startswith("mlx") and vendor != NVIDIA_VENDOR:
        return NOT_NVIDIA.format(dev=dev.name)
    if is_virtual_function(dev):
        return VF_REFUSED.format(dev=dev.name)
    return None


def plan(snap: Snapshot) -> List[Planned]:
    """mlxlink (mstlink as its fallback) for every port of every HCA (module docstring)."""
    planned = []
    for dev in snap.devices:
        for port in dev.ports:
            target = dev.target(port)
            why = refusal(dev, port.number)
            fallback = None
            if why is None:
                fallback = Planned(
                    module_role(MSTLINK, target), argv(MSTLINK, dev.name, port.number)
                )
            command = argv(MLXLINK, dev.name, port.number)
            planned.append(Planned(module_role(MLXLINK, target), command, fallback, why))
    return planned


def interpret(snap: Snapshot, runs: Runs) -> Update:
    """``Port.facts["module"]`` on every port mlxlink or mstlink was planned for."""
    found: Dict[str, Dict[str, Dict[str, ModuleReading]]] = {}
    for dev in snap.devices:
        for port in dev.ports:
            target = dev.target(port)
            first = runs.get(module_role(MLXLINK, target))
            second = runs.get(module_role(MSTLINK, target))
            if first is None and second is None:
                continue
            found[target] = {"facts": {"module": reading(first, second)}}
    return Update(ports=found)


def reading(first: Optional[CommandRun], second: Optional[CommandRun]) -> ModuleReading:
    """The reading of the first run (mlxlink, then mstlink) that gave one; else why neither
    did, told by the one that is installed (mlxlink's first)."""
    tried = [(tool, run) for tool, run in ((MLXLINK, first), (MSTLINK, second)) if run is not None]
    judged = [(tool, run, _judge(run)) for tool, run in tried]
    for tool, run, outcome in judged:
        parsed = parse_module(run.stdout)
        if parsed.tool is not None and (outcome.no_data is None or _has_values(parsed)):
            if outcome.no_data is not None:  # exited non-zero yet printed its sections
                parsed = parsed.model_copy(
                    update={"problems": [*parsed.problems, outcome.reason or "non-zero exit"]}
                )
                outcome = outcome.model_copy(update={"no_data": None, "reason": None})
            return parsed.model_copy(update={"tool": tool, "outcome": outcome})
    outcomes = [outcome for _, _, outcome in judged]
    installed = [o for o in outcomes if o.no_data != NoData.NOT_INSTALLED]
    if not installed:
        last = outcomes[-1]
        return ModuleReading(outcome=last.model_copy(update={"reason": NEITHER}))
    outcome = installed[0]
    if outcome.no_data is None:  # exited 0 but nothing parsed
        parsed = parse_module(tried[outcomes.index(outcome)][1].stdout)
        why = parsed.problems[0] if parsed.problems else "no JSON output"
        outcome = outcome.model_copy(
            update={"no_data": NoData.GARBAGE, "reason": f"{outcome.tool}: {why}"}
        )
        return ModuleReading(problems=parsed.problems, status_code=parsed.status_code,
                             status_message=parsed.status_message, outcome=outcome)  # fmt: skip
    return ModuleReading(outcome=outcome)


def _has_values(parsed: ModuleReading) -> bool:
    return parsed.identity is not None or parsed.effective_ber is not None or bool(parsed.lanes)


def _judge(run: CommandRun) -> RunOutcome:
    """``outcome_of`` with what only this family knows: mstflint's ``Failed to open device``
    is no device from here; ``No plugged cable detected`` is nothing to read (not-supported)."""
    outcome = outcome_of(run)
    if outcome.no_data not in (NoData.FAILED, NoData.NO_DEVICE):
        return outcome
    text = _ANSI.sub("", f"{run.stderr}\n{run.stdout}")
    message = _status_message(run.stdout)
    if _NO_CABLE.search(message or "") or _NO_CABLE.search(text):
        why = (message or "no plugged cable detected").strip().splitlines()[0]
        return outcome.model_copy(
            update={"no_data": NoData.NOT_SUPPORTED, "reason": f"{outcome.tool}: {why}"}
        )
    lines = [line for line in text.splitlines() if _NO_DEVICE.search(line)]
    # mstflint's own "-E- Failed to open device: ..." says it best; else the first such line.
    match = next((line for line in lines if "-E-" in line), lines[0] if lines else None)
    if match is not None:
        reason = f"{outcome.tool} cannot open the device from here: {match.strip()[:200]}"
        return outcome.model_copy(update={"no_data": NoData.NO_DEVICE, "reason": reason})
    return outcome


def _status_message(text: str) -> Optional[str]:
    document = _load(text)
    status = document.get("status") if isinstance(document, dict) else None
    message = status.get("message") if isinstance(status, dict) else None
    return message if isinstance(message, str) else None


def _load(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        start = text.find("{")  # a banner line before the JSON
        if start > 0:
            try:
                return json.loads(text[start:])
            except ValueError:
                return None
        return None


# -- the parser --------------------------------------------------------------------------------


def parse_module(text: Union[str, bytes, None]) -> ModuleReading:
    """mlxlink/mstlink ``--json`` output typed; ``tool`` None (with the reason in
    ``problems``) when it holds no ``result.output`` sections. The caller sets ``tool`` to the
    program that printed it and ``outcome`` to its run's."""
    placeholder = RunOutcome(command="")
    document = _load(_ANSI.sub("", as_text(text)))
    if not isinstance(document, dict):
        return ModuleReading(problems=["no JSON object in the output"], outcome=placeholder)
    problems: List[str] = []
    code, message = _status(document.get("status"), problems)
    result = document.get("result")
    output = result.get("output") if isinstance(result, dict) else None
    if not isinstance(output, dict) or not output:
        problems.append("no result.output sections")
        return ModuleReading(status_code=code, status_message=message, problems=problems,
                             outcome=placeholder)  # fmt: skip
    reader = _Reader(output, problems)
    fields = _module_fields(reader)
    fields.update(_counter_fields(reader, fields["lanes"]))
    operational = reader.section(OPERATIONAL)
    for key, name in (("State", "state"), ("Physical state", "physical_state"),
                      ("Speed", "speed"), ("Width", "width")):  # fmt: skip
        fields[name] = reader.text(operational, key, OPERATIONAL)
    return ModuleReading(tool="parsed", status_code=code, status_message=message,
                         problems=problems, outcome=placeholder, **fields)  # fmt: skip


def _status(status: Any, problems: List[str]) -> Tuple[Optional[int], Optional[str]]:
    if not isinstance(status, dict):
        return None, None
    code = status.get("code")
    message = status.get("message")
    message = message.strip() if isinstance(message, str) else None
    if isinstance(code, str) and code.strip().lstrip("-").isdigit():
        code = int(code)
    if not isinstance(code, int) or isinstance(code, bool):
        problems.append(f"status.code {code!r} is not a number")
        code = None
    elif code != 0:
        problems.append(f"status.code {code}: {message or 'no message'}")
    return code, message


class _Reader:
    """Reads values from the output's sections, recording each odd one in ``problems``."""

    def __init__(self, output: Dict[str, Any], problems: List[str]) -> None:
        self.output = output
        self.problems = problems

    def section(self, title: str) -> Dict[str, Any]:
        value = self.output.get(title)
        return value if isinstance(value, dict) else {}

    def raw(self, section: Dict[str, Any], *keys: str) -> Tuple[Optional[str], Any]:
        for key in keys:
            if key in section:
                return key, section[key]
        return None, None

    def text(self, section: Dict[str, Any], key: str, title: str, *more: str) -> Optional[str]:
        found, value = self.raw(section, key, *more)
        if found is None:
            return None
        if not isinstance(value, str):
            self.problems.append(f"{title} / {found}: {value!r} is not text")
            return None
        value = _ANSI.sub("", value).strip()
        if value.lower() in _NA:
            self.problems.append(f"{found}: N/A")
            return None
        return value

    def number(self, section: Dict[str, Any], key: str, title: str, *more: str) -> Optional[float]:
        value = self.text(section, key, title, *more)
        if value is None:
            return None
        parsed = _float(value)
        if parsed is None:
            self.problems.append(f"{key}: {value[:60]!r} is not a number")
        return parsed

    def ranged(
        self, section: Dict[str, Any], key: str
    ) -> Tuple[List[Optional[float]], Optional[Bounds]]:
        """``"1.2,-0.4,1.1,0.9 [-10.41..6]"``: the values (per lane) and the range."""
        value = self.text(section, key, MODULE)
        if value is None:
            return [], None
        bounds = None
        match = _RANGE.match(value)
        if match is not None:
            value, low, high = match.groups()
            bounds = Bounds(low=_float(low), high=_float(high))
            if bounds.low is None or bounds.high is None:
                self.problems.append(f"{key}: range [{low}..{high}] is not two numbers")
            if bounds.low is not None and bounds.high is not None and bounds.low > bounds.high:
                self.problems.append(f"{key}: range {bounds} has low above high: left out")
                bounds = None
        values: List[Optional[float]] = []
        for item in value.split(","):
            item = item.strip()
            number = _float(item)
            if number is None:
                self.problems.append(f"{key}: {item[:40]!r} is not a number")
            values.append(number)
        return values, bounds

    def lanes(self, section: Dict[str, Any], key: str, title: str) -> List[Optional[str]]:
        """A per-lane record: ``{"values": [...]}``, a list, or ``"a,b,c,d"``."""
        found, value = self.raw(section, key)
        if found is None:
            return []
        if isinstance(value, dict):
            value = value.get("values")
        if isinstance(value, str):
            value = [item for item in _ANSI.sub("", value).split(",")]
        if not isinstance(value, list):
            self.problems.append(f"{title} / {key}: {value!r} is not a list of lanes")
            return []
        items: List[Optional[str]] = []
        for item in value:
            text = str(item).strip() if isinstance(item, (str, int, float)) else None
            if text is None or text.lower() in _NA:
                self.problems.append(f"{key}: lane {len(items)} N/A")
                text = None
            items.append(text)
        return items


def _float(text: Optional[str]) -> Optional[float]:
    if text is None:
        return None
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        match = re.fullmatch(r"([-+]?\d+(?:\.\d+)?)\s*[A-Za-z%]*", text)  # "500m", "3 m"
        if match is None:
            return None
        value = float(match.group(1))
    return value if value == value and abs(value) != float("inf") else None


_TRUE = ("1", "yes", "true", "on", "y")
_FALSE = ("0", "no", "false", "off", "n")


def _flag(text: Optional[str], key: str, lane: int, problems: List[str]) -> Optional[bool]:
    if text is None:
        return None
    word = text.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    problems.append(f"{key}: lane {lane} {text[:20]!r} is not a yes/no flag")
    return None


_LANE_FLAGS = (
    ("Rx LOS [per lane]", "los"),
    ("Tx LOS [per lane]", "tx_los"),
    ("Rx CDR LOL [per lane]", "cdr_lol"),
    ("Tx CDR LOL [per lane]", "tx_cdr_lol"),
    ("Tx Fault [per lane]", "tx_fault"),
)


def _module_fields(reader: _Reader) -> Dict[str, Any]:
    info = reader.section(MODULE)
    fields: Dict[str, Any] = {}
    temperature, temp_range = reader.ranged(info, "Temperature [C]")
    fields["temperature_c"] = temperature[0] if temperature else None
    fields["temperature_alarm_c"] = temp_range
    voltage, volt_range = reader.ranged(info, "Voltage [mV]")
    fields["voltage_mv"] = voltage[0] if voltage else None
    fields["voltage_alarm_mv"] = volt_range
    rx, fields["rx_power_alarm_dbm"] = reader.ranged(info, "Rx Power Current [dBm]")
    tx, fields["tx_power_alarm_dbm"] = reader.ranged(info, "Tx Power Current [dBm]")
    bias, fields["tx_bias_alarm_ma"] = reader.ranged(info, "Bias Current [mA]")
    per_lane: Dict[str, List[Optional[str]]] = {
        name: reader.lanes(info, key, MODULE) for key, name in _LANE_FLAGS
    }
    datapath = reader.lanes(info, "DataPath state [per lane]", MODULE)
    count = max([len(rx), len(tx), len(bias), len(datapath)] + [len(v) for v in per_lane.values()])
    lanes = []
    for lane in range(count):
        flags = {
            name: _flag(_at(values, lane), key, lane, reader.problems)
            for (key, name), values in zip(_LANE_FLAGS, per_lane.values())
        }
        lanes.append(ModuleLane(lane=lane, rx_power_dbm=_at(rx, lane), tx_power_dbm=_at(tx, lane),
                                tx_bias_ma=_at(bias, lane), datapath_state=_at(datapath, lane),
                                **flags))  # fmt: skip
    fields["lanes"] = lanes
    ddm = reader.text(info, "Digital Diagnostic Monitoring", MODULE)
    fields["ddm"] = None if ddm is None else ddm.lower() in _TRUE
    fields["identity"] = _identity(reader, info) if info else None
    return fields


def _at(values: List[Any], index: int) -> Any:
    return values[index] if index < len(values) else None


_LENGTH_KEYS = ("Cable Length [m]", "Cable Length", "Length [m]")


def _identity(reader: _Reader, info: Dict[str, Any]) -> CableIdentity:
    def text(*keys: str) -> Optional[str]:
        return reader.text(info, keys[0], MODULE, *keys[1:])

    date_text = text("Manufacturing Date", "Date Code", "Vendor Date Code")
    date_code, lot = split_date_code(date_text)
    if date_text is not None and date_code is None:
        reader.problems.append(f"date code {date_text[:30]!r} is not YYMMDD[LL]")
    return CableIdentity(
        vendor=text("Vendor Name"),
        part_number=text("Vendor Part Number"),
        serial=text("Vendor Serial Number"),
        revision=text("Rev", "Vendor Revision"),
        firmware=text("FW Version"),
        date_code=date_code,
        lot=lot,
        length_m=reader.number(
            info, "Transfer Distance [m]", MODULE, "Cable Length [m]", "Cable Length"
        ),
        cable_type=text("Cable Type"),
        identifier=text("Identifier"),
        oui=text("OUI"),
        compliance=text("Compliance"),
        wavelength_nm=reader.number(info, "Wavelength [nm]", MODULE),
    )


def _counter_fields(reader: _Reader, lanes: List[ModuleLane]) -> Dict[str, Any]:
    counters = reader.section(COUNTERS)
    fields: Dict[str, Any] = {
        "effective_ber": reader.number(counters, "Effective Physical BER", COUNTERS),
        "raw_ber": reader.number(counters, "Raw Physical BER", COUNTERS),
        "symbol_ber": reader.number(counters, "Symbol BER", COUNTERS),
    }
    errors = reader.number(counters, "Effective Physical Errors", COUNTERS)
    fields["effective_errors"] = int(errors) if errors is not None and errors >= 0 else None
    raw_lanes = [_float(v) for v in reader.lanes(counters, "Raw Physical BER Per Lane", COUNTERS)]
    raw_errors = [
        _float(v) for v in reader.lanes(counters, "Raw Physical Errors Per Lane", COUNTERS)
    ]
    fields["raw_ber_lanes"] = raw_lanes
    count = max(len(lanes), len(raw_lanes), len(raw_errors))
    merged = []
    for lane in range(count):
        base = lanes[lane] if lane < len(lanes) else ModuleLane(lane=lane)
        err = _at(raw_errors, lane)
        merged.append(base.model_copy(update={
            "raw_ber": _at(raw_lanes, lane),
            "raw_errors": int(err) if err is not None and err >= 0 else None,
        }))  # fmt: skip
    lanes[:] = merged
    for name in ("effective_ber", "raw_ber", "symbol_ber"):
        value = fields[name]
        if value is not None and not 0 <= value <= 1:
            reader.problems.append(f"{name} {value:g} is not a bit error ratio (0..1): left out")
            fields[name] = None
    return fields
