"""The module family's plan (argv, mstlink fallback, refusals) and interpret (which run's
reading, why none), and the checks phy.ber and phy.optics on each status."""

from __future__ import annotations

from typing import List, Optional

import pytest
from module_captures import HEALTHY_NAME, capture, degraded, path
from snapshots import by_target, device, pci, port, run, snapshot, with_runs

from ibdiag.facts.module import MLXLINK, MSTLINK, ModuleReading, module_role
from ibdiag.facts.outcome import NoData
from ibdiag.families import module as family
from ibdiag.model import CommandRun, Result, Snapshot, Status
from ibdiag.thresholds import Thresholds

TARGET = "mlx5_3:1"


def node(**dev_kwargs) -> Snapshot:
    return snapshot([device("mlx5_3", **dev_kwargs)])


def ran(tool: str, stdout: str = "", rc: int = 0, **kwargs) -> CommandRun:
    return CommandRun(argv=family.argv(tool, "mlx5_3", 1), role=module_role(tool, TARGET),
                      rc=rc, stdout=stdout, **kwargs)  # fmt: skip


def absent(tool: str) -> CommandRun:
    return CommandRun(argv=family.argv(tool, "mlx5_3", 1), role=module_role(tool, TARGET),
                      not_found=True)  # fmt: skip


def reading_of(*runs: CommandRun) -> ModuleReading:
    snap = with_runs(node(), *runs)
    found = snap.devices[0].ports[0].facts["module"]
    assert isinstance(found, ModuleReading)
    return found


def graded(check_id: str, *runs: CommandRun) -> Result:
    return by_target(run(check_id, with_runs(node(), *runs), Thresholds()))[TARGET]


# -- plan --------------------------------------------------------------------------------------


def test_plan_every_port_mlxlink_with_mstlink_fallback():
    snap = snapshot([device("mlx5_3", ports=[port(1), port(2, link_layer="Ethernet")])])
    planned = family.plan(snap)
    assert [item.argv for item in planned] == [
        ["mlxlink", "-d", "mlx5_3", "-p", "1", "-m", "-c", "--json"],
        ["mlxlink", "-d", "mlx5_3", "-p", "2", "-m", "-c", "--json"],
    ]
    assert [str(item.role) for item in planned] == [
        "module-mlxlink mlx5_3:1", "module-mlxlink mlx5_3:2",
    ]  # fmt: skip
    first = planned[0]
    assert first.refused is None and first.fallback is not None
    assert first.fallback.argv == ["mstlink", "-d", "mlx5_3", "-p", "1", "-m", "-c", "--json"]
    assert str(first.fallback.role) == "module-mstlink mlx5_3:1"
    assert not any(word in " ".join(item.argv) for item in planned for word in ("mst ", "--pc"))


def test_plan_refuses_a_virtual_function():
    (item,) = family.plan(node(hca_type="MT4124", pci=pci(device_id="0x101c")))
    assert item.fallback is None
    assert item.refused is not None and "mlxlink needs the PF" in item.refused


def test_plan_refuses_a_device_that_is_no_nvidia_hca():
    snap = snapshot([device("rxe0", hca_type=None, pci=pci(vendor_id="0x8086"))])
    (item,) = family.plan(snap)
    assert item.refused is not None and "no NVIDIA/Mellanox HCA" in item.refused


def test_plan_refuses_a_name_that_may_not_go_on_a_command_line():
    (item,) = family.plan(snapshot([device("-mlx5_0")]))
    assert item.refused is not None


def test_refused_vf_is_a_skip_with_the_reason():
    snap = node(hca_type="MT4124", pci=pci(device_id="0x101c"))
    (item,) = family.plan(snap)
    from ibdiag.families import refused_run

    snap = with_runs(snap, refused_run(item))
    found = snap.devices[0].ports[0].facts["module"]
    assert found.outcome.no_data == NoData.NOT_STARTED
    for check_id in ("phy.ber", "phy.optics"):
        result = by_target(run(check_id, snap))[TARGET]
        assert result.status == Status.SKIP and "mlxlink needs the PF" in result.message


# -- interpret ---------------------------------------------------------------------------------


def test_mlxlink_reading():
    found = reading_of(ran(MLXLINK, capture(HEALTHY_NAME)))
    assert found.tool == "mlxlink" and found.outcome.no_data is None
    assert found.identity.serial == "CWJH05025502589"
    assert found.outcome.command.startswith("mlxlink -d mlx5_3 -p 1")


def test_mlxlink_absent_mstlink_reads():
    found = reading_of(absent(MLXLINK), ran(MSTLINK, capture(HEALTHY_NAME)))
    assert found.tool == "mstlink" and found.effective_ber is not None
    assert found.outcome.command.startswith("mstlink")


def test_neither_installed_is_not_installed():
    found = reading_of(absent(MLXLINK), absent(MSTLINK))
    assert found.tool is None and found.outcome.no_data == NoData.NOT_INSTALLED
    assert found.outcome.reason == family.NEITHER
    result = graded("phy.ber", absent(MLXLINK), absent(MSTLINK))
    assert result.status == Status.SKIP and "neither mlxlink" in result.message


def test_real_mstlink_no_device_output_is_no_device():
    with open(path("mstlink-4.21-no-device.stderr")) as handle:
        stderr = handle.read()
    with open(path("mstlink-4.21-no-device.stdout")) as handle:
        stdout = handle.read()
    found = reading_of(absent(MLXLINK), ran(MSTLINK, stdout, rc=1, stderr=stderr))
    assert found.outcome.no_data == NoData.NO_DEVICE
    assert found.outcome.reason.startswith("mstlink cannot open the device from here: ")
    result = graded("phy.optics", absent(MLXLINK), ran(MSTLINK, stdout, rc=1, stderr=stderr))
    assert result.status == Status.SKIP


