"""Hostile support bundles, each made from a good ``ibdiag collect --tarball`` bundle.

Shared by tests/bundle/test_bundle_limits.py and benchmarks/bench_hostile_bundles.py. Each builder
reads the good tarball and writes ``dest`` (a ``.tar.gz``); nothing large is ever held in
memory or written uncompressed: a big member's data is generated while gzip compresses it.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from typing import Any, Callable, Dict, Iterable, Optional, Tuple, Union

Data = Union[bytes, "Repeat"]


class Repeat(io.RawIOBase):
    """A read-only stream of ``size`` bytes: ``fill`` repeated, then ``tail`` repeated
    ``tail_count`` times (never held in memory whole)."""

    def __init__(self, size: int, fill: bytes, tail: bytes = b"", tail_count: int = 0) -> None:
        self.size = size
        self.segments = [[fill, size - len(tail) * tail_count], [tail, len(tail) * tail_count]]

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while self.segments and self.segments[0][1] <= 0:
            self.segments.pop(0)
        if not self.segments:
            return 0
        unit, left = self.segments[0]
        want = min(len(buffer), left)
        buffer[:want] = (unit * (want // len(unit) + 1))[:want]
        self.segments[0][1] -= want
        return want


def top_name(good: str) -> str:
    with tarfile.open(good) as tar:
        return tar.getmembers()[0].name.split("/")[0]


def read_manifest(good: str) -> Dict[str, Any]:
    with tarfile.open(good) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/manifest.json"))
        return json.load(tar.extractfile(member))


def rebuild(
    good: str,
    dest: str,
    replace: Optional[Dict[str, Data]] = None,
    extra: Iterable[Tuple[tarfile.TarInfo, Data]] = (),
) -> str:
    """``good`` re-packed as ``dest``: members named (relative to the top directory) in
    ``replace`` get that data instead; ``extra`` members are added at the end."""
    replace = dict(replace or {})
    with tarfile.open(good) as src, tarfile.open(dest, "w:gz", compresslevel=6) as dst:
        top = src.getmembers()[0].name.split("/")[0]
        for member in src.getmembers():
            rel = member.name[len(top) + 1 :]
            if member.isfile() and rel in replace:
                _add(dst, member, replace.pop(rel))
            else:
                dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        for info, data in extra:
            _add(dst, info, data)
    assert not replace, f"not in the bundle: {sorted(replace)}"
    return dest


def _add(dst: tarfile.TarFile, info: tarfile.TarInfo, data: Data) -> None:
    if isinstance(data, Repeat):
        info.size = data.size
        dst.addfile(info, io.BufferedReader(data, 1 << 20))
    else:
        info.size = len(data)
        dst.addfile(info, io.BytesIO(data))


def file_member(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mode = 0o600
    return info


def with_manifest(good: str, dest: str, edit: Callable[[Dict[str, Any]], Any]) -> str:
    """``good`` with its manifest replaced by ``edit(manifest)`` (which may return bytes)."""
    manifest = read_manifest(good)
    edited = edit(manifest)
    if edited is None:
        edited = manifest
    data = edited if isinstance(edited, (bytes, Repeat)) else json.dumps(edited).encode()
    return rebuild(good, dest, replace={"manifest.json": data})


# -- the cases of issue 12 item 7 --------------------------------------------------------------


def sparse_member(good: str, dest: str, size: int = 2 << 30) -> str:
    """A member stored as a GNU sparse file (the PAX 1.0 form ``tar --sparse`` writes): a few
    hundred bytes in the archive, ``size`` bytes of zeros when extracted."""
    top = top_name(good)
    name = f"{top}/root/sys/class/infiniband/mlx5_0/sparse"
    info = file_member(f"{top}/root/sys/class/infiniband/mlx5_0/GNUSparseFile.0/sparse")
    info.pax_headers = {
        "GNU.sparse.major": "1",
        "GNU.sparse.minor": "0",
        "GNU.sparse.name": name,
        "GNU.sparse.realsize": str(size),
    }
    sparse_map = b"1\n%d\n1\n" % (size - 1)  # one data block: the last byte
    data = sparse_map.ljust(512, b"\0") + b"x"
    with tarfile.open(good) as src, tarfile.open(dest, "w:gz", format=tarfile.PAX_FORMAT) as dst:
        for member in src.getmembers():
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        _add(dst, info, data)
    return dest


def big_member(good: str, dest: str, size: int) -> str:
    """A plain member of ``size`` bytes of zeros (gzip shrinks them a thousandfold)."""
    top = top_name(good)
    info = file_member(f"{top}/root/sys/class/infiniband/mlx5_0/big")
    return rebuild(good, dest, extra=[(info, Repeat(size, b"\0"))])


def many_members(good: str, dest: str, count: int = 100_000) -> str:
    """``count`` two-byte files the manifest does not list."""
    top = top_name(good)
    extra = ((file_member(f"{top}/junk/{index:06d}"), b"x\n") for index in range(count))
    return rebuild(good, dest, extra=extra)


def many_devices(good: str, dest: str, count: int = 100_000) -> str:
    """A manifest whose class/infiniband listing names ``count`` devices."""

    def edit(manifest):
        names = [f"mlx5_{index}" for index in range(count)]
        manifest["listings"]["sys/class/infiniband"] = names

    return with_manifest(good, dest, edit)


def huge_manifest(good: str, dest: str, size: int = 500 * 10**6) -> str:
    """A manifest.json of ``size`` bytes: one list nested ``size/2`` deep."""
    data = Repeat(size, b"[", tail=b"]", tail_count=size // 2)
    return rebuild(good, dest, replace={"manifest.json": data})


def deep_manifest(good: str, dest: str, depth: int = 100_000) -> str:
    """A small manifest whose thresholds hold a list nested ``depth`` deep."""

    def edit(manifest):
        text = json.dumps(manifest)
        return text.replace('"thresholds": {', '"thresholds": {"x": ' + "[" * depth + "]" * depth
                            + ", ", 1).encode()  # fmt: skip

    return with_manifest(good, dest, edit)


def cut_trailer(good: str, dest: str) -> str:
    """The good tarball without gzip's 8-byte trailer (CRC-32 and length)."""
    with open(good, "rb") as handle:
        data = handle.read()
    with open(dest, "wb") as handle:
        handle.write(data[:-8])
    return dest


