"""The inventory families' parsers (``ibdiag.families.ibstat``, ``.ibv_devinfo``): ibstat and
ibv_devinfo straight into the ``Listing`` fact, and ibstatus, on every capture in
tests/fixtures/{ibstat,ibstatus,ibv_devinfo}."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES_DIR, capture_names, captures_without_facts, read_capture
from hypothesis import given, settings
from hypothesis import strategies as st

from ibdiag.facts.inventory import Listing
from ibdiag.families.ibstat import parse_ibstat, parse_ibstatus, parse_ibstatus_report
from ibdiag.families.ibv_devinfo import parse_ibv_devinfo

FIXTURES = Path(FIXTURES_DIR)
KINDS = ("ibstat", "ibstatus", "ibv_devinfo")


# ---------------------------------------------------------------------------------------------
# ibstat. Facts read from each file: device names in order; per listed device
# (ca_type, firmware, node_guid, {port: (state, physical_state, rate, link_layer, base_lid,
# sm_lid)}); "down": the devices whose port 1 is not Active, with their physical state.

CX7_IB_400 = ("MT4129", "28.39.1002")

IBSTAT_FACTS = {
    "archwiki-connectx-ddr-mt25418-port1-active-port2-down-polling.txt": {
        "names": ["mlx4_0"],
        "cas": {
            "mlx4_0": (
                "MT25418",
                "2.9.1000",
                "0x0002c90300002f78",
                {
                    1: ("Active", "LinkUp", 20.0, "InfiniBand", 3, 3),
                    2: ("Down", "Polling", 10.0, "InfiniBand", 0, 0),
                },
            )
        },
        "down": {},  # port 1 is up; port 2 (listed above) is the fault
    },
    "gpud-ibstat-a100-vm-9xMT4126-VF-hdr-all-active.txt": {
        "names": [f"mlx5_{i}" for i in range(9)],
        "cas": {
            "mlx5_0": (
                "MT4126",
                "22.35.2302",
                "0x1e918efffe7a03a0",
                {1: ("Active", "LinkUp", 200.0, "Ethernet", 0, 0)},
            ),
            "mlx5_1": (
                "MT4126",
                "28.37.1014",
                "0x6b9d7f2c99902a63",
                {1: ("Active", "LinkUp", 200.0, "InfiniBand", 1369, 83)},
            ),
            "mlx5_8": (
                "MT4126",
                "28.37.1014",
                "0x4c1037318e9cd20a",
                {1: ("Active", "LinkUp", 200.0, "InfiniBand", 1396, 83)},
            ),
        },
        "down": {},
    },
    "gpud-ibstat-h100-8xcx7-ndr-plus-bluefield3-bond-all-active.txt": {
        "names": [
            "mlx5_0",
            "mlx5_1",
            "mlx5_4",
            "mlx5_5",
            "mlx5_6",
            "mlx5_7",
            "mlx5_8",
            "mlx5_9",
            "mlx5_bond_0",
        ],
        "cas": {
            "mlx5_0": (
                "MT4129",
                "28.41.1000",
                "0x58a2e10300a7820e",
                {1: ("Active", "LinkUp", 400.0, "InfiniBand", 128, 1)},
            ),
            "mlx5_bond_0": (
                "MT41692",
                "32.38.3056",
                "0x58a2e10300760398",
                {1: ("Active", "LinkUp", 200.0, "Ethernet", 0, 0)},
            ),
        },
        "down": {},
    },
    "gpud-ibstat-h100-cx7-ndr-ib-cx6dx-eth-3ports-down-disabled.txt": {
        "names": ["mlx5_0", "mlx5_1", "mlx5_10", "mlx5_11"] + [f"mlx5_{i}" for i in range(2, 10)],
        "cas": {
            "mlx5_0": (
                *CX7_IB_400,
                "0x946dae0300cde72c",
                {1: ("Active", "LinkUp", 400.0, "InfiniBand", 75, 334)},
            ),
            "mlx5_2": (
                "MT4125",
                "22.38.1002",
                "0x946dae0300c2b691",
                {1: ("Down", "Disabled", 40.0, "Ethernet", 0, 0)},
            ),
        },
        "down": {"mlx5_2": "Disabled", "mlx5_7": "Disabled", "mlx5_8": "Disabled"},
    },
    "gpud-ibstat-h100-cx7-roce-2ports-down-disabled.txt": {
        "names": ["mlx5_0", "mlx5_1", "mlx5_10", "mlx5_11"] + [f"mlx5_{i}" for i in range(2, 10)],
        "cas": {
            "mlx5_11": (
                *CX7_IB_400,
                "0xa088c20300bb3514",
                {1: ("Down", "Disabled", 40.0, "Ethernet", 0, 0)},
            ),
            "mlx5_1": (
                "MT4125",
                "22.39.1002",
                "0xb83fd203002a1a1c",
                {1: ("Active", "LinkUp", 100.0, "Ethernet", 0, 0)},
            ),
        },
        "down": {"mlx5_5": "Disabled", "mlx5_11": "Disabled"},
    },
    "gpud-ibstat-h100-cx7-roce-all-active.txt": {
        "names": ["mlx5_0", "mlx5_1", "mlx5_10", "mlx5_11"] + [f"mlx5_{i}" for i in range(2, 10)],
        "cas": {
            "mlx5_0": (
                *CX7_IB_400,
                "0xa088c20300e3142a",
                {1: ("Active", "LinkUp", 400.0, "Ethernet", 0, 0)},
            ),
            "mlx5_8": (
                "MT4125",
                "22.39.1002",
                "0xe8ebd303003308d7",
                {1: ("Active", "LinkUp", 100.0, "Ethernet", 0, 0)},
            ),
        },
        "down": {},
    },
    "gpud-ibstat-h100-cx7-roce-down-polling.txt": {
        "names": ["mlx5_0", "mlx5_1", "mlx5_10", "mlx5_11"] + [f"mlx5_{i}" for i in range(2, 10)],
        "cas": {
            "mlx5_11": (
                *CX7_IB_400,
                "0xa088c20300bb3514",
                {1: ("Down", "Polling", 40.0, "Ethernet", 0, 0)},
            ),
        },
        "down": {"mlx5_5": "Disabled", "mlx5_11": "Polling"},
    },
}

# ibstatus: per device (port, state, phys_state, rate, link_layer, base_lid, sm_lid, gid)
IBSTATUS_FACTS = {
    "azhpc-diagnostics-ibstatus-hdr-ib-plus-eth-an.txt": {
        "mlx5_an0": (1, "ACTIVE", "LinkUp", 40.0, "Ethernet", 0, 0, None),
        "mlx5_ib0": (
            1,
            "ACTIVE",
            "LinkUp",
            200.0,
            "InfiniBand",
            0x96,
            0x11C,
            "fe80:0000:0000:0000:0015:5dff:fd33:ff0b",
        ),
    },
    "gpud-ibstatus-a100-azure-8xHDR-plus-eth-40G.txt": {
        **{
            f"mlx5_{i}": (1, "ACTIVE", "LinkUp", 200.0, "InfiniBand", None, 1, None)
            for i in range(8)
        },
        "mlx5_8": (1, "ACTIVE", "LinkUp", 40.0, "Ethernet", 0, 0, None),
    },
}
IBSTATUS_EXTRA = {  # individual values checked on top
    "gpud-ibstatus-a100-azure-8xHDR-plus-eth-40G.txt": {
        ("mlx5_0", "base_lid"): 0x33BF,
        ("mlx5_7", "base_lid"): 0x33F9,
        ("mlx5_0", "default_gid"): "fe80:0000:0000:0000:0015:5dff:fd34:11eb",
        ("mlx5_3", "rate_text"): "200 Gb/sec (4X HDR)",
        ("mlx5_8", "rate_text"): "40 Gb/sec (4X QDR)",
    },
    "azhpc-diagnostics-ibstatus-hdr-ib-plus-eth-an.txt": {
        ("mlx5_ib0", "rate_text"): "200 Gb/sec (4X HDR)",
        ("mlx5_ib0", "state_num"): 4,
        ("mlx5_ib0", "phys_state_num"): 5,
    },
}

# ibv_devinfo: per device (fw_ver, node_guid, vendor_part_id, board_id, phys_port_cnt,
# {port: (state, state_num, phys_state, link_layer, active_mtu, sm_lid, port_lid)}), as the
# Listing names them: firmware, number_of_ports, physical_state, lid.
IBV_FACTS = {
    "heioy-books-2x-connectx3-mlx4-port2-down-tabs.txt": {
        "mlx4_1": (
            "2.42.5000",
            "7cfe:9003:00a5:95c0",
            "4099",
            "MT_1090120019",
            2,
            {
                1: ("PORT_ACTIVE", 4, None, "InfiniBand", 4096, 1, 22),
                2: ("PORT_DOWN", 1, None, "InfiniBand", 4096, 0, 0),
            },
        ),
        "mlx4_0": (
            "2.42.5000",
            "e41d:2d03:00e0:c740",
            "4099",
            "MT_1090120019",
            2,
            {
                1: ("PORT_ACTIVE", 4, None, "InfiniBand", 4096, 18, 32),
                2: ("PORT_DOWN", 1, None, "InfiniBand", 4096, 0, 0),
            },
        ),
    },
    "heioy-books-connectx3-mlx4-port2-verbose-down-polling.txt": {
        "mlx4_1": (
            "2.42.5000",
            "7cfe:9003:00a5:95c0",
            "4099",
            "MT_1090120019",
            2,
            {2: ("PORT_DOWN", 1, "POLLING", "InfiniBand", 4096, 0, 0)},
        ),
    },
    "linux-rdma-2024-cx5-roce-mlx5_bond_0-after-lag.txt": {
        "mlx5_bond_0": (
            "16.31.1014",
            "f41d:6b03:006f:4743",
            "4119",
            "HUA0000000004",
            1,
            {1: ("PORT_ACTIVE", 4, None, "Ethernet", 1024, 0, 0)},
        ),
    },
    "linux-rdma-2024-cx5-roce-two-pf-before-bonding.txt": {
        "mlx5_0": (
            "16.31.1014",
            "f41d:6b03:006f:4743",
            "4119",
            "HUA0000000004",
            1,
            {1: ("PORT_ACTIVE", 4, None, "Ethernet", 1024, 0, 0)},
        ),
        "mlx5_1": (
            "16.31.1014",
            "f41d:6b03:006f:4744",
            "4119",
            "HUA0000000004",
            1,
            {1: ("PORT_ACTIVE", 4, None, "Ethernet", 1024, 0, 0)},
        ),
    },
}

FACTS = {"ibstat": IBSTAT_FACTS, "ibstatus": IBSTATUS_FACTS, "ibv_devinfo": IBV_FACTS}


@pytest.mark.parametrize("kind", KINDS)
def test_fixture_folder_present(kind):
    assert (FIXTURES / kind).is_dir(), f"{FIXTURES / kind} is missing: the tests read the captures"


@pytest.mark.parametrize("kind", KINDS)
def test_every_capture_has_facts(kind):
    missing = captures_without_facts(kind, FACTS[kind])
    assert not missing, f"{kind} captures without facts in {__file__}: {missing}"


@pytest.mark.parametrize("name", capture_names("ibstat"))
def test_ibstat_capture(name):
    text = read_capture("ibstat", name)
    facts = IBSTAT_FACTS.get(name)
    assert facts is not None, f"write the facts of {name} into IBSTAT_FACTS"
    report = parse_ibstat(text)
    assert isinstance(report, Listing) and (report.role, report.outcome) == (None, None)
    assert report.problems == [] and report.error is None
    cas = {ca.name: ca for ca in report.cas}
    assert [ca.name for ca in report.cas] == facts["names"]
    for ca in report.cas:
        assert ca.ports, ca.name
        assert ca.number_of_ports == len(ca.ports)
        assert ca.node_guid and ca.node_guid.startswith("0x")
    for name_, (ca_type, firmware, guid, ports) in facts["cas"].items():
        ca = cas[name_]
        assert (ca.ca_type, ca.firmware, ca.node_guid) == (ca_type, firmware, guid)
        by_number = {port.number: port for port in ca.ports}
        for number, expected in ports.items():
            port = by_number[number]
            got = (
                port.state,
                port.physical_state,
                port.rate,
                port.link_layer,
                port.lid,
                port.sm_lid,
            )
            assert got == expected, (name_, number)
    down = {
        ca.name: ca.ports[0].physical_state
        for ca in report.cas
        if ca.ports[0].number == 1 and ca.ports[0].state != "Active"
    }
    assert down == facts["down"]


@pytest.mark.parametrize("name", capture_names("ibstatus"))
def test_ibstatus_capture(name):
    text = read_capture("ibstatus", name)
    facts = IBSTATUS_FACTS.get(name)
    assert facts is not None, f"write the facts of {name} into IBSTATUS_FACTS"
    report = parse_ibstatus_report(text)
    assert report.problems == [] and report.error is None
    assert parse_ibstatus(text) == report.ports
    ports = {p.device: p for p in report.ports}
    assert list(ports) == list(facts)
    for device, expected in facts.items():
        port = ports[device]
        port_no, state, phys, rate, link_layer, base_lid, sm_lid, gid = expected
        assert (port.port, port.state, port.phys_state, port.rate, port.link_layer) == (
            port_no,
            state,
            phys,
            rate,
            link_layer,
        )
        if base_lid is not None:
            assert port.base_lid == base_lid
        assert port.sm_lid == sm_lid
        if gid is not None or link_layer == "Ethernet":
            assert port.default_gid == gid
    for (device, attribute), value in IBSTATUS_EXTRA.get(name, {}).items():
        assert getattr(ports[device], attribute) == value, (device, attribute)


@pytest.mark.parametrize("name", capture_names("ibv_devinfo"))
def test_ibv_devinfo_capture(name):
    text = read_capture("ibv_devinfo", name)
    facts = IBV_FACTS.get(name)
    assert facts is not None, f"write the facts of {name} into IBV_FACTS"
    report = parse_ibv_devinfo(text)
    assert isinstance(report, Listing) and (report.role, report.outcome) == (None, None)
    assert report.problems == [] and report.error is None
    devices = {d.name: d for d in report.cas}
    assert list(devices) == list(facts)
    for hca_id, (fw, guid, part, board, port_cnt, ports) in facts.items():
        device = devices[hca_id]
        assert device.transport == "InfiniBand"
        assert device.vendor_id == "0x02c9"
        assert (device.firmware, device.node_guid, device.vendor_part_id) == (fw, guid, part)
        assert (device.board_id, device.number_of_ports) == (board, port_cnt)
        by_number = {port.number: port for port in device.ports}
        assert set(by_number) == set(ports)
        for number, expected in ports.items():
            port = by_number[number]
            got = (
                port.state,
                port.state_num,
                port.physical_state,
                port.link_layer,
                port.active_mtu,
                port.sm_lid,
                port.lid,
            )
            assert got == expected, (hca_id, number)


def test_ibv_devinfo_verbose_details():
    """``-v``'s port detail; its device capability lines (flag lists, ``max_qp: 393144``) are
    no problem and no part of the listing."""
    text = read_capture("ibv_devinfo", "heioy-books-connectx3-mlx4-port2-verbose-down-polling.txt")
    report = parse_ibv_devinfo(text)
    assert report.problems == []
    (device,) = report.cas
    (port,) = device.ports
    assert port.number == 2
    assert (port.physical_state, port.physical_state_num) == ("POLLING", 2)
    assert (port.active_width, port.active_speed) == ("4X", "2.5 Gbps")
    assert (port.max_mtu, port.active_mtu) == (4096, 4096)


@pytest.mark.parametrize("kind", KINDS)
def test_captures_truncated_never_raise(kind):
    parse = {
        "ibstat": parse_ibstat,
        "ibstatus": parse_ibstatus_report,
        "ibv_devinfo": parse_ibv_devinfo,
    }[kind]
    for name in capture_names(kind):
        text = read_capture(kind, name)
        for cut in range(0, len(text), max(1, len(text) // 40)):
            parse(text[:cut])


def test_tool_errors():
    assert (
        "can't get CA list"
        in parse_ibstat(
            "ibpanic: [1234] main: can't get CA list: No such file or directory\n"
        ).error
    )
    report = parse_ibstat(
        "ibwarn: [298726] umad_init: can't read ABI version\nCA 'mlx5_0'\n\tCA type: MT4129\n"
    )
    assert report.error and [ca.name for ca in report.cas] == ["mlx5_0"]
    assert parse_ibv_devinfo("No IB devices found\n").error == "No IB devices found"
    assert parse_ibv_devinfo("Failed to get IB devices list: Function not implemented\n").cas == []


@pytest.mark.parametrize(
    "junk",
    [
        "",
        "\n \n",
        "\x00\xff\xfe" * 50,
        "CA ''\n\tPort x:\n\t\tRate: fast\n\t\tBase lid: zz\n",
        "Port 1:\n\tState: Active\n",
        "Infiniband device 'x' port 1 status:\n\tbase lid: 0xZZ\n\trate: very\n",
        "hca_id:\tmlx5_0\n\t\tport:\t1\n\t\t\tport_lid:\tbanana\n\t\t\tstate: (4)\n",
        "port:\t1\nstate: PORT_ACTIVE (4)\n",
    ],
)
def test_garbage_never_raises(junk):
    for parse in (parse_ibstat, parse_ibstatus_report, parse_ibv_devinfo):
        report = parse(junk)
        assert isinstance(report.problems, list)


def test_garbage_is_reported():
    assert parse_ibstat("Port 1:\n\tState: Active\n").problems
    assert parse_ibstatus_report("nonsense\n").problems
    assert parse_ibv_devinfo("port:\t1\n").problems == [
        "unparseable line 1 (before any hca_id): 'port:\\t1'",
        "no hca_id in ibv_devinfo output",
    ]
    assert parse_ibstat("").problems == ["empty output"]
    assert parse_ibv_devinfo("").problems == ["empty output"]


def test_binary_never_raises():
    data = bytes(range(256)) * 8
    assert parse_ibstat(data).cas == []
    assert parse_ibstatus(data) == []
    assert parse_ibv_devinfo(data).cas == []


@settings(max_examples=150, deadline=None)
@given(st.text())
def test_any_text_never_raises(text):
    parse_ibstat(text)
    parse_ibstatus(text)
    parse_ibv_devinfo(text)
