"""Node and device checks on hand-built Snapshots: hca.inventory, pci.link, hca.firmware and
netdev.operstate."""

from __future__ import annotations

import sys

import pytest
from conftest import TESTS_DIR

_TESTS_DIR = TESTS_DIR
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)

from snapshots import (  # noqa: E402  (tests/ on sys.path, see above)
    CX6,
    CX6_DX,
    CX7,
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

# --- hca.inventory ----------------------------------------------------------------------------


def test_inventory_without_expectation_passes_listing_the_hcas() -> None:
    result = only(run("hca.inventory", snapshot(devices(2))))
    assert result.status is Status.PASS
    assert result.target == "node"
    assert result.check_id == "hca.inventory"
    assert result.observed == 2
    assert "mlx5_0" in result.message and "mlx5_1" in result.message


def test_inventory_expected_count_met_passes() -> None:
    result = only(run("hca.inventory", snapshot(devices(8)), Thresholds(expect_hcas=8)))
    assert result.status is Status.PASS
    assert (result.observed, result.expected) == (8, 8)


def test_inventory_fewer_than_expected_fails_naming_the_present_ones() -> None:
    present = [device(f"mlx5_{n}") for n in (0, 1, 2, 4, 5, 7)]
    result = only(run("hca.inventory", snapshot(present), Thresholds(expect_hcas=8)))
    assert result.status is Status.FAIL
    assert result.target == "node"
    assert (result.observed, result.expected) == (6, 8)
    assert "6 of 8" in result.message
    for name in ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_4", "mlx5_5", "mlx5_7"):
        assert name in result.message
    assert result.hint is not None and "lspci" in result.hint


def test_inventory_more_than_expected_warns() -> None:
    result = only(run("hca.inventory", snapshot(devices(3)), Thresholds(expect_hcas=2)))
    assert result.status is Status.WARN
    assert result.target == "node"
    assert (result.observed, result.expected) == (3, 2)
    assert "mlx5_2" in result.message
    assert result.hint is not None and "--ignore-hca" in result.hint


def test_inventory_one_fail_per_missing_expected_name() -> None:
    th = Thresholds(expect_hca_names=["mlx5_0", "mlx5_3", "mlx5_7"])
    results = run("hca.inventory", snapshot(devices(2)), th)
    failed = [result for result in results if result.status is Status.FAIL]
    assert sorted(result.target for result in failed) == ["mlx5_3", "mlx5_7"]
    assert not any(result.target == "mlx5_0" for result in results)
    missing = by_target(failed)["mlx5_3"]
    assert "mlx5_3" in missing.message
    assert "/sys/class/infiniband" in missing.message
    assert (missing.observed, missing.expected) == ("missing", "present")
    assert all(result.status is not Status.PASS for result in results)


def test_inventory_all_expected_names_present_passes() -> None:
    th = Thresholds(expect_hca_names=["mlx5_1", "mlx5_0"])
    result = only(run("hca.inventory", snapshot(devices(2)), th))
    assert result.status is Status.PASS
    assert result.target == "node"


def test_inventory_no_devices_no_expectation_skips() -> None:
    snap = snapshot([], problems={"class/infiniband": "missing"})
    result = only(run("hca.inventory", snap))
    assert result.status is Status.SKIP
    assert result.target == "node"
    assert "no InfiniBand devices found under /sys/class/infiniband" in result.message
    assert "missing" in result.message


def test_inventory_no_devices_with_expected_count_fails() -> None:
    result = only(run("hca.inventory", snapshot([]), Thresholds(expect_hcas=8)))
    assert result.status is Status.FAIL
    assert result.target == "node"
    assert (result.observed, result.expected) == (0, 8)


def test_inventory_no_devices_with_expected_names_fails_per_name() -> None:
    th = Thresholds(expect_hca_names=["mlx5_ib0", "mlx5_ib1"])
    results = run("hca.inventory", snapshot([]), th)
    assert statuses(results) == {"mlx5_ib0": "fail", "mlx5_ib1": "fail"}


def test_inventory_names_the_relocated_sysfs_root() -> None:
    result = only(run("hca.inventory", snapshot([], sysfs_root="/host/sys/")))
    assert "/host/sys/class/infiniband" in result.message
    assert "//" not in result.message


def test_inventory_does_not_count_ignored_hcas() -> None:
    node = [*devices(2), device("mlx5_an0", hca_type=CX6_DX)]
    th = Thresholds(expect_hcas=2, ignore_hcas=["mlx5_an*"])
    result = only(run("hca.inventory", snapshot(node), th))
    assert result.status is Status.PASS
    assert result.observed == 2
    assert "mlx5_an0" not in result.message
    # ... and an ignored HCA cannot stand in for an expected one
    th = Thresholds(expect_hcas=3, ignore_hcas=["mlx5_an*"])
    assert only(run("hca.inventory", snapshot(node), th)).status is Status.FAIL


# --- pci.link ---------------------------------------------------------------------------------


def test_pci_at_full_speed_and_width_passes() -> None:
    result = only(run("pci.link", snapshot([device("mlx5_0", pci=pci("0000:0c:00.0"))])))
    assert result.status is Status.PASS
    assert result.target == "mlx5_0"
    assert "0000:0c:00.0" in result.message
    assert "16 GT/s x16" in result.message
    assert "class/infiniband/mlx5_0/device/max_link_width" in result.evidence


def test_pci_narrower_than_capable_fails() -> None:
    narrow = pci("0000:4b:00.0", current_link_width=8, max_link_width=16)
    results = run("pci.link", snapshot([device("mlx5_0"), device("mlx5_1", pci=narrow)]))
    assert statuses(results) == {"mlx5_0": "pass", "mlx5_1": "fail"}
    failed = by_target(results)["mlx5_1"]
    assert failed.observed == "16 GT/s x8"
    assert failed.expected == "16 GT/s x16"
    assert "x8" in failed.message and "x16" in failed.message
    assert failed.hint is not None
    assert "lspci -vv -s 0000:4b:00.0" in failed.hint


def test_pci_slower_than_capable_fails() -> None:
    slow = pci(current_link_speed=8.0, max_link_speed=16.0)
    result = only(run("pci.link", snapshot([device(pci=slow)])))
    assert result.status is Status.FAIL
    assert result.observed == "8 GT/s x16"
    assert "8 GT/s" in result.message and "16 GT/s" in result.message


def test_pci_gen3_card_at_its_gen3_maximum_passes() -> None:
    gen3 = pci(current_link_speed=8.0, max_link_speed=8.0)
    assert only(run("pci.link", snapshot([device(pci=gen3)]))).status is Status.PASS


def test_pci_fractional_speeds_are_compared() -> None:
    old = pci(current_link_speed=2.5, current_link_width=1, max_link_speed=5.0, max_link_width=1)
    result = only(run("pci.link", snapshot([device(pci=old)])))
    assert result.status is Status.FAIL
    assert "2.5 GT/s x1" in result.message


@pytest.mark.parametrize(
    "attribute",
    ["max_link_speed", "max_link_width", "current_link_speed", "current_link_width"],
)
def test_pci_missing_attribute_skips_naming_it(attribute: str) -> None:
    partial = pci(**{attribute: None})  # type: ignore[arg-type]
    result = only(run("pci.link", snapshot([device(pci=partial)])))
    assert result.status is Status.SKIP
    assert result.target == "mlx5_0"
    assert attribute in result.message
    assert "missing" in result.message


def test_pci_unparsable_attribute_skips_with_the_reason() -> None:
    down = pci(
        current_link_speed=None,
        problems={"current_link_speed": "expected 'N GT/s', got 'Unknown'"},
    )
    result = only(run("pci.link", snapshot([device(pci=down)])))
    assert result.status is Status.SKIP
    assert "current_link_speed" in result.message
    assert "Unknown" in result.message


def test_pci_device_without_pci_function_skips() -> None:
    result = only(run("pci.link", snapshot([device("rxe0", pci=None, hca_type=None)])))
    assert result.status is Status.SKIP
    assert result.target == "rxe0"
    assert "no PCI" in result.message


# --- hca.firmware -----------------------------------------------------------------------------


def test_firmware_all_same_passes() -> None:
    results = run("hca.firmware", snapshot(devices(4)))
    assert set(statuses(results).values()) == {"pass"}
    assert len(results) == 4
    assert results[0].observed == "20.31.1014"


def test_firmware_the_odd_card_warns_naming_the_fleet_version() -> None:
    node = devices(8)
    node[3] = device("mlx5_3", fw_ver="20.28.1002")
    results = run("hca.firmware", snapshot(node))
    expected = {f"mlx5_{n}": "pass" for n in range(8)}
    expected["mlx5_3"] = "warn"
    assert statuses(results) == expected
    odd = by_target(results)["mlx5_3"]
    assert odd.observed == "20.28.1002"
    assert odd.expected == "20.31.1014"
    assert "20.28.1002" in odd.message
    assert "20.31.1014" in odd.message
    assert "ConnectX-6" in odd.message
    assert odd.hint is not None and "mlxfwmanager" in odd.hint
    assert by_target(results)["mlx5_0"].observed == "20.31.1014"


def test_firmware_different_models_are_not_compared() -> None:
    node = [
        *[device(f"mlx5_{n}", hca_type=CX6, fw_ver="20.31.1014") for n in range(4)],
        *[device(f"mlx5_{n}", hca_type=CX7, fw_ver="28.39.1002") for n in range(4, 6)],
    ]
    results = run("hca.firmware", snapshot(node))
    assert set(statuses(results).values()) == {"pass"}
    assert len(results) == 6


def test_firmware_tie_warns_every_card() -> None:
    node = [
        device("mlx5_0", fw_ver="20.31.1014"),
        device("mlx5_1", fw_ver="20.31.1014"),
        device("mlx5_2", fw_ver="20.35.1012"),
        device("mlx5_3", fw_ver="20.35.1012"),
    ]
    results = run("hca.firmware", snapshot(node))
    assert set(statuses(results).values()) == {"warn"}
    keyed = by_target(results)
    assert "20.35.1012" in keyed["mlx5_0"].message
    assert "20.31.1014" in keyed["mlx5_2"].message
    assert all(result.expected is None for result in results)


def test_firmware_two_odd_versions_each_name_the_others() -> None:
    node = [device(f"mlx5_{n}", fw_ver="20.31.1014") for n in range(5)]
    node += [device("mlx5_5", fw_ver="20.28.1002"), device("mlx5_6", fw_ver="20.30.1004")]
    results = run("hca.firmware", snapshot(node))
    keyed = statuses(results)
    assert keyed["mlx5_5"] == "warn" and keyed["mlx5_6"] == "warn"
    assert [keyed[f"mlx5_{n}"] for n in range(5)] == ["pass"] * 5
    odd = by_target(results)["mlx5_5"].message
    assert "20.31.1014" in odd and "20.30.1004" in odd


def test_firmware_groups_a_pci_identified_card_with_its_model() -> None:
    node = [
        device("mlx5_0", fw_ver="20.31.1014"),
        device("mlx5_1", fw_ver="20.31.1014"),
        device("mlx5_2", hca_type=None, pci=pci(device_id="0x101b"), fw_ver="20.28.1002"),
    ]
    results = run("hca.firmware", snapshot(node))
    assert statuses(results) == {"mlx5_0": "pass", "mlx5_1": "pass", "mlx5_2": "warn"}


def test_firmware_unreadable_version_does_not_disturb_the_others() -> None:
    node = [*devices(2), device("mlx5_2", fw_ver=None, problems={"fw_ver": "missing"})]
    results = run("hca.firmware", snapshot(node))
    keyed = statuses(results)
    assert keyed["mlx5_0"] == "pass" and keyed["mlx5_1"] == "pass"
    assert keyed.get("mlx5_2") not in {"warn", "fail"}


# --- netdev.operstate -------------------------------------------------------------------------


def test_netdev_up_on_active_port_passes() -> None:
    results = run("netdev.operstate", snapshot(devices(2)))
    assert statuses(results) == {"mlx5_0:1": "pass", "mlx5_1:1": "pass"}
    assert "IPoIB" in results[0].message and "ib0" in results[0].message


def test_netdev_down_on_active_port_warns_with_carrier_changes() -> None:
    down = port(netdev=netdev("ib4", "down", carrier=0, carrier_changes=37))
    node = [device("mlx5_0"), device("mlx5_4", ports=[down])]
    results = run("netdev.operstate", snapshot(node))
    assert statuses(results) == {"mlx5_0:1": "pass", "mlx5_4:1": "warn"}
    warned = by_target(results)["mlx5_4:1"]
    assert "IPoIB" in warned.message
    assert "ib4" in warned.message
    assert "down" in warned.message
    assert "ACTIVE" in warned.message
    assert "37" in warned.message
    assert "carrier" in warned.message
    assert (warned.observed, warned.expected) == ("down", "up")
    assert warned.hint is not None and "ip link show ib4" in warned.hint
    assert "class/net/ib4/carrier_changes" in warned.evidence


def test_netdev_down_without_carrier_changes_does_not_invent_them() -> None:
    down = port(netdev=netdev("ib0", "down", carrier_changes=None))
    result = only(run("netdev.operstate", snapshot([device(ports=[down])])))
    assert result.status is Status.WARN
    assert "carrier changed" not in result.message


@pytest.mark.parametrize("operstate", ["dormant", "lowerlayerdown", "unknown"])
def test_netdev_any_state_but_up_warns(operstate: str) -> None:
    odd = port(netdev=netdev("ib0", operstate))
    result = only(run("netdev.operstate", snapshot([device(ports=[odd])])))
    assert result.status is Status.WARN
    assert operstate in result.message


def test_netdev_operstate_unreadable_warns_with_the_reason() -> None:
    odd = port(netdev=netdev("ib0", None, problems={"operstate": "permission denied"}))
    result = only(run("netdev.operstate", snapshot([device(ports=[odd])])))
    assert result.status is Status.WARN
    assert "permission denied" in result.message


@pytest.mark.parametrize("state", [1, 2, 3, None])
def test_netdev_port_not_active_gives_no_result(state: object) -> None:
    down = port(state=state, netdev=netdev("ib0", "down"))  # type: ignore[arg-type]
    assert run("netdev.operstate", snapshot([device(ports=[down])])) == []


def test_netdev_port_without_netdev_gives_no_result() -> None:
    assert run("netdev.operstate", snapshot([device(ports=[port(netdev=None)])])) == []


def test_netdev_roce_interface_down_warns_as_roce() -> None:
    roce = port(
        link_layer="Ethernet",
        rate_text="100 Gb/sec (4X EDR)",
        netdev=netdev("ens1f0np0", "down", type=1, mode=None, carrier_changes=0),
    )
    result = only(run("netdev.operstate", snapshot([device(hca_type=CX6_DX, ports=[roce])])))
    assert result.status is Status.WARN
    assert "RoCE" in result.message
    assert "ens1f0np0" in result.message
    assert "carrier changed" not in result.message


def test_netdev_each_port_is_judged() -> None:
    ports = [
        port(1, netdev=netdev("ib0", "up")),
        port(2, netdev=netdev("ib1", "down")),
    ]
    results = run("netdev.operstate", snapshot([device(ports=ports)]))
    assert statuses(results) == {"mlx5_0:1": "pass", "mlx5_0:2": "warn"}
    assert "ib1" in by_target(results)["mlx5_0:2"].message
