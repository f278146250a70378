"""Support bundles: written atomically, opened safely, replayed into the very same Snapshot."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import stat
import tarfile
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from conftest import scenario_names, scenario_sysfs
from snapshots import assert_same_snapshot, report_for
from stubs import write_procfs

from ibdiag import families
from ibdiag.bundle import write as bundle_write
from ibdiag.bundle.opener import BundleError, open_bundle
from ibdiag.bundle.replay import replay
from ibdiag.bundle.write import write_bundle
from ibdiag.collect import collect
from ibdiag.model import CommandRun, Report, Snapshot
from ibdiag.render.options import RenderOptions
from ibdiag.runner.command_runner import Runner
from ibdiag.sources.sysfs import Recording

NEEDS = {"sysfs", "topology", "kernel_log"}
GOOD = "gcm-8xCX6-HDR-good"


def live_collect(sysfs_root: str, procfs_root: str, recording: Optional[Recording] = None):
    """Level-standard-like sources (kernel_log runs dmesg) with an empty PATH: nothing live."""
    empty_bin = os.path.join(os.path.dirname(procfs_root), "empty-bin")
    os.makedirs(empty_bin, exist_ok=True)
    options = {"path": empty_bin, "timeout_s": 5.0}
    return collect(sysfs_root, procfs_root, NEEDS, options, recording=recording)


def collected(name: str, procfs_root: str):
    recording = Recording()
    snapshot = live_collect(scenario_sysfs(name), procfs_root, recording)
    assert snapshot.commands and all(run.not_found for run in snapshot.commands.values())
    return snapshot, recording


def with_commands(snapshot: Snapshot, runs: List[CommandRun]) -> Snapshot:
    """``snapshot`` as if ``runs`` had run with it: their typed fields parsed (and the two that
    a live run would have planned given their roles), as collect would."""
    from ibdiag.migrate import reinterpret

    commands = dict(snapshot.commands)
    commands.update({run.key: run for run in runs})
    sources = sorted(set(snapshot.sources) | {"ibstat", "perfquery"})
    return reinterpret(snapshot.model_copy(update={"commands": commands, "sources": sources}))


COMMAND_RUNS = [
    CommandRun.model_construct(
        argv=["ibstat"], rc=0, stdout="CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n", stderr="",
        duration_s=0.0312, timed_out=False, stdout_truncated=False, stderr_truncated=False,
        not_found=False, permission_denied=False, skipped=None, error=None,
    ),
    CommandRun.model_construct(
        argv=["perfquery", "-x", "-C", "mlx5_0", "-P", "1"], rc=None, stdout="tail \ufffd é\n",
        stderr="ibwarn: [1234] mad_rpc_open_port: can't open UMAD port\n", duration_s=5.0,
        timed_out=True, stdout_truncated=True, stderr_truncated=False, not_found=False,
        permission_denied=False, skipped=None, error=None,
    ),
    CommandRun.model_construct(
        argv=["ibv_devinfo", "-v", "<script>alert(1)</script>"], rc=None, stdout="",
        stderr="", duration_s=0.0, timed_out=False, stdout_truncated=False,
        stderr_truncated=False, not_found=True, permission_denied=False, skipped=None,
        error=None,
    ),
    CommandRun.model_construct(
        argv=["dmesg"], rc=None, stdout="", stderr="", duration_s=0.0, timed_out=False,
        stdout_truncated=False, stderr_truncated=False, not_found=False,
        permission_denied=False, skipped="the run's deadline had passed", error=None,
    ),
]  # fmt: skip


@pytest.fixture
def procfs(tmp_path):
    return write_procfs(
        tmp_path / "proc",
        hostname="gpu-node-017",
        boot_id="5c1f2f6e-7a0e-4c59-9a0b-0d3b1a3a8e11",
        modules=("mlx5_ib", "nvidia_peermem"),
    )


@pytest.fixture
def system_tmp(tmp_path_factory, monkeypatch) -> str:
    """A fresh, empty directory as the system's temporary directory (TMPDIR), to show that
    opening a bundle writes nothing there."""
    path = str(tmp_path_factory.mktemp("system-tmp"))
    monkeypatch.setenv("TMPDIR", path)
    monkeypatch.setattr(tempfile, "tempdir", path)
    return path


@pytest.fixture
def good(procfs):
    snapshot, recording = collected(GOOD, procfs)
    snapshot = with_commands(snapshot, COMMAND_RUNS)
    return snapshot, report_for(snapshot), recording


def bundle_members(path: str) -> Dict[str, bytes]:
    """A bundle's files (path below its top directory -> contents), tarball or directory."""
    if os.path.isdir(path):
        return {
            os.path.relpath(p, path): Path(p).read_bytes()
            for p in all_paths(path)
            if os.path.isfile(p)
        }
    with tarfile.open(path) as tar:
        return {
            member.name.split("/", 1)[1]: tar.extractfile(member).read()
            for member in tar.getmembers()
            if member.isfile()
        }


