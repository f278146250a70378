"""The fleet's switch blame end to end on a simulated fabric (tests/fabric_sim.py: ibsim +
opensm): eight nodes, each its own host name (procfs), sysfs tree and simulated HCA, run
``ibdiag check --level standard --json --state`` one after another; errors injected on the far
ends of their cables; ``ibdiag.fleet`` reads the per-node reports.

The fabric: ``spine01`` with ``leaf01`` (gpu001-gpu004 on ports 1-4) and ``leaf02`` (gpu005-
gpu008 on ports 1-4) beneath it, and the subnet manager's host ``ufm01`` on the spine: opensm
attaches to an HCA of its own, as on a real fabric - tools run as the HCA opensm is attached to
made it exit (SIGSEGV) under ibsim 0.10, and the nodes' tools stay apart from it. Each node is
one single-port ConnectX-6 ``mlx5_0`` whose port the kernel shows ACTIVE at 4X QDR (ibsim's
fastest; ``--expect-rate 40`` says so, as a QDR fabric's admin would), and runs alone: one
node's tools stay well under ibsim's limit of 10 attached clients.

Healthy looks like: the baseline fleet (every node run once, nothing injected) is OK with no
switch listed. Then symbol errors / receive errors on three of leaf01's four node ports and on
one of leaf02's: leaf01 is the suspect switch (three nodes fail on it: the default k), its
three nodes are switch-suspect rather than drained, leaf02 is listed but not suspect, and its
one node (gpu006) is drained for its cable ``mlx5_0:1<->leaf02/2``; the four other nodes are
OK, and nothing else (outliers, drift, rails) is flagged. The injections are undone in
``finally``; the harness stops the fabric.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, NamedTuple, Tuple

import pytest
from fabric_sim import (
    SIM_CA,
    Cable,
    Fabric,
    Hca,
    Switch,
    Topology,
    parse_dotted,
    sim_mtu_config,
)
from sysfs_builder import mlx5_node, write_node

from ibdiag.fleet.analyze import analyze
from ibdiag.fleet.node import NodeSummary, summarize
from ibdiag.fleet.report import FleetReport, FleetSettings, NodeGroup
from ibdiag.hostlist import expand

SPINE, LEAF1, LEAF2 = "spine01", "leaf01", "leaf02"
SM_HCA = "ufm01-mlx5_0"
DEVICE = "mlx5_0"
HOSTS = [f"gpu{number:03d}" for number in range(1, 9)]
# host -> (leaf, port): four nodes on each leaf
CABLED: Dict[str, Tuple[str, int]] = {
    host: (LEAF1 if index < 4 else LEAF2, index % 4 + 1) for index, host in enumerate(HOSTS)
}
# (leaf, port) -> (PortCounters field, value): counter increases since the baseline run
INJECTED: Dict[Tuple[str, int], Tuple[str, int]] = {
    (LEAF1, 1): ("SymbolErrorCounter", 500),
    (LEAF1, 2): ("PortRcvErrors", 300),
    (LEAF1, 3): ("SymbolErrorCounter", 1200),
    (LEAF2, 2): ("SymbolErrorCounter", 700),
}
SWITCH_SUSPECT = ["gpu001", "gpu002", "gpu003"]
DRAINED = "gpu006"
HEALTHY = ["gpu004", "gpu005", "gpu007", "gpu008"]
DRAIN_REASON = "ibdiag: mlx5_0:1<->leaf02/2 counters.partner symbol_error"
DEADLINE_S = 20.0


def _hca(host: str) -> str:
    return f"{host}-{DEVICE}"


TOPOLOGY = Topology(
    [
        Hca(SM_HCA, 1, "ufm01 mlx5_0"),  # first HCA cabled at port 1: opensm attaches here
        Switch(SPINE, 36, "MF0;spine01:MQM9700/U1"),
        Switch(LEAF1, 36, "MF0;leaf01:MQM9700/U1"),
        Switch(LEAF2, 36, "MF0;leaf02:MQM9700/U1"),
        *(Hca(_hca(host), 1, f"{host} {DEVICE}") for host in HOSTS),
    ],
    [
        Cable(SM_HCA, 1, SPINE, 36),
        Cable(LEAF1, 33, SPINE, 1),
        Cable(LEAF2, 33, SPINE, 2),
        *(Cable(_hca(host), 1, leaf, port) for host, (leaf, port) in CABLED.items()),
    ],
)


class SimNode:
    """One node: its procfs (host name, boot id, kernel), its sysfs tree with ``mlx5_0``
    played by its simulated HCA (PATH shims for smpquery and perfquery), its state file."""

    def __init__(self, root: Path, host: str, index: int, fabric: Fabric) -> None:
        self.host = host
        self.fabric = fabric
        self.sysfs = root / "sys"
        guid = f"0c42:a103:00{index:02x}:1000"
        write_node(
            str(self.sysfs),
            mlx5_node(1, port=dict(rate="40 Gb/sec (4X QDR)"), node_guid=guid),
        )
        self.procfs = root / "proc"
        for rel, text in {
            "sys/kernel/hostname": host,
            "sys/kernel/random/boot_id": f"5c1f2f6e-7a0e-4c59-9a0b-{index:012x}",
            "sys/kernel/osrelease": "5.15.0-119-generic",
            "stat": "cpu  1 2 3 4\nbtime 1700000000\n",
            "modules": "mlx5_ib 1 0 - Live 0x0\nmlx5_core 2 1 mlx5_ib, Live 0x0\n",
        }.items():
            path = self.procfs / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text + "\n")
        self.state = root / "state.json"
        shims = fabric.shim_dir(root / "bin", {DEVICE: _hca(host)}, tools=("smpquery", "perfquery"))
        self.env = dict(os.environ, PATH=f"{shims}{os.pathsep}{os.environ.get('PATH', '')}")

    def check(self, reports: Path) -> dict:
        """``ibdiag check --level standard --json --state``; the report also goes to
        ``reports/<host>.json``, as ``ibdiag fleet run`` writes it."""
        argv = [sys.executable, "-m", "ibdiag", "check", "--level", "standard", "--json"]
        argv += ["--sysfs", str(self.sysfs), "--procfs", str(self.procfs)]
        argv += ["--state", str(self.state), "--expect-rate", "40"]
        argv += ["--deadline", str(DEADLINE_S)]
        # the simulator's links all run at MTU 2048 (fabric_sim.SIM_IB_MTU): expect that
        argv += ["--config", str(sim_mtu_config(self.state.parent / "sim-mtu.toml"))]
        done = subprocess.run(
            argv, env=self.env, capture_output=True, text=True, timeout=120, check=False
        )
        assert done.stdout, done.stderr
        report = json.loads(done.stdout)
        assert report["snapshot"]["host"] == self.host, report["snapshot"]["host"]
        reports.mkdir(exist_ok=True)
        (reports / f"{self.host}.json").write_text(done.stdout)
        return report


def switch_guid(fabric: Fabric, host: str) -> int:
    """The node GUID of the switch at the far end of ``host``'s HCA, as the fabric says."""
    done = fabric.run(_hca(host), "smpquery", "-C", SIM_CA, "-P", "1", "-D", "nodeinfo", "0,1")
    assert done.returncode == 0, done.stderr
    return int(parse_dotted(done.stdout)["Guid"], 16)


