"""The silent misconfigurations on the simulated fabric (tests/fabric_sim.py: ibsim + opensm, the
real smpquery/perfquery), each caught from the node:

- **a partitions file that leaves a port out**: opensm's ``partition_config_file`` gives the
  ``hpc`` partition (P_Key 0x8001) to the SM's port and mlx5_1's, not mlx5_3's; the ports' P_Key
  tables (``smpquery pkeys``), mirrored into the node's sysfs as the kernel shows them
  (``ports/1/pkeys/N``), fail ``partition.pkeys`` on mlx5_3:1 with ``expect_pkeys = ["0x8001"]``;
- **an MTU below the expected one**: ibsim's PortInfo says NeighborMTU 2048 and MtuCap 2048 on
  every port whatever opensm sets (ibsim keeps NeighborMTU from its own template and stores
  nothing of it from the SM's Set; a partition's ``mtu=`` is only its multicast groups' MTU),
  so the simulated switch port is a port capped at 2048: ``link.mtu`` fails at the default
  4096, naming the switch port;
- **the subnet manager stopped**: the ports keep what it set (Active, LID, SMLid) until the link
  bounces; then the port stops at INIT, its LID and SMLid kept (or 0 and 0 after a port reset,
  ibsim's ``Clear``, as a reboot), mirrored into sysfs: ``link.state`` fails, ``sm.address``
  says which (the SM lost, or none ever) as a skip - one fault, one failure; the SM started on
  another HCA (a failover) moves every SM LID: ``sm.address`` warns against the baseline.
  (``sminfo`` is no way to tell: under the simulator it fails at once either way.)

The checks read sysfs at level quick and the far end at level standard; everything else a
report holds meets a machine without InfiniBand hardware and is not asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import pytest
from fabric_sim import (
    SIM_CA,
    Cable,
    Fabric,
    Hca,
    Switch,
    Topology,
    parse_dotted,
    sim_mtu_config,
)
from sysfs_builder import mlx5_node, write_node

pytestmark = pytest.mark.slow  # ibsim + opensm per fabric; also named in conftest.SLOW_MODULES

LEAF = "leaf07"
SM_HOST = "sm01"
SM_STANDBY = "sm02"  # an HCA a failed-over SM runs on (the SM-lost fabric only)
DEVICES = {"mlx5_1": "node01-mlx5_1", "mlx5_3": "node01-mlx5_3"}
SWITCH_PORT = {"mlx5_1": 20, "mlx5_3": 21}
TOPOLOGY = Topology(
    [
        Switch(LEAF, 36, "MF0;leaf07:MQM9700/U1"),
        Hca(SM_HOST, 1, "sm01 mlx5_0"),
        *(Hca(host, 1, f"node01 {device}") for device, host in DEVICES.items()),
    ],
    [
        Cable(SM_HOST, 1, LEAF, 1),
        *(Cable(host, 1, LEAF, SWITCH_PORT[device]) for device, host in DEVICES.items()),
    ],
)
HPC_PKEY = 0x8001
DEADLINE_S = 20.0


def node_tree(root: Path, devices: List[str]) -> Path:
    """A sysfs tree holding ``devices`` (mlx5_1, mlx5_3), each port ACTIVE at 4X QDR."""
    tree = root / f"sys-{'-'.join(devices)}"
    hcas = mlx5_node(4, port=dict(rate="40 Gb/sec (4X QDR)"))
    write_node(str(tree), [hca for hca in hcas if hca.name in devices])
    return tree


def port_dir(tree: Path, device: str) -> Path:
    return tree / "class" / "infiniband" / device / "ports" / "1"


def ibdiag_check(
    tree: Path,
    level: str,
    config: Optional[Path] = None,
    env: Optional[Dict[str, str]] = None,
    extra: Sequence[str] = (),
) -> dict:
    argv = [sys.executable, "-m", "ibdiag", "check", "--level", level, "--json", "--no-history",
            "--sysfs", str(tree), "--deadline", str(DEADLINE_S), *extra]  # fmt: skip
    if config is not None:
        argv += ["--config", str(config)]
    done = subprocess.run(
        argv, env=env or dict(os.environ), capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout, done.stderr
    return json.loads(done.stdout)


def results(report: dict, check_id: str) -> Dict[str, dict]:
    found: Dict[str, dict] = {}
    for result in report["results"]:
        if result["check_id"] == check_id:
            assert result["target"] not in found, (result, found)
            found[result["target"]] = result
    return found


def hpc_partitions(sim: Fabric) -> str:
    """opensm's partitions file: everyone in the default partition; ``hpc`` (0x8001, IPoIB,
    ``mtu=5``: 4096) for the SM's port and mlx5_1's only (port GUIDs as the fabric says them,
    asked before opensm starts)."""
    members = [sim.port_guid(SM_HOST), sim.port_guid(DEVICES["mlx5_1"])]
    return (
        "Default=0x7fff,ipoib : ALL=full;\n"
        f"hpc=0x{HPC_PKEY:04x},ipoib,mtu=5 : {', '.join(g + '=full' for g in members)};\n"
    )


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    """The fabric with the ``hpc`` partition given to the SM's port and mlx5_1's only."""
    root = tmp_path_factory.mktemp("misconfig-fabric")
    with Fabric(root / "fabric", TOPOLOGY, partitions=hpc_partitions, sm_host=SM_HOST) as sim:
        yield sim


# --- the partitions file ----------------------------------------------------------------------


def test_the_partitions_file_gives_0x8001_to_its_members_only(fabric):
    assert fabric.sm_running
    member = fabric.pkeys(DEVICES["mlx5_1"])
    left_out = fabric.pkeys(DEVICES["mlx5_3"])
    assert len(member) == len(left_out) == 64  # ibsim's PartCap: the whole table is shown
    assert [k for k in member if k] == [0xFFFF, HPC_PKEY]  # full members: the 0x8000 bit set
    assert [k for k in left_out if k] == [0xFFFF]
    # the switch port facing mlx5_1 enforces the partition too (opensm's part_enforce both)
    switch_side = fabric.run(
        DEVICES["mlx5_1"], "smpquery", "-C", SIM_CA, "-P", "1", "-D", "pkeys", "0,1",
        str(SWITCH_PORT["mlx5_1"]),
    )  # fmt: skip
    assert "0x8001" in switch_side.stdout, switch_side


def test_mirror_port_writes_the_port_as_the_kernel_shows_it(fabric, tmp_path):
    tree = node_tree(tmp_path, ["mlx5_1"])
    written = fabric.mirror_port(DEVICES["mlx5_1"], port_dir(tree, "mlx5_1"))
    info = fabric.portinfo(DEVICES["mlx5_1"], 1)
    folder = port_dir(tree, "mlx5_1")
    assert (folder / "lid").read_text() == f"0x{int(info['Lid']):x}\n" != "0x0\n"
    assert (folder / "sm_lid").read_text() == f"0x{int(info['SMLid']):x}\n"
    assert (folder / "state").read_text() == "4: ACTIVE\n"
    assert (folder / "phys_state").read_text() == "5: LinkUp\n"
    pkeys = sorted((folder / "pkeys").iterdir(), key=lambda p: int(p.name))
    assert [p.name for p in pkeys] == [str(n) for n in range(64)]
    assert [p.read_text() for p in pkeys[:3]] == ["0xffff\n", "0x8001\n", "0x0000\n"]
    assert written["pkeys/1"] == "0x8001" and written["state"] == "4: ACTIVE"
    # the tree still reads as a node: the port's SM is the SM host's LID
    sm_lid = fabric.portinfo(SM_HOST, 1)["Lid"]
    assert written["sm_lid"] == f"0x{int(sm_lid):x}"


def test_partition_pkeys_fails_on_the_port_left_out(fabric, tmp_path):
    tree = node_tree(tmp_path, list(DEVICES))
    for device, host in DEVICES.items():
        fabric.mirror_port(host, port_dir(tree, device))
    config = tmp_path / "ibdiag.toml"
    config.write_text(f'expect_pkeys = ["0x{HPC_PKEY:04x}"]\n')
    found = results(ibdiag_check(tree, "quick", config), "partition.pkeys")
    assert found["mlx5_3:1"]["status"] == "fail", found
    assert "0x8001" in found["mlx5_3:1"]["message"], found
    assert found["mlx5_1:1"]["status"] == "pass", found


# --- the MTU ----------------------------------------------------------------------------------


def test_the_simulator_holds_every_link_at_2048_whatever_the_partition_says(fabric):
    """``mtu=5`` (4096) on the hpc partition changes no port: NeighborMTU is ibsim's (2048)."""
    host = DEVICES["mlx5_3"]
    ours = fabric.portinfo(host, 1)
    switch = fabric.portinfo(host, 1, path="0,1", port_number=SWITCH_PORT["mlx5_3"])
    for info in (ours, switch):
        assert (info["NeighborMTU"], info["MtuCap"]) == ("2048", "2048"), info
    port0 = fabric.portinfo(host, 1, path="0,1", port_number=0)  # the switch's management port
    assert (port0["NeighborMTU"], port0["MtuCap"]) == ("256", "1024"), port0

    # opensm made the partition's IPoIB broadcast group at 4096 (Mtu 0x85: "exactly 4096"),
    # above every port's MtuCap: the partition's mtu is the groups', never a port's. The SA
    # shows a group only to its partition's members: mlx5_3, left out, does not see it.
    def hpc_group(asking: str) -> str:
        groups = fabric.run(asking, "saquery", "-C", SIM_CA, "-P", "1", "-g").stdout
        return next((g for g in groups.split("MCMemberRecord") if "0x8001" in g), "")

    group = fabric.wait_for(lambda: hpc_group(DEVICES["mlx5_1"]), 10, "the hpc group")
    assert "Mtu.....................0x85" in group, group
    assert hpc_group(host) == ""


