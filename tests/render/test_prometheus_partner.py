"""The far end of each cable in the Prometheus exposition: ``ibdiag_partner_*``.

The node is a ``sysfs_builder`` tree whose ports' far ends are read by ``collect`` through stub
``smpquery``/``perfquery`` printing the real tools' outputs against the ibsim simulator
(tests/captures/ibsim-partner): mlx5_0 plugs into switch ``leaf07`` port 1 (whose plain perfquery
shows SymbolErrorCounter 1234 and LinkDownedCounter 3, and here PortRcvErrors 5, so that its
receive error details are read too: perfquery -E runs only when PortRcvErrors or
PortRcvSwitchRelayErrors is not 0), mlx5_1 into another HCA back to back
(``hostB mlx5_0``), mlx5_2's port is down (no far end is read). Every rendering is checked by the
strict parser of tests/prometheus_text.py and by ``promtool check metrics``.
"""

from __future__ import annotations

import glob
import re
from pathlib import Path
from typing import Dict, Tuple

import pytest
from conftest import REPO
from partner_stub_node import SWITCH, partner_tools
from prometheus_text import parse, promtool_check
from snapshots import loaded_registry
from sysfs_builder import mlx5_node, write_node

from ibdiag.collect import collect
from ibdiag.counters.catalogue import catalogue
from ibdiag.facts.partner import Partner, short_name
from ibdiag.facts.perfquery import PmaReading
from ibdiag.grade import grade
from ibdiag.model import Report, Snapshot
from ibdiag.render import prometheus
from ibdiag.render import prometheus_partner as far_end
from ibdiag.render.options import RenderOptions
from ibdiag.thresholds import Thresholds

B2B = {
    "device": "mlx5_1",
    "port": "1",
    "ib_port": "mlx5_1:1",
    "peer_guid": "0x0000000000100002",
    "peer_name": "hostB_mlx5_0",  # "hostB mlx5_0": no "MF0;name:" form, whitespace as _
    "peer_port": "1",
}
HDR_4X = 4 * 50e9 / 8  # 200 Gb/s, as sysfs says "200 Gb/sec (4X HDR)"
# switch-hdr-errors-perfquery.txt and switch-hdr-perfquery-E.txt, as the families name them.
SWITCH_COUNTERS = {
    "symbol_error": 1234,
    "link_error_recovery": 0,
    "link_downed": 3,
    "rcv_errors": 5,  # not the capture's 0 (partner_tools): so -E is read
    "rcv_remote_physical_errors": 0,
    "rcv_switch_relay_errors": 0,
    "xmit_discards": 0,
    "xmit_constraint_errors": 0,
    "rcv_constraint_errors": 0,
    "local_link_integrity_errors": 0,
    "excessive_buffer_overrun_errors": 0,
    "qp1_dropped": 0,
    "vl15_dropped": 0,
    "xmit_data_bytes": 1656 * 4,  # PortXmitData, 4-byte words
    "rcv_data_bytes": 1728 * 4,
    "xmit_packets": 23,
    "rcv_packets": 24,
    "xmit_wait": 0,
    # perfquery -E: PortRcvErrorDetails
    "local_physical_errors": 0,
    "malformed_pkt_errors": 0,
    "buffer_overrun_errors": 0,
    "dlid_mapping_errors": 0,
    "vl_mapping_errors": 0,
    "looping_errors": 0,
}
GAUGES = (
    "ibdiag_partner_port_state",
    "ibdiag_partner_phys_state",
    "ibdiag_partner_width_active",
    "ibdiag_partner_rate_bytes_per_second",
    "ibdiag_partner_neighbor_mtu_bytes",  # ibdiag.render.prometheus_mtu
    "ibdiag_partner_mtu_cap_bytes",
)
HOSTILE = 'MF0;sw"7\\x:MQM9700/U1\nline two "quoted" \\ back\\\\slash\ttab'
ODD = 'Odd counter, "x"\\y'

Samples = Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float]


