"""Names read from sysfs that no driver would give, end to end (issue 12, item 2).

A node of two ConnectX HCAs - mlx5_0 (IPoIB ib0, or RoCE with enp0s0 named in its GID table)
and a healthy mlx5_1 (ib1) - where one name is odd: the device, a port directory or the netdev
holds a space, ``\\r``, ``;``, DEL or a byte that is not UTF-8, a port is numbered ``0``,
``65536`` or ``10^23``, a port directory is ``²`` or ``①``, a RoCE ``gid_attrs/ndevs/0`` reads
``../..``. Each runs through the real CLI, in-process, with stub tools alone on PATH
(tests/stubs), at level standard and quick and through a bundle. Never an internal error: the
odd name is one problem on its device, port or netdev, no command is run with it, every other
command runs and every other port is graded.
"""

from __future__ import annotations

import glob
import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import List

import pytest
import stubs as S
from sysfs_builder import HcaSpec, PortSpec, write_node

from ibdiag import families
from ibdiag.model import CommandRun, Device, NetDev, Port, Snapshot

STANDARD = ["--level", "standard", "--deadline", "8", "--command-timeout", "4"]
# (the name as listed, as the Snapshot shows it: ibdiag.sources.names.shown)
ODD_DEVICE_NAMES = [
    (b"mlx5 0", "mlx5 0"), (b"mlx5\r0", "mlx5\\x0d0"), (b"mlx5;0", "mlx5;0"),
    (b"mlx5\x7f0", "mlx5\\x7f0"), (b"mlx5_\xff", "mlx5_\\xff"), (b"-mlx5_0", "-mlx5_0"),
]  # fmt: skip
ODD_NETDEV_NAMES = [
    (b"ib 0", "ib 0"), (b"ib\r0", "ib\\x0d0"), (b"ib;0", "ib;0"), (b"ib\x7f0", "ib\\x7f0"),
    (b"ib\xff", "ib\\xff"), (b"-ib0", "-ib0"),
]  # fmt: skip


class Node:
    """The two-HCA node in tmp_path, its procfs and stubs that log every call."""

    def __init__(self, tmp_path: Path, run_cli, roce: bool = False) -> None:
        self.tmp = tmp_path
        self.run_cli = run_cli
        self.sysfs = str(tmp_path / "sys")
        first = PortSpec(netdev="enp0s0", link_layer="Ethernet") if roce else PortSpec(netdev="ib0")
        write_node(
            self.sysfs,
            [
                HcaSpec("mlx5_0", "0000:0d:00.0", ports=[first]),
                HcaSpec("mlx5_1", "0000:1a:00.0", ports=[PortSpec(netdev="ib1")]),
            ],
        )
        if roce:
            ndev = Path(self.sysfs, "class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/0")
            ndev.parent.mkdir(parents=True)
            ndev.write_text("enp0s0\n")
        self.procfs = S.write_procfs(tmp_path / "proc", boot_time=time.time() - 3600)
        self.stubs = S.StubBin(tmp_path / "stubs")
        self.stubs.add(
            "perfquery",
            S.by_args(
                {
                    "-x -C *": S.prints(S.fixture(*S.PERFQUERY_X_HEALTHY)),
                    "-E -C *": S.prints(S.fixture(*S.PERFQUERY_E)),
                    "-X -C *": S.prints_text(S.PERFQUERY_XMIT_SL),
                    "-C *": S.prints(S.fixture(*S.PERFQUERY_X_HEALTHY)),
                }
            ),
        )
        self.stubs.add("ethtool", S.prints(S.fixture(*S.ETHTOOL_S)))
        self.stubs.add("dmesg", S.prints_text("[    1.000000] mlx5_core 0000:0d:00.0: ok"))
        self.stubs.add("journalctl", S.fails("journalctl: not expected", 1))
        self.stubs.add("ibstat", S.fails("ibstat: not here", 1))
        self.stubs.add("ibv_devinfo", S.fails("ibv_devinfo: not here", 1))

    def path(self, *parts: str, device: str = "mlx5_0") -> bytes:
        """A path under a device's directory (resolved: renames happen there)."""
        found = os.path.realpath(os.path.join(self.sysfs, "class", "infiniband", device))
        return os.fsencode(os.path.join(found, *parts))

    def rename_device(self, new: bytes) -> None:
        base = os.fsencode(os.path.join(self.sysfs, "class", "infiniband"))
        os.rename(os.path.join(base, b"mlx5_0"), os.path.join(base, new))

    def rename_port(self, new: bytes) -> None:
        os.rename(self.path("ports", "1"), os.path.join(self.path("ports"), new))

    def rename_netdev(self, old: str, new: bytes, device: str = "mlx5_0") -> None:
        net = self.path("device", "net", device=device)
        os.rename(os.path.join(net, os.fsencode(old)), os.path.join(net, new))
        link = os.fsencode(os.path.join(self.sysfs, "class", "net", old))
        os.remove(link)
        os.symlink(os.path.join(net, new), os.path.join(os.path.dirname(link), new))

    def check(self, *args: str) -> dict:
        argv = ["check", "--json", "--sysfs", self.sysfs, "--procfs", self.procfs, *args]
        result = self.run_cli(*argv, env={"PATH": self.stubs.path})
        assert "internal error" not in result.stderr and "Traceback" not in result.stderr, (
            result.stderr
        )
        assert result.exit_code in (0, 1, 2), (result.exit_code, result.stderr)
        report = json.loads(result.stdout)
        assert not [r for r in report["results"] if "crashed" in r["message"]], report["results"]
        return report

    def calls(self) -> List[str]:
        return self.stubs.calls()


