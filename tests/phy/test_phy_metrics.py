"""The physical layer's Prometheus families (``ibdiag.render.prometheus_phy``), checked by
promtool: FEC per lane on our port and the far end's."""

from __future__ import annotations

from fec_captures import capture
from partner_builders import LEAF_GUID, partner
from prometheus_text import parse, promtool_check
from snapshots import builtin_registry, device, port, snapshot
from test_fec_check import EXTENDED, RS, degraded, fec

from ibdiag.facts.fec import fec_role
from ibdiag.facts.outcome import NoData, RunOutcome
from ibdiag.grade import grade
from ibdiag.render.prometheus import render
from ibdiag.thresholds import Thresholds

PORT = (("device", "mlx5_0"), ("port", "1"), ("ib_port", "mlx5_0:1"))
PEER = (("peer_guid", LEAF_GUID), ("peer_name", "leaf07"), ("peer_port", "21"))


def metrics(snap):
    text = render(grade(snap, builtin_registry(), Thresholds(), "standard"))
    promtool_check(text)
    return parse(text)


def node(mine=None, far=None):
    facts = {"fec": mine} if mine is not None else {}
    ib = port(1).model_copy(
        update={"facts": facts, "partner": partner(fec=far) if far is not None else None}
    )
    return snapshot([device("mlx5_0", [ib])])


def test_each_lane_of_our_port_and_the_far_end_is_a_sample():
    mine = fec(degraded(EXTENDED, FECCorrectableBlockCtrLane2=777, FECUncorrectableBlockCtrLane1=3))
    values = metrics(node(mine, fec(RS)))
    lane = lambda n, unit: (("lane", str(n)), ("unit", unit))  # noqa: E731
    assert values[("ibdiag_port_fec_corrected_total", PORT + lane(2, "blocks"))] == 777
    assert values[("ibdiag_port_fec_uncorrectable_blocks_total", (*PORT, ("lane", "1")))] == 3
    total = mine.uncorrected_blocks
    assert values[("ibdiag_port_fec_uncorrectable_blocks_total", (*PORT, ("lane", "")))] == total
    far = fec(RS)
    symbols = far.lane_corrected()
    for number, value in symbols.items():
        key = ("ibdiag_partner_fec_corrected_total", PORT + PEER + lane(number, "symbols"))
        assert values[key] == value
    assert (
        values[("ibdiag_partner_fec_uncorrectable_blocks_total", PORT + PEER + (("lane", ""),))]
        == far.uncorrected_blocks
    )


def test_a_port_without_a_reading_has_no_sample_never_a_zero():
    refused = fec("").model_copy(
        update={
            "outcome": RunOutcome(
                role=fec_role("mlx5_0:1"),
                command="perfquery -T",
                no_data=NoData.NOT_SUPPORTED,
                reason="cannot query PortExtendedSpeedsCounters",
            )
        }
    )
    values = metrics(node(refused))
    assert not [name for name, _ in values if "_fec_" in name]
    assert not [name for name, _ in metrics(node()) if "_fec_" in name]


def test_the_captures_are_what_the_families_read():
    assert capture("handmade-T-extended-speeds-edr-hca.txt") == EXTENDED
