"""The support catalogue's files (``ibdiag.families.support.catalogue``: its ``files`` items),
read for ``ibdiag collect`` beside sysfs and procfs: the kernel command line, the module
parameters, the distribution, the platform, each port's GIDs, the RDMA and SM configuration.

They are read through the collection's readers (one per tree: ``sys``, ``proc``, and ``rootfs``:
the node's root file system, for /etc), so a bundle holds each file under ``root/<tree>/`` and a
replay reads them back through the same code.
A file that is not there is ``absent``, not a fault: a node without opensm has no
``opensm.conf``. A ``*`` in a pattern matches one name (at most ``MAX_MATCHES`` per pattern);
files are read whole up to the readers' 64 KiB.

Healthy: nothing to judge. These are the facts a support engineer reads first (the HTML's
system section), and the rest is kept for them verbatim.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Dict, Iterator, List, Mapping, Optional, Tuple

from ibdiag.facts.support import ItemRow, ItemStatus, SupportFiles
from ibdiag.sources.sysfs import SysfsReader

MAX_MATCHES = 4096  # names one pattern may match (a port's GID table has 256)
ABSENT = "missing"
_ZERO_GID = re.compile(r"^[0:]+$")
_UID = re.compile(r"^Uid:\s+\d+\s+(?P<effective>\d{1,10})\b", re.M)
_OS_RELEASE = re.compile(r"^(?P<key>[A-Z0-9_]{1,40})=(?P<value>.{0,200})$")


def read_support_files(readers: Mapping[str, Optional[SysfsReader]]) -> SupportFiles:
    """Every file item of the catalogue, read through ``readers`` (``{"sys": .., "proc": ..,
    "rootfs": ..}``; a tree without a reader is not read); the ``support_files`` fact."""
    from ibdiag.families.support.catalogue import load

    rows: List[ItemRow] = []
    texts: Dict[Tuple[str, str], str] = {}
    for item in load().of_kind("files"):
        read = 0
        size = 0
        problems: List[str] = []
        for tree, pattern in item.paths():
            reader = readers.get(tree)
            if reader is None:
                problems.append(f"{tree}: not read")
                continue
            for rel in expand(reader, pattern):
                text, problem = reader.read_text(rel)
                if text is None:
                    if problem not in (ABSENT, "empty"):
                        problems.append(f"{tree}/{rel}: {problem}")
                    continue
                read += 1
                size += len(text.encode("utf-8", "surrogatepass"))
                texts[(tree, rel)] = text
                if item.gid_attrs and not _ZERO_GID.match(text.strip()):
                    _read_gid_attrs(reader, rel)
        rows.append(_row(item.id, ", ".join(item.files or []), read, size, problems))
    return SupportFiles(
        rows=rows,
        os_release=_os_release(
            texts.get(("rootfs", "etc/os-release")) or texts.get(("rootfs", "usr/lib/os-release"))
        ),
        kernel_version=texts.get(("proc", "version")),
        cmdline=texts.get(("proc", "cmdline")),
        platform={  # the DMI files the catalogue names, by file name (sys_vendor, bios_version)
            rel.rpartition("/")[2]: text.strip()
            for (tree, rel), text in texts.items()
            if tree == "sys" and rel.startswith("class/dmi/id/")
        },
        module_parameters=_module_parameters(texts),
        collector_uid=_collector_uid(readers.get("proc")),
    )


def _collector_uid(proc: Optional[SysfsReader]) -> Optional[int]:
    """The effective uid of the process reading (``/proc/self/status``: recorded, so a replay
    reads the collector's, never its own); None when it cannot be read."""
    if proc is None:
        return None
    text, _ = proc.read_text("self/status")
    match = _UID.search(text or "")
    return int(match["effective"]) if match else None


def expand(reader: SysfsReader, pattern: str) -> Iterator[str]:
    """The paths ``pattern`` names under ``reader``'s root, a ``*`` segment matching each name
    of its directory (sorted), at most ``MAX_MATCHES``."""
    paths = [""]
    for segment in pattern.strip("/").split("/"):
        if "*" not in segment:
            paths = [f"{path}/{segment}" if path else segment for path in paths]
            continue
        matched: List[str] = []
        for path in paths:
            entries, problem = reader.listdir(path)
            if problem is not None:
                continue
            for entry in entries:
                if fnmatch.fnmatchcase(entry, segment) and len(matched) < MAX_MATCHES:
                    matched.append(f"{path}/{entry}" if path else entry)
        paths = matched
    return iter(paths[:MAX_MATCHES])


def _read_gid_attrs(reader: SysfsReader, gid_rel: str) -> None:
    """The type and netdev of a GID in use (read into the recording; an empty slot has none)."""
    port_dir, _, index = gid_rel.rpartition("/gids/")
    for kind in ("types", "ndevs"):
        reader.read_text(f"{port_dir}/gid_attrs/{kind}/{index}")


def _row(item: str, source: str, read: int, size: int, problems: List[str]) -> ItemRow:
    if read:
        reason = f"{len(problems)} not read: {problems[0]}" if problems else None
        return ItemRow(
            item=item, status=ItemStatus.COLLECTED, source=source, reason=reason, size=size
        )
    if problems:
        status = ItemStatus.NO_PERMISSION if "permission" in problems[0] else ItemStatus.FAILED
        return ItemRow(item=item, status=status, source=source, reason=problems[0])
    return ItemRow(item=item, status=ItemStatus.ABSENT, source=source, reason="no such file here")


def _os_release(text: Optional[str]) -> Dict[str, str]:
    """os-release(5): KEY=value lines, the value optionally quoted."""
    found: Dict[str, str] = {}
    for line in (text or "").splitlines():
        match = _OS_RELEASE.match(line.strip())
        if not match:
            continue
        value = match["value"].strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        if value.isprintable():
            found[match["key"]] = value
    return found


def _module_parameters(texts: Mapping[Tuple[str, str], str]) -> Dict[str, Dict[str, str]]:
    """{module: {parameter: value}} from ``module/<m>/parameters/<p>``."""
    found: Dict[str, Dict[str, str]] = {}
    for (tree, rel), text in texts.items():
        parts = rel.split("/")
        if tree == "sys" and len(parts) == 4 and parts[0] == "module" and parts[2] == "parameters":
            found.setdefault(parts[1], {})[parts[3]] = text.strip()[:200]
    return found
