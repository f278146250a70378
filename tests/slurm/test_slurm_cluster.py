"""Prove tests/slurm_cluster.py against real munged/slurmctld/slurmd daemons.

These tests need Debian's slurm-wlm and munge, and root. They are never skipped: without them
SlurmCluster.start() raises SlurmClusterError saying what is missing, and the test fails.

What they pin down about Slurm 22.05 (the behaviour the ibdiag prolog relies on):

* A Prolog that drains the node with its own reason and then exits non-zero keeps ITS reason:
  slurmd reports the prolog failure (ESLURMD_PROLOG_FAILED in its registration) and slurmctld
  only sets "Prolog error" on a node that is not already drained. A failing prolog that did not
  drain gets "Prolog error" (the control test).
* The job is requeued: JobState=PENDING, Restarts=1, Reason=launch_failed_requeued_held
  (held, Priority=0) by default; with SchedulerParameters=nohold_on_prolog_fail it is not held
  (Reason BeginTime: requeued jobs wait about two minutes before they are eligible again).
* Prolog and Epilog get SLURMD_NODENAME, SLURM_JOB_ID, SLURM_CONF, SLURM_SCRIPT_CONTEXT ... but
  NO PATH; the HealthCheckProgram gets SLURMD_NODENAME only (no SLURM_CONF, no PATH).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Dict

import pytest
from slurm_cluster import (
    MARKER_VARIABLE,
    SlurmCluster,
    SlurmClusterError,
    parse_scontrol_record,
    write_script,
)

OUR_REASON = "ibdiag: test reason"


def read_env_dump(path: Path) -> Dict[str, str]:
    """Parse the ``env`` output a hook script wrote."""
    env = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            env[key] = value
    return env


def test_parse_scontrol_record_keeps_free_text_fields_whole():
    text = (
        "NodeName=vm Arch=x86_64 CoresPerSocket=2\n"
        "   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A\n"
        "   OS=Linux 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016\n"
        "   CfgTRES=cpu=2,mem=24105M,billing=2\n"
        "   Reason=ibdiag: port mlx5_0/1 Down (x=1) [root@2026-11-21T16:48:53]\n"
        "   AllocNode:Sid=localhost:5921 Power=\n"
    )
    fields = parse_scontrol_record(text)
    assert fields["State"] == "IDLE+DRAIN"
    assert fields["Owner"] == "N/A"
    assert fields["OS"] == "Linux 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016"
    assert fields["CfgTRES"] == "cpu=2,mem=24105M,billing=2"
    assert fields["Reason"] == "ibdiag: port mlx5_0/1 Down (x=1) [root@2026-11-21T16:48:53]"
    assert fields["AllocNode:Sid"] == "localhost:5921"
    assert fields["Power"] == ""


@pytest.mark.parametrize(
    "extra_conf, job_reason, held",
    [
        pytest.param((), "launch_failed_requeued_held", True, id="default-hold"),
        pytest.param(
            ("SchedulerParameters=nohold_on_prolog_fail",), "BeginTime", False, id="nohold"
        ),
    ],
)
def test_failing_prolog_that_drains_keeps_its_own_reason(tmp_path, extra_conf, job_reason, held):
    env_dump = tmp_path / "prolog.env"
    prolog = write_script(
        tmp_path / "prolog.sh",
        "#!/bin/sh\n"
        f"env | sort > {env_dump}\n"
        'scontrol update NodeName="$SLURMD_NODENAME" State=DRAIN '
        f'Reason="{OUR_REASON}" > {tmp_path}/scontrol.out 2>&1\n'
        "exit 1\n",
    )
    with SlurmCluster(tmp_path / "cluster", prolog=prolog, extra_conf=extra_conf) as cluster:
        job = cluster.sbatch(wrap="echo should-not-run")
        state = cluster.wait_for_job(
            job,
            lambda s: s["Restarts"] == "1" and s["Reason"] == job_reason,
        )
        assert state["JobState"] == "PENDING"
        assert (state["Priority"] == "0") is held
        cluster.wait_for_node_state("IDLE+DRAIN")
        # Give slurmctld time to act on slurmd's ESLURMD_PROLOG_FAILED report; it must not
        # replace our reason with its own "Prolog error".
        time.sleep(1.5)
        node_state, reason = cluster.node_state()
        assert (node_state, reason) == ("IDLE+DRAIN", OUR_REASON)
        assert "Prolog error" not in cluster.node_info()["Reason"]
        assert (tmp_path / "scontrol.out").read_text() == ""  # the prolog's scontrol worked
        job_output = (cluster.jobs_dir / f"job-{job}.out").read_text()
        assert "should-not-run" not in job_output
        assert "Error running slurm prolog: 1" in job_output

    env = read_env_dump(env_dump)
    assert env["SLURMD_NODENAME"] == cluster.node_name
    assert env["SLURM_JOB_ID"] == str(job)
    assert env["SLURM_SCRIPT_CONTEXT"] == "prolog_slurmd"
    assert env["SLURM_CONF"] == str(cluster.conf_path)
    assert env["SLURM_JOB_USER"] == "root"
    # slurmd gives the Prolog no PATH at all: /bin/sh falls back to its built-in default, but
    # a Python prolog's subprocess/shutil.which only search os.defpath (/bin:/usr/bin).
    assert "PATH" not in env
    assert MARKER_VARIABLE not in env  # built from scratch, not inherited from slurmd


def test_failing_prolog_without_drain_gets_slurms_prolog_error(tmp_path):
    """The control for the test above: Slurm does drain with "Prolog error" on its own."""
    prolog = write_script(tmp_path / "prolog.sh", "#!/bin/sh\nexit 1\n")
    with SlurmCluster(tmp_path / "cluster", prolog=prolog) as cluster:
        job = cluster.sbatch(wrap="true")
        cluster.wait_for_job(job, lambda s: s["Reason"] == "launch_failed_requeued_held")
        assert cluster.wait_for_node_state("IDLE+DRAIN") == ("IDLE+DRAIN", "Prolog error")


def test_health_check_program_runs_every_interval(tmp_path):
    runs = tmp_path / "health.runs"
    env_dump = tmp_path / "health.env"
    program = write_script(
        tmp_path / "health.sh",
        f"#!/bin/sh\nenv | sort > {env_dump}\ndate +%s.%N >> {runs}\n",
    )
    with SlurmCluster(
        tmp_path / "cluster", health_check_program=program, health_check_interval=1
    ) as cluster:
        # slurmd runs it once at start, before registering: the file is there already.
        assert runs.exists()
        started = time.monotonic()
        cluster.wait_for(lambda: len(runs.read_text().split()) >= 4, 10, "3 periodic runs")
        assert time.monotonic() - started < 6
        times = [float(t) for t in runs.read_text().split()]
        gaps = [b - a for a, b in zip(times, times[1:])]
        assert all(gap < 2.5 for gap in gaps[1:]), gaps

    env = read_env_dump(env_dump)
    assert env["SLURMD_NODENAME"] == cluster.node_name
    # Nothing else from Slurm: no job, no SLURM_CONF (scontrol there reads the default
    # /etc/slurm/slurm.conf), no PATH.
    assert not [key for key in env if key.startswith("SLURM_")]
    assert "PATH" not in env


def test_stop_leaves_no_daemons_or_jobs_behind(tmp_path):
    cluster = SlurmCluster(tmp_path)
    with cluster:
        job = cluster.sbatch("#!/bin/sh\nsleep 300\n")
        cluster.wait_for_job(job, lambda s: s["JobState"] == "RUNNING")
        pids = {int((tmp_path / f"{name}.pid").read_text()) for name in ("slurmctld", "slurmd")}
        pids.add(int((cluster.munge_dir / "munged.pid").read_text()))
    needle = f"{MARKER_VARIABLE}={cluster.marker}".encode()
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "stat").read_text()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        zombie = re.match(r"\d+ \(.*\) Z", status) is not None
        if not zombie and (int(entry.name) in pids or needle in environ.split(b"\0")):
            alive.append(entry.name)
    assert alive == []
    cluster.stop()  # a second stop is harmless


def test_missing_program_fails_with_a_clear_message(tmp_path, monkeypatch):
    monkeypatch.setattr("slurm_cluster._which", lambda program: None)
    with pytest.raises(SlurmClusterError, match=r"apt-get install slurm-wlm munge"):
        SlurmCluster(tmp_path).start()
    assert os.listdir(tmp_path) == []
