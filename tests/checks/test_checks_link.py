"""Port link checks on hand-built Snapshots: link.state, phys_state, layer, rate and width."""

from __future__ import annotations

import sys
from typing import List

import pytest
from conftest import TESTS_DIR

_TESTS_DIR = TESTS_DIR
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)

from snapshots import (  # noqa: E402  (tests/ on sys.path, see above)
    CX6,
    CX6_DX,
    CX7,
    EDR,
    HDR,
    NDR,
    by_target,
    device,
    devices,
    netdev,
    only,
    pci,
    port,
    run,
    snapshot,
    statuses,
)

from ibdiag.model import Status  # noqa: E402
from ibdiag.thresholds import Thresholds  # noqa: E402

ALL_CHECKS = [
    "hca.inventory",
    "hca.firmware",
    "link.state",
    "link.phys_state",
    "link.layer",
    "link.rate",
    "link.width",
    "netdev.operstate",
    "pci.link",
]


# --- link.state -------------------------------------------------------------------------------


def test_state_healthy_every_port_of_every_hca_passes() -> None:
    snap = snapshot(devices(2, ports=[port(1), port(2)]))
    results = run("link.state", snap)
    assert statuses(results) == {
        "mlx5_0:1": "pass",
        "mlx5_0:2": "pass",
        "mlx5_1:1": "pass",
        "mlx5_1:2": "pass",
    }
    assert {result.check_id for result in results} == {"link.state"}
    first = by_target(results)["mlx5_0:1"]
    assert "4: ACTIVE" in first.message
    assert first.evidence == ["class/infiniband/mlx5_0/ports/1/state"]


def test_state_never_assumes_port_1() -> None:
    # Multi-plane HCAs carry their data on ports 3/6/9/12.
    ports = [port(3, state=1), port(6), port(9, state=2), port(12)]
    results = run("link.state", snapshot([device("mlx5_0", ports=ports)]))
    assert statuses(results) == {
        "mlx5_0:3": "fail",
        "mlx5_0:6": "pass",
        "mlx5_0:9": "fail",
        "mlx5_0:12": "pass",
    }


def test_state_down_fails_with_cable_hint() -> None:
    result = only(run("link.state", snapshot([device(ports=[port(state=1, phys_state=2)])])))
    assert result.status is Status.FAIL
    assert result.target == "mlx5_0:1"
    assert "1: DOWN" in result.message
    assert "4: ACTIVE" in result.message
    assert result.observed == "1: DOWN"
    assert result.expected == "4: ACTIVE"
    assert result.hint is not None
    assert "cable" in result.hint
    assert "phys_state" in result.hint


def test_state_init_fails_pointing_at_the_subnet_manager() -> None:
    result = only(run("link.state", snapshot([device(ports=[port(state=2, sm_lid=1)])])))
    assert result.status is Status.FAIL
    assert "2: INIT" in result.message
    assert result.hint is not None
    assert "subnet manager" in result.hint
    assert "sm_lid is 0" not in result.hint


def test_state_init_with_sm_lid_0_adds_a_note() -> None:
    result = only(run("link.state", snapshot([device(ports=[port(state=2, sm_lid=0)])])))
    assert result.status is Status.FAIL
    assert result.hint is not None
    assert "subnet manager" in result.hint
    assert "sm_lid is 0" in result.hint
    assert "class/infiniband/mlx5_0/ports/1/sm_lid" in result.evidence


def test_state_init_with_an_sm_lid_names_the_sm_that_configured_it() -> None:
    result = only(run("link.state", snapshot([device(ports=[port(state=2, sm_lid=0x1F)])])))
    assert result.status is Status.FAIL
    assert "sm_lid 0x1f: the SM there configured it once" in (result.hint or "")


def test_state_armed_fails_pointing_at_the_sm() -> None:
    result = only(run("link.state", snapshot([device(ports=[port(state=3, sm_lid=0)])])))
    assert result.status is Status.FAIL
    assert "3: ARMED" in result.message
    assert result.hint is not None
    assert "SM" in result.hint
    assert "sm_lid is 0" not in result.hint  # the note is for INIT only


