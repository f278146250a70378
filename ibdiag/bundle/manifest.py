"""A bundle's manifest.json: parsed within ``ibdiag.bundle.limits``, then validated field by field.

The manifest is the one file of a bundle that is not checked against a sha256 (it holds them),
so everything in it is taken as untrusted input: its size and JSON nesting are checked before it
is parsed, and every field replay uses has a declared type. A manifest that fails is refused
with one line naming the field (``level: 'bogus' is not one of quick, standard, full``).
Unknown keys are ignored, so a newer ibdiag's bundle of the same schema version still opens.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any, Dict, List, Optional

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, field_validator

from ibdiag.bundle import limits
from ibdiag.facts.support import ItemRow
from ibdiag.roles import RoleField

MANIFEST = "manifest.json"
MANIFEST_SCHEMA_VERSION = 1
_LEVELS = ("quick", "standard", "full")  # ibdiag.registry.LEVELS (test_bundle_limits checks)
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(rb"[^\[\]{}]+")
_DEPTH_STEP = [0] * 256  # byte -> change of nesting depth
_DEPTH_STEP[ord("[")] = _DEPTH_STEP[ord("{")] = 1
_DEPTH_STEP[ord("]")] = _DEPTH_STEP[ord("}")] = -1
_INFINIBAND = "sys/class/infiniband"  # ibdiag.model.INFINIBAND_CLASS under root/sys
_PORTS_LISTING = re.compile(r"sys/class/infiniband/[^/]+/ports")


class ManifestError(Exception):
    """The manifest is refused: the message says why (the caller adds the bundle's name)."""


def safe_relpath(path: str) -> bool:
    """A relative path with no empty, ``.`` or ``..`` part."""
    parts = path.split("/")
    return bool(path) and not path.startswith("/") and all(p not in ("", ".", "..") for p in parts)


def parse_json(data: bytes, what: str = MANIFEST) -> Any:
    """``data`` parsed as JSON, after checking (without parsing) that it holds at most
    MAX_JSON_VALUES values nested at most MAX_JSON_DEPTH deep."""
    # Every value but the first follows a comma or opens a list/object: an upper bound (commas
    # inside strings count too), found at C speed, so a million tiny values are never built.
    values = data.count(b",") + data.count(b"[") + data.count(b"{") + 1
    if values > limits.MAX_JSON_VALUES:
        raise ManifestError(
            f"{what} holds about {values} JSON values; at most {limits.MAX_JSON_VALUES}"
        )
    brackets = _NOT_BRACKET.sub(b"", _STRING.sub(b"", data))
    depth = max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0)
    if depth > limits.MAX_JSON_DEPTH:
        raise ManifestError(f"{what} is nested {depth} deep; at most {limits.MAX_JSON_DEPTH}")
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise ManifestError(f"{what} is not valid JSON (truncated or corrupt): {exc}") from None


