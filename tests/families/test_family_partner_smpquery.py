"""smpquery parsers, and perfquery's on the partner's counters, on every capture in
tests/captures/ibsim-partner (real infiniband-diags 44.0 against the ibsim simulator; SOURCES.md).

Each capture has facts read from the file by hand (FACTS); a capture added to the folder fails
``test_every_capture_has_facts`` until someone writes its facts down.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import TESTS_DIR
from hypothesis import given, settings
from hypothesis import strategies as st

from ibdiag.families.partner.smpquery import parse_nodedesc, parse_nodeinfo, parse_portinfo
from ibdiag.families.perfquery import parse_perfquery

CAPTURES = Path(TESTS_DIR) / "captures" / "ibsim-partner"

SWITCH = "0x0000000000200000"
# A healthy HDR switch port as ibsim reports it (port info fields common to the captures).
HDR_PORT = {
    "link_state": "Active",
    "phys_link_state": "LinkUp",
    "width_active": "4X",
    "width_enabled": ["4X"],
    "width_supported": ["1X", "2X", "4X", "8X", "12X"],
    "speed_active": "HDR",
    "speed_enabled": ["SDR", "FDR", "EDR", "HDR"],
    "speed_supported": ["SDR", "DDR", "QDR", "FDR", "EDR", "HDR"],
    "neighbor_mtu": 2048,  # ibsim's PortInfo template: the SM's Set does not change it
    "mtu_cap": 2048,
}
PORT0 = {  # the switch's port 0 (its management port): base speeds only
    "link_state": "Active",
    "width_active": "4X",
    "speed_active": "SDR",
    "speed_enabled": ["SDR"],
    "speed_supported": ["SDR", "DDR", "QDR"],
    "neighbor_mtu": 256,
    "mtu_cap": 1024,
    "capabilities": [
        "IsSM",
        "IsTrapSupported",
        "IsSLMappingSupported",
        "IsExtendedSpeedsSupported",
        "IsCapabilityMask2Supported",
        "IsLinkWidth2xSupported",
        "IsLinkSpeedHDRSupported",
    ],
}
B2B_PORT = {**HDR_PORT, "lid": 3, "sm_lid": 2}
ERRORS_ZERO = {"SymbolErrorCounter": 0, "LinkDownedCounter": 0, "PortRcvErrors": 0}
DATA_ONLY = {"PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts"}
RCV_DETAILS_ZERO = {"PortLocalPhysicalErrors": 0, "PortMalformedPktErrors": 0}

# name -> (parser, facts). Facts: attribute -> expected value; "mad_error" a text it contains.
# For perfquery: "counters" that must be there with these values, "only_data": -x without the
# error counters, "lid"/"port" from the header.
FACTS = {
    "switch-hdr-nodeinfo.txt": ("nodeinfo", {"node_type": "Switch", "node_guid": SWITCH,
                                             "num_ports": 36, "local_port": 1}),
    "switch-hdr-nodedesc.txt": ("nodedesc", {"description": "MF0;leaf07:MQM8700/U1"}),
    "switch-hdr-portinfo.txt": ("portinfo", {**HDR_PORT, "port": 1, "lid": 0}),
    "switch-hdr-portinfo0.txt": ("portinfo", {**PORT0, "port": 0, "lid": 1, "sm_lid": 1}),
    "switch-hdr-perfquery-x.txt": ("perfquery", {"lid": 1, "port": 1, "only_data": True}),
    "switch-hdr-perfquery.txt": ("perfquery", {"lid": 1, "port": 1, "counters": ERRORS_ZERO}),
    "switch-hdr-perfquery-E.txt": ("perfquery", {"lid": 1, "port": 1,
                                                 "counters": RCV_DETAILS_ZERO}),
    "switch-hdr-errors-perfquery.txt": ("perfquery", {"lid": 1, "port": 1, "counters": {
        "SymbolErrorCounter": 1234, "LinkDownedCounter": 3, "PortRcvErrors": 0}}),
    "switch-port2-nodeinfo.txt": ("nodeinfo", {"node_type": "Switch", "node_guid": SWITCH,
                                               "local_port": 2}),
    "switch-port2-nodedesc.txt": ("nodedesc", {"description": "MF0;leaf07:MQM8700/U1"}),
    "switch-port2-portinfo.txt": ("portinfo", {**HDR_PORT, "port": 2, "lid": 0,
                                               "width_enabled": ["1X", "4X"]}),
    "switch-port2-portinfo0.txt": ("portinfo", {**PORT0, "port": 0, "lid": 1}),
    "switch-port2-perfquery-x.txt": ("perfquery", {"lid": 1, "port": 2, "only_data": True}),
    "switch-port2-perfquery.txt": ("perfquery", {"lid": 1, "port": 2, "counters": ERRORS_ZERO}),
    "switch-port2-perfquery-E.txt": ("perfquery", {"lid": 1, "port": 2,
                                                   "counters": RCV_DETAILS_ZERO}),
    "switch-port3-nodeinfo.txt": ("nodeinfo", {"node_type": "Switch", "local_port": 3}),
    "switch-port3-nodedesc.txt": ("nodedesc", {"description": "MF0;leaf07:MQM8700/U1"}),
    "switch-port3-portinfo.txt": ("portinfo", {**HDR_PORT, "port": 3, "lid": 0}),
    "switch-port3-portinfo0.txt": ("portinfo", {**PORT0, "port": 0, "lid": 1}),
    "switch-port3-perfquery-x.txt": ("perfquery", {"lid": 1, "port": 3, "only_data": True}),
    "switch-port3-perfquery.txt": ("perfquery", {"lid": 1, "port": 3, "counters": ERRORS_ZERO}),
    "switch-port3-perfquery-E.txt": ("perfquery", {"lid": 1, "port": 3,
                                                   "counters": RCV_DETAILS_ZERO}),
    "b2b-ca-nodeinfo.txt": ("nodeinfo", {"node_type": "Channel Adapter",
                                         "node_guid": "0x0000000000100002",
                                         "port_guid": "0x0000000000100003",
                                         "num_ports": 1, "local_port": 1}),
    "b2b-ca-nodedesc.txt": ("nodedesc", {"description": "hostB mlx5_0"}),
    "b2b-ca-portinfo.txt": ("portinfo", {**B2B_PORT, "port": 1}),
    "b2b-ca-portinfo0.txt": ("portinfo", {**B2B_PORT, "port": 0}),
    "b2b-ca-perfquery-x.txt": ("perfquery", {"lid": 3, "port": 1, "only_data": True}),
    "b2b-ca-perfquery.txt": ("perfquery", {"lid": 3, "port": 1, "counters": ERRORS_ZERO}),
    "b2b-ca-perfquery-E.txt": ("perfquery", {"lid": 3, "port": 1,
                                             "counters": RCV_DETAILS_ZERO}),
    "nosm-portinfo.txt": ("portinfo", {**HDR_PORT, "port": 1, "lid": 0, "sm_lid": 0,
                                       "link_state": "Initialize"}),
    "nosm-portinfo0.txt": ("portinfo", {**PORT0, "port": 0, "lid": 0, "sm_lid": 0,
                                        "capabilities": PORT0["capabilities"][1:]}),
    "nosm-perfquery-x.txt": ("perfquery", {"mad_error": "can't resolve destination port 0"}),
    "error-nodeinfo.txt": ("nodeinfo", {"node_guid": None, "local_port": None,
                                        "mad_error": "node info query failed"}),
    "nosuchport-portinfo.txt": ("portinfo", {"lid": None, "link_state": None,
                                             "mad_error": "port info query failed"}),
    "noca-nodeinfo.txt": ("nodeinfo", {"node_type": None,
                                       "mad_error": "Failed to open 'mlx5_9' port '1'"}),
    "nodevice-nodeinfo.txt": ("nodeinfo", {"node_type": None,
                                           "mad_error": "can't open UMAD port (mlx5_0:1)"}),
    "nodevice-perfquery-x.txt": ("perfquery", {"mad_error": "Failed to open 'mlx5_0' port"}),
    # as nobody, against a root-only /dev/infiniband/umad0 (SOURCES.md)
    "notroot-nodeinfo.txt": ("nodeinfo", {"node_type": None,
                                          "mad_error": "Failed to open 'mlx5_0' port '1'"}),
    "notroot-perfquery-x.txt": ("perfquery", {"mad_error": "Failed to open 'mlx5_0' port '1'"}),
}  # fmt: skip

PARSERS = {"nodeinfo": parse_nodeinfo, "nodedesc": parse_nodedesc, "portinfo": parse_portinfo}


def _names():
    return sorted(name for name in os.listdir(CAPTURES) if name.endswith(".txt"))


def _output(name: str) -> str:
    """What the run printed: stdout, then stderr when it wrote any (as the interpreter reads)."""
    text = (CAPTURES / name).read_text()
    stderr = CAPTURES / (name[: -len(".txt")] + ".stderr")
    return text + ("\n" + stderr.read_text() if stderr.exists() else "")


def test_every_capture_has_facts():
    assert sorted(set(_names()) - set(FACTS)) == []
    assert sorted(set(FACTS) - set(_names())) == []


@pytest.mark.parametrize("name", _names())
def test_capture(name):
    kind, facts = FACTS[name]
    text = _output(name)
    failed = (CAPTURES / (name[: -len(".txt")] + ".rc")).exists()
    assert ("mad_error" in facts) == failed, "a failed run's facts say what it printed"
    if kind == "perfquery":
        parsed = parse_perfquery(text)
        for counter, value in facts.get("counters", {}).items():
            assert parsed.counters[counter] == value, (counter, parsed.counters)
        if facts.get("only_data"):
            assert DATA_ONLY <= set(parsed.counters), parsed.counters
            assert "SymbolErrorCounter" not in parsed.counters
    else:
        parsed = PARSERS[kind](text)
        for attribute, value in facts.items():
            if attribute != "mad_error":
                assert getattr(parsed, attribute) == value, (attribute, parsed)
        if not failed:
            assert parsed.problems == [], parsed.problems
    for attribute in ("lid", "port"):
        if kind == "perfquery" and attribute in facts:
            assert getattr(parsed, attribute) == facts[attribute]
    if failed:
        assert facts["mad_error"] in (parsed.mad_error or ""), parsed
    else:
        assert parsed.mad_error is None, parsed


# -- the formats libibmad prints that the simulator does not (libibmad/dump.c) ---------------


def _portinfo(**fields: str) -> str:
    lines = ["# Port info: DR path slid 65535; dlid 65535; 0,1 port 21"]
    lines += [f"{name}:{'.' * max(1, 32 - len(name))}{value}" for name, value in fields.items()]
    return "\n".join(lines) + "\n"


def test_ndr_and_xdr_speeds_and_the_highest_active_field():
    ndr = parse_portinfo(_portinfo(
        Lid="0", LinkState="Active", PhysLinkState="LinkUp", LinkWidthActive="2X",
        LinkSpeedActive="Extended speed", LinkSpeedExtActive="106.25 Gbps",
        LinkSpeedExtSupported="14.0625 Gbps or 25.78125 Gbps or 53.125 Gbps or 106.25 Gbps",
        LinkSpeedExtEnabled="Extended link speeds disabled",
    ))  # fmt: skip
    assert (ndr.port, ndr.width_active, ndr.speed_active) == (21, "2X", "NDR")
    assert ndr.speed_supported == ["FDR", "EDR", "HDR", "NDR"] and ndr.speed_enabled == []
    assert ndr.problems == []
    xdr = parse_portinfo(_portinfo(
        Lid="0", LinkState="Active", PhysLinkState="LinkUp", LinkWidthActive="4X",
        LinkSpeedActive="10.0 Gbps", LinkSpeedExtActive="106.25 Gbps",
        LinkSpeedExtActive2="212.5 Gbps", LinkSpeedExtSupported2="212.5 Gbps",
        LinkSpeedExtEnabled2="0",
    ))  # fmt: skip
    assert xdr.speed_active == "XDR" and "XDR" in xdr.speed_supported
    assert xdr.speed_enabled == [] and xdr.problems == []
    no_ext2 = parse_portinfo(_portinfo(LinkSpeedExtActive2="No Extended Speed 2",
                                       LinkSpeedExtActive="25.78125 Gbps"))  # fmt: skip
    assert no_ext2.speed_active == "EDR"


def test_odd_values_are_problems_not_values():
    parsed = parse_portinfo(_portinfo(
        Lid="twelve", LinkState="?(9)", PhysLinkState="LinkUp", LinkWidthActive="undefined (3)",
        LinkWidthSupported="1X or 4X (IBA extension)", LinkSpeedActive="undefined (6)",
        LinkSpeedExtSupported2="212.5 Gbps undefined (3)",
    ))  # fmt: skip
    assert parsed.lid is None and parsed.link_state is None and parsed.width_active is None
    assert parsed.width_supported == ["1X", "4X"]  # the suffix is not a width
    assert parsed.speed_active is None and parsed.speed_supported == ["XDR"]
    joined = "\n".join(parsed.problems)
    for name in ("Lid", "LinkState", "LinkWidthActive", "LinkSpeedActive", "Ext"):
        assert name in joined, joined


@pytest.mark.parametrize("mtu", [256, 512, 1024, 2048, 4096])
def test_every_mtu_libibmad_prints_is_read_in_bytes(mtu):
    parsed = parse_portinfo(_portinfo(NeighborMTU=str(mtu), MtuCap="4096"))
    assert (parsed.neighbor_mtu, parsed.mtu_cap) == (mtu, 4096)
    assert not [p for p in parsed.problems if "MTU" in p or "Mtu" in p], parsed.problems


@pytest.mark.parametrize("value", ["?(6)", "?(0)", "8192", "2048 bytes", ""])
def test_an_mtu_libibmad_cannot_name_is_a_problem_not_a_value(value):
    parsed = parse_portinfo(_portinfo(NeighborMTU=value, MtuCap=value))
    assert parsed.neighbor_mtu is None and parsed.mtu_cap is None
    joined = "\n".join(parsed.problems)
    assert "NeighborMTU is not an MTU" in joined and "MtuCap is not an MTU" in joined, joined


def test_a_portinfo_without_mtu_fields_leaves_them_none():
    parsed = parse_portinfo(_portinfo(Lid="3", LinkState="Active"))
    assert parsed.neighbor_mtu is None and parsed.mtu_cap is None


def test_a_long_node_description_keeps_its_leading_dot_and_a_short_one_its_text():
    long_name = ".hidden-switch-with-a-very-long-name-1"
    assert parse_nodedesc(f"Node Description:.{long_name}\n").description == long_name
    assert parse_nodedesc("Node Description:" + "." * 32 + "\n").description == ""
    assert parse_nodedesc("").problems == ["empty smpquery output"]


def test_missing_fields_and_a_lone_guid_are_problems():
    parsed = parse_nodeinfo("# Node info: DR path 0,1\nGuid:....0xZZ\n")
    assert parsed.node_guid is None
    assert any("Guid is not a GUID" in p for p in parsed.problems), parsed.problems
    assert any("no NodeType, LocalPort" in p for p in parsed.problems), parsed.problems


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(), st.binary()))
def test_parsers_never_raise(text):
    for parse in PARSERS.values():
        result = parse(text)
        assert isinstance(result.problems, list)


def test_portinfo_is_parsed_straight_into_the_fact():
    """No parser result copied field by field: ``parse_portinfo`` builds the ``PortInfo`` fact,
    and the family sets only the role of the run it came from."""
    from ibdiag import roles
    from ibdiag.facts.partner import PortInfo
    from ibdiag.families.partner.readings import port_info_of
    from ibdiag.model import CommandRun

    text = (CAPTURES / "switch-hdr-portinfo.txt").read_text()
    parsed = parse_portinfo(text)
    assert isinstance(parsed, PortInfo) and parsed.role is None
    role = roles.partner("portinfo", "mlx5_0:1")
    run = CommandRun(argv=["smpquery", "portinfo"], role=role, rc=0, stdout=text)
    assert port_info_of(run) == parsed.model_copy(update={"role": role})
    assert port_info_of(run.model_copy(update={"rc": 255})) is None