def test_link_mtu_fails_naming_the_switch_port_capped_below_4096(fabric, tmp_path):
    tree = node_tree(tmp_path, ["mlx5_3"])
    shims = fabric.shim_dir(tmp_path / "bin", DEVICES, tools=("smpquery", "perfquery"))
    env = dict(os.environ, PATH=f"{shims}{os.pathsep}{os.environ.get('PATH', '')}")
    report = ibdiag_check(tree, "standard", env=env)
    assert fabric.sm_running, "opensm died"
    cable = f"mlx5_3:1<->{LEAF}/{SWITCH_PORT['mlx5_3']}"
    found = results(report, "link.mtu")
    assert set(found) == {cable}, found
    result = found[cable]
    assert result["status"] == "fail", result
    # no verbs device under the simulator (ibv_devinfo finds none): the link's MTU is the one
    # the switch port shows
    assert result["message"] == (
        f"{cable}: link MTU (the switch port's NeighborMTU) 2048 < 4096; "
        "switch port MtuCap 2048 < 4096"
    )
    assert (result["observed"], result["expected"]) == (2048, 4096)
    assert any(f"portinfo 0,1 {SWITCH_PORT['mlx5_3']}" in e for e in result["evidence"]), result


def test_link_mtu_passes_where_2048_is_the_expected_mtu(fabric, tmp_path):
    config = sim_mtu_config(tmp_path / "ibdiag.toml")
    tree = node_tree(tmp_path, ["mlx5_3"])
    shims = fabric.shim_dir(tmp_path / "bin", DEVICES, tools=("smpquery", "perfquery"))
    env = dict(os.environ, PATH=f"{shims}{os.pathsep}{os.environ.get('PATH', '')}")
    found = results(ibdiag_check(tree, "standard", config, env=env), "link.mtu")
    assert [r["status"] for r in found.values()] == ["pass"], found


