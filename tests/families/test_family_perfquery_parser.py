"""perfquery parser on every capture in tests/fixtures/perfquery, and its argv (plan.py).

Each capture has facts read from the file by hand (FACTS); a capture added to the folder fails
``test_every_capture_has_facts`` until someone writes its facts down.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES_DIR, capture_names, captures_without_facts, read_capture
from hypothesis import given, settings
from hypothesis import strategies as st

from ibdiag.families.perfquery import FLAGS as PERFQUERY_FLAGS
from ibdiag.families.perfquery import (
    OLD_COUNTER_NAMES,
    parse_perfquery,
    parse_perfquery_blocks,
)
from ibdiag.families.perfquery import argv as perfquery_argv

FIXTURES = Path(FIXTURES_DIR)
KIND = "perfquery"
FOLDER = FIXTURES / KIND


ERROR_COUNTERS = (
    "SymbolErrorCounter",
    "LinkErrorRecoveryCounter",
    "LinkDownedCounter",
    "PortRcvErrors",
    "PortRcvRemotePhysicalErrors",
    "PortRcvSwitchRelayErrors",
    "PortXmitDiscards",
    "PortXmitConstraintErrors",
    "PortRcvConstraintErrors",
    "LocalLinkIntegrityErrors",
    "ExcessiveBufferOverrunErrors",
    "VL15Dropped",
    "QP1Dropped",
)
RCV_ERROR_DETAILS = (
    "PortLocalPhysicalErrors",
    "PortMalformedPktErrors",
    "PortBufferOverrunErrors",
    "PortDLIDMappingErrors",
    "PortVLMappingErrors",
    "PortLoopingErrors",
)

# Read from each file by hand. "counters": values that must be there; "zero": names that must
# be 0; "count": how many counters the (first) block has.
FACTS = {
    "infiniband_exporter-E-rcverr-hca-lid133.txt": {
        "kind": "rcv_error_details",
        "lid": 133,
        "port": 1,
        "port_select": 1,
        "cap_mask": None,
        "count": 6,
        "zero": RCV_ERROR_DETAILS,
        "counters": {},
        "hex_fields": {"CounterSelect": 0},
    },
    "infiniband_exporter-E-rcverr-switch-lid1719-port2.txt": {
        "kind": "rcv_error_details",
        "lid": 1719,
        "port": 2,
        "port_select": 2,
        "cap_mask": None,
        "count": 6,
        "zero": RCV_ERROR_DETAILS,
        "counters": {},
        "hex_fields": {"CounterSelect": 0},
    },
    "infiniband_exporter-x-hca-edr-lid133.txt": {
        "kind": "extended",
        "lid": 133,
        "port": 1,
        "port_select": 1,
        "cap_mask": 0x5A00,
        "count": 22,
        "zero": (*ERROR_COUNTERS, "PortXmitWait"),
        "counters": {
            "PortXmitData": 37108676853855,
            "PortRcvData": 37225401952885,
            "PortXmitPkts": 96917117320,
            "PortMulticastRcvPkts": 3732373137,
        },
        "hex_fields": {"CounterSelect": 0, "CounterSelect2": 0},
    },
    "infiniband_exporter-x-hca-edr-lid134.txt": {
        "kind": "extended",
        "lid": 134,
        "port": 1,
        "port_select": 1,
        "cap_mask": 0x5A00,
        "count": 22,
        "zero": (*ERROR_COUNTERS, "PortXmitWait"),
        "counters": {
            "PortXmitData": 9049592493976,
            "PortRcvData": 9752484588300,
            "PortMulticastXmitPkts": 721488,
        },
        "hex_fields": {"CounterSelect": 0, "CounterSelect2": 0},
    },
    # FAULT: link went down once, relay errors, discards, heavy xmit wait
    "infiniband_exporter-x-switch-edr-0x506b4b03005c2740.txt": {
        "kind": "extended",
        "lid": 2052,
        "port": 1,
        "port_select": 1,
        "cap_mask": 0x5300,
        "count": 22,
        "zero": ("SymbolErrorCounter", "PortRcvErrors", "LocalLinkIntegrityErrors"),
        "counters": {
            "LinkDownedCounter": 1,
            "PortRcvSwitchRelayErrors": 7,
            "PortXmitDiscards": 20046,
            "PortXmitWait": 41864608,
            "PortXmitData": 178791657177235,
        },
        "hex_fields": {"CounterSelect": 0, "CounterSelect2": 0},
    },
    # two blocks (ports 1 and 2) in one file: parse_perfquery keeps port 1 and says so
    "infiniband_exporter-x-switch-edr-2ports-lid1719.txt": {
        "kind": "extended",
        "lid": 1719,
        "port": 1,
        "port_select": 1,
        "cap_mask": 0x5300,
        "count": 22,
        "zero": ERROR_COUNTERS,
        "counters": {"PortXmitWait": 22730501, "PortXmitData": 36298026860928},
        "hex_fields": {"CounterSelect": 0, "CounterSelect2": 0},
        "blocks": [
            {"port": 1, "PortXmitWait": 22730501, "PortRcvData": 12279028775751},
            {"port": 2, "PortXmitWait": 36510964, "PortXmitData": 26006570014026},
        ],
    },
}


def test_fixture_folder_present():
    assert FOLDER.is_dir(), (
        f"{FOLDER} is missing: the perfquery tests read the real captures in tests/fixtures"
    )


def test_every_capture_has_facts():
    missing = captures_without_facts(KIND, FACTS)
    assert not missing, f"captures without facts in {__file__}: {missing}"


@pytest.mark.parametrize("name", capture_names(KIND))
def test_capture(name):
    text = read_capture(KIND, name)
    facts = FACTS.get(name)
    result = parse_perfquery(text)
    # whatever the capture, these hold
    assert result.mad_error is None, result.mad_error
    assert result.counters, "no counters parsed"
    assert all(isinstance(v, int) and v >= 0 for v in result.counters.values())
    for hex_name in ("PortSelect", "CounterSelect", "CounterSelect2"):
        assert hex_name not in result.counters
    assert facts is not None, f"write the facts of {name} into FACTS"
    assert result.kind == facts["kind"]
    assert result.lid == facts["lid"]
    assert result.port == facts["port"]
    assert result.port_select == facts["port_select"]
    assert result.cap_mask == facts["cap_mask"]
    assert result.header is not None and f"Lid {facts['lid']}" in result.header
    assert len(result.counters) == facts["count"], sorted(result.counters)
    for counter in facts["zero"]:
        assert result.counters[counter] == 0, counter
    for counter, value in facts["counters"].items():
        assert result.counters[counter] == value, counter
    assert result.hex_fields == facts["hex_fields"]
    blocks = parse_perfquery_blocks(text)
    if "blocks" in facts:
        assert len(blocks) == len(facts["blocks"])
        for block, expected in zip(blocks, facts["blocks"]):
            assert block.port == expected["port"] == block.port_select
            for counter, value in expected.items():
                if counter != "port":
                    assert block.counters[counter] == value
            assert block.mad_error is None
        assert any("port 2" in p for p in result.problems), result.problems
    else:
        assert result.problems == []
        assert len(blocks) == 1 and blocks[0].counters == result.counters


@pytest.mark.parametrize("name", capture_names(KIND))
def test_capture_truncated_and_with_stderr_warning(name):
    """Cut anywhere, a capture still parses; an ibwarn beside counters is a warning only."""
    text = read_capture(KIND, name)
    for cut in (1, len(text) // 3, len(text) // 2, len(text) - 3):
        partial = parse_perfquery(text[:cut])
        assert isinstance(partial.counters, dict)
    warned = parse_perfquery(
        text + "\nibwarn: [4242] dump_perfcounters: PerfMgt ClassPortInfo 0x1600 extended "
        "counters not indicated\n"
    )
    assert warned.mad_error is None
    assert warned.counters == parse_perfquery(text).counters
    assert any("extended counters not indicated" in p for p in warned.problems)


def test_blocks_for_the_same_port_merge():
    """-x then -E of the same port in one output (a wrapper running both) read as one port."""
    names = (
        "infiniband_exporter-x-hca-edr-lid133.txt",
        "infiniband_exporter-E-rcverr-hca-lid133.txt",
    )
    extended, details = (parse_perfquery(read_capture(KIND, name)) for name in names)
    merged = parse_perfquery(read_capture(KIND, names[0]) + read_capture(KIND, names[1]))
    assert merged.kind == "extended+rcv_error_details"
    assert merged.counters == {**extended.counters, **details.counters}
    assert len(merged.counters) == 28 and merged.problems == [] and merged.mad_error is None


# Short names of libibmad < 1.3 (fields.c of that era), plain PortCounters query.
OLD_FORMAT = """# Port counters: Lid 5 port 1
PortSelect:......................1
CounterSelect:...................0x0000
SymbolErrors:....................3
LinkRecovers:....................0
LinkDowned:......................2
RcvErrors:.......................11
RcvRemotePhysErrors:.............0
RcvSwRelayErrors:................0
XmtDiscards:.....................4
XmtConstraintErrors:.............0
RcvConstraintErrors:.............0
LinkIntegrityErrors:.............0
ExcBufOverrunErrors:.............0
VL15Dropped:.....................0
XmtData:.........................4294967295
RcvData:.........................123
XmtPkts:.........................7
RcvPkts:.........................8
"""


def test_old_short_names_are_renamed():
    result = parse_perfquery(OLD_FORMAT)
    assert result.kind == "port" and result.lid == 5 and result.port_select == 1
    assert result.counters["SymbolErrorCounter"] == 3
    assert result.counters["LinkDownedCounter"] == 2
    assert result.counters["PortRcvErrors"] == 11
    assert result.counters["PortXmitDiscards"] == 4
    assert result.counters["PortXmitData"] == 4294967295
    assert not set(result.counters) & set(OLD_COUNTER_NAMES)
    assert result.problems == [] and result.mad_error is None


def test_xmit_data_per_sl():
    lines = ["# PortXmitDataSL counters: Lid 133 port 1", "PortSelect:......................1"]
    lines += [f"XmtDataSL{sl}:{'.' * (22 - len(str(sl)))}{sl * 1000}" for sl in range(16)]
    result = parse_perfquery("\n".join(lines))
    assert result.kind == "xmit_data_sl"
    assert result.counters["XmtDataSL0"] == 0
    assert result.counters["XmtDataSL3"] == 3000
    assert len(result.counters) == 16


@pytest.mark.parametrize(
    "output, needle",
    [
        # a RoCE port / no umad access (treydock/infiniband_exporter#26)
        (
            "ibwarn: [299010] mad_rpc_open_port: client_register for mgmt 1 failed\n"
            "perfquery: iberror: failed: Failed to open '(null)' port '0'\n",
            "client_register",
        ),
        # a VM without a PMA: the MAD times out
        (
            "ibwarn: [3116] _do_madrpc: recv failed: Connection timed out\n"
            "ibwarn: [3116] mad_rpc: _do_madrpc failed; dport (Lid 12)\n"
            "perfquery: iberror: [pid 3116] main: failed: classportinfo query\n",
            "_do_madrpc",
        ),
        ("ibpanic: [77] main: stat of IB device 'mlx5_9' failed: No such file\n", "ibpanic"),
        ("src/query_smp.c:199; umad (DR path slid 0; dlid 0) bad status 110; Timed out\n", "110"),
    ],
)
def test_mad_failures_become_mad_error(output, needle):
    result = parse_perfquery(output)
    assert result.counters == {}
    assert result.mad_error is not None and needle in result.mad_error
    blocks = parse_perfquery_blocks(output)
    assert len(blocks) == 1 and blocks[0].mad_error


@pytest.mark.parametrize(
    "junk",
    [
        "",
        "\n\n",
        "\x00\x01\x02\xff garbage",
        "PortXmitData:....................",
        "# Port counters: Lid port\nfoo",
        "CounterSelect:...0xZZ\nPortXmitWait:.....-4\nSymbolErrorCounter:..." + "9" * 40,
        "# Port extended counters: Lid 1 port 1\n" + "A" * 100_000,
    ],
)
def test_garbage_never_raises(junk):
    result = parse_perfquery(junk)
    assert isinstance(result.problems, list)
    assert all(isinstance(v, int) and 0 <= v < 2**64 for v in result.counters.values())
    parse_perfquery_blocks(junk)


def test_binary_input_never_raises():
    result = parse_perfquery(bytes(range(256)) * 4)
    assert result.counters == {} and result.problems


@settings(max_examples=150, deadline=None)
@given(st.text())
def test_any_text_never_raises(text):
    result = parse_perfquery(text)
    assert isinstance(result.counters, dict)
    parse_perfquery_blocks(text)


@pytest.mark.parametrize(
    "mode, flags",
    [("basic", []), ("x", ["-x"]), ("E", ["-E"]), ("X", ["-X"])],
)
def test_argv(mode, flags):
    assert perfquery_argv("mlx5_0", 1, mode) == ["perfquery", *flags, "-C", "mlx5_0", "-P", "1"]


def test_argv_never_resets():
    for mode in PERFQUERY_FLAGS:
        for device, port in (("mlx5_0", 1), ("mlx4_1", 2), ("mlx5_bond_0", 1)):
            argv = perfquery_argv(device, port, mode)
            assert "-r" not in argv and "-R" not in argv
            assert not any(a.startswith("--reset") or a.startswith("--Reset") for a in argv)
            assert argv[0] == "perfquery" and all(isinstance(a, str) for a in argv)


@pytest.mark.parametrize("mode", ["r", "R", "xr", ""])
def test_argv_has_no_reset_mode(mode):
    with pytest.raises(KeyError):
        perfquery_argv("mlx5_0", 1, mode)


@pytest.mark.parametrize("device, port", [("", 1), ("-R", 1), ("mlx5 0", 1), ("mlx5_0", 0)])
def test_a_name_or_port_that_may_not_run_is_vetted_by_the_plan_not_the_builder(device, port):
    """Validated once: the plan refuses it (recorded as never started), no argv runs with it."""
    from snapshots import snapshot

    from ibdiag.families import perfquery
    from ibdiag.model import Device, Port

    dev = Device(name=device, path="d",
                 ports=[Port(number=port, path="p", state=4, link_layer="InfiniBand")])  # fmt: skip
    planned = perfquery.plan(snapshot([dev]))
    assert len(planned) == 3 and all(item.refused for item in planned)


@pytest.mark.parametrize("device, port", [("-R", 1), ("mlx5 0", 1), ("mlx5_0", 0), ("x", 65536)])
def test_argv_puts_any_device_and_port_in_one_element_each(device, port):
    """The argv builder takes any name as one element each; which names and ports may run is
    the family's ``plan``'s call (tests/sources/test_hostile_names.py)."""
    assert perfquery_argv(device, port, "x") == [
        "perfquery", "-x", "-C", device, "-P", str(port)
    ]  # fmt: skip
