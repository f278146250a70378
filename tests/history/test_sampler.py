"""The monitor's sampler: every port's cheap sysfs files as one PortSample each, never an
exception - a file that cannot be read is None in its field, a port that vanished is left out."""

from __future__ import annotations

import os
import shutil
from datetime import datetime, timezone

import pytest
from sysfs_builder import mlx5_node, write_node

from ibdiag.facts.history import guid_key
from ibdiag.history import sampler
from ibdiag.history.sampler import parse_counter, parse_enum, parse_rate, read_ports

AT = datetime(2026, 11, 27, 16, 0, 1, tzinfo=timezone.utc)
BOOT = "0f5e2a4c-1111-4bb2-9e0e-7a1d2c3b4a59"
GUIDS = ("b859:9f03:00d7:a3bc", "b859:9f03:00d7:a3bd")


def node(tmp_path, count: int = 2, boot: bool = True):
    """(sysfs root, procfs root) of ``count`` HCAs with GUIDS, one ACTIVE port each."""
    hcas = mlx5_node(count)
    for hca, guid in zip(hcas, GUIDS):
        hca.node_guid = guid
    sys_root = tmp_path / "sys"
    write_node(str(sys_root), hcas)
    proc = tmp_path / "proc"
    (proc / "sys" / "kernel" / "random").mkdir(parents=True)
    if boot:
        (proc / "sys" / "kernel" / "random" / "boot_id").write_text(BOOT + "\n")
    return str(sys_root), str(proc)


def port_dir(sys_root: str, device: str = "mlx5_0", port: int = 1) -> str:
    return os.path.join(sys_root, "class", "infiniband", device, "ports", str(port))


@pytest.mark.parametrize(
    "text, value",
    [("4: ACTIVE", 4), ("1: DOWN", 1), ("5: LinkUp", 5), ("2: Polling", 2), ("4", 4),
     (" 3 : ARMED ", 3), ("ACTIVE", None), ("", None), (None, None), ("x: y", None),
     ("\u0664: ACTIVE", None)],
)  # fmt: skip
def test_parse_enum_reads_the_number_before_the_colon(text, value):
    assert parse_enum(text) == value


@pytest.mark.parametrize(
    "text, value",
    [("200 Gb/sec (4X HDR)", (200.0, "4X")), ("400 Gb/sec (4X NDR)", (400.0, "4X")),
     ("100 Gb/sec (2X HDR)", (100.0, "2X")), ("10 Gb/sec (4X)", (10.0, "4X")),
     ("2.5 Gb/sec (1X SDR)", (2.5, "1X")), ("300 Gb/sec (12X EDR)", (300.0, "12X")),
     ("2.5 Gb/sec", (2.5, None)), ("Invalid argument", (None, None)), (None, (None, None))],
)  # fmt: skip
def test_parse_rate_gives_gbps_and_width(text, value):
    assert parse_rate(text) == value


@pytest.mark.parametrize(
    "text, value",
    [("0", 0), ("18446744073709551615", 2**64 - 1), ("-1", None), ("12a", None), ("", None),
     (None, None), ("\u0661", None)],
)  # fmt: skip
def test_parse_counter(text, value):
    assert parse_counter(text) == value


@pytest.mark.parametrize(
    "text, value",
    [("b859:9f03:00d7:a3bc", "0xb8599f0300d7a3bc"), ("B859:9F03:00D7:A3BC", "0xb8599f0300d7a3bc"),
     ("0xb8599f0300d7a3bc", "0xb8599f0300d7a3bc"), ("b8599f0300d7a3bc\n", "0xb8599f0300d7a3bc"),
     ("0000:0000:0000:0000", "name:mlx5_0"), ("b859:9f03:00d7", "name:mlx5_0"),
     ("b859:9f03:00d7:a3bz", "name:mlx5_0"), ("", "name:mlx5_0"), (None, "name:mlx5_0")],
)  # fmt: skip
def test_the_stores_key_is_the_guid_or_the_name(text, value):
    assert guid_key(text, "mlx5_0") == value


def test_every_port_is_read_into_one_sample(tmp_path):
    sys_root, proc = node(tmp_path)
    with open(os.path.join(port_dir(sys_root, "mlx5_1"), "counters", "link_downed"), "w") as f:
        f.write("7\n")
    samples = read_ports(sys_root, proc, at=AT)
    assert [(s.device, s.port, s.node_guid) for s in samples] == [
        ("mlx5_0", 1, "0xb8599f0300d7a3bc"),
        ("mlx5_1", 1, "0xb8599f0300d7a3bd"),
    ]
    first, second = samples
    assert first.at == AT and first.boot_id == BOOT and first.source == "watch"
    assert (first.state, first.phys_state, first.rate_gbps, first.width) == (4, 5, 200.0, "4X")
    assert (first.link_downed, first.link_error_recovery, first.symbol_error) == (0, 0, 0)
    assert second.link_downed == 7
    assert read_ports(sys_root, proc, at=AT, source="check")[0].source == "check"


