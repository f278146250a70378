"""``ibdiag.fleet.read``: reports, directories and bundles in, one NodeSummary or one problem line
per input out - good reports beside bad ones all read, bad ones one line each, nothing blocks,
pool and single process alike; ``deduplicate`` keeps a host's newest report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from datetime import datetime, timedelta, timezone
from typing import Dict, List

import pytest
from conftest import REPO, SCENARIOS_DIR
from snapshots import device, loaded_registry, port, snapshot
from stubs import write_procfs
from test_fleet_node import report_json

from ibdiag.bundle.opener import open_bundle
from ibdiag.bundle.write import write_bundle
from ibdiag.collect import collect
from ibdiag.fleet import read as fleet_read
from ibdiag.fleet.identity import deduplicate
from ibdiag.fleet.node import NodeSummary, summarize
from ibdiag.fleet.read import (
    MAX_REPORT_BYTES,
    read_fleet,
    read_with_notes,
)
from ibdiag.fleet.report import NodeGroup, ReadProblem
from ibdiag.grade import grade
from ibdiag.sources.sysfs import Recording
from ibdiag.thresholds import Thresholds

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
GOOD_SCENARIO = "gcm-8xCX6-HDR-good"


def node_report(
    host: str, collected_at: datetime = T0, machine: int = 0, boot_id: str = "", **extra
) -> dict:
    """A real graded report's JSON (ibdiag.grade on a built snapshot) for ``host``; its HCAs'
    GUIDs are ``machine``'s (every report of one machine number shares them), its boot id the
    snapshot helper's unless given."""
    guids = [f"0c42:a103:{machine:04x}:{n:04x}" for n in range(2)]
    snap = snapshot([device(f"mlx5_{n}", [port(1)], node_guid=guids[n]) for n in range(2)])
    snap = snap.model_copy(update={"host": host, "collected_at": collected_at})
    if boot_id:
        snap = snap.model_copy(update={"boot_id": boot_id})
    _, data = report_json(snap)
    data.update(extra)
    return data


def read_inputs(paths, **options) -> list:
    """The items ``read_with_notes`` reads, without their notes."""
    return [item for item, _ in read_with_notes(paths, **options)]


def write_json(path, data) -> str:
    with open(path, "w") as handle:
        json.dump(data, handle)
    return str(path)


def hosts(items) -> List[str]:
    return [item.host for item in items if isinstance(item, NodeSummary)]


def problems(items) -> Dict[str, str]:
    """source (its file name) -> reason, asserting one line per source."""
    found: Dict[str, str] = {}
    for item in items:
        if isinstance(item, ReadProblem):
            name = os.path.basename(item.source)
            assert name not in found, f"two problem lines for {name}"
            assert "\n" not in item.reason and "Traceback" not in item.reason
            found[name] = item.reason
    return found


# -- a directory of good and bad inputs --------------------------------------------------------


def deeply_nested(depth: int = 100_000) -> str:
    return "[" * depth + "]" * depth


