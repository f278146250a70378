"""Issue 12 item 7: what a small hostile bundle can make `ibdiag report` do is bounded.

Each hostile bundle is built here from a good `ibdiag collect --tarball` bundle
(tests/hostile_bundles.py; benchmarks/bench_hostile_bundles.py measures the same cases): a
sparse member, a header that lies about its size, 50,001 members, 100,000 device names, a huge
or deeply nested manifest, a gzip cut before its trailer, bad manifest fields. Each is refused
with exactly one stderr line naming the bundle once and the reason, exit 3, before anything is
written anywhere - or, for what is merely untidy (unlisted or missing files), graded with the
warnings summarised.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import warnings
from typing import List, Tuple

import hostile_bundles as H
import pytest
from conftest import REPO
from sysfs_builder import mlx5_node, write_node

from ibdiag import registry
from ibdiag.bundle import archive as bundle_archive
from ibdiag.bundle import limits as bundle_limits
from ibdiag.bundle import manifest as bundle_manifest
from ibdiag.bundle.archive import ArchiveError, CorruptArchive, read_archive
from ibdiag.bundle.write import write_bundle
from ibdiag.collect import collect
from ibdiag.grade import grade
from ibdiag.registry import load_registry
from ibdiag.sources.sysfs import Recording
from ibdiag.thresholds import Thresholds


@pytest.fixture(scope="module")
def good_pair(tmp_path_factory) -> Tuple[str, str]:
    """A good 2-HCA bundle (level quick) as a tarball and as a directory, made once."""
    base = tmp_path_factory.mktemp("good-bundle")
    write_node(str(base / "sys"), mlx5_node(2))
    kernel = base / "proc" / "sys" / "kernel"
    (kernel / "random").mkdir(parents=True)
    (kernel / "hostname").write_text("node-1\n")
    (kernel / "random" / "boot_id").write_text("5f1e-boot\n")
    recording = Recording()
    snapshot = collect(str(base / "sys"), str(base / "proc"), {"sysfs"}, recording=recording)
    report = grade(snapshot, load_registry(), Thresholds(), "quick")
    made = [
        write_bundle(snapshot, report, recording, str(base / form), tarball=form == "tar")
        for form in ("tar", "dir")
    ]
    return made[0], made[1]


@pytest.fixture
def good(good_pair) -> str:
    return good_pair[0]


@pytest.fixture
def system_tmp(tmp_path_factory, monkeypatch) -> str:
    """A fresh TMPDIR: opening a bundle must leave nothing in it (nothing is extracted)."""
    path = str(tmp_path_factory.mktemp("system-tmp"))
    monkeypatch.setenv("TMPDIR", path)
    monkeypatch.setattr(tempfile, "tempdir", path)
    return path


def refusal(run_cli, bundle: str, *extra: str) -> str:
    """Run `ibdiag report BUNDLE`: exit 3, nothing on stdout, exactly one stderr line that names
    the bundle once and is no internal error, no pydantic warning; that line."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_cli("report", bundle, *extra)
    assert [str(w.message) for w in caught] == []
    lines = result.stderr.splitlines()
    assert (result.exit_code, result.stdout, len(lines)) == (3, "", 1), result.stderr[-3000:]
    assert lines[0].startswith("ibdiag: error: ") and "internal error" not in lines[0]
    assert lines[0].count(bundle) == 1, lines[0]
    return lines[0]


def top(good: str) -> str:
    return H.top_name(good)


# -- sizes: what the archive claims and holds ---------------------------------------------------


def test_a_sparse_member_is_refused_before_its_data_is_read(run_cli, good, tmp_path, system_tmp):
    """52 KB with a 2 GiB sparse member once wrote 2.1 GB to $TMPDIR and exited 0."""
    bundle = H.sparse_member(good, str(tmp_path / "sparse.tar.gz"), 2 << 30)
    assert os.path.getsize(bundle) < 64 * 1024
    name = f"{top(good)}/root/sys/class/infiniband/mlx5_0/sparse"
    assert refusal(run_cli, bundle) == (
        f"ibdiag: error: refusing {bundle}: member {name!r} is a sparse file "
        "(ibdiag never writes one)"
    )
    assert os.listdir(system_tmp) == []


def test_an_old_gnu_sparse_member_is_refused(good, tmp_path):
    info = H.file_member(f"{top(good)}/root/sys/evil")
    info.type = tarfile.GNUTYPE_SPARSE
    raw = H.raw_tar(good) + info.tobuf(tarfile.GNU_FORMAT)
    with pytest.raises(ArchiveError, match=r"member '.*/root/sys/evil' is a sparse file"):
        read_archive(io.BytesIO(gzip.compress(raw + bytes(1024))))


