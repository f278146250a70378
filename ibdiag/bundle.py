"""Support bundles: write one (``ibdiag collect``), open one safely, replay it into a Snapshot.

Layout of ``ibdiag-<host>-<UTC %Y%m%dT%H%M%SZ>/`` (a directory, or that directory in a
``.tar.gz`` with a ``.sha256`` beside it):

    manifest.json    schema_version, tool, host, level, created_utc, effective thresholds, the
                     snapshot's header; every file (size, sha256); every command (argv, rc,
                     role, duration_s, timed_out, *_truncated, ... and its stdout/stderr
                     files);
                     links (symlinks resolved), unreadable (files that could not be read and
                     why), listings/listing_errors, exists; render_failures
    report.json      the Report (JSON renderer)
    report.html      the Report (HTML renderer) - absent when that renderer failed
    summary.txt      the Report (text renderer)
    root/sys/...     every sysfs file read, at the logical path the reader used (no symlinks:
    root/proc/...    link targets are in the manifest)
    commands/NNN-<argv>.stdout|.stderr
    nccl_inspector/NNN-<dump file name>   (level full)

With a redactor, contents and member names alike pass through its one mapping (an mpirun
``-H host`` in an argv, NCCL's ``<hostname>-pid<pid>.log``), and the manifest lists the names
as stored, so a redacted bundle opens without missing or unlisted files and replays whole.

A bundle is built in a temporary directory beside its destination and renamed into place, so
an interrupted or failed write leaves nothing under the final name. Opening one never writes
outside its own temporary directory; ``replay`` rebuilds the Snapshot the live run built,
parsing the raw files with today's code.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
import tarfile
import tempfile
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

from ibdiag import __version__
from ibdiag.model import CommandRun, InspectorFile, Report, Snapshot
from ibdiag.sources.sysfs import Recording, SysfsReader, decode_attribute, natural_key

if TYPE_CHECKING:  # only for annotations: redaction loads when asked for
    from ibdiag.redact import Redactor

MANIFEST_SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
MAX_EXTRACT_BYTES = 4 * 1024**3  # a bundle is megabytes; refuse an archive that inflates past this
_CHUNK = 1024 * 1024
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
_RUN_FIELDS = (
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

Renderer = Callable[[Report], str]


class BundleError(Exception):
    """The bundle cannot be used (unsafe member, truncated archive, missing/corrupt manifest)."""


# -- writing -----------------------------------------------------------------------------------


def _render_html(report: Report) -> str:
    from ibdiag.render import html  # jinja2 only when a bundle is written

    return html.render(report)


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


def _utc_iso(when: Optional[datetime]) -> Optional[str]:
    return when.isoformat() if when is not None else None


def _safe_relpath(path: str) -> bool:
    parts = path.split("/")
    return bool(path) and not path.startswith("/") and all(p not in ("", ".", "..") for p in parts)


class _Stage:
    """The bundle directory being built: every file written 0600 (dirs 0700) and listed."""

    def __init__(self, directory: str, redactor: Optional[Redactor] = None) -> None:
        self.directory = directory
        self.redactor = redactor
        self.files: List[Dict[str, Any]] = []
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

    def write(self, rel: str, data: bytes) -> str:
        """Write one file; the name it is stored and listed under.

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
        digest = hashlib.sha256(data).hexdigest()
        self.files.append({"path": rel, "size": len(data), "sha256": digest})
        return rel


def _snapshot_header(snapshot: Snapshot) -> Dict[str, Any]:
    return {
        "schema_version": snapshot.schema_version,
        "tool_version": snapshot.tool_version,
        "host": snapshot.host,
        "boot_id": snapshot.boot_id,
        "boot_time": _utc_iso(snapshot.boot_time),
        "collected_at": _utc_iso(snapshot.collected_at),
        "sysfs_root": snapshot.sysfs_root,
        "procfs_root": snapshot.procfs_root,
        "sources": list(snapshot.sources),
        "nccl_inspector_dir": snapshot.nccl_inspector_dir,
    }


def _encode(text: str) -> bytes:
    return text.encode("utf-8", errors="surrogatepass")


