"""The simulated fabric (tests/fabric_sim.py) as a test part: the real infiniband-diags tools
(smpquery, perfquery, ibstat from Debian's infiniband-diags), run through the PATH shims the way
ibdiag will run them (``-C mlx5_N -P 1``), see the far end of each cable as the topology built
it, see counters and faults injected through ibsim's console, and nothing is left running.

One fabric serves the module (``fabric``): a leaf switch ``leaf07`` ("MF0;leaf07:MQM9700/U1")
with mlx5_0 on port 21 (4X QDR), mlx5_1 on port 22 (narrowed to 1X), mlx5_2 on port 23 (slowed
to SDR), and mlx5_3 cabled back to back to another node's HCA. Tests that inject a fault undo it
before they end (in ``finally``), so their order does not matter.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path
from typing import Dict, List

import pytest
from fabric_sim import (
    Cable,
    Fabric,
    FabricError,
    Hca,
    Switch,
    Topology,
    dispatch_shims,
    leftover_processes,
    parse_dotted,
)

LEAF = "leaf07"
LEAF_DESCRIPTION = "MF0;leaf07:MQM9700/U1"
DEVICES = {
    "mlx5_0": "node01-mlx5_0",
    "mlx5_1": "node01-mlx5_1",
    "mlx5_2": "node01-mlx5_2",
    "mlx5_3": "node01-mlx5_3",
}
PEER_HCA = "node02-mlx5_0"
TOPOLOGY = Topology(
    [
        Switch(LEAF, 36, LEAF_DESCRIPTION),
        *(Hca(node, 1, f"node01 {device}") for device, node in DEVICES.items()),
        Hca(PEER_HCA, 1, "node02 mlx5_0"),
    ],
    [
        Cable(DEVICES["mlx5_0"], 1, LEAF, 21),
        Cable(DEVICES["mlx5_1"], 1, LEAF, 22, width=1),
        Cable(DEVICES["mlx5_2"], 1, LEAF, 23, speed="SDR"),
        Cable(DEVICES["mlx5_3"], 1, PEER_HCA, 1),
    ],
)
MAD_TIMEOUT_MS = 200


class Shimmed:
    """The module's fabric plus a PATH whose first entry is its shim directory."""

    def __init__(self, fabric: Fabric, shims: Path) -> None:
        self.fabric = fabric
        self.shims = shims
        self.env = dict(os.environ, PATH=f"{shims}{os.pathsep}{os.environ.get('PATH', '')}")

    def tool(self, *argv: str, timeout: float = 30.0) -> subprocess.CompletedProcess:
        """Run ``argv`` (``smpquery -C mlx5_0 ...``) with the shims first on PATH."""
        return subprocess.run(
            list(argv), env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )

    def query(self, device: str, *args: str) -> Dict[str, str]:
        """``smpquery -C device -P 1 -t 200 ARGS`` through the shim; its fields, or fail."""
        result = self.tool("smpquery", "-C", device, "-P", "1", "-t", str(MAD_TIMEOUT_MS), *args)
        assert result.returncode == 0, (result.stdout, result.stderr)
        return parse_dotted(result.stdout)


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    root = tmp_path_factory.mktemp("fabric-sim")
    with Fabric(root / "fabric", TOPOLOGY) as fabric:
        yield Shimmed(fabric, fabric.shim_dir(root / "bin", DEVICES))


def small_topology(description: str = "MF0;leaf09:sim/U1") -> Topology:
    return Topology(
        [Switch("leaf09", 4, description), Hca("h1", 1, "h1 mlx5_0")],
        [Cable("h1", 1, "leaf09", 2)],
    )


# ---------------------------------------------------------------- who is at the far end


def test_nodeinfo_through_the_shim_is_the_leaf_switch_and_its_port(sim):
    info = sim.query("mlx5_0", "-D", "nodeinfo", "0,1")
    assert info["NodeType"] == "Switch"
    assert info["LocalPort"] == "21"
    assert sim.query("mlx5_1", "-D", "nodeinfo", "0,1")["LocalPort"] == "22"


def test_nodedesc_is_the_switch_description(sim):
    assert sim.query("mlx5_0", "-D", "nodedesc", "0,1") == {"Node Description": LEAF_DESCRIPTION}