@pytest.mark.parametrize(
    ("rel", "claimed", "limit"),
    [
        ("junk.bin", bundle_limits.MAX_MEMBER_BYTES + 1, "a member may be at most 256 MiB"),
        ("report.json", 2 << 30, "a member may be at most 256 MiB"),
        ("commands/001-x.stdout", 2 * 2**20 + 1, "a command's output may be at most 2 MiB"),
        (
            "root/sys/class/infiniband/mlx5_0/fw_ver",
            256 * 1024 + 1,
            "a raw sysfs or procfs file may be at most 256 KiB",
        ),
        ("nccl_inspector/001-x.log", 8 * 2**20 + 1, "an NCCL Inspector dump may be at most 8 MiB"),
        ("manifest.json", 500 * 10**6, "manifest.json may be at most 16 MiB"),
    ],
)
def test_a_member_over_its_limit_is_refused_from_its_header(
    run_cli, good, tmp_path, system_tmp, rel, claimed, limit
):
    """The header claims more than the archive holds: judged on the claim, before reading."""
    bundle = H.lying_member(good, str(tmp_path / "big.tar.gz"), rel, claimed)
    name = f"{top(good)}/{rel}"
    assert refusal(run_cli, bundle) == (
        f"ibdiag: error: refusing {bundle}: member {name!r} is {claimed} bytes; {limit}"
    )
    assert os.listdir(system_tmp) == []


@pytest.mark.parametrize("form", ["tar", "dir"])
def test_the_files_replay_reads_are_limited_together(run_cli, good_pair, tmp_path, form):
    """Seventeen 2 MiB command outputs (each within its limit) come to more than 32 MiB: a
    141 KB tarball of such outputs once made report take 643 MB."""
    data = b"a" * (2 << 20)
    names = [f"commands/9{i:02d}.stdout" for i in range(17)]
    extra = [(H.file_member(f"{top(good_pair[0])}/{name}"), data) for name in names]
    bundle = H.rebuild(good_pair[0], str(tmp_path / "kept.tar.gz"), extra=extra)
    if form == "dir":
        bundle = str(tmp_path / "dir")
        shutil.copytree(good_pair[1], bundle)
        (tmp_path / "dir" / "commands").mkdir(exist_ok=True)
        for name in names:
            (tmp_path / "dir" / name).write_bytes(data)
    assert refusal(run_cli, bundle).endswith(
        f"{bundle}: its commands/ files come to more than 32 MiB"
    )


def test_an_archive_that_inflates_past_the_limit_is_refused(good, tmp_path, monkeypatch):
    """Zeros after the end-of-archive marker (a gzip bomb's padding) count too."""
    monkeypatch.setattr(bundle_limits, "MAX_ARCHIVE_BYTES", 4 << 20)
    raw = H.raw_tar(good) + bytes(8 << 20)
    with pytest.raises(ArchiveError) as refused:
        read_archive(io.BytesIO(gzip.compress(raw, compresslevel=1)))
    assert str(refused.value) == "it unpacks to more than 4 MiB (a bundle is a few MB)"


# -- counts: members, names, warnings -----------------------------------------------------------


def test_more_members_than_the_limit_are_refused(run_cli, good, tmp_path, system_tmp):
    """100,000 members once gave 100,000 warning lines and 413 MB of disk."""
    bundle = H.many_members(good, str(tmp_path / "many.tar.gz"), bundle_limits.MAX_MEMBERS)
    assert refusal(run_cli, bundle) == (
        f"ibdiag: error: refusing {bundle}: more than 50000 members "
        "(a bundle holds a few thousand files)"
    )
    assert os.listdir(system_tmp) == []


def test_unlisted_members_are_summarised_and_the_bundle_graded(run_cli, good, tmp_path):
    bundle = H.many_members(good, str(tmp_path / "unlisted.tar.gz"), 1000)
    result = run_cli("report", bundle)
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines == [
        *(f"ibdiag: warning: {bundle}: not in manifest: junk/{i:06d}" for i in range(10)),
        f"ibdiag: warning: {bundle}: and 990 more missing, altered or unlisted files",
    ]


