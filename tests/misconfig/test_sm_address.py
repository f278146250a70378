"""sm.address: each InfiniBand port's LID and SM LID valid, one SM for the node, no LID twice,
and a change since the baseline (an SM failover) named with both LIDs."""

from __future__ import annotations

import json

from snapshots import device, port, run, snapshot, statuses
from sysfs_builder import mlx5_node, write_node

from ibdiag.model import Status
from ibdiag.thresholds import Thresholds


def _node(*ports):
    return snapshot([device(f"mlx5_{i}", ports=[p]) for i, p in enumerate(ports)])


def _run(snap, baseline=None, th=None):
    from snapshots import builtin_registry

    from ibdiag.grade import grade

    report = grade(snap, builtin_registry(), th or Thresholds(), baseline=baseline)
    return [r for r in report.results if r.check_id == "sm.address"]


def test_a_healthy_node_passes_naming_lid_and_sm():
    results = run("sm.address", _node(port(lid=0x12, sm_lid=1), port(lid=0x13, sm_lid=1)))
    assert [(r.status, r.message) for r in results] == [
        (Status.PASS, "lid 0x12, sm_lid 0x1"),
        (Status.PASS, "lid 0x13, sm_lid 0x1"),
    ]
    assert results[0].evidence == [
        "class/infiniband/mlx5_0/ports/1/lid",
        "class/infiniband/mlx5_0/ports/1/sm_lid",
    ]


def test_active_with_lid_0_fails():
    (result,) = run("sm.address", _node(port(lid=0, sm_lid=1)))
    assert result.status is Status.FAIL
    assert result.message == (
        "ACTIVE with lid 0x0, sm_lid 0x1: lid is not a unicast LID (0x1-0xbfff)"
    )
    assert result.subject == "lid 0x0"


def test_a_multicast_sm_lid_fails():
    (result,) = run("sm.address", _node(port(lid=0x12, sm_lid=0xC001)))
    assert result.status is Status.FAIL and result.subject == "sm_lid 0xc001"


def test_two_ports_with_one_lid_warn_on_the_node():
    results = run("sm.address", _node(port(lid=0x40, sm_lid=1), port(lid=0x40, sm_lid=1)))
    node = [r for r in results if r.target == "node"]
    assert [(r.status, r.message) for r in node] == [
        (
            Status.WARN,
            "LID 0x40 is held by 2 ports: mlx5_0:1, mlx5_1:1 (one subnet expected: "
            "subnets_per_rail is false)",
        )
    ]
    assert node[0].subject == "duplicate LID 0x40"


def test_rails_on_separate_subnets_may_share_lids_and_sm_lids():
    # each rail its own opensm, each at LID 1, each handing out LID 0x40 to this node's port
    th = Thresholds(subnets_per_rail=True)
    results = run("sm.address", _node(port(lid=0x40, sm_lid=1), port(lid=0x40, sm_lid=1)), th)
    assert {r.status for r in results} == {Status.PASS}


def test_ports_naming_different_sms_warn_unless_subnets_per_rail():
    snap = _node(port(lid=0x12, sm_lid=1), port(lid=0x13, sm_lid=1), port(lid=0x14, sm_lid=9))
    node = [r for r in run("sm.address", snap) if r.target == "node"]
    assert [(r.status, r.message) for r in node] == [
        (
            Status.WARN,
            "the node's InfiniBand ports name 2 different SMs (0x1: mlx5_0:1, mlx5_1:1; "
            "0x9: mlx5_2:1)",
        )
    ]
    assert not [r for r in run("sm.address", snap, Thresholds(subnets_per_rail=True))
                if r.target == "node"]  # fmt: skip


def test_an_sm_failover_since_the_baseline_warns_with_both_lids():
    before = _node(port(lid=0x12, sm_lid=1))
    after = _node(port(lid=0x12, sm_lid=5))
    (result,) = _run(after, baseline=before)
    assert result.status is Status.WARN
    assert result.message == (
        "the SM moved from LID 0x1 to 0x5 since the baseline: a subnet manager failover"
    )
    assert result.subject == "SM 0x1->0x5"
    assert [r.status for r in _run(after, baseline=after)] == [Status.PASS]


def test_a_lid_reassigned_since_the_baseline_warns():
    (result,) = _run(_node(port(lid=0x99, sm_lid=1)), baseline=_node(port(lid=0x12, sm_lid=1)))
    assert result.status is Status.WARN and result.subject == "LID 0x12->0x99"


def test_a_port_not_active_is_left_to_link_state_with_what_the_addressing_says():
    results = run(
        "sm.address",
        _node(port(state=2, lid=0, sm_lid=0), port(state=2, lid=0x13, sm_lid=1)),
    )
    assert [r.status for r in results] == [Status.SKIP, Status.SKIP]
    assert results[0].message == (
        "state 2: INIT, lid 0x0, sm_lid 0x0: no subnet manager has configured the port; "
        "link.state grades it"
    )
    assert "the SM at LID 0x1 has not activated it (SM lost?)" in results[1].message


def test_link_down_unreadable_and_roce_ports():
    results = run(
        "sm.address",
        _node(
            port(phys_state=2, state=1, lid=0, sm_lid=0),
            port(lid=None, problems={"lid": "unreadable: Input/output error"}),
            port(link_layer="Ethernet", lid=0, sm_lid=0),
        ),
    )
    assert statuses(results) == {"mlx5_0:1": "skip", "mlx5_1:1": "skip"}
    assert results[1].message == "not comparable (lid: unreadable: Input/output error)"


def test_a_virtual_hca_reporting_no_phys_state_is_graded():
    (result,) = run("sm.address", _node(port(phys_state=0, lid=0x12, sm_lid=1)))
    assert result.status is Status.PASS


def test_a_tree_end_to_end(tmp_path, run_cli):
    root = str(tmp_path / "sys")
    write_node(root, mlx5_node(3, port=dict(sm_lid="0x1")))
    results = json.loads(run_cli("check", "--sysfs", root, "--json").stdout)["results"]
    mine = [(r["target"], r["status"], r["message"]) for r in results
            if r["check_id"] == "sm.address"]  # fmt: skip
    assert mine == [
        ("mlx5_0:1", "pass", "lid 0x12, sm_lid 0x1"),
        ("mlx5_1:1", "pass", "lid 0x13, sm_lid 0x1"),
        ("mlx5_2:1", "pass", "lid 0x14, sm_lid 0x1"),
    ]
