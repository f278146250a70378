"""Cable lots (issue 24): the fleet groups physical-layer findings by the cable's part number
and lot, and counts them on the far-end switch; read from real Report JSON through the view."""

from __future__ import annotations

from typing import List, Optional, Sequence

from test_fleet_analysis import hosts, node, port

from ibdiag.fleet.analyze import analyze
from ibdiag.fleet.cables import find_cable_lots
from ibdiag.fleet.node import CableMake, PortSummary, summarize
from ibdiag.fleet.render_html import render_html
from ibdiag.fleet.render_text import render_text
from ibdiag.fleet.report import FleetSettings
from ibdiag.fleet.switches import blame_switches

SETTINGS = FleetSettings()
PART = "MMA4Z00-NS400"
BAD_LOT = "230512AB"


def cabled(
    rail: int,
    lot: Optional[str],
    checks: Sequence[str] = (),
    switch: str = "leaf07",
    peer_port: int = 1,
    part: str = PART,
) -> PortSummary:
    """``test_fleet_analysis.port`` with its cable's make: a port with checks warns."""
    found = port(rail, switch, peer_port, status="warn" if checks else "pass", checks=checks)
    return found.model_copy(
        update={"cable": CableMake(vendor="Mellanox", part_number=part, lot=lot)}
    )


def fleet(bad_ports: int = 6, lot_size: int = 8) -> List:
    """16 nodes of 4 rails: ``lot_size`` cables of BAD_LOT (on rail 0 of the first nodes), of
    which ``bad_ports`` warn phy.fec or phy.ber; the rest are lot 230101AA and healthy, but for
    one stray phy.temperature on a good-lot cable."""
    nodes = []
    for index, host in enumerate(hosts(16)):
        ports = []
        for rail in range(4):
            lot = BAD_LOT if rail == 0 and index < lot_size else "230101AA"
            checks: List[str] = []
            if lot == BAD_LOT and index < bad_ports:
                checks = ["phy.fec"] if index % 2 else ["phy.ber", "phy.fec"]
            if (index, rail) == (12, 3):
                checks = ["phy.temperature"]
            ports.append(
                cabled(
                    rail,
                    lot,
                    checks,
                    peer_port=index * 4 + rail + 1,
                    switch="leaf07" if index < 8 else "leaf09",
                )
            )
        nodes.append(
            node(
                host,
                ports=ports,
                verdict="WARNING" if any(p.failing_checks for p in ports) else "OK",
            )
        )
    return nodes


def test_a_bad_lot_is_named_with_its_share_of_the_fleets_cables():
    (lot,) = find_cable_lots(fleet(), SETTINGS)
    assert (lot.part_number, lot.lot, lot.vendor) == (PART, BAD_LOT, "Mellanox")
    assert (lot.port_count, lot.cable_count, lot.node_count) == (6, 8, 6)
    assert lot.nodes == "gpu[001-006]"
    assert lot.checks == ["phy.ber", "phy.fec"]
    assert lot.switches == ["leaf07"]
    assert [p.far_end for p in lot.ports][:2] == ["leaf07/1", "leaf07/5"]


def test_one_bad_cable_is_its_nodes_finding_not_a_lot():
    assert find_cable_lots(fleet(bad_ports=1), SETTINGS) == []
    assert find_cable_lots(fleet(bad_ports=1), FleetSettings(cable_lot_min_ports=1)) != []


def test_lots_are_told_apart_by_lot_and_part_and_unknown_lots_group_together():
    nodes = [
        node(h, ports=[cabled(0, lot, ["phy.optics"], part=part)])
        for h, (part, lot) in zip(
            hosts(7),
            [
                (PART, "A1"),
                (PART, "A1"),
                (PART, "B2"),
                ("OTHER", "A1"),
                ("OTHER", "A1"),
                (PART, None),
                (PART, None),
            ],
        )
    ]
    found = {(lot.part_number, lot.lot): lot.port_count for lot in find_cable_lots(nodes, SETTINGS)}
    assert found == {(PART, "A1"): 2, ("OTHER", "A1"): 2, (PART, None): 2}


def test_ports_without_a_module_reading_or_phy_finding_count_for_nothing():
    plain = PortSummary(
        target="mlx5_0:1", device="mlx5_0", number=1, rail=0, failing_checks=["phy.fec"]
    )
    other = cabled(0, BAD_LOT, ["link.flaps", "counters.errors"])
    nodes = [node(h, ports=[p]) for h, p in zip(hosts(4), [plain, plain, other, other])]
    assert find_cable_lots(nodes, SETTINGS) == []


def test_physical_findings_are_counted_on_their_switch_and_never_make_a_suspect():
    switches = {s.peer_name: s for s in blame_switches(fleet(), SETTINGS)}
    assert (switches["leaf07"].physical_port_count, switches["leaf07"].physical_nodes) == (
        6,
        "gpu[001-006]",
    )
    assert not switches["leaf07"].suspect and switches["leaf07"].failing_ports == []
    assert (switches["leaf09"].physical_port_count, switches["leaf09"].physical_nodes) == (
        1,
        "gpu013",
    )


def test_the_text_and_html_reports_name_the_lot():
    report = analyze(fleet(), SETTINGS)
    text = render_text(report)
    assert (
        f"  6 of 8 cables of part {PART} (Mellanox), lot {BAD_LOT}: phy.ber, phy.fec on 6 ports "
        "of 6 nodes gpu[001-006]; far ends leaf07"
    ) in text
    assert "    gpu001 mlx5_0:1<->leaf07/1: phy.ber, phy.fec" in text
    assert "6 node ports with physical-layer findings on it: gpu[001-006]" in text
    page = render_html(report)
    assert f"<code>{BAD_LOT}</code>" in page and "Cable lots (1)" in page


def test_the_lot_is_read_from_a_reports_port_facts():
    """The view reads ``facts.module.identity`` of each port; a damaged identity costs only
    the cable make."""
    report = {
        "verdict": "WARNING",
        "results": [{"check_id": "phy.ber", "target": "mlx5_0:1", "status": "warn"}],
        "snapshot": {
            "host": "gpu001",
            "devices": [
                {
                    "name": "mlx5_0",
                    "ports": [
                        {
                            "number": 1,
                            "link_layer": "InfiniBand",
                            "facts": {
                                "module": {
                                    "identity": {
                                        "vendor": "Mellanox",
                                        "part_number": PART,
                                        "date_code": BAD_LOT[:6],
                                        "lot": BAD_LOT[6:],
                                        "serial": "MT2318FT01234",
                                    }
                                }
                            },
                        },
                        {
                            "number": 2,
                            "link_layer": "InfiniBand",
                            "facts": {"module": {"identity": {"part_number": 7}}},
                        },
                        {"number": 3, "link_layer": "InfiniBand", "facts": {"module": []}},
                        {
                            "number": 4,
                            "link_layer": "InfiniBand",
                            "facts": {
                                "module": {"identity": {"part_number": PART, "date_code": "230101"}}
                            },
                        },
                    ],
                }
            ],
        },
    }
    ports = summarize(report, "gpu001.json").ports
    assert ports[0].cable == CableMake(vendor="Mellanox", part_number=PART, lot=BAD_LOT)
    assert ports[0].failing_checks == ["phy.ber"]
    assert ports[1].cable is None and ports[2].cable is None
    assert ports[3].cable == CableMake(part_number=PART, lot="230101")