def _fill(
    stage: _Stage,
    name: str,
    snapshot: Snapshot,
    report: Report,
    recording: Optional[Recording],
    renderers: Mapping[str, Renderer],
) -> None:
    """Write root/, commands/, the renders and finally manifest.json into ``stage``."""
    recording = recording or Recording()
    not_stored: Dict[str, str] = {}
    for rel in sorted(recording.files, key=natural_key):
        if not _safe_relpath(rel):
            not_stored[rel] = "unsafe path"
            continue
        try:
            stage.write(f"root/{rel}", recording.files[rel])
        except OSError as exc:  # a path that is both a file and a directory, say
            not_stored[rel] = f"{type(exc).__name__}: {exc.strerror or exc}"
    commands = []
    for index, (key, run) in enumerate(snapshot.commands.items(), start=1):
        base = f"commands/{index:03d}-{stage.label('_'.join(run.argv) or 'command', 80)}"
        entry: Dict[str, Any] = {"key": key}
        entry.update({name_: getattr(run, name_) for name_ in _RUN_FIELDS})
        entry["argv"] = list(run.argv)
        for stream in ("stdout", "stderr"):
            entry[f"{stream}_file"] = stage.write(f"{base}.{stream}", _encode(getattr(run, stream)))
        commands.append(entry)
    inspector = []
    for index, dump in enumerate(snapshot.nccl_inspector or [], start=1):
        # NCCL's JSON dumps are named <hostname>-pid<pid>.log
        name_ = stage.redactor.name(dump.name) if stage.redactor is not None else dump.name
        path = f"nccl_inspector/{index:03d}-{stage.label(dump.name, 120)}"
        inspector.append(
            {
                "name": name_,
                "file": stage.write(path, _encode(dump.text)),
                "modified_at": dump.modified_at.isoformat() if dump.modified_at else None,
                "truncated": dump.truncated,
            }
        )
    failures: Dict[str, str] = {}
    for filename, renderer in renderers.items():
        try:
            text = renderer(report)
        except Exception as exc:  # noqa: BLE001 - a failing renderer must not lose the bundle
            failures[filename] = f"{type(exc).__name__}: {exc}"
            continue
        stage.write(filename, _encode(text))
    manifest = {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "tool": {"name": "ibdiag", "version": __version__},
        "name": name,
        "host": snapshot.host,
        "level": report.level,
        "created_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "thresholds": report.thresholds.model_dump(mode="json"),
        "snapshot": _snapshot_header(snapshot),
        "files": stage.files,
        "commands": commands,
        "nccl_inspector": inspector if snapshot.nccl_inspector is not None else None,
        "links": dict(recording.links),
        "unreadable": dict(recording.unreadable),
        "listings": dict(recording.listings),
        "listing_errors": dict(recording.listing_errors),
        "exists": dict(recording.exists),
        "not_stored": not_stored,
        "render_failures": failures,
    }
    if stage.redactor is not None:  # what was replaced, never the mapping itself
        manifest["redaction"] = {"replaced": stage.redactor.summary()}
    stage.write(MANIFEST, _encode(json.dumps(manifest, indent=1, sort_keys=False) + "\n"))
    stage.files.pop()  # the manifest does not list itself


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