def all_paths(top: str) -> List[str]:
    found = []
    for here, dirs, files in os.walk(top):
        found += [os.path.join(here, name) for name in dirs + files]
    return sorted(found)


# -- recording ---------------------------------------------------------------------------------


def test_recording_does_not_change_the_snapshot(procfs):
    plain = live_collect(scenario_sysfs(GOOD), procfs)
    recorded, recording = collected(GOOD, procfs)
    assert plain.boot_time is not None and plain.gpus is not None and plain.kernel_modules
    update = {"collected_at": plain.collected_at, "commands": plain.commands}
    # The typed facts are read from the runs (each fact records what became of its run, how
    # long it took included): with the same runs, the same facts.
    assert families.interpret(families.without_facts(recorded.model_copy(update=update))) == plain
    assert recording.files["proc/sys/kernel/hostname"] == b"gpu-node-017\n"
    assert recording.files["sys/class/infiniband/mlx5_0/ports/1/state"].startswith(b"4: ACTIVE")
    link = recording.links["sys/class/infiniband/mlx5_0/device"]
    assert link["name"] == plain.devices[0].pci.address
    assert not os.path.isabs(link["target"]) and link["target"].endswith(link["name"])
    assert "mlx5_0" in recording.listings["sys/class/infiniband"]
    assert recording.exists["sys/class/infiniband/mlx5_0/device"] is True


def test_unreadable_files_are_recorded_with_their_reason(tmp_path):
    recording = Recording()
    snapshot = live_collect(str(tmp_path / "nosys"), str(tmp_path / "noproc"), recording)
    assert recording.unreadable["proc/sys/kernel/random/boot_id"] == "missing"
    assert recording.listing_errors["sys/class/infiniband"] == "missing"
    assert snapshot.problems["class/infiniband"] == "missing"


# -- round trip --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", scenario_names())
@pytest.mark.parametrize("tarball", [False, True], ids=["dir", "tar"])
def test_replay_of_a_bundle_is_the_live_snapshot(name, tarball, tmp_path, procfs):
    snapshot, recording = collected(name, procfs)
    snapshot = with_commands(snapshot, COMMAND_RUNS)
    report = report_for(snapshot)
    path = write_bundle(snapshot, report, recording, str(tmp_path / "out"), tarball=tarball)
    with open_bundle(path) as opened:
        assert opened.problems == []
        assert opened.level == "quick"
        replayed = replay(opened)
    assert_same_snapshot(replayed, snapshot)
    regraded = report_for(replayed)
    assert regraded.verdict == report.verdict
    assert regraded.results == report.results


def test_replay_of_real_runner_commands(tmp_path, procfs):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "ibstat"
    script.write_text("#!/bin/sh\necho \"CA 'mlx5_0' $*\"\necho oops >&2\nexit 3\n")
    script.chmod(0o755)
    runs = Runner(path=str(bindir), timeout_s=10).run_all([["ibstat", "-l"], ["not-there"]])
    assert runs["ibstat -l"].rc == 3 and runs["not-there"].not_found
    snapshot, recording = collected(GOOD, procfs)
    # These runs replace the collected dmesg/journalctl ones: so goes what was read from those.
    snapshot = snapshot.model_copy(update={"commands": runs, "kernel_log": None})
    path = write_bundle(snapshot, report_for(snapshot), recording, str(tmp_path / "out"))
    with open_bundle(path) as opened:
        entry = opened.manifest.commands[0]
        assert entry.argv == ["ibstat", "-l"] and entry.rc == 3
        assert entry.stdout_file == "commands/001-ibstat_-l.stdout"
        assert_same_snapshot(replay(opened), snapshot)


