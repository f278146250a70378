"""The mlx5 hwmon reader (ibdiag.sources.hwmon): trees laid out as the kernel's hwmon.c makes
them (tests/hwmon_tree.py), each typed field, each kind of garbage as a problem of its
sensor only, no hwmon as "unavailable", and the files recorded into a bundle and replayed."""

from __future__ import annotations

import os

import pytest
from hwmon_tree import ASIC, MODULE0, channel, write_hwmon
from snapshots import assert_same_snapshot
from stubs import write_procfs
from sysfs_builder import HcaSpec, PortSpec, mlx5_node, write_node

from ibdiag.bundle.opener import open_bundle
from ibdiag.bundle.replay import replay
from ibdiag.bundle.write import write_bundle
from ibdiag.collect import collect
from ibdiag.facts.hwmon import HcaSensor, HcaSensors
from ibdiag.grade import grade
from ibdiag.model import Snapshot
from ibdiag.registry import load_registry
from ibdiag.sources import hwmon
from ibdiag.sources.sysfs import Recording, SysfsReader, read_devices
from ibdiag.thresholds import Thresholds

BDF = "0000:10:00.0"  # mlx5_0 of sysfs_builder.mlx5_node


def _tree(tmp_path, *channels, count=1, **kwargs):
    root = str(tmp_path / "sys")
    write_node(root, mlx5_node(count))
    if channels:
        write_hwmon(root, BDF, *channels, **kwargs)
    return root


def _device(root, name="mlx5_0"):
    devices, _ = read_devices(SysfsReader(root))
    (dev,) = [dev for dev in devices if dev.name == name]
    return dev


def _sensors(root, name="mlx5_0") -> HcaSensors:
    found = _device(root, name).facts["hwmon"]
    assert isinstance(found, HcaSensors)
    return found


def test_healthy_asic_and_module_each_typed_field(tmp_path):
    found = _sensors(_tree(tmp_path, ASIC, MODULE0))
    assert found.hwmon == "class/infiniband/mlx5_0/device/hwmon/hwmon0"
    assert found.unavailable is None and found.problems == []
    asic, module = found.sensors
    assert asic == HcaSensor(
        channel=1, label="asic", kind="asic", input_c=47.0, highest_c=52.0, crit_c=105.0
    )
    assert module == HcaSensor(
        channel=2, label="Module0", kind="module", module=0, port=1,
        input_c=57.0, highest_c=58.0, crit_c=70.0,
    )  # fmt: skip
    assert isinstance(module.input_c, float) and isinstance(module.module, int)
    assert (asic.name, module.name) == ("asic", "module 0")


def test_millidegrees_keep_their_fraction(tmp_path):
    # MTMP counts in 0.125 degrees; the driver multiplies by 125
    (sensor,) = _sensors(_tree(tmp_path, channel(input="56875", highest="-1125"))).sensors
    assert sensor.input_c == 56.875 and sensor.highest_c == -1.125


@pytest.mark.parametrize(
    "label, kind, module",
    [
        ("asic", "asic", None),
        ("ASIC", "asic", None),
        ("Module0", "module", 0),
        ("module3", "module", 3),
        ("sensor0", "asic", None),  # firmware without names: MTMP index 0, the ASIC
        ("sensor64", "module", 0),  # 64 + module number
        ("sensor65", "module", 1),
        ("gearbox", "other", None),
    ],
)
def test_label_gives_kind_and_module(tmp_path, label, kind, module):
    (sensor,) = _sensors(_tree(tmp_path, channel(label=label))).sensors
    assert (sensor.label, sensor.kind, sensor.module) == (label, kind, module)
    assert sensor.port == (1 if kind == "module" else None)
    assert sensor.problems == []


@pytest.mark.parametrize(
    "values, problem",
    [
        ({"input": "N/A"}, "temp2_input: not a number: 'N/A'"),
        ({"input": "57.5"}, "temp2_input: not a number: '57.5'"),
        ({"input": ""}, "temp2_input: empty"),
        ({"input": None}, "temp2_input: missing"),
        # a negative MTMP reading read as unsigned 16 bits: 0xfff8 * 125
        ({"input": "8191000"}, "temp2_input: 8191 °C is out of range (-60..200 °C)"),
        ({"input": "-61000"}, "temp2_input: -61 °C is out of range (-60..200 °C)"),
        ({"input": "200001"}, "temp2_input: 200.001 °C is out of range (-60..200 °C)"),
    ],
)
def test_garbage_input_is_a_problem_of_that_sensor_only(tmp_path, values, problem):
    found = _sensors(_tree(tmp_path, ASIC, channel(**values)))
    asic, module = found.sensors
    assert module.input_c is None and module.problems == [problem]
    assert module.crit_c == 70.0 and module.highest_c == 58.0 and module.kind == "module"
    assert asic.input_c == 47.0 and asic.problems == []
    assert found.problems == []


def test_garbage_in_each_other_attribute(tmp_path):
    root = _tree(
        tmp_path,
        channel(highest="garbage"),
        channel(crit=None),
        channel(label=None),
        channel(crit="0"),  # the firmware sets no threshold: not a problem, no crit
    )
    highest, crit, label, zero = _sensors(root).sensors
    assert highest.highest_c is None and highest.input_c == 57.0
    assert highest.problems == ["temp1_highest: not a number: 'garbage'"]
    assert crit.crit_c is None and crit.problems == ["temp2_crit: missing"]
    assert label.kind == "other" and label.label is None
    assert label.problems == ["temp3_label: missing"] and label.input_c == 57.0
    assert zero.crit_c is None and zero.problems == []


