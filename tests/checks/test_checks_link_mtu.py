"""link.mtu (checks/link_mtu.py) on hand-built Snapshots: our port's active MTU (ibv_devinfo,
else our own PortInfo's NeighborMTU) against the expected one, and the far end's PortInfo
NeighborMTU / MtuCap (the switch port), named by both ends of the cable."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

from conftest import TESTS_DIR
from partner_builders import partner, port_info
from snapshots import device, port, replaced, run, snapshot

from ibdiag import roles
from ibdiag.facts.inventory import Inventory, Listing
from ibdiag.facts.outcome import RunOutcome
from ibdiag.facts.partner import Partner, Unread
from ibdiag.families.ibv_devinfo import parse_ibv_devinfo
from ibdiag.model import Result, Snapshot, Status
from ibdiag.thresholds import Thresholds

CABLE = "mlx5_0:1<->leaf07/21"
IBV_DEVINFO = Path(TESTS_DIR) / "fixtures" / "ibv_devinfo"
# A real ConnectX-3 listing: mlx4_1 port 1 ACTIVE, InfiniBand, max_mtu and active_mtu 4096
HEALTHY_CAPTURE = "heioy-books-2x-connectx3-mlx4-port2-down-tabs.txt"


def listing(text: str) -> Listing:
    parsed = parse_ibv_devinfo(text)
    outcome = RunOutcome(command="ibv_devinfo", rc=0)
    return parsed.model_copy(update={"role": roles.IBV_DEVINFO, "outcome": outcome})


def verbs(active: Optional[int] = 4096, max_mtu: Optional[int] = 4096, name="mlx5_0") -> Listing:
    """ibv_devinfo's listing of ``name`` port 1 (an IB port) with these MTUs (None: not
    printed)."""
    lines = [f"hca_id:\t{name}", "\ttransport:\t\t\tInfiniBand (0)", "\t\tport:\t1",
             "\t\t\tstate:\t\t\tPORT_ACTIVE (4)", "\t\t\tlink_layer:\t\tInfiniBand"]  # fmt: skip
    codes = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}
    if max_mtu is not None:
        lines.append(f"\t\t\tmax_mtu:\t\t{max_mtu} ({codes[max_mtu]})")
    if active is not None:
        lines.append(f"\t\t\tactive_mtu:\t\t{active} ({codes[active]})")
    return listing("\n".join(lines) + "\n")


def far(neighbor: Optional[int] = 4096, cap: Optional[int] = 4096, **update) -> Partner:
    return partner(
        port_info=port_info(neighbor_mtu=neighbor, mtu_cap=cap),
        local_port_info=None,
        **update,
    )


def node(
    far_end: Optional[Partner],
    listed: Optional[Listing],
    **port_update,
) -> Snapshot:
    snap = snapshot([device("mlx5_0", ports=[port(1, **port_update)])])
    snap = replaced(snap, "mlx5_0:1", partner=far_end)
    return snap.model_copy(update={"inventory": Inventory(ibv_devinfo=listed)})


def one(results: List[Result]) -> Result:
    assert len(results) == 1, results
    return results[0]


def test_healthy_link_passes_naming_both_ends():
    result = one(run("link.mtu", node(far(), verbs())))
    assert result.status == Status.PASS, result
    assert result.target == CABLE
    assert "active MTU 4096" in result.message and "MtuCap 4096" in result.message
    assert result.observed == 4096 and result.expected == 4096
    assert "ibv_devinfo" in result.evidence


def test_the_real_connectx3_listing_passes_its_active_ib_port():
    text = (IBV_DEVINFO / HEALTHY_CAPTURE).read_text()
    snap = snapshot([device("mlx4_1", ports=[port(1), port(2, state=1, phys_state=2)])])
    snap = snap.model_copy(update={"inventory": Inventory(ibv_devinfo=listing(text))})
    results = {r.target: r for r in run("link.mtu", snap)}
    assert results["mlx4_1:1"].status == Status.PASS, results
    assert "active MTU 4096" in results["mlx4_1:1"].message
    assert "far end" in results["mlx4_1:1"].message  # not read: said, not guessed
    assert results["mlx4_1:2"].status == Status.SKIP  # PORT_DOWN: no MTU set up
    assert "not ACTIVE" in results["mlx4_1:2"].message


def test_the_real_listing_with_active_mtu_2048_fails():
    """A degraded copy of the real capture (made here): port 1's active_mtu 4096 -> 2048."""
    text = (IBV_DEVINFO / HEALTHY_CAPTURE).read_text()
    degraded = text.replace("active_mtu:\t\t4096 (5)", "active_mtu:\t\t2048 (4)", 1)
    assert degraded != text
    snap = snapshot([device("mlx4_1", ports=[port(1)])])
    snap = snap.model_copy(update={"inventory": Inventory(ibv_devinfo=listing(degraded))})
    result = one(run("link.mtu", snap))
    assert result.status == Status.FAIL
    assert result.message == "mlx4_1:1: active MTU 2048 < 4096"
    assert (result.observed, result.expected) == (2048, 4096)


def test_a_switch_port_capped_lower_is_named():
    result = one(run("link.mtu", node(far(neighbor=2048, cap=2048), verbs(active=2048))))
    assert result.status == Status.FAIL
    assert result.message == (f"{CABLE}: active MTU 2048 < 4096; switch port MtuCap 2048 < 4096")
    assert result.subject == "MTU 2048<4096"
    assert any("partner" in e or "portinfo" in e for e in result.evidence), result.evidence


