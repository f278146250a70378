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
an interrupted or failed write leaves nothing under the final name. Opening one writes nothing:
a tarball is read as a stream within ``ibdiag.bundle_limits`` (``ibdiag.bundle_archive``), its
manifest validated (``ibdiag.bundle_manifest``), every file checked against the manifest's
sha256; ``replay`` rebuilds the Snapshot the live run built, parsing the raw files with
today's code.
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
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import (
    TYPE_CHECKING,
    Any,
    BinaryIO,
    Callable,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Tuple,
)

from ibdiag import __version__
from ibdiag import bundle_limits as limits
from ibdiag.bundle_archive import (
    Archive,
    ArchiveError,
    CorruptArchive,
    kept_area,
    member_limit,
    read_archive,
)
from ibdiag.bundle_manifest import (
    MANIFEST,
    MANIFEST_SCHEMA_VERSION,
    CommandEntry,
    Manifest,
    ManifestError,
    load_manifest,
    safe_relpath,
)
from ibdiag.files import atomic_file
from ibdiag.model import CommandRun, InspectorFile, Report, Snapshot, command_key
from ibdiag.render.options import RenderOptions
from ibdiag.sources.sysfs import _MAX_ATTRIBUTE_BYTES as MAX_ATTRIBUTE_BYTES
from ibdiag.sources.sysfs import Recording, SysfsReader, decode_attribute, natural_key

if TYPE_CHECKING:  # only for annotations: redaction loads when asked for
    from ibdiag.redact import Redactor

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

Renderer = Callable[[Report, RenderOptions], str]  # ibdiag.render.*.render


class BundleError(Exception):
    """The bundle cannot be used (unsafe or oversized member, truncated archive, missing or
    invalid manifest, altered files): one line that names the bundle once."""


# -- writing -----------------------------------------------------------------------------------


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


def _utc_iso(when: Optional[datetime]) -> Optional[str]:
    return when.isoformat() if when is not None else None


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
            text = renderer(report, RenderOptions())
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


# -- opening -----------------------------------------------------------------------------------


@dataclass
class OpenedBundle:
    """A verified bundle: ``path`` as given (a tarball or a directory), its validated manifest,
    and what differs from it. Read its files with ``read``."""

    path: str
    manifest: Manifest
    missing: List[str] = field(default_factory=list)  # listed in the manifest, not in the bundle
    altered: List[str] = field(default_factory=list)  # size or sha256 differs from the manifest
    unlisted: List[str] = field(default_factory=list)  # in the bundle, not in the manifest
    archive: Optional[Archive] = None  # a tarball's contents; None: a directory, read in place

    @property
    def problems(self) -> List[str]:
        """One line per missing, altered or unlisted file."""
        return (
            [f"missing: {p}" for p in self.missing]
            + [f"altered: {p}" for p in self.altered]
            + [f"not in manifest: {p}" for p in self.unlisted]
        )

    def warnings(self, limit: int = limits.MAX_WARNINGS) -> List[str]:
        """``problems`` for the caller to show: the first ``limit``, then how many more."""
        problems = self.problems
        if len(problems) <= limit:
            return problems
        rest = len(problems) - limit
        return [*problems[:limit], f"and {rest} more missing, altered or unlisted files"]

    @property
    def level(self) -> Optional[str]:
        return self.manifest.level

    @property
    def thresholds(self) -> Optional[Dict[str, Any]]:
        """The effective thresholds the bundle was graded with (JSON form, not yet validated)."""
        return self.manifest.thresholds

    def read(self, rel: str) -> Optional[bytes]:
        """The bundle's file ``rel`` (a manifest path); None when it is not there. Of a tarball
        only manifest.json and what replay reads (root/, commands/, nccl_inspector/) are kept."""
        if not safe_relpath(rel):
            return None
        if self.archive is not None:
            return self.archive.kept.get(rel)
        try:
            fd = os.open(os.path.join(self.path, *rel.split("/")), os.O_RDONLY | _NOFOLLOW)
        except OSError:
            return None
        limit = member_limit(rel)[0]
        with os.fdopen(fd, "rb") as handle:
            size = min(os.fstat(handle.fileno()).st_size, limit)
            data = handle.read(size + 1)
            if len(data) > size:  # it grew since it was checked
                data += handle.read(limit + 1 - len(data))
        if len(data) > limit:
            raise BundleError(f"refusing {self.path}: {rel} grew past its limit while read")
        return data