@pytest.fixture
def node(tmp_path, run_cli):
    return Node(tmp_path, run_cli)


def results(report: dict, check_id: str, target: str) -> List[dict]:
    return [r for r in report["results"] if r["check_id"] == check_id and r["target"] == target]


def device(report: dict, name: str) -> dict:
    [found] = [dev for dev in report["snapshot"]["devices"] if dev["name"] == name]
    return found


# -- level standard ---------------------------------------------------------------------------


@pytest.mark.parametrize("odd, shown", ODD_DEVICE_NAMES, ids=repr)
def test_standard_with_an_odd_device_name_runs_the_rest(node, odd, shown):
    node.rename_device(odd)
    report = node.check(*STANDARD)
    calls = node.calls()
    assert not [call for call in calls if "mlx5_1" not in call and "-C" in call], calls
    assert "perfquery -x -C mlx5_1 -P 1" in calls and "ethtool -S ib1" in calls
    odd_dev = device(report, shown)
    assert odd_dev["problems"]["name"].startswith(f"name '{shown}' is not safe on a command line")
    assert odd_dev["ports"][0]["state"] == 4  # read and graded all the same
    [state] = results(report, "link.state", f"{shown}:1")
    assert state["status"] == "pass"
    [pma] = results(report, "perfquery.errors", f"{shown}:1")
    assert pma["status"] == "skip"
    assert pma["message"] == f"perfquery not run: {odd_dev['problems']['name']}"
    [healthy] = results(report, "perfquery.errors", "mlx5_1:1")
    assert healthy["status"] == "pass"
    run = report["snapshot"]["commands"][f"perfquery-x {shown}:1"]
    assert run["argv"] == ["perfquery", "-x", "-C", shown, "-P", "1"]
    assert run["skipped"] == odd_dev["problems"]["name"] and run["rc"] is None


@pytest.mark.parametrize("odd", [b"0", b"65536", b"1" + b"0" * 23, b"10^23", b"255"], ids=repr)
def test_standard_with_a_port_that_is_not_a_port_number(node, odd):
    node.rename_port(odd)
    report = node.check(*STANDARD)
    calls = node.calls()
    perfquery = sorted(call for call in calls if call.startswith("perfquery"))
    assert perfquery == sorted(f"perfquery -{mode} -C mlx5_1 -P 1" for mode in "xEXT"), calls
    odd_dev = device(report, "mlx5_0")
    assert odd_dev["ports"] == []
    assert odd_dev["problems"] == {f"ports/{odd.decode()}": "not a port number (1..254)"}
    [state] = results(report, "link.state", "mlx5_0")
    assert state["status"] == "fail"  # an HCA with no readable port cannot carry traffic
    assert results(report, "perfquery.errors", "mlx5_1:1")[0]["status"] == "pass"


