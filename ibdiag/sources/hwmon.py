"""Read an HCA's mlx5 hwmon temperatures from sysfs (level quick: files only).

Layout read (relative to the sysfs root; ``drivers/net/ethernet/mellanox/mlx5/core/hwmon.c``
registers the hwmon device named ``mlx5`` on the PCI function):

    class/infiniband/<dev>/device/hwmon/hwmonN/name            "mlx5"
    class/infiniband/<dev>/device/hwmon/hwmonN/tempK_label     "asic", "Module0", "sensor64"
    class/infiniband/<dev>/device/hwmon/hwmonN/tempK_{input,highest,crit}   millidegrees C

Cost: one listing of ``device/hwmon``, one ``name``, one listing of the hwmon directory, then
four files per channel (two channels on a cabled ConnectX-6/7). Each ``_input``, ``_highest``
and ``_crit`` read is a firmware register access (MTMP) in the driver, so nothing more than
these is read. Everything goes through the run's ``SysfsReader``: it is recorded into a
bundle's ``root/`` and replayed from it, and the read watchdog bounds it.

A file that is missing, unreadable, not a number or absurd is a problem of that sensor only;
no hwmon directory is "unavailable", not a problem.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Tuple

from ibdiag.facts._base import Fact
from ibdiag.facts.hwmon import HcaSensor, HcaSensors
from ibdiag.sources.names import shown

DRIVER_NAME = "mlx5"  # hwmon_device_register_with_info(dev, "mlx5", ...)
ATTRIBUTES = ("label", "input", "highest", "crit")
MIN_C, MAX_C = -60.0, 200.0  # beyond these a reading is garbage, not a temperature
MODULE_SENSOR_BASE = 64  # to_mtmp_module_sensor_idx(module) = 64 + module
# MTCAP's sensor_map has 64 bits (the ASIC and platform sensors), plus the one module sensor:
# a listing with more channels is not the driver's, and reading it all would cost firmware
# accesses without end.
MAX_CHANNELS = MODULE_SENSOR_BASE + 1
UNAVAILABLE = "no hwmon temperatures (kernel before 6.5, a VF, or not an mlx5 HCA)"

_HWMON_DIR = re.compile(r"^hwmon\d+$")
_CHANNEL_FILE = re.compile(r"^temp(\d+)_(label|input|highest|crit)$")
_MODULE_LABEL = re.compile(r"^module\s*(\d+)$", re.IGNORECASE)
_SENSOR_LABEL = re.compile(r"^sensor(\d+)$", re.IGNORECASE)


def device_facts(reader, device_path: str, ports: Sequence[int]) -> Dict[str, Fact]:
    """The device's ``facts`` entry: ``{"hwmon": HcaSensors}``, or nothing at all when the PCI
    function has no ``hwmon`` directory (a kernel before 6.5, a VF, not mlx5): the check says
    "not available", and a Snapshot without hwmon is the same as before hwmon was read."""
    found = read_hwmon(reader, device_path, ports)
    return {} if found is None else {"hwmon": found}


def read_hwmon(reader, device_path: str, ports: Sequence[int]) -> Optional[HcaSensors]:
    """The ``HcaSensors`` of the device at ``device_path`` (``class/infiniband/<dev>``);
    ``ports``: its port numbers (a module sensor is given the port when there is one). None
    when there is no ``device/hwmon`` directory."""
    base = f"{device_path}/device/hwmon"
    entries, problem = reader.listdir(base)
    if problem == "missing":
        return None
    if problem is not None:
        return HcaSensors(unavailable=UNAVAILABLE, problems=[f"hwmon: {problem}"])
    problems: List[str] = []
    for entry in entries:
        if not _HWMON_DIR.match(entry):
            continue
        directory = f"{base}/{entry}"
        name, problem = reader.read_text(f"{directory}/name")
        if problem is not None:
            problems.append(f"{shown(entry)}/name: {problem}")
            continue
        if (name or "").strip() != DRIVER_NAME:
            continue  # another driver's sensors on the same function: not ours to grade
        sensors, more = read_sensors(reader, directory, ports)
        return HcaSensors(hwmon=shown(directory), sensors=sensors, problems=problems + more)
    return HcaSensors(unavailable=f"no '{DRIVER_NAME}' hwmon device in {base}", problems=problems)


def read_sensors(reader, directory: str, ports: Sequence[int]) -> Tuple[List[HcaSensor], List[str]]:
    """Every ``tempK_*`` channel of the hwmon ``directory``, in channel order, and the
    problems of the directory itself."""
    entries, problem = reader.listdir(directory)
    if problem is not None:
        return [], [f"{shown(directory.rsplit('/', 1)[-1])}: {problem}"]
    channels: Dict[int, set] = {}
    for entry in entries:
        match = _CHANNEL_FILE.match(entry)
        if match:
            channels.setdefault(int(match.group(1)), set()).add(match.group(2))
    only_port = ports[0] if len(ports) == 1 else None
    numbers = sorted(channels)
    problems = []
    if len(numbers) > MAX_CHANNELS:
        problems.append(f"{len(numbers)} temperature channels: only the first {MAX_CHANNELS} read")
        numbers = numbers[:MAX_CHANNELS]
    sensors = [
        read_channel(reader, directory, number, channels[number], only_port) for number in numbers
    ]
    return sensors, problems


def read_channel(
    reader, directory: str, number: int, present: set, port: Optional[int]
) -> HcaSensor:
    """Channel ``number`` (``temp<number>_*``); ``present``: which of its files the listing
    showed (a missing one is a problem of this sensor, never read)."""
    problems: List[str] = []
    texts: Dict[str, Optional[str]] = {}
    for attribute in ATTRIBUTES:
        name = f"temp{number}_{attribute}"
        if attribute not in present:
            problems.append(f"{name}: missing")
            texts[attribute] = None
            continue
        text, problem = reader.read_text(f"{directory}/{name}")
        if problem is not None:
            problems.append(f"{name}: {problem}")
        texts[attribute] = text.strip() if text is not None else None
    label = texts["label"]
    kind, module = classify_label(label)
    values = {}
    for attribute in ("input", "highest", "crit"):
        values[attribute] = celsius(texts[attribute], f"temp{number}_{attribute}", problems)
    crit = values["crit"]
    return HcaSensor(
        channel=number,
        label=shown(label) if label else None,
        kind=kind,
        module=module,
        port=port if kind == "module" else None,
        input_c=values["input"],
        highest_c=values["highest"],
        crit_c=crit if crit is None or crit > 0 else None,  # 0: the firmware sets none
        problems=problems,
    )


def classify_label(label: Optional[str]) -> Tuple[str, Optional[int]]:
    """(kind, module number) of a ``tempK_label``: ``asic`` -> ("asic", None), ``Module1`` ->
    ("module", 1), ``sensor0`` -> ("asic", None), ``sensor65`` -> ("module", 1); anything
    else, or no label, -> ("other", None)."""
    if not label:
        return "other", None
    text = label.strip()
    if text.lower() == "asic":
        return "asic", None
    match = _MODULE_LABEL.match(text)
    if match:
        return "module", int(match.group(1))
    match = _SENSOR_LABEL.match(text)
    if match:
        index = int(match.group(1))
        if index >= MODULE_SENSOR_BASE:
            return "module", index - MODULE_SENSOR_BASE
        return "asic", None
    return "other", None


def celsius(text: Optional[str], name: str, problems: List[str]) -> Optional[float]:
    """Millidegrees C as written by hwmon -> degrees C; None (and why, in ``problems``) when
    it is not a whole number or outside -60..200 degrees C."""
    if text is None:
        return None
    try:
        milli = int(text, 10)
    except ValueError:
        problems.append(f"{name}: not a number: '{shown(text[:40])}'")
        return None
    value = milli / 1000.0
    if not MIN_C <= value <= MAX_C:
        problems.append(f"{name}: {value:g} °C is out of range ({MIN_C:g}..{MAX_C:g} °C)")
        return None
    return value
