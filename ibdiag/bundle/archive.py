"""Reading a bundle tarball in one pass, within ``ibdiag.bundle.limits``, writing nothing to disk.

The archive is read as a stream (gzip, bzip2, xz or plain tar): each header is parsed and judged
*before* any of its data is read - a path that is absolute or has ``..``, a link, a device, a
FIFO, a sparse file, a member outside the top directory, a size over a limit - and only then
is its data read, exactly the size its header claims (so never more than a limit allows), in
chunks into a sha256 and, for the files replay needs, into memory. The stream is read to its
very end, so gzip's trailer (CRC-32 and length) is checked: an archive cut short is refused.

Why not ``tarfile``: it reads a pax or GNU long-name header whole (a header can claim
gigabytes), follows a sparse map of any length, and writes what it extracts. This reader knows
the ustar header, pax extended headers (path, linkpath, size) and GNU long names - everything
``tarfile`` and GNU tar write for plain files and directories - and refuses the rest by name.
"""

from __future__ import annotations

import hashlib
import re
import struct
import zlib
from dataclasses import dataclass, field
from typing import BinaryIO, Dict, Mapping, Optional, Tuple, Type

from ibdiag.bundle import limits
from ibdiag.bundle.limits import size_text

BLOCK = 512
_ZERO_BLOCK = bytes(BLOCK)
_CHUNK = 1 << 20
MANIFEST = "manifest.json"
_FILE_TYPES = (b"0", b"\0", b"7")  # regular file (old-style, contiguous)
_DIRECTORY = b"5"
_EXTENDED = (b"x", b"X", b"g", b"L", b"K")  # pax (per-member, Solaris, global), GNU long names
_KIND_PROBLEMS = {
    b"1": "a hard link (to {link!r})",
    b"2": "a symbolic link (to {link!r})",
    b"3": "a device file",
    b"4": "a device file",
    b"6": "a FIFO",
    b"S": "a sparse file",
}
_PAX_RECORD = re.compile(rb"(\d+) ")


class ArchiveError(Exception):
    """The archive is refused: the message says why (the caller adds the bundle's name)."""


class CorruptArchive(ArchiveError):
    """Not a tar archive, truncated, or its compressed stream is damaged."""


@dataclass
class Member:
    size: int
    sha256: str


@dataclass
class Archive:
    """What a bundle tarball holds: its top directory, every file's size and sha256 (by path
    below the top directory), and the data of the manifest and of the files replay reads."""

    top: str
    files: Dict[str, Member] = field(default_factory=dict)
    kept: Dict[str, bytes] = field(default_factory=dict)


def decompressing(raw: BinaryIO) -> BinaryIO:
    """``raw`` decompressed by what its first bytes say it is (or as is: a plain tar)."""
    magic = raw.read(6)
    raw.seek(0)
    if magic.startswith(b"\x1f\x8b"):
        import gzip

        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    if magic.startswith(b"BZh"):
        import bz2

        return bz2.BZ2File(raw)  # type: ignore[return-value]
    if magic == b"\xfd7zXZ\x00":
        import lzma

        return lzma.LZMAFile(raw)  # type: ignore[return-value]
    return raw


def _number(field_: bytes) -> int:
    """A numeric header field: octal digits, or base-256 when its first byte has bit 7 set."""
    if field_[:1] in (b"\x80", b"\xff"):
        value = int.from_bytes(field_[1:], "big")
        return value - (1 << (8 * (len(field_) - 1))) if field_[:1] == b"\xff" else value
    text = field_.split(b"\0", 1)[0].strip(b" ")
    if not text:
        return 0
    try:
        return int(text, 8)
    except ValueError:
        raise CorruptArchive(f"a tar header holds {text[:16]!r} where a number belongs") from None


def _checksum_ok(block: bytes) -> bool:
    """The header's checksum: its bytes summed with the checksum field read as spaces
    (unsigned, or signed as some old tars did)."""
    stored = _number(block[148:156])
    if stored == 256 + sum(block[:148]) + sum(block[156:]):
        return True
    return stored == 256 + sum(struct.unpack_from("148b8x356b", block))