@pytest.mark.parametrize(
    ("device", "port", "width", "speed"),
    [
        ("mlx5_0", "21", "4X", "10.0 Gbps"),
        ("mlx5_1", "22", "1X", "10.0 Gbps"),
        ("mlx5_2", "23", "4X", "2.5 Gbps"),
    ],
)
def test_partner_portinfo_shows_the_cable_width_and_speed(sim, device, port, width, speed):
    far = sim.query(device, "-D", "portinfo", "0,1", port)
    assert (far["LinkState"], far["PhysLinkState"]) == ("Active", "LinkUp")
    assert (far["LocalPort"], far["LinkWidthActive"], far["LinkSpeedActive"]) == (
        port,
        width,
        speed,
    )
    # What the port could do is more: that is how "could be 4X" is found.
    assert "4X" in far["LinkWidthSupported"] and "10.0 Gbps" in far["LinkSpeedSupported"]
    # The node's own end of the cable trained the same.
    near = sim.query(device, "-D", "portinfo", "0", "1")
    assert (near["LinkWidthActive"], near["LinkSpeedActive"]) == (width, speed)


def test_switch_port_0_carries_the_switch_lid(sim):
    lid = sim.query("mlx5_0", "-D", "portinfo", "0,1", "0")["Lid"]
    assert lid.isdigit() and int(lid) > 0
    assert sim.fabric.switch_lid(DEVICES["mlx5_2"]) == int(lid)


def test_back_to_back_partner_is_a_channel_adapter_with_its_own_subnet(sim):
    info = sim.query("mlx5_3", "-D", "nodeinfo", "0,1")
    assert (info["NodeType"], info["LocalPort"]) == ("Channel Adapter", "1")
    assert sim.query("mlx5_3", "-D", "nodedesc", "0,1") == {"Node Description": "node02 mlx5_0"}
    far = sim.query("mlx5_3", "-D", "portinfo", "0,1", "1")
    assert far["LinkState"] == "Active" and int(far["Lid"]) > 0  # its own opensm swept it
    result = sim.tool("perfquery", "-C", "mlx5_3", "-P", "1", far["Lid"], "1")
    assert result.returncode == 0 and "SymbolErrorCounter" in result.stdout, result


# ---------------------------------------------------------------- how its end is doing


def test_perfquery_on_the_switch_port_shows_a_counter_set_through_the_console(sim):
    lid = str(sim.fabric.switch_lid(DEVICES["mlx5_0"]))
    sim.fabric.set_counter(LEAF, 21, "SymbolErrorCounter", 1234)
    sim.fabric.set_counter(LEAF, 21, "LinkDownedCounter", 3)
    try:
        plain = sim.tool("perfquery", "-C", "mlx5_0", "-P", "1", lid, "21")
        assert plain.returncode == 0, plain
        counters = parse_dotted(plain.stdout)
        assert counters["SymbolErrorCounter"] == "1234"
        assert counters["LinkDownedCounter"] == "3"
        assert counters["PortSelect"] == "21"
        other = parse_dotted(sim.tool("perfquery", "-C", "mlx5_1", "-P", "1", lid, "22").stdout)
        assert other["SymbolErrorCounter"] == "0"  # the port next to it is untouched
        for flag in ("-x", "-E"):
            result = sim.tool("perfquery", flag, "-C", "mlx5_0", "-P", "1", lid, "21")
            assert result.returncode == 0 and "PortSelect:" in result.stdout, result
    finally:
        sim.fabric.set_counter(LEAF, 21, "SymbolErrorCounter", 0)
        sim.fabric.set_counter(LEAF, 21, "LinkDownedCounter", 0)


def test_set_counter_refuses_what_ibsim_does_not_confirm(sim):
    with pytest.raises(FabricError, match="NoSuchCounter"):
        sim.fabric.set_counter(LEAF, 21, "NoSuchCounter", 1)


# ---------------------------------------------------------------- faults


