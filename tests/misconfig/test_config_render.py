"""The configuration in the report's renderers: the Prometheus families of
``ibdiag.render.prometheus_config`` (checked by promtool) and the HTML table of
``ibdiag.render.html_config``, coloured by the configuration checks."""

from __future__ import annotations

from prometheus_text import parse, promtool_check
from snapshots import builtin_registry, char_devices_of, device, port, snapshot

from ibdiag.grade import grade
from ibdiag.render import html
from ibdiag.render.html_config import config_rows
from ibdiag.render.prometheus import render
from ibdiag.thresholds import Thresholds

PORT0 = (("device", "mlx5_0"), ("port", "1"), ("ib_port", "mlx5_0:1"))


def _node():
    built = [
        device("mlx5_0", ports=[port(lid=0x12, sm_lid=1, pkeys=(0xFFFF, 0x8001))]),
        device("mlx5_1", ports=[port(lid=0x13, sm_lid=1, pkeys=(0xFFFF, 0x0001))]),
        device("mlx5_2", ports=[port(link_layer="Ethernet")]),
    ]
    found = char_devices_of(built)
    return snapshot(built, char_devices=found.model_copy(update={"verbs": found.verbs[:2]}))


def _report():
    return grade(_node(), builtin_registry(), Thresholds(expect_pkeys=["0x8001"]))


def test_lids_pkeys_and_char_devices_are_samples():
    text = render(_report())
    promtool_check(text)
    values = parse(text)
    assert values[("ibdiag_port_lid", PORT0)] == 0x12
    assert values[("ibdiag_port_sm_lid", PORT0)] == 1
    full = (("pkey", "0x8001"), ("index", "1"), ("membership", "full"))
    assert values[("ibdiag_port_pkey_info", PORT0 + full)] == 1
    limited = (("device", "mlx5_1"), ("port", "1"), ("ib_port", "mlx5_1:1"),
               ("pkey", "0x0001"), ("index", "1"), ("membership", "limited"))  # fmt: skip
    assert values[("ibdiag_port_pkey_info", limited)] == 1
    assert values[("ibdiag_hca_char_devices", (("device", "mlx5_1"), ("kind", "uverbs")))] == 1
    assert values[("ibdiag_hca_char_devices", (("device", "mlx5_2"), ("kind", "uverbs")))] == 0
    assert not [key for key in values if key[0] == "ibdiag_port_lid" and "mlx5_2" in str(key)]


def test_the_html_table_has_a_row_per_infiniband_port_coloured_by_the_checks():
    rows = config_rows(_report())
    assert [(r["target"], r["status"]) for r in rows] == [
        ("mlx5_0:1", "pass"),
        ("mlx5_1:1", "fail"),
    ]
    assert rows[0]["address"] == "LID 0x12, SM 0x1"
    assert rows[0]["pkeys"] == "0xffff 0x8001 (128 slots)"
    assert rows[0]["devices"] == "uverbs0, umad0"
    assert rows[1]["findings"] == [
        "holds 0x0001 (limited member) at index 1 where 0x8001 is expected"
    ]
    page = html.render(_report())
    section = page[page.index("<h2>Configuration</h2>") :]
    assert "0xffff 0x0001 (128 slots)" in section and '<tr class="s-fail">' in section


def test_no_infiniband_port_no_section():
    only_roce = snapshot([device("mlx5_0", ports=[port(link_layer="Ethernet")])])
    report = grade(only_roce, builtin_registry(), Thresholds())
    assert config_rows(report) == [] and "<h2>Configuration</h2>" not in html.render(report)


def test_the_mtu_cell_shows_the_switch_ports_portinfo_mtus():
    from partner_builders import partner
    from partner_builders import port_info as far_info

    far = partner(port_info=far_info(neighbor_mtu=2048, mtu_cap=2048))
    ib = port(lid=0x12, sm_lid=1).model_copy(update={"partner": far})
    report = grade(snapshot([device("mlx5_0", ports=[ib])]), builtin_registry(), Thresholds())
    (row,) = config_rows(report)
    assert row["mtu"] == "switch port 2048, cap 2048"
