"""The history's Prometheus families (``ibdiag.render.prometheus_history``), checked by promtool."""

from __future__ import annotations

from datetime import timedelta

from prometheus_text import parse, promtool_check
from snapshots import device, loaded_registry, snapshot
from test_history_checks import ACTIVE, DOWN, T0, Node

from ibdiag.grade import grade
from ibdiag.render.prometheus import render
from ibdiag.thresholds import Thresholds

PORT = (("device", "mlx5_3"), ("port", "1"), ("ib_port", "mlx5_3:1"))


def metrics(snap):
    text = render(grade(snap, loaded_registry(), Thresholds(), "quick"))
    promtool_check(text)
    return parse(text)


def test_events_last_change_and_flapping_of_a_port_that_flapped(tmp_path):
    node = Node(str(tmp_path / "h.db"))
    node.run(T0, ACTIVE)
    for hour in (1, 2, 3):
        node.flap(T0 + timedelta(hours=hour), 30)
    node.link_downed += 1  # one more between two runs, unseen
    values = metrics(node.run(T0 + timedelta(hours=4), ACTIVE))
    assert values[("ibdiag_port_link_down_events_total", PORT)] == 4
    assert values[("ibdiag_port_flapping", PORT)] == 1
    last = values[("ibdiag_port_last_state_change_timestamp_seconds", PORT)]
    assert last == (T0 + timedelta(hours=4)).timestamp()  # the unseen one's bound


def test_a_quiet_port_counts_nothing_and_an_open_outage_is_its_last_change(tmp_path):
    node = Node(str(tmp_path / "h.db"))
    node.run(T0, ACTIVE)
    values = metrics(node.run(T0 + timedelta(hours=1), ACTIVE))
    assert values[("ibdiag_port_link_down_events_total", PORT)] == 0
    assert values[("ibdiag_port_flapping", PORT)] == 0
    assert ("ibdiag_port_last_state_change_timestamp_seconds", PORT) not in values
    node.run(T0 + timedelta(hours=2), DOWN)
    values = metrics(node.run(T0 + timedelta(hours=2, minutes=10), DOWN))
    assert (
        values[("ibdiag_port_last_state_change_timestamp_seconds", PORT)]
        == (T0 + timedelta(hours=2)).timestamp()
    )
    assert values[("ibdiag_port_flapping", PORT)] == 1  # link.drop: down 10 minutes


def test_no_history_no_families():
    values = metrics(snapshot([device("mlx5_0")]))
    assert not [name for name, _ in values if "link_down_events" in name or "flapping" in name]