def _write_tarball(stage_dir: str, name: str, path: str) -> str:
    """``stage_dir`` as ``path`` (gzip tar, top directory ``name``, mode 0600); its sha256."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "wb") as raw:
        os.fchmod(raw.fileno(), 0o600)
        with tarfile.open(fileobj=raw, mode="w:gz", compresslevel=6) as tar:
            tar.add(stage_dir, arcname=name, filter=_tar_filter)
        raw.flush()
        os.fsync(raw.fileno())
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _publish(temp: str, final: str, created: List[str]) -> None:
    """Link ``temp`` to ``final`` (never replacing an existing file); note it in ``created``."""
    os.link(temp, final)
    created.append(final)


def write_bundle(
    snapshot: Snapshot,
    report: Report,
    recording: Optional[Recording],
    outdir: str,
    tarball: bool = False,
    renderers: Optional[Mapping[str, Renderer]] = None,
    redactor: Optional[Redactor] = None,
) -> str:
    """Write the support bundle of ``snapshot``/``report`` under ``outdir``; its path.

    ``recording``: what ``collect(..., recording=Recording())`` read (None: no raw files).
    ``renderers``: file name -> ``render(report) -> str`` (default ``default_renderers()``);
    one that raises is recorded in the manifest's ``render_failures`` and its file left out.
    ``tarball``: write ``<name>.tar.gz`` (0600) and ``<name>.tar.gz.sha256`` instead of the
    directory (0700, files 0600). ``redactor``: every text file (raw files, command output,
    renders, manifest), every member name and the bundle's name pass through it; the manifest
    says what kinds were replaced; the mapping stays with the caller. Nothing appears under
    the final name until it is complete; any exception (KeyboardInterrupt included) removes
    the temporary directory and whatever final path this call had created, then propagates.
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
        _fill(_Stage(stage_dir, redactor), name, snapshot, report, recording, renderers)
        if not tarball:
            final = os.path.join(outdir, name)
            if os.path.lexists(final):
                raise FileExistsError(f"{final} already exists")
            os.rename(stage_dir, final)
            created.append(final)
            return final
        archive = f"{name}.tar.gz"
        temp_archive = os.path.join(temp, archive)
        digest = _write_tarball(stage_dir, name, temp_archive)
        temp_sum = os.path.join(temp, archive + ".sha256")
        fd = os.open(temp_sum, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(f"{digest}  {archive}\n")
        final = os.path.join(outdir, archive)
        _publish(temp_archive, final, created)
        _publish(temp_sum, final + ".sha256", created)
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


# -- opening -----------------------------------------------------------------------------------


@dataclass
class OpenedBundle:
    """A verified bundle on disk: ``path`` is its top directory (read-only use)."""

    path: str
    manifest: Dict[str, Any]
    missing: List[str] = field(default_factory=list)  # listed in the manifest, not in the bundle
    altered: List[str] = field(default_factory=list)  # size or sha256 differs from the manifest
    unlisted: List[str] = field(default_factory=list)  # in the bundle, not in the manifest

    @property
    def problems(self) -> List[str]:
        """One line per missing, altered or unlisted file, for the caller to show."""
        return (
            [f"missing: {p}" for p in self.missing]
            + [f"altered: {p}" for p in self.altered]
            + [f"not in manifest: {p}" for p in self.unlisted]
        )

    @property
    def level(self) -> Optional[str]:
        return self.manifest.get("level")

    @property
    def thresholds(self) -> Optional[Dict[str, Any]]:
        """The effective thresholds the bundle was graded with (JSON form)."""
        return self.manifest.get("thresholds")


def _member_problem(member: tarfile.TarInfo, top: Optional[str]) -> Optional[str]:
    name = member.name
    if not name or name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        return "an absolute path"
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts or "\\.." in name or "..\\" in name:
        return "a path with '..'"
    if member.issym():
        return f"a symbolic link (to {member.linkname!r})"
    if member.islnk():
        return f"a hard link (to {member.linkname!r})"
    if member.ischr() or member.isblk():
        return "a device file"
    if member.isfifo():
        return "a FIFO"
    if not (member.isfile() or member.isdir()):
        return "not a regular file or directory"
    if not parts or (top is not None and parts[0] != top):
        return f"outside the archive root {top or ''}/"
    return None


def _extract(archive: str, into: str) -> str:
    """Check every member, then extract them under ``into``; the bundle's top directory."""
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = tar.getmembers()
            if not members:
                raise BundleError(f"{archive}: empty archive")
            first = [p for p in members[0].name.split("/") if p not in ("", ".")]
            top = first[0] if first and first[0] != ".." else None
            for member in members:
                why = _member_problem(member, top)
                if why is not None:
                    raise BundleError(f"refusing {archive}: member {member.name!r} is {why}")
            if sum(m.size for m in members if m.isfile()) > MAX_EXTRACT_BYTES:
                raise BundleError(f"refusing {archive}: it unpacks to more than 4 GiB")
            for member in members:
                _extract_member(tar, member, into, archive)
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise BundleError(
            f"{archive}: not a readable bundle (truncated or corrupt archive): {exc}"
        ) from None
    return os.path.join(into, top)  # type: ignore[arg-type]


def _extract_member(tar: tarfile.TarFile, member: tarfile.TarInfo, into: str, archive: str) -> None:
    parts = [p for p in member.name.split("/") if p not in ("", ".")]
    dest = os.path.join(into, *parts)
    if member.isdir():
        os.makedirs(dest, mode=0o700, exist_ok=True)
        return
    os.makedirs(os.path.dirname(dest), mode=0o700, exist_ok=True)
    source = tar.extractfile(member)
    if source is None:
        raise BundleError(f"refusing {archive}: member {member.name!r} has no data")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(dest, flags, 0o600)
    except FileExistsError:
        raise BundleError(f"refusing {archive}: member {member.name!r} appears twice") from None
    with os.fdopen(fd, "wb") as out, source:
        shutil.copyfileobj(source, out, _CHUNK)


def _check_directory(path: str) -> None:
    """A directory bundle: refuse symlinks and special files anywhere inside it."""
    for here, dirs, files in os.walk(path):
        for entry in dirs + files:
            full = os.path.join(here, entry)
            mode = os.lstat(full).st_mode
            if stat.S_ISLNK(mode):
                why = "a symbolic link"
            elif not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                why = "not a regular file or directory"
            else:
                continue
            rel = os.path.relpath(full, path)
            raise BundleError(f"refusing bundle {path}: {rel!r} is {why}")


def _sha256_file(path: str) -> Tuple[int, str]:
    digest, size = hashlib.sha256(), 0
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def _verify(root: str, label: str) -> OpenedBundle:
    manifest_path = os.path.join(root, MANIFEST)
    try:
        fd = os.open(manifest_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            manifest = json.loads(handle.read().decode("utf-8"))
    except FileNotFoundError:
        raise BundleError(f"{label}: no {MANIFEST}: not an ibdiag bundle") from None
    except (OSError, ValueError) as exc:
        raise BundleError(f"{label}: {MANIFEST} is unreadable or corrupt: {exc}") from None
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, list) or not isinstance(manifest.get("snapshot"), dict):
        raise BundleError(f"{label}: {MANIFEST} is not a bundle manifest (no files or snapshot)")
    version = manifest.get("schema_version")
    if not isinstance(version, int) or version > MANIFEST_SCHEMA_VERSION:
        raise BundleError(f"{label}: manifest schema_version {version!r} is not supported")
    opened = OpenedBundle(path=root, manifest=manifest)
    listed = set()
    for entry in files:
        rel = entry.get("path") if isinstance(entry, dict) else None
        if not isinstance(rel, str) or not _safe_relpath(rel):
            raise BundleError(f"{label}: {MANIFEST} lists an unsafe path {rel!r}")
        listed.add(rel)
        full = os.path.join(root, *rel.split("/"))
        try:
            size, digest = _sha256_file(full)
        except FileNotFoundError:
            opened.missing.append(rel)
            continue
        except OSError:
            opened.altered.append(rel)
            continue
        if size != entry.get("size") or digest != entry.get("sha256"):
            opened.altered.append(rel)
    for here, _dirs, names in os.walk(root):
        for entry_name in names:
            rel = os.path.relpath(os.path.join(here, entry_name), root).replace(os.sep, "/")
            if rel != MANIFEST and rel not in listed:
                opened.unlisted.append(rel)
    opened.unlisted.sort()
    return opened


@contextlib.contextmanager
def open_bundle(path: str, workdir: Optional[str] = None) -> Iterator[OpenedBundle]:
    """Open a bundle (``.tar.gz`` or directory) and verify it against its manifest.

    A tarball is extracted, after every member is checked, into a fresh temporary directory
    (under ``workdir``, default the system's) that is removed on exit; a directory is used in
    place after checking it holds no symlink or special file. Raises ``BundleError`` (one
    message naming the culprit) when the bundle is unusable: unsafe member, truncated or
    corrupt archive, manifest missing or corrupt. Missing and altered files are not errors:
    they are listed in the yielded ``OpenedBundle`` for the caller to show.
    """
    if os.path.isdir(path):
        _check_directory(path)
        yield _verify(path, path)
        return
    if not os.path.isfile(path):
        raise BundleError(f"{path}: no such bundle (neither a directory nor a file)")
    temp = tempfile.mkdtemp(prefix="ibdiag-bundle-", dir=workdir)
    try:
        root = _extract(path, temp)
        yield _verify(root, path)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


# -- replaying ---------------------------------------------------------------------------------


class BundleReader(SysfsReader):
    """Answers the SysfsReader calls from a bundle: files from ``root/<prefix>/``, listings,
    ``exists`` and symlink names from the manifest; never follows a link out of the bundle."""

    def __init__(self, opened: OpenedBundle, prefix: str, original_root: str) -> None:
        super().__init__(original_root)
        self.prefix = prefix
        self.bundle_root = os.path.join(opened.path, "root")
        manifest = opened.manifest
        self.stored = {
            entry["path"][len("root/") :]
            for entry in manifest["files"]
            if entry["path"].startswith("root/")
        }
        self.unreadable: Dict[str, str] = manifest.get("unreadable") or {}
        self.listings: Dict[str, List[str]] = manifest.get("listings") or {}
        self.listing_errors: Dict[str, str] = manifest.get("listing_errors") or {}
        self.links: Dict[str, Dict[str, str]] = manifest.get("links") or {}
        self.exists_map: Dict[str, bool] = manifest.get("exists") or {}

    def key(self, rel: str) -> str:
        return f"{self.prefix}/{rel.strip('/')}"

    def read_bytes(self, rel: str) -> Tuple[Optional[bytes], Optional[str]]:
        key = self.key(rel)
        if key in self.unreadable:
            return None, self.unreadable[key]
        if key not in self.stored:
            return None, "not recorded in the bundle"
        path = os.path.join(self.bundle_root, *key.split("/"))
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None, "missing from the bundle"
        with os.fdopen(fd, "rb") as handle:
            return handle.read(), None

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
        if isinstance(link, dict) and isinstance(link.get("name"), str):
            return link["name"]
        return os.path.basename(rel.rstrip("/"))


def _parse_time(text: Optional[str]) -> Optional[datetime]:
    return datetime.fromisoformat(text) if text else None


def _read_stream(opened: OpenedBundle, rel: Optional[str]) -> str:
    if not rel or not _safe_relpath(rel):
        return ""
    try:
        fd = os.open(os.path.join(opened.path, *rel.split("/")), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as handle:
        data = handle.read()
    try:
        return data.decode("utf-8", errors="surrogatepass")
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace")


def _replay_inspector(opened: OpenedBundle, entries) -> Optional[List[InspectorFile]]:
    """The NCCL Inspector dumps the bundle holds (None: the run did not read any)."""
    if entries is None:
        return None
    return [
        InspectorFile.model_validate(
            {
                "name": entry["name"],
                "modified_at": entry.get("modified_at"),
                "text": _read_stream(opened, entry.get("file")),
                "truncated": bool(entry.get("truncated")),
            }
        )
        for entry in entries
    ]


def _role_before_roles(entry: Mapping[str, Any], thresholds: Mapping[str, Any]) -> Optional[str]:
    """The role of a run in a bundle written before runs kept their role: the nccl-tests run
    is the one whose argv holds the program the bundle's thresholds configured (``nccl_tests``;
    ibdiag put it in the argv as is, after any launcher); any other run's role is unknown."""
    from ibdiag.sources.parsers.nccl_tests import NCCL_TESTS_ROLE

    program = thresholds.get("nccl_tests")
    argv = entry.get("argv")
    if isinstance(program, str) and program and isinstance(argv, list) and program in argv:
        return NCCL_TESTS_ROLE
    return None


def replay(opened: OpenedBundle) -> Snapshot:
    """The Snapshot the live run built, rebuilt from the bundle's raw files and command outputs.

    Files are parsed by the same code as a live collection (``collect.read_node``); identity
    and timing (host, boot_id, collected_at, tool_version, roots, sources) come from the
    manifest. Runs nothing and reads nothing outside the bundle. A malformed manifest raises
    ``BundleError``.
    """
    from ibdiag.collect import read_node

    manifest = opened.manifest
    try:
        header = manifest["snapshot"]
        sources = list(header.get("sources") or [])
        sys_reader = BundleReader(opened, "sys", header["sysfs_root"])
        proc_reader = BundleReader(opened, "proc", header["procfs_root"])
        fields = read_node(sys_reader, proc_reader, set(sources) - {"procfs"})
        commands: Dict[str, CommandRun] = {}
        for entry in manifest.get("commands") or []:
            data = {name: entry[name] for name in _RUN_FIELDS if name in entry}
            if "role" not in entry:  # written before roles were recorded
                data["role"] = _role_before_roles(entry, manifest.get("thresholds") or {})
            data["stdout"] = _read_stream(opened, entry.get("stdout_file"))
            data["stderr"] = _read_stream(opened, entry.get("stderr_file"))
            run = CommandRun.model_validate(data)
            commands[entry.get("key") or run.key] = run
        fields.update(
            host=header.get("host"),
            boot_id=header.get("boot_id"),
            boot_time=_parse_time(header.get("boot_time")),
            nccl_inspector_dir=header.get("nccl_inspector_dir"),
            nccl_inspector=_replay_inspector(opened, manifest.get("nccl_inspector")),
        )
        return Snapshot.model_construct(
            schema_version=header.get("schema_version", 1),
            tool_version=header["tool_version"],
            collected_at=_parse_time(header["collected_at"]),
            sysfs_root=header["sysfs_root"],
            procfs_root=header["procfs_root"],
            sources=sources,
            commands=commands,
            **fields,
        )
    except BundleError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise BundleError(f"{opened.path}: {MANIFEST} is malformed: {exc!r}") from None