def test_no_cable_is_not_supported():
    stdout = '{"result": {}, "status": {"code": 1, "message": "No plugged cable detected"}}'
    found = reading_of(ran(MLXLINK, stdout, rc=1))
    assert found.outcome.no_data == NoData.NOT_SUPPORTED
    assert "No plugged cable detected" in found.outcome.reason


def test_status_error_with_sections_keeps_the_data():
    found = reading_of(ran(MLXLINK, degraded("status-error"), rc=1))
    assert found.outcome.no_data is None and found.status_code == 1
    assert found.identity.part_number == "T-F4GS-BV0"
    result = graded("phy.ber", ran(MLXLINK, degraded("status-error"), rc=1))
    assert result.status == Status.SKIP and "status 1" in result.message


def test_garbage_exit_0_is_garbage():
    found = reading_of(ran(MLXLINK, "Segmentation fault?"))
    assert found.outcome.no_data == NoData.GARBAGE


def test_timed_out_warns_as_a_symptom():
    hung = CommandRun(argv=family.argv(MLXLINK, "mlx5_3", 1), role=module_role(MLXLINK, TARGET),
                      timed_out=True, duration_s=10.0)  # fmt: skip
    result = graded("phy.ber", hung, absent(MSTLINK))
    assert result.status == Status.WARN and "timed out" in result.message


def test_not_collected_is_a_skip():
    result = by_target(run("phy.ber", node()))[TARGET]
    assert result.status == Status.SKIP and "not collected" in result.message


# -- phy.ber -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, status",
    [(capture(HEALTHY_NAME), Status.PASS), (degraded("ber-5e-11"), Status.WARN),
     (degraded("ber-1e-8"), Status.FAIL)],
)  # fmt: skip
def test_phy_ber(text, status):
    result = graded("phy.ber", ran(MLXLINK, text))
    assert result.status == status
    assert "raw BER 2.0e-09" in result.message
    assert result.subject == "T-F4GS-BV0"


def test_phy_ber_fail_message_states_observed_and_expected():
    result = graded("phy.ber", ran(MLXLINK, degraded("ber-1e-8")))
    assert (
        result.message == "effective BER 1.0e-08 (raw BER 2.0e-09), expected <= 1e-09 (fail above)"
    )
    assert result.check_id == "phy.ber" and result.target == TARGET


def test_phy_ber_thresholds_move_the_verdict():
    snap = with_runs(node(), ran(MLXLINK, degraded("ber-5e-11")))
    strict = by_target(run("phy.ber", snap, Thresholds(ber_warn=1e-14, ber_fail=1e-11)))[TARGET]
    assert strict.status == Status.FAIL


def test_phy_ber_n_a_skips():
    result = graded("phy.ber", ran(MLXLINK, degraded("n-a")))
    assert result.status == Status.SKIP and "no effective BER" in result.message


# -- phy.optics --------------------------------------------------------------------------------


def _optics(name: Optional[str]) -> Result:
    text = capture(HEALTHY_NAME) if name is None else degraded(name)
    return graded("phy.optics", ran(MLXLINK, text))


def test_phy_optics_healthy_passes():
    result = _optics(None)
    assert result.status == Status.PASS
    assert result.message == (
        "4 lanes inside the module's thresholds, no LOS/LOL, 54 C in [-5..75]"
    )


@pytest.mark.parametrize(
    "name, words",
    [
        ("rx-under-low-alarm", ["lane 1 Rx power -12.5 dBm below alarm [-10.41..6]"]),
        ("los-lane-2", ["lane 2 Rx LOS"]),
        ("cdr-lol-lane-3", ["lane 3 Rx CDR LOL"]),
        ("hot", ["module temperature 78 C above alarm [-5..75]"]),
    ],
)
def test_phy_optics_fails_naming_the_lane(name: str, words: List[str]):
    result = _optics(name)
    assert result.status == Status.FAIL
    for word in words:
        assert word in result.message
    assert result.message.endswith("expected inside the module's thresholds")


def test_phy_optics_warning_threshold_warns():
    found = reading_of(ran(MLXLINK, capture(HEALTHY_NAME)))
    from ibdiag.facts.module import Bounds

    warned = found.model_copy(update={"rx_power_warning_dbm": Bounds(low=-7.0, high=2.0)})
    snap = node()
    dev = snap.devices[0]
    p = dev.ports[0].model_copy(update={"facts": {"module": warned}})
    snap = snap.model_copy(update={"devices": [dev.model_copy(update={"ports": [p]})]})
    result = by_target(run("phy.optics", snap))[TARGET]
    assert result.status == Status.WARN
    assert "lane 2 Rx power 2.281 dBm above warning [-7..2]" in result.message


def test_phy_optics_copper_without_optics_skips():
    result = _optics("copper")
    assert result.status == Status.SKIP and "copper cable without optics" in result.message


def test_phy_optics_copper_with_a_temperature_passes():
    text = degraded("copper").replace(
        '"Temperature [C]": "N/A"', '"Temperature [C]": "40 [-5..75]"'
    )
    result = graded("phy.optics", ran(MLXLINK, text))
    assert result.status == Status.PASS and result.message.startswith("no optics (copper)")


def test_phy_optics_n_a_skips():
    assert _optics("n-a").status == Status.SKIP


def test_level_standard_only_never_quick():
    from ibdiag import families

    assert family.LEVEL == "standard" and family.SOURCE == "module"
    assert "module" in families.sources_at("standard")
    assert "module" not in families.sources_at("full")
    snap = snapshot([device("mlx5_3")])
    assert families.plan(snap, ["module"], level="full") == []
    assert len(families.plan(snap, ["module"], level="standard")) == 1
