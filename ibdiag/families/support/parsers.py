"""Parsers of the catalogue's outputs that the system section reads: the OFED release, the
driver modules, each HCA's firmware identity. Every other item is kept as it was printed (the
bundle's ``commands/``), for the support engineer to read.

Each parser takes what the tool printed and returns what it could read; odd or hostile text
gives less, never an exception. Formats, from the tools' sources and real captures
(``tests/captures/support``):

- ``ofed_info -s``: one line ``MLNX_OFED_LINUX-23.10-1.1.9.0:`` (the colon is optional).
- ``modinfo m1 m2``: ``key:   value`` lines, one block per module, each starting at
  ``filename:`` (a module built into the kernel: ``name:`` first, then ``filename: (builtin)``);
  a module it cannot find is a line on stderr.
- ``mstflint -d BDF q`` / ``flint``: ``Key:   value`` lines; ``FW Version`` is what is on flash
  and ``FW Version(Running)`` appears only when the running one differs.
- ``devlink -j dev info``: ``{"info": {"pci/BDF": {"driver", "serial_number",
  "board.serial_number", "versions": {"fixed": {"fw.psid"}, "running": {"fw.version"},
  "stored": {"fw.version"}}}}}``.
- ``ethtool -i NETDEV``: ``firmware-version: 22.28.1002 (MT_0000000430)`` and
  ``bus-info: 0000:07:00.1``.

A version of all ones (``255.255.65535``) is what mlx5 reports when its firmware query failed
(devlink's ``stored``): no version, never a pending update. A line longer than ``MAX_LINE`` is
no field (and never reaches a regular expression).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, List, Optional

from ibdiag.facts.support import ModuleInfo

MAX_VALUE = 200  # a field longer than this is not the field
MAX_LINE = 1024  # a line longer than this holds no field
_FAILED_QUERY = "255.255.65535"  # mlx5's answer when the firmware version query failed
_OFED = re.compile(
    r"^(?P<release>[A-Za-z][A-Za-z0-9_.+-]{0,100}-\d[A-Za-z0-9_.+-]{0,60}):?\Z", re.ASCII
)
_KEY_VALUE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9 ._()/-]{0,60}?)\s*:\s*(?P<value>.*)$")
_VERSION = re.compile(r"^\d{1,4}(?:\.\d{1,6}){1,4}\Z", re.ASCII)
_PSID = re.compile(r"^[A-Za-z0-9_]{1,32}\Z")
_BDF = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\Z")
_ETHTOOL_FW = re.compile(
    r"(?P<version>\d{1,4}(?:\.\d{1,6}){1,4})(?:\s+\((?P<psid>[^()\s]+)\))?", re.ASCII
)


def _clean(value: str) -> Optional[str]:
    value = value.strip()
    if not value or len(value) > MAX_VALUE or not value.isprintable():
        return None
    return value


def _fields(text: str) -> Dict[str, str]:
    """``Key: value`` lines -> {key: value} (the first of a repeated key)."""
    found: Dict[str, str] = {}
    for line in _lines(text):
        match = _KEY_VALUE.match(line.strip())
        if match:
            value = _clean(match["value"])
            if value is not None:
                found.setdefault(match["key"].strip(), value)
    return found


def _lines(text: Optional[str]) -> List[str]:
    """The lines of ``text`` short enough to hold a field."""
    return [line for line in (text or "").splitlines() if len(line) <= MAX_LINE]


def parse_ofed_info(text: str) -> Optional[str]:
    """The release ``ofed_info -s`` printed (``MLNX_OFED_LINUX-23.10-1.1.9.0``), or None."""
    for line in _lines(text):
        match = _OFED.match(line.strip())
        if match:
            return match["release"]
    return None


def parse_modinfo(text: str) -> List[ModuleInfo]:
    """One ``ModuleInfo`` per module block of ``modinfo``'s output: a block starts at
    ``filename:``, or at a ``name:`` the current block cannot take (a built-in module's, which
    kmod prints before its ``filename: (builtin)``)."""
    blocks: List[Dict[str, str]] = []
    opened_by_name = False  # the last block began at a name: line, its filename: is to come
    for line in _lines(text):
        match = _KEY_VALUE.match(line)
        if not match:
            continue
        key, value = match["key"].strip(), _clean(match["value"])
        if key == "filename":
            if not opened_by_name:
                blocks.append({})
            opened_by_name = False
        elif key == "name" and (not blocks or "name" in blocks[-1]):
            blocks.append({})
            opened_by_name = True
        if value is not None and blocks:
            blocks[-1].setdefault(key, value)
    modules = []
    for block in blocks:
        filename = block.get("filename")
        name = block.get("name") or _module_name(filename)
        if name is None:
            continue
        modules.append(
            ModuleInfo(
                name=name,
                filename=filename,
                version=block.get("version"),
                srcversion=block.get("srcversion"),
                vermagic=block.get("vermagic"),
                inbox=_inbox(filename),
            )
        )
    return modules


def _module_name(filename: Optional[str]) -> Optional[str]:
    if not filename or filename == "(builtin)":
        return None
    base = os.path.basename(filename)
    name = base.split(".ko", 1)[0]
    return name if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name) else None


def _inbox(filename: Optional[str]) -> Optional[bool]:
    """Built with the kernel (``/kernel/`` tree, or built in) or not (``updates/``,
    ``weak-updates/``, ``extra/``: OFED, DKMS, kmod packages); None when the path says
    neither."""
    if not filename:
        return None
    if filename == "(builtin)":
        return True
    if any(part in filename for part in ("/updates/", "/weak-updates/", "/extra/")):
        return False
    if "/kernel/" in filename:
        return True
    return None


def parse_flint_query(text: str) -> Dict[str, Optional[str]]:
    """``mstflint q`` / ``flint q``: ``stored`` (on flash), ``running`` (the running version:
    ``FW Version(Running)`` when it differs, else the flash one), ``psid``, ``security``."""
    fields = _fields(text)
    stored = _version(fields.get("FW Version"))
    running = _version(fields.get("FW Version(Running)")) or stored
    return {
        "stored": stored,
        "running": running,
        "psid": _psid(fields.get("PSID")),
        "security": _not_na(fields.get("Security Attributes")),
    }


def parse_devlink_dev_info(text: str) -> Dict[str, Dict[str, Optional[str]]]:
    """``devlink -j dev info`` -> {BDF: {driver, psid, running, stored, board_serial}} for
    each PCI function; what is not that shape is left out."""
    try:
        doc = json.loads(text or "")
    except (ValueError, RecursionError):
        return {}
    info = doc.get("info") if isinstance(doc, dict) else None
    if not isinstance(info, dict):
        return {}
    found: Dict[str, Dict[str, Optional[str]]] = {}
    for handle, entry in info.items():
        bus, _, bdf = str(handle).partition("/")
        if bus != "pci" or not _BDF.match(bdf) or not isinstance(entry, dict):
            continue
        versions = entry.get("versions") if isinstance(entry.get("versions"), dict) else {}
        found[bdf.lower()] = {
            "driver": _string(entry.get("driver")),
            "psid": _psid(_string(_get(versions, "fixed", "fw.psid"))),
            "running": _version(_string(_get(versions, "running", "fw.version"))),
            "stored": _version(_string(_get(versions, "stored", "fw.version"))),
            "board_serial": _string(entry.get("board.serial_number")),
        }
    return found


def parse_ethtool_driver(text: str) -> Dict[str, Optional[str]]:
    """``ethtool -i``: {driver, running, psid, bdf}."""
    fields = _fields(text)
    firmware = _ETHTOOL_FW.fullmatch(fields.get("firmware-version", ""))
    bus = fields.get("bus-info", "")
    return {
        "driver": fields.get("driver"),
        "running": _version(firmware["version"]) if firmware else None,
        "psid": _psid(firmware["psid"]) if firmware and firmware["psid"] else None,
        "bdf": bus.lower() if _BDF.match(bus) else None,
    }


def _get(doc: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)
    return doc


def _string(value: Any) -> Optional[str]:
    return _clean(value) if isinstance(value, str) else None


def _version(value: Optional[str]) -> Optional[str]:
    if value is None:
        return None
    head = value.split()[0] if value.split() else ""
    return head if _VERSION.match(head) and head != _FAILED_QUERY else None


def _psid(value: Optional[str]) -> Optional[str]:
    return value if value is not None and _PSID.match(value) else None


def _not_na(value: Optional[str]) -> Optional[str]:
    return None if value is None or value.upper() == "N/A" else value