@pytest.mark.parametrize(
    ("listing", "count", "why"),
    [
        ("sys/class/infiniband", 100_000, "it lists 100000 HCAs; at most 1024"),
        ("sys/class/infiniband", 1025, "it lists 1025 HCAs; at most 1024"),
        ("sys/class/infiniband/mlx5_0/ports", 8192, "it lists 8193 ports; at most 8192"),
        ("sys/bus/pci/devices", 100_000, "its listings name 100"),  # + the real ones
    ],
)
def test_listings_that_would_build_too_much_are_refused(
    run_cli, good, tmp_path, listing, count, why
):
    """100,000 device names in 296 KB once took 1.04 GB of memory to replay."""

    def edit(manifest):
        manifest["listings"][listing] = [f"n{i}" for i in range(count)]

    bundle = H.with_manifest(good, str(tmp_path / "names.tar.gz"), edit)
    assert refusal(run_cli, bundle).startswith(
        f"ibdiag: error: refusing {bundle}: manifest.json: {why}"
    )


# -- the manifest's JSON ------------------------------------------------------------------------


def test_a_huge_manifest_is_refused_from_its_size(run_cli, good, tmp_path, system_tmp):
    """A 500 MB nested manifest.json once took 1.03 GB of memory."""
    size = bundle_limits.MAX_MANIFEST_BYTES + 1
    bundle = H.huge_manifest(good, str(tmp_path / "huge.tar.gz"), size)
    assert refusal(run_cli, bundle) == (
        f"ibdiag: error: refusing {bundle}: member '{top(good)}/manifest.json' is {size} bytes; "
        "manifest.json may be at most 16 MiB"
    )


def test_a_huge_manifest_in_a_directory_bundle_is_refused_unread(run_cli, good_pair, tmp_path):
    path = str(tmp_path / "dir")
    shutil.copytree(good_pair[1], path)
    os.truncate(os.path.join(path, "manifest.json"), 600 * 10**6)  # sparse: nothing written
    assert refusal(run_cli, path) == (
        f"ibdiag: error: refusing bundle {path}: 'manifest.json' is 600000000 bytes; "
        "manifest.json may be at most 16 MiB"
    )


def test_a_deeply_nested_manifest_is_refused_before_parsing(run_cli, good, tmp_path):
    bundle = H.deep_manifest(good, str(tmp_path / "deep.tar.gz"), 100_000)
    assert refusal(run_cli, bundle) == (
        f"ibdiag: error: refusing {bundle}: manifest.json is nested 100002 deep; at most 32"
    )


def test_a_manifest_of_too_many_values_is_refused_before_parsing(run_cli, good, tmp_path):
    def edit(manifest):
        manifest["listing_errors"] = {"x": "y"}
        text = json.dumps(manifest)
        junk = '"junk": [' + "0," * 1_100_000 + '0], "listing_errors": {'
        return text.replace('"listing_errors": {', junk, 1).encode()

    bundle = H.with_manifest(good, str(tmp_path / "values.tar.gz"), edit)
    line = refusal(run_cli, bundle)
    assert line.startswith(f"ibdiag: error: refusing {bundle}: manifest.json holds about 11")
    assert line.endswith(" JSON values; at most 1000000")


def test_brackets_inside_strings_are_not_nesting():
    deep_text = "[" * 100 + "{" * 100
    data = json.dumps({"argv": [deep_text, '\\"[[[', "]]]"]}).encode()
    assert bundle_manifest.parse_json(data)["argv"][0] == deep_text
    with pytest.raises(bundle_manifest.ManifestError, match="nested 33 deep; at most 32"):
        bundle_manifest.parse_json(b"[" * 33 + b"]" * 33)
    assert bundle_manifest.parse_json(b"[" * 32 + b"]" * 32) == eval("[" * 32 + "]" * 32)  # noqa: S307


# -- the compressed stream ---------------------------------------------------------------------


def test_a_gzip_cut_before_its_trailer_is_refused(run_cli, good, tmp_path):
    """A gzip without its CRC-32/length trailer was once accepted."""
    bundle = H.cut_trailer(good, str(tmp_path / "cut.tar.gz"))
    assert refusal(run_cli, bundle) == (
        f"ibdiag: error: {bundle}: not a readable bundle (truncated or corrupt archive): "
        "Compressed file ended before the end-of-stream marker was reached"
    )


def test_a_gzip_whose_crc_is_wrong_is_refused(run_cli, good, tmp_path):
    with open(good, "rb") as handle:
        data = bytearray(handle.read())
    data[-8] ^= 0xFF
    bundle = tmp_path / "crc.tar.gz"
    bundle.write_bytes(bytes(data))
    assert "truncated or corrupt archive): CRC check failed" in refusal(run_cli, str(bundle))