def test_a_redacted_bundle_redacts_member_names_and_replays_whole(tmp_path, procfs):
    """Member names made from run data carry what contents do (a host in an mpirun -H, an
    address or GID in an argv, NCCL's <hostname>-pid<pid>.log): redacted with the contents'
    mapping, listed so in the manifest, and replayed; a 16-digit data counter stays a number."""
    import shutil

    from ibdiag.bundle.redact import Redactor
    from ibdiag.model import InspectorFile

    sys_root = tmp_path / "sys"
    shutil.copytree(scenario_sysfs(GOOD), str(sys_root), symlinks=True)
    counters = sys_root / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "counters"
    counters.mkdir()
    (counters / "port_xmit_data").write_text("1234567890123456\n")  # 4.9 PB: a busy port
    recording = Recording()
    snapshot = live_collect(str(sys_root), procfs, recording)
    host = snapshot.host
    assert host == "gpu-node-017"
    runs = [
        CommandRun.model_construct(argv=argv, rc=0, stdout=f"ran on {host} 10.1.2.3\n")
        for argv in (
            ["mpirun", "-np", "2", "-H", f"{host}:1,{host}:1", "all_reduce_perf_mpi"],
            ["ping", "-c1", "10.1.2.3"],  # joined by "_": only Redactor.name sees the address
            ["ibping", "-G", "fe80::b859:9f03:d4:a10"],  # a GID keeps its colons until redacted
        )
    ]
    dump = InspectorFile.model_construct(
        name=f"{host}-pid4242.log",
        modified_at=datetime(2025, 5, 23, 20, 0, tzinfo=timezone.utc),
        text=f'{{"metadata": {{"hostname": "{host}", "dump_timestamp_us": 1748030377748202}}}}\n',
        truncated=False,
    )
    snapshot = with_commands(snapshot, runs).model_copy(update={"nccl_inspector": [dump]})
    redactor = Redactor(hostnames=[host])
    path = write_bundle(snapshot, report_for(snapshot), recording, str(tmp_path / "out"),
                        tarball=True, redactor=redactor)  # fmt: skip
    secrets = [host, "10.1.2.3", "b859", "9f03", "fe80__"]
    with tarfile.open(path) as tar:
        names = tar.getnames()
    for secret in secrets:
        assert not [name for name in names if secret in name], (secret, names)
    with open_bundle(path) as opened:
        assert opened.problems == []
        files = {entry.key: entry.stdout_file for entry in opened.manifest.commands}
        replayed = replay(opened)
    assert files["ping -c1 198.18.0.1"].endswith("-ping_-c1_198.18.0.1.stdout"), files
    assert any("-H_host-1_1_host-1_1_" in name for name in files.values()), files
    for run in runs:
        again = replayed.commands[redactor.text(run.key)]
        assert again.stdout == "ran on host-1 198.18.0.1\n" and again.argv != run.argv
    (inspector,) = replayed.nccl_inspector
    assert inspector.name == "host-1-pid4242.log"
    assert inspector.text == dump.text.replace(host, "host-1")  # the timestamp kept, as JSON
    port = replayed.device("mlx5_0").ports[0]
    assert port.counters["port_xmit_data"] == 1234567890123456, port.problems


# -- layout, names and modes -------------------------------------------------------------------


