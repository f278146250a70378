"""The support catalogue's SM items on the simulated fabric (tests/fabric_sim.py: ibsim + opensm,
the real ``saquery`` and ``sminfo``): ``ibdiag collect`` runs them per ACTIVE InfiniBand port
through the shims, as the node would, and the manifest rows say what each gave.

- ``saquery -s`` answers from the SA: a PortInfoRecord per SM port, the SM host's LID as its
  ``base_lid``, kept verbatim in the bundle and collected on every ACTIVE port;
- ``sminfo -C DEV -P PORT`` answers with the master SM: its LID, ``SMINFO_MASTER``.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fabric_sim import Cable, Fabric, Hca, Switch, Topology
from sysfs_builder import mlx5_node, write_node

pytestmark = pytest.mark.slow  # ibsim + opensm; also named in conftest.SLOW_MODULES

LEAF = "leaf01"
SM_HOST = "sm01"
DEVICES = {"mlx5_0": "node01-mlx5_0", "mlx5_1": "node01-mlx5_1"}
TOPOLOGY = Topology(
    [
        Switch(LEAF, 8, "MF0;leaf01:MQM9700/U1"),
        Hca(SM_HOST, 1, "sm01 mlx5_0"),
        *(Hca(host, 1, f"node01 {device}") for device, host in DEVICES.items()),
    ],
    [
        Cable(SM_HOST, 1, LEAF, 1),
        *(Cable(host, 1, LEAF, n) for n, host in enumerate(DEVICES.values(), start=2)),
    ],
)


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    root = tmp_path_factory.mktemp("support-fabric")
    with Fabric(root / "fabric", TOPOLOGY, sm_host=SM_HOST) as sim:
        yield sim


def test_collect_runs_the_sm_items_per_active_port_against_the_fabric(fabric, tmp_path):
    sysfs = tmp_path / "sys"
    hcas = mlx5_node(2, port=dict(rate="40 Gb/sec (4X QDR)"))
    write_node(str(sysfs), hcas)
    for device, host in DEVICES.items():
        fabric.mirror_port(host, sysfs / "class" / "infiniband" / device / "ports" / "1")
    shims = fabric.shim_dir(
        tmp_path / "bin", DEVICES, tools=("saquery", "sminfo", "smpquery", "perfquery")
    )
    env = dict(os.environ, PATH=f"{shims}{os.pathsep}{os.environ.get('PATH', '')}")
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "ibdiag", "collect", "--no-history", "--sysfs", str(sysfs),
         "--deadline", "20", "-o", str(out)],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert fabric.sm_running, "opensm died"
    (bundle,) = glob.glob(str(out / "ibdiag-*"))
    report = json.loads(Path(bundle, "report.json").read_text())
    rows = {(r["item"], r["target"]): r for r in report["snapshot"]["facts"]["support"]["rows"]}
    sm_lid = int(fabric.portinfo(SM_HOST, 1)["Lid"])
    commands = report["snapshot"]["commands"]
    for device in DEVICES:
        target = f"{device}:1"
        row = rows[("saquery_sm", target)]
        assert row["status"] == "collected", row
        assert row["source"] == f"saquery -s -C {device} -P 1"
        printed = commands[f"support-saquery_sm {target}"]["stdout"]
        assert "PortInfoRecord dump:" in printed, printed
        assert f"base_lid................{sm_lid}\n" in printed, printed
        assert rows[("sminfo", target)]["status"] == "collected", rows[("sminfo", target)]
        said = commands[f"support-sminfo {target}"]["stdout"]
        assert said.startswith(f"sminfo: sm lid {sm_lid} sm guid 0x"), said
        assert "SMINFO_MASTER" in said, said
    listed = json.loads(Path(bundle, "manifest.json").read_text())["items"]
    assert {(r["item"], r["target"]) for r in listed} >= set(rows)