def test_error_on_the_switch_port_makes_mads_fail_within_the_mad_timeout(sim):
    sim.fabric.set_error_rate(LEAF, 21, 100)
    try:
        started = time.monotonic()
        argv = ["smpquery", "-C", "mlx5_0", "-P", "1", "-t", str(MAD_TIMEOUT_MS)]
        result = sim.tool(*argv, "-D", "nodeinfo", "0,1")
        elapsed = time.monotonic() - started
        assert result.returncode != 0
        assert "_do_madrpc failed" in result.stderr, result.stderr
        assert "iberror: failed" in result.stdout, result.stdout  # infiniband-diags' IBEXIT
        assert elapsed < 4 * MAD_TIMEOUT_MS / 1000 + 2  # its tries, plus a process start
        # Only that cable is affected.
        assert sim.query("mlx5_1", "-D", "nodeinfo", "0,1")["LocalPort"] == "22"
    finally:
        sim.fabric.set_error_rate(LEAF, 21, 0)
    assert sim.query("mlx5_0", "-D", "nodeinfo", "0,1")["LocalPort"] == "21"


def test_unlinked_cable_goes_down_and_comes_back_when_relinked(sim):
    node = DEVICES["mlx5_1"]
    sim.fabric.unlink(node, 1)
    try:
        assert sim.query("mlx5_1", "-D", "portinfo", "0", "1")["LinkState"] == "Down"
        gone = sim.tool("smpquery", "-C", "mlx5_1", "-P", "1", "-t", "200", "nodeinfo", "-D", "0,1")
        assert gone.returncode != 0
    finally:
        sim.fabric.relink(node, 1)
    up = sim.fabric.wait_port_state(node, 1, "Active", timeout=15)
    assert up["LinkWidthActive"] == "1X"  # the narrowed cable comes back narrowed
    assert sim.query("mlx5_1", "-D", "nodeinfo", "0,1")["LocalPort"] == "22"


# ---------------------------------------------------------------- the shims


def test_shim_rewrites_every_spelling_of_the_device(sim):
    for argv in (
        ["-C", "mlx5_2", "-P", "1"],
        ["-Cmlx5_2", "-P", "1"],
        ["--Ca", "mlx5_2", "--Port", "1"],
        ["--Ca=mlx5_2", "-P1"],
    ):
        result = sim.tool("smpquery", *argv, "-D", "nodeinfo", "0,1")
        assert result.returncode == 0, (argv, result)
        assert parse_dotted(result.stdout)["LocalPort"] == "23", argv


def test_shim_passes_an_unknown_device_to_the_tool_unchanged(sim):
    result = sim.tool("smpquery", "-C", "mlx5_9", "-P", "1", "-D", "nodeinfo", "0,1")
    assert result.returncode != 0
    assert "can't open UMAD port (mlx5_9:1)" in result.stderr, result.stderr


def test_ibstat_names_its_device_as_an_argument(sim):
    lid = sim.query("mlx5_2", "-D", "portinfo", "0", "1")["Lid"]
    result = sim.tool("ibstat", "mlx5_2", "1")
    assert result.returncode == 0, result
    assert "State: Active" in result.stdout
    assert re.search(rf"Base lid: {lid}\b", result.stdout), result.stdout


def test_shim_keeps_argv_exit_status_and_streams(sim, tmp_path, monkeypatch):
    """A stand-in tool that reports how it was called: every argument arrives byte for byte
    (spaces, empty strings, glob characters), only the device is rewritten, SIM_HOST names
    the device's node, and its exit status, stdout and stderr are the caller's."""
    real = tmp_path / "real"
    real.mkdir()
    (real / "smpquery").write_text(
        "#!/bin/sh\n"
        'printf "host=%s cwd=%s preload=%s\\n" "$SIM_HOST" "$(pwd)" "${LD_PRELOAD##*/}"\n'
        'for a in "$@"; do printf "[%s]\\n" "$a"; done\n'
        "echo to-stderr >&2\n"
        "exit 7\n"
    )
    (real / "smpquery").chmod(0o755)
    monkeypatch.setenv("PATH", f"{real}{os.pathsep}{os.environ['PATH']}")
    shims = sim.fabric.shim_dir(tmp_path / "bin", DEVICES, tools=["smpquery"])
    args = ["-C", "mlx5_3", "-P", "1", "a b", "", "*", "-C"]
    result = subprocess.run(
        [str(shims / "smpquery"), *args], capture_output=True, text=True, check=False
    )
    assert result.returncode == 7
    assert result.stderr == "to-stderr\n"
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"host={DEVICES['mlx5_3']} cwd={sim.fabric.directory} preload=libumad2sim.so"
    )
    assert lines[1:] == ["[-C]", "[ibsim0]", "[-P]", "[1]", "[a b]", "[]", "[*]", "[-C]"]


