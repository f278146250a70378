"""Baseline files: a saved Snapshot (``ibdiag snapshot``, a state file, or a saved report).

The typed fields of a loaded snapshot are parsed anew from its recorded runs
(``ibdiag.migrate.reinterpret``): a state file written by an older ibdiag is compared
field by field with today's run, as a bundle is re-graded with today's parsers.

Loading never raises: a missing, unreadable, truncated or foreign file comes back as a reason,
which the check run records and reports as one warning while grading without a baseline. Only
a regular file is read (``ibdiag.read_files``): a FIFO, device or socket given as
``--baseline``/``--state`` is a reason too, never waited on.
"""

from __future__ import annotations

import json
from typing import NamedTuple, Optional

from pydantic import ValidationError

from ibdiag.model import SCHEMA_VERSION, Snapshot
from ibdiag.read_files import read_regular_file

# The Snapshot.problems keys a run records its baseline trouble under; counters.baseline reads
# them: a baseline that could not be used, and a --state file that could not be written.
BASELINE_PROBLEM = "baseline"
STATE_PROBLEM = "state"
# A standard-level snapshot of a 64-HCA node with every command's output (each capped at 1 MiB)
# is a few MiB; refuse what could only be something else rather than read it all into memory.
MAX_BASELINE_BYTES = 256 << 20


class Loaded(NamedTuple):
    """A baseline as read: (snapshot, None), or (None, why it cannot be used)."""

    snapshot: Optional[Snapshot]
    problem: Optional[str] = None


def load(path: str) -> Loaded:
    """(snapshot, None) or (None, why it cannot be used). A saved Report's snapshot is used."""
    raw, problem = read_regular_file(path, MAX_BASELINE_BYTES)
    if raw is None:
        if problem == "missing":
            return Loaded(None, f"{path}: no such file")
        if problem == "is a directory" or str(problem).startswith(("not a regular", "larger")):
            return Loaded(None, f"{path}: {problem}")
        return Loaded(None, f"{path}: cannot read: {problem}")
    return parse(raw, path)


def parse(raw: bytes, path: str) -> Loaded:
    """``raw`` (a baseline file's bytes; ``path`` names it in the reasons) as ``load`` reads
    it: a support bundle's stored baseline is read by this too."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        return Loaded(None, f"{path}: not valid JSON (truncated or corrupt): {exc}")
    except RecursionError:
        return Loaded(None, f"{path}: not valid JSON (nested too deeply)")
    nccl_program = None
    if isinstance(data, dict) and isinstance(data.get("snapshot"), dict) and "results" in data:
        thresholds = data.get("thresholds")
        if isinstance(thresholds, dict) and isinstance(thresholds.get("nccl_tests"), str):
            nccl_program = thresholds["nccl_tests"]  # how a run from before roles is known
        data = data["snapshot"]  # a report written by `ibdiag check -o FILE.json`
    if not isinstance(data, dict):
        return Loaded(None, f"{path}: not an ibdiag snapshot (a JSON object is expected)")
    version = data.get("schema_version")
    if isinstance(version, int) and version > SCHEMA_VERSION:
        return Loaded(
            None, f"{path}: written by a newer ibdiag (schema {version} > {SCHEMA_VERSION})"
        )
    try:
        snapshot = Snapshot.model_validate(_without_facts(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "top level"
        return Loaded(None, f"{path}: not an ibdiag snapshot ({where}: {first['msg']})")
    from ibdiag.migrate import reinterpret

    return Loaded(reinterpret(snapshot, nccl_program))  # today's parsers, as for a bundle


def save(path: str, snapshot: Snapshot) -> None:
    """Write the snapshot as JSON, atomically (a concurrent reader sees the old or the new)."""
    from ibdiag.write_files import write_output  # tempfile & co.: not on a quick check's path

    write_output(path, snapshot.model_dump_json(indent=1) + "\n", mode=0o600)


def _without_facts(data: dict) -> dict:
    """The saved snapshot without its typed command facts: they are derived from its runs and
    parsed anew on load (``reinterpret``), so a fact whose shape changed since the file was
    written (a field added or dropped in ``ibdiag.facts``) never makes the baseline unusable.
    A fact read from files (``Fact.FROM_FILES``: the hwmon sensors) is kept."""
    from ibdiag.facts import fact_fields

    data = _keep_file_facts(data, {k: v for k, v in data.items() if k not in fact_fields(Snapshot)})
    devices = data.get("devices")
    if isinstance(devices, list):
        data["devices"] = [_device_without_facts(dev) for dev in devices]
    return data


def _device_without_facts(device: object) -> object:
    from ibdiag.facts import fact_fields
    from ibdiag.model import Device, NetDev, Port

    if not isinstance(device, dict) or not isinstance(device.get("ports"), list):
        return device
    device = _keep_file_facts(
        device, {key: value for key, value in device.items() if key not in fact_fields(Device)}
    )
    ports = []
    for port in device["ports"]:
        if isinstance(port, dict):
            port = _keep_file_facts(
                port, {key: value for key, value in port.items() if key not in fact_fields(Port)}
            )
            netdev = port.get("netdev")
            if isinstance(netdev, dict):
                netdev = {k: v for k, v in netdev.items() if k not in fact_fields(NetDev)}
                port["netdev"] = netdev
        ports.append(port)
    return {**device, "ports": ports}


def _keep_file_facts(whole: dict, stripped: dict) -> dict:
    """``stripped`` with the ``facts`` entries of ``whole`` that were read from files."""
    from ibdiag.facts._base import from_files

    facts = whole.get("facts")
    if isinstance(facts, dict):
        kept = from_files(facts)
        if kept:
            stripped["facts"] = kept
    return stripped
