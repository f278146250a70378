"""Where ibdiag writes what a user points it at: replace regular files atomically, write
through symlinks, write into devices and FIFOs, never replace them (issue 12 item 1)."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
import threading

import pytest
from conftest import REPO, SCENARIOS_DIR

from ibdiag.write_files import atomic_file, write_output

GOOD = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-good", "root", "sys")


def _char_device(path) -> str:
    """A device node like /dev/null (major 1, minor 3) in a temp dir: safe to test against."""
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    return str(path)


def _read_fifo_in_background(path) -> dict:
    got: dict = {}

    def read() -> None:
        with open(path, "rb") as handle:
            got["data"] = handle.read()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    got["thread"] = reader
    return got


# -- the helper ----------------------------------------------------------------------------------


def test_a_regular_file_is_replaced_atomically_with_its_mode(tmp_path):
    path = tmp_path / "report.txt"
    path.write_text("old\n")
    before = os.stat(path).st_ino
    write_output(str(path), "new\n", mode=0o600)
    assert path.read_text() == "new\n"
    assert os.stat(path).st_ino != before  # a new file renamed over the old one
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert sorted(os.listdir(tmp_path)) == ["report.txt"]  # no temp file left


def test_a_killed_run_s_old_temp_file_is_removed_by_the_next_write(tmp_path):
    old, young = tmp_path / ".ibdiag-killed.tmp", tmp_path / ".ibdiag-running.tmp"
    for leftover in (old, young):
        leftover.write_text("half a file")
    os.utime(old, (0, os.stat(old).st_mtime - 2 * 3600))  # a run killed two hours ago
    write_output(str(tmp_path / "ibdiag.prom"), "ibdiag_verdict 0\n")
    assert sorted(os.listdir(tmp_path)) == [".ibdiag-running.tmp", "ibdiag.prom"]


def test_a_symlink_stays_and_its_target_is_written(tmp_path):
    real = tmp_path / "elsewhere" / "state.json"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "state.json"
    link.symlink_to(real)
    write_output(str(link), "new")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "new"


def test_a_dangling_symlink_creates_its_target(tmp_path):
    real = tmp_path / "target.json"
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_output(str(link), "made")
    assert link.is_symlink() and real.read_text() == "made"


def test_a_device_is_written_into_never_replaced(tmp_path):
    null = _char_device(tmp_path / "null")
    write_output(null, "x" * 100_000)
    assert stat.S_ISCHR(os.stat(null).st_mode)
    assert sorted(os.listdir(tmp_path)) == ["null"]


def test_a_fifo_with_a_reader_gets_the_text(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = _read_fifo_in_background(fifo)
    # the reader opens first, or our open sees no reader: retry until it is there
    for _ in range(200):
        try:
            write_output(str(fifo), "hello fifo\n")
            break
        except OSError as exc:
            assert exc.errno == errno.ENXIO
            got["thread"].join(0.01)
    got["thread"].join(5)
    assert got["data"] == b"hello fifo\n"
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_fifo_without_a_reader_is_an_error_not_a_hang(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError) as raised:
        write_output(str(fifo), "nobody listens")
    assert raised.value.errno == errno.ENXIO and "no reader" in str(raised.value)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_directory_is_an_error(tmp_path):
    with pytest.raises(IsADirectoryError):
        write_output(str(tmp_path), "text")


def test_bytes_are_written_as_they_are(tmp_path):
    path = tmp_path / "bundle.bin"
    data = bytes(range(256)) * 3
    write_output(str(path), data, mode=0o600)
    assert path.read_bytes() == data
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


# -- the atomic writer itself ----------------------------------------------------------------------


def test_atomic_file_appears_whole_or_not_at_all(tmp_path):
    path = tmp_path / "out.tar.gz"
    with pytest.raises(KeyboardInterrupt):
        with atomic_file(str(path), mode=0o600) as out:
            out.write(b"half of it")
            assert not path.exists()  # nothing under the final name while it is written
            raise KeyboardInterrupt
    assert os.listdir(tmp_path) == []  # and no temp file left
    with atomic_file(str(path), mode=0o600) as out:
        out.write(b"all of it")
    assert path.read_bytes() == b"all of it"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert os.listdir(tmp_path) == ["out.tar.gz"]


@pytest.mark.parametrize("there", ["file", "dangling symlink", "symlink to a file"])
def test_atomic_file_without_replace_never_replaces_nor_follows(tmp_path, there):
    """A bundle is linked into place: whatever is already under its name - a file, or a link
    someone left in a shared directory - stays as it was, and nothing is written through it."""
    path = tmp_path / "ibdiag-node-1.tar.gz"
    aim = tmp_path / "elsewhere"
    if there == "file":
        path.write_bytes(b"an earlier bundle")
    elif there == "dangling symlink":
        path.symlink_to(aim)
    else:
        aim.write_bytes(b"someone's file")
        path.symlink_to(aim)
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(FileExistsError):
        with atomic_file(str(path), mode=0o600, replace=False) as out:
            out.write(b"new bundle")
    assert sorted(os.listdir(tmp_path)) == before  # no temp file left, nothing created
    if there == "file":
        assert path.read_bytes() == b"an earlier bundle"
    elif there == "dangling symlink":
        assert path.is_symlink() and not aim.exists()
    else:
        assert aim.read_bytes() == b"someone's file"


# -- through the command line ----------------------------------------------------------------------


def _ibdiag(*args: str, **kwargs) -> subprocess.CompletedProcess:
    streams = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **kwargs}
    return subprocess.run(
        [sys.executable, "-m", "ibdiag", *args],
        cwd=REPO,
        text=True,
        timeout=60,
        check=False,
        **streams,
    )


def test_check_o_device_leaves_the_device_a_device(tmp_path):
    null = _char_device(tmp_path / "null")
    done = _ibdiag("check", "--sysfs", GOOD, "-o", null)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert stat.S_ISCHR(os.stat(null).st_mode)


def test_check_o_dev_stdout_writes_to_stdout_through_a_pipe():
    done = _ibdiag("check", "--sysfs", GOOD, "--json", "-o", "/dev/stdout")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["verdict"] == "OK"
    assert os.path.islink("/dev/stdout")


def test_check_o_dev_stdout_into_a_redirected_file_keeps_the_file(tmp_path):
    out = tmp_path / "out.json"
    with open(out, "w") as handle:
        done = _ibdiag("check", "--sysfs", GOOD, "--json", "-o", "/dev/stdout", stdout=handle)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["verdict"] == "OK"
    assert sorted(os.listdir(tmp_path)) == ["out.json"]


def test_o_dash_is_stdout(run_cli, tmp_path):
    result = run_cli("check", "--sysfs", GOOD, "--json", "-o", "-")
    assert result.exit_code == 0 and json.loads(result.stdout)["verdict"] == "OK"
    assert not (tmp_path / "-").exists() and not os.path.exists(os.path.join(REPO, "-"))
    snapshot = run_cli("snapshot", "--sysfs", GOOD, "-o", "-")
    assert snapshot.exit_code == 0 and json.loads(snapshot.stdout)["devices"]


def test_snapshot_state_and_textfile_follow_symlinks(run_cli, tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    links = {}
    for name in ("snap.json", "state.json", "ibdiag.prom"):
        (tmp_path / name).symlink_to(real / name)
        links[name] = tmp_path / name
    assert run_cli("snapshot", "--sysfs", GOOD, "-o", str(links["snap.json"])).exit_code == 0
    assert run_cli("check", "--sysfs", GOOD, "--state", str(links["state.json"])).exit_code == 0
    done = run_cli("export", "--sysfs", GOOD, "--textfile", str(links["ibdiag.prom"]))
    assert done.exit_code == 0, done.stderr
    for name, link in links.items():
        assert link.is_symlink(), name
        assert (real / name).stat().st_size > 0, name


def test_a_fifo_with_no_reader_is_one_line_exit_3(run_cli, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    result = run_cli("check", "--sysfs", GOOD, "-o", str(fifo))
    assert result.exit_code == 3
    assert result.stderr == f"ibdiag: error: cannot write {fifo}: a FIFO with no reader\n"
