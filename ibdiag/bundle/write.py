"""Writing a support bundle: ``write_bundle`` (``ibdiag collect``).

Layout of ``ibdiag-<host>-<UTC %Y%m%dT%H%M%SZ>/`` (a directory, or that directory in a
``.tar.gz`` with a ``.sha256`` beside it):

    manifest.json    an ``ibdiag.bundle.manifest.Manifest`` (its JSON Schema is published as
                     schema/manifest.schema.json): schema_version, tool, host, level,
                     created_utc, effective thresholds, the snapshot's header; every file
                     (size, sha256); every command (argv, rc, role, duration_s, timed_out,
                     *_truncated, ... and its stdout/stderr files); links (symlinks resolved),
                     unreadable (files that could not be read and why),
                     listings/listing_errors, exists; render_failures; items (the
                     support catalogue's rows: each item on each target, collected, absent,
                     no permission, timed out, failed, not started or not applicable)
    report.json      the Report (JSON renderer)
    report.html      the Report (HTML renderer) - absent when that renderer failed
    summary.txt      the Report (text renderer)
    root/sys/...     every sysfs file read, at the logical path the reader used (no symlinks:
    root/proc/...    link targets are in the manifest)
    root/rootfs/...  the catalogue's files under the root file system (etc/...: --rootfs)
    commands/NNN-<argv>.stdout|.stderr
    nccl_inspector/NNN-<dump file name>   (level full)
    baseline/snapshot.json   the baseline the run graded counters against (collect
                     --baseline/--state), as ``ibdiag.counters.baseline.load`` read it; the
                     manifest's ``baseline`` names it, with why a baseline could not be used, if so

With a redactor, contents and member names alike pass through its one mapping (an mpirun
``-H host`` in an argv, NCCL's ``<hostname>-pid<pid>.log``), and the manifest lists the names
as stored, so a redacted bundle opens without missing or unlisted files and replays whole.

A bundle is built in a temporary directory beside its destination and renamed into place (a
directory) or streamed into the one atomic writer (``ibdiag.write_files.atomic_file``, linked into
place, never over an existing file: the tarball, then its ``.sha256``), so an interrupted or
failed write leaves nothing under the final name. ``ibdiag.bundle.opener`` opens one,
``ibdiag.bundle.replay`` replays it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tarfile
import tempfile
from datetime import datetime, timezone
from typing import TYPE_CHECKING, BinaryIO, Callable, Dict, List, Mapping, Optional

from ibdiag import __version__
from ibdiag.bundle.manifest import (
    BASELINE_FILE,
    HISTORY_FILE,
    MANIFEST,
    MANIFEST_SCHEMA_VERSION,
    RUN_FIELDS,
    BaselineEntry,
    CommandEntry,
    FileEntry,
    InspectorEntry,
    Manifest,
    SnapshotHeader,
    safe_relpath,
)
from ibdiag.model import Report, Snapshot
from ibdiag.natural import natural_key
from ibdiag.render.options import RenderOptions
from ibdiag.sources.sysfs import Recording
from ibdiag.write_files import atomic_file

if TYPE_CHECKING:  # only for annotations: redaction loads when asked for
    from ibdiag.bundle.redact import Redactor

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")

Renderer = Callable[[Report, RenderOptions], str]  # ibdiag.render.*.render


def _render_html(report: Report, options: RenderOptions) -> str:
    from ibdiag.render import html  # jinja2 only when a bundle is written

    return html.render(report, options)


def default_renderers() -> Dict[str, Renderer]:
    """File name -> renderer; ``report.json`` first so it exists whatever the others do."""
    from ibdiag.render import json as json_render
    from ibdiag.render import text

    return {
        "report.json": json_render.render,
        "summary.txt": text.render,
        "report.html": _render_html,
    }


def sanitise(text: str, limit: int = 64) -> str:
    """``text`` reduced to [A-Za-z0-9._-] (runs of anything else become ``_``)."""
    cleaned = _UNSAFE_NAME.sub("_", text).strip("._") or "unknown"
    return cleaned[:limit]


def bundle_name(host: Optional[str], when: datetime) -> str:
    """``ibdiag-<host>-<UTC %Y%m%dT%H%M%SZ>``."""
    stamp = when.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"ibdiag-{sanitise(host or 'unknown')}-{stamp}"


class _Stage:
    """The bundle directory being built: every file written 0600 (dirs 0700) and listed."""

    def __init__(self, directory: str, redactor: Optional[Redactor] = None) -> None:
        self.directory = directory
        self.redactor = redactor
        self.files: List[FileEntry] = []  # what the manifest lists
        self._made = {""}

    def _mkdirs(self, parts: List[str]) -> None:
        """Each missing parent 0700 (os.makedirs gives intermediate ones the umask's mode)."""
        for depth in range(1, len(parts) + 1):
            rel = "/".join(parts[:depth])
            if rel not in self._made:
                path = os.path.join(self.directory, *parts[:depth])
                if not os.path.isdir(path):
                    os.mkdir(path, 0o700)
                    os.chmod(path, 0o700)
                self._made.add(rel)

    def label(self, text: str, limit: int) -> str:
        """A member-name part made from what a run recorded (an argv, a dump file's name):
        when redacting, redacted with ``Redactor.name`` (which, unlike ``text``, finds an
        address next to ``_`` or ``-``, as an argv joined with ``_`` puts it) before it is
        sanitised, so a GID or IPv6 address still has the colons the patterns look for."""
        if self.redactor is not None:
            text = self.redactor.name(text)
        return sanitise(text, limit)

    def write(self, rel: str, data: bytes, listed: bool = True) -> str:
        """Write one file; the name it is stored (and, unless not ``listed``, listed) under.

        When redacting, the contents of every text file (hashes after) and every member name
        pass through the one mapping: the name through ``Redactor.text``, as the manifest that
        refers to it does, so the redacted manifest always matches the files (a ``root/``
        path is also a key of the manifest's listings, links and exists maps).
        """
        if self.redactor is not None:
            rel = self.redactor.text(rel)
            try:
                data = self.redactor.text(data.decode("utf-8")).encode("utf-8")
            except UnicodeDecodeError:
                pass  # not text: nothing a pattern could find in it
        parts = rel.split("/")
        self._mkdirs(parts[:-1])
        path = os.path.join(self.directory, *parts)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, flags, 0o600)
        try:
            os.fchmod(fd, 0o600)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        if listed:
            digest = hashlib.sha256(data).hexdigest()
            self.files.append(FileEntry(path=rel, size=len(data), sha256=digest))
        return rel


