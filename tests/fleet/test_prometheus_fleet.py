"""The series the Grafana fleet row compares nodes by: ``ibdiag_port_rail_info`` (each port's
rail), ``ibdiag_port_loopback_bandwidth_bytes_per_second`` (level full's measured bandwidth) and
``ibdiag_partner_status`` (the worst result on each cable, to rank switches).

Rails and bandwidth must say what ``ibdiag fleet`` says of the same Report (``ibdiag.fleet.node``
reads it as JSON): one definition, two readers. Every rendering goes through the strict parser
of tests/prometheus_text.py and ``promtool check metrics``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
import stubs as S
from conftest import REPO
from full_level_node import HALF_RATE, stub_ib_write_bw
from prometheus_text import parse, promtool_check
from snapshots import device, port, snapshot
from sysfs_builder import mlx5_node, write_node
from test_fleet_node import node_snapshot, report_json

from ibdiag import roles
from ibdiag.facts.loopback import LoopbackAttempt
from ibdiag.fleet import node as fleet_node
from ibdiag.fleet.node import summarize
from ibdiag.model import Report, Result, Status
from ibdiag.render import prometheus
from ibdiag.render.options import RenderOptions

Samples = Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float]
GBPS = 1e9 / 8
LEAF07 = "mlx5_0:1<->leaf07/21"  # node_snapshot's mlx5_0 far end
LEAF07_LABELS = (
    ("device", "mlx5_0"),
    ("port", "1"),
    ("ib_port", "mlx5_0:1"),
    ("peer_guid", "0x0002c90300a1b2c3"),
    ("peer_name", "leaf07"),
    ("peer_port", "21"),
)


def rendered(report: Report) -> Samples:
    text = prometheus.render(report, RenderOptions(duration_s=0.5))
    samples = parse(text)
    promtool_check(text)
    return samples


def family(samples: Samples, name: str) -> Dict[Tuple[Tuple[str, str], ...], float]:
    return {labels: value for (found, labels), value in samples.items() if found == name}


def by_port(samples: Samples, name: str, label: Optional[str] = None) -> Dict[str, object]:
    """ib_port -> the sample's value, or its ``label``'s value."""
    return {
        dict(labels)["ib_port"]: (dict(labels)[label] if label else value)
        for labels, value in family(samples, name).items()
    }


@pytest.fixture(scope="module")
def graded() -> Tuple[Report, dict]:
    """node_snapshot (test_fleet_node): mlx5_10, mlx5_2, mlx5_0 (InfiniBand), mlx5_eth
    (Ethernet); far ends leaf07/21 (healthy) and leaf09/22 (SDR: link.partner fails); loopback
    36.5 then 38.0 Gb/s from mlx5_0:1, no result from mlx5_10:1."""
    return report_json(node_snapshot())


# --- rails ------------------------------------------------------------------------------------


def test_each_port_carries_its_hcas_rail_as_the_fleet_view_numbers_it(graded) -> None:
    report, data = graded
    samples = rendered(report)
    rails = by_port(samples, "ibdiag_port_rail_info", "rail")
    # natural order (mlx5_10 after mlx5_2), the Ethernet-only HCA none
    assert rails == {"mlx5_0:1": "0", "mlx5_2:1": "1", "mlx5_10:1": "2"}
    assert set(by_port(samples, "ibdiag_port_rail_info").values()) == {1}
    summary = summarize(data, "node001.json")
    assert rails == {p.target: str(p.rail) for p in summary.ports if p.rail is not None}
    assert report.snapshot.rails() == {h.name: h.rail for h in summary.hcas}


def test_every_port_of_a_railed_hca_has_its_rail_and_no_other_family_changes() -> None:
    """A dual-port HCA's ports share its rail (a RoCE port beside an InfiniBand one too); an HCA
    whose link layer could not be read is not assumed InfiniBand; no existing family gains a
    rail label."""
    devs = [
        device("mlx5_0", [port(1), port(2, link_layer="Ethernet")]),
        device("mlx5_1", [port(1, link_layer=None, problems={"link_layer": "missing"})]),
        device("mlx5_2", [port(1, link_layer=None, problems={"link_layer": "EIO"})]),
        device("mlx5_3", [port(1)]),
    ]
    report, data = report_json(snapshot(devs), level="quick")
    samples = rendered(report)
    assert by_port(samples, "ibdiag_port_rail_info", "rail") == {
        "mlx5_0:1": "0",
        "mlx5_0:2": "0",
        "mlx5_1:1": "1",  # no link_layer file: a kernel older than RoCE, InfiniBand
        "mlx5_3:1": "2",
    }
    summary = summarize(data, "node001.json")
    assert {p.target: p.rail for p in summary.ports} == {
        "mlx5_0:1": 0,
        "mlx5_0:2": 0,
        "mlx5_1:1": 1,
        "mlx5_2:1": None,
        "mlx5_3:1": 2,
    }
    others = {name for (name, labels), _ in samples.items() if "rail" in dict(labels) and name} - {
        "ibdiag_port_rail_info"
    }
    assert others == set()


# --- measured bandwidth -----------------------------------------------------------------------


def test_loopback_bandwidth_is_the_best_attempt_per_client_port(graded) -> None:
    report, data = graded
    samples = rendered(report)
    found = by_port(samples, "ibdiag_port_loopback_bandwidth_bytes_per_second")
    assert found == {"mlx5_0:1": 38.0 * GBPS}  # mlx5_10:1's attempt gave no result: none
    labels = next(iter(family(samples, "ibdiag_port_loopback_bandwidth_bytes_per_second")))
    assert labels == (("device", "mlx5_0"), ("port", "1"), ("ib_port", "mlx5_0:1"))
    # the number ibdiag fleet compares on rail 0
    assert summarize(data, "n.json").metric(fleet_node.IB_WRITE_BW, 0) * GBPS == found["mlx5_0:1"]


def test_no_loopback_run_no_loopback_family() -> None:
    report, _ = report_json(snapshot([device("mlx5_0", [port(1)])]), level="quick")
    text = prometheus.render(report, RenderOptions(duration_s=0.1))
    assert "ibdiag_port_loopback" not in text
    both = report.snapshot.model_copy(
        update={
            "loopback": [
                LoopbackAttempt(client_device="mlx5_0", client_port=1, attempt=1, gbps=None,
                                why_not="no result row",
                                client_role=roles.loopback_client("mlx5_0:1", 1)),
            ]
        }
    )  # fmt: skip
    text = prometheus.render(report.model_copy(update={"snapshot": both}))
    assert "ibdiag_port_loopback" not in text  # no attempt measured anything: not even HELP


@pytest.fixture
def full_node(tmp_path, monkeypatch):
    """Two HDR HCAs; stub ib_write_bw printing the HDR loopback capture for mlx5_0 and OCI's
    98.01 Gb/s run for mlx5_1 (every attempt); perftest's duration 1 s."""
    write_node(str(tmp_path / "sys"), mlx5_node(2))
    stubs = S.StubBin(tmp_path / "bin")
    state = tmp_path / "perftest"
    state.mkdir()
    (state / "mlx5_1.out").write_text(Path(HALF_RATE).read_text())
    stubs.add("ib_write_bw", stub_ib_write_bw(state))
    monkeypatch.setenv("PATH", stubs.path)
    config = tmp_path / "ibdiag.toml"
    config.write_text("perftest_duration_s = 1\n")
    return tmp_path, config