def test_state_each_failing_port_gets_its_own_result() -> None:
    snap = snapshot(
        [
            device("mlx5_0", ports=[port(1, state=2), port(2)]),
            device("mlx5_1", ports=[port(1, state=1)]),
            device("mlx5_2"),
            device("mlx5_3", ports=[port(1, state=2)]),
        ]
    )
    results = run("link.state", snap)
    assert statuses(results) == {
        "mlx5_0:1": "fail",
        "mlx5_0:2": "pass",
        "mlx5_1:1": "fail",
        "mlx5_2:1": "pass",
        "mlx5_3:1": "fail",
    }
    keyed = by_target(results)
    assert "INIT" in keyed["mlx5_0:1"].message
    assert "DOWN" in keyed["mlx5_1:1"].message


def test_state_roce_down_gets_the_ethernet_hint() -> None:
    roce = port(state=1, phys_state=3, link_layer="Ethernet", rate_text="25 Gb/sec (1X EDR)")
    result = only(run("link.state", snapshot([device("mlx5_0", ports=[roce], hca_type=CX6_DX)])))
    assert result.status is Status.FAIL
    assert result.hint is not None
    assert "Ethernet" in result.hint
    assert "subnet manager" not in result.hint
    assert "SM" not in result.hint


def test_state_pre_roce_port_without_link_layer_is_treated_as_infiniband() -> None:
    old = port(state=2, link_layer=None, problems={"link_layer": "missing"})
    result = only(run("link.state", snapshot([device(ports=[old])])))
    assert result.status is Status.FAIL
    assert result.hint is not None
    assert "subnet manager" in result.hint


def test_state_unreadable_warns_with_the_reason() -> None:
    broken = port(state=None, problems={"state": "EINVAL (Invalid argument)"})
    result = only(run("link.state", snapshot([device(ports=[broken])])))
    assert result.status is Status.WARN
    assert result.target == "mlx5_0:1"
    assert "unreadable" in result.message
    assert "EINVAL (Invalid argument)" in result.message


def test_state_device_with_no_ports_fails_on_the_device() -> None:
    snap = snapshot([device("mlx5_0", ports=[]), device("mlx5_1")])
    results = run("link.state", snap)
    assert statuses(results) == {"mlx5_0": "fail", "mlx5_1:1": "pass"}
    empty = by_target(results)["mlx5_0"]
    assert "no ports" in empty.message
    assert "class/infiniband/mlx5_0/ports" in empty.message
    assert empty.hint is not None and "dmesg" in empty.hint


def test_state_device_whose_ports_dir_is_unreadable_names_the_reason() -> None:
    snap = snapshot([device("mlx5_0", ports=[], problems={"ports": "permission denied"})])
    result = only(run("link.state", snap))
    assert result.status is Status.FAIL
    assert result.target == "mlx5_0"
    assert "permission denied" in result.message


# --- link.phys_state --------------------------------------------------------------------------


def test_phys_state_linkup_passes() -> None:
    results = run("link.phys_state", snapshot(devices(2, ports=[port(1), port(2)])))
    assert set(statuses(results).values()) == {"pass"}
    assert len(results) == 4
    assert "5: LinkUp" in results[0].message


@pytest.mark.parametrize(
    ("code", "name", "hint_words"),
    [
        (2, "Polling", ["cable", "peer switch port"]),
        (3, "Disabled", ["disabled", "SM", "re-enable"]),
        (6, "LinkErrorRecovery", ["cable", "transceiver"]),
        (1, "Sleep", ["re-enable"]),
    ],
)
def test_phys_state_not_linkup_fails_with_the_matching_hint(
    code: int, name: str, hint_words: List[str]
) -> None:
    bad = port(2, state=1, phys_state=code)
    results = run("link.phys_state", snapshot([device(ports=[port(1), bad])]))
    assert statuses(results) == {"mlx5_0:1": "pass", "mlx5_0:2": "fail"}
    result = by_target(results)["mlx5_0:2"]
    assert f"{code}: {name}" in result.message
    assert "5: LinkUp" in result.message
    assert result.observed == f"{code}: {name}"
    assert result.hint is not None
    for word in hint_words:
        assert word in result.hint


def test_phys_state_each_failing_port_is_its_own_result() -> None:
    snap = snapshot(
        [
            device("mlx5_0", ports=[port(1, state=1, phys_state=2)]),
            device("mlx5_1", ports=[port(1, state=1, phys_state=3)]),
        ]
    )
    results = run("link.phys_state", snap)
    assert statuses(results) == {"mlx5_0:1": "fail", "mlx5_1:1": "fail"}
    keyed = by_target(results)
    assert "Polling" in keyed["mlx5_0:1"].message
    assert "Disabled" in keyed["mlx5_1:1"].message