def _snapshot_header(snapshot: Snapshot) -> SnapshotHeader:
    """The manifest's ``snapshot``: the Snapshot's fields of the same names (each one is one)."""
    return SnapshotHeader(**{name: getattr(snapshot, name) for name in SnapshotHeader.model_fields})


def _encode(text: str) -> bytes:
    return text.encode("utf-8", errors="surrogatepass")


def _fill(
    stage: _Stage,
    name: str,
    snapshot: Snapshot,
    report: Report,
    recording: Optional[Recording],
    renderers: Mapping[str, Renderer],
    baseline: Optional[Snapshot] = None,
) -> None:
    """Write root/, commands/, the baseline, the renders and finally manifest.json into
    ``stage``."""
    recording = recording or Recording()
    not_stored: Dict[str, str] = {}
    for rel in sorted(recording.files, key=natural_key):
        if not safe_relpath(rel):
            not_stored[rel] = "unsafe path"
            continue
        try:
            stage.write(f"root/{rel}", recording.files[rel])
        except OSError as exc:  # a path that is both a file and a directory, say
            not_stored[rel] = f"{type(exc).__name__}: {exc.strerror or exc}"
    commands = []
    for index, (key, run) in enumerate(snapshot.commands.items(), start=1):
        base = f"commands/{index:03d}-{stage.label('_'.join(run.argv) or 'command', 80)}"
        recorded = {name_: getattr(run, name_) for name_ in RUN_FIELDS}
        streams = {
            f"{stream}_file": stage.write(f"{base}.{stream}", _encode(getattr(run, stream)))
            for stream in ("stdout", "stderr")
        }
        commands.append(CommandEntry(key=key, **recorded, **streams))
    inspector = []
    for index, dump in enumerate(snapshot.nccl_inspector or [], start=1):
        # NCCL's JSON dumps are named <hostname>-pid<pid>.log
        name_ = stage.redactor.name(dump.name) if stage.redactor is not None else dump.name
        path = f"nccl_inspector/{index:03d}-{stage.label(dump.name, 120)}"
        inspector.append(
            InspectorEntry(
                name=name_,
                file=stage.write(path, _encode(dump.text)),
                modified_at=dump.modified_at,
                truncated=dump.truncated,
            )
        )
    stored_baseline = _store_baseline(stage, snapshot, baseline)
    history = {}
    if snapshot.history is not None:  # the window it graded: a replay grades it the same way
        text = snapshot.history.model_dump_json(indent=1) + "\n"
        history["history"] = stage.write(HISTORY_FILE, _encode(text))
    failures: Dict[str, str] = {}
    for filename, renderer in renderers.items():
        try:
            text = renderer(report, RenderOptions())
        except Exception as exc:  # noqa: BLE001 - a failing renderer must not lose the bundle
            failures[filename] = f"{type(exc).__name__}: {exc}"
            continue
        stage.write(filename, _encode(text))
    items = _catalogue_rows(snapshot)
    redaction = {}
    if stage.redactor is not None:  # what was replaced, never the mapping itself
        redaction["redaction"] = {"replaced": stage.redactor.summary()}
    manifest = Manifest(
        schema_version=MANIFEST_SCHEMA_VERSION,
        tool={"name": "ibdiag", "version": __version__},
        name=name,
        host=snapshot.host,
        level=report.level,
        created_utc=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        thresholds=report.thresholds.model_dump(mode="json"),
        snapshot=_snapshot_header(snapshot),
        files=stage.files,
        commands=commands,
        nccl_inspector=inspector if snapshot.nccl_inspector is not None else None,
        links=recording.links,
        unreadable=recording.unreadable,
        listings=recording.listings,
        listing_errors=recording.listing_errors,
        exists=recording.exists,
        not_stored=not_stored,
        render_failures=failures,
        **redaction,
        **stored_baseline,
        **history,
        **items,
    )
    # exclude_unset: "redaction" only in a redacted bundle. Python mode and json.dumps, not
    # pydantic's JSON: a name read from the node that is not UTF-8 (a lone surrogate, in a
    # listing's key too) must be written \udcXX, not replaced, or replay could not find it.
    fields = manifest.model_dump(exclude_unset=True)
    text = json.dumps(fields, indent=1, default=_iso) + "\n"
    stage.write(MANIFEST, _encode(text), listed=False)