def partner_node(tmp_path: Path) -> Snapshot:
    sysfs, procfs, stub = partner_tools(tmp_path)
    options = {"path": stub.path, "timeout_s": 10.0, "deadline_s": 25.0}
    return collect(sysfs, procfs, {"sysfs", "partner"}, options)


def report_of(snapshot: Snapshot) -> Report:
    # the far ends answer as ibsim did: every link at MTU 2048 (link.mtu names the cable too)
    return grade(snapshot, loaded_registry(), Thresholds(expect_ib_mtu=2048), "standard")


def with_partner(snapshot: Snapshot, device: str, partner) -> Snapshot:
    """``snapshot`` with ``device``'s port 1 far end replaced (models are frozen: new ones)."""
    devices = []
    for dev in snapshot.devices:
        if dev.name == device:
            port = dev.ports[0].model_copy(update={"partner": partner})
            dev = dev.model_copy(update={"ports": [port, *dev.ports[1:]]})
        devices.append(dev)
    return snapshot.model_copy(update={"devices": devices})


def rendered(report: Report) -> Tuple[str, Samples]:
    text = prometheus.render(report, RenderOptions(duration_s=0.5))
    samples = parse(text)
    promtool_check(text)
    return text, samples


def partner_samples(samples: Samples, ib_port: str) -> Samples:
    return {
        key: value
        for key, value in samples.items()
        if key[0].startswith("ibdiag_partner_") and ("ib_port", ib_port) in key[1]
    }


def labels(base: Dict[str, str], **more: str) -> Tuple[Tuple[str, str], ...]:
    return tuple({**base, **more}.items())


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Snapshot:
    return partner_node(tmp_path_factory.mktemp("partner-node"))


# --- the chain's far ends, rendered ------------------------------------------------------------


def test_a_switch_partner_has_exactly_these_samples(node: Snapshot) -> None:
    report = report_of(node)
    _, samples = rendered(report)
    peer = labels(SWITCH)
    expected = {
        (
            "ibdiag_partner_info",
            labels(SWITCH, peer_type="Switch", peer_description="MF0;leaf07:MQM8700/U1"),
        ): 1,
        ("ibdiag_partner_port_state", peer): 4,  # Active
        ("ibdiag_partner_phys_state", peer): 5,  # LinkUp
        ("ibdiag_partner_width_active", peer): 4,  # 4X
        ("ibdiag_partner_rate_bytes_per_second", peer): HDR_4X,
        ("ibdiag_partner_neighbor_mtu_bytes", peer): 2048,  # ibsim's PortInfo: MTU 2048
        ("ibdiag_partner_mtu_cap_bytes", peer): 2048,
        ("ibdiag_partner_status", peer): 0,  # link.partner and counters.partner pass
    }
    for stem, value in SWITCH_COUNTERS.items():
        expected[(f"ibdiag_partner_{stem}_total", peer)] = value
    assert partner_samples(samples, "mlx5_0:1") == expected
    # The cable's checks name it the same way the labels do.
    targets = {r.target for r in report.results if r.check_id.endswith(".partner")}
    assert "mlx5_0:1<->leaf07/1" in targets


def test_a_back_to_back_partner_is_a_channel_adapter(node: Snapshot) -> None:
    _, samples = rendered(report_of(node))
    found = partner_samples(samples, "mlx5_1:1")
    info = labels(B2B, peer_type="Channel Adapter", peer_description="hostB mlx5_0")
    assert found[("ibdiag_partner_info", info)] == 1
    assert found[("ibdiag_partner_port_state", labels(B2B))] == 4
    assert found[("ibdiag_partner_rate_bytes_per_second", labels(B2B))] == HDR_4X
    assert found[("ibdiag_partner_symbol_error_total", labels(B2B))] == 0
    assert found[("ibdiag_partner_xmit_data_bytes_total", labels(B2B))] == 1224 * 4
    # its PortRcvErrors and PortRcvSwitchRelayErrors are 0: -E was not read, no detail series
    assert node.devices[1].ports[0].partner.rcv_error_details is None
    assert ("ibdiag_partner_local_physical_errors_total", labels(B2B)) not in found


