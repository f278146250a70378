"""The sysfs source: every device, every port, PCI and netdev; odd files recorded, never fatal.

The first half builds realistic trees in pyfakefs with tests/sysfs_builder.py and breaks them
one file at a time. The second half parses the real captures under tests/scenarios/*/root/sys
and checks facts read from those files by hand (see tests/fixtures/sysfs/SOURCES.md).
"""

from __future__ import annotations

import errno
import functools
import json
import os
import sys
from typing import Dict, List, Optional

import pytest
from conftest import TESTS_DIR

from ibdiag.collect import collect
from ibdiag.model import Device, Port, Snapshot
from ibdiag.sources import sysfs

_TESTS_DIR = TESTS_DIR
if _TESTS_DIR not in sys.path:  # the builder is a plain module next to this file
    sys.path.insert(0, _TESTS_DIR)

import stubs as S  # noqa: E402
from sysfs_builder import (  # noqa: E402
    HW_COUNTERS,
    PORT_COUNTERS,
    HcaSpec,
    PortSpec,
    mlx5_node,
    write_node,
)

SCENARIOS = os.path.join(_TESTS_DIR, "scenarios")

# Deliberately not /sys and /proc: the roots must be relocatable (--sysfs / --procfs).
SYS = "/srv/host-root/sys"
PROC = "/srv/host-root/proc"
BOOT_ID = "6d0bd3a5-7c4e-4d0b-9a52-0cfd1c1f1f7e"


# pyfakefs costs about a millisecond per file written: most tests use a few counters per port
# (the first test reads the builder's full mlx5 set).
COUNTERS: Dict[str, int] = {
    "link_downed": 0,
    "port_rcv_errors": 0,
    "port_xmit_data": PORT_COUNTERS["port_xmit_data"],
    "port_xmit_wait": 1931,
    "symbol_error": 0,
}
HW: Dict[str, int] = {"out_of_buffer": 0, "rnr_nak_retry_err": 0}


def lean_port(**overrides) -> PortSpec:
    fields = {"counters": dict(COUNTERS), "hw_counters": dict(HW)}
    fields.update(overrides)
    return PortSpec(**fields)


def lean_node(count: int) -> List[HcaSpec]:
    """``count`` ConnectX-6 HCAs mlx5_0.. with IPoIB ib0.. and a few counters per port."""
    return mlx5_node(count, port={"counters": COUNTERS, "hw_counters": HW})


# --- helpers ------------------------------------------------------------------------------------


