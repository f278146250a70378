"""Replaying a support bundle: the Snapshot the live run built, rebuilt from its raw files.

``replay(opened)`` (an ``ibdiag.bundle.opener.OpenedBundle``) parses the bundle's recorded sysfs
and procfs files with the code a live collection uses (``collect.read_node``, through a
``BundleReader`` that answers from the bundle and never follows a link out of it), turns its
recorded command runs into typed fields with today's ``ibdiag.families`` (so a bundle
re-graded today parses as a live run would today), and validates everything that came from the
bundle as the model it becomes. It runs nothing and reads nothing outside the bundle.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from pydantic import ValidationError

from ibdiag.bundle.manifest import RUN_FIELDS
from ibdiag.bundle.opener import OpenedBundle
from ibdiag.facts.history import LinkHistory
from ibdiag.model import CommandRun, InspectorFile, Snapshot
from ibdiag.sources.sysfs import _MAX_ATTRIBUTE_BYTES as MAX_ATTRIBUTE_BYTES
from ibdiag.sources.sysfs import SysfsReader, decode_attribute

if TYPE_CHECKING:  # annotations only
    from ibdiag.counters.baseline import Loaded

# What the replayed Snapshot takes from the manifest's header as it is recorded (what the
# readers build from the stored files gives the rest).
_FROM_HEADER = (
    "schema_version", "tool_version", "collected_at", "sysfs_root", "procfs_root", "rootfs"
)  # fmt: skip


class BundleReader(SysfsReader):
    """Answers the SysfsReader calls from a bundle: files from ``root/<prefix>/``, listings,
    ``exists`` and symlink names from the manifest; never follows a link out of the bundle."""

    def __init__(self, opened: OpenedBundle, prefix: str, original_root: str) -> None:
        super().__init__(original_root)
        self.opened = opened
        self.prefix = prefix
        manifest = opened.manifest
        self.stored = {
            entry.path[len("root/") :] for entry in manifest.files if entry.path.startswith("root/")
        }
        self.unreadable = manifest.unreadable
        self.listings = manifest.listings
        self.listing_errors = manifest.listing_errors
        self.links = manifest.links
        self.exists_map = manifest.exists

    def key(self, rel: str) -> str:
        return f"{self.prefix}/{rel.strip('/')}"

    def read_bytes(self, rel: str) -> Tuple[Optional[bytes], Optional[str]]:
        key = self.key(rel)
        if key in self.unreadable:
            return None, self.unreadable[key]
        if key not in self.stored:
            return None, "not recorded in the bundle"
        data = self.opened.read(f"root/{key}")
        if data is None:
            return None, "missing from the bundle"
        return data[:MAX_ATTRIBUTE_BYTES], None  # what a live read would have taken

    def read_text(self, rel: str) -> Tuple[Optional[str], Optional[str]]:
        data, problem = self.read_bytes(rel)
        if data is None:
            return None, problem
        return decode_attribute(data)

    def listdir(self, rel: str) -> Tuple[List[str], Optional[str]]:
        key = self.key(rel)
        if key in self.listing_errors:
            return [], self.listing_errors[key]
        if key in self.listings:
            return list(self.listings[key]), None
        return [], "missing"

    def exists(self, rel: str) -> bool:
        return bool(self.exists_map.get(self.key(rel), False))

    def realname(self, rel: str) -> str:
        link = self.links.get(self.key(rel))
        if link is not None and link.name is not None:
            return link.name
        return os.path.basename(rel.rstrip("/"))


def _read_stream(opened: OpenedBundle, rel: Optional[str]) -> str:
    data = opened.read(rel) if rel else None
    if data is None:
        return ""
    try:
        return data.decode("utf-8", errors="surrogatepass")
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace")


def _replay_inspector(opened: OpenedBundle) -> Optional[List[InspectorFile]]:
    """The NCCL Inspector dumps the bundle holds (None: the run did not read any)."""
    entries = opened.manifest.nccl_inspector
    if entries is None:
        return None
    return [
        InspectorFile.model_validate(
            dict(
                name=entry.name,
                modified_at=entry.modified_at,
                text=_read_stream(opened, entry.file),
                truncated=entry.truncated,
            )
        )
        for entry in entries
    ]


def _replay_history(opened: OpenedBundle, problems: Dict[str, str]) -> Optional[LinkHistory]:
    """The history window the run graded (None: it read none); one the bundle lost or that is
    not valid is a problem of the node, and the replay grades without it."""
    name = opened.manifest.history
    if name is None:
        return None
    data = opened.read(name)
    if data is None:
        problems["history"] = f"the bundle's {name}: missing from the bundle"
        return None
    try:
        return LinkHistory.model_validate_json(data)
    except ValidationError as exc:
        problems["history"] = f"the bundle's {name} is not valid: {exc.errors()[0]['msg']}"
        return None


def replay(opened: OpenedBundle) -> Snapshot:
    """The Snapshot the live run built, rebuilt from the bundle's raw files and command outputs.

    Files are parsed by the same code as a live collection (``collect.read_node``); identity
    and timing (host, boot_id, collected_at, tool_version, roots, sources) come from the
    manifest, whose every field was validated when the bundle was opened. What comes from the
    bundle is validated again as the model it becomes (``model_validate``: the CommandRuns, the
    Inspector files, the Snapshot's own fields), as a baseline file is; only what ibdiag's own
    readers built from it is taken as built. Runs nothing and reads nothing outside the bundle.
    """
    from ibdiag.collect import read_node

    manifest = opened.manifest
    header = manifest.snapshot
    sources = list(header.sources)
    sys_reader = BundleReader(opened, "sys", header.sysfs_root)
    proc_reader = BundleReader(opened, "proc", header.procfs_root)
    rootfs_reader = BundleReader(opened, "rootfs", header.rootfs or "/")
    node = read_node(
        sys_reader, proc_reader, set(sources) - {"procfs"}, rootfs_reader=rootfs_reader
    )
    commands: Dict[str, CommandRun] = {}
    for entry in manifest.commands:
        data = {name: getattr(entry, name) for name in RUN_FIELDS}
        data["stdout"] = _read_stream(opened, entry.stdout_file)
        data["stderr"] = _read_stream(opened, entry.stderr_file)
        run = CommandRun.model_validate(data)  # read from outside: validated, as a baseline is
        commands[entry.key or run.key] = run
    problems = dict(node.problems)
    if manifest.baseline is not None:  # why the run's baseline or state file failed, if so
        problems.update(manifest.baseline.problems)
    history = _replay_history(opened, problems)
    # Validated: the header came from outside. What the readers built (devices, GPUs) are
    # model instances already, which pydantic takes as they are.
    snapshot = Snapshot.model_validate(
        dict(
            node._asdict(),
            **{name: getattr(header, name) for name in _FROM_HEADER},
            sources=sources,
            commands=commands,
            host=header.host,
            boot_id=header.boot_id,
            boot_time=header.boot_time,
            nccl_inspector_dir=header.nccl_inspector_dir,
            nccl_inspector=_replay_inspector(opened),
            history=history,
            problems=problems,
        )
    )
    from ibdiag.migrate import reinterpret  # today's format and parsers (ibdiag.migrate)

    return reinterpret(snapshot, (manifest.thresholds or {}).get("nccl_tests"))


def replay_baseline(opened: OpenedBundle) -> Optional[Loaded]:
    """The baseline the bundle's run graded counters against (``ibdiag.counters.baseline.Loaded``: a
    snapshot, or why the stored one cannot be used); None when the run had none. Read with
    ``ibdiag.counters.baseline.parse``, as a ``--baseline`` file is: today's parsers, and a stored
    baseline that is missing or corrupt is a reason, which counters.baseline reports."""
    from ibdiag.counters.baseline import Loaded, parse

    entry = opened.manifest.baseline
    if entry is None or entry.file is None:
        return None
    data = opened.read(entry.file)
    if data is None:
        return Loaded(None, f"the bundle's {entry.file}: missing from the bundle")
    return parse(data, f"the bundle's {entry.file}")