def test_phys_state_0_on_an_active_port_is_skipped() -> None:
    virtual = port(state=4, phys_state=0)
    result = only(run("link.phys_state", snapshot([device("mlx4_0", ports=[virtual])])))
    assert result.status is Status.SKIP
    assert result.target == "mlx4_0:1"
    assert "0: <unknown>" in result.message


def test_phys_state_0_on_a_port_that_is_not_active_fails() -> None:
    result = only(run("link.phys_state", snapshot([device(ports=[port(state=1, phys_state=0)])])))
    assert result.status is Status.FAIL


def test_phys_state_unreadable_warns() -> None:
    broken = port(phys_state=None, problems={"phys_state": "permission denied"})
    result = only(run("link.phys_state", snapshot([device(ports=[broken])])))
    assert result.status is Status.WARN
    assert "permission denied" in result.message


# --- link.layer -------------------------------------------------------------------------------


def test_layer_infiniband_and_ethernet_pass() -> None:
    snap = snapshot(
        [
            device("mlx5_0"),
            device(
                "mlx5_1",
                hca_type=CX6_DX,
                ports=[port(1, link_layer="Ethernet", rate_text="100 Gb/sec (4X EDR)")],
            ),
        ]
    )
    results = run("link.layer", snap)
    assert statuses(results) == {"mlx5_0:1": "pass", "mlx5_1:1": "pass"}
    keyed = by_target(results)
    assert keyed["mlx5_0:1"].observed == "InfiniBand"
    assert keyed["mlx5_1:1"].observed == "Ethernet"
    assert "RoCE" in keyed["mlx5_1:1"].message


def test_layer_missing_file_counts_as_infiniband() -> None:
    old = port(link_layer=None, problems={"link_layer": "missing"})
    result = only(run("link.layer", snapshot([device("mlx4_0", ports=[old], hca_type="MT4099")])))
    assert result.status is Status.PASS
    assert result.observed == "InfiniBand"
    assert "pre-RoCE" in result.message


def test_layer_garbage_warns_showing_the_value() -> None:
    odd = port(link_layer="Omni-Path")
    result = only(run("link.layer", snapshot([device(ports=[odd])])))
    assert result.status is Status.WARN
    assert "Omni-Path" in result.message
    assert result.observed == "Omni-Path"


def test_layer_unreadable_warns_with_the_reason() -> None:
    odd = port(link_layer=None, problems={"link_layer": "EIO (Input/output error)"})
    result = only(run("link.layer", snapshot([device(ports=[odd])])))
    assert result.status is Status.WARN
    assert "EIO (Input/output error)" in result.message


# --- link.rate --------------------------------------------------------------------------------


def test_rate_below_the_expected_rate_fails() -> None:
    snap = snapshot([device(ports=[port(1, rate_text=EDR), port(2)])])
    results = run("link.rate", snap, Thresholds(expect_rate_gbps=200))
    assert statuses(results) == {"mlx5_0:1": "fail", "mlx5_0:2": "pass"}
    failed = by_target(results)["mlx5_0:1"]
    assert failed.observed == 100
    assert failed.expected == 200
    assert "100 Gb/s" in failed.message
    assert "200 Gb/s" in failed.message
    assert failed.hint is not None and "cable" in failed.hint


def test_rate_at_or_above_the_expected_rate_passes() -> None:
    snap = snapshot([device("mlx5_0"), device("mlx5_1", hca_type=CX7, ports=[port(rate_text=NDR)])])
    results = run("link.rate", snap, Thresholds(expect_rate_gbps=200))
    assert statuses(results) == {"mlx5_0:1": "pass", "mlx5_1:1": "pass"}
    assert by_target(results)["mlx5_0:1"].expected == 200


def test_expected_rate_overrides_the_capability_table() -> None:
    # A ConnectX-6 fabric run at EDR on purpose: --expect-rate 100 makes EDR healthy.
    snap = snapshot(devices(2, ports=[port(rate_text=EDR)]))
    results = run("link.rate", snap, Thresholds(expect_rate_gbps=100))
    assert set(statuses(results).values()) == {"pass"}