@pytest.fixture
def mixed_dir(tmp_path):
    """Six good reports and every kind of bad input the reader must name, plus files it must
    ignore. Returns (directory, good hosts, {bad file name: expected reason fragment})."""
    folder = tmp_path / "reports"
    folder.mkdir()
    good = [f"gpu{n:03d}" for n in range(1, 7)]
    for host in good:
        write_json(folder / f"{host}.json", node_report(host))
    text = json.dumps(node_report("gpu099"))
    (folder / "truncated.json").write_text(text[: len(text) // 2])
    (folder / "cut-in-a-string.json").write_text('{"verdict": "OK", "results": [], "snap')
    (folder / "empty.json").write_bytes(b"")
    (folder / "garbage.json").write_bytes(bytes(range(256)) * 16)
    (folder / "list.json").write_text("[1, 2, 3]")
    (folder / "foreign.json").write_text('{"name": "not ibdiag", "version": 3}')
    (folder / "nested.json").write_text(deeply_nested())
    (folder / "not-json.json").write_text("verdict: OK\n")
    odd = node_report("gpu098")
    odd["snapshot"]["driver_versions"] = ["mlx5_core", "24.10"]  # a list where a map belongs
    write_json(folder / "odd-types.json", odd)  # read all the same: that field is unknown
    write_json(folder / "a-fleet-report.json", {"nodes_read": 3, "settings": {}, "counts": {}})
    snap = snapshot().model_copy(update={"host": "gpu097"})
    (folder / "a-snapshot.json").write_text(snap.model_dump_json())
    with open(folder / "huge.json", "wb") as handle:  # sparse: a GiB claimed, nothing stored
        handle.truncate(1 << 30)
    os.mkfifo(folder / "fifo.json")
    os.symlink("/dev/zero", folder / "device.json")
    os.symlink(str(tmp_path / "nowhere.json"), folder / "dangling.json")
    os.symlink("loop-b.json", folder / "loop-a.json")
    os.symlink("loop-a.json", folder / "loop-b.json")
    os.mkdir(folder / "a-directory.json")
    # followed: a link out of the directory to a report elsewhere is a report
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    write_json(outside / "gpu007.json", node_report("gpu007"))
    os.symlink(str(outside / "gpu007.json"), folder / "gpu007.json")
    good.append("gpu007")
    good.append("gpu098")  # odd-types.json, read in name order
    # ignored: not inputs, and never problems
    (folder / "README").write_text("reports of the nightly run\n")
    (folder / "gpu001.json.sha256").write_text("0" * 64 + "  gpu001.json\n")
    (folder / "fleet.json").write_text('{"nodes_read": 7}')
    (folder / "fleet.html").write_text("<html></html>")
    (folder / ".ibdiag-x1y2.tmp").write_text('{"half a rep')
    (folder / ".hidden.json").write_text("{")
    (folder / "ibdiag-gpu001-20240501T120000Z.redaction-map.json").write_text("{}")
    (folder / "subdir").mkdir()
    write_json(folder / "subdir" / "gpu050.json", node_report("gpu050"))  # non-recursive
    bad = {
        "truncated.json": "truncated JSON",
        "cut-in-a-string.json": "truncated JSON",
        "empty.json": "an empty file, not JSON",
        "garbage.json": "binary data, not JSON",
        "list.json": "not an ibdiag report (a JSON list)",
        "foreign.json": "not an ibdiag report (no verdict, results and snapshot)",
        "nested.json": "JSON nested too deep to be a report",
        "not-json.json": "not JSON: Expecting value at line 1 column 1",
        "a-fleet-report.json": "a fleet report (ibdiag fleet report), not one node's report",
        "a-snapshot.json": "an ibdiag snapshot, not a report",
        "huge.json": f"{1 << 30} bytes: more than 256 MiB, the most a node's report may be",
        "fifo.json": "a FIFO, not a report or bundle",
        "device.json": "a device, not a report or bundle",
        "dangling.json": "a symbolic link to nothing",
        "loop-a.json": "a symbolic link loop",
        "loop-b.json": "a symbolic link loop",
        "a-directory.json": "a directory, not a report or bundle",
    }
    return str(folder), good, bad


def read_with_deadline(paths, seconds: float = 60.0, **options) -> list:
    """``list(read_inputs(...))`` that fails, rather than hangs, if reading blocks."""
    out: list = []
    worker = threading.Thread(target=lambda: out.extend(read_inputs(paths, **options)))
    worker.daemon = True
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "reading blocked (a FIFO or device opened for reading?)"
    return out


@pytest.mark.parametrize("workers", [1, 2])
def test_every_bad_input_is_one_line_and_every_good_report_is_read(mixed_dir, workers):
    folder, good, bad = mixed_dir
    items = read_with_deadline([folder], workers=workers)
    assert hosts(items) == good  # by file name, the link out of the directory included
    found = problems(items)
    assert set(found) == set(bad), "exactly the bad inputs are problems; ignored files are not"
    for name, fragment in bad.items():
        assert fragment in found[name], (name, found[name])
    assert len(items) == len(good) + len(bad)
    summary = next(item for item in items if isinstance(item, NodeSummary))
    assert summary.source == os.path.join(folder, "gpu001.json")


def test_the_pool_and_a_single_process_read_the_same(mixed_dir, tmp_path):
    folder, good, _ = mixed_dir
    more = tmp_path / "more"
    more.mkdir()
    for n in range(40):  # enough for several chunks per worker
        write_json(more / f"node{n:03d}.json", node_report(f"node{n:03d}"))
    paths = [folder, str(more)]
    single = read_with_deadline(paths, workers=1)
    pooled = read_with_deadline(paths, workers=2)
    assert pooled == single
    assert len(hosts(single)) == len(good) + 40


def test_a_fifo_or_device_named_on_the_command_line_never_blocks(tmp_path):
    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    items = read_with_deadline([str(fifo), "/dev/zero"], seconds=20)
    assert [item.reason for item in items] == [
        "a FIFO, not a report or bundle",
        "a device, not a report or bundle",
    ]


def test_a_file_past_the_limit_is_refused_by_its_size_unread(tmp_path):
    big = tmp_path / "big.json"
    write_json(big, node_report("gpu001"))
    size = os.path.getsize(big)
    (item,) = read_inputs([str(big)], workers=1, max_bytes=size - 1)
    assert (
        item.reason == f"{size} bytes: more than {size - 1} bytes, the most a node's report may be"
    )
    (item,) = read_inputs([str(big)], workers=1, max_bytes=size)
    assert item.host == "gpu001"
    assert MAX_REPORT_BYTES == 256 << 20


def test_an_empty_directory_and_a_missing_path_are_one_line_each(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    only_outputs = tmp_path / "outputs"
    only_outputs.mkdir()
    for name in ("fleet.json", "fleet.html", "notes.txt"):
        (only_outputs / name).write_text("x")
    items = list(read_inputs([str(empty), str(only_outputs), str(tmp_path / "nope")], workers=1))
    assert [(item.source, item.reason) for item in items] == [
        (str(empty), f"no reports in {empty} (no *.json, bundle tarball or bundle directory)"),
        (
            str(only_outputs),
            f"no reports in {only_outputs} (no *.json, bundle tarball or bundle directory; "
            "3 other entries ignored)",
        ),
        (str(tmp_path / "nope"), "no such file or directory"),
    ]


def test_the_same_file_given_twice_is_read_once(tmp_path):
    path = write_json(tmp_path / "gpu001.json", node_report("gpu001"))
    os.symlink(path, tmp_path / "alias.json")
    items = list(read_inputs([str(tmp_path), path, str(tmp_path / "alias.json")], workers=1))
    assert hosts(items) == ["gpu001"]


# -- permissions: as a user that may not read them (root reads anything: drop its override) ---

UNPRIVILEGED = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]


def read_unprivileged(paths: List[str]) -> List[dict]:
    """read_with_notes in a subprocess that cannot bypass file permissions: its items as dicts."""
    code = (
        "import json, sys\n"
        "from ibdiag.fleet.read import read_with_notes\n"
        "for item, _ in read_with_notes(sys.argv[1:], workers=2):\n"
        "    print(json.dumps({'type': type(item).__name__, **item.model_dump(mode='json')}))\n"
    )
    prefix = UNPRIVILEGED if os.geteuid() == 0 else []
    env = {**os.environ, "PYTHONPATH": REPO}
    done = subprocess.run(
        [*prefix, sys.executable, "-c", code, *paths],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_unreadable_files_and_directories_are_one_line_each(tmp_path):
    folder = tmp_path / "reports"
    folder.mkdir()
    for host in ("gpu001", "gpu002", "gpu003"):
        write_json(folder / f"{host}.json", node_report(host))
    os.chmod(folder / "gpu002.json", 0)
    locked = tmp_path / "locked"
    locked.mkdir()
    write_json(locked / "gpu004.json", node_report("gpu004"))
    os.chmod(locked, 0)
    try:
        items = read_unprivileged([str(folder), str(locked)])
    finally:
        os.chmod(locked, 0o700)
    assert [item.get("host") for item in items if item["type"] == "NodeSummary"] == [
        "gpu001",
        "gpu003",
    ]
    refused = {item["source"]: item["reason"] for item in items if item["type"] == "ReadProblem"}
    assert refused == {
        str(folder / "gpu002.json"): "cannot read it: Permission denied",
        str(locked): "cannot list it: Permission denied",
    }


# -- report versions ----------------------------------------------------------------------------


def test_a_newer_report_schema_is_read_best_effort_with_a_note(tmp_path):
    from ibdiag.model import SCHEMA_VERSION

    newer = node_report("gpu002", schema_version=SCHEMA_VERSION + 1)
    newer["a_field_from_the_future"] = {"x": [1, 2]}
    newer["snapshot"]["devices"][0]["new_thing"] = "?"
    write_json(tmp_path / "gpu001.json", node_report("gpu001"))
    write_json(tmp_path / "gpu002.json", newer)
    found = read_fleet([str(tmp_path)], workers=1)
    assert [node.host for node in found.nodes] == ["gpu001", "gpu002"]
    assert found.nodes[1].schema_version == SCHEMA_VERSION + 1
    assert found.problems == [] and found.duplicates == []
    (note,) = found.notes
    assert note.nodes == "gpu002" and note.count == 1
    assert note.reason == (
        f"report schema_version {SCHEMA_VERSION + 1} is newer than this ibdiag's "
        f"({SCHEMA_VERSION}): read best-effort"
    )


# -- bundles ------------------------------------------------------------------------------------


def make_bundle(tmp_path, host: str, tarball: bool) -> str:
    """A real bundle (ibdiag.bundle.write.write_bundle, as ``ibdiag collect`` writes) of the good
    scenario's sysfs, as ``host``."""
    sysfs = os.path.join(SCENARIOS_DIR, GOOD_SCENARIO, "root", "sys")
    procfs = write_procfs(tmp_path / f"proc-{host}", hostname=host, modules=None)
    recording = Recording()
    snap = collect(sysfs, procfs, {"sysfs"}, recording=recording)
    report = grade(snap, loaded_registry(), Thresholds(), "quick")
    out = tmp_path / "bundles"
    out.mkdir(exist_ok=True)
    return write_bundle(snap, report, recording, str(out), tarball)


@pytest.fixture
def bundles(tmp_path):
    tar = make_bundle(tmp_path, "gpu101", tarball=True)
    folder = make_bundle(tmp_path, "gpu102", tarball=False)
    return tar, folder


def test_bundles_tarball_and_directory_are_read_from_their_report(bundles, tmp_path):
    tar, folder = bundles
    with open(os.path.join(folder, "report.json")) as handle:
        expected = summarize(json.load(handle), folder)
    items = list(read_inputs([tar, folder], workers=1))
    assert hosts(items) == ["gpu101", "gpu102"]
    assert items[1] == expected  # the stored report, as graded when collected
    assert items[0].source == tar and items[0].verdict == "OK"
    # the directory they are in: the tarball, its .sha256 (ignored), the bundle directory
    assert sorted(os.listdir(os.path.dirname(tar))) == sorted(
        [os.path.basename(tar), os.path.basename(tar) + ".sha256", os.path.basename(folder)]
    )
    assert read_with_deadline([os.path.dirname(tar)], workers=2) == items
    # a tarball named without its suffix is known by its first bytes
    renamed = tmp_path / "bundle-from-a-ticket"
    os.link(tar, renamed)
    (item,) = read_inputs([str(renamed)], workers=1)
    assert item.host == "gpu101" and item.source == str(renamed)


def test_the_tarball_keeps_only_the_report_the_fleet_asked_for(bundles):
    tar, _ = bundles
    with open_bundle(tar, keep={"report.json": MAX_REPORT_BYTES}) as opened:
        assert set(opened.archive.kept) == {"manifest.json", "report.json"}
        assert json.loads(opened.read("report.json"))["snapshot"]["host"] == "gpu101"
    with open_bundle(tar, keep={"report.json": 100}) as opened:
        assert opened.read("report.json") is None  # larger than asked for: hashed, not kept
    with open_bundle(tar) as opened:  # replay's default: no report, its raw files
        assert "report.json" not in opened.archive.kept
        assert any(rel.startswith("root/") for rel in opened.archive.kept)


def test_a_bundle_report_past_the_limit_is_one_line(bundles):
    tar, folder = bundles
    items = list(read_inputs([tar, folder], workers=1, max_bytes=1000))
    assert [item.reason for item in items] == [
        f"{size} bytes: more than 1000 bytes, the most a node's report may be"
        for size in (
            _tar_member_size(tar, "report.json"),
            os.path.getsize(os.path.join(folder, "report.json")),
        )
    ]


def _tar_member_size(tar: str, rel: str) -> int:
    import tarfile

    with tarfile.open(tar) as archive:
        return next(m.size for m in archive.getmembers() if m.name.endswith("/" + rel))


def test_an_altered_bundle_is_a_problem_unless_accepted_then_noted(bundles, tmp_path):
    tar, folder = bundles
    report_path = os.path.join(folder, "report.json")
    with open(report_path) as handle:
        data = json.load(handle)
    data["verdict_reason"] = "all good, trust me"
    write_json(report_path, data)
    (refused,) = read_inputs([folder], workers=1)
    assert refused.source == folder
    assert refused.reason == (
        "refused: 1 file differs from the sha256 in manifest.json: report.json "
        "(--accept-altered grades it anyway)"
    )
    found = read_fleet([tar, folder], workers=1, accept_altered=True)
    assert [node.host for node in found.nodes] == ["gpu101", "gpu102"]
    (note,) = found.notes
    assert note.nodes == "gpu102" and note.reason == (
        "read from a bundle whose files differ from its manifest (report.json among them): "
        "accepted with --accept-altered"
    )


def test_broken_bundles_are_one_line_each_beside_good_ones(bundles, tmp_path):
    tar, _ = bundles
    broken = tmp_path / "broken"
    broken.mkdir()
    with open(tar, "rb") as handle:
        data = handle.read()
    (broken / "cut.tar.gz").write_bytes(data[: len(data) // 2])
    (broken / "junk.tar.gz").write_bytes(b"this is not a tarball")
    no_report = make_bundle(tmp_path, "gpu103", tarball=False)
    os.unlink(os.path.join(no_report, "report.json"))
    os.rename(no_report, broken / "no-report")
    os.symlink(tar, broken / "good.tar.gz")
    items = read_with_deadline([str(broken)], workers=2)
    assert hosts(items) == ["gpu101"]
    found = problems(items)
    assert found["cut.tar.gz"].startswith("not a readable bundle (truncated or corrupt archive)")
    assert found["junk.tar.gz"].startswith("not a readable bundle")
    assert found["no-report"] == "the bundle holds no report.json"
    assert len(items) == 4


# -- duplicates ---------------------------------------------------------------------------------


def test_a_host_read_twice_keeps_its_newest_report_and_is_listed(tmp_path):
    old = write_json(tmp_path / "a-gpu001-old.json", node_report("gpu001", T0))
    new = write_json(tmp_path / "b-gpu001-new.json", node_report("gpu001", T0 + timedelta(hours=1)))
    older = write_json(tmp_path / "c-gpu001-older.json", node_report("gpu001", T0 - timedelta(1)))
    write_json(tmp_path / "gpu002.json", node_report("gpu002"))
    found = read_fleet([str(tmp_path)], workers=1)
    assert [(node.host, node.source) for node in found.nodes] == [
        ("gpu001", new),
        ("gpu002", str(tmp_path / "gpu002.json")),
    ]
    (group,) = found.duplicates
    assert (group.nodes, group.count) == ("gpu001", 1)
    assert group.reason == (
        f"3 reports: used {new} (collected {(T0 + timedelta(hours=1)).isoformat()}), "
        f"not {old}, {older}"
    )


def summary(host: str, source: str, when, boot_id: str = "", guids=()) -> NodeSummary:
    """A node's summary; one boot id per host unless told (the evidence of one machine)."""
    return NodeSummary(
        host=host,
        source=source,
        level="quick",
        tool_version="0",
        schema_version=1,
        collected_at=when,
        verdict="OK",
        boot_id=boot_id or f"boot-of-{host}",
        guids=list(guids),
    )


def test_deduplicate_ties_and_unknown_times():
    naive = datetime(2024, 5, 1, 13, 0)  # no zone: taken as UTC, so after T0
    nodes, duplicates, notes = deduplicate(
        [
            summary("a", "a1", None),
            summary("a", "a2", T0),
            summary("a", "a3", None),  # a time beats no time
            summary("b", "b1", T0),
            summary("b", "b2", T0),  # a tie: the one given last
            summary("c", "c1", T0),
            summary("c", "c2", naive),
            summary("d", "d1", T0),
        ]
    )
    assert [(n.host, n.source) for n in nodes] == [
        ("a", "a2"),
        ("b", "b2"),
        ("c", "c2"),
        ("d", "d1"),
    ]
    assert [group.nodes for group in duplicates] == ["a", "b", "c"]
    assert duplicates[0].reason == f"3 reports: used a2 (collected {T0.isoformat()}), not a1, a3"
    assert notes == []


def test_many_duplicate_sources_are_named_then_counted():
    items = [summary("a", f"a{n}", T0 + timedelta(minutes=n)) for n in range(9)]
    _, (group,), _ = deduplicate(items)
    assert group.reason.endswith("not a0, a1, a2, a3, a4 and 3 more")
    assert group.reason.startswith("9 reports: used a8 ")


def test_one_host_name_on_different_machines_is_one_node_per_report_file(tmp_path):
    """Cloned images and kernels calling themselves localhost: two machines (no HCA GUID, no
    boot id in common) saying one host name are both nodes, named by their files' names, with
    one note; neither is a duplicate of the other."""
    one = write_json(tmp_path / "gpu001.json", node_report("localhost", machine=1, boot_id="b1"))
    two = write_json(tmp_path / "gpu002.json", node_report("localhost", machine=2, boot_id="b2"))
    three = write_json(tmp_path / "gpu003.json", node_report("gpu003", machine=3, boot_id="b3"))
    found = read_fleet([str(tmp_path)], workers=1)
    assert [(node.host, node.source) for node in found.nodes] == [
        ("gpu001", one),
        ("gpu002", two),
        ("gpu003", three),
    ]
    assert found.duplicates == [] and found.problems == []
    assert found.notes == [
        NodeGroup(
            reason="gpu001.json, gpu002.json both say host localhost: named by their file names",
            nodes="gpu[001-002]",
            count=2,
        )
    ]


def run_dirs(tmp_path, reports) -> List[str]:
    """Each (directory, file, report) written; the directories, once each, in order."""
    folders: List[str] = []
    for folder, name, report in reports:
        (tmp_path / folder).mkdir(exist_ok=True)
        write_json(tmp_path / folder / name, report)
        if str(tmp_path / folder) not in folders:
            folders.append(str(tmp_path / folder))
    return folders


LATER = T0 + timedelta(hours=1)


@pytest.mark.parametrize(
    "evidence, first, second",
    [
        # an HCA GUID in common: rebooted (another boot id), the files named otherwise
        ("guid", ("a", "old.json", dict(machine=1, boot_id="b1")),
         ("b", "new.json", dict(machine=1, boot_id="b2"))),
        # the same boot id: HCAs that read otherwise (replaced? a VF?), the same boot
        ("boot id", ("a", "old.json", dict(machine=1, boot_id="b1")),
         ("b", "new.json", dict(machine=2, boot_id="b1"))),
        # fleet run's DIR/<node>.json of two runs: the node the scheduler calls gpu001
        ("file name", ("run1", "gpu001.json", dict(machine=1, boot_id="b1")),
         ("run2", "gpu001.json", dict(machine=2, boot_id="b2"))),
    ],
)  # fmt: skip
def test_one_machine_read_twice_is_one_node_by_any_evidence(tmp_path, evidence, first, second):
    older = node_report("localhost", T0, **first[2])
    newer = node_report("localhost", LATER, **second[2])
    folders = run_dirs(tmp_path, [(first[0], first[1], older), (second[0], second[1], newer)])
    found = read_fleet(folders, workers=1)
    newest = str(tmp_path / second[0] / second[1])
    assert [(node.host, node.source) for node in found.nodes] == [("localhost", newest)], evidence
    (group,) = found.duplicates
    assert group.nodes == "localhost" and group.reason.startswith(f"2 reports: used {newest} ")
    assert found.notes == []


def test_without_any_evidence_in_common_the_same_host_is_two_machines(tmp_path):
    """The same checks, none met (other GUIDs, boot ids and file names): two nodes, each named
    by its file, not the newest kept and the other lost."""
    folders = run_dirs(
        tmp_path,
        [
            ("a", "old.json", node_report("localhost", T0, machine=1, boot_id="b1")),
            ("b", "new.json", node_report("localhost", LATER, machine=2, boot_id="b2")),
        ],
    )
    found = read_fleet(folders, workers=1)
    assert [node.host for node in found.nodes] == ["old", "new"]
    assert found.duplicates == [] and len(found.notes) == 1


def test_machines_whose_files_name_no_free_node_are_numbered():
    """A bundle's file names no node; a file naming a node another report already is cannot
    name this one: the host's name, then numbered, and the note says which."""
    nodes, duplicates, (note,) = deduplicate(
        [
            summary("gpu001", "d/gpu001.json", T0),
            summary("localhost", "x/ibdiag-localhost-1.tar.gz", T0, boot_id="1"),
            summary("localhost", "y/ibdiag-localhost-2.tar.gz", T0, boot_id="2"),
            summary("localhost", "z/gpu001.json", T0, boot_id="3"),
        ]
    )
    assert [node.host for node in nodes] == ["gpu001", "localhost", "localhost-2", "gpu001-2"]
    assert duplicates == [] and (note.nodes, note.count) == ("gpu001-2,localhost,localhost-2", 3)
    assert note.reason == (
        "ibdiag-localhost-1.tar.gz, ibdiag-localhost-2.tar.gz, gpu001.json all 3 say host "
        "localhost: named by their file names, or numbered where a file names no free node: "
        "localhost, localhost-2, gpu001-2"
    )


def test_a_report_that_ties_two_machines_merges_them():
    """Seen apart (other GUIDs, boot ids, files), then one report with a GUID of the first and
    the boot id of the second: all three are one machine."""
    nodes, (duplicate,), notes = deduplicate(
        [
            summary("h", "a", T0, boot_id="1", guids=["g1"]),
            summary("h", "b", T0, boot_id="2", guids=["g2"]),
            summary("h", "c", LATER, boot_id="2", guids=["g1"]),
        ]
    )
    assert [(node.host, node.source) for node in nodes] == [("h", "c")] and notes == []
    assert duplicate.reason.startswith("3 reports: used c ")


def test_only_an_unreadable_file_that_names_a_node_is_an_unknown_node(tmp_path):
    """DIR/<node>.json names its node; a bundle tarball's name, a name no node can have and a
    directory's own problem name none."""
    (tmp_path / "gpu009.json").write_text('{"verdict": ')
    (tmp_path / "junk.tar.gz").write_bytes(b"\x1f\x8b not really")
    (tmp_path / "bad name!.json").write_text("{")
    os.symlink(tmp_path / "nowhere", tmp_path / "gpu010.json")
    found = read_fleet([str(tmp_path), str(tmp_path / "empty")], workers=1)
    assert len(found.problems) == 5
    got = [(node.host, node.verdict, node.verdict_reason, node.unread) for node in found.nodes]
    assert got == [
        ("gpu009", "UNKNOWN", "its report could not be read: truncated JSON", True),
        ("gpu010", "UNKNOWN", "its report could not be read: a symbolic link to nothing", True),
    ]
    assert found.nodes[0].source == str(tmp_path / "gpu009.json")


# -- the process pool ---------------------------------------------------------------------------


def test_a_pool_worker_killed_midway_loses_no_node(tmp_path, monkeypatch):
    """A worker that dies (here: one file makes the worker process exit, as an OOM kill
    would) breaks the pool; what it had not answered is read in-process, every node kept."""
    for n in range(30):
        write_json(tmp_path / f"node{n:03d}.json", node_report(f"node{n:03d}"))
    main = os.getpid()
    real = fleet_read._read_job
    in_process: List[str] = []

    def read_job(job, options):
        if getattr(job, "path", "").endswith("node017.json"):
            if os.getpid() != main:
                os._exit(1)
            in_process.append(job.path)
        return real(job, options)

    monkeypatch.setattr(fleet_read, "_read_job", read_job)
    monkeypatch.setattr(fleet_read, "_MP_CONTEXT", "fork")  # the workers run the patched code
    items = list(read_inputs([str(tmp_path)], workers=2))  # forked from this thread, the only one
    assert hosts(items) == [f"node{n:03d}" for n in range(30)]
    assert in_process == [str(tmp_path / "node017.json")], "read again in-process, once"


def test_notes_are_only_for_the_report_kept(tmp_path):
    """A newer-schema report of a host that was superseded by a newer report gives no note."""
    from ibdiag.model import SCHEMA_VERSION

    write_json(tmp_path / "a.json", node_report("gpu001", T0, schema_version=SCHEMA_VERSION + 1))
    write_json(tmp_path / "b.json", node_report("gpu001", T0 + timedelta(hours=1)))
    found = read_fleet([str(tmp_path)], workers=1)
    assert found.notes == [] and len(found.duplicates) == 1
    notes = [note for _, note in read_with_notes([str(tmp_path)], workers=1)]
    assert notes[0] is not None and notes[1] is None


def test_the_report_named_for_its_host_first_and_a_time_past_the_clock_last():
    """A file named for its host outranks any other file's report, whatever their times; a
    collected_at past the clock (plus FUTURE_SKEW) ranks below an unknown time; the clock is
    the caller's (issue 21)."""
    from ibdiag.fleet.identity import FUTURE_SKEW, Machines

    def used(items, now=LATER) -> str:
        machines = Machines(now)
        for item in items:
            machines.add(item)
        (node,) = machines.result().nodes
        return node.source

    skewed = LATER + FUTURE_SKEW - timedelta(seconds=1)  # within the skew: believed
    future = LATER + FUTURE_SKEW + timedelta(seconds=1)
    assert used([summary("a", "d/a.json", T0), summary("a", "d/zz.json", LATER)]) == "d/a.json"
    assert used([summary("a", "d/a.json", T0), summary("a", "x.tar.gz", LATER)]) == "d/a.json"
    assert used([summary("a", "x/a.json", T0), summary("a", "y/a.json", skewed)]) == "y/a.json"
    assert used([summary("a", "x/a.json", None), summary("a", "y/a.json", future)]) == "x/a.json"
    assert used([summary("a", "x/a.json", None), summary("a", "y/a.json", future)],
                now=future) == "y/a.json"  # fmt: skip
    assert used([summary("a.example.com", "d/a.json", T0),
                 summary("a.example.com", "d/b.json", LATER)]) == "d/a.json"  # fmt: skip


def test_a_file_whose_name_holds_its_host_ranks_between_host_json_and_any_other():
    """``naming``, one notion for ranking and for who answers: ``<host>.json`` first, then a
    name holding the host as a word (a dated copy, a bundle as collect names it), then any
    other name - whatever their times."""
    from ibdiag.fleet.identity import Machines

    def used(*items) -> str:
        machines = Machines(LATER)
        for item in items:
            machines.add(item)
        (node,) = machines.result().nodes
        return node.source

    dated, bundle = "d/a-20261127.json", "d/ibdiag-a-20261127T101500Z.tar.gz"
    assert used(summary("a", dated, T0), summary("a", "d/zz.json", LATER)) == dated
    assert used(summary("a", bundle, T0), summary("a", "d/zz.tar.gz", LATER)) == bundle
    assert used(summary("a", bundle, T0), summary("a", "d/za.tar.gz", LATER)) == bundle
    assert used(summary("a", "d/a.json", T0), summary("a", dated, LATER)) == "d/a.json"
    assert used(summary("a", dated, T0), summary("a", bundle, LATER)) == bundle  # the newest


def test_only_reports_whose_verdicts_differ_conflict_and_the_worse_is_kept():
    from ibdiag.fleet.identity import Machines

    def read(*items):
        machines = Machines(LATER)
        for item in items:
            machines.add(item)
        return machines.result().nodes, machines.conflicts()

    sick = summary("a", "d/a.json", T0).model_copy(update={"verdict": "CRITICAL"})
    (node,), (conflict,) = read(sick, summary("a", "d/zz.json", LATER))
    assert node.verdict == "CRITICAL" and conflict.nodes == "a"
    assert conflict.reason == (
        f"a.json (CRITICAL, collected {T0.isoformat()}) and zz.json (OK, collected "
        f"{LATER.isoformat()}) say they are a: kept the worse, CRITICAL"
    )
    (node,), conflicts = read(summary("a", "d/a.json", T0), summary("a", "d/zz.json", LATER))
    assert node.source == "d/a.json" and conflicts == []  # the same verdict: no conflict
    (node,), conflicts = read(sick, summary("a", "e/a.json", LATER))  # run 2 of one name
    assert node.verdict == "OK" and conflicts == []  # the newest: the node was mended