def test_directory_bundle_layout_and_modes(good, tmp_path):
    snapshot, report, recording = good
    out = tmp_path / "out"
    path = write_bundle(snapshot, report, recording, str(out))
    assert os.listdir(str(out)) == [os.path.basename(path)]  # no temp left beside it
    assert os.path.basename(path) == bundle_write.bundle_name("gpu-node-017", snapshot.collected_at)
    for name in ("report.json", "report.html", "summary.txt", "manifest.json"):
        assert os.path.isfile(os.path.join(path, name)), name
    state = os.path.join(path, "root/sys/class/infiniband/mlx5_0/ports/1/state")
    with open(state, "rb") as handle:
        assert handle.read() == recording.files["sys/class/infiniband/mlx5_0/ports/1/state"]
    for entry in [path, *all_paths(path)]:
        mode = os.lstat(entry).st_mode
        assert not stat.S_ISLNK(mode), entry  # no symlinks in a bundle
        assert stat.S_IMODE(mode) == (0o700 if stat.S_ISDIR(mode) else 0o600), entry
    with open(os.path.join(path, "manifest.json")) as handle:
        manifest = json.load(handle)
    assert manifest["host"] == "gpu-node-017" and manifest["level"] == "quick"
    assert manifest["thresholds"]["expect_rate_gbps"] == 200.0
    assert manifest["tool"]["version"] and manifest["created_utc"].endswith("Z")
    assert manifest["render_failures"] == {}
    assert "sys/class/infiniband/mlx5_0/device" in manifest["links"]
    listed = {entry["path"]: entry for entry in manifest["files"]}
    on_disk = {os.path.relpath(p, path) for p in all_paths(path) if os.path.isfile(p)}
    assert set(listed) == on_disk - {"manifest.json"}
    with open(state, "rb") as handle:
        data = handle.read()
    state_rel = "root/sys/class/infiniband/mlx5_0/ports/1/state"
    assert listed[state_rel]["sha256"] == hashlib.sha256(data).hexdigest()
    assert listed[state_rel]["size"] == len(data)
    perf = next(c for c in manifest["commands"] if c["argv"][0] == "perfquery")
    assert perf["timed_out"] and perf["stdout_truncated"] and perf["duration_s"] == 5.0
    assert re.fullmatch(r"commands/\d{3}-perfquery_-x_-C_mlx5_0_-P_1\.stdout", perf["stdout_file"])
    script = next(c for c in manifest["commands"] if c["argv"][0] == "ibv_devinfo")
    assert re.fullmatch(
        r"commands/\d{3}-ibv_devinfo_-v__script_alert_1_script\.stderr", script["stderr_file"]
    )
    files = sorted(c["stdout_file"] for c in manifest["commands"])
    assert len(set(files)) == len(manifest["commands"]) == len(snapshot.commands)


def test_tarball_mode_and_checksum(good, tmp_path):
    snapshot, report, recording = good
    out = tmp_path / "out"
    path = write_bundle(snapshot, report, recording, str(out), tarball=True)
    name = bundle_write.bundle_name("gpu-node-017", snapshot.collected_at)
    assert os.path.basename(path) == f"{name}.tar.gz"
    assert sorted(os.listdir(str(out))) == [f"{name}.tar.gz", f"{name}.tar.gz.sha256"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path + ".sha256").st_mode) == 0o600
    with open(path + ".sha256") as handle:
        line = handle.read()
    with open(path, "rb") as handle:
        digest = hashlib.sha256(handle.read()).hexdigest()
    assert line == f"{digest}  {name}.tar.gz\n"  # sha256sum -c format
    with tarfile.open(path) as tar:
        members = tar.getmembers()
    assert all(m.name == name or m.name.startswith(name + "/") for m in members)
    assert all(m.isfile() or m.isdir() for m in members)
    assert all(m.mode == (0o700 if m.isdir() else 0o600) for m in members)


def test_names_are_sanitised_and_never_clobber(good, tmp_path):
    when = datetime(2024, 3, 5, 7, 8, 9, tzinfo=timezone.utc)
    assert bundle_write.bundle_name("node 01/<b>", when) == "ibdiag-node_01_b-20240305T070809Z"
    assert bundle_write.bundle_name(None, when) == "ibdiag-unknown-20240305T070809Z"
    assert bundle_write.bundle_name("../..", when) == "ibdiag-unknown-20240305T070809Z"
    snapshot, report, recording = good
    out = str(tmp_path / "out")
    first = write_bundle(snapshot, report, recording, out)
    second = write_bundle(snapshot, report, recording, out)
    third = write_bundle(snapshot, report, recording, out, tarball=True)
    assert second == first + "-2" and third == first + "-3.tar.gz"


# -- failures while writing --------------------------------------------------------------------


