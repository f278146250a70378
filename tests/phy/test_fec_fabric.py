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