def _catalogue_rows(snapshot: Snapshot) -> Dict[str, list]:
    """The manifest's ``items``: the support catalogue's rows (its files', then its commands'),
    so that a tool that was absent, timed out or not permitted is a line of the manifest;
    nothing when the catalogue was not gathered."""
    rows = [  # as dicts: the manifest, written exclude_unset, then holds every field of each
        row.model_dump(mode="json")
        for name in ("support_files", "support")
        if name in snapshot.facts
        for row in getattr(snapshot.facts[name], "rows", [])
    ]
    return {"items": rows} if rows else {}


def _store_baseline(
    stage: _Stage, snapshot: Snapshot, baseline: Optional[Snapshot]
) -> Dict[str, BaselineEntry]:
    """``baseline`` stored as ``BASELINE_FILE``; the manifest's ``baseline`` entry naming it and
    the graded snapshot's baseline/state problems (nothing when there is neither)."""
    from ibdiag.counters.baseline import BASELINE_PROBLEM, STATE_PROBLEM

    kinds = (BASELINE_PROBLEM, STATE_PROBLEM)
    problems = {key: why for key, why in snapshot.problems.items() if key in kinds}
    if baseline is None and not problems:
        return {}
    stored = None
    if baseline is not None:
        stored = stage.write(BASELINE_FILE, _encode(baseline.model_dump_json(indent=1) + "\n"))
    return {"baseline": BaselineEntry(file=stored, problems=problems)}


def _iso(value: object) -> str:
    """The manifest's datetimes (collected_at, boot_time, a dump's modified_at) as ISO 8601."""
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


