"""Files in a --sysfs/--procfs tree that are not what they seem, end to end (issue 12, items 3-4).

- A root-only file (here ``etc/shadow`` beside the tree, mode 0600) linked into the tree as
  ``fw_ver``, ``state``, ``rate``, ``numa_node``, ``mtu``, ``device/...`` or the hostname used to
  appear in ``check --json`` and in the support bundle that goes to a vendor. Now neither its
  contents nor the names in a linked directory appear in any output or any bundle member; the
  refusal is recorded where the attribute would be.
- A FIFO in place of an attribute or of ``/proc/sys/kernel/hostname`` used to block the run
  for ever; it is recorded and the run ends (as a separate process, so a hang fails the test).
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import stubs as S
from sysfs_builder import mlx5_node, write_node

SECRET = "SECRETc0ffee"  # noqa: S105 - stands in for a shadow hash


@pytest.fixture
def tree(tmp_path):
    sysfs = tmp_path / "sys"
    write_node(str(sysfs), mlx5_node(2))
    procfs = S.write_procfs(tmp_path / "proc", boot_time=time.time() - 3600)
    etc = tmp_path / "etc"
    etc.mkdir()
    shadow = etc / "shadow"
    shadow.write_text(f"root:{SECRET}:19000:0:99999:7:::\n")
    shadow.chmod(0o600)
    host = tmp_path / "host" / "0000:77:00.0"  # a directory named like a PCI function
    host.mkdir(parents=True)
    for name in ("numa_node", "vendor", "current_link_speed", "operstate", "mtu"):
        (host / name).write_text(f"{SECRET}\n")
    (host / SECRET).write_text("1\n")  # a name that must not leak either
    return {"sysfs": str(sysfs), "procfs": procfs, "shadow": str(shadow), "host": str(host)}


def replace_with_link(path: str, target: str) -> None:
    os.remove(path)
    os.symlink(target, path)


def device_dir(tree, name: str = "mlx5_0") -> str:
    return os.path.realpath(os.path.join(tree["sysfs"], "class", "infiniband", name))


LINKED_FILES = {
    "fw_ver": ("fw_ver",),
    "state": ("ports", "1", "state"),
    "rate": ("ports", "1", "rate"),
    "counter": ("ports", "1", "counters", "symbol_error"),
    "numa_node": ("device", "numa_node"),
    "mtu": ("device", "net", "ib0", "mtu"),
}


def _outputs_and_bundle(tree, tmp_path, run_cli):
    """Everything the CLI writes for this tree: check --json (quick), collect's bundle (every
    member's name and contents) and report --json of that bundle."""
    common = ["--sysfs", tree["sysfs"], "--procfs", tree["procfs"]]
    check = run_cli("check", "--json", *common)
    assert check.exit_code in (0, 1, 2), check.stderr
    out = tmp_path / "out"
    out.mkdir()
    empty = tmp_path / "no-tools"
    empty.mkdir(exist_ok=True)
    collect = run_cli(
        "collect", "--tarball", "-o", str(out), *common, "--deadline", "5",
        env={"PATH": str(empty)},
    )  # fmt: skip
    assert collect.exit_code == 0, collect.stderr
    [bundle] = glob.glob(str(out / "*.tar.gz"))
    members = []
    with tarfile.open(bundle) as tar:
        for member in tar:
            handle = tar.extractfile(member) if member.isfile() else None
            members.append((member.name, handle.read() if handle else b""))
    report = run_cli("report", "--json", bundle)
    assert report.exit_code in (0, 1, 2), report.stderr
    return check.stdout, members, report.stdout


def _assert_no_secret(check_out, members, report_out):
    assert SECRET not in check_out
    assert SECRET not in report_out
    leaked = [name for name, data in members if SECRET in name or SECRET.encode() in data]
    assert leaked == []


@pytest.mark.parametrize("attribute", sorted(LINKED_FILES))
def test_a_root_only_file_linked_in_is_in_no_output_and_no_bundle(
    tree, tmp_path, run_cli, attribute
):
    path = os.path.join(device_dir(tree), *LINKED_FILES[attribute])
    replace_with_link(os.path.realpath(path), tree["shadow"])
    check_out, members, report_out = _outputs_and_bundle(tree, tmp_path, run_cli)
    _assert_no_secret(check_out, members, report_out)
    refused = f"refused: resolves outside {tree['sysfs']} (to {tree['shadow']})"
    assert refused in check_out and refused in report_out
    manifest = json.loads(next(data for name, data in members if name.endswith("manifest.json")))
    assert refused in manifest["unreadable"].values()


def test_a_device_link_to_a_directory_outside_is_in_no_output_and_no_bundle(
    tree, tmp_path, run_cli
):
    replace_with_link(os.path.join(device_dir(tree), "device"), tree["host"])
    check_out, members, report_out = _outputs_and_bundle(tree, tmp_path, run_cli)
    _assert_no_secret(check_out, members, report_out)
    [dev] = [d for d in json.loads(check_out)["snapshot"]["devices"] if d["name"] == "mlx5_0"]
    assert dev["pci"]["address"] == "0000:77:00.0" and dev["pci"]["numa_node"] is None
    assert dev["pci"]["problems"]["numa_node"].startswith("refused: resolves outside")


def test_a_hostname_linked_out_of_procfs_is_in_no_output_and_no_bundle(tree, tmp_path, run_cli):
    replace_with_link(os.path.join(tree["procfs"], "sys", "kernel", "hostname"), tree["shadow"])
    check_out, members, report_out = _outputs_and_bundle(tree, tmp_path, run_cli)
    _assert_no_secret(check_out, members, report_out)
    problems = json.loads(check_out)["snapshot"]["problems"]
    assert problems["procfs:sys/kernel/hostname"].startswith("refused: resolves outside")


def _check_in_a_process(tree, *extra: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "ibdiag", "check", "--json"]
    argv += ["--sysfs", tree["sysfs"], "--procfs", tree["procfs"], *extra]
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, cwd=S.REPO
    )


@pytest.mark.parametrize("where", ["state", "hostname"])
def test_a_fifo_in_the_tree_is_recorded_and_the_run_ends(tree, where):
    if where == "state":
        path = Path(device_dir(tree), "ports", "1", "state")
    else:
        path = Path(tree["procfs"], "sys", "kernel", "hostname")
    path.unlink()
    os.mkfifo(path)
    done = _check_in_a_process(tree)
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    report = json.loads(done.stdout)
    fifo = "not a regular file (a FIFO): not read"
    if where == "state":
        assert done.returncode == 1  # link.state: port state unreadable (warn)
        port = report["snapshot"]["devices"][0]["ports"][0]
        assert port["problems"] == {"state": fifo}
    else:
        assert done.returncode == 0
        assert report["snapshot"]["problems"] == {"procfs:sys/kernel/hostname": fifo}
