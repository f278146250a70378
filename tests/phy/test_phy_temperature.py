"""phy.temperature: each sensor against its own crit - fail at/over, warn within the margin,
pass below or with no threshold, skip with the reason when nothing was read."""

from __future__ import annotations

from typing import List

import pytest
from snapshots import device, port, run, snapshot, statuses

from ibdiag.facts.hwmon import HcaSensor, HcaSensors
from ibdiag.model import Device
from ibdiag.sources.hwmon import UNAVAILABLE
from ibdiag.thresholds import Thresholds

HWMON = "class/infiniband/mlx5_0/device/hwmon/hwmon2"


def asic(now=47.0, crit=105.0, **more) -> HcaSensor:
    return HcaSensor(channel=1, label="asic", kind="asic", input_c=now, crit_c=crit, **more)


def module(now=57.0, crit=70.0, port_number=1, **more) -> HcaSensor:
    return HcaSensor(
        channel=2, label="Module0", kind="module", module=0, port=port_number,
        input_c=now, crit_c=crit, **more,
    )  # fmt: skip


def hca(*sensors: HcaSensor, name="mlx5_0", **fact) -> Device:
    found = HcaSensors(hwmon=HWMON, sensors=list(sensors), **fact)
    return device(name).model_copy(update={"facts": {"hwmon": found}})


def results(*devices: Device, th=None) -> List:
    return run("phy.temperature", snapshot(list(devices)), th)


def test_healthy_asic_and_module_pass_naming_the_hca_and_the_port():
    got = results(hca(asic(), module()))
    assert statuses(got) == {"mlx5_0": "pass", "mlx5_0:1": "pass"}
    by = {r.target: r for r in got}
    assert by["mlx5_0"].message == "asic 47.0 °C < 100.0 °C (crit 105.0 - 5)"
    assert by["mlx5_0:1"].observed == 57.0
    assert by["mlx5_0:1"].evidence == [f"{HWMON}/temp2_input", f"{HWMON}/temp2_crit"]


@pytest.mark.parametrize(
    "now, status, message",
    [
        (78.0, "fail", "module 0 78.0 °C >= crit 75.0 °C"),
        (75.0, "fail", "module 0 75.0 °C >= crit 75.0 °C"),
        (70.0, "warn", "module 0 70.0 °C within 5 °C of crit 75.0 °C"),
        (72.5, "warn", "module 0 72.5 °C within 5 °C of crit 75.0 °C"),
        (69.9, "pass", "module 0 69.9 °C < 70.0 °C (crit 75.0 - 5)"),
    ],
)
def test_module_against_its_own_crit(now, status, message):
    (result,) = [r for r in results(hca(asic(), module(now, 75.0))) if r.target == "mlx5_0:1"]
    assert (result.status.value, result.message) == (status, message)
    assert result.check_id == "phy.temperature" and result.observed == now


def test_hot_asic_fails_on_the_hca():
    got = results(hca(asic(106.0), module()))
    assert statuses(got) == {"mlx5_0": "fail", "mlx5_0:1": "pass"}


def test_margin_comes_from_the_thresholds():
    sensor = module(72.0, 75.0)
    assert statuses(results(hca(sensor)))["mlx5_0:1"] == "warn"
    th = Thresholds(temperature_margin_c=2.0)
    assert statuses(results(hca(sensor), th=th))["mlx5_0:1"] == "pass"


def test_no_crit_threshold_passes_with_the_reading():
    (result,) = results(hca(module(57.0, None)))
    assert result.status.value == "pass"
    assert result.message == "module 0 57.0 °C (no crit threshold reported)"


def test_unreadable_sensor_skips_with_its_problem_and_the_others_are_graded():
    bad = module(None, 70.0, problems=["temp2_input: not a number: 'N/A'"])
    got = {r.target: r for r in results(hca(asic(), bad))}
    assert got["mlx5_0:1"].status.value == "skip"
    assert got["mlx5_0:1"].message == "module 0: temp2_input: not a number: 'N/A'"
    assert got["mlx5_0"].status.value == "pass"


def test_module_without_a_known_port_targets_the_hca():
    (result,) = results(hca(module(80.0, 75.0, port_number=None)))
    assert result.target == "mlx5_0" and result.status.value == "fail"


def test_no_hwmon_skips_saying_so():
    (result,) = results(_unavailable())
    assert result.status.value == "skip" and result.target == "mlx5_0"
    assert result.message == f"not available: {UNAVAILABLE}"


def _unavailable() -> Device:
    found = HcaSensors(unavailable=UNAVAILABLE)
    return device().model_copy(update={"facts": {"hwmon": found}})


def test_no_hwmon_fact_skips_as_not_available():
    (result,) = results(device())
    assert result.status.value == "skip" and result.target == "mlx5_0"
    assert result.message == (
        "not available: no mlx5 hwmon temperatures in sysfs (a kernel before 6.5, a VF, not mlx5)"
    )


def test_every_hca_every_port_and_ignored_hcas_left_out():
    two = device("mlx5_1", [port(1), port(2)])
    found = HcaSensors(sensors=[asic()])
    got = results(hca(asic(), module()), two.model_copy(update={"facts": {"hwmon": found}}))
    assert set(statuses(got)) == {"mlx5_0", "mlx5_0:1", "mlx5_1"}
    th = Thresholds(ignore_hcas=["mlx5_1"])
    assert set(statuses(results(hca(asic()), two, th=th))) == {"mlx5_0"}


def test_check_is_quick_and_explained():
    from snapshots import builtin_registry

    spec = builtin_registry().get("phy.temperature")
    assert spec.level == "quick" and set(spec.needs) == {"sysfs"}
    doc = spec.func.__doc__ or ""
    for part in ("Healthy:", "Why it matters:", "What to do:"):
        assert part in doc


def test_unreadable_crit_passes_with_the_reading_and_says_why():
    sensor = module(57.0, None, problems=["temp2_crit: not a number: 'N/A'"])
    (result,) = results(hca(sensor))
    assert result.status.value == "pass"
    assert result.message == "module 0 57.0 °C (crit not a number: 'N/A')"