def test_rate_one_port_slower_than_its_same_model_peers_fails() -> None:
    devs = devices(8)
    devs[5] = device("mlx5_5", ports=[port(rate_text=EDR)])
    results = run("link.rate", snapshot(devs))
    expected = {f"mlx5_{n}:1": "pass" for n in range(8)}
    expected["mlx5_5:1"] = "fail"
    assert statuses(results) == expected
    slow = by_target(results)["mlx5_5:1"]
    assert slow.observed == 100
    assert slow.expected == 200
    assert "ConnectX-6" in slow.message
    assert "200 Gb/s" in slow.message


def test_rate_slow_port_on_a_second_port_of_one_hca() -> None:
    snap = snapshot([device(ports=[port(1), port(2, rate_text=EDR)])])
    assert statuses(run("link.rate", snap)) == {"mlx5_0:1": "pass", "mlx5_0:2": "fail"}


def test_rate_all_connectx6_ports_at_edr_warn_by_capability() -> None:
    results = run("link.rate", snapshot(devices(4, ports=[port(rate_text=EDR)])))
    assert set(statuses(results).values()) == {"warn"}
    assert len(results) == 4
    for result in results:
        assert "ConnectX-6" in result.message
        assert "HDR" in result.message
        assert result.expected == "HDR"
        assert result.hint is not None and "--expect-rate" in result.hint


def test_rate_connectx7_at_hdr_warns() -> None:
    snap = snapshot(devices(2, hca_type=CX7, ports=[port(rate_text=HDR)]))
    results = run("link.rate", snap)
    assert set(statuses(results).values()) == {"warn"}
    assert "ConnectX-7" in results[0].message
    assert "NDR" in results[0].message


def test_rate_connectx7_at_ndr_passes() -> None:
    snap = snapshot(devices(2, hca_type=CX7, ports=[port(rate_text=NDR)]))
    assert set(statuses(run("link.rate", snap)).values()) == {"pass"}


@pytest.mark.parametrize(
    "rate_text",
    ["2.5 Gb/sec (1X SDR)", "10 Gb/sec (4X)", "40 Gb/sec (4X QDR)", EDR, HDR, NDR],
)
def test_rate_unknown_model_is_not_judged_by_capability(rate_text: str) -> None:
    unknown = device(
        "rxe0",
        hca_type="MT9999",
        pci=pci("0000:3b:00.0", device_id="0xffff", vendor_id="0x1af4"),
        ports=[port(rate_text=rate_text)],
    )
    assert statuses(run("link.rate", snapshot([unknown]))) == {"rxe0:1": "pass"}


def test_rate_split_cable_hdr100_is_still_hdr() -> None:
    snap = snapshot(devices(2, ports=[port(rate_text="100 Gb/sec (2X HDR)")]))
    assert set(statuses(run("link.rate", snap)).values()) == {"pass"}


def test_rate_fdr10_ranks_below_fdr() -> None:
    cx3 = "MT4099"
    slow = snapshot(
        [device("mlx4_0", hca_type=cx3, ports=[port(rate_text="40 Gb/sec (4X FDR10)")])]
    )
    full = snapshot([device("mlx4_0", hca_type=cx3, ports=[port(rate_text="56 Gb/sec (4X FDR)")])])
    assert statuses(run("link.rate", slow)) == {"mlx4_0:1": "warn"}
    assert statuses(run("link.rate", full)) == {"mlx4_0:1": "pass"}


def test_rate_roce_port_on_ethernet_only_part_is_not_judged_by_ib_capability() -> None:
    roce = port(link_layer="Ethernet", rate_text="25 Gb/sec (1X EDR)")
    snap = snapshot([device("mlx5_0", hca_type=CX6_DX, ports=[roce])])
    assert statuses(run("link.rate", snap)) == {"mlx5_0:1": "pass"}


def test_rate_roce_port_on_a_vpi_connectx6_is_not_judged_by_ib_capability() -> None:
    # A ConnectX-6 (HDR-capable) port flipped to Ethernet: 25 Gb/s 1X EDR is a 25GbE link.
    roce = port(link_layer="Ethernet", rate_text="25 Gb/sec (1X EDR)")
    snap = snapshot([device("mlx5_0", ports=[roce])])
    assert statuses(run("link.rate", snap)) == {"mlx5_0:1": "pass"}


