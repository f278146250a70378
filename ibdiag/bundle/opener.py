"""Opening a support bundle safely: ``open_bundle`` verifies one and yields an ``OpenedBundle``.

A bundle is a directory or a tarball (gzip, bzip2, xz or plain), written by
``ibdiag.bundle.write``. Opening one writes nothing: a tarball is read as a stream, once, within
``ibdiag.bundle.limits`` (``ibdiag.bundle.archive`` judges every member's header before its
data); a directory is used in place after checking it holds no symlink or special file. The
manifest is validated (``ibdiag.bundle.manifest``) and every file checked against its sha256.
What cannot be used at all is a ``BundleError``: one line that names the bundle once.
``ibdiag.bundle.replay`` rebuilds the Snapshot from what was opened.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

from ibdiag.bundle import limits
from ibdiag.bundle.archive import (
    Archive,
    ArchiveError,
    CorruptArchive,
    kept_area,
    member_limit,
    read_archive,
)
from ibdiag.bundle.manifest import MANIFEST, Manifest, ManifestError, load_manifest, safe_relpath
from ibdiag.errors import IbdiagError

_CHUNK = 1024 * 1024


class BundleError(IbdiagError):
    """The bundle cannot be used (unsafe or oversized member, truncated archive, missing or
    invalid manifest, altered files): one line that names the bundle once."""


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
        only manifest.json and what replay reads (root/, commands/, nccl_inspector/, baseline/,
        history/) are kept,
        or what ``open_bundle(keep=...)`` asked for."""
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


def _open_archive(path: str, keep: Optional[Mapping[str, int]] = None) -> OpenedBundle:
    """A tarball: every member judged and hashed in one pass over the stream, nothing written."""
    try:
        with open(path, "rb") as raw:
            archive = read_archive(raw, keep)
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
def open_bundle(
    path: str, accept_altered: bool = False, keep: Optional[Mapping[str, int]] = None
) -> Iterator[OpenedBundle]:
    """Open a bundle (a tarball - gzip, bzip2, xz or plain - or a directory) and verify it
    against its manifest.

    A tarball is read as a stream, once, judging every member's header before its data (see
    ``ibdiag.bundle.archive``) and within ``ibdiag.bundle.limits``; nothing is written to disk.
    A directory is used in place after checking it holds no symlink or special file. Raises
    ``BundleError`` (one line naming the bundle once, and the culprit) when the bundle cannot be
    used: an unsafe or oversized member, a truncated or corrupt archive, a missing, oversized or
    invalid manifest, and - unless ``accept_altered`` - a file whose sha256 differs from the
    manifest's. Missing and unlisted files (and accepted altered ones) are listed in the
    yielded ``OpenedBundle`` for the caller to show.

    ``keep`` (bundle path -> most bytes) says which files of a tarball to hold for ``read``
    instead of the manifest and what replay reads: the fleet reads report.json alone. A
    directory is read in place whatever ``keep`` says.
    """
    if os.path.isdir(path):
        opened = _open_directory(path)
    elif os.path.isfile(path):
        opened = _open_archive(path, keep)
    else:
        raise BundleError(f"{path}: no such bundle (neither a directory nor a file)")
    if opened.altered and not accept_altered:
        _refuse_altered(opened)
    yield opened