def describe_validation_error(exc: ValidationError) -> str:
    """The first problem pydantic found, on one line: ``where: what (got X)`` + how many more."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "top level"
    message = first["msg"]
    got = first.get("input")
    if first["type"] == "value_error":  # our own validators' words: they quote the value
        message = (
            message[len("Value error, ") :] if message.startswith("Value error, ") else message
        )
    elif first["type"] != "missing" and (got is None or isinstance(got, (str, int, float, bool))):
        shown = repr(got)
        message += f" (got {shown[:60] + '...' if len(shown) > 60 else shown})"
    others = len(errors) - 1
    more = f" (and {others} more problem{'s' if others > 1 else ''})" if others else ""
    return f"{where}: {message}{more}"


class _Entry(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)


class FileEntry(_Entry):
    path: str
    size: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")

    @field_validator("path")
    @classmethod
    def _safe(cls, path: str) -> str:
        if not safe_relpath(path):
            raise ValueError("an unsafe path (absolute, empty or with '..')")
        return path


# The fields of ibdiag.model.CommandRun a CommandEntry records as they are (its output is in
# the files stdout_file / stderr_file name): what the writer copies and replay copies back.
RUN_FIELDS = (
    "argv",
    "role",
    "rc",
    "duration_s",
    "timed_out",
    "stdout_truncated",
    "stderr_truncated",
    "not_found",
    "permission_denied",
    "skipped",
    "error",
)


class CommandEntry(_Entry):
    """A recorded run (ibdiag.model.CommandRun without its output) and where its output is."""

    key: Optional[str] = None
    argv: List[str]
    role: Optional[RoleField] = None  # absent: recorded without one (ibdiag.migrate)
    rc: Optional[int] = None
    duration_s: float = 0.0
    timed_out: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    not_found: bool = False
    permission_denied: bool = False
    skipped: Optional[str] = None
    error: Optional[str] = None
    stdout_file: Optional[str] = None
    stderr_file: Optional[str] = None


class InspectorEntry(_Entry):
    name: str
    file: Optional[str] = None
    modified_at: Optional[AwareDatetime] = None
    truncated: bool = False


class LinkEntry(_Entry):
    name: Optional[str] = None
    target: Optional[str] = None


class SnapshotHeader(_Entry):
    schema_version: int = 1
    tool_version: str
    host: Optional[str] = None
    boot_id: Optional[str] = None
    boot_time: Optional[AwareDatetime] = None
    collected_at: AwareDatetime
    sysfs_root: str
    procfs_root: str
    rootfs: Optional[str] = None
    sources: List[str] = Field(default_factory=list)
    nccl_inspector_dir: Optional[str] = None


# Where a bundle stores the baseline its run graded counters against (``BaselineEntry.file``)
BASELINE_FILE = "baseline/snapshot.json"
# The ports' past the run graded (Snapshot.history: the window, bounded by it), as JSON
HISTORY_FILE = "history/window.json"
# the Snapshot.problems keys of a baseline that could not be used, a state file not written
# (``ibdiag.counters.baseline.BASELINE_PROBLEM``/``STATE_PROBLEM``; test_collect_baseline checks)
_BASELINE_PROBLEMS = ("baseline", "state")


class BaselineEntry(_Entry):
    """What the run graded counters against (``collect --baseline``/``--state``): ``file``, the
    baseline snapshot stored in the bundle (None: none could be used), and ``problems``, why
    it could not be used or the state file not written, as counters.baseline reported them."""

    file: Optional[str] = None
    problems: Dict[str, str] = Field(default_factory=dict)

    @field_validator("file")
    @classmethod
    def _safe(cls, path: Optional[str]) -> Optional[str]:
        if path is not None and not safe_relpath(path):
            raise ValueError("an unsafe path (absolute, empty or with '..')")
        return path

    @field_validator("problems")
    @classmethod
    def _known(cls, problems: Dict[str, str]) -> Dict[str, str]:
        unknown = sorted(set(problems) - set(_BASELINE_PROBLEMS))
        if unknown:
            shown = repr(unknown[0])[:40]
            raise ValueError(f"{shown} is not one of {', '.join(_BASELINE_PROBLEMS)}")
        return problems


class Manifest(_Entry):
    """manifest.json as ``ibdiag.bundle.write`` writes it (fields added over time have defaults)."""

    schema_version: int
    tool: Dict[str, Any] = Field(default_factory=dict)
    name: Optional[str] = None
    host: Optional[str] = None
    level: Optional[str] = None
    created_utc: Optional[str] = None
    thresholds: Optional[Dict[str, Any]] = None  # validated as Thresholds when graded with
    snapshot: SnapshotHeader
    files: List[FileEntry]
    commands: List[CommandEntry] = Field(default_factory=list)
    nccl_inspector: Optional[List[InspectorEntry]] = None
    links: Dict[str, LinkEntry] = Field(default_factory=dict)
    unreadable: Dict[str, str] = Field(default_factory=dict)
    listings: Dict[str, List[str]] = Field(default_factory=dict)
    listing_errors: Dict[str, str] = Field(default_factory=dict)
    exists: Dict[str, bool] = Field(default_factory=dict)
    not_stored: Dict[str, str] = Field(default_factory=dict)
    render_failures: Dict[str, str] = Field(default_factory=dict)
    redaction: Optional[Dict[str, Any]] = None
    baseline: Optional[BaselineEntry] = None  # absent: graded without a baseline
    history: Optional[str] = None  # HISTORY_FILE when the run read the history; absent: it did not
    # The support catalogue, item by item and target (ibdiag.facts.support): collected, absent,
    # no permission, timed out, failed, not started, not applicable; absent: not gathered
    items: Optional[List[ItemRow]] = None

    @field_validator("level")
    @classmethod
    def _known_level(cls, level: Optional[str]) -> Optional[str]:
        if level is not None and level not in _LEVELS:
            raise ValueError(f"{level[:40]!r} is not one of {', '.join(_LEVELS)}")
        return level


def _check_listings(manifest: Manifest) -> None:
    """What replay will build from the listings stays within MAX_HCAS, MAX_PORTS and
    MAX_LISTED_NAMES (each listed name is a device, a port or a counter to read)."""
    listings = manifest.listings
    hcas = len(listings.get(_INFINIBAND, ()))
    if hcas > limits.MAX_HCAS:
        raise ManifestError(f"{MANIFEST}: it lists {hcas} HCAs; at most {limits.MAX_HCAS}")
    ports = sum(len(v) for k, v in listings.items() if _PORTS_LISTING.fullmatch(k))
    if ports > limits.MAX_PORTS:
        raise ManifestError(f"{MANIFEST}: it lists {ports} ports; at most {limits.MAX_PORTS}")
    names = sum(len(entries) for entries in listings.values())
    if names > limits.MAX_LISTED_NAMES:
        raise ManifestError(
            f"{MANIFEST}: its listings name {names} entries; at most {limits.MAX_LISTED_NAMES}"
        )
    if len(manifest.files) > limits.MAX_MEMBERS:
        raise ManifestError(
            f"{MANIFEST}: it lists {len(manifest.files)} files; at most {limits.MAX_MEMBERS}"
        )


def load_manifest(data: bytes) -> Manifest:
    """The validated manifest of ``data`` (manifest.json's bytes); ``ManifestError`` with one
    line naming the first problem otherwise."""
    if len(data) > limits.MAX_MANIFEST_BYTES:
        raise ManifestError(
            f"{MANIFEST} is {len(data)} bytes; at most "
            f"{limits.size_text(limits.MAX_MANIFEST_BYTES)}"
        )
    raw = parse_json(data)
    if not isinstance(raw, dict) or not isinstance(raw.get("files"), list):
        raise ManifestError(f"{MANIFEST} is not a bundle manifest (no files or snapshot)")
    if not isinstance(raw.get("snapshot"), dict):
        raise ManifestError(f"{MANIFEST} is not a bundle manifest (no files or snapshot)")
    version = raw.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ManifestError(f"{MANIFEST} schema_version {version!r} is not supported")
    if version > MANIFEST_SCHEMA_VERSION:
        raise ManifestError(
            f"{MANIFEST} schema_version {version} is not supported (written by a newer ibdiag; "
            f"this one reads {MANIFEST_SCHEMA_VERSION})"
        )
    try:
        manifest = Manifest.model_validate(raw)
    except ValidationError as exc:
        raise ManifestError(f"{MANIFEST}: {describe_validation_error(exc)}") from None
    _check_listings(manifest)
    return manifest