@pytest.mark.parametrize("odd, shown", ODD_NETDEV_NAMES, ids=repr)
def test_standard_with_an_odd_netdev_name_runs_the_rest(node, odd, shown):
    node.rename_netdev("ib0", odd)
    report = node.check(*STANDARD)
    calls = node.calls()
    assert [c for c in calls if c.startswith("ethtool")] == ["ethtool -S ib1"], calls
    assert "perfquery -x -C mlx5_0 -P 1" in calls  # the device's name is fine
    netdev = device(report, "mlx5_0")["ports"][0]["netdev"]
    assert netdev["name"] == shown and netdev["operstate"] == "up"
    assert netdev["problems"]["name"].startswith(f"name '{shown}' is not safe on a command line")
    [stats] = results(report, "ethtool.errors", "mlx5_0:1")
    assert stats["status"] == "skip"
    assert stats["message"] == f"ethtool not run: {netdev['problems']['name']}"
    assert results(report, "ethtool.errors", "mlx5_1:1")[0]["status"] == "pass"


@pytest.mark.parametrize("content", ["../..", "../../../../etc", "enp0s0;reboot"])
def test_standard_with_a_roce_gid_ndev_that_is_a_path(tmp_path, run_cli, content):
    node = Node(tmp_path, run_cli, roce=True)
    Path(node.sysfs, "class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/0").write_text(content)
    report = node.check(*STANDARD)
    port = device(report, "mlx5_0")["ports"][0]
    if "/" in content:
        assert port["problems"] == {
            "gid_attrs/ndevs/0": f"not a network interface name: '{content}'"
        }
    assert port["netdev"]["name"] == "enp0s0"  # found under the PCI function instead
    ethtool = sorted(call for call in node.calls() if call.startswith("ethtool"))
    assert ethtool == ["ethtool -S enp0s0", "ethtool -S ib1"]


# -- level quick, and through a bundle --------------------------------------------------------


@pytest.mark.parametrize(
    "odd, shown",
    [("²".encode(), "²"), ("①".encode(), "①"), ("٣".encode(), "٣"), (b"\xff", "\\xff")],
)
def test_quick_with_a_port_directory_that_only_looks_numeric(node, odd, shown):
    node.rename_port(odd)
    report = node.check()
    assert device(report, "mlx5_0")["problems"] == {f"ports/{shown}": "not a port number (1..254)"}
    assert results(report, "link.state", "mlx5_1:1")[0]["status"] == "pass"
    assert node.calls() == []  # level quick runs nothing


def _without_durations(value):
    """``value`` (JSON) without its ``duration_s`` keys: two runs of a command differ there."""
    if isinstance(value, dict):
        return {k: _without_durations(v) for k, v in value.items() if k != "duration_s"}
    if isinstance(value, list):
        return [_without_durations(item) for item in value]
    return value


