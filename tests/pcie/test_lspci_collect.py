"""pci.acs end to end at level standard: the sysfs paths plan ``lspci -vvv -s <BDF>`` for the
bridges between the GPU and the HCA, a stub lspci prints the real captures (tests/captures/
lspci: a switch downstream port with ACS redirect on; access denied), pci.acs warns naming the
bridge, and a bundle replays and regrades the same.

The GPUs' paths reach the Snapshot through ``ibdiag.sources.topology.read_gpu_paths`` in
``collect.read_node`` (the lead's hook); ``_with_gpu_paths`` stands in for that hook here."""

from __future__ import annotations

import json
import os

import pytest
import stubs as S
from conftest import TESTS_DIR
from pcie_tree import behind_switch, switch_of, write_gpu, write_path
from stubs import write_procfs
from sysfs_builder import mlx5_node, write_node

import ibdiag.collect as collect_module
from ibdiag.bundle.opener import open_bundle
from ibdiag.bundle.replay import replay
from ibdiag.bundle.write import write_bundle
from ibdiag.collect import collect
from ibdiag.grade import grade
from ibdiag.registry import load_registry
from ibdiag.sources.sysfs import Recording
from ibdiag.sources.topology import read_gpu_paths
from ibdiag.thresholds import Thresholds

CAPTURES = os.path.join(TESTS_DIR, "captures", "lspci")
REDIRECT = os.path.join(CAPTURES, "kvm-2023-amd-matisse-switch-downstream-acs-redirect.txt")
DENIED = os.path.join(CAPTURES, "kvm-2023-amd-matisse-gpp-bridge-access-denied.txt")
NEEDS = {"sysfs", "topology", "lspci"}


class _Files:
    """``collect.read_node``'s answer with the GPUs' paths in the node's facts, as the hook
    will give them (live: ``snapshot``; a replayed bundle: ``_asdict``)."""

    def __init__(self, node, reader):
        self.node = node
        self.facts = read_gpu_paths(reader, node.gpus)

    def __getattr__(self, name):
        return getattr(self.node, name)

    def _asdict(self):
        return {**self.node._asdict(), "facts": self.facts}

    def snapshot(self, **kwargs):
        return self.node.snapshot(**kwargs).model_copy(update={"facts": self.facts})


@pytest.fixture
def _with_gpu_paths(monkeypatch):
    read_node = collect_module.read_node

    def with_paths(sys_reader, proc_reader, needs):
        return _Files(read_node(sys_reader, proc_reader, needs), sys_reader)

    monkeypatch.setattr(collect_module, "read_node", with_paths)


def _node(tmp_path, downstream):
    sysfs = str(tmp_path / "sys")
    hcas = behind_switch(mlx5_node(1))
    write_node(sysfs, hcas)
    write_path(sysfs, hcas[0])
    write_gpu(sysfs, switch_of(hcas[0]), "0000:13:00.0")
    stubs = S.StubBin(tmp_path / "stubs")
    stubs.add("lspci", S.by_args({
        "-vvv -s 0000:11:00.0": S.prints(downstream),
        "-vvv -s 0000:12:01.0": S.prints(DENIED),
    }))  # fmt: skip
    options = {"path": stubs.path, "timeout_s": 10.0, "deadline_s": 30.0}
    return sysfs, write_procfs(tmp_path / "proc"), options, stubs


@pytest.mark.usefixtures("_with_gpu_paths")
def test_acs_redirect_on_the_hcas_switch_port_warns_and_the_bundle_regrades(tmp_path, run_cli):
    sysfs, procfs, options, stubs = _node(tmp_path, REDIRECT)
    recording = Recording()
    live = collect(sysfs, procfs, NEEDS, options, recording=recording)
    assert sorted(stubs.calls()) == ["lspci -vvv -s 0000:11:00.0", "lspci -vvv -s 0000:12:01.0"]
    report = grade(live, load_registry(), Thresholds(), "standard")
    acs = [r for r in report.results if r.check_id == "pci.acs"]
    assert [(r.target, r.status.value) for r in acs] == [("mlx5_0", "warn")]
    assert (
        "bridge 0000:11:00.0 between mlx5_0 (0000:12:00.0) and GPU 0000:13:00.0" in acs[0].message
    )
    assert "SrcValid+ ReqRedir+ CmpltRedir+" in acs[0].message
    bundle = write_bundle(live, report, recording, str(tmp_path / "out"), tarball=True)
    with open_bundle(bundle) as opened:
        assert opened.problems == []
        replayed = replay(opened)
    assert replayed.facts["lspci_acs"] == live.facts["lspci_acs"]
    regraded = json.loads(run_cli("report", bundle, "--format", "json").stdout)
    again = [(r["target"], r["status"], r["message"]) for r in regraded["results"]
             if r["check_id"] == "pci.acs"]  # fmt: skip
    assert again == [(r.target, r.status.value, r.message) for r in acs]


@pytest.mark.usefixtures("_with_gpu_paths")
def test_denied_everywhere_is_a_skip_naming_root(tmp_path):
    sysfs, procfs, options, _ = _node(tmp_path, DENIED)
    live = collect(sysfs, procfs, NEEDS, options)
    report = grade(live, load_registry(), Thresholds(), "standard")
    acs = [r for r in report.results if r.check_id == "pci.acs"]
    assert [r.status.value for r in acs] == ["skip"] and "needs root" in acs[0].message