def test_shim_refuses_a_device_mapped_to_a_switch(sim, tmp_path):
    with pytest.raises(ValueError, match="not an HCA"):
        sim.fabric.shim_dir(tmp_path / "bin", {"mlx5_0": LEAF})


# ---------------------------------------------------------------- several fabrics, one node


def stand_in(directory: Path, name: str, status: int) -> Path:
    """A shim directory whose smpquery and ibstat report which directory ran and with what."""
    directory.mkdir(parents=True)
    for tool in ("smpquery", "ibstat"):
        (directory / tool).write_text(
            "#!/bin/sh\n"
            f'echo "{name} $0"\n'
            'for a in "$@"; do printf "[%s]\\n" "$a"; done\n'
            f"echo {name}-stderr >&2\n"
            f"exit {status}\n"
        )
        (directory / tool).chmod(0o755)
    return directory


def test_dispatch_runs_the_shim_of_the_named_devices_fabric(tmp_path):
    one = stand_in(tmp_path / "one", "one", 3)
    two = stand_in(tmp_path / "two", "two", 4)
    bin_dir = dispatch_shims(
        tmp_path / "bin", {"mlx5_0": one, "mlx5_1": two}, tools=("smpquery", "ibstat")
    )

    def run(tool: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(bin_dir / tool), *args], capture_output=True, text=True, check=False
        )

    for args in (
        ["-C", "mlx5_1", "-P", "1"],
        ["-Cmlx5_1"],
        ["--Ca", "mlx5_1"],
        ["--Ca=mlx5_1", "-P1"],
        ["-C", "mlx5_0", "-C", "mlx5_1"],  # the last one named, as the tools read it
    ):
        done = run("smpquery", *args, "a b", "", "*")
        assert done.returncode == 4, args
        assert done.stderr == "two-stderr\n"
        lines = done.stdout.splitlines()
        assert lines[0] == f"two {two / 'smpquery'}", args
        assert lines[1:] == [f"[{a}]" for a in [*args, "a b", "", "*"]]
    assert run("ibstat", "mlx5_1", "1").stdout.startswith("two ")
    # no device, or one on no fabric: the default (first) directory, argv unchanged
    assert run("smpquery", "-D", "nodeinfo", "0,1").returncode == 3
    unknown = run("smpquery", "-C", "mlx5_9", "-P", "1")
    assert unknown.returncode == 3 and "[mlx5_9]" in unknown.stdout
    with pytest.raises(ValueError, match="no executable perfquery"):
        dispatch_shims(tmp_path / "bin2", {"mlx5_0": one}, tools=("perfquery",))


def test_dispatch_reaches_each_devices_own_fabric(sim, tmp_path):
    with Fabric(tmp_path / "second", small_topology("MF0;leaf09:second/U1")) as second:
        shims = {device: sim.shims for device in DEVICES}
        shims["mlx5_9"] = second.shim_dir(tmp_path / "second-bin", {"mlx5_9": "h1"})
        node = Shimmed(sim.fabric, dispatch_shims(tmp_path / "bin", shims))
        assert node.query("mlx5_9", "-D", "nodedesc", "0,1") == {
            "Node Description": "MF0;leaf09:second/U1"
        }
        assert node.query("mlx5_0", "-D", "nodedesc", "0,1") == {
            "Node Description": LEAF_DESCRIPTION
        }
        assert node.query("mlx5_9", "-D", "nodeinfo", "0,1")["LocalPort"] == "2"


# ---------------------------------------------------------------- lifecycle


def test_two_fabrics_run_side_by_side(sim, tmp_path):
    with Fabric(tmp_path / "second", small_topology("MF0;leaf09:second/U1")) as second:
        result = second.run("h1", "smpquery", "-t", "200", "-D", "nodedesc", "0,1")
        assert parse_dotted(result.stdout) == {"Node Description": "MF0;leaf09:second/U1"}
        # The module's fabric still answers as itself.
        assert sim.query("mlx5_0", "-D", "nodedesc", "0,1") == {
            "Node Description": LEAF_DESCRIPTION
        }
        assert second.socket_name != sim.fabric.socket_name


