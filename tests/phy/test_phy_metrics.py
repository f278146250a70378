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


def test_hwmon_temperatures_and_their_crit_per_sensor():
    from test_phy_temperature import asic, hca, module

    values = metrics(snapshot([hca(asic(), module(now=61.5))]))
    asic_labels = (("device", "mlx5_0"), ("sensor", "asic"), ("kind", "asic"))
    module_labels = (("device", "mlx5_0"), ("sensor", "module 0"), ("kind", "module"))
    assert values[("ibdiag_hca_temperature_celsius", asic_labels)] == 47.0
    assert values[("ibdiag_hca_temperature_crit_celsius", asic_labels)] == 105.0
    assert values[("ibdiag_hca_temperature_celsius", module_labels)] == 61.5
    unread = module(now=None, problems=["temp2_input: N/A"])
    values = metrics(snapshot([hca(unread)]))
    assert ("ibdiag_hca_temperature_celsius", module_labels) not in values
    assert values[("ibdiag_hca_temperature_crit_celsius", module_labels)] == 70.0


def test_module_ber_optics_temperature_and_cable_identity():
    from module_captures import HEALTHY_NAME, capture

    from ibdiag.families.module import parse_module

    reading = parse_module(capture(HEALTHY_NAME)).model_copy(
        update={"tool": "mlxlink", "outcome": RunOutcome(command="mlxlink")}
    )
    ib = port(1).model_copy(update={"facts": {"module": reading}})
    values = metrics(snapshot([device("mlx5_0", [ib])]))
    assert values[("ibdiag_port_module_temperature_celsius", PORT)] == reading.temperature_c
    assert values[("ibdiag_port_raw_ber", PORT)] == reading.raw_ber
    assert values[("ibdiag_port_effective_ber", PORT)] == reading.effective_ber
    lane1 = reading.lanes[1]
    assert values[("ibdiag_port_module_rx_power_dbm", (*PORT, ("lane", "1")))] == lane1.rx_power_dbm
    assert (
        values[("ibdiag_port_module_tx_bias_amperes", (*PORT, ("lane", "1")))]
        == lane1.tx_bias_ma / 1000
    )
    (info,) = [labels for name, labels in values if name == "ibdiag_port_cable_info"]
    assert dict(info)["part_number"] == "T-F4GS-BV0" and dict(info)["lot"] == "AB"
    assert dict(info)["serial"] == "CWJH05025502589" and dict(info)["length_m"] == "50"
    assert dict(info)["firmware"] == ""  # N/A in the capture: unknown, never a made-up value
