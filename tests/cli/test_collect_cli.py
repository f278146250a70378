"""`ibdiag collect`, `ibdiag report BUNDLE` and `ibdiag check --from BUNDLE` at the command line."""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import stat
import subprocess
import sys
import tarfile
import time

import pytest
from conftest import REPO
from stubs import write_procfs
from sysfs_builder import mlx5_node, write_node

PRIVATE_HOST = "secret-node-17"
PRIVATE_GUID = "b859:9f03:00d4:0a10"  # the builder's node_guid


@pytest.fixture
def node(tmp_path):
    """A 2-HCA node: sysfs from the builder, a procfs naming the host."""
    write_node(str(tmp_path / "sys"), mlx5_node(2))
    procfs = tmp_path / "proc"
    write_procfs(procfs, hostname=PRIVATE_HOST, boot_id="5f1e-boot", boot_time=None, modules=None)
    return tmp_path


def _collect(run_cli, node, *extra):
    out = node / "out"
    result = run_cli(
        "collect", "--level", "quick", "--sysfs", str(node / "sys"), "--procfs",
        str(node / "proc"), "-o", str(out), *extra,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    path = next(line for line in result.stdout.splitlines() if line.startswith("bundle: "))
    return path[len("bundle: ") :], result


def test_collect_writes_a_private_complete_directory_bundle(run_cli, node):
    path, result = _collect(run_cli, node)
    assert os.path.basename(path).startswith(f"ibdiag-{PRIVATE_HOST}-")
    assert result.stdout.splitlines()[0].startswith("IBDIAG OK")
    for name in ("report.json", "report.html", "summary.txt", "manifest.json"):
        assert os.path.isfile(os.path.join(path, name)), name
    state = os.path.join(
        path, "root", "sys", "class", "infiniband", "mlx5_0", "ports", "1", "state"
    )
    with open(state) as handle:
        assert handle.read() == "4: ACTIVE\n"
    for directory, _dirs, files in os.walk(path):
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700, directory
        for name in files:
            assert stat.S_IMODE(os.stat(os.path.join(directory, name)).st_mode) == 0o600


def _outcomes(report):
    return sorted((r["check_id"], r["target"], r["status"]) for r in report["results"])


def test_report_regrades_the_bundle_as_the_live_run_graded(run_cli, node):
    path, _ = _collect(run_cli, node)
    sysfs, procfs = str(node / "sys"), str(node / "proc")
    live = json.loads(run_cli("check", "--sysfs", sysfs, "--procfs", procfs, "--json").stdout)
    offline = json.loads(run_cli("report", path, "--json").stdout)
    assert _outcomes(offline) == _outcomes(live)
    assert offline["snapshot"]["host"] == PRIVATE_HOST
    assert offline["snapshot"]["sysfs_root"] == str(node / "sys")  # the original, not the bundle


def test_check_from_bundle_with_another_profile_changes_the_verdict(run_cli, node):
    path, _ = _collect(run_cli, node)
    assert run_cli("check", "--from", path).exit_code == 0
    regraded = run_cli("check", "--from", path, "--expect-hcas", "4")
    assert regraded.exit_code == 2
    assert "found 2 of 4 expected HCAs" in regraded.stdout


def test_tarball_is_private_with_a_matching_sha256(run_cli, node):
    path, _ = _collect(run_cli, node, "--tarball")
    assert path.endswith(".tar.gz")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with open(path + ".sha256") as handle:
        digest, name = handle.read().split()
    with open(path, "rb") as handle:
        assert hashlib.sha256(handle.read()).hexdigest() == digest
    assert name == os.path.basename(path)
    assert run_cli("report", path).exit_code == 0


def test_redacted_bundle_holds_no_hostname_or_guid_and_keeps_the_map_outside(run_cli, node):
    path, result = _collect(run_cli, node, "--tarball", "--redact", "all")
    assert PRIVATE_HOST not in os.path.basename(path)
    with tarfile.open(path) as archive:
        for member in archive.getmembers():
            assert PRIVATE_HOST not in member.name
            if member.isfile():
                data = archive.extractfile(member).read().decode("utf-8", "replace")
                assert PRIVATE_HOST not in data, member.name
                assert PRIVATE_GUID not in data, member.name
                assert "redaction-map" not in member.name
        manifest = json.load(archive.extractfile(next(
            m for m in archive.getmembers() if m.name.endswith("/manifest.json"))))  # fmt: skip
    assert manifest["redaction"]["replaced"]["hostnames"] >= 1
    assert manifest["redaction"]["replaced"]["guids"] >= 1
    mapping = path[: -len(".tar.gz")] + ".redaction-map.json"
    assert stat.S_IMODE(os.stat(mapping).st_mode) == 0o600
    with open(mapping) as handle:
        assert PRIVATE_HOST in handle.read()
    assert mapping in result.stdout
    regraded = run_cli("report", path)  # a redacted bundle still parses and grades
    assert regraded.exit_code == 0 and PRIVATE_HOST not in regraded.stdout


def test_bad_redact_kind_is_a_usage_error(run_cli, node):
    result = run_cli("collect", "--sysfs", str(node / "sys"), "--redact", "passwords")
    assert result.exit_code == 3 and "--redact" in result.stderr
    assert not (node / "out").exists()


def test_hostile_tarball_is_refused_exit_3_naming_the_member(run_cli, tmp_path):
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as archive:
        info = tarfile.TarInfo("../escape.txt")
        payload = b"gotcha"
        info.size = len(payload)
        archive.addfile(info, io.BytesIO(payload))
    result = run_cli("report", str(evil))
    assert result.exit_code == 3
    assert len(result.stderr.strip().splitlines()) == 1 and "../escape.txt" in result.stderr
    assert not (tmp_path.parent / "escape.txt").exists()


def test_truncated_tarball_is_exit_3(run_cli, node):
    path, _ = _collect(run_cli, node, "--tarball")
    with open(path, "rb") as handle:
        data = handle.read()
    cut = node / "cut.tar.gz"
    cut.write_bytes(data[: len(data) // 2])
    result = run_cli("report", str(cut))
    assert result.exit_code == 3 and result.stderr.startswith("ibdiag: error:")
    assert "Traceback" not in result.output
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.count(str(cut)) == 1  # the bundle is named once (issue 12 item 12)


def test_altered_bundle_is_refused_naming_the_file_unless_accepted(run_cli, node, tmp_path):
    path, _ = _collect(run_cli, node)
    root = os.path.join(path, "root", "sys", "class", "infiniband", "mlx5_1", "ports", "1")
    with open(os.path.join(root, "state"), "w") as handle:
        handle.write("1: DOWN\n")  # altered after the fact
    os.remove(os.path.join(root, "rate"))
    state = "root/sys/class/infiniband/mlx5_1/ports/1/state"
    refusal = (
        f"ibdiag: error: refusing {path}: 1 file differs from the sha256 in manifest.json: "
        f"{state} (--accept-altered grades it anyway)\n"
    )
    for argv in (["report", path], ["check", "--from", path]):
        result = run_cli(*argv)
        assert (result.exit_code, result.stdout, result.stderr) == (3, "", refusal), argv

    accepted = run_cli("report", path, "--accept-altered")
    assert accepted.exit_code == 2  # graded on what is there: mlx5_1 port 1 is DOWN
    assert accepted.stderr.splitlines() == [
        f"ibdiag: warning: {path}: missing: root/sys/class/infiniband/mlx5_1/ports/1/rate",
        f"ibdiag: warning: {path}: altered: {state}",
    ]
    verdict = accepted.stdout.splitlines()[-1]
    assert verdict.startswith("IBDIAG CRITICAL - ") and verdict.endswith(" (altered bundle)")

    as_json = run_cli("check", "--from", path, "--accept-altered", "--json")
    assert json.loads(as_json.stdout)["altered_files"] == [state]
    page = tmp_path / "page.html"
    assert run_cli("report", path, "--accept-altered", "-o", str(page)).exit_code == 2
    banner = page.read_text().split('<header class="banner', 1)[1].split("</header>", 1)[0]
    assert "(altered bundle)</h1>" in banner
    assert "1 file differs from the sha256 in its manifest.json" in banner
    assert f"<code>{state}</code>" in banner

    unaltered, _ = _collect(run_cli, node)  # a sound bundle: nothing said
    sound = run_cli("report", unaltered, "--accept-altered", "--json")
    assert sound.exit_code == 0 and sound.stderr == ""
    assert json.loads(sound.stdout)["altered_files"] == []
    live = run_cli("check", "--accept-altered", "--sysfs", str(node / "sys"))
    assert live.exit_code == 3 and "--accept-altered applies to a bundle" in live.stderr


def test_many_missing_files_are_summarised(run_cli, node):
    path, _ = _collect(run_cli, node)
    counters = os.path.join(path, "root", "sys", "class", "infiniband", "mlx5_0", "ports", "1")
    gone = sorted(
        os.path.join(directory, name)
        for directory, _dirs, files in os.walk(counters)
        for name in files
    )
    assert len(gone) > 12
    for full in gone:
        os.remove(full)
    result = run_cli("report", path)
    lines = result.stderr.splitlines()
    assert len(lines) == 11, lines
    assert all(line.startswith(f"ibdiag: warning: {path}: missing: root/") for line in lines[:10])
    assert lines[10] == (
        f"ibdiag: warning: {path}: and {len(gone) - 10} more missing, altered or unlisted files"
    )
    assert result.exit_code in (1, 2)  # graded on what is there


def test_sigterm_while_collecting_leaves_nothing_that_looks_complete(node, tmp_path):
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for tool in ("perfquery", "ethtool", "dmesg", "journalctl", "ibstat", "ibv_devinfo"):
        script = stubs / tool
        script.write_text("#!/bin/sh\nsleep 30\n")
        script.chmod(0o755)
    out = tmp_path / "out"
    env = {**os.environ, "PATH": f"{stubs}:/usr/bin:/bin"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ibdiag", "collect", "--sysfs", str(node / "sys"), "--procfs",
         str(node / "proc"), "-o", str(out), "--tarball"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    time.sleep(2.0)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 3, stderr
    leftovers = [name for name in os.listdir(out)] if out.exists() else []
    assert not [name for name in leftovers if name.startswith("ibdiag-")], leftovers
    marker = subprocess.run(["pgrep", "-f", f"{stubs}"], capture_output=True, text=True)
    assert marker.stdout.strip() == "", "a stub command outlived ibdiag"


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGALRM", "SIGHUP", "SIGINT"])
def test_a_stop_signal_during_the_commands_kills_them_and_exits_unknown(node, tmp_path, stop):
    """Slurm stops a hook with SIGTERM, NHC's watchdog starts with SIGALRM, a lost terminal
    sends SIGHUP: each unwinds like Ctrl-C and no command ibdiag started outlives it."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    started = tmp_path / "started"
    for tool in ("perfquery", "ethtool", "dmesg", "journalctl", "ibstat", "ibv_devinfo"):
        script = stubs / tool
        script.write_text(f"#!/bin/sh\ntouch {started}\ntrap '' TERM\nsleep 30\n")
        script.chmod(0o755)
    env = {**os.environ, "PATH": f"{stubs}:/usr/bin:/bin"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ibdiag", "check", "--level", "standard", "--sysfs",
         str(node / "sys"), "--procfs", str(node / "proc"), "--deadline", "60",
         "--command-timeout", "60"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        end = time.monotonic() + 20
        while not started.exists() and time.monotonic() < end:
            time.sleep(0.05)
        assert started.exists(), "no command started"
        time.sleep(0.5)
        proc.send_signal(getattr(signal, stop))
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (proc.returncode, stdout, stderr) == (3, "", "\nibdiag: interrupted\n")
    marker = subprocess.run(["pgrep", "-f", f"{stubs}"], capture_output=True, text=True)
    assert marker.stdout.strip() == "", "a stub command outlived ibdiag"


def test_report_renders_a_saved_report_or_snapshot_json_as_html(run_cli, node, tmp_path):
    sysfs, procfs = str(node / "sys"), str(node / "proc")
    saved = tmp_path / "saved.json"
    assert run_cli("check", "--sysfs", sysfs, "--procfs", procfs, "--expect-hcas", "3",
                   "-o", str(saved)).exit_code == 2  # fmt: skip
    page = tmp_path / "page.html"
    result = run_cli("report", str(saved), "--format", "html", "-o", str(page))
    assert result.exit_code == 2  # graded with the thresholds the report recorded
    assert "IBDIAG CRITICAL" in page.read_text()
    snapshot = tmp_path / "snap.json"
    assert (
        run_cli("snapshot", "--sysfs", sysfs, "--procfs", procfs, "-o", str(snapshot)).exit_code
        == 0
    )
    assert run_cli("report", str(snapshot)).exit_code == 0
    broken = tmp_path / "broken.json"
    broken.write_text('{"snapshot": ')
    result = run_cli("report", str(broken))
    assert result.exit_code == 3 and "not valid JSON" in result.stderr
