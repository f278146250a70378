"""phy.fec on the simulated fabric (tests/fabric_sim.py: ibsim + opensm, the real perfquery and
smpquery through PATH shims): ibsim implements no PortExtendedSpeedsCounters, so the real
``perfquery -T`` answers ``cannot query PortExtendedSpeedsCounters`` - on our port and on the
switch port by LID - and phy.fec skips both ends with that reason, never a failure, within the
deadline; the far end's other checks are untouched by it (counters.partner still reads)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from fabric_sim import Cable, Fabric, Hca, Switch, Topology
from sysfs_builder import mlx5_node, write_node

DEVICE, HOST = "mlx5_3", "node01-mlx5_3"
TOPOLOGY = Topology(
    [Switch("leaf07", 36, "MF0;leaf07:MQM9700/U1"), Hca(HOST, 1, f"node01 {DEVICE}")],
    [Cable(HOST, 1, "leaf07", 21)],
)


def test_the_simulator_cannot_query_T_and_both_ends_skip_saying_so(tmp_path):
    tree = tmp_path / "sys"
    write_node(str(tree), [h for h in mlx5_node(4, port=dict(rate="40 Gb/sec (4X QDR)"))
                           if h.name == DEVICE])  # fmt: skip
    with Fabric(tmp_path / "fabric", TOPOLOGY) as fabric:
        shims = fabric.shim_dir(tmp_path / "bin", {DEVICE: HOST}, tools=("smpquery", "perfquery"))
        env = dict(os.environ, PATH=f"{shims}{os.pathsep}{os.environ.get('PATH', '')}")
        argv = [sys.executable, "-m", "ibdiag", "check", "--level", "standard", "--json",
                "--sysfs", str(tree), "--deadline", "20"]  # fmt: skip
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    report = json.loads(done.stdout)
    fec = {r["target"]: r for r in report["results"] if r["check_id"] == "phy.fec"}
    assert set(fec) == {"mlx5_3:1", "mlx5_3:1<->leaf07/21"}, fec
    for result in fec.values():
        assert result["status"] == "skip", result
        assert "cannot query PortExtendedSpeedsCounters" in result["message"], result
    far_argv = fec["mlx5_3:1<->leaf07/21"]["evidence"][0].split()
    assert far_argv[0] == "perfquery" and far_argv[-3] == "-T" and far_argv[-1] == "21"
    assert fec["mlx5_3:1"]["evidence"] == ["perfquery -T -C mlx5_3 -P 1"]
    partner = [r for r in report["results"] if r["check_id"] == "counters.partner"]
    assert partner and all(r["status"] != "skip" for r in partner), partner


STUB = """#!/bin/sh
# The far end's perfquery -T LID PORT answered from a stub (ibsim implements no
# PortExtendedSpeedsCounters), for the LID and port it was asked; any other perfquery (our own
# port's -T too) goes to the simulated fabric's shim, unchanged.
flag=""; lid=""; port=""
for arg in "$@"; do flag=$lid; lid=$port; port=$arg; done
if [ "$flag" = "-T" ]; then
  sed -e "s/Lid 1719 port 21/Lid $lid port $port/" -e "s/^\\(PortSelect:\\.*\\)21$/\\1$port/" \\
      -e "s/^\\(PortFECUncorrectableBlockCtr:\\.*\\)0$/\\1@N@/" "@TEXT@"
  exit 0
fi
exec "@SHIM@" "$@"
"""


def test_the_far_ends_T_through_the_fabric_is_graded_and_names_the_cable(tmp_path):
    """The far-end chain through the simulated fabric (real smpquery/perfquery find the switch
    port's LID and port), with only ``perfquery -T`` answered by a stub of the hand-made RS-FEC
    reading carrying 4 uncorrectable blocks: phy.fec warns on the cable by both ends' names."""
    from fec_captures import path as capture_path

    tree = tmp_path / "sys"
    write_node(str(tree), [h for h in mlx5_node(4, port=dict(rate="40 Gb/sec (4X QDR)"))
                           if h.name == DEVICE])  # fmt: skip
    with Fabric(tmp_path / "fabric", TOPOLOGY) as fabric:
        shims = fabric.shim_dir(tmp_path / "bin", {DEVICE: HOST}, tools=("smpquery", "perfquery"))
        front = tmp_path / "front"
        front.mkdir()
        stub = front / "perfquery"
        text = capture_path("handmade-T-rs-fec-hdr-switch-port21.txt")
        shim = os.path.join(str(shims), "perfquery")
        stub.write_text(STUB.replace("@TEXT@", text).replace("@SHIM@", shim).replace("@N@", "4"))
        stub.chmod(0o755)
        path = os.pathsep.join((str(front), str(shims), os.environ.get("PATH", "")))
        argv = [sys.executable, "-m", "ibdiag", "check", "--level", "standard", "--json",
                "--sysfs", str(tree), "--deadline", "20"]  # fmt: skip
        done = subprocess.run(argv, env=dict(os.environ, PATH=path), capture_output=True,
                              text=True, timeout=120)  # fmt: skip
    report = json.loads(done.stdout)
    fec = {r["target"]: r for r in report["results"] if r["check_id"] == "phy.fec"}
    far = fec["mlx5_3:1<->leaf07/21"]
    assert far["status"] == "warn", far
    assert "4 uncorrectable FEC blocks since the last reset" in far["message"], far
    (device,) = report["snapshot"]["devices"]
    reading = device["ports"][0]["partner"]["fec"]
    assert (reading["layout"], reading["port"], reading["uncorrected_blocks"]) == ("rs-fec", 21, 4)
    mine = fec["mlx5_3:1"]  # our port's -T went to the simulator, which cannot answer it
    assert mine["status"] == "skip" and "cannot query" in mine["message"], mine