def put(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


def ib(*parts: str) -> str:
    """An absolute path under SYS/class/infiniband (through the class symlink, as users see it)."""
    return os.path.join(SYS, "class", "infiniband", *parts)


def read_all(root: str = SYS):
    return sysfs.read_devices(sysfs.SysfsReader(root))


def by_name(devices: List[Device]) -> Dict[str, Device]:
    return {dev.name: dev for dev in devices}


def port_of(dev: Device, number: int) -> Port:
    matches = [port for port in dev.ports if port.number == number]
    assert len(matches) == 1, f"{dev.name} has ports {[p.number for p in dev.ports]}"
    return matches[0]


def write_procfs(root: str = PROC, host: Optional[str] = "node042") -> None:
    """The procfs these tests read: hostname (``None``: none) and boot_id, nothing else."""
    S.write_procfs(root, hostname=host, boot_id=BOOT_ID, boot_time=None, modules=None)


def break_file(monkeypatch, path: str, exc: OSError, on: str = "read") -> None:
    """Make reading one file (and only that file) fail with ``exc``, at open or at read.

    The reader uses ``os.open``/``os.read``; under pyfakefs ``sysfs.os`` is the fake os module,
    so the fault is injected there, exactly where a sysfs attribute's show() would fail.
    """
    target = os.path.realpath(path)
    fake_os = sysfs.os
    real_open, real_read = fake_os.open, fake_os.read
    broken_fds = set()

    def fake_open(file, flags, *args, **kwargs):
        if os.path.realpath(os.fsdecode(file)) == target:
            if on == "open":
                raise exc
            fd = real_open(file, flags, *args, **kwargs)
            broken_fds.add(fd)
            return fd
        return real_open(file, flags, *args, **kwargs)

    def fake_read(fd, length):
        if fd in broken_fds:
            broken_fds.discard(fd)  # the number is reused once the reader closes it
            raise exc
        return real_read(fd, length)

    monkeypatch.setattr(fake_os, "open", fake_open)
    monkeypatch.setattr(fake_os, "read", fake_read)


def two_hca_node(full: bool = False) -> List[HcaSpec]:
    """mlx5_0 with two IPoIB ports (port 2 down, with errors) and a healthy mlx5_1.

    ``full``: every port carries the builder's complete mlx5 counter set.
    """
    counters = PORT_COUNTERS if full else COUNTERS
    hw = HW_COUNTERS if full else HW

    def port(**fields) -> PortSpec:
        return PortSpec(counters=dict(counters), hw_counters=dict(hw), **fields)

    down = port(
        netdev="ib1",
        state="1: DOWN",
        phys_state="2: Polling",
        rate="10 Gb/sec (4X)",
        lid="0x0",
        operstate="down",
    )
    down.counters.update(symbol_error=17, link_downed=3)
    return [
        HcaSpec(
            name="mlx5_0",
            pci_address="0000:0c:00.0",
            ports=[port(netdev="ib0", lid="0x3a4"), down],
        ),
        HcaSpec(
            name="mlx5_1",
            pci_address="0000:12:00.0",
            numa_node="1",
            ports=[port(netdev="ib2", lid="0x12")],
        ),
    ]


# --- every device, every port -------------------------------------------------------------------


def test_reads_every_device_and_every_port_of_a_two_port_hca(fs):
    write_node(SYS, two_hca_node(full=True))
    devices, node_problems = read_all()

    assert node_problems == {}
    assert [dev.name for dev in devices] == ["mlx5_0", "mlx5_1"]
    dev = devices[0]
    assert [port.number for port in dev.ports] == [1, 2]
    assert dev.path == "class/infiniband/mlx5_0"  # relative to the root: bundles replay it
    assert (dev.node_type, dev.node_type_name) == (1, "CA")
    assert dev.hca_type == "MT4123"
    assert dev.fw_ver == "20.31.2354"
    assert dev.board_id == "MT_0000000223"
    assert dev.node_guid == "b859:9f03:00d4:0a10"
    assert dev.sys_image_guid == "b859:9f03:00d4:0a10"
    assert dev.node_desc == "node001 mlx5_0"
    assert dev.hw_rev == "0x0"
    assert dev.problems == {}

    up, down = dev.ports
    assert up.path == "class/infiniband/mlx5_0/ports/1"
    assert (up.state, up.state_name, up.phys_state, up.phys_state_name) == (
        4,
        "ACTIVE",
        5,
        "LinkUp",
    )
    assert (up.rate.gbps, up.rate.lanes, up.rate.speed) == (200.0, 4, "HDR")
    assert up.link_layer == "InfiniBand"
    assert (up.lid, up.sm_lid) == (932, 1)
    assert up.counters == PORT_COUNTERS
    assert up.hw_counters == HW_COUNTERS
    assert up.problems == {}

    assert down.path == "class/infiniband/mlx5_0/ports/2"
    assert (down.state, down.state_name, down.phys_state, down.phys_state_name) == (
        1,
        "DOWN",
        2,
        "Polling",
    )
    assert (down.rate.gbps, down.rate.lanes, down.rate.speed) == (10.0, 4, None)
    assert down.lid == 0
    assert down.counters["symbol_error"] == 17
    assert down.counters["link_downed"] == 3
    assert up.counters["symbol_error"] == 0
    assert down.problems == {}

    assert dev.pci is not None
    assert dev.pci.address == "0000:0c:00.0"
    assert (dev.pci.vendor_id, dev.pci.device_id) == ("0x15b3", "0x101b")
    assert dev.pci.numa_node == 0
    assert (dev.pci.current_link_speed, dev.pci.current_link_width) == (16.0, 16)
    assert (dev.pci.max_link_speed, dev.pci.max_link_width) == (16.0, 16)
    assert dev.pci.problems == {}

    assert up.netdev.name == "ib0"
    assert (up.netdev.operstate, up.netdev.carrier, up.netdev.mtu) == ("up", 1, 2044)
    assert up.netdev.type == 32
    assert up.netdev.carrier_changes == 2
    assert down.netdev.name == "ib1"
    assert (down.netdev.operstate, down.netdev.carrier) == ("down", 0)

    other = devices[1]
    assert other.pci.address == "0000:12:00.0"
    assert other.pci.numa_node == 1
    assert [port.number for port in other.ports] == [1]
    assert other.ports[0].netdev.name == "ib2"
    assert other.ports[0].lid == 0x12


def test_multi_plane_hca_ports_1_3_6_9_12_are_all_read_in_numeric_order(fs):
    """Multi-plane HCAs expose ports 1/3/6/9/12 (no port 2): never assume port 1 or 1..N."""
    specs = [
        lean_port(rate="200 Gb/sec (2X NDR)", lid="0x1"),
        lean_port(rate="200 Gb/sec (2X NDR)", lid="0x3", state="1: DOWN", phys_state="3: Disabled"),
        lean_port(rate="200 Gb/sec (2X NDR)", lid="0x6"),
        lean_port(rate="200 Gb/sec (2X NDR)", lid="0x9", counters={"symbol_error": 9}),
        lean_port(rate="200 Gb/sec (2X NDR)", lid="0xc", state="2: INIT"),
    ]
    write_node(SYS, [HcaSpec(name="mlx5_0", pci_address="0000:0c:00.0", ports=specs)])
    for old, new in ((5, 12), (4, 9), (3, 6), (2, 3)):
        os.rename(ib("mlx5_0", "ports", str(old)), ib("mlx5_0", "ports", str(new)))

    (dev,), _ = read_all()
    assert [port.number for port in dev.ports] == [1, 3, 6, 9, 12]  # not 1, 12, 3, 6, 9
    assert [port.lid for port in dev.ports] == [1, 3, 6, 9, 12]
    assert [port.path for port in dev.ports] == [
        f"class/infiniband/mlx5_0/ports/{n}" for n in (1, 3, 6, 9, 12)
    ]
    assert port_of(dev, 3).state == 1
    assert port_of(dev, 3).phys_state_name == "Disabled"
    assert port_of(dev, 12).state_name == "INIT"
    assert port_of(dev, 9).counters == {"symbol_error": 9}
    assert all(port.rate.lanes == 2 and port.rate.speed == "NDR" for port in dev.ports)
    assert dev.problems == {}
    assert all(port.problems == {} for port in dev.ports)


def test_devices_are_in_natural_order(fs):
    names = ["mlx5_10", "mlx5_2", "mlx5_0", "mlx5_1", "mlx5_11"]
    write_node(
        SYS,
        [
            HcaSpec(name=name, pci_address=f"0000:{0x10 + i:02x}:00.0", ports=[lean_port()])
            for i, name in enumerate(names)
        ],
    )
    devices, _ = read_all()
    assert [dev.name for dev in devices] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_10", "mlx5_11"]


def test_natural_key_orders_numbers_numerically():
    names = ["mlx5_10", "mlx5_2", "10", "2", "mlx4_0", "mlx5_ib1"]
    assert sorted(names, key=sysfs.natural_key) == [
        "2",
        "10",
        "mlx4_0",
        "mlx5_2",
        "mlx5_10",
        "mlx5_ib1",
    ]


# --- relocatable roots and node identity ---------------------------------------------------------


def test_collect_reads_relocated_sysfs_and_procfs_roots(fs):
    sys_root, proc_root = "/var/lib/container/host/sys", "/mnt/host-proc"
    write_node(sys_root, lean_node(2))
    write_procfs(proc_root, host="gpu-node-042")

    snap = collect(sys_root, proc_root, {"sysfs"})

    assert isinstance(snap, Snapshot)
    assert snap.host == "gpu-node-042"
    assert snap.boot_id == BOOT_ID
    assert snap.sysfs_root == sys_root
    assert snap.procfs_root == proc_root
    assert snap.sources == ["procfs", "sysfs"]
    assert snap.problems == {}
    assert [dev.name for dev in snap.devices] == ["mlx5_0", "mlx5_1"]
    # Paths are relative to the root, not to where it happened to be mounted.
    assert [dev.path for dev in snap.devices] == [
        "class/infiniband/mlx5_0",
        "class/infiniband/mlx5_1",
    ]
    assert snap.devices[1].ports[0].netdev.name == "ib1"
    assert snap.collected_at.tzinfo is not None


def test_collect_falls_back_to_kernel_hostname_when_procfs_lacks_identity(fs, monkeypatch):
    monkeypatch.setattr("ibdiag.sources.procfs.kernel_hostname", lambda: "from-uname")
    write_node(SYS, lean_node(1))
    os.makedirs(PROC)  # an empty procfs: neither hostname nor boot_id

    snap = collect(SYS, PROC, {"sysfs"})

    assert snap.host == "from-uname"
    assert snap.boot_id is None
    assert snap.problems == {
        "procfs:sys/kernel/hostname": "missing",
        "procfs:sys/kernel/random/boot_id": "missing",
    }
    assert [dev.name for dev in snap.devices] == ["mlx5_0"]  # the run went on


def test_collect_empty_hostname_file_is_a_problem_and_boot_id_still_read(fs, monkeypatch):
    monkeypatch.setattr("ibdiag.sources.procfs.kernel_hostname", lambda: "from-uname")
    write_node(SYS, lean_node(1))
    write_procfs(PROC, host="")

    snap = collect(SYS, PROC, {"sysfs"})

    assert snap.host == "from-uname"
    assert snap.boot_id == BOOT_ID
    assert snap.problems == {"procfs:sys/kernel/hostname": "empty"}


def test_collect_without_sysfs_need_reads_identity_only(fs):
    write_node(SYS, lean_node(2))
    write_procfs()
    snap = collect(SYS, PROC, set())
    assert snap.devices == []
    assert snap.sources == ["procfs"]
    assert snap.host == "node042"
    assert snap.problems == {}


# --- odd files: recorded for that attribute only ------------------------------------------------


def test_missing_files_are_recorded_per_attribute(fs):
    write_node(SYS, two_hca_node())
    os.remove(ib("mlx5_0", "ports", "1", "rate"))
    os.remove(ib("mlx5_0", "fw_ver"))
    os.remove(ib("mlx5_0", "ports", "2", "link_layer"))
    devices, node_problems = read_all()

    dev = by_name(devices)["mlx5_0"]
    assert dev.fw_ver is None
    assert dev.problems == {"fw_ver": "missing"}
    assert dev.hca_type == "MT4123"  # siblings still read
    assert dev.board_id == "MT_0000000223"
    port1 = port_of(dev, 1)
    assert port1.rate is None
    assert port1.problems == {"rate": "missing"}
    assert (port1.state, port1.phys_state, port1.lid) == (4, 5, 932)
    assert port1.counters == COUNTERS
    port2 = port_of(dev, 2)
    assert port2.link_layer is None
    assert port2.problems == {"link_layer": "missing"}
    assert port2.state == 1
    assert by_name(devices)["mlx5_1"].problems == {}
    assert by_name(devices)["mlx5_1"].ports[0].problems == {}
    assert node_problems == {}


def test_optional_attributes_missing_are_not_problems(fs):
    """iWARP/RoCE devices and old kernels lack these; absence alone is not odd."""
    write_node(SYS, lean_node(1))
    for name in ("hca_type", "board_id", "sys_image_guid", "node_desc", "hw_rev"):
        os.remove(ib("mlx5_0", name))
    for name in ("lid", "sm_lid"):
        os.remove(ib("mlx5_0", "ports", "1", name))
    (dev,), _ = read_all()
    assert (dev.hca_type, dev.board_id, dev.sys_image_guid, dev.node_desc, dev.hw_rev) == (
        None,
        None,
        None,
        None,
        None,
    )
    assert dev.problems == {}
    assert (dev.ports[0].lid, dev.ports[0].sm_lid) == (None, None)
    assert dev.ports[0].problems == {}


def test_empty_files_are_recorded_and_siblings_read(fs):
    write_node(SYS, lean_node(2))
    put(ib("mlx5_0", "ports", "1", "state"), "\n")
    put(ib("mlx5_0", "ports", "1", "counters", "symbol_error"), "")
    put(ib("mlx5_0", "node_guid"), "   \n")
    devices, _ = read_all()

    dev = devices[0]
    port = dev.ports[0]
    assert (port.state, port.state_name) == (None, None)
    assert port.problems == {"state": "empty", "counters/symbol_error": "empty"}
    assert "symbol_error" not in port.counters
    assert port.counters == {k: v for k, v in COUNTERS.items() if k != "symbol_error"}
    assert port.phys_state == 5
    assert dev.node_guid is None
    assert dev.problems == {"node_guid": "empty"}
    assert devices[1].ports[0].problems == {}
    assert devices[1].ports[0].counters == COUNTERS


def test_non_numeric_counter_is_recorded_for_that_counter_only(fs):
    write_node(SYS, lean_node(1))
    put(ib("mlx5_0", "ports", "1", "counters", "port_xmit_wait"), "N/A (no PMA)\n")
    put(ib("mlx5_0", "ports", "1", "hw_counters", "out_of_buffer"), "lots\n")
    (dev,), _ = read_all()
    port = dev.ports[0]
    assert port.problems == {
        "counters/port_xmit_wait": "not a number: 'N/A (no PMA)'",
        "hw_counters/out_of_buffer": "not a number: 'lots'",
    }
    assert "port_xmit_wait" not in port.counters
    assert port.counters["port_xmit_data"] == COUNTERS["port_xmit_data"]
    assert len(port.counters) == len(COUNTERS) - 1
    assert "out_of_buffer" not in port.hw_counters
    assert len(port.hw_counters) == len(HW) - 1
    assert port.state == 4


def test_odd_values_are_recorded_with_the_parser_message(fs):
    write_node(SYS, lean_node(1))
    put(ib("mlx5_0", "ports", "1", "rate"), "N/A (no PMA)\n")
    put(ib("mlx5_0", "ports", "1", "phys_state"), "LinkUp\n")
    put(ib("mlx5_0", "ports", "1", "lid"), "lid\n")
    put(ib("mlx5_0", "device", "current_link_speed"), "Unknown\n")
    put(ib("mlx5_0", "device", "numa_node"), "-1\n")
    (dev,), _ = read_all()
    port = dev.ports[0]
    assert port.problems == {
        "rate": "expected 'N Gb/sec (NX SPEED)', got 'N/A (no PMA)'",
        "phys_state": "expected 'N: NAME', got 'LinkUp'",
        "lid": "not a number: 'lid'",
    }
    assert (port.rate, port.phys_state, port.lid) == (None, None, None)
    assert (port.state, port.sm_lid) == (4, 1)
    assert dev.pci.current_link_speed is None
    assert dev.pci.problems == {"current_link_speed": "expected 'N GT/s', got 'Unknown'"}
    assert dev.pci.current_link_width == 16  # the sibling still read
    assert dev.pci.numa_node == -1  # no NUMA affinity is a value, not a problem
    assert dev.problems == {}


def test_counter_that_raises_einval_on_read_is_recorded(fs, monkeypatch):
    write_node(SYS, lean_node(2))
    path = ib("mlx5_0", "ports", "1", "counters", "port_rcv_errors")
    break_file(monkeypatch, path, OSError(errno.EINVAL, "Invalid argument"))
    devices, node_problems = read_all()

    port = devices[0].ports[0]
    assert port.problems == {"counters/port_rcv_errors": "EINVAL (Invalid argument)"}
    assert "port_rcv_errors" not in port.counters
    assert port.counters == {k: v for k, v in COUNTERS.items() if k != "port_rcv_errors"}
    assert port.hw_counters == HW
    assert port.state == 4
    assert devices[0].problems == {}
    assert devices[1].ports[0].counters == COUNTERS
    assert node_problems == {}


def test_rate_that_raises_einval_is_recorded(fs, monkeypatch):
    """The kernel's rate_show returns -EINVAL when the port has no valid speed (RoCE link down)."""
    write_node(SYS, lean_node(1))
    break_file(
        monkeypatch, ib("mlx5_0", "ports", "1", "rate"), OSError(errno.EINVAL, "Invalid argument")
    )
    (dev,), _ = read_all()
    port = dev.ports[0]
    assert port.rate is None
    assert port.problems == {"rate": "EINVAL (Invalid argument)"}
    assert (port.state, port.phys_state, port.link_layer) == (4, 5, "InfiniBand")
    assert port.counters == COUNTERS


def test_device_level_hw_counter_einval_is_a_device_problem(fs, monkeypatch):
    write_node(SYS, lean_node(1))
    put(ib("mlx5_0", "hw_counters", "lifespan"), "10\n")
    put(ib("mlx5_0", "hw_counters", "rx_icrc_encapsulated"), "0\n")
    break_file(
        monkeypatch,
        ib("mlx5_0", "hw_counters", "lifespan"),
        OSError(errno.EINVAL, "Invalid argument"),
    )
    (dev,), _ = read_all()
    assert dev.problems == {"hw_counters/lifespan": "EINVAL (Invalid argument)"}
    assert dev.hw_counters == {"rx_icrc_encapsulated": 0}
    assert dev.ports[0].problems == {}


@pytest.mark.parametrize("on", ["open", "read"])
def test_permission_denied_is_recorded(fs, monkeypatch, on):
    write_node(SYS, lean_node(1))
    break_file(
        monkeypatch,
        ib("mlx5_0", "ports", "1", "counters", "symbol_error"),
        PermissionError(errno.EACCES, "Permission denied"),
        on=on,
    )
    (dev,), _ = read_all()
    port = dev.ports[0]
    assert port.problems == {"counters/symbol_error": "permission denied"}
    assert len(port.counters) == len(COUNTERS) - 1
    assert port.rate.gbps == 200.0


def test_permission_denied_on_an_optional_attribute_is_still_a_problem(fs, monkeypatch):
    """Optional means "may be absent", not "may be unreadable"."""
    write_node(SYS, lean_node(1))
    break_file(
        monkeypatch,
        ib("mlx5_0", "board_id"),
        PermissionError(errno.EACCES, "Permission denied"),
        on="open",
    )
    (dev,), _ = read_all()
    assert dev.board_id is None
    assert dev.problems == {"board_id": "permission denied"}
    assert dev.fw_ver == "20.31.2354"


def test_io_error_names_the_errno(fs, monkeypatch):
    write_node(SYS, lean_node(1))
    break_file(monkeypatch, ib("mlx5_0", "ports", "1", "state"), OSError(errno.EIO, "I/O error"))
    (dev,), _ = read_all()
    assert dev.ports[0].problems == {"state": "EIO (I/O error)"}
    assert dev.ports[0].phys_state == 5


def test_a_directory_where_a_file_should_be(tmp_path):
    """On a real file system: Linux answers read() on a directory with EISDIR (pyfakefs: EBADF)."""
    root = str(tmp_path / "sys")
    write_node(root, lean_node(1))
    device_dir = os.path.join(root, "class", "infiniband", "mlx5_0")
    for rel in (("ports", "1", "rate"), ("ports", "1", "counters", "symbol_error")):
        os.remove(os.path.join(device_dir, *rel))
        os.makedirs(os.path.join(device_dir, *rel))
    (dev,), _ = read_all(root)
    port = dev.ports[0]
    assert port.problems == {
        "rate": "is a directory",
        "counters/symbol_error": "is a directory",
    }
    assert port.rate is None
    assert "symbol_error" not in port.counters
    assert port.counters["port_xmit_wait"] == COUNTERS["port_xmit_wait"]


def test_a_file_where_the_counters_directory_should_be(fs):
    write_node(SYS, lean_node(1))
    counters = ib("mlx5_0", "ports", "1", "counters")
    for name in os.listdir(counters):
        os.remove(os.path.join(counters, name))
    os.rmdir(counters)
    put(counters, "0\n")
    (dev,), _ = read_all()
    port = dev.ports[0]
    assert port.counters == {}
    assert list(port.problems) == ["counters"]
    assert port.problems["counters"].startswith("ENOTDIR")
    assert port.hw_counters == HW
    assert port.state == 4


def test_unreadable_counters_directory_is_recorded(fs, monkeypatch):
    write_node(SYS, lean_node(1))
    target = os.path.realpath(ib("mlx5_0", "ports", "1", "hw_counters"))
    real_listdir = os.listdir

    def fake_listdir(path="."):
        if os.path.realpath(path) == target:
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_listdir(path)

    monkeypatch.setattr(sysfs.os, "listdir", fake_listdir)
    (dev,), _ = read_all()
    assert dev.ports[0].problems == {"hw_counters": "permission denied"}
    assert dev.ports[0].hw_counters == {}
    assert dev.ports[0].counters == COUNTERS


def test_undecodable_bytes_are_recorded_not_raised(fs):
    write_node(SYS, lean_node(1))
    with open(ib("mlx5_0", "ports", "1", "counters", "link_downed"), "wb") as handle:
        handle.write(b"\xff\xfe\x00\n")
    (dev,), _ = read_all()
    port = dev.ports[0]
    assert set(port.problems) == {"counters/link_downed"}
    assert port.problems["counters/link_downed"].startswith("not a number")
    assert "link_downed" not in port.counters


def test_hfi1_counter_names_with_spaces_and_commas_are_kept_verbatim(fs):
    hfi1 = {"TxWait, Cnt": 12, "Rx Hdr Egr Ovfl": 3, "DcRecvErr": 0, "RxLinkErr, Bad": 1}
    write_node(
        SYS,
        [
            HcaSpec(
                name="hfi1_0",
                pci_address="0000:05:00.0",
                ports=[PortSpec(counters={"symbol_error": 0}, hw_counters=hfi1)],
            )
        ],
    )
    put(ib("hfi1_0", "hw_counters", "Ctxt0 SeqErr, Total"), "4\n")
    put(ib("hfi1_0", "ports", "1", "hw_counters", "SDma Err, Cnt"), "N/A\n")
    (dev,), _ = read_all()
    port = dev.ports[0]
    assert port.hw_counters == hfi1
    assert port.problems == {"hw_counters/SDma Err, Cnt": "not a number: 'N/A'"}
    assert dev.hw_counters == {"Ctxt0 SeqErr, Total": 4}
    assert dev.problems == {}


def test_hw_counters_at_port_and_device_level_stay_apart(fs):
    write_node(
        SYS,
        [
            HcaSpec(
                name="mlx5_0",
                pci_address="0000:0c:00.0",
                ports=[lean_port(hw_counters={"out_of_buffer": 42, "rnr_nak_retry_err": 1})],
            )
        ],
    )
    put(ib("mlx5_0", "hw_counters", "lifespan"), "10\n")
    put(ib("mlx5_0", "hw_counters", "req_cqe_error"), "5\n")
    (dev,), _ = read_all()
    assert dev.hw_counters == {"lifespan": 10, "req_cqe_error": 5}
    assert dev.ports[0].hw_counters == {"out_of_buffer": 42, "rnr_nak_retry_err": 1}
    assert "lifespan" not in dev.ports[0].counters
    assert "out_of_buffer" not in dev.ports[0].counters


def test_counters_ext_are_read_with_counters(fs):
    write_node(SYS, lean_node(1))
    put(ib("mlx5_0", "ports", "1", "counters_ext", "port_xmit_data_64"), "123456789012\n")
    put(ib("mlx5_0", "ports", "1", "counters_ext", "port_rcv_packets_64"), "77\n")
    (dev,), _ = read_all()
    counters = dev.ports[0].counters
    assert counters["port_xmit_data_64"] == 123456789012
    assert counters["port_rcv_packets_64"] == 77
    assert counters["port_xmit_data"] == COUNTERS["port_xmit_data"]


def test_no_counter_directories_is_not_a_problem(fs):
    """iWARP and virtual devices may have neither counters/ nor hw_counters/."""
    port = PortSpec(counters={}, hw_counters={})  # the builder then writes neither directory
    write_node(SYS, [HcaSpec(name="mlx5_0", pci_address="0000:0c:00.0", ports=[port])])
    assert not os.path.exists(ib("mlx5_0", "ports", "1", "counters"))
    (dev,), _ = read_all()
    assert (dev.ports[0].counters, dev.ports[0].hw_counters) == ({}, {})
    assert dev.ports[0].problems == {}
    assert dev.hw_counters == {}
    assert dev.problems == {}


def test_ports_entry_that_is_not_a_number(fs):
    write_node(SYS, lean_node(1))
    os.makedirs(ib("mlx5_0", "ports", "lost+found"))
    (dev,), _ = read_all()
    assert [port.number for port in dev.ports] == [1]
    assert dev.problems == {"ports/lost+found": "not a port number (1..254)"}
    assert dev.ports[0].state == 4
    assert dev.ports[0].problems == {}


def test_missing_ports_directory(fs):
    write_node(SYS, lean_node(2))
    ports = ib("mlx5_0", "ports")
    os.rename(ports, ports + ".gone")
    devices, _ = read_all()
    assert devices[0].ports == []
    assert devices[0].problems == {"ports": "missing"}
    assert devices[0].fw_ver == "20.31.2354"
    assert [port.number for port in devices[1].ports] == [1]


def test_missing_class_infiniband_is_a_node_problem_with_zero_devices(fs):
    os.makedirs(os.path.join(SYS, "class", "net"))
    write_procfs()
    assert read_all() == ([], {"class/infiniband": "missing"})

    snap = collect(SYS, PROC, {"sysfs"})
    assert snap.devices == []
    assert snap.problems == {"class/infiniband": "missing"}
    assert snap.host == "node042"


def test_empty_class_infiniband_is_zero_devices_without_problem(fs):
    os.makedirs(os.path.join(SYS, "class", "infiniband"))
    assert read_all() == ([], {})


def test_missing_sysfs_root_entirely(fs):
    write_procfs()
    snap = collect("/nonexistent/sys", PROC, {"sysfs"})
    assert snap.devices == []
    assert snap.problems == {"class/infiniband": "missing"}


def test_device_without_device_symlink_has_no_pci_and_a_problem(fs):
    write_node(SYS, lean_node(2))
    os.remove(ib("mlx5_0", "device"))
    devices, _ = read_all()
    dev = devices[0]
    assert dev.pci is None
    assert list(dev.problems) == ["device"]
    assert dev.problems["device"].startswith("missing")
    assert [port.number for port in dev.ports] == [1]
    assert dev.ports[0].state == 4
    assert dev.ports[0].counters == COUNTERS
    assert dev.fw_ver == "20.31.2354"
    assert devices[1].pci.address == "0000:20:00.0"
    assert devices[1].problems == {}


def test_device_symlink_to_something_that_is_not_a_pci_function(fs):
    write_node(SYS, lean_node(1))
    vmbus = os.path.join(SYS, "devices", "vmbus", "000d3a6e-4548-000d-3a6e-4548000d3a6e")
    os.makedirs(vmbus)
    os.remove(ib("mlx5_0", "device"))
    os.symlink(vmbus, ib("mlx5_0", "device"))
    (dev,), _ = read_all()
    assert dev.pci is None
    assert dev.problems == {"device": "not a PCI function: '000d3a6e-4548-000d-3a6e-4548000d3a6e'"}
    assert dev.ports[0].state == 4


def test_dangling_device_entry_is_kept_with_problems_and_others_read(fs):
    """A device unplugged mid-read: its class entry dangles; the run must go on."""
    write_node(SYS, lean_node(2))
    os.symlink("../../devices/pci0000:00/0000:99:00.0/infiniband/mlx5_9", ib("mlx5_9"))
    devices, node_problems = read_all()
    assert [dev.name for dev in devices] == ["mlx5_0", "mlx5_1", "mlx5_9"]
    gone = devices[2]
    assert gone.ports == []
    assert gone.pci is None
    assert gone.problems["ports"] == "missing"
    assert gone.problems["fw_ver"] == "missing"
    assert devices[0].problems == {} and devices[1].problems == {}
    assert node_problems == {}


# --- netdev mapping ------------------------------------------------------------------------------


def test_ipoib_netdevs_are_matched_by_dev_port_not_by_name_order(fs):
    """ib1 is on port 1 and ib0 on port 2 here: only dev_port says which is which."""
    write_node(
        SYS,
        [
            HcaSpec(
                name="mlx5_0",
                pci_address="0000:0c:00.0",
                ports=[lean_port(netdev="ib1", mtu="4092"), lean_port(netdev="ib0", mtu="2044")],
            )
        ],
    )
    (dev,), _ = read_all()
    assert port_of(dev, 1).netdev.name == "ib1"
    assert port_of(dev, 1).netdev.mtu == 4092
    assert port_of(dev, 2).netdev.name == "ib0"
    assert port_of(dev, 2).netdev.mtu == 2044


def test_ipoib_matched_by_dev_id_on_kernels_without_dev_port(fs):
    write_node(
        SYS,
        [
            HcaSpec(
                name="mlx4_0",
                pci_address="0000:82:00.0",
                ports=[lean_port(netdev="ib0"), lean_port(netdev="ib1", operstate="down")],
            )
        ],
    )
    net = os.path.join(SYS, "devices", "pci0000:00", "0000:82:00.0", "net")
    os.remove(os.path.join(net, "ib0", "dev_port"))
    os.remove(os.path.join(net, "ib1", "dev_port"))
    put(os.path.join(net, "ib1", "dev_id"), "0x1\n")
    (dev,), _ = read_all()
    assert port_of(dev, 1).netdev.name == "ib0"
    assert port_of(dev, 2).netdev.name == "ib1"
    assert port_of(dev, 2).netdev.operstate == "down"


def test_ipoib_mode_is_read(fs):
    write_node(SYS, lean_node(1))
    put(os.path.join(SYS, "class", "net", "ib0", "mode"), "connected\n")
    (dev,), _ = read_all()
    assert dev.ports[0].netdev.mode == "connected"
    assert dev.ports[0].netdev.is_ipoib


def test_roce_netdev_from_gid_attrs_ndevs(fs):
    write_node(
        SYS,
        [
            HcaSpec(
                name="mlx5_0",
                pci_address="0000:3b:00.0",
                ports=[
                    lean_port(
                        link_layer="Ethernet",
                        rate="25 Gb/sec (1X EDR)",
                        lid="0x0",
                        sm_lid="0x0",
                        netdev="ens1f0np0",
                        mtu="9000",
                    )
                ],
            )
        ],
    )
    put(ib("mlx5_0", "ports", "1", "gid_attrs", "ndevs", "0"), "ens1f0np0\n")
    (dev,), _ = read_all()
    port = dev.ports[0]
    assert port.link_layer == "Ethernet"
    assert port.netdev.name == "ens1f0np0"
    assert port.netdev.type == 1
    assert port.netdev.mtu == 9000
    assert port.netdev.mode is None  # no IPoIB mode on Ethernet, and that is not a problem
    assert port.netdev.problems == {}
    assert port.problems == {}


def test_roce_gid_attrs_netdev_wins_over_the_pci_functions_netdev(fs):
    """RoCE LAG: the GID table names bond0, which is not under the HCA's PCI function."""
    write_node(
        SYS,
        [
            HcaSpec(
                name="mlx5_bond_0",
                pci_address="0000:3b:00.0",
                ports=[lean_port(link_layer="Ethernet", netdev="ens1f0np0")],
            )
        ],
    )
    bond = os.path.join(SYS, "devices", "virtual", "net", "bond0")
    for name, value in (("operstate", "up"), ("carrier", "1"), ("mtu", "4200"), ("type", "1")):
        put(os.path.join(bond, name), value + "\n")
    os.symlink("../../devices/virtual/net/bond0", os.path.join(SYS, "class", "net", "bond0"))
    put(ib("mlx5_bond_0", "ports", "1", "gid_attrs", "ndevs", "0"), "bond0\n")
    (dev,), _ = read_all()
    assert dev.ports[0].netdev.name == "bond0"
    assert dev.ports[0].netdev.mtu == 4200


def test_gid_attrs_naming_an_absent_netdev_falls_back_to_dev_port(fs):
    write_node(SYS, lean_node(1))
    put(ib("mlx5_0", "ports", "1", "gid_attrs", "ndevs", "0"), "eth9\n")
    (dev,), _ = read_all()
    assert dev.ports[0].netdev.name == "ib0"


def test_pkey_child_interfaces_are_ignored(fs):
    write_node(SYS, lean_node(1))
    parent = os.path.realpath(os.path.join(SYS, "class", "net", "ib0"))
    child = os.path.join(os.path.dirname(parent), "ib0.8001")
    for name, value in (
        ("operstate", "down"),
        ("carrier", "0"),
        ("mtu", "1500"),
        ("dev_port", "0"),
        ("type", "32"),
    ):
        put(os.path.join(child, name), value + "\n")
    os.symlink(
        os.path.relpath(child, os.path.join(SYS, "class", "net")), ib("..", "net", "ib0.8001")
    )
    (dev,), _ = read_all()
    assert dev.ports[0].netdev.name == "ib0"
    assert dev.ports[0].netdev.operstate == "up"


def test_single_port_single_netdev_without_dev_port_or_dev_id_ignores_pkey_children(fs):
    write_node(SYS, lean_node(1))
    net = os.path.dirname(os.path.realpath(os.path.join(SYS, "class", "net", "ib0")))
    os.remove(os.path.join(net, "ib0", "dev_port"))
    os.remove(os.path.join(net, "ib0", "dev_id"))
    for name, value in (("operstate", "up"), ("carrier", "1"), ("mtu", "2044")):
        put(os.path.join(net, "ib0.8001", name), value + "\n")
    (dev,), _ = read_all()
    assert dev.ports[0].netdev is not None
    assert dev.ports[0].netdev.name == "ib0"


def test_port_without_netdev_has_none(fs):
    write_node(SYS, [HcaSpec(name="mlx5_0", pci_address="0000:0c:00.0", ports=[lean_port()])])
    (dev,), _ = read_all()
    assert dev.ports[0].netdev is None
    assert dev.ports[0].problems == {}


def test_netdev_odd_files_are_recorded_on_the_netdev(fs):
    write_node(SYS, lean_node(1))
    net = os.path.join(SYS, "class", "net", "ib0")
    os.remove(os.path.join(net, "operstate"))
    put(os.path.join(net, "carrier"), "\n")  # what a down IPoIB interface returns (EINVAL/empty)
    (dev,), _ = read_all()
    netdev = dev.ports[0].netdev
    assert netdev.name == "ib0"
    assert netdev.problems == {"operstate": "missing", "carrier": "empty"}
    assert (netdev.operstate, netdev.carrier) == (None, None)
    assert netdev.mtu == 2044
    assert dev.ports[0].problems == {}


# --- real captures (not pyfakefs) ---------------------------------------------------------------


def scenario_names() -> List[str]:
    return sorted(
        name
        for name in os.listdir(SCENARIOS)
        if os.path.isdir(os.path.join(SCENARIOS, name, "root"))
    )


@functools.cache
def scenario(name: str) -> Snapshot:
    root = os.path.join(SCENARIOS, name, "root")
    return collect(os.path.join(root, "sys"), os.path.join(root, "proc"), {"sysfs"})


def test_every_scenario_capture_is_present():
    assert scenario_names() == [
        "azhpc-diagnostics-endure-mlx4-hyperv",
        "gcm-8xCX6-HDR-2ports-stuck-INIT",
        "gcm-8xCX6-HDR-all-ports-EDR-degraded-rate",
        "gcm-8xCX6-HDR-good",
        "gcm-8xCX6-HDR-ib4-operstate-down-flapping",
        "hwloc-tacc-stampede-c412-603-connectx3-mlx4-fdr",
        "node_exporter-fixtures-i40iw-mlx4",
    ]


def _raw(path: str) -> Optional[str]:
    try:
        with open(path, "rb") as handle:
            return handle.read().decode().strip()
    except OSError:
        return None


@pytest.mark.parametrize("name", scenario_names())
def test_scenario_matches_its_files(name):
    """An independent oracle: walk the capture with plain os calls and compare every port."""
    snap = scenario(name)
    base = os.path.join(SCENARIOS, name, "root", "sys", "class", "infiniband")
    assert sorted(dev.name for dev in snap.devices) == sorted(os.listdir(base))
    for dev in snap.devices:
        ports_dir = os.path.join(base, dev.name, "ports")
        assert sorted(port.number for port in dev.ports) == sorted(
            int(n) for n in os.listdir(ports_dir)
        )
        for port in dev.ports:
            pdir = os.path.join(ports_dir, str(port.number))
            assert f"{port.state}: {port.state_name}" == _raw(os.path.join(pdir, "state"))
            assert f"{port.phys_state}: {port.phys_state_name}" == _raw(
                os.path.join(pdir, "phys_state")
            )
            assert port.rate.raw == _raw(os.path.join(pdir, "rate"))
            assert port.link_layer == _raw(os.path.join(pdir, "link_layer"))
            expected: Dict[str, int] = {}
            odd = set()
            for sub in ("counters", "counters_ext"):
                directory = os.path.join(pdir, sub)
                for counter in os.listdir(directory) if os.path.isdir(directory) else []:
                    text = _raw(os.path.join(directory, counter))
                    if text is not None and text.isdigit():
                        expected[counter] = int(text)
                    else:
                        odd.add(f"{sub}/{counter}")
            assert port.counters == expected
            assert odd <= set(port.problems)


def test_gcm_good_8_hcas_with_ipoib_and_pcie():
    snap = scenario("gcm-8xCX6-HDR-good")
    names = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"]
    assert [dev.name for dev in snap.devices] == names
    assert snap.problems == {
        "procfs:sys/kernel/hostname": "missing",
        "procfs:sys/kernel/random/boot_id": "missing",
    }
    pci = ["0c", "12", "4b", "54", "8d", "94", "ba", "cc"]
    for index, dev in enumerate(snap.devices):
        assert dev.problems == {}
        assert dev.fw_ver == "20.31.2354"
        assert (dev.node_type, dev.node_type_name) == (1, "CA")
        assert dev.pci.address == f"0000:{pci[index]}:00.0"
        assert dev.pci.current_link_speed == 16.0
        assert dev.pci.current_link_width == 16
        assert (dev.pci.max_link_speed, dev.pci.max_link_width) == (None, None)  # no max files
        assert dev.pci.problems == {}
        (port,) = dev.ports
        assert port.number == 1
        assert (port.state, port.phys_state) == (4, 5)
        assert (port.rate.gbps, port.rate.lanes, port.rate.speed) == (200.0, 4, "HDR")
        assert port.link_layer == "InfiniBand"
        # The capture anonymised the LIDs to the text 'lid' / 'sm_lid'.
        assert port.lid is None
        assert port.problems == {
            "lid": "not a number: 'lid'",
            "sm_lid": "not a number: 'sm_lid'",
        }
        assert port.netdev.name == f"ib{index}"
        assert port.netdev.mode == "datagram"
        assert (port.netdev.mtu, port.netdev.type, port.netdev.operstate) == (2044, 32, "up")
        assert port.netdev.speed_mbps == 200000
    assert snap.devices[0].node_desc == "node1720 HCA-1"


def test_gcm_stuck_init_has_mlx5_6_and_mlx5_8_in_init():
    snap = scenario("gcm-8xCX6-HDR-2ports-stuck-INIT")
    states = {dev.name: (dev.ports[0].state, dev.ports[0].state_name) for dev in snap.devices}
    assert states == {
        "mlx5_0": (4, "ACTIVE"),
        "mlx5_1": (4, "ACTIVE"),
        "mlx5_2": (4, "ACTIVE"),
        "mlx5_3": (4, "ACTIVE"),
        "mlx5_6": (2, "INIT"),
        "mlx5_7": (4, "ACTIVE"),
        "mlx5_8": (2, "INIT"),
        "mlx5_9": (4, "ACTIVE"),
    }
    for name, ifname in (("mlx5_6", "ib4"), ("mlx5_8", "ib6")):
        port = snap.device(name).ports[0]
        assert port.phys_state == 5
        assert port.netdev.name == ifname
        assert (port.netdev.operstate, port.netdev.carrier, port.netdev.mtu) == ("down", 0, 4092)


def test_gcm_degraded_rate_every_port_is_edr_100():
    snap = scenario("gcm-8xCX6-HDR-all-ports-EDR-degraded-rate")
    assert len(snap.devices) == 8
    rates = {(p.rate.gbps, p.rate.lanes, p.rate.speed) for d in snap.devices for p in d.ports}
    assert rates == {(100.0, 4, "EDR")}
    assert {dev.fw_ver for dev in snap.devices} == {"fw_ver"}  # anonymised in the source


def test_gcm_flapping_ib4_is_down_with_empty_carrier():
    snap = scenario("gcm-8xCX6-HDR-ib4-operstate-down-flapping")
    port = snap.device("mlx5_6").ports[0]
    assert (port.state, port.phys_state) == (4, 5)  # the IB port itself looks fine
    netdev = port.netdev
    assert netdev.name == "ib4"
    assert netdev.operstate == "down"
    assert netdev.carrier is None
    assert netdev.carrier_changes == 98
    assert netdev.problems == {"carrier": "empty", "speed": "empty"}
    assert snap.device("mlx5_7").ports[0].netdev.problems == {}


def test_hwloc_connectx3_fdr_capture():
    snap = scenario("hwloc-tacc-stampede-c412-603-connectx3-mlx4-fdr")
    (dev,) = snap.devices
    assert dev.name == "mlx4_0"
    assert (dev.hca_type, dev.board_id, dev.fw_ver) == ("MT4099", "DEL0A30000019", "2.11.500")
    assert dev.node_guid == "0002:c903:00f9:bfa0"
    assert dev.node_desc == "c412-603 HCA-1"
    assert dev.problems == {}
    assert dev.pci.address == "0000:82:00.0"
    assert dev.pci.numa_node == 1
    assert (dev.pci.vendor_id, dev.pci.device_id) == ("0x15b3", "0x1003")
    (port,) = dev.ports
    assert port.number == 1
    assert (port.state_name, port.phys_state_name) == ("ACTIVE", "LinkUp")
    assert (port.rate.gbps, port.rate.lanes, port.rate.speed) == (56.0, 4, "FDR")
    assert port.lid == 0x3A4 == 932
    assert port.sm_lid == 1
    assert port.link_layer == "InfiniBand"
    assert len(port.counters) == 17
    assert port.counters["port_xmit_wait"] == 21833
    assert port.counters["symbol_error"] == 0
    assert port.problems == {}
    # IPoIB found through dev_id (2013 kernel: no dev_port), in connected mode.
    assert port.netdev.name == "ib0"
    assert port.netdev.mode == "connected"
    assert (port.netdev.mtu, port.netdev.operstate, port.netdev.type) == (2044, "up", 32)
    assert port.netdev.problems == {"speed": "empty"}


I40IW_COUNTERS = [
    "VL15_dropped",
    "excessive_buffer_overrun_errors",
    "link_downed",
    "link_error_recovery",
    "local_link_integrity_errors",
    "port_rcv_constraint_errors",
    "port_rcv_data",
    "port_rcv_errors",
    "port_rcv_packets",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_xmit_constraint_errors",
    "port_xmit_data",
    "port_xmit_discards",
    "port_xmit_packets",
    "port_xmit_wait",
    "symbol_error",
]


def test_node_exporter_i40iw_counters_are_all_no_pma_problems():
    snap = scenario("node_exporter-fixtures-i40iw-mlx4")
    assert [dev.name for dev in snap.devices] == ["i40iw0", "mlx4_0"]
    dev = snap.device("i40iw0")
    (port,) = dev.ports
    assert port.counters == {}
    assert port.problems == {
        f"counters/{name}": "not a number: 'N/A (no PMA)'" for name in I40IW_COUNTERS
    }
    # Everything else about the port is still read.
    assert (port.state, port.phys_state) == (4, 5)
    assert (port.rate.gbps, port.rate.lanes, port.rate.speed) == (10.0, 4, None)
    assert (dev.hca_type, dev.fw_ver) == ("I40IW", "0.2")


def test_node_exporter_mlx4_saturated_xmit_wait_and_partial_port_2():
    dev = scenario("node_exporter-fixtures-i40iw-mlx4").device("mlx4_0")
    assert [port.number for port in dev.ports] == [1, 2]
    port1, port2 = dev.ports
    assert port1.counters["port_xmit_wait"] == 4294967295
    assert port1.counters["port_xmit_discards"] == 5
    assert port1.counters["port_rcv_packets"] == 6825908347
    assert port1.counters["port_rcv_data_64"] == 4631917  # counters_ext
    assert len(port1.counters) == 16 + 8
    assert port1.problems == {}
    assert set(port2.counters) == {
        "link_downed",
        "link_error_recovery",
        "multicast_rcv_packets",
        "multicast_xmit_packets",
        "port_rcv_data",
        "port_xmit_data",
        "unicast_rcv_packets",
        "unicast_xmit_packets",
        "port_multicast_rcv_packets",
        "port_multicast_xmit_packets",
        "port_rcv_data_64",
        "port_rcv_packets_64",
        "port_unicast_rcv_packets",
        "port_unicast_xmit_packets",
        "port_xmit_data_64",
        "port_xmit_packets_64",
    }
    assert "port_xmit_wait" not in port2.counters
    assert port2.problems == {}
    assert (port2.rate.gbps, port2.rate.speed) == (40.0, "QDR")
    # A ttar fixture without PCI or node_type: recorded, not fatal.
    assert dev.pci is None
    assert dev.problems == {
        "node_type": "missing",
        "node_guid": "missing",
        "device": "missing: no PCI function (virtual device or partial tree)",
    }


def test_azhpc_hyperv_phys_state_unknown_and_no_link_layer():
    (dev,) = scenario("azhpc-diagnostics-endure-mlx4-hyperv").devices
    assert dev.name == "mlx4_0"
    (port,) = dev.ports
    assert (port.state, port.state_name) == (4, "ACTIVE")
    assert (port.phys_state, port.phys_state_name) == (0, "<unknown>")
    assert (port.rate.gbps, port.rate.lanes, port.rate.speed) == (5.0, 1, "DDR")
    assert port.link_layer is None
    assert port.problems == {"link_layer": "missing"}
    assert port.counters == {}
    assert dev.problems["device"].startswith("missing")


# --- odd names, files that are not regular, links out of the tree (issue 12) --------------------


def finishes(read, within: float = 10.0):
    """``read()`` in a thread: its result, or a failure when it has not returned ``within``
    seconds (a read that blocks must fail the test, not hang the run)."""
    import threading

    outcome = {}
    worker = threading.Thread(target=lambda: outcome.update(result=read()), daemon=True)
    worker.start()
    worker.join(within)
    assert not worker.is_alive(), f"the read did not return within {within} s"
    return outcome["result"]


def real_ib(root: str, *parts: str) -> str:
    return os.path.join(root, "class", "infiniband", *parts)


def rename_port_dir(root: str, device: str, old: str, new) -> None:
    ports = os.path.realpath(real_ib(root, device, "ports"))
    os.rename(os.path.join(ports, old), os.path.join(os.fsencode(ports), os.fsencode(new)))


@pytest.mark.parametrize(
    "entry, shown",
    [
        ("0", "0"),
        ("255", "255"),
        ("65536", "65536"),
        ("1" + "0" * 23, "1" + "0" * 23),
        ("9" * 250, "9" * 250),
        ("²", "²"),  # isdigit() but int() fails
        ("①", "①"),
        ("٣", "٣"),  # int() takes it as 3: still not how the kernel names port 3
        ("01", "01"),
        ("-1", "-1"),
        ("1 ", "1 "),
        (b"\xff", "\\xff"),
    ],
)
def test_a_port_directory_that_is_not_a_port_number_is_one_problem(tmp_path, entry, shown):
    """Only ASCII digits without a leading zero, 1..254, name a port; anything else in ports/
    is one problem on the device and the other ports are read."""
    root = str(tmp_path / "sys")
    write_node(root, [HcaSpec("mlx5_0", "0000:0c:00.0", ports=[lean_port(), lean_port()])])
    rename_port_dir(root, "mlx5_0", "2", entry)
    (dev,), _ = read_all(root)
    assert [port.number for port in dev.ports] == [1]
    assert dev.problems == {f"ports/{shown}": "not a port number (1..254)"}
    assert dev.ports[0].state == 4 and dev.ports[0].counters == COUNTERS
    Device.model_validate_json(dev.model_dump_json())


@pytest.mark.parametrize("number", ["1", "9", "12", "254"])
def test_port_numbers_1_to_254_are_read(fs, number):
    write_node(SYS, lean_node(1))
    if number != "1":
        rename_port_dir(SYS, "mlx5_0", "1", number)
    (dev,), _ = read_all()
    assert [port.number for port in dev.ports] == [int(number)]
    assert dev.ports[0].path == f"class/infiniband/mlx5_0/ports/{number}"
    assert dev.problems == {}


@pytest.mark.parametrize(
    "listed, shown",
    [
        (b"mlx5_\xff", "mlx5_\\xff"),
        (b"mlx5\r0", "mlx5\\x0d0"),
        (b"mlx5\n0", "mlx5\\x0a0"),
        (b"mlx5\x7f0", "mlx5\\x7f0"),
        (b"mlx5\\x41", "mlx5\\x41"),  # printable: kept as it is, backslash and all
        (b"mlx5\\\r", "mlx5\\\\\\x0d"),  # not: escaped, its backslash too
        (b"mlx5 0", "mlx5 0"),
        (b"mlx5;0", "mlx5;0"),
        (b"-mlx5_0", "-mlx5_0"),
        ("mlx5_é".encode(), "mlx5_é"),
    ],
)
def test_an_odd_device_name_is_shown_escaped_read_and_one_problem(tmp_path, listed, shown):
    """Read and graded like any device; its name in the Snapshot always serialises; that it
    may not go on a command line is one problem on it."""
    root = str(tmp_path / "sys")
    write_node(root, lean_node(2))
    base = os.fsencode(real_ib(root))
    os.rename(os.path.join(base, b"mlx5_0"), os.path.join(base, listed))
    devices, node_problems = read_all(root)
    odd = by_name(devices)[shown]
    assert odd.path == f"class/infiniband/{shown}"
    assert odd.ports[0].state == 4 and odd.ports[0].counters == COUNTERS
    assert odd.ports[0].path == f"class/infiniband/{shown}/ports/1"
    assert odd.fw_ver == "20.31.2354" and odd.pci.numa_node == 0
    assert odd.problems == {
        "name": f"name '{shown}' is not safe on a command line (letters, digits and _.:- only, "
        "at most 64, not starting with -): no command is run for it"
    }
    assert by_name(devices)["mlx5_1"].problems == {} and node_problems == {}
    Device.model_validate_json(odd.model_dump_json())  # serialises, and back


def test_a_counter_name_that_is_not_utf8_is_shown_escaped(tmp_path):
    root = str(tmp_path / "sys")
    write_node(root, lean_node(1))
    counters = os.fsencode(os.path.realpath(real_ib(root, "mlx5_0", "ports", "1", "counters")))
    with open(os.path.join(counters, b"odd_\xfe\x01"), "w") as handle:
        handle.write("7\n")
    with open(os.path.join(counters, b"bad_\xff"), "w") as handle:
        handle.write("x\n")
    (dev,), _ = read_all(root)
    port = dev.ports[0]
    assert port.counters["odd_\\xfe\\x01"] == 7
    assert port.problems == {"counters/bad_\\xff": "not a number: 'x'"}
    Device.model_validate_json(dev.model_dump_json())


@pytest.mark.parametrize(
    "listed, shown",
    [
        (b"ib 0", "ib 0"),
        (b"ib0;x", "ib0;x"),
        (b"ib\r0", "ib\\x0d0"),
        (b"ib\x7f0", "ib\\x7f0"),
        (b"ib\xff", "ib\\xff"),
        (b"-ib0", "-ib0"),
    ],
)
def test_an_odd_netdev_name_is_shown_read_and_one_problem(tmp_path, listed, shown):
    root = str(tmp_path / "sys")
    write_node(root, lean_node(1))
    net = os.fsencode(os.path.realpath(real_ib(root, "mlx5_0", "device", "net")))
    os.rename(os.path.join(net, b"ib0"), os.path.join(net, listed))
    os.remove(os.path.join(root, "class", "net", "ib0"))
    (dev,), _ = read_all(root)
    netdev = dev.ports[0].netdev
    assert netdev.name == shown
    assert netdev.operstate == "up" and netdev.mtu == 2044
    assert list(netdev.problems) == ["name"]
    assert netdev.problems["name"].startswith(f"name '{netdev.name}' is not safe on a command line")
    Device.model_validate_json(dev.model_dump_json())


@pytest.mark.parametrize("content", ["../..", "../../../../etc", ".", "a/b", "ib0 x", "x" * 16])
def test_gid_attrs_ndev_that_is_not_an_interface_name_names_no_netdev(fs, content):
    """``gid_attrs/ndevs/0`` is file content: ``../..`` must never become a path to read."""
    write_node(SYS, lean_node(1))
    put(ib("mlx5_0", "ports", "1", "gid_attrs", "ndevs", "0"), content + "\n")
    (dev,), _ = read_all()
    port = dev.ports[0]
    assert port.netdev.name == "ib0"  # matched by dev_port instead
    assert port.problems == {"gid_attrs/ndevs/0": f"not a network interface name: '{content}'"}


def _fifo_in_place_of(path: str) -> None:
    os.remove(path)
    os.mkfifo(path)


@pytest.mark.parametrize(
    "parts, owner, key",
    [
        (("ports", "1", "state"), "port", "state"),
        (("ports", "1", "counters", "symbol_error"), "port", "counters/symbol_error"),
        (("fw_ver",), "device", "fw_ver"),
        (("device", "numa_node"), "pci", "numa_node"),
    ],
)
def test_a_fifo_in_place_of_an_attribute_is_recorded_not_waited_on(tmp_path, parts, owner, key):
    root = str(tmp_path / "sys")
    write_node(root, lean_node(2))
    _fifo_in_place_of(real_ib(root, "mlx5_0", *parts))
    devices, _ = finishes(lambda: read_all(root))
    dev = devices[0]
    where = {"port": dev.ports[0], "device": dev, "pci": dev.pci}[owner]
    assert where.problems == {key: "not a regular file (a FIFO): not read"}
    assert devices[1].ports[0].state == 4 and devices[1].problems == {}


def test_a_socket_in_place_of_an_attribute_is_recorded(tmp_path):
    import socket

    root = str(tmp_path / "sys")
    write_node(root, lean_node(1))
    path = real_ib(root, "mlx5_0", "ports", "1", "rate")
    os.remove(path)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    try:
        (dev,), _ = finishes(lambda: read_all(root))
    finally:
        listener.close()
    assert dev.ports[0].rate is None
    assert dev.ports[0].problems["rate"].startswith("not a regular file")


def test_a_fifo_in_place_of_the_hostname_falls_back_to_the_kernels(tmp_path, monkeypatch):
    root = str(tmp_path / "sys")
    proc = str(tmp_path / "proc")
    write_node(root, lean_node(1))
    write_procfs(proc)
    _fifo_in_place_of(os.path.join(proc, "sys", "kernel", "hostname"))
    monkeypatch.setattr("ibdiag.sources.procfs.kernel_hostname", lambda: "kernel-name")
    snap = finishes(lambda: collect(root, proc, {"sysfs"}))
    assert snap.host == "kernel-name"
    assert snap.problems == {"procfs:sys/kernel/hostname": "not a regular file (a FIFO): not read"}
    assert snap.boot_id == BOOT_ID


SECRET = "root:$6$not-for-the-vendor:19000:0:99999:7:::"  # noqa: S105 - a stand-in


def _outside(tmp_path) -> str:
    """A root-only file outside the tree, like /etc/shadow."""
    outside = tmp_path / "etc"
    outside.mkdir(exist_ok=True)
    shadow = outside / "shadow"
    shadow.write_text(SECRET + "\n")
    shadow.chmod(0o600)
    return str(shadow)


def _link_in_place_of(path: str, target: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        import shutil

        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)
    os.symlink(target, path)


@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
@pytest.mark.parametrize(
    "parts, owner, key",
    [
        (("fw_ver",), "device", "fw_ver"),
        (("ports", "1", "state"), "port", "state"),
        (("ports", "1", "rate"), "port", "rate"),
        (("ports", "1", "counters", "symbol_error"), "port", "counters/symbol_error"),
        (("device", "numa_node"), "pci", "numa_node"),
        (("device", "net", "ib0", "mtu"), "netdev", "mtu"),
    ],
)
def test_a_link_out_of_the_tree_is_refused_and_recorded(tmp_path, parts, owner, key, relative):
    root = str(tmp_path / "sys")
    write_node(root, lean_node(1))
    shadow = _outside(tmp_path)
    path = os.path.realpath(real_ib(root, "mlx5_0", *parts))
    _link_in_place_of(path, os.path.relpath(shadow, os.path.dirname(path)) if relative else shadow)
    (dev,), _ = read_all(root)
    port = dev.ports[0]
    where = {"port": port, "device": dev, "pci": dev.pci, "netdev": port.netdev}[owner]
    assert where.problems == {key: f"refused: resolves outside {root} (to {shadow})"}
    assert SECRET not in dev.model_dump_json()


@pytest.mark.parametrize(
    "parts, owner",
    [
        (("ports", "1", "counters"), "port"),
        (("ports", "1"), "device"),
        (("device",), "device"),
        (("hw_counters",), "device"),
    ],
)
def test_a_directory_link_out_of_the_tree_is_refused(tmp_path, parts, owner):
    """Neither the files nor the names of what a link out of the tree points at are read (the
    directory is named like a PCI function, so that ``device`` is followed as far as it may)."""
    root = str(tmp_path / "sys")
    write_node(root, lean_node(1))
    outside = tmp_path / "host" / "0000:99:00.0"
    outside.mkdir(parents=True)
    for name in ("numa_node", "fw_ver", "state", "symbol_error", "lifespan"):
        (outside / name).write_text(SECRET + "\n")
    (outside / SECRET.replace("/", "_")).write_text("0\n")  # its name must not leak either
    _link_in_place_of(os.path.join(os.path.realpath(real_ib(root, "mlx5_0")), *parts), str(outside))
    (dev,), _ = read_all(root)
    text = dev.model_dump_json()
    assert SECRET not in text and SECRET.replace("/", "_") not in text
    refused = f"refused: resolves outside {root} (to {outside})"
    assert refused in json.dumps(dev.model_dump(), ensure_ascii=False)


def test_class_entries_linking_into_the_tree_and_absolute_links_inside_it_are_followed(tmp_path):
    """sysfs is made of links (class/infiniband/<dev> -> ../../devices/...); one written as an
    absolute path that stays inside the root is followed too."""
    root = str(tmp_path / "sys")
    write_node(root, lean_node(1))
    link = real_ib(root, "mlx5_0")
    target = os.path.realpath(link)
    os.remove(link)
    os.symlink(target, link)  # absolute, inside the root
    (dev,), problems = read_all(root)
    assert dev.ports[0].state == 4 and dev.pci.address == "0000:10:00.0"
    assert dev.problems == {} and problems == {}


def test_a_tree_reached_through_a_symlinked_root_is_read(tmp_path):
    real = str(tmp_path / "capture" / "sys")
    write_node(real, lean_node(1))
    os.symlink(real, str(tmp_path / "sys"))
    (dev,), problems = read_all(str(tmp_path / "sys"))
    assert dev.ports[0].state == 4 and dev.problems == {} and problems == {}


def test_a_symlink_loop_is_recorded(tmp_path):
    root = str(tmp_path / "sys")
    write_node(root, lean_node(1))
    path = os.path.realpath(real_ib(root, "mlx5_0", "fw_ver"))
    os.remove(path)
    os.symlink("fw_ver", path)
    (dev,), _ = read_all(root)
    assert dev.problems["fw_ver"].startswith("ELOOP")


def test_a_hostname_linked_out_of_procfs_is_refused(tmp_path, monkeypatch):
    root = str(tmp_path / "sys")
    proc = str(tmp_path / "proc")
    write_node(root, lean_node(1))
    write_procfs(proc)
    shadow = _outside(tmp_path)
    _link_in_place_of(os.path.join(proc, "sys", "kernel", "hostname"), shadow)
    monkeypatch.setattr("ibdiag.sources.procfs.kernel_hostname", lambda: "kernel-name")
    snap = collect(root, proc, {"sysfs"})
    assert snap.host == "kernel-name"
    assert snap.problems == {
        "procfs:sys/kernel/hostname": f"refused: resolves outside {proc} (to {shadow})"
    }
    assert SECRET not in snap.model_dump_json()


def test_the_readers_link_resolution_is_realpaths(tmp_path):
    """The reader resolves directories itself (remembering them, for speed): it must land
    where os.path.realpath does, through relative, absolute, chained and '..' links."""
    root = tmp_path / "sys"
    write_node(str(root), lean_node(2))
    (root / "a" / "b").mkdir(parents=True)
    os.symlink("../class/infiniband", root / "a" / "up")  # relative, with ..
    os.symlink(str(root / "devices"), root / "a" / "abs")  # absolute
    os.symlink("up", root / "a" / "chain")  # a link to a link
    os.symlink("b/../../class", root / "a" / "dots")  # .. after a real directory
    os.symlink("nowhere/x", root / "a" / "dangling")
    reader = sysfs.SysfsReader(str(root))
    for rel in (
        "class/infiniband/mlx5_0", "class/infiniband/mlx5_0/device",
        "class/infiniband/mlx5_1/device/net/ib1", "a/up/mlx5_0/ports/1", "a/abs/pci0000:00",
        "a/chain/mlx5_1", "a/dots/net/ib0", "a/dangling", "a/b/../up", "class/net/ib0/device",
    ):  # fmt: skip
        path = os.path.join(str(root), rel)
        assert reader._real(path) == os.path.realpath(path), rel
