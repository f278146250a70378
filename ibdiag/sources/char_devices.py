"""Read the verbs and MAD character devices' class entries from sysfs (files only):
``class/infiniband_verbs/uverbsN/ibdev`` and ``class/infiniband_mad/{umadN,issmN}/{ibdev,port}``
(``ibdiag.facts.char_devices`` says why they matter). Facts are built with ``model_construct``
(typed here; no schema built on the prolog's path)."""

from __future__ import annotations

import re
from typing import List

from ibdiag.facts.char_devices import (
    CLASS_MODULE,
    MAD_CLASS,
    VERBS_CLASS,
    CharDevice,
    CharDevices,
)
from ibdiag.sources.names import shown

_ENTRY = re.compile(r"^(uverbs|umad|issm)\d+$")
_KIND = {"uverbs": "verbs", "umad": "mad", "issm": "issm"}


def read_char_devices(reader) -> CharDevices:
    """Every uverbs, umad and issm entry, with the HCA (and port) each serves; where a class
    is missing, whether ``module/ib_uverbs`` / ``module/ib_umad`` are there."""
    found = {"verbs": [], "mad": [], "issm": []}  # type: dict
    missing: List[str] = []
    problems: List[str] = []
    for directory in (VERBS_CLASS, MAD_CLASS):
        entries, problem = reader.listdir(directory)
        if problem == "missing":
            missing.append(directory)
            continue
        if problem is not None:
            problems.append(f"{directory}: {problem}")
            continue
        for name in entries:
            match = _ENTRY.match(name)
            if match is None:
                continue  # abi_version, and anything a newer kernel adds
            kind = _KIND[match.group(1)]
            found[kind].append(_entry(reader, f"{directory}/{name}", name, kind, problems))
    modules = None
    if missing and reader.exists("module"):  # only then does it matter: one look per module
        modules = {name: reader.exists(f"module/{name}") for name in CLASS_MODULE.values()}
    return CharDevices.model_construct(**found, missing=missing, modules=modules, problems=problems)


def _entry(reader, path: str, name: str, kind: str, problems: List[str]) -> CharDevice:
    ibdev, problem = reader.read_text(f"{path}/ibdev")
    if problem is not None:
        problems.append(f"{name}/ibdev: {problem}")
    port = None
    if kind != "verbs":
        text, problem = reader.read_text(f"{path}/port")
        if problem is not None:
            problems.append(f"{name}/port: {problem}")
        else:
            port = _port_number(text.strip(), f"{name}/port", problems)
    return CharDevice.model_construct(
        name=name, ibdev=shown(ibdev.strip()) if ibdev else None, port=port
    )


def _port_number(text: str, where: str, problems: List[str]):
    if text.isascii() and text.isdigit() and len(text) < 6:
        return int(text)
    problems.append(f"{where}: not a port number: '{shown(text[:20])}'")
    return None
