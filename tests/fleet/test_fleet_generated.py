"""Generated fleets (issue 15): 1,000 nodes' real reports with planted faults
(``tests/fleet_gen.py``) through ``ibdiag fleet report DIR --json``: every planted fault is
found, and nothing else is flagged - outliers, drift, switches, rail misplacements, drain,
switch-suspect and warning groups are compared as sets, exactly, with ``truth.json``.

The generator is tested first on its own: what the truth says is what the reports hold (read
back with ``ibdiag.fleet.node.summarize``, every node), the reports are ``Report``s, and the
seed reproduces every byte.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
from conftest import REPO
from fleet_gen import (
    BOARD_ID,
    BW_NORMAL,
    FW,
    HCA_TYPE,
    KERNEL,
    NCCL_NORMAL,
    OFED,
    OFED_MODULES,
    RAILS,
    RATE_PLANTS,
    REPORTS,
    SLOW_NCCL,
    SLOW_RAIL,
    TRUTH,
    Written,
    fleet_truth,
    host_name,
    leaf_guid,
    leaf_name,
    node_report,
    plan_fleet,
    write_fleet,
)

from ibdiag.fleet import node as fleet_node
from ibdiag.fleet.node import NodeSummary, summarize
from ibdiag.fleet.report import FleetSettings
from ibdiag.hostlist import expand
from ibdiag.model import Report

NODES = 1000
SEED = 15
REPO = REPO


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Iterator[Tuple[str, Dict[str, Any]]]:
    """The 1,000-node fleet, generated once for the module: (reports directory, truth).
    Removed afterwards: it weighs 0.75 GB, and pytest keeps its last three temp dirs."""
    root = str(tmp_path_factory.mktemp("fleet"))
    truth = write_fleet(root, NODES, SEED, workers=os.cpu_count() or 1)
    with open(os.path.join(root, TRUTH), encoding="utf-8") as handle:
        assert json.load(handle) == truth
    yield os.path.join(root, REPORTS), truth
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def summaries(fleet) -> Dict[str, NodeSummary]:
    directory, _ = fleet
    found = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), encoding="utf-8") as handle:
            found[name[: -len(".json")]] = summarize(json.load(handle), name)
    return found


# --- the generator ----------------------------------------------------------------------------


def test_the_plan_puts_each_fault_on_its_own_node_in_a_full_su():
    plan = plan_fleet(NODES, SEED)
    truth = plan.truth
    singles = [
        *truth["slow_rail"], *truth["slow_nccl"], *truth["rate"], *truth["fw_off"],
        *truth["kernel_off"], *truth["ofed_off"], *truth["swapped"], truth["bad_port"],
    ]  # fmt: skip
    hosts = [item["host"] for item in singles] + truth["switch"]["hosts"]
    hosts += truth["bad_lot"]["hosts"]
    assert len(hosts) == len(set(hosts)) == 21 == len(plan.planted)
    lot_su = truth["bad_lot"]["peer_name"].split("-")[0]  # the lot's leaf: another SU's
    assert lot_su not in {truth[k]["peer_name"].split("-")[0] for k in ("switch", "bad_port")}
    assert all(index < NODES // 32 * 32 for index in plan.planted)
    assert len({item["rail"] for item in truth["slow_rail"]}) == 3
    switch_leaf, bad_leaf = truth["switch"]["peer_name"], truth["bad_port"]["peer_name"]
    assert switch_leaf != bad_leaf and switch_leaf.split("-")[0] != bad_leaf.split("-")[0]
    assert plan_fleet(NODES, SEED) == plan
    assert plan_fleet(NODES, SEED + 1).truth != truth
    assert host_name(0, 1000) == "gpu0001" and host_name(9999, 10000) == "gpu10000"
    assert host_name(0, 10000) == "gpu00001"
    with pytest.raises(ValueError, match="at least 128 nodes"):
        plan_fleet(127, SEED)


def test_the_truth_is_what_the_reports_hold(fleet, summaries):
    """Read back every report as the fleet reads it: the planted faults are there, and every
    other node is within the fleet's normal spread - so the truth is the whole truth."""
    _, truth = fleet
    planted = truth["planted"]
    assert sorted(summaries) == [host_name(i, NODES) for i in range(NODES)]
    assert {h: s.verdict for h, s in summaries.items() if s.verdict != "OK"} == truth["verdicts"]
    assert sum(truth["counts"].values()) == NODES and truth["counts"]["UNKNOWN"] == 0
    assert all(s.level == "full" and s.rate_window_hours == 24.0 for s in summaries.values())

    slow = {(s["host"], s["rail"]) for s in planted["slow_rail"]}
    for host, node in summaries.items():
        for rail in range(RAILS):
            value = node.metric(fleet_node.IB_WRITE_BW, rail)
            if (host, rail) in slow:
                assert value == pytest.approx(BW_NORMAL[0] * SLOW_RAIL, abs=1.0)
            else:
                assert BW_NORMAL[2] <= value <= BW_NORMAL[3], (host, rail, value)
        busbw = node.metric(fleet_node.NCCL_TESTS_BUSBW)
        if host in {s["host"] for s in planted["slow_nccl"]}:
            assert busbw == pytest.approx(NCCL_NORMAL[0] * SLOW_NCCL, abs=0.5)
        else:
            assert NCCL_NORMAL[2] <= busbw <= NCCL_NORMAL[3], (host, busbw)
        assert not [m for m in node.metrics if m.name.startswith(fleet_node.INSPECTOR_BUSBW_PREFIX)]

    # error rates: none reaches the fleet's floor but the planted ones
    floor = FleetSettings().rate_floor_per_hour
    rates = {
        (host, metric.name, metric.rail): metric.value
        for host, node in summaries.items()
        for metric in node.metrics
        if metric.name.startswith(fleet_node.ERROR_RATE_PREFIX)
    }
    high = {key: value for key, value in rates.items() if value >= floor}
    per_day = dict(RATE_PLANTS)
    expected = {
        (s["host"], "error_rate:" + s["counter"], s["rail"]): per_day[s["counter"]] / 24.0
        for s in planted["rate"]
    }
    assert sorted(expected.values()) == [10.0, 20.0]
    # the far ends that fail (the suspect leaf's ports, the single bad port) count errors too,
    # as partner:<counter>; the fleet drains those nodes, it does not list them as outliers
    failing_far = {(h, planted["switch"]["rail"]) for h in planted["switch"]["hosts"]}
    failing_far.add((planted["bad_port"]["host"], planted["bad_port"]["rail"]))
    partner_high = {key for key in high if key[1].startswith("error_rate:partner:")}
    assert partner_high and {(host, rail) for host, _, rail in partner_high} <= failing_far
    high = {key: value for key, value in high.items() if key not in partner_high}
    assert high == pytest.approx(expected)
    assert len(rates) > 100  # the noise is there (VL15_dropped, a few symbol errors), below it

    # drift: one value everywhere but on the planted nodes
    off = {s["host"] for key in ("fw_off", "kernel_off", "ofed_off") for s in planted[key]}
    for host, node in summaries.items():
        if host in off:
            continue
        assert {hca.fw_ver for hca in node.hcas} == {FW}
        assert node.kernel_release == KERNEL
        assert {node.driver_versions[m] for m in OFED_MODULES} == {OFED}
        assert {(h.hca_type, h.board_id) for h in node.hcas} == {(HCA_TYPE, BOARD_ID)}

    # far ends: rail k of node i on su<i//32>-rail<k>, port i%32+1, but the swapped pair
    swapped = {(m["host"], m["rail"]): m["peer_name"] for m in truth["rail_misplacements"]}
    failing = {}
    for index in range(NODES):
        host = host_name(index, NODES)
        for port in summaries[host].ports:
            far = port.far_end
            name = swapped.get((host, port.rail), leaf_name(index // 32, port.rail))
            assert (far.peer_name, far.peer_port, far.peer_type) == (name, index % 32 + 1, "Switch")
            assert far.peer_guid == leaf_guid(index // 32, int(name.rsplit("rail", 1)[1]))
            assert port.status in ("pass", "warn")  # warn: counters.port_errors (noise, rate)
            if port.status == "warn":
                assert truth["verdicts"][host] == "WARNING"
            if port.cable_status != "pass":
                failing[(host, port.target, far.peer_name)] = (port.cable_status,
                                                               port.failing_checks)  # fmt: skip
    expected_failing = {
        (p["host"], p["target"], switch["peer_name"]): ("fail", ["counters.partner"])
        for switch in truth["switches"]
        for p in switch["failing_ports"]
    }
    assert failing == expected_failing


def test_the_groups_are_the_graders_drain_reasons(fleet, summaries):
    _, truth = fleet
    for section in ("drain", "switch_suspect", "warnings"):
        for reason, hosts in truth[section].items():
            assert {summaries[h].drain_reason for h in hosts} == {reason}
    assert sorted(h for hosts in truth["switch_suspect"].values() for h in hosts) == sorted(
        truth["planted"]["switch"]["hosts"]
    )
    assert [h for hosts in truth["drain"].values() for h in hosts] == [
        truth["planted"]["bad_port"]["host"]
    ]
    rate_hosts = {s["host"] for s in truth["planted"]["rate"]}
    warned = {h for hosts in truth["warnings"].values() for h in hosts}
    assert rate_hosts < warned  # and a few nodes with a stray symbol error or two
    lot_hosts = set(truth["planted"]["bad_lot"]["hosts"])
    assert lot_hosts < warned
    for reason, hosts in truth["warnings"].items():
        if set(hosts) & lot_hosts:  # the bad lot's cables: phy.ber, named with the part number
            assert set(hosts) <= lot_hosts and " phy.ber " in reason, reason
        else:
            assert reason.endswith(("symbol_error", "port_rcv_errors")), reason


def test_reports_are_ibdiag_reports(fleet):
    directory, truth = fleet
    planted = plan_fleet(NODES, SEED).planted
    for index in [*sorted(planted), 0, 1, NODES - 1]:
        with open(os.path.join(directory, f"{host_name(index, NODES)}.json"), "rb") as handle:
            report = Report.model_validate_json(handle.read())
        assert report.level == "full" and report.snapshot.host == host_name(index, NODES)
        # perfquery -x -E -X -T and mlxlink per port; the far end per port: nodeinfo,
        # nodedesc, portinfo, portinfo0, perfquery -x, -T (no width or speed beyond 4X NDR
        # enabled there, no receive errors: neither our own PortInfo nor -E is needed,
        # ibdiag.families.partner.chain); devlink health once for the node
        assert len(report.snapshot.commands) == 8 * 5 + 8 + 4 + 8 * 6 + 8 * 2 + 1 + 1
        assert report.counter_increases is not None
    assert truth["bytes"] / NODES > 500_000  # level standard's size (bench_standard's captures)


def test_the_seed_reproduces_every_byte(fleet, summaries):
    """Nodes regenerated here, in this process (the fleet was written by worker processes,
    with memoized parsers): the same bytes; another seed: other bytes. The truth rebuilt from
    the reports as written: truth.json, byte for byte."""
    directory, _ = fleet
    plan, other = plan_fleet(NODES, SEED), plan_fleet(NODES, SEED + 1)
    for index in [*sorted(plan.planted)[:6], 7, NODES - 1]:
        with open(os.path.join(directory, f"{host_name(index, NODES)}.json"), "rb") as handle:
            written = handle.read()
        assert written == node_report(plan, index).encode("utf-8")
        assert written != node_report(other, index).encode("utf-8")
    nodes = [
        Written(host, node.verdict, node.drain_reason,
                os.path.getsize(os.path.join(directory, f"{host}.json")))
        for host, node in summaries.items()
    ]  # fmt: skip
    rebuilt = {**fleet_truth(plan, nodes), "bytes": sum(node.size for node in nodes)}
    with open(os.path.join(os.path.dirname(directory), TRUTH), encoding="utf-8") as handle:
        assert handle.read() == json.dumps(rebuilt, indent=1, sort_keys=True) + "\n"


# --- ibdiag fleet report on it ------------------------------------------------------------------


@pytest.fixture(scope="module")
def fleet_report(fleet, tmp_path_factory) -> Tuple[int, Dict[str, Any], str]:
    """``ibdiag fleet report DIR --json`` as a user runs it: (exit code, JSON, stderr)."""
    directory, _ = fleet
    env = {**os.environ, "IBDIAG_CONFIG_DIR": str(tmp_path_factory.mktemp("no-site-config"))}
    proc = subprocess.run(
        [sys.executable, "-m", "ibdiag", "fleet", "report", directory, "--json"],
        cwd=REPO, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    assert proc.stdout.strip(), proc.stderr
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def _groups(section: List[Dict[str, Any]]) -> Dict[str, List[str]]:
    found = {}
    for group in section:
        hosts = expand(group["nodes"])
        assert len(hosts) == group["count"]
        found[group["reason"]] = sorted(hosts)
    return found


def test_the_fleet_verdict_and_counts(fleet, fleet_report):
    _, truth = fleet
    code, report, stderr = fleet_report
    assert (code, report["verdict"]) == (2, "CRITICAL"), stderr
    assert report["nodes_read"] == NODES
    assert {k: v for k, v in report["counts"].items() if v} == {
        k: v for k, v in truth["counts"].items() if v
    }
    assert report["read_problems"] == [] and report["duplicates"] == []
    assert report["missing"] is None


def test_every_drain_switch_suspect_and_warning_group(fleet, fleet_report):
    _, truth = fleet
    _, report, _ = fleet_report
    assert _groups(report["drain"]) == truth["drain"]
    assert _groups(report["switch_suspect"]) == truth["switch_suspect"]
    assert _groups(report["warnings"]) == truth["warnings"]
    assert _groups(report["unknown"]) == truth["unknown"] == {}


def test_every_outlier_and_nothing_else(fleet, fleet_report):
    _, truth = fleet
    _, report, _ = fleet_report
    found = {(o["host"], o["metric"], o["rail"], o["direction"]) for o in report["outliers"]}
    expected = {(o["host"], o["metric"], o["rail"], o["direction"]) for o in truth["outliers"]}
    assert found == expected
    for outlier in report["outliers"]:
        low = outlier["direction"] == "low"
        assert (outlier["gap"] < -0.1) if low else (outlier["value"] >= 1.0), outlier
        assert outlier["peers"] >= NODES - 1


def test_every_drift_and_nothing_else(fleet, fleet_report):
    _, truth = fleet
    _, report, _ = fleet_report

    def key(drift: Dict[str, Any]) -> Tuple[str, Optional[int]]:
        return drift["attribute"], drift["rail"]

    found = {
        key(d): (d["majority"], d["majority_count"],
                 {o["value"]: sorted(expand(o["nodes"])) for o in d["others"]})
        for d in report["drift"]
    }  # fmt: skip
    expected = {key(d): (d["majority"], d["majority_count"], d["others"]) for d in truth["drift"]}
    assert found == expected


def test_the_suspect_switch_and_the_single_bad_port(fleet, fleet_report):
    _, truth = fleet
    _, report, _ = fleet_report
    found = {
        s["peer_name"]: (s["suspect"], sorted(expand(s["failing_nodes"])),
                         s["failing_node_count"], s["attached_node_count"],
                         s["attached_port_count"],
                         sorted((p["host"], p["target"], p["peer_port"])
                                for p in s["failing_ports"]),
                         sorted((p["host"], p["target"], p["peer_port"],
                                 sorted(o["metric"] for o in p["outliers"]))
                                for p in s["outlying_ports"]))
        for s in report["switches"]
    }  # fmt: skip
    expected = {
        s["peer_name"]: (s["suspect"], s["failing_nodes"], len(s["failing_nodes"]),
                         s["attached_node_count"], s["attached_port_count"],
                         sorted((p["host"], p["target"], p["peer_port"])
                                for p in s["failing_ports"]),
                         sorted((p["host"], p["target"], p["peer_port"], sorted(p["metrics"]))
                                for p in s["outlying_ports"]))
        for s in truth["switches"]
    }  # fmt: skip
    assert found == expected
    # the slow rails' and the erring ports' leaves are listed, by their outlying ports only
    planted = truth["planted"]
    assert sum(len(s["outlying_ports"]) for s in truth["switches"]) == len(
        planted["slow_rail"]
    ) + len(planted["rate"])


def test_the_bad_cable_lot_is_named_and_nothing_else(fleet, fleet_report):
    """One lot of one part number, 6 of its 32 cables reading a BER phy.ber warns on: the
    report names that part and lot, those ports and their leaf - and no other lot."""
    _, truth = fleet
    _, report, _ = fleet_report
    found = [
        {"part_number": lot["part_number"], "lot": lot["lot"],
         "hosts": sorted(expand(lot["nodes"])), "port_count": lot["port_count"],
         "cable_count": lot["cable_count"], "checks": lot["checks"], "switches": lot["switches"]}
        for lot in report["cable_lots"]
    ]  # fmt: skip
    assert found == truth["cable_lots"]
    rail = truth["planted"]["bad_lot"]["rail"]
    assert {(p["host"], p["target"]) for p in report["cable_lots"][0]["ports"]} == {
        (host, f"mlx5_{rail}:1") for host in truth["planted"]["bad_lot"]["hosts"]
    }
    leaf = {s["peer_name"]: s for s in report["switches"]}[truth["planted"]["bad_lot"]["peer_name"]]
    assert (leaf["physical_port_count"], sorted(expand(leaf["physical_nodes"]))) == (
        6,
        truth["planted"]["bad_lot"]["hosts"],
    )
    assert not leaf["suspect"] and leaf["failing_ports"] == []


def test_the_swapped_cables_and_nothing_else(fleet, fleet_report):
    _, truth = fleet
    _, report, _ = fleet_report
    found = {(m["host"], m["rail"], m["target"], m["peer_name"])
             for m in report["rail_misplacements"]}  # fmt: skip
    expected = {(m["host"], m["rail"], m["target"], m["peer_name"])
                for m in truth["rail_misplacements"]}  # fmt: skip
    assert found == expected
    for misplaced in report["rail_misplacements"]:
        assert misplaced["expected"] and misplaced["peer_name"] not in misplaced["expected"]
