"""The MTU families (``ibdiag.render.prometheus_mtu``), written through the exposition the node
renderer uses and checked by promtool: our port's active/max MTU (ibv_devinfo) and the far
end's NeighborMTU/MtuCap (PortInfo)."""

from __future__ import annotations

from partner_builders import LEAF_GUID, partner, port_info
from prometheus_text import parse, promtool_check
from snapshots import builtin_registry, device, port, snapshot

from ibdiag.facts.inventory import Inventory, ListedCA, ListedPort, Listing
from ibdiag.grade import grade
from ibdiag.render.prometheus import _Exposition
from ibdiag.render.prometheus_mtu import add_mtu
from ibdiag.thresholds import Thresholds

PORT = (("device", "mlx5_0"), ("port", "1"), ("ib_port", "mlx5_0:1"))
PEER = (("peer_guid", LEAF_GUID), ("peer_name", "leaf07"), ("peer_port", "21"))


def metrics(snap):
    exposition = _Exposition()
    add_mtu(exposition.family, grade(snap, builtin_registry(), Thresholds(), "standard"))
    text = exposition.text()
    if text:
        promtool_check(text)
    return parse(text) if text else {}


def node(far=None, active=4096, max_mtu=4096, listed=True):
    snap = snapshot([device("mlx5_0", [port(1).model_copy(update={"partner": far})])])
    ports = [ListedPort(number=1, active_mtu=active, max_mtu=max_mtu)]
    listing = Listing(cas=[ListedCA(name="mlx5_0", ports=ports)]) if listed else None
    return snap.model_copy(update={"inventory": Inventory(ibv_devinfo=listing)})


def test_both_ends_mtus_are_samples():
    far = partner(port_info=port_info(neighbor_mtu=2048, mtu_cap=2048))
    values = metrics(node(far, active=2048, max_mtu=4096))
    assert values[("ibdiag_port_active_mtu_bytes", PORT)] == 2048
    assert values[("ibdiag_port_max_mtu_bytes", PORT)] == 4096
    assert values[("ibdiag_partner_neighbor_mtu_bytes", PORT + PEER)] == 2048
    assert values[("ibdiag_partner_mtu_cap_bytes", PORT + PEER)] == 2048


def test_what_was_not_read_is_no_sample_never_a_zero():
    values = metrics(node(partner(port_info=port_info()), active=None, max_mtu=None))
    assert not [key for key in values if "mtu" in key[0]], values
    assert metrics(node(None, listed=False)) == {}


def test_a_far_end_nothing_names_gives_no_sample():
    far = partner(node_guid=None, description=None, port_info=port_info(mtu_cap=4096))
    values = metrics(node(far))
    assert ("ibdiag_port_active_mtu_bytes", PORT) in values
    assert not [key for key in values if key[0].startswith("ibdiag_partner_")], values
