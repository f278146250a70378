"""``render_text``: the fleet's answer on a terminal - verdict line first, counts, then each
section in the order an admin acts on it; a healthy fleet is three lines; nothing read from a
node (host names, reasons, switch names, file names) can steer the terminal or forge a line."""

from __future__ import annotations

from datetime import datetime, timezone

from ibdiag.fleet.render_text import render_text
from ibdiag.fleet.report import (
    Drift,
    DriftValue,
    FleetReport,
    FleetSettings,
    NodeGroup,
    Outlier,
    RailMisplacement,
    ReadProblem,
    SuspectSwitch,
    SwitchPort,
)

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)


def fleet(**sections) -> FleetReport:
    fields = dict(
        tool_version="0.1.0",
        generated_at=NOW,
        settings=FleetSettings(),
        verdict="OK",
        verdict_reason="all 4 nodes OK",
        nodes_read=4,
        counts={"OK": 4, "WARNING": 0, "CRITICAL": 0, "UNKNOWN": 0},
    )
    fields.update(sections)
    return FleetReport(**fields)


def test_a_healthy_fleet_is_its_verdict_and_counts():
    assert render_text(fleet()) == (
        "IBDIAG FLEET OK - all 4 nodes OK (4 nodes read)\n"
        "nodes: OK 4, WARNING 0, CRITICAL 0, UNKNOWN 0\n"
    )


def switch(name: str, suspect: bool, ports: int) -> SuspectSwitch:
    return SuspectSwitch(
        peer_guid="0x0002c90300a1b2c3" if suspect else None,
        peer_name=name,
        failing_ports=[
            SwitchPort(
                peer_port=20 + n,
                host=f"gpu{n:03d}",
                target="mlx5_3:1",
                checks=["counters.partner", "link.partner"],
            )
            for n in range(1, ports + 1)
        ],
        failing_nodes=f"gpu[001-{ports:03d}]" if ports else "",
        failing_node_count=ports,
        attached_node_count=16,
        attached_port_count=20,
        suspect=suspect,
    )


SLOW_017 = Outlier(
    host="gpu017",
    metric="ib_write_bw_gbps",
    rail=3,
    value=312.4,
    median=392.0,
    mad=2.1,
    gap=-0.2031,
    peers=64,
    direction="low",
)
ERRING_018 = Outlier(
    host="gpu018",
    metric="error_rate:partner:symbol_error",
    rail=3,
    value=40.0,
    median=0.0,
    mad=0.0,
    gap=40.0,
    peers=64,
    direction="high",
)


def outlying(switch: SuspectSwitch) -> SuspectSwitch:
    """``switch`` with two outlying ports (gpu017's slow rail 3, gpu018's erring far end)."""
    return switch.model_copy(
        update={
            "outlying_ports": [
                SwitchPort(peer_port=37, host="gpu017", target="mlx5_3:1", outliers=[SLOW_017]),
                SwitchPort(peer_port=38, host="gpu018", target="mlx5_3:1", outliers=[ERRING_018]),
            ],
            "outlying_nodes": "gpu[017-018]",
            "outlying_node_count": 2,
        }
    )


def test_every_section_in_order():
    report = fleet(
        verdict="CRITICAL",
        verdict_reason="3 nodes CRITICAL, 1 expected node missing",
        nodes_read=531,
        counts={"OK": 500, "WARNING": 20, "CRITICAL": 10, "UNKNOWN": 1, "MISSING": 1},
        drain=[
            NodeGroup(reason="ibdiag: mlx5_6:1 link.state 2: INIT", nodes="gpu[017,033]", count=2)
        ],
        switch_suspect=[
            NodeGroup(reason="ibdiag: mlx5_3:1 counters.partner", nodes="gpu[001-009]", count=9)
        ],
        warnings=[NodeGroup(reason="ibdiag: mlx5_0:1 counters.rate", nodes="gpu044", count=1)],
        unknown=[NodeGroup(reason="no InfiniBand device found", nodes="login1", count=1)],
        missing=NodeGroup(reason="expected, no report", nodes="gpu128", count=1),
        outliers=[
            SLOW_017,
            ERRING_018,
            Outlier(
                host="gpu020",
                metric="nccl_tests_busbw_gbytes",
                value=150.0,
                median=180.0,
                mad=1.5,
                gap=-0.1667,
                peers=64,
                direction="low",
            ),
        ],
        drift=[
            Drift(
                attribute="fw_ver",
                rail=0,
                majority="28.39.1002",
                majority_count=495,
                others=[DriftValue(value="28.36.1010", nodes="gpu[017,033]", count=2)],
            ),
            Drift(
                attribute="kernel_release",
                majority="5.15.0-1068-azure",
                majority_count=1,
                others=[DriftValue(value="(unknown)", nodes="gpu099", count=1)],
            ),
        ],
        switches=[
            switch("leaf07", True, 9),
            outlying(switch("leaf09", False, 1)),
            outlying(switch("leaf11", False, 0)),  # outlying ports only
        ],
        rail_misplacements=[
            RailMisplacement(
                host="gpu044",
                rail=2,
                target="mlx5_2:1",
                peer_name="leaf15",
                expected=["leaf03", "leaf04"],
            )
        ],
        read_problems=[ReadProblem(source="/r/gpu050.json", reason="truncated JSON")],
        duplicates=[
            NodeGroup(reason="2 reports: used b.json, not a.json", nodes="gpu001", count=1)
        ],
        read_notes=[NodeGroup(reason="report schema_version 2 is newer", nodes="gpu060", count=1)],
    )
    assert render_text(report) == "\n".join(EXPECTED) + "\n"