def altered_member(good: str, dest: str, rel: str = "summary.txt") -> str:
    """One member's contents changed after the manifest was written."""
    return rebuild(good, dest, replace={rel: b"IBDIAG OK - all good, trust me\n"})


def raw_tar(good: str, leave_out: str = "") -> bytes:
    """The good bundle's members (but ``leave_out``, a path below the top directory) as an
    uncompressed tar stream without its end-of-archive marker, for a test to append
    hand-made headers to."""
    buffer = io.BytesIO()
    with tarfile.open(good) as src:
        dst = tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT)
        for member in src.getmembers():
            if member.name.split("/", 1)[-1] == leave_out:
                continue
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        end = dst.offset
        dst.close()
    return buffer.getvalue()[:end]


def lying_member(good: str, dest: str, rel: str, claimed: int, data: bytes = b"x" * 1024) -> str:
    """A member whose header claims ``claimed`` bytes where the archive holds only ``data``
    (then the archive ends): a header that lies. It replaces the member ``rel`` if any."""
    info = file_member(f"{top_name(good)}/{rel}")
    info.size = claimed
    raw = raw_tar(good, leave_out=rel) + info.tobuf(tarfile.PAX_FORMAT) + data
    with open(dest, "wb") as handle:
        handle.write(gzip.compress(raw, compresslevel=1))
    return dest


def big_outputs(good: str, dest: str, count: int, size: int, wide: bool = True) -> str:
    """``count`` command outputs of ``size`` bytes each, listed in the manifest as runs. With
    ``wide`` each ends in a 4-byte character, so Python holds its text at 4 bytes a character."""
    import hashlib

    data = b"a" * (size - 4) + ("\U0001f600".encode() if wide else b"bbbb")
    digest = hashlib.sha256(data).hexdigest()
    manifest = read_manifest(good)
    extra = []
    for index in range(count):
        rel = f"commands/9{index:02d}-x.stdout"
        manifest["files"].append({"path": rel, "size": size, "sha256": digest})
        run = {"key": f"x {index}", "argv": ["x", str(index)], "rc": 0, "stdout_file": rel}
        manifest["commands"].append(run)
        extra.append((file_member(f"{top_name(good)}/{rel}"), data))
    replace = {"manifest.json": json.dumps(manifest).encode()}
    return rebuild(good, dest, replace=replace, extra=extra)


def listings_at_limits(good: str, dest: str) -> str:
    """A manifest naming as much as the listing limits allow: 1,024 HCAs of 8 ports each, and
    counters up to 100,000 names in all (none of them stored)."""

    def edit(manifest):
        listings = manifest["listings"]
        listings.clear()
        listings["sys/class/infiniband"] = [f"mlx5_{i}" for i in range(1024)]
        per_port = (100_000 - 1024 - 8192) // 8192
        for hca in range(1024):
            base = f"sys/class/infiniband/mlx5_{hca}/ports"
            listings[base] = [str(port) for port in range(1, 9)]
            for port in range(1, 9):
                listings[f"{base}/{port}/counters"] = [f"c{j}" for j in range(per_port)]

    return with_manifest(good, dest, edit)