def test_a_port_without_a_partner_has_no_partner_samples(node: Snapshot) -> None:
    assert node.devices[2].ports[0].partner is None  # DOWN: no chain was run
    _, samples = rendered(report_of(node))
    assert partner_samples(samples, "mlx5_2:1") == {}
    ours = labels({"device": "mlx5_2", "port": "1", "ib_port": "mlx5_2:1"})
    assert samples[("ibdiag_port_state", ours)] == 1  # our own port's samples are there


def test_a_node_without_partners_has_no_partner_families(tmp_path: Path) -> None:
    """Level quick (no partner read): not one ibdiag_partner_ line, not even a HELP."""
    hcas = mlx5_node(1)
    write_node(str(tmp_path / "sys"), hcas)
    snapshot = collect(str(tmp_path / "sys"), "/nonexistent-proc", {"sysfs"})
    text, _ = rendered(grade(snapshot, loaded_registry(), Thresholds(), "quick"))
    assert "ibdiag_partner_" not in text


def test_a_partner_without_counters_has_its_info_but_no_counter_samples(node: Snapshot) -> None:
    partner = node.devices[0].ports[0].partner
    unread = partner.model_copy(update={"counters": None, "rcv_error_details": None})
    _, samples = rendered(report_of(with_partner(node, "mlx5_0", unread)))
    found = partner_samples(samples, "mlx5_0:1")
    assert sorted(name for name, _ in found) == sorted(
        ["ibdiag_partner_info", "ibdiag_partner_status", *GAUGES]
    )
    # the other port's far end is untouched
    assert ("ibdiag_partner_symbol_error_total", labels(B2B)) in samples


def test_a_partner_with_only_rcv_error_details_has_those(node: Snapshot) -> None:
    partner = node.devices[0].ports[0].partner
    only_e = partner.model_copy(update={"counters": None})
    _, samples = rendered(report_of(with_partner(node, "mlx5_0", only_e)))
    counters = {name for name, _ in partner_samples(samples, "mlx5_0:1") if name.endswith("_total")}
    assert counters == {
        f"ibdiag_partner_{stem}_total"
        for stem in (
            "local_physical_errors",
            "malformed_pkt_errors",
            "buffer_overrun_errors",
            "dlid_mapping_errors",
            "vl_mapping_errors",
            "looping_errors",
        )
    }


def test_a_partner_nothing_names_has_no_samples(node: Snapshot) -> None:
    """The chain failed at nodeinfo and nodedesc: no GUID, no description, no cable name."""
    partner = node.devices[0].ports[0].partner
    unknown = Partner(roles=partner.roles)
    assert not far_end.known(unknown)
    _, samples = rendered(report_of(with_partner(node, "mlx5_0", unknown)))
    assert partner_samples(samples, "mlx5_0:1") == {}


def test_a_partner_port_not_up_reads_as_its_numbers(node: Snapshot) -> None:
    partner = node.devices[0].ports[0].partner
    info = partner.port_info.model_copy(
        update={
            "link_state": "Down",
            "phys_link_state": "Polling",
            "width_active": None,
            "speed_active": None,
        }
    )
    _, samples = rendered(
        report_of(with_partner(node, "mlx5_0", partner.model_copy(update={"port_info": info})))
    )
    found = partner_samples(samples, "mlx5_0:1")
    assert found[("ibdiag_partner_port_state", labels(SWITCH))] == 1
    assert found[("ibdiag_partner_phys_state", labels(SWITCH))] == 2
    assert ("ibdiag_partner_width_active", labels(SWITCH)) not in found  # not read: no sample
    assert ("ibdiag_partner_rate_bytes_per_second", labels(SWITCH)) not in found