def alive(pids: List[int]) -> List[int]:
    living = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X"):
            living.append(pid)
    return living


def test_stop_leaves_no_process_even_when_the_test_body_fails(tmp_path):
    fabric = Fabric(tmp_path / "fabric", small_topology())
    with pytest.raises(RuntimeError, match="test body failed"):
        with fabric:
            pids = fabric.pids
            assert len(pids) == 2 and alive(pids) == pids  # ibsim and one opensm
            names = {Path(f"/proc/{pid}/exe").resolve().name for pid in pids}
            assert names == {"ibsim", "opensm"}
            # A client a test left behind, marked with the fabric's socket name.
            straggler = subprocess.Popen(["sleep", "60"], env=fabric.env, cwd=fabric.directory)
            raise RuntimeError("test body failed")
    straggler.wait(timeout=5)
    assert alive([*pids, straggler.pid]) == []
    assert leftover_processes(fabric.socket_name, fabric.directory) == []
    fabric.stop()  # twice is fine


def test_a_subnet_the_sm_cannot_reach_fails_start_and_stops_ibsim(tmp_path):
    topology = Topology(
        [Switch("leaf09", 4), Hca("dual", 2)],
        [Cable("dual", 2, "leaf09", 1)],  # clients attach at port 1 only
    )
    fabric = Fabric(tmp_path / "fabric", topology)
    with pytest.raises(FabricError, match="no HCA cabled at port 1"):
        fabric.start()
    assert fabric.pids == []
    assert leftover_processes(fabric.socket_name, fabric.directory) == []


def test_startup_wait_is_bounded_with_a_clear_message(tmp_path, monkeypatch):
    fabric = Fabric(tmp_path / "fabric", small_topology(), startup_timeout=0.5)
    monkeypatch.setattr(Fabric, "portinfo", lambda self, *a, **k: {"LinkState": "Initialize"})
    started = time.monotonic()
    with pytest.raises(FabricError, match=r"h1\[1\] \(LinkState Initialize") as raised:
        fabric.start()
    assert time.monotonic() - started < 10
    assert "timed out" in str(raised.value) and "ibsim.console" in str(raised.value)
    assert leftover_processes(fabric.socket_name, fabric.directory) == []


# ---------------------------------------------------------------- the topology file


def test_netfile_writes_width_and_speed_on_both_ends_of_a_cable():
    text = TOPOLOGY.netfile()
    assert f'Switch\t36 "{LEAF}"\t# "{LEAF_DESCRIPTION}" enhanced port 0' in text
    assert '[22]\t"node01-mlx5_1"[1]\t# "node01 mlx5_1" lid 0 1xQDR' in text
    assert f'[1]\t"{LEAF}"[22]\t# lid 0 lmc 0 "{LEAF_DESCRIPTION}" lid 0 1xQDR' in text
    assert '[23]\t"node01-mlx5_2"[1]\t# "node01 mlx5_2" lid 0 4xSDR' in text


def test_subnets_split_at_hcas():
    subnets = TOPOLOGY.subnets()
    assert len(subnets) == 2
    assert (DEVICES["mlx5_3"], 1) in subnets[1] and (PEER_HCA, 1) in subnets[1]
    assert (LEAF, 21) in subnets[0]


@pytest.mark.parametrize(
    ("nodes", "cables", "message"),
    [
        ([Switch("s", 4), Hca("h")], [Cable("h", 1, "s", 5)], "ports 1..4"),
        (
            [Switch("s", 4), Hca("h"), Hca("g")],
            [Cable("h", 1, "s", 1), Cable("g", 1, "s", 1)],
            "two cables",
        ),
        ([Switch("s", 4), Hca("h")], [Cable("h", 1, "s", 1, width=3)], "width"),
        ([Switch("s", 4), Hca("h")], [Cable("h", 1, "s", 1, speed="HDR")], "speed"),
        ([Switch("s", 4, 'say "hi"')], [], "description"),
        ([Switch("a b", 4)], [], "node name"),
        ([Hca("h"), Hca("h")], [], "duplicate"),
    ],
)
def test_topology_refuses_what_ibsim_would_misread(nodes, cables, message):
    with pytest.raises(ValueError, match=message):
        Topology(nodes, cables)