EXPECTED = [
    "IBDIAG FLEET CRITICAL - 3 nodes CRITICAL, 1 expected node missing (531 nodes read)",
    "nodes: OK 500, WARNING 20, CRITICAL 10, UNKNOWN 1, MISSING 1",
    "",
    "drain (CRITICAL, by reason):",
    "  ibdiag: mlx5_6:1 link.state 2: INIT: gpu[017,033] (2)",
    "",
    "switch-suspect (failing on a suspect switch: ticket the switch, not the nodes):",
    "  ibdiag: mlx5_3:1 counters.partner: gpu[001-009] (9)",
    "",
    "switches to ticket:",
    "  leaf07 (0x0002c90300a1b2c3): 9 of 16 attached nodes fail on it (9 of 20 node ports: 21, "
    "22, 23, 24, 25, 26, 27, 28, 29): gpu[001-009]",
    *[
        f"    port {20 + n} <- gpu{n:03d} mlx5_3:1: counters.partner, link.partner"
        for n in range(1, 9)
    ],
    "    and 1 more port",
    "",
    "switches with failing or outlying ports (below the suspect threshold):",
    "  leaf09: 1 of 16 attached nodes fail on it (1 of 20 node ports: 21): gpu[001-001]; "
    "2 of 16 attached nodes outlying (2 of 20 node ports: 37, 38): gpu[017-018]",
    "    port 21 <- gpu001 mlx5_3:1: counters.partner, link.partner",
    "    port 37 <- gpu017 mlx5_3:1: outlier ib_write_bw_gbps 312 vs median 392 (-20.3%)",
    "    port 38 <- gpu018 mlx5_3:1: outlier error_rate:partner:symbol_error 40 vs median 0 "
    "(+4000.0%)",
    "  leaf11: 2 of 16 attached nodes outlying (2 of 20 node ports: 37, 38): gpu[017-018]",
    "    port 37 <- gpu017 mlx5_3:1: outlier ib_write_bw_gbps 312 vs median 392 (-20.3%)",
    "    port 38 <- gpu018 mlx5_3:1: outlier error_rate:partner:symbol_error 40 vs median 0 "
    "(+4000.0%)",
    "",
    "warnings (by reason):",
    "  ibdiag: mlx5_0:1 counters.rate: gpu044 (1)",
    "",
    "unknown (no verdict; by reason):",
    "  no InfiniBand device found: login1 (1)",
    "",
    "outliers (against their rail's peers):",
    "  gpu017 rail 3 ib_write_bw_gbps 312 vs median 392 (-20.3%, low; 64 peers, MAD 2.1)",
    "  gpu018 rail 3 error_rate:partner:symbol_error 40 vs median 0 (+4000.0%, high; 64 peers, "
    "MAD 0)",
    "  gpu020 node-wide nccl_tests_busbw_gbytes 150 vs median 180 (-16.7%, low; 64 peers, MAD 1.5)",
    "",
    "drift (the majority, then the others):",
    "  fw_ver rail 0: 28.39.1002 on 495 nodes; 28.36.1010 on gpu[017,033] (2)",
    "  kernel_release: 5.15.0-1068-azure on 1 node; (unknown) on gpu099 (1)",
    "",
    "rail misplacements (a cable in another rail's switch):",
    "  gpu044 rail 2 mlx5_2:1 lands on leaf15; rail 2 of the others: leaf03, leaf04",
    "",
    "missing (expected, no report):",
    "  gpu128 (1)",
    "",
    "read problems (inputs that gave no node):",
    "  /r/gpu050.json: truncated JSON",
    "",
    "duplicates (one host, several reports):",
    "  2 reports: used b.json, not a.json: gpu001 (1)",
    "",
    "read with a caveat:",
    "  report schema_version 2 is newer: gpu060 (1)",
]


