"""A support bundle with the catalogue's commands (issue 26), end to end on a stub node: what the
tools printed becomes the System section's facts, a replay of the bundle rebuilds them equal,
and ``ibdiag check`` at the same level runs none of the catalogue's commands."""

from __future__ import annotations

import glob
import json
import os

import pytest
import stubs as S
from standard_node import DEVLINK_HEALTHY, FW_SYNDROME_BDF, HEALTHY_BDF, Node

CAPTURES = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "captures", "support"
)  # each folder's SOURCES.md says where each capture is from
OFED_INFO = os.path.join(CAPTURES, "ofed_info", "daocloud-23.07-colon.txt")
MODINFO = os.path.join(CAPTURES, "modinfo", "skyao-debian12-ofed-24.10-mlx5_core.txt")
MSTFLINT_Q = os.path.join(CAPTURES, "mstflint", "ironic-running-differs.txt")
DEV_INFO = json.dumps(
    {
        "info": {
            f"pci/{HEALTHY_BDF}": {
                "driver": "mlx5_core",
                "versions": {
                    "fixed": {"fw.psid": "MT_0000000894"},
                    "running": {"fw.version": "28.41.1000"},
                    "stored": {"fw.version": "28.41.1000"},
                },
            }
        }
    }
)


@pytest.fixture
def node(tmp_path, run_cli, monkeypatch):
    made = Node(tmp_path, run_cli, bdfs=(FW_SYNDROME_BDF, HEALTHY_BDF))
    monkeypatch.setenv("PATH", made.stubs.path)
    monkeypatch.delenv("IBDIAG_DEBUG", raising=False)
    made.healthy_tools()
    made.stubs.add("ofed_info", S.prints(OFED_INFO))
    made.stubs.add("modinfo", S.prints(MODINFO))
    made.stubs.add(
        "mstflint",
        S.by_args({f"-d {FW_SYNDROME_BDF} q": S.prints(MSTFLINT_Q)}, S.fails("-E- no", 1)),
    )
    made.stubs.add(
        "devlink",
        S.by_args(
            {"-j health show": S.prints(DEVLINK_HEALTHY), "-j dev info": S.prints_text(DEV_INFO)},
            S.fails("devlink: unknown", 1),
        ),
    )
    return made


def _collect(node, tmp_path, *args):
    out = tmp_path / "out"
    result = node.run_cli(
        "collect", "--sysfs", node.sysfs, "--procfs", node.procfs, "-o", str(out), *args
    )
    assert result.exit_code == 0, result.stdout + result.stderr
    return glob.glob(str(out / "ibdiag-*"))[0]


def test_the_catalogues_outputs_become_the_system_facts_and_replay_equal(node, tmp_path, run_cli):
    bundle = _collect(node, tmp_path)
    with open(os.path.join(bundle, "report.json")) as handle:
        live = json.load(handle)["snapshot"]
    support = live["facts"]["support"]
    assert support["ofed"] == "MLNX_OFED_LINUX-23.07-0.5.1.2"
    assert [(m["name"], m["version"], m["inbox"]) for m in support["modules"]] == [
        ("mlx5_core", "24.10-2.1.8", False)
    ]
    firmware = {fw["hca"]: fw for fw in support["firmware"]}
    assert firmware["mlx5_0"]["psid"] == "MT_0000000228"
    assert (firmware["mlx5_0"]["running"], firmware["mlx5_0"]["stored"]) == (
        "20.34.1002",
        "20.35.1012",
    )
    assert firmware["mlx5_1"]["psid"] == "MT_0000000894"  # devlink's, mstflint failed there
    assert firmware["mlx5_1"]["sources"] == ["devlink dev info"]
    rows = {(row["item"], row["target"]): row for row in support["rows"]}
    assert rows[("mstflint_query", "mlx5_0")]["status"] == "collected"
    assert rows[("mstflint_query", "mlx5_1")]["status"] == "failed"
    assert rows[("numactl", "")]["status"] == "absent"  # not installed: a line, not an error
    assert rows[("ethtool_module", "")]["status"] == "not applicable"
    replayed = run_cli("report", bundle, "--json")
    assert replayed.exit_code == 2  # the verdict's: the fw-syndrome capture of the kernel log
    again = json.loads(replayed.stdout)["snapshot"]
    assert again["facts"] == live["facts"]
    assert again["commands"] == live["commands"]
    with open(os.path.join(bundle, "report.html")) as handle:
        page = handle.read()
    assert "20.35.1012 flashed, not running" in page and "MT_0000000228" in page
    with open(os.path.join(bundle, "manifest.json")) as handle:
        manifest = json.load(handle)
    listed = {(row["item"], row["target"]): row["status"] for row in manifest["items"]}
    assert listed[("numactl", "")] == "absent"
    ran = {entry["key"]: entry for entry in manifest["commands"]}
    assert ran["support-numactl"]["not_found"] is True


def test_check_at_the_same_level_runs_none_of_the_catalogue(node):
    node.check()
    called = {line.split()[0] for line in node.stubs.calls()}
    assert "perfquery" in called
    assert not called & {"ofed_info", "modinfo", "mstflint"}, called
    assert not any(line.startswith("devlink -j dev info") for line in node.stubs.calls())