def _text(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def _pax_records(data: bytes) -> Dict[str, str]:
    """``"%d %s=%s\\n"`` records (length, keyword, value) -> {keyword: value}."""
    records: Dict[str, str] = {}
    pos = 0
    while pos < len(data):
        match = _PAX_RECORD.match(data, pos)
        end = pos + int(match.group(1)) if match else 0
        if not match or end > len(data) or end <= match.end() or data[end - 1] != 0x0A:
            raise CorruptArchive("a malformed pax extended header")
        keyword, sep, value = data[match.end() : end - 1].partition(b"=")
        if not sep:
            raise CorruptArchive("a malformed pax extended header")
        records[keyword.decode("utf-8", "replace")] = value.decode("utf-8", "surrogateescape")
        pos = end
    return records


class _Stream:
    """The decompressed archive, read with a budget of MAX_ARCHIVE_BYTES."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.offset = 0

    def read(self, count: int) -> bytes:
        if self.offset + count > limits.MAX_ARCHIVE_BYTES:
            raise ArchiveError(
                f"it unpacks to more than {size_text(limits.MAX_ARCHIVE_BYTES)} "
                "(a bundle is a few MB)"
            )
        data = self.stream.read(count)
        self.offset += len(data)
        return data

    def exact(self, count: int) -> bytes:
        data = self.read(count)
        if len(data) < count:
            raise CorruptArchive("it ends in the middle of a member")
        return data


def _padded(size: int) -> int:
    return -(-size // BLOCK) * BLOCK


def _path_problem(name: str, top: Optional[str]) -> Optional[str]:
    if not name or name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        return "an absolute path"
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts or "\\.." in name or "..\\" in name:
        return "a path with '..'"
    if not parts or (top is not None and parts[0] != top):
        return f"outside the archive root {top or ''}/"
    return None


def member_limit(rel: str) -> Tuple[int, str]:
    """The most bytes the bundle file ``rel`` may have, and how to say so."""
    if rel == MANIFEST:
        return limits.MAX_MANIFEST_BYTES, "manifest.json may be at most"
    area = kept_area(rel)
    if area is not None:
        return area[1], f"{area[3]} may be at most"
    return limits.MAX_MEMBER_BYTES, "a member may be at most"


def kept_area(rel: str) -> Optional[Tuple[str, int, int, str]]:
    """The ``limits.KEPT_AREAS`` entry of a file replay reads; None for the others."""
    return next((area for area in limits.KEPT_AREAS if rel.startswith(area[0])), None)


class _Reader:
    def __init__(self, stream: BinaryIO, keep: Optional[Mapping[str, int]] = None) -> None:
        self.stream = _Stream(stream)
        self.keep = keep
        self.archive: Optional[Archive] = None
        self.members = 0
        self.kept_bytes: Dict[str, int] = {}  # by area

    def run(self) -> Archive:
        pending: Dict[str, str] = {}
        extended = 0
        while True:
            block = self.stream.read(BLOCK)
            if not block and self.archive is None:
                raise CorruptArchive("an empty archive")
            if len(block) < BLOCK:
                raise CorruptArchive("it ends before the end-of-archive marker")
            if block == _ZERO_BLOCK:
                break
            if not _checksum_ok(block):
                at = self.stream.offset - BLOCK
                where = f" at byte {at}" if at else ""
                raise CorruptArchive(f"not a tar archive (bad header checksum{where})")
            kind, size = block[156:157], _number(block[124:136])
            if kind in _EXTENDED:
                extended += 1
                if extended > limits.MAX_EXTENDED_HEADERS:
                    raise ArchiveError(
                        f"more than {limits.MAX_EXTENDED_HEADERS} extended headers in a row"
                    )
                self._extended(kind, size, pending)
                continue
            self._member(block, kind, size, pending)
            pending, extended = {}, 0
        self._drain()
        if self.archive is None:
            raise CorruptArchive("an empty archive")
        return self.archive

    def _extended(self, kind: bytes, size: int, pending: Dict[str, str]) -> None:
        if size > limits.MAX_HEADER_BYTES:
            raise ArchiveError(
                f"an extended header of {size} bytes (at most {size_text(limits.MAX_HEADER_BYTES)})"
            )
        data = self.stream.exact(_padded(size))[:size]
        if kind == b"L":
            pending["path"] = _text(data)
        elif kind == b"K":
            pending["linkpath"] = _text(data)
        else:
            records = _pax_records(data)
            sparse = [key for key in records if key.startswith("GNU.sparse.")]
            if sparse:
                name = records.get("GNU.sparse.name") or records.get("path") or "?"
                raise ArchiveError(f"member {name!r} is a sparse file (ibdiag never writes one)")
            if kind == b"g":
                if {"path", "linkpath", "size"} & set(records):
                    raise ArchiveError("a global extended header sets every member's name or size")
            else:
                pending.update(records)

    def _member(self, block: bytes, kind: bytes, size: int, pending: Dict[str, str]) -> None:
        name = pending.get("path")
        if name is None:
            name = _text(block[0:100])
            prefix = _text(block[345:500]) if block[257:263] == b"ustar\x00" else ""
            name = f"{prefix}/{name}" if prefix else name
        if "size" in pending:
            try:
                size = int(pending["size"])
            except ValueError:
                raise CorruptArchive(f"member {name!r} has a malformed pax size") from None
        self.members += 1
        if self.members > limits.MAX_MEMBERS:
            raise ArchiveError(
                f"more than {limits.MAX_MEMBERS} members (a bundle holds a few thousand files)"
            )
        top = self.archive.top if self.archive is not None else None
        if top is None:
            first = [p for p in name.split("/") if p not in ("", ".")]
            top = first[0] if first and first[0] != ".." else None
        why = _path_problem(name, top)
        if why is None and kind not in _FILE_TYPES and kind != _DIRECTORY:
            link = pending.get("linkpath", _text(block[157:257]))
            why = _KIND_PROBLEMS.get(kind, "not a regular file or directory").format(link=link)
        if why is None and kind == _DIRECTORY and size:
            why = "a directory with data"
        if why is not None:
            raise ArchiveError(f"member {name!r} is {why}")
        if self.archive is None:
            self.archive = Archive(top=top)  # type: ignore[arg-type]
        parts = [p for p in name.split("/") if p not in ("", ".")]
        rel = "/".join(parts[1:])
        if kind == _DIRECTORY:
            return
        if not rel:
            raise ArchiveError(f"member {name!r} is a file where the top directory belongs")
        if rel in self.archive.files:
            raise ArchiveError(f"member {name!r} appears twice")
        limit, what = member_limit(rel)
        if size < 0 or size > limit:
            raise ArchiveError(f"member {name!r} is {size} bytes; {what} {size_text(limit)}")
        area = kept_area(rel)
        if self.keep is None:
            keep = area is not None or rel == MANIFEST
        else:
            keep = rel == MANIFEST or size <= self.keep.get(rel, -1)
        if area is not None:
            prefix, total = area[0], area[2]
            self.kept_bytes[prefix] = self.kept_bytes.get(prefix, 0) + size
            if self.kept_bytes[prefix] > total:
                raise ArchiveError(f"its {prefix} files come to more than {size_text(total)}")
        digest, chunks, left = hashlib.sha256(), [], size
        while left:
            chunk = self.stream.exact(min(left, _CHUNK))
            digest.update(chunk)
            if keep:
                chunks.append(chunk)
            left -= len(chunk)
        self.stream.exact(_padded(size) - size)
        self.archive.files[rel] = Member(size=size, sha256=digest.hexdigest())
        if keep:
            self.archive.kept[rel] = b"".join(chunks)

    def _drain(self) -> None:
        """Read to the end (so a compressed stream's trailer is checked): only zeros may follow
        the end-of-archive marker (tar pads to 10 KiB records)."""
        while True:
            chunk = self.stream.read(_CHUNK)
            if not chunk:
                return
            if chunk.count(0) != len(chunk):
                raise CorruptArchive("data after the end-of-archive marker")


def read_archive(raw: BinaryIO, keep: Optional[Mapping[str, int]] = None) -> Archive:
    """Every member of the tar archive ``raw`` (compressed or not), judged and hashed.

    Kept in memory: the manifest and the files replay reads; with ``keep`` (bundle path -> most
    bytes), the manifest and those files instead, each only when it is at most that size (the
    fleet keeps report.json alone). What is refused does not depend on ``keep``.

    Raises ``ArchiveError`` (``CorruptArchive`` for a damaged or truncated stream) with a
    message that does not name the archive; decompression errors are turned into it too.
    """
    stream = decompressing(raw)
    try:
        return _Reader(stream, keep).run()
    except _stream_errors() as exc:
        raise CorruptArchive(str(exc) or type(exc).__name__) from None


def _stream_errors() -> Tuple[Type[BaseException], ...]:
    """What a damaged or truncated compressed stream raises (gzip.BadGzipFile and bz2's
    "Invalid data stream" are OSErrors; a stream cut short is an EOFError)."""
    errors: Tuple[Type[BaseException], ...] = (EOFError, OSError, zlib.error)
    try:
        import lzma
    except ImportError:  # Python built without liblzma: no .xz bundles either
        return errors
    return (*errors, lzma.LZMAError)