def failing_html(report: Report, options: RenderOptions) -> str:
    raise RuntimeError("template exploded")


def renderers_with(html) -> Dict[str, object]:
    renderers = bundle_write.default_renderers()
    renderers["report.html"] = html
    return renderers


@pytest.mark.parametrize("tarball", [False, True], ids=["dir", "tar"])
def test_failing_html_renderer_keeps_everything_else(good, tmp_path, tarball):
    snapshot, report, recording = good
    path = write_bundle(
        snapshot, report, recording, str(tmp_path / "out"), tarball, renderers_with(failing_html)
    )
    with open_bundle(path) as opened:
        assert opened.problems == []
        assert opened.manifest.render_failures == {"report.html": "RuntimeError: template exploded"}
        names = {entry.path for entry in opened.manifest.files}
        assert {"report.json", "summary.txt"} <= names and "report.html" not in names
        assert any(name.startswith("root/sys/") for name in names)
        assert any(name.startswith("commands/") for name in names)
        assert_same_snapshot(replay(opened), snapshot)
    members = bundle_members(path)
    assert "report.html" not in members
    assert json.loads(members["report.json"])["verdict"] == report.verdict.value


def interrupt(report: Report, options: RenderOptions) -> str:
    raise KeyboardInterrupt


@pytest.mark.parametrize("tarball", [False, True], ids=["dir", "tar"])
def test_interrupt_while_rendering_leaves_nothing(good, tmp_path, tarball):
    snapshot, report, recording = good
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        write_bundle(snapshot, report, recording, str(out), tarball, renderers_with(interrupt))
    assert os.listdir(str(out)) == []


def test_interrupt_while_writing_root_files_leaves_nothing(good, tmp_path, monkeypatch):
    snapshot, report, recording = good
    real_write = bundle_write._Stage.write
    calls = []

    def write(self, rel, data):
        calls.append(rel)
        if len(calls) == 50:
            raise KeyboardInterrupt
        return real_write(self, rel, data)

    monkeypatch.setattr(bundle_write._Stage, "write", write)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        write_bundle(snapshot, report, recording, str(out), tarball=True)
    assert os.listdir(str(out)) == []


@pytest.mark.parametrize("fail_at", [1, 2])
def test_interrupt_while_publishing_the_tarball_leaves_nothing(
    good, tmp_path, monkeypatch, fail_at
):
    """Ctrl-C as the tarball (1) or its .sha256 (2) is linked into place by the atomic writer:
    neither the temp files nor a tarball without its checksum are left."""
    snapshot, report, recording = good
    real_link = os.link
    calls = []

    def link(temp, final):
        calls.append(final)
        if len(calls) == fail_at:
            raise KeyboardInterrupt
        real_link(temp, final)

    monkeypatch.setattr(os, "link", link)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        write_bundle(snapshot, report, recording, str(out), tarball=True)
    assert len(calls) == fail_at and calls[-1].endswith((".tar.gz", ".tar.gz.sha256")[fail_at - 1])
    assert os.listdir(str(out)) == []


# -- opening: verification ---------------------------------------------------------------------


def test_altered_and_missing_files_are_reported_by_name(good, tmp_path):
    snapshot, report, recording = good
    path = write_bundle(snapshot, report, recording, str(tmp_path / "out"))
    state = "root/sys/class/infiniband/mlx5_0/ports/1/state"
    with open(os.path.join(path, state), "wb") as handle:
        handle.write(b"1: DOWN\n")
    gone = "root/sys/class/infiniband/mlx5_1/fw_ver"
    os.unlink(os.path.join(path, gone))
    os.unlink(os.path.join(path, "report.html"))
    with open(os.path.join(path, "extra.txt"), "w") as handle:
        handle.write("hello")
    with pytest.raises(BundleError) as refused, open_bundle(path):
        pass  # refused by default: the file whose sha256 differs is named
    assert str(refused.value) == (
        f"refusing {path}: 1 file differs from the sha256 in manifest.json: {state} "
        "(--accept-altered grades it anyway)"
    )
    with open_bundle(path, accept_altered=True) as opened:
        assert opened.altered == [state]
        assert sorted(opened.missing) == sorted([gone, "report.html"])
        assert opened.unlisted == ["extra.txt"]
        assert f"altered: {state}" in opened.problems
        assert f"missing: {gone}" in opened.problems
        replayed = replay(opened)  # usable when asked for: the caller shows the list
    assert replayed.device("mlx5_0").ports[0].state_name == "DOWN"
    assert replayed.device("mlx5_1").problems["fw_ver"] == "missing from the bundle"