_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


def _manifest(data: bytes, label: str) -> Manifest:
    try:
        return load_manifest(data)
    except ManifestError as exc:
        raise BundleError(f"refusing {label}: {exc}") from None


def _open_archive(path: str) -> OpenedBundle:
    """A tarball: every member judged and hashed in one pass over the stream, nothing written."""
    try:
        with open(path, "rb") as raw:
            archive = read_archive(raw)
    except CorruptArchive as exc:
        why = f"not a readable bundle (truncated or corrupt archive): {exc}"
        raise BundleError(f"{path}: {why}") from None
    except ArchiveError as exc:
        raise BundleError(f"refusing {path}: {exc}") from None
    except OSError as exc:
        raise BundleError(f"{path}: cannot read: {exc.strerror or exc}") from None
    data = archive.kept.get(MANIFEST)
    if data is None:
        raise BundleError(f"{path}: no {MANIFEST}: not an ibdiag bundle")
    opened = OpenedBundle(path=path, manifest=_manifest(data, path), archive=archive)
    listed = set()
    for entry in opened.manifest.files:
        listed.add(entry.path)
        member = archive.files.get(entry.path)
        if member is None:
            opened.missing.append(entry.path)
        elif member.size != entry.size or member.sha256 != entry.sha256:
            opened.altered.append(entry.path)
    opened.unlisted = sorted(set(archive.files) - listed - {MANIFEST})
    return opened


def _walk_directory(path: str) -> Dict[str, int]:
    """A directory bundle's files (relative path -> size); refuses symlinks, special files and
    what is past the limits a tarball has."""
    found: Dict[str, int] = {}
    area_bytes: Dict[str, int] = {}
    for here, dirs, files in os.walk(path):
        below = os.path.relpath(here, path).replace(os.sep, "/")
        for entry in sorted(dirs) + sorted(files):
            full = os.path.join(here, entry)
            info = os.lstat(full)
            rel = entry if below == "." else f"{below}/{entry}"
            if stat.S_ISLNK(info.st_mode):
                why = "a symbolic link"
            elif not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
                why = "not a regular file or directory"
            elif stat.S_ISDIR(info.st_mode):
                continue
            elif len(found) >= limits.MAX_MEMBERS:
                why = f"one file more than {limits.MAX_MEMBERS} (a bundle holds a few thousand)"
            else:
                limit, what = member_limit(rel)
                if info.st_size > limit:
                    why = f"{info.st_size} bytes; {what} {limits.size_text(limit)}"
                    raise BundleError(f"refusing bundle {path}: {rel!r} is {why}")
                found[rel] = info.st_size
                area = kept_area(rel)
                if area is not None:
                    area_bytes[area[0]] = area_bytes.get(area[0], 0) + info.st_size
                    if area_bytes[area[0]] > area[2]:
                        total = limits.size_text(area[2])
                        raise BundleError(
                            f"refusing bundle {path}: its {area[0]} files come to more than {total}"
                        )
                continue
            raise BundleError(f"refusing bundle {path}: {rel!r} is {why}")
    return found


