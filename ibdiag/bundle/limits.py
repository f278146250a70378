"""How much one support bundle may make ``ibdiag report`` / ``check --from`` read and hold.

A bundle comes from somewhere else - a ticket, a colleague, a node that was misbehaving - and a
few kilobytes of gzip can claim gigabytes (a sparse member, a zip bomb of zeros, 100,000 empty
members, a manifest nested a million deep). Each limit below is far above what ``ibdiag
collect`` writes for the largest node we know of, and far below what would hurt the machine
reading it. A bundle past any of them is refused with one line naming the limit (exit 3);
nothing is ever extracted to disk (members are read from the stream, see ``ibdiag.bundle.archive``).

For scale, ``ibdiag collect`` on a 64-HCA node writes about 5,000 files, a 1 MiB manifest with
about 25,000 JSON values, and listings of about 3,500 names; an SR-IOV host with 8 PFs x 16 VFs
about 20,000 files.
"""

from __future__ import annotations

KiB = 1 << 10
MiB = 1 << 20

# -- the archive ------------------------------------------------------------------------------

# Files and directories in the archive. 64 HCAs make ~5,000; 50,000 leaves room for SR-IOV
# hosts whose every VF is an HCA, and keeps the per-member bookkeeping to a few tens of MB.
MAX_MEMBERS = 50_000

# One member of any kind. The largest file ibdiag writes is report.json (or report.html) of a
# level-full run: every command's output (each kept to its last 1 MiB) and up to 64 MiB of NCCL
# Inspector dumps, with JSON escaping. Members replay does not read (report.*, summary.txt) are
# hashed while read, never kept.
MAX_MEMBER_BYTES = 256 * MiB

# The files replay reads are held in memory while it runs, and become the Snapshot's text, so
# each area of the bundle may hold what the collector can write there - no more - with room for
# redaction, which may lengthen what it replaces: (area, most bytes per file, most bytes for all
# its files, what one is called).
KEPT_AREAS = (
    # sysfs and procfs files are read up to 64 KiB each (sources.sysfs); a 64-HCA node's
    # ~5,000 come to well under 1 MiB.
    ("root/", 256 * KiB, 32 * MiB, "a raw sysfs or procfs file"),
    # each command's stdout and stderr are kept to their last 1 MiB (runner.command_runner
    # OUTPUT_CAP_BYTES); most are a few KB, a level-full run's all together a few MB.
    ("commands/", 2 * MiB, 32 * MiB, "a command's output"),
    # NCCL Inspector dumps: at most 4 MiB each and 64 MiB in all (families.nccl_inspector.files).
    ("nccl_inspector/", 8 * MiB, 80 * MiB, "an NCCL Inspector dump"),
    # the baseline a run graded counters against (collect --baseline/--state), one snapshot:
    # a standard-level one with every command's output is a few MiB. ``ibdiag collect`` refuses
    # a larger one before collecting, so it never writes a bundle that would be refused.
    ("baseline/", 64 * MiB, 64 * MiB, "a baseline snapshot"),
    # the ports' past the run graded: at most ibdiag.history.record.MAX_OUTAGES outages of
    # ~300 bytes each (indented JSON), a few MiB at the very most
    ("history/", 16 * MiB, 16 * MiB, "the history window"),
)

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

# What replay builds from the manifest's directory listings: each name is an HCA, a port or a
# file to read. A real node has 8-16 HCAs with 1-4 ports each and ~150 counters per port;
# 1,024 HCAs is 8 PFs x 127 VFs (the most SR-IOV allows), 8,192 ports 8 on each of those. At
# these limits replay and grading take ~140 MB and ~3 s (benchmarks/bench_hostile_bundles.py).
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