def test_unreadable_attribute_is_a_problem(tmp_path):
    root = _tree(tmp_path, ASIC, MODULE0)
    path = os.path.join(root, "devices/pci0000:00", BDF, "hwmon/hwmon0/temp2_input")
    os.remove(path)
    os.mkdir(path)  # EISDIR: as an attribute the driver fails to read gives an errno
    asic, module = _sensors(root).sensors
    assert module.input_c is None and module.problems == ["temp2_input: is a directory"]
    assert asic.problems == []


def test_no_hwmon_directory_sets_no_fact(tmp_path):
    # a kernel before 6.5, a VF: the Snapshot is what it was before hwmon was read
    assert "hwmon" not in _device(_tree(tmp_path)).facts


def test_another_drivers_hwmon_is_not_read(tmp_path):
    found = _sensors(_tree(tmp_path, ASIC, name="nvme"))
    assert found.sensors == [] and found.hwmon is None
    assert found.unavailable == "no 'mlx5' hwmon device in class/infiniband/mlx5_0/device/hwmon"


def test_unreadable_name_is_a_device_problem(tmp_path):
    root = _tree(tmp_path, ASIC)
    os.remove(os.path.join(root, "devices/pci0000:00", BDF, "hwmon/hwmon0/name"))
    found = _sensors(root)
    assert found.sensors == [] and found.problems == ["hwmon0/name: missing"]


def test_module_of_a_device_with_several_ports_has_no_port(tmp_path):
    root = str(tmp_path / "sys")
    write_node(root, [HcaSpec("mlx5_0", BDF, ports=[PortSpec(), PortSpec()])])
    write_hwmon(root, BDF, ASIC, MODULE0)
    (_asic, module) = _sensors(root).sensors
    assert module.kind == "module" and module.module == 0 and module.port is None


def test_only_this_devices_hwmon(tmp_path):
    root = _tree(tmp_path, ASIC, MODULE0, count=2)
    assert "hwmon" not in _device(root, "mlx5_1").facts and _sensors(root, "mlx5_0").sensors


def test_fact_round_trips_through_json(tmp_path):
    devices, _ = read_devices(SysfsReader(_tree(tmp_path, ASIC, channel(input="N/A"))))
    dev = devices[0]
    again = type(dev).model_validate_json(dev.model_dump_json())
    assert again.facts == dev.facts and isinstance(again.facts["hwmon"], HcaSensors)


def _bundle_round_trip(tmp_path, needs):
    root = _tree(tmp_path, ASIC, channel(input="78000", crit="75000"))
    procfs = write_procfs(tmp_path / "proc")
    recording = Recording()
    live = collect(root, procfs, needs, {"path": str(tmp_path / "empty-path")}, recording=recording)
    report = grade(live, load_registry(), Thresholds(), "quick")
    path = write_bundle(live, report, recording, str(tmp_path / "out"), tarball=True)
    with open_bundle(path) as opened:
        assert opened.problems == []
        replayed = replay(opened)
    return live, replayed


def test_hwmon_files_go_into_the_bundle_and_replay(tmp_path):
    live, replayed = _bundle_round_trip(tmp_path, {"sysfs"})
    module = live.devices[0].facts["hwmon"].sensors[1]
    assert module.input_c == 78.0 and module.crit_c == 75.0
    assert_same_snapshot(replayed, live)
    report = grade(replayed, load_registry(), Thresholds(), "quick")
    (result,) = [
        r for r in report.results if r.check_id == "phy.temperature" and r.target == "mlx5_0:1"
    ]
    assert result.status.value == "fail"


def test_hwmon_replays_from_a_bundle_with_runs(tmp_path):
    live, replayed = _bundle_round_trip(tmp_path, {"sysfs", "kernel_log"})
    assert live.commands
    assert replayed.devices[0].facts == live.devices[0].facts


def test_quick_level_reads_without_running_anything(tmp_path):
    live = collect(_tree(tmp_path, ASIC), str(write_procfs(tmp_path / "proc")), {"sysfs"})
    assert live.commands == {} and isinstance(live.devices[0].facts["hwmon"], HcaSensors)
    assert Snapshot.model_validate_json(live.model_dump_json()) == live


def test_more_channels_than_the_driver_makes_are_capped(tmp_path):
    many = [ASIC] * (hwmon.MAX_CHANNELS + 3)
    found = _sensors(_tree(tmp_path, *many))
    assert len(found.sensors) == hwmon.MAX_CHANNELS
    assert found.problems == [f"{hwmon.MAX_CHANNELS + 3} temperature channels: only the first "
                              f"{hwmon.MAX_CHANNELS} read"]  # fmt: skip


def test_a_file_in_place_of_the_hwmon_directory(tmp_path):
    root = _tree(tmp_path)
    with open(os.path.join(root, "devices/pci0000:00", BDF, "hwmon"), "w") as handle:
        handle.write("junk\n")
    found = _sensors(root)
    assert found.sensors == [] and found.unavailable == hwmon.UNAVAILABLE
    assert found.problems == ["hwmon: ENOTDIR (Not a directory)"]