def test_a_far_end_counter_name_with_controls_is_an_inert_label(node: Snapshot) -> None:
    """A counter name no parser gives (a hand-made or hostile bundle replayed into /metrics)
    with ESC, an OSC sequence and a bidi override: shown as the text renderers show them."""
    partner = node.devices[0].ports[0].partner
    odd = "Odd\x1b]0;owned\x07\u202eName"
    counters = PmaReading(role=partner.counters.role, counters={odd: 3})
    text, samples = rendered(
        report_of(with_partner(node, "mlx5_0", partner.model_copy(update={"counters": counters})))
    )
    peer = dict(SWITCH, peer_name=short_name(partner))
    shown = "Odd\\x1b]0;owned\\x07\\u202eName"
    assert found_counter(samples, "mlx5_0:1", peer, shown) == 3
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text


def found_counter(samples, port, peer, counter):
    return partner_samples(samples, port)[
        ("ibdiag_partner_other_value", labels(peer, counter=counter))
    ]


def test_hostile_descriptions_and_counter_names_are_escaped(node: Snapshot) -> None:
    """A node description with quotes, newlines, backslashes and a tab; a node type and a
    counter name that no parser would give: label values, escaped, never metric names."""
    partner = node.devices[0].ports[0].partner
    counters = PmaReading(role=partner.counters.role, counters={ODD: 7, "SymbolErrorCounter": 9})
    hostile = partner.model_copy(
        update={"description": HOSTILE, "node_type": 'Sw"itch\n', "counters": counters}
    )
    text, samples = rendered(report_of(with_partner(node, "mlx5_0", hostile)))
    name = short_name(hostile)
    assert name == 'sw"7\\x'
    peer = dict(SWITCH, peer_name=name)
    found = partner_samples(samples, "mlx5_0:1")
    # the newline and tab are shown, as the text renderers show them (inert), then escaped
    shown = HOSTILE.replace("\n", "\\x0a").replace("\t", "\\x09")
    info = labels(peer, peer_type='Sw"itch\\x0a', peer_description=shown)
    assert found[("ibdiag_partner_info", info)] == 1
    assert found[("ibdiag_partner_other_value", labels(peer, counter=ODD))] == 7
    assert found[("ibdiag_partner_symbol_error_total", labels(peer))] == 9
    assert 'peer_description="MF0;sw\\"7\\\\x:MQM9700/U1\\\\x0aline two \\"quoted\\"' in text
    assert "\nline two" not in text  # the newline never breaks a line of the exposition


# --- the scheme --------------------------------------------------------------------------------


def test_every_catalogued_perfquery_name_pairs_with_our_port_family() -> None:
    """``ibdiag_partner_<stem>`` is ``ibdiag_port_<stem>`` of the same counter: one regex, one
    panel query, for both ends of the cable."""
    paired = 0
    for info in catalogue().values():
        for alias in info.aliases:
            port_stem = info.name.lower()
            if port_stem.startswith("port_"):
                port_stem = port_stem[len("port_") :]
            assert far_end.counter_stem(alias) == (info.name, port_stem), alias
            paired += 1
    assert paired >= 20


@pytest.mark.parametrize(
    "name, stem",
    [
        ("PortLocalPhysicalErrors", "local_physical_errors"),
        ("PortDLIDMappingErrors", "dlid_mapping_errors"),
        ("PortVLMappingErrors", "vl_mapping_errors"),
        ("QP1Dropped", "qp1_dropped"),
        ("PortNeighborMTUDiscards", "neighbor_mtu_discards"),  # not catalogued: same rule
    ],
)
def test_perfquery_only_names_in_snake_case(name: str, stem: str) -> None:
    assert far_end.counter_stem(name) == (name, stem)


def test_rates_match_what_sysfs_says_for_the_same_link() -> None:
    """The far end's rate compares with our sysfs rate: 4X FDR is 56 Gb/s, 4X HDR 200."""
    for width, speed, gbps in (
        ("4X", "FDR", 56),
        ("4X", "EDR", 100),
        ("4X", "HDR", 200),
        ("2X", "NDR", 200),
        ("4X", "NDR", 400),
        ("1X", "SDR", 2.5),
        ("12X", "QDR", 120),
    ):
        assert far_end.rate_bytes_per_second(width, speed) == gbps * 1e9 / 8
    assert far_end.rate_bytes_per_second("4X", None) is None
    assert far_end.lanes("4x") is None and far_end.lanes("12X") == 12