def test_missing_and_unlisted_files_alone_open_without_asking(good, tmp_path):
    snapshot, report, recording = good
    path = write_bundle(snapshot, report, recording, str(tmp_path / "out"))
    os.unlink(os.path.join(path, "summary.txt"))
    with open(os.path.join(path, "extra.txt"), "w") as handle:
        handle.write("hello")
    with open_bundle(path) as opened:
        assert opened.problems == ["missing: summary.txt", "not in manifest: extra.txt"]
        assert opened.warnings() == opened.problems


def test_altered_file_in_a_tarball_is_refused_by_name(good, tmp_path):
    snapshot, report, recording = good
    path = write_bundle(snapshot, report, recording, str(tmp_path / "out"), tarball=True)
    rebuilt = str(tmp_path / "altered.tar.gz")
    with tarfile.open(path) as src, tarfile.open(rebuilt, "w:gz") as dst:
        for member in src.getmembers():
            data = src.extractfile(member).read() if member.isfile() else None
            if member.name.endswith("summary.txt"):
                data = b"all good, trust me\n"
                member.size = len(data)
            dst.addfile(member, io.BytesIO(data) if data is not None else None)
    with (
        pytest.raises(BundleError, match=r"1 file differs .*: summary\.txt \("),
        open_bundle(rebuilt),
    ):
        pass
    with open_bundle(rebuilt, accept_altered=True) as opened:
        assert opened.altered == ["summary.txt"] and opened.missing == []


def test_many_altered_files_are_named_then_counted(good, tmp_path):
    snapshot, report, recording = good
    path = write_bundle(snapshot, report, recording, str(tmp_path / "out"))
    names = sorted(n for n in bundle_members(path) if n.startswith("root/sys/"))[:25]
    for name in names:
        with open(os.path.join(path, name), "ab") as handle:
            handle.write(b"x")
    with pytest.raises(BundleError) as refused, open_bundle(path):
        pass
    message = str(refused.value)
    assert "25 files differ from the sha256 in manifest.json: " in message
    assert ", ".join(names[:10]) + " and 15 more (--accept-altered" in message
    assert names[10] not in message
    with open_bundle(path, accept_altered=True) as opened:
        warnings = opened.warnings()
    assert warnings == [f"altered: {name}" for name in names[:10]] + [
        "and 15 more missing, altered or unlisted files"
    ]


@pytest.mark.parametrize(
    "damage", ["no-manifest", "not-json", "not-a-manifest", "future-schema", "unsafe-path"]
)
def test_unusable_manifest_is_a_bundle_error(good, tmp_path, damage):
    snapshot, report, recording = good
    path = write_bundle(snapshot, report, recording, str(tmp_path / "out"))
    manifest_path = os.path.join(path, "manifest.json")
    with open(manifest_path) as handle:
        manifest = json.load(handle)
    text: Optional[str] = None
    if damage == "not-json":
        text = '{"files": [truncated'
    elif damage == "not-a-manifest":
        text = "[1, 2, 3]"
    elif damage == "future-schema":
        text = json.dumps(dict(manifest, schema_version=99))
    elif damage == "unsafe-path":
        manifest["files"].append({"path": "../../etc/passwd", "size": 1, "sha256": "0" * 64})
        text = json.dumps(manifest)
    os.unlink(manifest_path)
    if text is not None:
        with open(manifest_path, "w") as handle:
            handle.write(text)
    with pytest.raises(BundleError, match="manifest"), open_bundle(path):
        pass