class FleetRuns(NamedTuple):
    baseline: Path  # <host>.json of the first runs (nothing injected)
    reports: Path  # <host>.json of the runs after the injections
    guids: Dict[str, int]  # leaf -> its node GUID


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> FleetRuns:
    root = tmp_path_factory.mktemp("fleet-fabric")
    baseline, reports = root / "baseline", root / "reports"
    with Fabric(root / "fabric", TOPOLOGY) as fabric:
        nodes = [SimNode(root / host, host, i, fabric) for i, host in enumerate(HOSTS)]
        guids = {LEAF1: switch_guid(fabric, "gpu001"), LEAF2: switch_guid(fabric, "gpu005")}
        for node in nodes:  # one after another: ibsim takes 10 clients at most
            node.check(baseline)
        try:
            for (leaf, port), (field, value) in INJECTED.items():
                fabric.set_counter(leaf, port, field, value)
            for node in nodes:
                node.check(reports)
        finally:
            for (leaf, port), (field, _) in INJECTED.items():
                fabric.set_counter(leaf, port, field, 0)
        assert all(p.poll() is None for p in fabric._opensm), "opensm died"
    return FleetRuns(baseline, reports, guids)


def summaries(directory: Path) -> List[NodeSummary]:
    return [
        summarize(json.loads(path.read_text()), str(path))
        for path in sorted(directory.glob("*.json"))
    ]


def hosts_of(groups: List[NodeGroup]) -> List[str]:
    return sorted(host for group in groups for host in expand(group.nodes))


def test_the_baseline_fleet_is_ok_and_blames_no_switch(runs):
    nodes = summaries(runs.baseline)
    assert sorted(node.host for node in nodes) == HOSTS
    report = analyze(nodes, FleetSettings())
    assert report.verdict == "OK", (report.verdict_reason, report.drain, report.warnings)
    assert report.counts["OK"] == len(HOSTS)
    assert report.switches == [] and report.drain == [] and report.switch_suspect == []


