"""``ibdiag.fleet.node.summarize``: what the fleet reads of one node's Report JSON - on reports
ibdiag itself graded (hand-built snapshots with far ends, loopback and counter increases), and
on JSON that is not a report."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from conftest import read_capture
from hypothesis import example, given, settings
from hypothesis import strategies as st
from partner_builders import partner
from snapshots import builtin_registry, device, interpreted, port, replaced, snapshot

from ibdiag.drain_reason import drain_reason
from ibdiag.facts.loopback import LoopbackAttempt
from ibdiag.fleet import node as fleet_node
from ibdiag.fleet.node import NotAReport, summarize
from ibdiag.grade import grade
from ibdiag.model import InspectorFile
from ibdiag.thresholds import Thresholds

QDR = "40 Gb/sec (4X QDR)"


def report_json(snap, baseline=None, level="standard"):
    report = grade(snap, builtin_registry(), Thresholds(), level, baseline=baseline)
    return report, json.loads(report.model_dump_json())


def node_snapshot():
    names = ["mlx5_10", "mlx5_2", "mlx5_0", "mlx5_eth"]
    devs = [device(n, [port(1, rate_text=QDR)]) for n in names[:3]]
    devs.append(device("mlx5_eth", [port(1, link_layer="Ethernet")]))
    snap = snapshot(devs)
    snap = replaced(snap, "mlx5_0:1", partner=partner())
    slow = partner(port=22, description="MF0;leaf09:MQM9700/U1", node_guid="0x0002c90300000009")
    sdr = slow.port_info.model_copy(update={"speed_active": "SDR"})
    snap = replaced(snap, "mlx5_2:1", partner=slow.model_copy(update={"port_info": sdr}))
    attempts = [
        LoopbackAttempt(client_device="mlx5_0", client_port=1, attempt=1, gbps=36.5,
                        client_role="loopback client mlx5_0:1 attempt 1"),
        LoopbackAttempt(client_device="mlx5_0", client_port=1, attempt=2, gbps=38.0,
                        client_role="loopback client mlx5_0:1 attempt 2"),
        LoopbackAttempt(client_device="mlx5_10", client_port=1, attempt=1, gbps=None,
                        client_role="loopback client mlx5_10:1 attempt 1"),
    ]  # fmt: skip
    return snap.model_copy(
        update={
            "loopback": attempts,
            "kernel_release": "5.15.0-1068-azure",
            "driver_versions": {"mlx5_core": "24.10-1.1.4"},
        }
    )


def test_a_graded_report_is_summarized_for_the_fleet():
    snap = node_snapshot()
    report, data = report_json(snap)
    found = summarize(data, "node001.json")
    assert found.host == "node001" and found.source == "node001.json"
    assert found.verdict == report.verdict.value and found.level == "standard"
    assert found.drain_reason == drain_reason(report) != ""
    # rails: InfiniBand HCAs in natural order; the Ethernet one has none
    assert [(h.name, h.rail) for h in found.hcas] == [("mlx5_0", 0), ("mlx5_2", 1), ("mlx5_10", 2)]
    assert found.hcas[0].fw_ver == "20.31.1014"
    ports = {p.target: p for p in found.ports}
    assert ports["mlx5_eth:1"].rail is None and ports["mlx5_10:1"].rail == 2
    far = ports["mlx5_0:1"].far_end
    assert (far.peer_name, far.peer_port, far.peer_type) == ("leaf07", 21, "Switch")
    assert far.peer_guid == "0x0002c90300a1b2c3"
    assert ports["mlx5_0:1"].cable_status == "pass"
    slow = ports["mlx5_2:1"]
    assert slow.far_end.peer_name == "leaf09" and slow.cable_status == "fail"
    assert "link.partner" in slow.failing_checks
    assert ports["mlx5_10:1"].far_end is None
    assert found.metric(fleet_node.IB_WRITE_BW, 0) == 38.0  # the better attempt
    assert found.metric(fleet_node.IB_WRITE_BW, 2) is None  # no result row
    assert found.kernel_release == "5.15.0-1068-azure"
    assert found.driver_versions == {"mlx5_core": "24.10-1.1.4"}
    assert found.rate_window_hours is None  # no baseline: rates unknown, not zero


def test_error_rates_per_rail_from_the_counter_increases():
    then = node_snapshot()
    now = replaced(then, "mlx5_2:1", counters={"symbol_error": 30, "port_rcv_errors": 0})
    then = replaced(then, "mlx5_2:1", counters={"symbol_error": 0, "port_rcv_errors": 0})
    now = now.model_copy(update={"collected_at": then.collected_at + timedelta(hours=3)})
    _, data = report_json(now, baseline=then)
    found = summarize(data, "x")
    assert found.rate_window_hours == pytest.approx(3.0)
    assert found.metric(fleet_node.ERROR_RATE_PREFIX + "symbol_error", 1) == pytest.approx(10.0)
    assert found.metric(fleet_node.ERROR_RATE_PREFIX + "symbol_error", 0) is None


@pytest.mark.parametrize(
    "data, reason",
    [
        ([1, 2], "not an ibdiag report (a JSON list)"),
        ({"verdict": "OK"}, "not an ibdiag report (no verdict, results and snapshot)"),
        ({"verdict": "MAYBE", "results": [], "snapshot": {}}, "no verdict"),
        ({"verdict": "OK", "results": [], "snapshot": {"host": ""}}, "names no host"),
        ({"verdict": "OK", "results": [], "snapshot": {"host": "gpu[1-2]"}}, "cannot be a node"),
        ({"verdict": "OK", "results": [], "snapshot": {"host": "a\\x1b"}}, "cannot be a node"),
    ],
)
def test_what_is_not_a_report_is_one_line(data, reason):
    with pytest.raises(NotAReport, match=reason.replace("(", r"\(").replace(")", r"\)")):
        summarize(data, "x")


def test_odd_field_types_are_unknown_not_a_crash():
    data = {
        "verdict": "WARNING",
        "results": [{"status": "warn", "target": "mlx5_0:1", "check_id": "x"}, "junk"],
        "snapshot": {
            "host": "n1",
            "collected_at": "yesterday",
            "devices": [{"name": "mlx5_0", "ports": [{"number": "1"}, {"number": 1, "rate": 5}]},
                        {"name": 7}],
            "driver_versions": {"mlx5_core": 5},
            "loopback": [{"client_device": "mlx5_0", "gbps": "fast"}],
            "nccl_tests": {"rows": [{"size_bytes": True}]},
        },
        "counter_increases": {"hours": "two"},
    }  # fmt: skip
    listed = {**data, "counter_increases": {"hours": 2.0, "targets": ["mlx5_0:1"]}}
    listed["snapshot"] = {**data["snapshot"], "driver_versions": ["mlx5_core"]}
    assert summarize(listed, "x").driver_versions == {}
    found = summarize(data, "x")
    assert found.collected_at is None and found.driver_versions == {}
    assert found.drain_reason == "ibdiag: mlx5_0:1 x"
    assert [p.target for p in found.ports] == ["mlx5_0:1"] and found.metrics == []


def test_failures_off_the_ports_are_named_apart():
    results = [
        {"check_id": "kernel.log", "target": "node", "status": "fail"},
        {"check_id": "hca.pci", "target": "mlx5_0", "status": "error"},
        {"check_id": "link.state", "target": "mlx5_0:1", "status": "fail"},
        {"check_id": "link.partner", "target": "mlx5_0:1<->leaf07/21", "status": "fail"},
        {"check_id": "firmware", "target": "mlx5_1", "status": "warn"},
    ]
    data = {
        "verdict": "CRITICAL",
        "results": results,
        "snapshot": {"host": "n1", "devices": [{"name": "mlx5_0", "ports": [{"number": 1}]}]},
    }
    found = summarize(data, "x")
    assert found.failing_elsewhere == ["mlx5_0", "node"]
    assert found.drain_reason == "ibdiag: node kernel.log and more"
    assert found.ports[0].failing_checks == ["link.partner", "link.state"]


def test_what_tells_one_machine_from_another():
    """The boot id and every device's node GUID (lower case), Ethernet ones too; an all-zero
    GUID (an unprogrammed or virtual function's: the same on every machine) is none."""
    devs = [
        device("mlx5_0", node_guid="0C42:A103:0001:1A2B"),
        device("mlx5_1", node_guid="0000:0000:0000:0000"),
        device("mlx5_2", [port(1, link_layer="Ethernet")], node_guid="0x0c42a10300021a2b"),
    ]
    _, data = report_json(snapshot(devs))
    found = summarize(data, "x")
    assert found.guids == ["0c42:a103:0001:1a2b", "0x0c42a10300021a2b"]
    assert found.boot_id == data["snapshot"]["boot_id"] != ""
    del data["snapshot"]["boot_id"]  # an older report's, or one whose procfs said nothing
    assert summarize(data, "x").boot_id is None


# --- NCCL Inspector bus bandwidth: like for like, whatever else the node's jobs ran ------------

INSPECTOR = "nccl_inspector"  # tests/fixtures/nccl_inspector
# NVIDIA's README: one GPU of nvl72004-T01, AllReduce 4-5GB 678.263 GB/s (n_nodes 1), P2P Send.
PROM_CAPTURE = "nccl-readme-nvl72004-inspector-prom-allreduce-4-5GB-and-p2p-send.txt"
# NVIDIA's README (v4.4 JSON, nnodes 1): AllReduce 16 GiB 485.119099 GB/s, ReduceScatter 2 GiB
# 366.134533 GB/s.
JSON_CAPTURE = (
    "nccl-readme-inspector-json-v4.4-dump_stats-coll_perf-allreduce-16GiB-and-verbose-"
    "reducescatter.txt"
)


def inspector_report(files) -> dict:
    """A graded report's JSON whose snapshot holds ``files`` (name, text) as Inspector dumps,
    parsed by the interpret step as collect parses them."""
    when = datetime(2025, 5, 23, 20, 0, tzinfo=timezone.utc)
    dumps = [InspectorFile(name=name, modified_at=when, text=text) for name, text in files]
    snap = snapshot().model_copy(update={"nccl_inspector": dumps, "nccl_inspector_dir": "/d"})
    _, data = report_json(interpreted(snap), level="full")
    assert data["snapshot"]["nccl_inspector_dumps"], "the dumps were parsed"
    return data


def gpu_prom_files(factors):
    """The Prometheus capture as GPU0..n of one node, AllReduce 4-5GB at 678.263 x factor."""
    text = read_capture(INSPECTOR, PROM_CAPTURE)
    return [
        (
            f"nccl_inspector_metrics_GPU-{n}.prom",
            text.replace('gpu="GPU0"', f'gpu="GPU{n}"').replace(
                "} 678.263", f"}} {678.263 * factor}"
            ),
        )
        for n, factor in enumerate(factors)
    ]


def inspector_metrics(data) -> dict:
    found = summarize(data, "x.json")
    prefix = fleet_node.INSPECTOR_BUSBW_PREFIX
    return {m.name[len(prefix) :]: m.value for m in found.metrics if m.name.startswith(prefix)}


def test_inspector_bus_bandwidth_is_per_collective_size_and_span_from_real_dumps():
    """Each (collective, message size bucket, nodes spanned) is its own metric: the median over
    the node's GPUs, in Gb/s. A JSON dump's exact size falls in the bucket the Prometheus mode
    would label it with; P2P Send is not a collective."""
    files = gpu_prom_files((1.0, 0.9, 1.1, 0.5))
    files.append(("node0-pid1639453.log", read_capture(INSPECTOR, JSON_CAPTURE)))
    assert inspector_metrics(inspector_report(files)) == {
        "AllReduce:4-5GB:1n": pytest.approx(678.263 * (0.9 + 1.0) / 2 * 8),
        "AllReduce:16-17GB:1n": pytest.approx(485.119099 * 8),
        "ReduceScatter:2-3GB:1n": pytest.approx(366.134533 * 8),
    }


def test_a_node_s_inspector_value_does_not_depend_on_what_else_its_jobs_ran():
    """Two nodes with the same AllReduce 4-5GB bandwidth; one also ran the JSON capture's other
    collectives and sizes (slower per byte): their comparable values are the same. The old median
    over every sample gave 5426 Gb/s against 3881."""
    alone = inspector_metrics(inspector_report(gpu_prom_files((1.0,))))
    files = [*gpu_prom_files((1.0,)), ("a.log", read_capture(INSPECTOR, JSON_CAPTURE))]
    busier = inspector_metrics(inspector_report(files))
    assert alone == {"AllReduce:4-5GB:1n": pytest.approx(678.263 * 8)}
    assert busier["AllReduce:4-5GB:1n"] == alone["AllReduce:4-5GB:1n"]
    assert len(busier) == 3


def test_only_the_largest_sizes_from_1_mib_are_kept_and_a_node_holds_few():
    """The capture's AllReduce relabelled to six buckets: below 1 MiB is latency, not fabric;
    of the rest the 4 largest stay. However many collectives a dump names, a summary holds at
    most INSPECTOR_METRICS_MAX of them."""
    text = read_capture(INSPECTOR, PROM_CAPTURE)
    sizes = ["512-513KB", "1-2MB", "8-9MB", "64-65MB", "512-513MB", "4-5GB"]
    files = [(f"nccl_inspector_metrics_{n}.prom", text.replace("4-5GB", size))
             for n, size in enumerate(sizes)]  # fmt: skip
    found = inspector_metrics(inspector_report(files))
    assert sorted(found) == sorted(f"AllReduce:{size}:1n" for size in sizes[2:])
    samples = [
        {"kind": "coll", "collective": f"Coll{n:02d}", "message_bytes": 1 << 30, "bus_bw_gbps": 8.0}
        for n in range(40)
    ]
    _, data = report_json(snapshot())
    data["snapshot"]["nccl_inspector_dumps"] = [{"samples": samples}]
    many = inspector_metrics(data)
    assert len(many) == fleet_node.INSPECTOR_METRICS_MAX == 32
    assert sorted(many)[0] == "Coll00:1-2GB"


@pytest.mark.parametrize(
    "sample, key",
    [
        ({"collective": "AllReduce", "message_bytes": 4 << 30, "n_nodes": 2}, "AllReduce:4-5GB:2n"),
        ({"collective": "AllGather", "message_bytes": (1 << 30) - 1}, "AllGather:1023-1024MB"),
        ({"collective": "Broadcast", "message_bytes": 512}, "Broadcast:512-513B"),
        ({"collective": "AllReduce", "message_bytes": 1 << 40, "n_nodes": 0}, "AllReduce:1-2TB"),
        ({"collective": "AllReduce", "message_bytes": None}, None),
        ({"collective": "All:Reduce", "message_bytes": 4}, None),
        ({"collective": "\x1b[2J", "message_bytes": 4}, None),
        ({"message_bytes": 4}, None),
    ],
)
def test_inspector_keys(sample, key):
    assert fleet_node.inspector_key(sample) == key


# --- one definition of a rail: the fleet's reading of the JSON and Snapshot.rails agree ---------

# A port's link layer as sysfs gives it: InfiniBand, Ethernet (RoCE), no link_layer file (a
# kernel older than RoCE: InfiniBand), or a file that could not be read (not assumed anything).
LINK_LAYERS = {
    "ib": ("InfiniBand", {}),
    "eth": ("Ethernet", {}),
    "missing": (None, {"link_layer": "missing"}),
    "unreadable": (None, {"link_layer": "Input/output error"}),
}
HCA_NAMES = ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_9", "mlx5_10", "mlx5_11", "irdma1", "bnxt_re0")


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(HCA_NAMES),
        st.lists(st.sampled_from(sorted(LINK_LAYERS)), min_size=1, max_size=3),
        min_size=1,
        max_size=6,
    )
)
@example({"mlx5_10": ["ib"], "mlx5_2": ["ib"], "mlx5_9": ["eth"], "mlx5_0": ["missing"]})
@example({"mlx5_1": ["unreadable", "eth"], "mlx5_0": ["eth", "ib"]})
def test_rails_from_report_json_are_snapshot_rails(hcas):
    devs = []
    for name, layers in hcas.items():
        ports = [
            port(number, link_layer=LINK_LAYERS[layer][0], problems=dict(LINK_LAYERS[layer][1]))
            for number, layer in enumerate(layers, 1)
        ]
        devs.append(device(name, ports))
    snap = snapshot(devs)
    data = {"verdict": "OK", "results": [], "snapshot": json.loads(snap.model_dump_json())}
    found = summarize(data, "node001.json")
    rails = snap.rails()
    assert {hca.name: hca.rail for hca in found.hcas} == rails
    assert {p.target: p.rail for p in found.ports} == {
        f"{dev.name}:{p.number}": rails.get(dev.name) for dev in devs for p in dev.ports
    }
    # rails are 0..n-1 over the HCAs with an InfiniBand port, in natural name order
    railed = [dev.name for dev in devs if any(p.is_infiniband for p in dev.ports)]
    assert sorted(rails.values()) == list(range(len(railed)))
    assert sorted(rails, key=rails.get) == sorted(
        railed,
        key=lambda name: (
            name.rstrip("0123456789"),
            int(name[len(name.rstrip("0123456789")) :] or -1),
        ),
    )