def test_manifest_without_a_required_field_is_refused_at_open(good, tmp_path):
    snapshot, report, recording = good
    path = write_bundle(snapshot, report, recording, str(tmp_path / "out"))
    manifest_path = os.path.join(path, "manifest.json")
    with open(manifest_path) as handle:
        manifest = json.load(handle)
    del manifest["snapshot"]["collected_at"]
    with open(manifest_path, "w") as handle:
        json.dump(manifest, handle)
    with pytest.raises(BundleError) as refused, open_bundle(path):
        pass
    assert str(refused.value) == (
        f"refusing {path}: manifest.json: snapshot.collected_at: Field required"
    )


# -- opening: hostile archives -----------------------------------------------------------------


def hostile_tarball(good_tarball: str, dest: str, evil: tarfile.TarInfo, data: bytes = b"") -> str:
    """The good bundle with one hostile member added at the end."""
    with tarfile.open(good_tarball) as src, tarfile.open(dest, "w:gz") as dst:
        for member in src.getmembers():
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        evil.size = len(data) if evil.isfile() else 0
        dst.addfile(evil, io.BytesIO(data) if evil.isfile() else None)
    return dest


def _member(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    info.mode = 0o600
    return info


HOSTILE = {
    "dotdot": ("../evil", tarfile.REGTYPE, "", "'..'"),
    "inner-dotdot": ("{top}/root/../../../evil", tarfile.REGTYPE, "", "'..'"),
    "absolute": ("/etc/passwd", tarfile.REGTYPE, "", "absolute"),
    "symlink": ("{top}/root/sys/evil", tarfile.SYMTYPE, "/etc", "symbolic link"),
    "hardlink": ("{top}/root/sys/evil", tarfile.LNKTYPE, "/etc/passwd", "hard link"),
    "char-device": ("{top}/root/sys/evil", tarfile.CHRTYPE, "", "device file"),
    "block-device": ("{top}/root/sys/evil", tarfile.BLKTYPE, "", "device file"),
    "fifo": ("{top}/root/sys/evil", tarfile.FIFOTYPE, "", "FIFO"),
    "outside-root": ("elsewhere/evil", tarfile.REGTYPE, "", "outside the archive root"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_members_are_refused_by_name(good, tmp_path, case, system_tmp):
    snapshot, report, recording = good
    good_tarball = write_bundle(snapshot, report, recording, str(tmp_path / "out"), tarball=True)
    top = os.path.basename(good_tarball)[: -len(".tar.gz")]
    pattern, kind, linkname, why = HOSTILE[case]
    name = pattern.format(top=top)
    path = hostile_tarball(
        good_tarball, str(tmp_path / "hostile.tar.gz"), _member(name, kind, linkname), b"pwned\n"
    )
    before = all_paths(str(tmp_path))
    with pytest.raises(BundleError) as error, open_bundle(path):
        pass
    message = str(error.value)
    assert repr(name) in message and why in message
    assert message.count(path) == 1
    assert all_paths(str(tmp_path)) == before  # nothing written anywhere
    assert os.listdir(system_tmp) == []


def test_symlink_inside_a_directory_bundle_is_refused(good, tmp_path):
    snapshot, report, recording = good
    path = write_bundle(snapshot, report, recording, str(tmp_path / "out"))
    os.symlink("/etc/passwd", os.path.join(path, "root", "sys", "evil"))
    with pytest.raises(BundleError, match=r"evil.*symbolic link"), open_bundle(path):
        pass


@pytest.mark.parametrize("cut", [0.5, 0.9, 0.99])
def test_truncated_tarball_is_a_bundle_error(good, tmp_path, cut, system_tmp):
    snapshot, report, recording = good
    path = write_bundle(snapshot, report, recording, str(tmp_path / "out"), tarball=True)
    with open(path, "rb") as handle:
        data = handle.read()
    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(data[: int(len(data) * cut)])
    with pytest.raises(BundleError, match="truncated or corrupt"), open_bundle(str(truncated)):
        pass
    assert os.listdir(system_tmp) == []


def test_not_a_bundle_is_a_bundle_error(tmp_path):
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"this is not a tarball")
    with pytest.raises(BundleError), open_bundle(str(junk)):
        pass
    with pytest.raises(BundleError, match="no such bundle"), open_bundle(str(tmp_path / "nope")):
        pass
    with pytest.raises(BundleError, match="no manifest"), open_bundle(str(tmp_path)):
        pass
