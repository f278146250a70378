"""contrib/slurm's hooks run by a real Slurm (Debian slurm-wlm 22.05 and munge, started by
tests/slurm_cluster.py on localhost).

The hooks read a settings file (/etc/ibdiag/slurm.env's stand-in) whose ``--sysfs`` points at
``current``: a symlink the tests switch between a healthy capture and a broken one (two ports
stuck in INIT), the way a repair would change the node.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, SCENARIOS_DIR
from tests.slurm_cluster import SlurmCluster, write_script

HOOK = os.path.join(REPO, "contrib", "slurm", "ibdiag-slurm-hook")
GOOD_NODE = os.path.join(REPO, "examples", "sample-node", "sys")
STUCK_INIT = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-2ports-stuck-INIT", "root", "sys")
STUCK_INIT_REASON = "ibdiag: mlx5_6:1 link.state 2: INIT and more"
IBDIAG = shutil.which("ibdiag", path=os.path.dirname(sys.executable)) or shutil.which("ibdiag")


class Site:
    """A node's sysfs (switchable), the hooks' settings and wrapper scripts Slurm runs."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.good = tmp_path / "good" / "sys"
        shutil.copytree(os.path.dirname(GOOD_NODE), self.good.parent, symlinks=True)
        for port in (self.good / "class" / "infiniband").glob("*/ports/*"):
            (port / "counters").mkdir()  # the capture has none: zeros, as on a clean port
            (port / "counters" / "link_downed").write_text("0\n")
        self.current = tmp_path / "current"
        self.use(str(self.good))
        self.state_dir = tmp_path / "run-ibdiag"
        self.settings = tmp_path / "slurm.env"
        self.log = tmp_path / "hooks.log"

    def use(self, sysfs: str) -> None:
        """Point the node at another sysfs tree (atomically, as a repair would)."""
        temp = self.tmp / "current.new"
        temp.unlink(missing_ok=True)
        temp.symlink_to(sysfs)
        os.replace(temp, self.current)

    def hook(self, name: str) -> str:
        """A script Slurm runs as Prolog/Epilog/HealthCheckProgram: our hook with our settings
        (slurmd gives hooks no environment of their own to pass IBDIAG_SLURM_ENV in)."""
        return str(
            write_script(
                self.tmp / f"ibdiag-{name}",
                f"#!/bin/sh\nIBDIAG_SLURM_ENV={self.settings} exec {HOOK} {name} 2>>{self.log}\n",
            )
        )

    def configure(self, cluster: SlurmCluster, extra: str = "") -> None:
        args = ["--sysfs", str(self.current), "--state-dir", str(self.state_dir)]
        self.settings.write_text(
            f"IBDIAG={IBDIAG}\n"
            f"IBDIAG_ARGS=({' '.join(args)})\n"
            "IBDIAG_DEADLINE=15\n"
            # HealthCheckProgram gets no SLURM_CONF: scontrol would read /etc/slurm/slurm.conf
            f"export SLURM_CONF={cluster.conf_path}\n{extra}\n"
        )

    def logged(self) -> str:
        return self.log.read_text() if self.log.exists() else ""


@pytest.fixture
def site(tmp_path):
    return Site(tmp_path / "site")


def start(site: Site, tmp_path: Path, **hooks) -> SlurmCluster:
    scripts = {key: site.hook(name) for key, name in hooks.items() if name}
    interval = 1 if "health_check_program" in scripts else None  # Slurm's shortest
    cluster = SlurmCluster(tmp_path / "cluster", health_check_interval=interval, **scripts)
    site.configure(cluster)
    return cluster


def test_healthy_node_runs_the_job_and_stays_idle(site, tmp_path):
    with start(site, tmp_path, prolog="prolog", epilog="epilog") as cluster:
        job = cluster.sbatch(wrap="echo ran")
        state = cluster.wait_for_job(job, lambda s: s["JobState"] == "COMPLETED")
        assert state["Restarts"] == "0" and state["ExitCode"] == "0:0"
        assert (cluster.jobs_dir / f"job-{job}.out").read_text() == "ran\n"
        assert cluster.wait_for_node_state("IDLE") == ("IDLE", None)
        cluster.wait_for(lambda: not list(site.state_dir.glob("job-*")), 10, "baseline removed")
    assert "drained" not in site.logged(), site.logged()


def test_broken_node_is_drained_by_the_prolog_and_the_job_requeued(site, tmp_path):
    site.use(STUCK_INIT)
    with start(site, tmp_path, prolog="prolog", epilog="epilog") as cluster:
        job = cluster.sbatch(wrap="echo should-not-run")
        # requeued (and held, Slurm's default), once the epilog that follows it has run
        state = cluster.wait_for_job(
            job, lambda s: s["JobState"] == "PENDING" and s["Restarts"] == "1"
        )
        assert state["Reason"] == "launch_failed_requeued_held"
        assert cluster.wait_for_node_state("IDLE+DRAIN") == ("IDLE+DRAIN", STUCK_INIT_REASON)
        assert "should-not-run" not in (cluster.jobs_dir / f"job-{job}.out").read_text()
        assert "Prolog error" not in cluster.node_info()["Reason"]
    assert f"drained {cluster.node_name}: {STUCK_INIT_REASON}" in site.logged()


def test_epilog_drains_on_errors_the_job_drove(site, tmp_path):
    counter = site.good / "class" / "infiniband" / "mlx5_3" / "ports" / "1" / "counters"
    with start(site, tmp_path, prolog="prolog", epilog="epilog") as cluster:
        # The job "fails the cable": the link goes down twice while it runs.
        job = cluster.sbatch(wrap=f"echo 2 > {counter / 'link_downed'}")
        state = cluster.wait_for_job(job, lambda s: s["JobState"] == "COMPLETED")
        assert state["Restarts"] == "0"
        drained = cluster.wait_for_node_state("IDLE+DRAIN")
        assert drained == (
            "IDLE+DRAIN",
            "ibdiag: epilog: mlx5_3:1 counters.port_errors link_downed",
        )
        assert not list(site.state_dir.glob("job-*"))  # the epilog removed the baseline


def test_healthcheck_drains_then_resumes_after_repair(site, tmp_path):
    site.use(STUCK_INIT)
    with start(site, tmp_path, health_check_program="healthcheck") as cluster:
        assert cluster.wait_for_node_state("IDLE+DRAIN") == ("IDLE+DRAIN", STUCK_INIT_REASON)
        site.use(str(site.good))  # the ports came back
        assert cluster.wait_for_node_state("IDLE") == ("IDLE", None)
        job = cluster.sbatch(wrap="true")
        cluster.wait_for_job(job, lambda s: s["JobState"] == "COMPLETED")
    assert f"resumed {cluster.node_name}" in site.logged()


def test_an_admins_drain_reason_is_left_alone(site, tmp_path):
    site.use(STUCK_INIT)
    with start(site, tmp_path, health_check_program="healthcheck") as cluster:
        node = cluster.node_name
        cluster.scontrol("update", f"NodeName={node}", "State=DRAIN", "Reason=RMA ticket 12")
        site.log.unlink(missing_ok=True)
        cluster.wait_for(lambda: site.logged().count("left alone") >= 2, 10, "two health checks")
        assert cluster.node_state() == ("IDLE+DRAIN", "RMA ticket 12")
        site.use(str(site.good))  # healthy again: still not resumed, it is not our drain
        cluster.wait_for(lambda: site.logged().count("left alone") >= 4, 10, "two more")
        assert cluster.node_state() == ("IDLE+DRAIN", "RMA ticket 12")
