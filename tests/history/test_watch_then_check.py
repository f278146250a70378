"""The monitor between runs: what ``ibdiag watch`` saw fails the next check, NHC and Slurm pass.

A fake node's port is stepped down and up under a running ``ibdiag watch --interval 0.1``
(tests/history/test_watch.py's node and helpers); the run after it finds the port ACTIVE with
clean counters - as the 09:00 prolog finds a cable that flapped overnight - and still fails it
with the flap count: ``ibdiag check`` itself, the real LBNL NHC's ``check_ibdiag``, and the
Slurm HealthCheckProgram through contrib/slurm/ibdiag-slurm-hook (with a stand-in scontrol).
"""

from __future__ import annotations

import json
import os
import subprocess

from conftest import REPO
from fake_scontrol import FakeScontrol
from nhc_run import IBDIAG, run_nhc
from test_watch import DOWN, UP, Node, closed, started, stop, until, watching

HOOK = os.path.join(REPO, "contrib", "slurm", "ibdiag-slurm-hook")
REASON = "ibdiag: mlx5_0:1 link.flaps 3 in 12h"


def flap_under_watch(node: Node, times: int) -> None:
    """``times`` outages of mlx5_0:1, each seen opening and closing by the running monitor."""
    with watching(node) as proc:
        until("the monitor's first sample", lambda: started(node))
        for flap in range(1, times + 1):
            node.set("mlx5_0", **DOWN)
            until(
                f"outage {flap} to open",
                lambda: any(o.end is None for o in node.outages()),
            )
            node.set("mlx5_0", **UP)
            until(f"outage {flap} to close", closed(node, flap))
        assert stop(proc) == 0


def check(node: Node, run_cli, *args: str):
    return run_cli(
        "check", "--sysfs", node.sys, "--procfs", str(node.proc), "--history", node.db, *args
    )


def test_flaps_the_monitor_saw_fail_a_check_of_an_active_clean_port(tmp_path, run_cli):
    node = Node(tmp_path)
    flap_under_watch(node, 3)
    result = check(node, run_cli, "--json")
    assert result.exit_code == 2, result.stderr
    report = json.loads(result.stdout)
    flaps = {r["target"]: r for r in report["results"] if r["check_id"] == "link.flaps"}
    assert flaps["mlx5_0:1"]["status"] == "fail" and flaps["mlx5_0:1"]["observed"] == 3
    assert "seen by samples" in flaps["mlx5_0:1"]["message"]
    assert flaps["mlx5_1:1"]["status"] == "pass"
    states = {r["status"] for r in report["results"] if r["check_id"] == "link.state"}
    assert states == {"pass"}
    assert check(node, run_cli, "--reason").stdout.strip() == REASON


def test_a_single_short_flap_warns(tmp_path, run_cli):
    node = Node(tmp_path)
    flap_under_watch(node, 1)
    result = check(node, run_cli, "--reason")
    assert result.exit_code == 1
    assert result.stdout.strip() == "ibdiag: mlx5_0:1 link.flaps 1 in 12h"


def test_nhc_passes_then_fails_the_flap_the_monitor_saw_between_its_runs(tmp_path):
    node = Node(tmp_path)
    line = f"* || check_ibdiag --sysfs {node.sys} --procfs {node.proc} --history {node.db}"
    first = run_nhc(tmp_path / "first", [line], settings=[f"IBDIAG={IBDIAG}"])
    assert (first.rc, first.output) == (0, "")
    flap_under_watch(node, 3)
    second = run_nhc(tmp_path / "second", [line], settings=[f"IBDIAG={IBDIAG}"])
    assert second.rc == 1, second.output
    assert second.failure == REASON


def test_the_slurm_health_check_drains_for_the_flap_the_monitor_saw(tmp_path):
    node = Node(tmp_path)
    scontrol = FakeScontrol(tmp_path / "slurm")
    args = [
        "--sysfs", node.sys, "--procfs", str(node.proc), "--history", node.db,
        "--node", "node1", "--scontrol", scontrol.path, "--state-dir", str(tmp_path / "state"),
    ]  # fmt: skip
    settings = tmp_path / "slurm.env"
    settings.write_text(
        f"IBDIAG={IBDIAG}\nIBDIAG_ARGS=({' '.join(repr(arg) for arg in args)})\n"
        "IBDIAG_DEADLINE=20\n"
    )
    env = {"PATH": os.environ["PATH"], "IBDIAG_SLURM_ENV": str(settings)}

    def healthcheck() -> subprocess.CompletedProcess:
        return subprocess.run(
            [HOOK, "healthcheck"], env=env, capture_output=True, text=True, timeout=60, check=False
        )

    assert healthcheck().returncode == 0
    assert scontrol.node()["reason"] is None
    flap_under_watch(node, 3)
    done = healthcheck()
    assert done.returncode == 0, done.stderr  # Slurm ignores it; the drain is ibdiag's own
    assert scontrol.node()["reason"] == REASON