def test_every_node_port_sees_its_leaf_at_the_far_end(runs):
    for node in summaries(runs.reports):
        (port,) = [port for port in node.ports if port.target == f"{DEVICE}:1"]
        leaf, number = CABLED[node.host]
        assert port.far_end is not None, node.host
        assert (port.far_end.peer_name, port.far_end.peer_port) == (leaf, number), port
        assert port.far_end.peer_type == "Switch"
        assert int(port.far_end.peer_guid or "0", 16) == runs.guids[leaf], port.far_end
        assert port.rail == 0


def assert_fabric_blame(report: FleetReport, guids: Dict[str, int]) -> None:
    """leaf01 suspect (its three nodes switch-suspect), gpu006 drained, the rest OK."""
    assert report.verdict == "CRITICAL", report.verdict_reason
    assert report.verdict_reason == "4 CRITICAL nodes (1 to drain, 3 switch-suspect)"
    assert report.exit_code == 2
    assert report.counts["CRITICAL"] == 4 and report.counts["OK"] == len(HEALTHY)
    assert report.nodes_read == len(HOSTS)

    by_name = {switch.peer_name: switch for switch in report.switches}
    assert sorted(by_name) == [LEAF1, LEAF2], by_name  # the spine carries no node port
    leaf1, leaf2 = by_name[LEAF1], by_name[LEAF2]
    assert leaf1.suspect and report.switches[0] is leaf1
    assert int(leaf1.peer_guid or "0", 16) == guids[LEAF1]
    assert [(p.peer_port, p.host, p.target) for p in leaf1.failing_ports] == [
        (1, "gpu001", "mlx5_0:1"),
        (2, "gpu002", "mlx5_0:1"),
        (3, "gpu003", "mlx5_0:1"),
    ]
    assert all(p.checks == ["counters.partner"] for p in leaf1.failing_ports), leaf1
    assert leaf1.failing_nodes == "gpu[001-003]" and leaf1.failing_node_count == 3
    assert leaf1.attached_node_count == 4

    assert not leaf2.suspect
    assert int(leaf2.peer_guid or "0", 16) == guids[LEAF2]
    assert [(p.peer_port, p.host) for p in leaf2.failing_ports] == [(2, DRAINED)]
    assert leaf2.failing_nodes == DRAINED and leaf2.attached_node_count == 4

    assert hosts_of(report.switch_suspect) == SWITCH_SUSPECT
    assert {group.reason for group in report.switch_suspect} == {
        "ibdiag: mlx5_0:1<->leaf01/1 counters.partner symbol_error",
        "ibdiag: mlx5_0:1<->leaf01/2 counters.partner port_rcv_errors",
        "ibdiag: mlx5_0:1<->leaf01/3 counters.partner symbol_error",
    }
    assert [(g.reason, g.nodes, g.count) for g in report.drain] == [(DRAIN_REASON, DRAINED, 1)]
    assert report.warnings == [] and report.unknown == [] and report.missing is None
    # Nothing else stands out: every node has the same HCA, firmware, kernel and rail.
    assert report.outliers == [] and report.drift == [] and report.rail_misplacements == []
    assert report.read_problems == [] and report.duplicates == []


def test_errors_on_one_leaf_blame_it_and_a_single_bad_port_elsewhere_drains(runs):
    nodes = summaries(runs.reports)
    verdicts = {node.host: node.verdict for node in nodes}
    assert verdicts == {
        **{host: "CRITICAL" for host in [*SWITCH_SUSPECT, DRAINED]},
        **{host: "OK" for host in HEALTHY},
    }, verdicts
    assert_fabric_blame(analyze(nodes, FleetSettings()), runs.guids)


def test_above_the_settings_k_and_share_the_leaf_is_no_suspect_and_all_four_drain(runs):
    """The same runs judged with k = 4 nodes and a share of 100%: three failing nodes of
    leaf01's four no longer make it the suspect, so every CRITICAL node is drained."""
    settings = FleetSettings(switch_min_nodes=4, switch_min_share=1.0)
    report = analyze(summaries(runs.reports), settings)
    assert [(s.peer_name, s.suspect) for s in report.switches] == [(LEAF1, False), (LEAF2, False)]
    assert report.switch_suspect == []
    assert hosts_of(report.drain) == sorted([*SWITCH_SUSPECT, DRAINED])
    assert report.verdict_reason == "4 CRITICAL nodes"


def test_fleet_report_cli_on_the_fabric(runs):
    """``ibdiag fleet report DIR --json`` says the same as ``analyze`` (exit code 2)."""
    done = subprocess.run(
        [sys.executable, "-m", "ibdiag", "fleet", "report", str(runs.reports), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    report = FleetReport.model_validate_json(done.stdout)
    assert_fabric_blame(report, runs.guids)