def test_an_ignored_device_is_not_read_at_all(tmp_path):
    sys_root, proc = node(tmp_path)
    assert [s.device for s in read_ports(sys_root, proc, at=AT)] == ["mlx5_0", "mlx5_1"]
    samples = read_ports(sys_root, proc, at=AT, ignored=lambda name: name == "mlx5_1")
    assert [s.device for s in samples] == ["mlx5_0"]


def test_without_a_time_the_reading_is_now_in_utc(tmp_path):
    sys_root, proc = node(tmp_path, count=1)
    before = datetime.now(timezone.utc)
    (sample,) = read_ports(sys_root, proc)
    assert before <= sample.at <= datetime.now(timezone.utc)


def test_every_port_of_a_dual_port_hca_is_read(tmp_path):
    sys_root, proc = node(tmp_path, count=1)
    shutil.copytree(port_dir(sys_root), port_dir(sys_root, port=2))
    assert [s.port for s in read_ports(sys_root, proc, at=AT)] == [1, 2]


def test_a_missing_boot_id_is_none(tmp_path):
    sys_root, proc = node(tmp_path, boot=False)
    assert {s.boot_id for s in read_ports(sys_root, proc, at=AT)} == {None}


def test_no_infiniband_class_is_no_samples(tmp_path):
    assert read_ports(str(tmp_path), str(tmp_path), at=AT) == []


def test_an_unreadable_file_is_none_in_its_field_only(tmp_path):
    sys_root, proc = node(tmp_path)
    port = port_dir(sys_root)
    os.remove(os.path.join(port, "rate"))
    os.mkdir(os.path.join(port, "rate"))  # read() fails: EISDIR
    os.remove(os.path.join(port, "phys_state"))
    os.mkfifo(os.path.join(port, "phys_state"))  # never waited on
    os.remove(os.path.join(port, "counters", "symbol_error"))  # missing
    with open(os.path.join(port, "counters", "link_downed"), "w") as handle:
        handle.write("lots\n")  # unparsable
    outside = tmp_path / "secret"
    outside.write_text("4: ACTIVE\n")
    os.remove(os.path.join(port, "state"))
    os.symlink(outside, os.path.join(port, "state"))  # a link is not followed
    sample = read_ports(sys_root, proc, at=AT)[0]
    assert (sample.state, sample.phys_state, sample.rate_gbps, sample.width) == (
        None, None, None, None,
    )  # fmt: skip
    assert (sample.link_downed, sample.link_error_recovery, sample.symbol_error) == (None, 0, None)
    assert sample.node_guid == "0xb8599f0300d7a3bc"


def test_a_device_without_a_node_guid_is_keyed_by_its_name(tmp_path):
    sys_root, proc = node(tmp_path)
    os.remove(os.path.join(sys_root, "class", "infiniband", "mlx5_0", "node_guid"))
    with open(os.path.join(sys_root, "class", "infiniband", "mlx5_1", "node_guid"), "w") as f:
        f.write("0000:0000:0000:0000\n")
    assert [s.node_guid for s in read_ports(sys_root, proc, at=AT)] == [
        "name:mlx5_0",
        "name:mlx5_1",
    ]


def test_devices_that_share_a_guid_are_keyed_by_their_names(tmp_path):
    sys_root, proc = node(tmp_path, count=3)  # mlx5_2 has the builder's default GUID
    guid = os.path.join(sys_root, "class", "infiniband", "mlx5_{}", "node_guid")
    shutil.copy(guid.format(0), guid.format(2))
    assert [s.node_guid for s in read_ports(sys_root, proc, at=AT)] == [
        "name:mlx5_0",
        "0xb8599f0300d7a3bd",
        "name:mlx5_2",
    ]


def test_a_port_that_vanishes_while_read_is_left_out(tmp_path, monkeypatch):
    sys_root, proc = node(tmp_path)
    doomed = port_dir(sys_root, "mlx5_1")
    real = sampler._text

    def vanishing(path):
        if path == f"{doomed}/state":
            shutil.rmtree(os.path.realpath(doomed))
        return real(path)

    monkeypatch.setattr(sampler, "_text", vanishing)
    assert [s.device for s in read_ports(sys_root, proc, at=AT)] == ["mlx5_0"]


def test_a_device_that_vanishes_while_read_is_left_out(tmp_path, monkeypatch):
    sys_root, proc = node(tmp_path)
    link = os.path.join(sys_root, "class", "infiniband", "mlx5_0")
    real = sampler._text

    def vanishing(path):
        if path == os.path.join(link, "node_guid"):
            shutil.rmtree(os.path.realpath(link))
        return real(path)

    monkeypatch.setattr(sampler, "_text", vanishing)
    assert [s.device for s in read_ports(sys_root, proc, at=AT)] == ["mlx5_1"]


def test_a_port_missing_its_files_but_there_is_sampled(tmp_path):
    sys_root, proc = node(tmp_path, count=1)
    for name in ("state", "phys_state"):
        os.remove(os.path.join(port_dir(sys_root), name))
    (sample,) = read_ports(sys_root, proc, at=AT)
    assert (sample.state, sample.phys_state, sample.is_down) == (None, None, None)
