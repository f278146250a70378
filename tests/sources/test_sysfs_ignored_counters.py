"""An HCA matching ``ignore_hcas`` is listed with its identity but none of its counters is read
(issue 25): on a restricted PF (DGX/HGX B200/B300) every counter read makes the firmware refuse
an ACCESS_REG (PPCNT) and floods the kernel log (node_exporter #3434, #3823).

The proof is a tree where a read would show: the ignored HCA's counter files are FIFOs (a read
records "not a regular file" on the port), and a recording reader notes every path read."""

from __future__ import annotations

import json
import os
from typing import Dict, List

import pytest
from cli_node import Node

from ibdiag.collect import collect
from ibdiag.model import Snapshot
from ibdiag.sources import sysfs
from ibdiag.thresholds import Thresholds

IGNORED = "mlx5_1"


@pytest.fixture
def node(tmp_path, run_cli) -> Node:
    return Node(tmp_path, run_cli)


def trap_counters(node: Node, device: str) -> int:
    """Replace every counter file of ``device`` (port and device level) with a FIFO."""
    port = os.path.join(node.sys, "class", "infiniband", device, "ports", "1")
    trapped = 0
    for directory in (os.path.join(port, "counters"), os.path.join(port, "hw_counters")):
        for name in os.listdir(directory):
            path = os.path.join(directory, name)
            os.remove(path)
            os.mkfifo(path)
            trapped += 1
    hw = os.path.join(node.sys, "class", "infiniband", device, "hw_counters")
    os.makedirs(hw, exist_ok=True)
    os.mkfifo(os.path.join(hw, "num_page_faults"))
    return trapped + 1


def read(node: Node, ignore: List[str], recording=None) -> Snapshot:
    th = Thresholds(ignore_hcas=ignore)
    return collect(node.sys, node.proc, {"sysfs"}, recording=recording, thresholds=th)


def test_the_trap_shows_a_read(node):
    trap_counters(node, IGNORED)
    dev = read(node, []).device(IGNORED)
    assert any("not a regular file" in why for why in dev.ports[0].problems.values())
    assert "hw_counters/num_page_faults" in dev.problems


def test_ignored_hca_counters_are_never_read(node):
    assert trap_counters(node, IGNORED) > 10
    recording = sysfs.Recording()
    snap = read(node, ["mlx5_[1-9]"], recording)
    dev = snap.device(IGNORED)
    assert dev.problems == {} and dev.ports[0].problems == {}
    assert dev.hw_counters == {} and dev.ports[0].counters == {} and dev.ports[0].hw_counters == {}
    touched = [
        key
        for kind in ("files", "unreadable", "listings", "listing_errors", "exists")
        for key in getattr(recording, kind)
        if f"/{IGNORED}/" in key and "counters" in key
    ]
    assert touched == []
    # the other HCA's counters are read as before
    assert any("/mlx5_0/ports/1/counters/" in key for key in recording.files)
    assert snap.device("mlx5_0").ports[0].counters


def test_ignored_hca_keeps_its_identity_ports_and_pci(node):
    everything = read(node, [])
    ignored = read(node, [IGNORED])
    before, after = everything.device(IGNORED), ignored.device(IGNORED)
    for field in ("fw_ver", "node_guid", "board_id", "hca_type", "pci", "problems"):
        assert getattr(after, field) == getattr(before, field), field
    for field in ("state", "phys_state", "rate", "link_layer", "lid", "sm_lid", "netdev"):
        assert getattr(after.ports[0], field) == getattr(before.ports[0], field), field
    assert before.ports[0].counters and not after.ports[0].counters
    # the files whose read queries the firmware are not read either: hwmon (the MTMP
    # register), the partition table (MAD_IFC); the PCIe path (config space) still is
    assert set(before.facts) == {"hwmon", "pcie_path"} and set(after.facts) == {"pcie_path"}
    assert "pkeys" in before.ports[0].facts and "pkeys" not in after.ports[0].facts
    # every other device is read exactly as without the pattern
    assert ignored.device("mlx5_0") == everything.device("mlx5_0")


def test_no_pattern_reads_everything_as_before(node):
    plain = collect(node.sys, node.proc, {"sysfs"})
    with_empty = read(node, [])
    assert plain.devices == with_empty.devices


def _results(node: Node, *args: str) -> List[Dict[str, object]]:
    result = node.check("--json", *args)
    report = json.loads(result.stdout)
    return [
        {key: item[key] for key in ("check_id", "target", "status", "message")}
        for item in report["results"]
    ]


def test_check_output_is_unchanged_by_what_the_ignored_counters_hold(node):
    clean = node.check("--ignore-hca", IGNORED)
    clean_results = _results(node, "--ignore-hca", IGNORED)
    trap_counters(node, IGNORED)
    trapped = node.check("--ignore-hca", IGNORED)
    assert trapped.exit_code == clean.exit_code
    assert trapped.stdout == clean.stdout
    assert _results(node, "--ignore-hca", IGNORED) == clean_results
    assert not any(item["target"].startswith(IGNORED) for item in clean_results)


def test_check_output_is_what_reading_every_counter_gave(node, monkeypatch):
    """The same run before this change (every counter read, the ignored HCA's left ungraded)
    and after (the ignored HCA's not read): the same results, the same text."""
    now_text = node.check("--ignore-hca", IGNORED)
    now = _results(node, "--ignore-hca", IGNORED)
    plain = sysfs.read_devices
    monkeypatch.setattr(sysfs, "read_devices", lambda reader, ignored=None: plain(reader))
    before_text = node.check("--ignore-hca", IGNORED)
    assert _results(node, "--ignore-hca", IGNORED) == now
    assert (before_text.exit_code, before_text.stdout) == (now_text.exit_code, now_text.stdout)