def test_data_after_the_end_of_the_archive_is_refused(good):
    raw = H.raw_tar(good) + bytes(1024) + b"hidden" + bytes(506)
    with pytest.raises(CorruptArchive, match="data after the end-of-archive marker"):
        read_archive(io.BytesIO(gzip.compress(raw)))


# -- the tar reader itself ----------------------------------------------------------------------


def _archive(fmt: int, compression: str = "gz") -> bytes:
    """Every shape of plain member the readers must agree on, in tarfile's ``fmt``."""
    buffer = io.BytesIO()
    long_dir = "top/root/sys/" + "/".join(["a-rather-long-directory-name"] * 6)
    members = [
        ("top", None),
        ("top/manifest.json", b"{}"),
        ("top/empty", b""),
        ("top/block", b"b" * 512),
        ("top/odd", b"o" * 513),
        (f"{long_dir}/counter", b"42\n"),
        ("top/root/sys/caf\u00e9-\u00fcber", b"x"),
        ("top/commands/001-x.stdout", bytes(range(256)) * 9),
    ]
    mode = f"w:{compression}" if compression else "w"
    with tarfile.open(fileobj=buffer, mode=mode, format=fmt) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.mark.parametrize("fmt", [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT, tarfile.USTAR_FORMAT])
@pytest.mark.parametrize("compression", ["gz", "bz2", "xz", ""])
def test_the_reader_sees_what_tarfile_sees(fmt, compression):
    data = _archive(fmt, compression)
    archive = read_archive(io.BytesIO(data))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        expected = {
            m.name.split("/", 1)[1]: (m.size, hashlib.sha256(tar.extractfile(m).read()).hexdigest())
            for m in tar.getmembers()
            if m.isfile()
        }
    assert archive.top == "top"
    assert {rel: (m.size, m.sha256) for rel, m in archive.files.items()} == expected
    assert set(archive.kept) == {
        rel for rel in expected if rel.startswith(("root/", "commands/"))
    } | {"manifest.json"}
    assert archive.kept["commands/001-x.stdout"] == bytes(range(256)) * 9


def test_ustar_prefix_names_are_joined():
    buffer = io.BytesIO()
    name = "top/" + "d" * 90 + "/" + "f" * 90
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        info = tarfile.TarInfo(name)
        info.size = 1
        tar.addfile(info, io.BytesIO(b"1"))
    assert set(read_archive(io.BytesIO(buffer.getvalue())).files) == {name[4:]}


def _pax_header(records: bytes, kind: bytes = b"x") -> bytes:
    info = tarfile.TarInfo("pax")
    info.type = kind
    info.size = len(records)
    return info.tobuf(tarfile.USTAR_FORMAT) + records + bytes(-len(records) % 512)


def test_extended_headers_are_bounded():
    member = tarfile.TarInfo("top/x").tobuf(tarfile.USTAR_FORMAT)
    big = _pax_header(b"x" * (bundle_limits.MAX_HEADER_BYTES + 1))
    with pytest.raises(ArchiveError, match="an extended header of 65537 bytes"):
        read_archive(io.BytesIO(big + member + bytes(1024)))
    record = b"20 comment=abcdefgh\n"
    chain = _pax_header(record) * (bundle_limits.MAX_EXTENDED_HEADERS + 1)
    with pytest.raises(ArchiveError, match="more than 4 extended headers in a row"):
        read_archive(io.BytesIO(chain + member + bytes(1024)))
    archive = read_archive(io.BytesIO(_pax_header(record) * 4 + member + bytes(1024)))
    assert set(archive.files) == {"x"}
    with pytest.raises(CorruptArchive, match="a malformed pax extended header"):
        read_archive(io.BytesIO(_pax_header(b"99 comment=x\n") + member + bytes(1024)))
    with pytest.raises(ArchiveError, match="sets every member's name or size"):
        read_archive(io.BytesIO(_pax_header(b"12 size=999\n", b"g") + member + bytes(1024)))


def test_a_damaged_header_is_refused():
    member = bytearray(tarfile.TarInfo("top/x").tobuf(tarfile.USTAR_FORMAT))
    member[0:3] = b"tip"  # the checksum no longer matches
    with pytest.raises(CorruptArchive, match=r"not a tar archive \(bad header checksum\)"):
        read_archive(io.BytesIO(bytes(member) + bytes(1024)))
    with pytest.raises(CorruptArchive, match="an empty archive"):
        read_archive(io.BytesIO(bytes(1024)))
    with pytest.raises(CorruptArchive, match="ends before the end-of-archive marker"):
        read_archive(io.BytesIO(b"this is not a tarball"))