def test_state_words_are_the_ones_libibmad_prints() -> None:
    """smpquery prints LinkState/PhysLinkState through libibmad's dump functions: every word
    mapped here is one of its strings (the real library of infiniband-diags)."""
    libraries = sorted(
        glob.glob("/usr/lib*/libibmad.so.5*") + glob.glob("/usr/lib*/*/libibmad.so.5*")
    )
    if not libraries:
        pytest.fail("libibmad is not installed: apt-get install -y infiniband-diags")
    strings = set(re.findall(rb"[\x20-\x7e]{4,}", Path(libraries[0]).read_bytes()))
    for word in (*far_end.LINK_STATES, *far_end.PHYS_STATES):
        assert word.encode() in strings, word
    assert [far_end.LINK_STATES[w] for w in ("Down", "Initialize", "Armed", "Active")] == [
        1,
        2,
        3,
        4,
    ]
    assert far_end.PHYS_STATES["LinkUp"] == 5 and far_end.PHYS_STATES["Polling"] == 2


def test_readme_and_docstring_name_every_partner_family(node: Snapshot) -> None:
    """README's Prometheus section and the renderer's docstring name every ibdiag_partner_
    family that is not a counter, and the counters' pattern."""
    readme = (Path(REPO) / "README.md").read_text()
    section = readme[readme.index("## Prometheus") :]
    section = section[: section.index("\n## ", 1)]
    hostile = (
        node.devices[0]
        .ports[0]
        .partner.model_copy(update={"counters": PmaReading(role="r", counters={ODD: 1})})
    )
    text, _ = rendered(report_of(with_partner(node, "mlx5_0", hostile)))
    types = dict(re.findall(r"^# TYPE (ibdiag_partner_\S+) (\S+)$", text, re.M))
    listed = [name for name, kind in types.items() if kind != "counter"]
    assert set(listed) >= {"ibdiag_partner_info", "ibdiag_partner_other_value", *GAUGES}
    for where, body in (("README", section), ("docstring", prometheus.__doc__)):
        missing = [name for name in listed if f"`{name}" not in body]
        assert not missing, f"{where} does not name {missing}"
        assert "`ibdiag_partner_<name>_total" in body, where


# A far end's node description is whatever its firmware (or whoever set it) says: an ESC/OSC
# sequence, C1 controls, NUL and bidi overrides that a `curl /metrics` in a terminal would obey.
STEERING = "leaf\x1b]0;pwned\x07\x1b[2J\x00\x85\u202e\u2066x\x9b31m"


def test_far_end_label_values_never_steer_a_terminal(node: Snapshot) -> None:
    """peer_description and peer_type pass through the text renderers' escaping (``inert``):
    no control, NUL, C1 or bidi character reaches the exposition, each is shown as ``\\xNN``
    / ``\\uNNNN``; promtool still accepts the exposition."""
    partner = node.devices[0].ports[0].partner
    hostile = partner.model_copy(update={"description": STEERING, "node_type": "Sw\x1b[1mitch"})
    text, samples = rendered(report_of(with_partner(node, "mlx5_0", hostile)))
    unsafe = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
    assert not unsafe.search(text), [m.group() for m in unsafe.finditer(text)]
    info = [key for key in samples if key[0] == "ibdiag_partner_info"]
    found = dict(next(labels for name, labels in info if ("ib_port", "mlx5_0:1") in labels))
    assert found["peer_type"] == "Sw\\x1b[1mitch"
    assert found["peer_description"] == (
        "leaf\\x1b]0;pwned\\x07\\x1b[2J\\x00\\x85\\u202e\\u2066x\\x9b31m"
    )
    promtool_check(text)