# --- the subnet manager lost --------------------------------------------------------------------


def _state(fabric: Fabric, host: str) -> Dict[str, str]:
    info = fabric.portinfo(host, 1)
    return {key: info.get(key, "?") for key in ("Lid", "SMLid", "LinkState", "PhysLinkState")}


def test_a_lost_subnet_manager_fails_link_state_and_its_failover_warns_sm_address(tmp_path):
    """opensm stopped: nothing changes on the ports until the link bounces; then the port stops
    at INIT (link.state fails, naming the SM; sm.address says what the addressing shows: the
    SM lost, or no SM ever, as a skip - one fault, one failure). An SM started elsewhere (a
    failover: every port's SM LID moves) warns sm.address against the baseline."""
    host = DEVICES["mlx5_3"]
    topology = Topology(
        [*TOPOLOGY.nodes, Hca(SM_STANDBY, 1, "sm02 mlx5_0")],
        [*TOPOLOGY.cables, Cable(SM_STANDBY, 1, LEAF, 2)],
    )
    tree = node_tree(tmp_path, ["mlx5_3"])
    folder = port_dir(tree, "mlx5_3")
    with Fabric(tmp_path / "fabric", topology, sm_host=SM_HOST) as fabric:
        sm_lid = fabric.portinfo(SM_HOST, 1)["Lid"]
        up = _state(fabric, host)
        assert up["LinkState"] == "Active" and up["Lid"] != "0" and up["SMLid"] == sm_lid
        fabric.mirror_port(host, folder)
        baseline = tmp_path / "baseline.json"
        snapshot = subprocess.run(
            [sys.executable, "-m", "ibdiag", "snapshot", "--sysfs", str(tree), "-o", str(baseline)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert snapshot.returncode == 0, snapshot.stderr
        healthy = ibdiag_check(tree, "quick")

        fabric.stop_sm()
        assert not fabric.sm_running
        # nothing on the port says the SM is gone...
        assert _state(fabric, host) == up
        # ... until the cable bounces: ibsim keeps the LID and SMLid, the link stops at Init
        fabric.unlink(host, 1)
        assert _state(fabric, host)["LinkState"] == "Down"
        fabric.relink(host, 1)
        bounced = fabric.wait_port_state(host, 1, "Initialize")
        assert (bounced["Lid"], bounced["SMLid"]) == (up["Lid"], sm_lid)
        assert fabric.mirror_port(host, folder)["state"] == "2: INIT"
        lost = ibdiag_check(tree, "quick")

        # a port reset (a rebooted node) and plugged back: no SM gives it a LID
        fabric.clear(host, 1)
        fabric.relink(host, 1)
        fabric.wait_port_state(host, 1, "Initialize")
        assert _state(fabric, host) == {
            "Lid": "0", "SMLid": "0", "LinkState": "Initialize", "PhysLinkState": "LinkUp"
        }  # fmt: skip
        # sminfo is no witness under the simulator: it fails at once
        sminfo = fabric.run(host, "sminfo", "-C", SIM_CA, "-P", "1", "-t", "200", timeout=30)
        assert sminfo.returncode != 0 and "failed" in sminfo.stderr, sminfo
        written = fabric.mirror_port(host, folder)
        assert (written["lid"], written["sm_lid"], written["state"]) == ("0x0", "0x0", "2: INIT")
        never = ibdiag_check(tree, "quick")

        # the standby takes over: Active again, its LID the port's SM LID
        fabric.start_sm(host=SM_STANDBY)
        standby_lid = fabric.portinfo(SM_STANDBY, 1)["Lid"]
        back = _state(fabric, host)
        assert back["LinkState"] == "Active" and back["Lid"] == up["Lid"], back
        assert back["SMLid"] == standby_lid != sm_lid, (back, standby_lid)
        fabric.mirror_port(host, folder)
        failover = ibdiag_check(tree, "quick", extra=["--baseline", str(baseline)])

    for report in (healthy, failover):
        assert results(report, "link.state")["mlx5_3:1"]["status"] == "pass"
    assert results(healthy, "sm.address")["mlx5_3:1"]["status"] == "pass"
    for report, why in (
        (lost, f"the SM at LID 0x{int(sm_lid):x} has not activated it (SM lost?)"),
        (never, "no subnet manager has configured the port"),
    ):
        state = results(report, "link.state")["mlx5_3:1"]
        assert state["status"] == "fail", state
        address = results(report, "sm.address")["mlx5_3:1"]
        assert address["status"] == "skip" and why in address["message"], address
    moved = results(failover, "sm.address")["mlx5_3:1"]
    assert moved["status"] == "warn", moved
    assert f"from LID 0x{int(sm_lid):x} to 0x{int(standby_lid):x}" in moved["message"], moved


def test_parse_dotted_reads_what_mirror_port_needs(fabric):
    """The fields mirror_port takes from PortInfo are printed by the simulator's smpquery."""
    text = fabric.run(DEVICES["mlx5_1"], "smpquery", "-C", SIM_CA, "-P", "1", "-D", "portinfo", "0")
    fields = parse_dotted(text.stdout)
    assert {"Lid", "SMLid", "LinkState", "PhysLinkState"} <= set(fields), fields