# -- bad manifest fields ------------------------------------------------------------------------


def _set(path: List[object], value):
    def edit(manifest):
        target = manifest
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


BAD_FIELDS = {
    "level-bogus": (_set(["level"], "bogus"),
                    "level: 'bogus' is not one of quick, standard, full"),
    "level-number": (_set(["level"], 3), "level: Input should be a valid string (got 3)"),
    "host-number": (_set(["snapshot", "host"], 5),
                    "snapshot.host: Input should be a valid string (got 5)"),
    "host-nested": (_set(["snapshot", "host"], {"a": {"b": ["c"]}}),
                    "snapshot.host: Input should be a valid string"),
    "collected-at": (_set(["snapshot", "collected_at"], "yesterday"),
                     "snapshot.collected_at: Input should be a valid datetime"),
    "thresholds-string": (_set(["thresholds"], "strict"),
                          "thresholds: Input should be a valid dictionary (got 'strict')"),
    "file-path-number": (_set(["files", 0, "path"], 1),
                         "files.0.path: Input should be a valid string (got 1)"),
    "file-sha256": (_set(["files", 0, "sha256"], "zz"),
                    "files.0.sha256: String should match pattern"),
    "file-size": (_set(["files", 0, "size"], -1),
                  "files.0.size: Input should be greater than or equal to 0 (got -1)"),
    "commands-string": (_set(["commands"], "ibstat"),
                        "commands: Input should be a valid list (got 'ibstat')"),
    "listing-numbers": (_set(["listings", "sys/class/infiniband"], [1, 2]),
                        "listings.sys/class/infiniband.0: Input should be a valid string (got 1)"),
    "exists-string": (_set(["exists", "sys/class/infiniband/mlx5_0/device"], "maybe"),
                      "exists.sys/class/infiniband/mlx5_0/device: Input should be a valid boolean"),
    "unreadable-number": (_set(["unreadable", "proc/stat"], 13),
                          "unreadable.proc/stat: Input should be a valid string (got 13)"),
    "links-string": (_set(["links", "sys/x"], "y"), "links.sys/x: Input should be a valid"),
    "inspector-name": (_set(["nccl_inspector"], [{"name": 5}]),
                       "nccl_inspector.0.name: Input should be a valid string (got 5)"),
    "schema-string": (_set(["schema_version"], "1"),
                      "manifest.json schema_version '1' is not supported"),
    "nesting": (_set(["thresholds", "nest"], json.loads("[" * 40 + "]" * 40)),
                "manifest.json is nested 42 deep; at most 32"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_FIELDS))
def test_a_bad_manifest_field_is_one_clear_line(run_cli, good, tmp_path, case):
    edit, why = BAD_FIELDS[case]
    bundle = H.with_manifest(good, str(tmp_path / "bad.tar.gz"), edit)
    line = refusal(run_cli, bundle, "--format", "json")
    prefix = f"ibdiag: error: refusing {bundle}: "
    assert line.startswith(prefix), line
    assert why in line[len(prefix) :], line
    if not why.startswith("manifest.json"):
        assert line.startswith(f"{prefix}manifest.json: {why}"), line


@pytest.mark.parametrize(
    ("thresholds", "why"),
    [
        ({"expect_rate_gbps": "fast"}, "thresholds.expect_rate_gbps: Input should be a valid "),
        ({"bogus_setting": 1}, "thresholds.bogus_setting: Extra inputs are not permitted"),
    ],
)
def test_bad_recorded_thresholds_are_one_line_unless_others_are_given(
    run_cli, good, tmp_path, thresholds, why
):
    bundle = H.with_manifest(good, str(tmp_path / "th.tar.gz"), _set(["thresholds"], thresholds))
    line = refusal(run_cli, bundle)
    assert line.startswith(f"ibdiag: error: {bundle}: the thresholds it records are not valid: ")
    assert why in line and line.endswith("(grade it with --profile or --config)")
    graded = run_cli("report", bundle, "--expect-hcas", "2")
    assert (graded.exit_code, graded.stderr) == (0, "")


