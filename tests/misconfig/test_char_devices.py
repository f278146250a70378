"""hca.char_devices and its reader (ibdiag.sources.char_devices): the class directories the
kernel makes (``class/infiniband_verbs/uverbsN/ibdev``, ``class/infiniband_mad/umadN/{ibdev,
port}``), present, half-registered or absent, and ``module/`` saying whether the module is
loaded."""

from __future__ import annotations

import json
import os
import shutil

from snapshots import char_devices_of, device, devices, port, run, snapshot
from sysfs_builder import mlx5_node, write_char_devices, write_node

from ibdiag.facts.char_devices import MAD_CLASS, VERBS_CLASS, CharDevice, CharDevices
from ibdiag.model import Status
from ibdiag.sources.char_devices import read_char_devices
from ibdiag.sources.sysfs import SysfsReader
from ibdiag.thresholds import Thresholds


def _tree(tmp_path, count=2, **char):
    root = str(tmp_path / "sys")
    specs = mlx5_node(count)
    write_node(root, specs, char_devices=not char)
    if char:
        write_char_devices(root, specs, **char)
    return root


def test_the_reader_maps_each_entry_to_its_hca_and_port(tmp_path):
    found = read_char_devices(SysfsReader(_tree(tmp_path, issm=True)))
    assert found.verbs == [
        CharDevice(name="uverbs0", ibdev="mlx5_0"),
        CharDevice(name="uverbs1", ibdev="mlx5_1"),
    ]
    assert found.mad == [
        CharDevice(name="umad0", ibdev="mlx5_0", port=1),
        CharDevice(name="umad1", ibdev="mlx5_1", port=1),
    ]
    assert [d.name for d in found.issm] == ["issm0", "issm1"]
    assert found.missing == [] and found.modules is None and found.problems == []


def test_absent_classes_are_noted_with_what_module_says(tmp_path):
    root = _tree(tmp_path)
    shutil.rmtree(os.path.join(root, VERBS_CLASS))
    shutil.rmtree(os.path.join(root, "module", "ib_uverbs"))
    found = read_char_devices(SysfsReader(root))
    assert found.missing == [VERBS_CLASS]
    assert found.modules == {"ib_uverbs": False, "ib_umad": True}


def test_odd_entries_are_problems_of_that_entry(tmp_path):
    root = _tree(tmp_path)
    with open(os.path.join(root, MAD_CLASS, "umad1", "port"), "w") as handle:
        handle.write("one\n")
    os.remove(os.path.join(root, VERBS_CLASS, "uverbs1", "ibdev"))
    found = read_char_devices(SysfsReader(root))
    assert found.problems == ["uverbs1/ibdev: missing", "umad1/port: not a port number: 'one'"]
    assert found.verbs[1] == CharDevice(name="uverbs1") and found.mad[1].port is None


# -- the check -----------------------------------------------------------------------------


def test_a_healthy_node_passes_naming_its_devices():
    results = run("hca.char_devices", snapshot(devices(2)))
    assert [(r.target, r.status, r.message) for r in results] == [
        ("mlx5_0", Status.PASS, "uverbs0; umad0"),
        ("mlx5_1", Status.PASS, "uverbs1; umad1"),
    ]


def test_a_missing_uverbs_fails_naming_the_hca():
    built = devices(2)
    found = char_devices_of(built)
    found = found.model_copy(update={"verbs": found.verbs[:1]})
    results = run("hca.char_devices", snapshot(built, char_devices=found))
    assert [r.status for r in results] == [Status.PASS, Status.FAIL]
    assert results[1].message == (
        "no uverbs device names mlx5_1: verbs programs (NCCL, MPI, ib_write_bw) cannot open the HCA"
    )
    assert results[1].subject == "no uverbs" and "modprobe ib_uverbs" in (results[1].hint or "")


def test_a_missing_umad_warns_naming_the_port():
    built = [device("mlx5_0", ports=[port(1), port(2)])]
    found = char_devices_of(built)
    found = found.model_copy(update={"mad": found.mad[:1]})
    (result,) = run("hca.char_devices", snapshot(built, char_devices=found))
    assert result.status is Status.WARN
    assert result.message.startswith("no umad device for port 2: MAD tools")


def test_issm_is_required_only_when_the_profile_asks():
    snap = snapshot(devices(1))
    assert run("hca.char_devices", snap)[0].status is Status.PASS
    (result,) = run("hca.char_devices", snap, Thresholds(expect_issm=True))
    assert result.status is Status.WARN and "no issm device for port 1" in result.message


def test_ib_uverbs_not_loaded_fails_every_hca():
    found = CharDevices(missing=[VERBS_CLASS], modules={"ib_uverbs": False, "ib_umad": True},
                        mad=char_devices_of(devices(2)).mad)  # fmt: skip
    results = run("hca.char_devices", snapshot(devices(2), char_devices=found))
    assert [r.status for r in results] == [Status.FAIL, Status.FAIL]
    assert results[0].message.startswith("no class/infiniband_verbs (ib_uverbs is not loaded)")


def test_a_partial_capture_without_classes_or_modules_skips():
    found = CharDevices(missing=[VERBS_CLASS, MAD_CLASS])
    (result,) = run("hca.char_devices", snapshot(devices(1), char_devices=found))
    assert result.status is Status.SKIP and "a partial capture?" in result.message


def test_roce_ports_need_no_umad():
    built = [device("mlx5_0", ports=[port(1, link_layer="Ethernet")])]
    found = char_devices_of(built).model_copy(update={"mad": []})
    (result,) = run("hca.char_devices", snapshot(built, char_devices=found))
    assert result.status is Status.PASS


def test_a_tree_end_to_end_with_a_half_registered_hca(tmp_path, run_cli):
    root = _tree(tmp_path, count=3, skip=("uverbs2",))
    results = json.loads(run_cli("check", "--sysfs", root, "--json").stdout)["results"]
    mine = {r["target"]: r["status"] for r in results if r["check_id"] == "hca.char_devices"}
    assert mine == {"mlx5_0": "pass", "mlx5_1": "pass", "mlx5_2": "fail"}