def test_rate_port_not_active_is_skipped_and_not_a_peer() -> None:
    # mlx5_1 is INIT at a (stale) higher rate: it must neither be graded nor set the bar.
    snap = snapshot(
        [
            device("mlx5_0", hca_type=CX7, ports=[port(rate_text=NDR)]),
            device("mlx5_1", hca_type=CX7, ports=[port(state=2, rate_text="800 Gb/sec (4X XDR)")]),
        ]
    )
    results = run("link.rate", snap)
    assert statuses(results) == {"mlx5_0:1": "pass", "mlx5_1:1": "skip"}
    assert "not ACTIVE" in by_target(results)["mlx5_1:1"].message


def test_rate_unreadable_on_an_active_port_warns() -> None:
    broken = port(rate_text=None, problems={"rate": "EINVAL (Invalid argument)"})
    snap = snapshot([device(ports=[broken, port(2)])])
    results = run("link.rate", snap, Thresholds(expect_rate_gbps=200))
    assert statuses(results) == {"mlx5_0:1": "warn", "mlx5_0:2": "pass"}
    warned = by_target(results)["mlx5_0:1"]
    assert "unreadable" in warned.message
    assert "EINVAL (Invalid argument)" in warned.message
    assert warned.expected == 200


def test_rate_peers_are_compared_only_within_one_model() -> None:
    snap = snapshot(
        [
            device("mlx5_0", hca_type=CX6, ports=[port(rate_text=HDR)]),
            device("mlx5_1", hca_type=CX6, ports=[port(rate_text=HDR)]),
            device("mlx5_2", hca_type=CX7, ports=[port(rate_text=NDR)]),
        ]
    )
    assert statuses(run("link.rate", snap)) == {
        "mlx5_0:1": "pass",
        "mlx5_1:1": "pass",
        "mlx5_2:1": "pass",
    }


def test_rate_peers_are_compared_only_within_one_link_layer() -> None:
    snap = snapshot(
        [
            device("mlx5_0", ports=[port(rate_text=HDR)]),
            device("mlx5_1", ports=[port(rate_text=HDR)]),
            device("mlx5_2", ports=[port(link_layer="Ethernet", rate_text="100 Gb/sec (4X EDR)")]),
        ]
    )
    assert statuses(run("link.rate", snap)) == {
        "mlx5_0:1": "pass",
        "mlx5_1:1": "pass",
        "mlx5_2:1": "pass",
    }


def test_rate_slow_roce_port_among_roce_peers_of_its_model_fails() -> None:
    eth = dict(link_layer="Ethernet")
    snap = snapshot(
        [
            device("mlx5_0", hca_type=CX6_DX, ports=[port(rate_text="100 Gb/sec (4X EDR)", **eth)]),
            device("mlx5_1", hca_type=CX6_DX, ports=[port(rate_text="25 Gb/sec (1X EDR)", **eth)]),
        ]
    )
    assert statuses(run("link.rate", snap)) == {"mlx5_0:1": "pass", "mlx5_1:1": "fail"}


def test_rate_model_identified_by_pci_id_when_hca_type_is_missing() -> None:
    anonymous = device(
        "mlx5_0", hca_type=None, pci=pci(device_id="0x101b"), ports=[port(rate_text=EDR)]
    )
    result = only(run("link.rate", snapshot([anonymous])))
    assert result.status is Status.WARN
    assert "ConnectX-6" in result.message


def test_rate_pci_identified_device_is_a_peer_of_its_model() -> None:
    snap = snapshot(
        [
            device("mlx5_0", hca_type=CX6, ports=[port(rate_text=HDR)]),
            device(
                "mlx5_1", hca_type=None, pci=pci(device_id="0x101B"), ports=[port(rate_text=EDR)]
            ),
        ]
    )
    results = run("link.rate", snap)
    assert statuses(results) == {"mlx5_0:1": "pass", "mlx5_1:1": "fail"}
    assert "ConnectX-6" in by_target(results)["mlx5_1:1"].message