def test_a_bad_manifest_field_prints_no_warning_from_a_real_process(good, tmp_path):
    """The real stderr of `python -m ibdiag`: one line, no pydantic UserWarning, for every
    output format."""
    edit = _set(["snapshot", "host"], 5)
    bundle = H.with_manifest(good, str(tmp_path / "host.tar.gz"), edit)
    for fmt in ("text", "json", "html"):
        done = subprocess.run(
            [sys.executable, "-W", "always", "-m", "ibdiag", "report", bundle, "--format", fmt],
            cwd=REPO, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert (done.returncode, done.stdout) == (3, ""), done.stderr
        assert done.stderr == (
            f"ibdiag: error: refusing {bundle}: manifest.json: snapshot.host: "
            "Input should be a valid string (got 5)\n"
        )


def test_a_saved_report_with_a_bad_level_is_one_line(run_cli, tmp_path):
    write_node(str(tmp_path / "sys"), mlx5_node(1))
    saved = tmp_path / "saved.json"
    assert run_cli("check", "--sysfs", str(tmp_path / "sys"), "-o", str(saved)).exit_code == 0
    data = json.loads(saved.read_text())
    saved.write_text(json.dumps(dict(data, level="bogus")))
    assert refusal(run_cli, str(saved)) == (
        f"ibdiag: error: {saved}: level 'bogus' is not one of quick, standard, full"
    )
    saved.write_text(json.dumps(dict(data, thresholds={"expect_hcas": "many"})))
    assert "thresholds.expect_hcas: Input should be a valid integer" in refusal(run_cli, str(saved))


def test_the_manifest_knows_the_levels_the_registry_has():
    assert bundle_manifest._LEVELS == registry.LEVELS


def test_limits_are_stated_in_the_units_of_their_messages():
    assert bundle_limits.size_text(bundle_limits.MAX_MEMBER_BYTES) == "256 MiB"
    assert bundle_limits.size_text(bundle_limits.MAX_HEADER_BYTES) == "64 KiB"
    assert bundle_limits.size_text(17) == "17 bytes"
    assert bundle_archive.member_limit("root/sys/x")[0] == 256 * 1024
    assert bundle_archive.member_limit("manifest.json")[0] == 16 * 2**20
    assert bundle_archive.member_limit("report.html")[0] == 256 * 2**20


def test_each_area_holds_what_the_collector_can_write_there():
    """The limits follow the collector's own caps: raising one of those must raise these."""
    from ibdiag.families.nccl_inspector import files as inspector_files
    from ibdiag.runner import command_runner
    from ibdiag.sources import sysfs

    areas = {prefix: (each, total) for prefix, each, total, _what in bundle_limits.KEPT_AREAS}
    assert areas["root/"][0] >= 2 * sysfs._MAX_ATTRIBUTE_BYTES
    assert areas["commands/"][0] >= 2 * command_runner.OUTPUT_CAP_BYTES
    assert areas["nccl_inspector/"][0] >= 2 * inspector_files.MAX_BYTES
    assert areas["nccl_inspector/"][1] >= inspector_files.MAX_TOTAL_BYTES
    assert areas["baseline/"][0] == areas["baseline/"][1]  # one file: the README gives one size


def test_the_readme_states_the_limits_the_code_has():
    from pathlib import Path

    text = Path(REPO, "README.md").read_text(encoding="utf-8")
    section = text.split("## Support bundles", 1)[1].split("\n## ", 1)[0]
    L, size = bundle_limits, bundle_limits.size_text
    areas = {prefix: (size(each), size(total)) for prefix, each, total, _ in L.KEPT_AREAS}
    rows = [
        f"| files and directories | {L.MAX_MEMBERS:,} |",
        f"| one member; all of them unpacked | {size(L.MAX_MEMBER_BYTES)}; "
        f"{size(L.MAX_ARCHIVE_BYTES)} |",
        "| one raw sysfs/procfs file; all of `root/` | {}; {} |".format(*areas["root/"]),
        "| one command output; all of `commands/` | {}; {} |".format(*areas["commands/"]),
        "| one NCCL Inspector dump; all of them | {}; {} |".format(*areas["nccl_inspector/"]),
        "| the stored baseline snapshot | {} |".format(areas["baseline/"][0]),
        f"| `manifest.json`: size, nesting, JSON values | {size(L.MAX_MANIFEST_BYTES)}, "
        f"{L.MAX_JSON_DEPTH} deep, {L.MAX_JSON_VALUES:,} |",
        f"| HCAs, ports, names in the manifest's listings | {L.MAX_HCAS:,}, {L.MAX_PORTS:,}, "
        f"{L.MAX_LISTED_NAMES:,} |",
    ]
    for row in rows:
        assert row in section, row
    assert L.MAX_WARNINGS == 10 and "(the first ten, then a count)" in section