def _open_directory(path: str) -> OpenedBundle:
    files = _walk_directory(path)
    if MANIFEST not in files:
        raise BundleError(f"{path}: no {MANIFEST}: not an ibdiag bundle")
    try:
        fd = os.open(os.path.join(path, MANIFEST), os.O_RDONLY | _NOFOLLOW)
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(limits.MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        raise BundleError(f"{path}: {MANIFEST} is unreadable: {exc.strerror or exc}") from None
    opened = OpenedBundle(path=path, manifest=_manifest(data, path))
    listed = set()
    for entry in opened.manifest.files:
        listed.add(entry.path)
        if entry.path not in files:
            opened.missing.append(entry.path)
            continue
        try:
            size, digest = _sha256_file(os.path.join(path, *entry.path.split("/")))
        except OSError:
            size, digest = -1, ""
        if size != entry.size or digest != entry.sha256:
            opened.altered.append(entry.path)
    opened.unlisted = sorted(set(files) - listed - {MANIFEST})
    return opened


def _sha256_file(path: str) -> Tuple[int, str]:
    digest, size = hashlib.sha256(), 0
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def _refuse_altered(opened: OpenedBundle) -> None:
    names = opened.altered[: limits.MAX_WARNINGS]
    more = len(opened.altered) - len(names)
    listed = ", ".join(names) + (f" and {more} more" if more else "")
    count = len(opened.altered)
    raise BundleError(
        f"refusing {opened.path}: {count} file{'s' if count > 1 else ''} differ"
        f"{'' if count > 1 else 's'} from the sha256 in {MANIFEST}: {listed} "
        "(--accept-altered grades it anyway)"
    )


@contextlib.contextmanager
def open_bundle(path: str, accept_altered: bool = False) -> Iterator[OpenedBundle]:
    """Open a bundle (a tarball - gzip, bzip2, xz or plain - or a directory) and verify it
    against its manifest.

    A tarball is read as a stream, once, judging every member's header before its data (see
    ``ibdiag.bundle_archive``) and within ``ibdiag.bundle_limits``; nothing is written to disk.
    A directory is used in place after checking it holds no symlink or special file. Raises
    ``BundleError`` (one line naming the bundle once, and the culprit) when the bundle cannot be
    used: an unsafe or oversized member, a truncated or corrupt archive, a missing, oversized or
    invalid manifest, and - unless ``accept_altered`` - a file whose sha256 differs from the
    manifest's. Missing and unlisted files (and accepted altered ones) are listed in the
    yielded ``OpenedBundle`` for the caller to show.
    """
    if os.path.isdir(path):
        opened = _open_directory(path)
    elif os.path.isfile(path):
        opened = _open_archive(path)
    else:
        raise BundleError(f"{path}: no such bundle (neither a directory nor a file)")
    if opened.altered and not accept_altered:
        _refuse_altered(opened)
    yield opened


# -- replaying ---------------------------------------------------------------------------------


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


def _role_before_roles(
    entry: CommandEntry, thresholds: Mapping[str, Any], planned: Mapping[str, str]
) -> Optional[str]:
    """The role of a run in a bundle written before runs kept their role, the one place a run
    is known by its argv: a read-only command by the argv today's plan gives it on the
    bundle's devices (``plan.roles_by_argv``); the nccl-tests run as the one whose argv holds
    the program the bundle's thresholds configured (``nccl_tests``; ibdiag put it in the argv
    as is, after any launcher); any other run's role is unknown."""
    from ibdiag import roles

    role = planned.get(command_key(list(entry.argv)))
    if role is not None:
        return role
    program = thresholds.get("nccl_tests")
    if isinstance(program, str) and program and program in entry.argv:
        return roles.NCCL_TESTS
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
    fields = read_node(sys_reader, proc_reader, set(sources) - {"procfs"})
    commands: Dict[str, CommandRun] = {}
    planned: Optional[Mapping[str, str]] = None
    for entry in manifest.commands:
        data = {name: getattr(entry, name) for name in _RUN_FIELDS}
        if "role" not in entry.model_fields_set:  # written before roles were recorded
            if planned is None:
                from ibdiag.sources.plan import roles_by_argv

                planned = roles_by_argv(fields["devices"], set(sources), fields.get("gpus"))
            data["role"] = _role_before_roles(entry, manifest.thresholds or {}, planned)
        data["stdout"] = _read_stream(opened, entry.stdout_file)
        data["stderr"] = _read_stream(opened, entry.stderr_file)
        run = CommandRun.model_validate(data)  # read from outside: validated, as a baseline is
        commands[entry.key or run.key] = run
    fields.update(
        host=header.host,
        boot_id=header.boot_id,
        boot_time=header.boot_time,
        nccl_inspector_dir=header.nccl_inspector_dir,
        nccl_inspector=_replay_inspector(opened),
    )
    if commands or fields.get("nccl_inspector") is not None:
        from ibdiag.sources.interpret import interpret

        fields = interpret(fields, commands)
    # Validated: the header came from outside. What the readers and interpret built (devices,
    # typed command fields) are model instances already, which pydantic takes as they are.
    return Snapshot.model_validate(
        dict(
            schema_version=header.schema_version,
            tool_version=header.tool_version,
            collected_at=header.collected_at,
            sysfs_root=header.sysfs_root,
            procfs_root=header.procfs_root,
            sources=sources,
            commands=commands,
            **fields,
        )
    )