def test_nothing_read_from_a_node_can_steer_the_terminal_or_forge_a_line():
    evil = "gpu\x1b]0;owned\x07001\nIBDIAG FLEET OK - forged\r\u202e"
    report = fleet(
        verdict="CRITICAL",
        verdict_reason=f"1 node CRITICAL: {evil}",
        drain=[NodeGroup(reason=evil, nodes=evil, count=1)],
        outliers=[
            Outlier(
                host=evil,
                metric=evil,
                rail=0,
                value=1.0,
                median=2.0,
                mad=0.1,
                gap=-0.5,
                peers=5,
                direction=evil,
            )
        ],
        drift=[
            Drift(
                attribute=evil,
                majority=evil,
                majority_count=3,
                others=[DriftValue(value=evil, nodes=evil, count=1)],
            )
        ],
        switches=[
            SuspectSwitch(
                peer_guid=evil,
                peer_name=evil,
                failing_ports=[SwitchPort(peer_port=1, host=evil, target=evil, checks=[evil])],
                failing_nodes=evil,
                failing_node_count=1,
                attached_node_count=1,
                attached_port_count=2,
                suspect=True,
                outlying_ports=[
                    SwitchPort(
                        peer_port=2,
                        host=evil,
                        target=evil,
                        outliers=[
                            Outlier(
                                host=evil,
                                metric=evil,
                                rail=0,
                                value=1.0,
                                median=2.0,
                                mad=0.1,
                                gap=-0.5,
                                peers=5,
                                direction=evil,
                            )
                        ],
                    )
                ],
                outlying_nodes=evil,
                outlying_node_count=1,
            )
        ],
        rail_misplacements=[
            RailMisplacement(host=evil, rail=1, target=evil, peer_name=evil, expected=[evil])
        ],
        missing=NodeGroup(reason=evil, nodes=evil, count=1),
        read_problems=[ReadProblem(source=evil, reason=evil)],
        duplicates=[NodeGroup(reason=evil, nodes=evil, count=1)],
        read_notes=[NodeGroup(reason=evil, nodes=evil, count=1)],
    )
    text = render_text(report)
    lines = text.split("\n")
    assert lines[-1] == "" and not any(line.startswith("IBDIAG") for line in lines[1:])
    assert not any(char in text for char in "\x1b\x07\r\u202e")
    assert "gpu\\x1b]0;owned\\x07001\\x0aIBDIAG FLEET OK - forged\\x0d\\u202e" in text
    for line in lines:  # every line is one of ours: a heading, an item, or empty
        assert line == "" or line.startswith(("IBDIAG FLEET", "nodes:", "  ")) or line.endswith(":")


def test_drift_that_differs_only_by_rail_is_one_line():
    from ibdiag.fleet.render_text import drift_line, merged_rails
    from ibdiag.fleet.report import Drift, DriftValue

    off = [DriftValue(value="28.36.1010", nodes="gpu017", count=1)]
    same = [Drift(attribute="fw_ver", rail=r, majority="28.39.1002", majority_count=63,
                  others=off) for r in (0, 1, 2, 3, 5)]  # fmt: skip
    other = Drift(attribute="fw_ver", rail=4, majority="28.39.1002", majority_count=63,
                  others=[DriftValue(value="28.36.1010", nodes="gpu018", count=1)])  # fmt: skip
    kernel = Drift(attribute="kernel_release", majority="6.8.0", majority_count=63, others=off)
    lines = [drift_line(d, rails) for d, rails in merged_rails([*same[:4], other, same[4], kernel])]
    assert lines == [
        "  fw_ver rails 0-3,5: 28.39.1002 on 63 nodes; 28.36.1010 on gpu017 (1)",
        "  fw_ver rail 4: 28.39.1002 on 63 nodes; 28.36.1010 on gpu018 (1)",
        "  kernel_release: 6.8.0 on 63 nodes; 28.36.1010 on gpu017 (1)",
    ]


def test_a_rail_spanning_many_leaves_names_four_and_counts_the_rest():
    from ibdiag.fleet.render_text import misplacement_line
    from ibdiag.fleet.report import RailMisplacement

    item = RailMisplacement(host="gpu0044", rail=3, target="mlx5_3:1", peer_name="su1-rail5",
                            expected=[f"su{n}-rail3" for n in range(32)])  # fmt: skip
    assert misplacement_line(item) == (
        "  gpu0044 rail 3 mlx5_3:1 lands on su1-rail5; rail 3 of the others: "
        "su0-rail3, su1-rail3, su2-rail3, su3-rail3 and 28 more"
    )