def test_export_at_level_full_writes_the_measured_bandwidth(run_cli, full_node) -> None:
    tmp_path, config = full_node
    target = tmp_path / "ibdiag.prom"
    result = run_cli("export", "--level", "full", "--sysfs", str(tmp_path / "sys"),
                     "--config", str(config), "--textfile", str(target))  # fmt: skip
    assert result.exit_code == 0, result.stderr
    text = target.read_text()
    promtool_check(text)
    found = by_port(parse(text), "ibdiag_port_loopback_bandwidth_bytes_per_second")
    assert found == {
        "mlx5_0:1": pytest.approx(201.8 * GBPS, rel=1e-3),  # 24056.72 MB/s (2^20 bytes)
        "mlx5_1:1": pytest.approx(98.01 * GBPS, rel=1e-4),
    }


def test_serve_refuses_level_full(run_cli) -> None:
    """A scrape must not start traffic tests: serve stops at level standard."""
    result = run_cli("serve", "--level", "full", "--listen", "127.0.0.1:1")
    assert result.exit_code == 3
    assert "'full' is not one of 'quick', 'standard'" in result.stderr


# --- the worst result on each cable -----------------------------------------------------------


def test_partner_status_is_the_worst_result_on_the_cable(graded) -> None:
    report, data = graded
    samples = rendered(report)
    statuses = by_port(samples, "ibdiag_partner_status")
    assert statuses == {"mlx5_0:1": 0, "mlx5_2:1": 2}  # leaf07/21 passes, leaf09/22 is at SDR
    assert family(samples, "ibdiag_partner_status")[LEAF07_LABELS] == 0
    # as ibdiag fleet grades each cable
    cables = {p.target: p.cable_status for p in summarize(data, "n.json").ports if p.far_end}
    assert statuses == {t: prometheus.STATUS_VALUES[Status(s)] for t, s in cables.items()}


def _result(status: str, target: str = LEAF07, check_id: str = "link.partner") -> Result:
    return Result(check_id=check_id, target=target, status=Status(status), message=status)


@pytest.mark.parametrize(
    "results, expected",
    [
        ([_result("pass"), _result("fail", check_id="counters.partner")], 2),
        ([_result("error"), _result("fail", check_id="counters.partner")], 2),  # fail ranks first
        ([_result("error"), _result("warn", check_id="counters.partner")], 3),
        ([_result("pass"), _result("warn", check_id="counters.partner")], 1),
        ([_result("skip"), _result("pass", check_id="counters.partner")], 0),
        ([_result("skip"), _result("skip", check_id="counters.partner")], -1),
        ([_result("fail", check_id="site.cable")], 2),  # any check naming the cable
        ([_result("fail", target="mlx5_0:1", check_id="link.state")], None),  # the port, not it
        ([], None),  # no result names the cable: no sample
    ],
)
def test_partner_status_orders_as_the_verdict(
    graded, results: List[Result], expected: Optional[int]
) -> None:
    report, _ = graded
    others = [r for r in report.results if "leaf07" not in r.target]
    samples = rendered(report.model_copy(update={"results": others + results}))
    assert family(samples, "ibdiag_partner_status").get(LEAF07_LABELS) == expected


# --- documented --------------------------------------------------------------------------------


def test_readme_and_docstring_name_the_fleet_families() -> None:
    readme = (Path(REPO) / "README.md").read_text()
    section = readme[readme.index("## Prometheus") :]
    section = section[: section.index("\n## ", 1)]
    for name in (
        "ibdiag_port_rail_info",
        "ibdiag_port_loopback_bandwidth_bytes_per_second",
        "ibdiag_partner_status",
    ):
        assert f"`{name}" in section, f"README's Prometheus section does not name {name}"
        assert f"``{name}" in prometheus.__doc__, f"the docstring does not name {name}"
    assert "--level full" in section