def _free_name(outdir: str, name: str) -> str:
    """``name``, or ``name-2``, ... when a bundle of that name (either form) already exists."""
    candidate, n = name, 1
    while any(
        os.path.lexists(os.path.join(outdir, candidate + suffix))
        for suffix in ("", ".tar.gz", ".tar.gz.sha256")
    ):
        n += 1
        candidate = f"{name}-{n}"
    return candidate


def _tar_filter(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode = 0o700 if info.isdir() else 0o600
    return info


class _Hashing:
    """A binary file that hashes what is written to it (the tarball's sha256, in one pass)."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.digest = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        return self.out.write(data)

    def flush(self) -> None:
        self.out.flush()


def _write_tarball(stage_dir: str, name: str, path: str, created: List[str]) -> str:
    """``stage_dir`` as ``path`` (gzip tar, top directory ``name``, mode 0600), written by the
    one atomic writer and never over an existing file; noted in ``created``; its sha256."""
    with atomic_file(path, mode=0o600, replace=False) as raw:
        hashing = _Hashing(raw)
        with tarfile.open(fileobj=hashing, mode="w:gz", compresslevel=6) as tar:  # type: ignore[call-overload]
            tar.add(stage_dir, arcname=name, filter=_tar_filter)
    created.append(path)
    return hashing.digest.hexdigest()


def write_bundle(
    snapshot: Snapshot,
    report: Report,
    recording: Optional[Recording],
    outdir: str,
    tarball: bool = False,
    renderers: Optional[Mapping[str, Renderer]] = None,
    redactor: Optional[Redactor] = None,
    baseline: Optional[Snapshot] = None,
) -> str:
    """Write the support bundle of ``snapshot``/``report`` under ``outdir``; its path.

    ``recording``: what ``collect(..., recording=Recording())`` read (None: no raw files).
    ``renderers``: file name -> ``render(report, options) -> str`` (default
    ``default_renderers()``; each is given the default ``RenderOptions``);
    one that raises is recorded in the manifest's ``render_failures`` and its file left out.
    ``tarball``: write ``<name>.tar.gz`` (0600) and ``<name>.tar.gz.sha256`` instead of the
    directory (0700, files 0600). ``redactor``: every text file (raw files, command output,
    renders, manifest), every member name and the bundle's name pass through it; the manifest
    says what kinds were replaced; the mapping stays with the caller. Nothing appears under
    the final name until it is complete; any exception (KeyboardInterrupt included) removes
    the temporary directory and whatever final path this call had created, then propagates.
    ``baseline``: the snapshot ``report`` graded counters against, stored in the bundle so
    that replaying it grades the same way (``ibdiag.bundle.replay.replay_baseline``).
    """
    renderers = default_renderers() if renderers is None else renderers
    os.makedirs(outdir, exist_ok=True)
    host = redactor.text(snapshot.host) if redactor is not None and snapshot.host else snapshot.host
    name = _free_name(outdir, bundle_name(host, snapshot.collected_at))
    temp = tempfile.mkdtemp(prefix=f".{name}.", suffix=".tmp", dir=outdir)
    created: List[str] = []
    try:
        stage_dir = os.path.join(temp, name)
        os.mkdir(stage_dir, 0o700)
        os.chmod(stage_dir, 0o700)
        stage = _Stage(stage_dir, redactor)
        _fill(stage, name, snapshot, report, recording, renderers, baseline)
        if not tarball:
            final = os.path.join(outdir, name)
            if os.path.lexists(final):
                raise FileExistsError(f"{final} already exists")
            os.rename(stage_dir, final)
            created.append(final)
            return final
        archive = f"{name}.tar.gz"
        final = os.path.join(outdir, archive)
        digest = _write_tarball(stage_dir, name, final, created)
        with atomic_file(final + ".sha256", mode=0o600, replace=False) as handle:
            handle.write(f"{digest}  {archive}\n".encode("ascii"))
        created.append(final + ".sha256")
        return final
    except BaseException:
        for path in reversed(created):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(path)
        raise
    finally:
        shutil.rmtree(temp, ignore_errors=True)
