"""The ethtool family's parsers (``ibdiag.families.ethtool``): ``ethtool -S`` straight into the
``EthtoolStats`` fact, and ``ethtool IFACE``, on every capture in tests/fixtures/ethtool."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES_DIR, capture_names, captures_without_facts, read_capture
from hypothesis import given, settings
from hypothesis import strategies as st

from ibdiag.facts.ethtool import EthtoolStats
from ibdiag.families.ethtool import argv as ethtool_argv
from ibdiag.families.ethtool import (
    parse_ethtool_settings,
    parse_ethtool_stats,
    pfc_pause_by_priority,
)

FIXTURES = Path(FIXTURES_DIR)
FOLDER = FIXTURES / "ethtool"


# Read from each file by hand. "stats": an `ethtool -S` capture (count = its counter lines);
# "settings": a plain `ethtool IFACE` capture.
FACTS = {
    "azhpc-diagnostics-ethtool-settings-eth1-endure.txt": {
        "settings": {
            "interface": "eth1",
            "speed_mbps": 54000,
            "duplex": "full",
            "link_detected": True,
            "port": "Other",
            "auto_negotiation": False,
            "fields": {
                "Supported link modes": "Not reported",
                "Transceiver": "internal",
                "PHYAD": "0",
                "Current message level": (
                    "0x000000f7 (247) drv probe link ifdown ifup rx_err tx_err"
                ),
            },
        },
    },
    # FAULT: rx_discards_phy huge, host sends pause frames; poster omitted zero counters
    "bpf-2024-mlx5-xdp-kernel5.15-ethtool-S-rx_discards_phy-huge.txt": {
        "stats": {
            "count": 101,
            "counters": {
                "rx_packets": 333854100,
                "rx_discards_phy": 58591428329,
                "tx_pause_ctrl_phy": 5745055,
                "tx_global_pause": 5745042,
                "tx_global_pause_duration": 771103810,
                "rx_out_of_buffer": 990473555,
                "rx_prio0_discards": 58591314012,
                "tx_discards_phy": 0,
                "tx_errors_phy": 0,
                "rx0_xdp_drop": 3753342954,
                "ch0_aff_change": 6,
                "rx0_xdp_tx_cqes": 87229139,
            },
            "absent": ("link_down_events_phy", "rx_pause_ctrl_phy", "rx_pp_alloc_fast"),
        },
    },
    # FAULT: same NIC on 6.5, page-pool counters
    "bpf-2024-mlx5-xdp-kernel6.5-ethtool-S-rx_discards_phy-page-pool.txt": {
        "stats": {
            "count": 108,
            "counters": {
                "rx_packets": 7282880,
                "rx_discards_phy": 441063206498,
                "tx_pause_ctrl_phy": 44414017,
                "rx_out_of_buffer": 534918379,
                "rx_buffer_passed_thres_phy": 1192226,
                "rx_pp_alloc_fast": 3641784,
                "rx0_gro_packets": 0,
                "rx_prio0_discards": 441063206498,
                "rx0_pp_recycle_cached": 3641280,
            },
            "absent": ("tx_discards_phy", "link_down_events_phy"),
        },
    },
    # healthy ConnectX-4, header and indentation stripped by the ethq fixture
    "ethq-connectx4-mlx5-kernel4.15-ethtool-S-full.txt": {
        "stats": {
            "count": 751,
            "counters": {
                "rx_packets": 845320277,
                "rx_bytes": 2195783498134,
                "link_down_events_phy": 0,
                "rx_out_of_buffer": 0,
                "rx_crc_errors_phy": 0,
                "rx_symbol_err_phy": 0,
                "rx_pause_ctrl_phy": 0,
                "tx_pause_ctrl_phy": 0,
                "rx_discards_phy": 0,
                "tx_errors_phy": 0,
                "rx_prio0_packets": 845715962,
                "rx_prio7_packets": 0,
                "rx0_packets": 53947906,
                "tx7_packets": 96408152,
                "tx15_xmit_more": 5530,
            },
            "absent": ("rx_prio0_pause",),
        },
    },
}


def test_fixture_folder_present():
    assert FOLDER.is_dir(), f"{FOLDER} is missing: the ethtool tests read the real captures"


def test_every_capture_has_facts():
    missing = captures_without_facts("ethtool", FACTS)
    assert not missing, f"captures without facts in {__file__}: {missing}"


@pytest.mark.parametrize("name", capture_names("ethtool"))
def test_capture(name):
    text = read_capture("ethtool", name)
    facts = FACTS.get(name)
    assert facts is not None, f"write the facts of {name} into FACTS"
    stats = parse_ethtool_stats(text)
    settings_result = parse_ethtool_settings(text)
    assert isinstance(stats, EthtoolStats) and (stats.role, stats.outcome) == (None, None)
    assert isinstance(stats.counters, dict) and isinstance(settings_result.fields, dict)
    if "stats" in facts:
        expected = facts["stats"]
        assert stats.problems == [] and stats.error is None
        assert len(stats.counters) == expected["count"]
        assert all(isinstance(v, int) and v >= 0 for v in stats.counters.values())
        for counter, value in expected["counters"].items():
            assert stats.counters[counter] == value, counter
        for counter in expected["absent"]:
            assert counter not in stats.counters
        # no capture has per-priority pause counters (the posters' NICs used global pause)
        assert pfc_pause_by_priority(stats.counters) == {}
    if "settings" in facts:
        expected = facts["settings"]
        for attribute in (
            "interface",
            "speed_mbps",
            "duplex",
            "link_detected",
            "port",
            "auto_negotiation",
        ):
            assert getattr(settings_result, attribute) == expected[attribute], attribute
        for key, value in expected["fields"].items():
            assert settings_result.fields[key] == value
        assert settings_result.problems == []
        # fed to the -S parser by mistake: it says so rather than passing it off as stats
        assert any("not 'ethtool -S'" in p for p in stats.problems)


@pytest.mark.parametrize("name", capture_names("ethtool"))
def test_capture_truncated(name):
    text = read_capture("ethtool", name)
    for cut in (1, len(text) // 2, len(text) - 2):
        parse_ethtool_stats(text[:cut])
        parse_ethtool_settings(text[:cut])


def test_header_and_names_with_dots_brackets_spaces():
    text = (
        "NIC statistics:\n"
        "     rx_packets: 10\n"
        "     port.rx_bytes: 20\n"
        "     tx_queue_0_packets: 30\n"
        "     [0]: 40\n"
        "     TSO pkts tx: 50\n"
        "     rx_prio3_pause: 7\n"
        "     tx_prio3_pause: 8\n"
        "     rx_prio3_pause_duration: 900\n"
        "     tx_prio3_pause_transition: 2\n"
        "     rx_prio0_pause: 0\n"
        "     rx_pause_prio_5: 11\n"
        "     tx_pause_duration_prio_5: 12\n"
        "     rx_global_pause: 99\n"
        "     weird: 0x10\n"
    )
    stats = parse_ethtool_stats(text)
    assert stats.problems == []
    assert stats.counters["port.rx_bytes"] == 20
    assert stats.counters["[0]"] == 40
    assert stats.counters["TSO pkts tx"] == 50
    assert stats.counters["weird"] == 16
    assert pfc_pause_by_priority(stats.counters) == {
        0: {"rx_pause": 0},
        3: {
            "rx_pause": 7,
            "tx_pause": 8,
            "rx_pause_duration": 900,
            "tx_pause_transition": 2,
        },
        5: {"rx_pause": 11, "tx_pause_duration": 12},
    }


@pytest.mark.parametrize(
    "text, needle",
    [
        ("Cannot get stats strings information: Operation not supported\n", "Cannot get stats"),
        ("no stats available\n", "no stats available"),
        ("Cannot get driver information: No such device\n", "No such device"),
    ],
)
def test_errors(text, needle):
    stats = parse_ethtool_stats(text)
    assert stats.counters == {} and stats.error and needle in stats.error


def test_settings_unknown_speed_and_link_down():
    text = (
        "Settings for ib0:\n\tSpeed: Unknown!\n\tDuplex: Unknown! (255)\n\tPort: Other\n"
        "\tLink detected: no\n"
    )
    result = parse_ethtool_settings(text)
    assert result.speed_mbps is None and result.duplex is None and result.link_detected is False
    assert result.problems == []


@pytest.mark.parametrize(
    "junk",
    [
        "",
        "\x00\xff\xfe",
        "NIC statistics:\n     rx_packets: -5\n     tx: 99999999999999999999999\n     zz",
        "rx_packets: 1\nrx_packets: 2\n",
        "Settings for :\n\tSpeed: fastMb/s\n\t\t\tcontinuation\n",
    ],
)
def test_garbage_never_raises(junk):
    stats = parse_ethtool_stats(junk)
    assert all(0 <= v < 2**64 for v in stats.counters.values())
    assert stats.problems or stats.counters or stats.error
    parse_ethtool_settings(junk)


def test_repeated_name_keeps_first_and_says_so():
    stats = parse_ethtool_stats("rx_packets: 1\nrx_packets: 2\n")
    assert stats.counters == {"rx_packets": 1}
    assert any("repeated" in p for p in stats.problems)


def test_binary_never_raises():
    parse_ethtool_stats(bytes(range(256)) * 8)
    parse_ethtool_settings(bytes(range(256)) * 8)


@settings(max_examples=150, deadline=None)
@given(st.text())
def test_any_text_never_raises(text):
    parse_ethtool_stats(text)
    parse_ethtool_settings(text)
    pfc_pause_by_priority(parse_ethtool_stats(text).counters)


def test_argv():
    assert ethtool_argv("ib0") == ["ethtool", "-S", "ib0"]
    assert ethtool_argv("enp27s0f0np0") == ["ethtool", "-S", "enp27s0f0np0"]


@pytest.mark.parametrize("name", ["", "-S", "a b", "ib0;reboot"])
def test_a_netdev_name_that_may_not_run_is_vetted_by_the_plan_not_the_builder(name):
    """Validated once: the plan refuses it (recorded as never started), no argv runs with it."""
    from snapshots import snapshot

    from ibdiag.families import ethtool, refused_run
    from ibdiag.model import Device, NetDev, Port

    port = Port(number=1, path="p", state=4, link_layer="InfiniBand", netdev=NetDev(name=name))
    dev = Device(name="mlx5_0", path="d", ports=[port])
    (planned,) = ethtool.plan(snapshot([dev]))
    assert planned.refused
    run = refused_run(planned)
    assert run.skipped and run.argv == ["ethtool", "-S", name]


@pytest.mark.parametrize("name", ["-S", "a b", "x/y", "a" * 16, "ib0;reboot", "ib\\xff"])
def test_argv_puts_any_name_in_one_element(name):
    """The argv builder takes any name as one element; which names may run is
    ``ethtool.plan``'s call (tests/sources/test_hostile_names.py)."""
    assert ethtool_argv(name) == ["ethtool", "-S", name]