def test_a_switch_port_capped_lower_fails_even_when_ours_is_not_known():
    """ibv_devinfo gave nothing (the simulator has no verbs device): the link's MTU as the far
    end says it (its NeighborMTU) stands for ours, and the switch port's cap is named."""
    gone = Listing(unusable="ibv_devinfo: No IB devices found")
    result = one(run("link.mtu", node(far(neighbor=2048, cap=2048), gone)))
    assert result.status == Status.FAIL
    assert result.message == (
        f"{CABLE}: link MTU (the switch port's NeighborMTU) 2048 < 4096; "
        "switch port MtuCap 2048 < 4096"
    )


def test_ends_that_disagree_fail():
    result = one(run("link.mtu", node(far(neighbor=2048, cap=4096), verbs(active=4096))))
    assert result.status == Status.FAIL
    assert result.message == f"{CABLE}: switch port NeighborMTU 2048 != ours 4096"


def test_our_cap_is_named_when_our_end_holds_the_link_down():
    result = one(run("link.mtu", node(far(neighbor=2048, cap=4096), verbs(2048, 2048))))
    assert result.status == Status.FAIL
    assert "active MTU 2048 < 4096" in result.message
    assert "our MtuCap 2048 < 4096" in result.message
    assert "switch port MtuCap" not in result.message


def test_ours_from_our_own_portinfo_when_ibv_devinfo_did_not_run():
    local = port_info("local-portinfo", port=1, neighbor_mtu=1024, mtu_cap=4096)
    far_end = far(neighbor=1024, cap=4096).model_copy(update={"local_port_info": local})
    result = one(run("link.mtu", node(far_end, None)))
    assert result.status == Status.FAIL
    assert result.message.startswith(f"{CABLE}: active MTU 1024 < 4096")
    assert str(roles.partner("local-portinfo", "mlx5_0:1")) in result.evidence


def test_a_back_to_back_ca_is_called_the_far_ends_port():
    far_end = far(neighbor=2048, cap=2048, node_type="Channel Adapter",
                  description="hostB mlx5_0", port=1)  # fmt: skip
    result = one(run("link.mtu", node(far_end, None)))
    assert result.status == Status.FAIL
    assert "far end's port MtuCap 2048 < 4096" in result.message
    assert result.target == "mlx5_0:1<->hostB_mlx5_0/1"


def test_the_expected_mtu_comes_from_the_thresholds():
    th = Thresholds(expect_ib_mtu=2048)
    result = one(run("link.mtu", node(far(2048, 2048), verbs(2048, 4096)), th))
    assert result.status == Status.PASS, result
    unset = one(run("link.mtu", node(far(2048, 2048), verbs(2048)), Thresholds(expect_ib_mtu=None)))
    assert unset.status == Status.SKIP and "expect_ib_mtu" in unset.message
    above = one(run("link.mtu", node(far(), verbs()), th))
    assert above.status == Status.WARN and above.subject == "MTU 4096>2048"


def test_nothing_read_skips_with_both_reasons():
    unread = Unread(step="nodeinfo", kind="no-access", reason="the umad device may not be opened")
    far_end = Partner(unread=[unread])
    result = one(run("link.mtu", node(far_end, Listing(unusable="ibv_devinfo not installed"))))
    assert result.status == Status.SKIP
    assert "ibv_devinfo not installed" in result.message
    assert "the umad device may not be opened" in result.message
    assert result.target == "mlx5_0:1"


def test_not_collected_skips_saying_so():
    result = one(run("link.mtu", node(None, None)))
    assert result.status == Status.SKIP
    assert "ibv_devinfo was not collected" in result.message
    assert "the far end was not read" in result.message


def test_a_port_ibv_devinfo_did_not_list_is_said():
    result = one(run("link.mtu", node(None, verbs(name="mlx5_9"))))
    assert result.status == Status.SKIP
    assert "listed no InfiniBand active_mtu for mlx5_0 port 1" in result.message


def test_an_mtu_ibv_devinfo_gives_for_an_ethernet_port_is_not_graded_as_ib():
    """sysfs says InfiniBand, ibv_devinfo says Ethernet (a RoCE listing): its 1024 is no IB
    MTU; the far end's alone is graded."""
    text = (IBV_DEVINFO / "linux-rdma-2024-cx5-roce-two-pf-before-bonding.txt").read_text()
    roce = listing(text)
    assert any(p.link_layer == "Ethernet" for ca in roce.cas for p in ca.ports)
    name = roce.cas[0].name
    snap = snapshot([device(name, ports=[port(1)])])
    snap = snap.model_copy(update={"inventory": Inventory(ibv_devinfo=roce)})
    result = one(run("link.mtu", snap))
    assert result.status == Status.SKIP, result
    assert "listed no InfiniBand active_mtu" in result.message


def test_roce_ports_are_not_graded():
    assert run("link.mtu", node(None, verbs(active=1024), link_layer="Ethernet")) == []


def test_a_port_not_active_is_a_skip_left_to_link_state():
    result = one(run("link.mtu", node(far(), verbs(), state=2, phys_state=5)))
    assert result.status == Status.SKIP and "not ACTIVE" in result.message