def test_rate_expectation_applies_to_infiniband_ports_not_roce() -> None:
    # --expect-rate is "the rate every InfiniBand port must run at" (Thresholds): the node's
    # 100 GbE storage NIC (RoCE) must not fail against the 200 Gb/s HDR expectation.
    snap = snapshot(
        [
            device("mlx5_0"),
            device("mlx5_1"),
            device(
                "mlx5_2",
                hca_type=CX6_DX,
                ports=[port(link_layer="Ethernet", rate_text="100 Gb/sec (4X EDR)")],
            ),
        ]
    )
    results = run("link.rate", snap, Thresholds(expect_rate_gbps=200))
    keyed = statuses(results)
    assert keyed["mlx5_0:1"] == "pass"
    assert keyed["mlx5_1:1"] == "pass"
    assert keyed["mlx5_2:1"] in {"pass", "skip"}


# --- link.width -------------------------------------------------------------------------------


def test_width_1x_infiniband_warns() -> None:
    snap = snapshot([device(ports=[port(1, rate_text="50 Gb/sec (1X HDR)"), port(2)])])
    results = run("link.width", snap)
    assert statuses(results) == {"mlx5_0:1": "warn", "mlx5_0:2": "pass"}
    narrow = by_target(results)["mlx5_0:1"]
    assert narrow.observed == "1X"
    assert narrow.expected == "4X"
    assert "1X" in narrow.message
    assert narrow.hint is not None and "cable" in narrow.hint


@pytest.mark.parametrize(
    "rate_text", ["100 Gb/sec (2X HDR)", HDR, NDR, "120 Gb/sec (12X QDR)", "200 Gb/sec (2X NDR)"]
)
def test_width_2x_and_wider_pass(rate_text: str) -> None:
    result = only(run("link.width", snapshot([device(ports=[port(rate_text=rate_text)])])))
    assert result.status is Status.PASS
    assert result.target == "mlx5_0:1"


def test_width_ethernet_1x_is_not_judged() -> None:
    roce = port(link_layer="Ethernet", rate_text="25 Gb/sec (1X EDR)")
    assert run("link.width", snapshot([device(hca_type=CX6_DX, ports=[roce])])) == []


def test_width_pre_roce_port_without_link_layer_is_judged_as_infiniband() -> None:
    old = port(link_layer=None, problems={"link_layer": "missing"}, rate_text="10 Gb/sec (1X QDR)")
    result = only(run("link.width", snapshot([device("mlx4_0", hca_type="MT4099", ports=[old])])))
    assert result.status is Status.WARN


def test_width_ports_not_active_or_without_lanes_are_not_judged() -> None:
    snap = snapshot(
        [
            device(
                ports=[
                    port(1, state=2, rate_text="50 Gb/sec (1X HDR)"),
                    port(2, rate_text=None, problems={"rate": "empty"}),
                    port(3, rate_text="10 Gb/sec"),
                ]
            )
        ]
    )
    assert run("link.width", snap) == []


# --- ignored HCAs leave every check -----------------------------------------------------------


def _node_with_a_broken_ignored_nic() -> List:
    broken_eth = device(
        "mlx5_an0",
        hca_type=CX6_DX,
        fw_ver="22.36.1010",
        pci=pci("0000:00:02.0", device_id="0x101d", current_link_width=8, max_link_width=16),
        ports=[
            port(
                1,
                state=1,
                phys_state=2,
                link_layer="Banana",
                rate_text="10 Gb/sec (1X QDR)",
                netdev=netdev("eth1", "down", type=1),
            ),
        ],
    )
    return [device("mlx5_0"), device("mlx5_1", fw_ver="20.30.1004"), broken_eth]


@pytest.mark.parametrize("check_id", ALL_CHECKS)
def test_ignored_hca_leaves_every_check(check_id: str) -> None:
    snap = snapshot(_node_with_a_broken_ignored_nic())
    th = Thresholds(ignore_hcas=["mlx5_an*"], expect_hcas=2, expect_rate_gbps=200)
    results = run(check_id, snap, th)
    assert not any(result.target.startswith("mlx5_an0") for result in results), results
    assert not any("mlx5_an0" in result.message for result in results), results
    assert all(result.status is not Status.ERROR for result in results)


@pytest.mark.parametrize("check_id", ["link.state", "link.phys_state", "link.layer", "pci.link"])
def test_the_same_hca_is_graded_when_not_ignored(check_id: str) -> None:
    snap = snapshot(_node_with_a_broken_ignored_nic())
    results = run(check_id, snap, Thresholds(ignore_hcas=["mlx5_ib*"]))
    graded = [result for result in results if result.target.startswith("mlx5_an0")]
    assert graded
    assert {result.status for result in graded} <= {Status.FAIL, Status.WARN}
