"""How much one support bundle may make ``ibdiag report`` / ``check --from`` read and hold.

A bundle comes from somewhere else - a ticket, a colleague, a node that was misbehaving - and a
few kilobytes of gzip can claim gigabytes (a sparse member, a zip bomb of zeros, 100,000 empty
members, a manifest nested a million deep). Each limit below is far above what ``ibdiag
collect`` writes for the largest node we know of, and far below what would hurt the machine
reading it. A bundle past any of them is refused with one line naming the limit (exit 3);
nothing is ever extracted to disk (members are read from the stream, see ``bundle_archive``).

For scale, ``ibdiag collect`` on a 64-HCA node writes about 5,000 files, a 1 MiB manifest with
about 25,000 JSON values, and listings of about 3,500 names; an SR-IOV host with 8 PFs x 16 VFs
about 20,000 files.
"""

from __future__ import annotations

MiB = 1 << 20

# -- the archive ------------------------------------------------------------------------------

# Files and directories in the archive. 64 HCAs make ~5,000; 50,000 leaves room for SR-IOV
# hosts whose every VF is an HCA, and keeps the per-member bookkeeping to a few tens of MB.
MAX_MEMBERS = 50_000

# One member of any kind. The largest file ibdiag writes is report.json (or report.html) of a
# level-full run: every command's output (each kept to its last 1 MiB) and up to 64 MiB of NCCL
# Inspector dumps, with JSON escaping. Such members are hashed while read, never kept.
MAX_MEMBER_BYTES = 256 * MiB

# One file that replay reads (root/, commands/, nccl_inspector/): sysfs and procfs files are
# read up to 64 KiB, command outputs kept to 1 MiB, an Inspector dump to 4 MiB; redaction can
# lengthen what it replaces. These are held in memory while the bundle is replayed.
MAX_FILE_BYTES = 8 * MiB

# All files replay reads, together: up to 64 MiB of Inspector dumps plus every command's output
# and the raw sysfs files (a few MB on a real node).
MAX_KEPT_BYTES = 128 * MiB

# The decompressed archive in all (headers, data, padding). Reading it is the only cost of the
# members that are not kept: about 2-3 s of gzip and sha256 per GiB.
MAX_ARCHIVE_BYTES = 1024 * MiB

# One pax extended header or GNU long name: a path of a few hundred bytes in practice.
MAX_HEADER_BYTES = 64 * 1024

# Extended headers in front of one member (pax 'x' and a GNU long name/link: at most 3 real).
MAX_EXTENDED_HEADERS = 4

# -- the manifest -----------------------------------------------------------------------------

# manifest.json: ~1 MiB for 64 HCAs (one ~150-byte entry per file), ~4 MiB for 50,000 files.
MAX_MANIFEST_BYTES = 16 * MiB

# Nesting of manifest.json: ibdiag writes 4 levels (files -> entry -> value; thresholds).
MAX_JSON_DEPTH = 32

# JSON values (numbers, strings, lists, objects) in manifest.json, counted before it is parsed:
# a million small values cost Python ~100-150 MB; a 64-HCA manifest has ~25,000.
MAX_JSON_VALUES = 1_000_000

# What replay builds from the manifest's directory listings. A real node has 8-16 HCAs (1,024:
# 8 PFs x 127 VFs, the most SR-IOV allows) with 1-4 ports each (8,192: 1,024 switch-sized
# HCAs, or 64 ports on each of 128); ~150 counter names per port.
MAX_HCAS = 1024
MAX_PORTS = 8192
MAX_LISTED_NAMES = 100_000

# -- what is said about it --------------------------------------------------------------------

# Missing, altered or unlisted files shown one per line; the rest as a count.
MAX_WARNINGS = 10


def size_text(count: int) -> str:
    """``count`` bytes in the unit a limit is stated in: "256 MiB", "64 KiB", "17 bytes"."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1 << 10)):
        if count >= scale and count % scale == 0:
            return f"{count // scale} {unit}"
    return f"{count} bytes"