def test_a_name_that_is_not_utf8_survives_collect_and_report_json(node):
    """collect used to succeed and report --json on its bundle then fail to serialise."""
    counters = node.path("ports", "1", "counters")
    with open(os.path.join(counters, b"odd_\xfd"), "w") as handle:
        handle.write("5\n")
    node.rename_device(b"mlx5_\xff")
    node.rename_netdev("ib1", b"ib\xfe1", device="mlx5_1")
    live = node.check(*STANDARD)  # as the bundle: its typed command fields too
    out = node.tmp / "out"
    out.mkdir()
    result = node.run_cli(
        "collect", "--tarball", "-o", str(out), "--sysfs", node.sysfs, "--procfs", node.procfs,
        *STANDARD[2:], env={"PATH": node.stubs.path},
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    [bundle] = glob.glob(str(out / "*.tar.gz"))
    replayed = node.run_cli("report", "--json", bundle)
    assert replayed.exit_code in (0, 1, 2), replayed.stderr
    report = json.loads(replayed.stdout)
    odd = device(report, "mlx5_\\xff")
    # the same device, but for how long each of the two collects' runs took (RunOutcome)
    assert _without_durations(odd) == _without_durations(device(live, "mlx5_\\xff"))
    assert odd["ports"][0]["counters"]["odd_\\xfd"] == 5
    assert device(report, "mlx5_1")["ports"][0]["netdev"]["name"] == "ib\\xfe1"


# -- the plan ---------------------------------------------------------------------------------


def _port(number: int, netdev: str = "ib0") -> Port:
    return Port(
        number=number, path="p", state=4, link_layer="InfiniBand", netdev=NetDev(name=netdev)
    )


def test_the_plan_runs_only_safe_names_and_records_the_rest():
    devices = [
        Device(name="mlx5_0", path="a", ports=[_port(1), _port(0, "ib 9"), _port(255, "ib2")]),
        Device(name="mlx5 1", path="b", ports=[_port(1, "ib1")]),
    ]
    needs = {"perfquery", "ethtool"}
    snap = Snapshot(
        tool_version="t", collected_at=datetime.now(timezone.utc), sysfs_root="/sys",
        procfs_root="/proc", devices=devices,
    )  # fmt: skip
    every = families.plan(snap, needs)
    planned = [item for item in every if not item.refused]
    assert [str(item.role) for item in planned] == [
        "perfquery-x mlx5_0:1",
        "perfquery-E mlx5_0:1",
        "perfquery-X mlx5_0:1",
        "ethtool-S ib0",
        "ethtool-S ib1",
        "ethtool-S ib2",
    ]
    assert [item.argv for item in planned] == [
        ["perfquery", "-x", "-C", "mlx5_0", "-P", "1"],
        ["perfquery", "-E", "-C", "mlx5_0", "-P", "1"],
        ["perfquery", "-X", "-C", "mlx5_0", "-P", "1"],
        ["ethtool", "-S", "ib0"],
        ["ethtool", "-S", "ib1"],
        ["ethtool", "-S", "ib2"],
    ]
    refused = {" ".join(item.argv): families.refused_run(item) for item in every if item.refused}
    assert sorted(refused) == sorted(
        [f"perfquery -{m} -C mlx5_0 -P 0" for m in "xEX"]
        + [f"perfquery -{m} -C mlx5_0 -P 255" for m in "xEX"]
        + [f"perfquery -{m} -C mlx5 1 -P 1" for m in "xEX"]
        + ["ethtool -S ib 9"]
    )
    assert all(isinstance(run, CommandRun) and run.rc is None for run in refused.values())
    assert str(refused["perfquery -x -C mlx5 1 -P 1"].role) == "perfquery-x mlx5 1:1"
    assert str(refused["ethtool -S ib 9"].role) == "ethtool-S ib 9"
    assert refused["perfquery -x -C mlx5_0 -P 0"].skipped == (
        "port 0: not a port number (1..254): no command is run for it"
    )
    assert refused["perfquery -x -C mlx5 1 -P 1"].failure() == (
        "perfquery not run: name 'mlx5 1' is not safe on a command line (letters, digits and "
        "_.:- only, at most 64, not starting with -): no command is run for it"
    )
    assert not set(refused) & {" ".join(item.argv) for item in planned}


@pytest.mark.parametrize(
    "name, safe",
    [
        ("mlx5_0", True), ("mlx5_bond_0", True), ("hfi1_0", True), ("rocep12s0f0", True),
        ("irdma-0", True), ("mlx5_0:1", True), ("m" * 64, True), ("m" * 65, False),
        ("-mlx5_0", False), ("mlx5 0", False), ("mlx5\\x0d0", False), ("", False),
        ("mlx5_é", False), ("mlx5/0", False),
    ],
)  # fmt: skip
def test_device_names_safe_on_a_command_line(name, safe):
    from ibdiag.sources import names

    assert (names.device_name_problem(name) is None) is safe


def test_level_full_plans_no_loopback_on_a_name_it_may_not_run():
    """ib_write_bw -d takes the device name: an unsafe one gets no test (and no crash)."""
    from ibdiag.families.loopback import traffic
    from ibdiag.thresholds import Thresholds

    devices = [
        Device(name="mlx5;0", path="a", ports=[_port(1)]),
        Device(name="mlx5_1", path="b", ports=[_port(1), _port(255)]),
        Device(name="mlx5_2", path="c", ports=[_port(1)]),
    ]
    tests = traffic.plan_loopback(
        devices, Thresholds(), graded=lambda dev: True, gpu_near=lambda name: None,
        pin_for=lambda numa: [],
    )  # fmt: skip
    assert [(t.client_device, t.client_port) for t in tests] == [("mlx5_1", 1), ("mlx5_2", 1)]
    assert all(t.argv(Thresholds(), role) for t in tests for role in ("client", "server"))
