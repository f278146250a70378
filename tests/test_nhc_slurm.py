"""The real NHC marking a real Slurm node offline and online with ibdiag's reason.

NHC (tests/vendor/nhc) with ``NHC_RM=slurm``: on a failure its own helper
``node-mark-offline`` drains the node with ``NHC: <message>`` (through ``sinfo`` and
``scontrol``), and ``node-mark-online`` resumes a node NHC drained once every check passes.
The message goes through an ``eval`` inside single quotes on its way there, so check_ibdiag
must hand it over in a form that survives (no ``'``). Slurm is tests/slurm_cluster.py's
single-node cluster; its node is this host, as NHC's HOSTNAME is.
"""

from __future__ import annotations

import os

from conftest import SCENARIOS_DIR
from nhc_run import IBDIAG, run_nhc
from slurm_cluster import SlurmCluster
from stubs import StubBin

GOOD = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-good", "root", "sys")
STUCK = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-2ports-stuck-INIT", "root", "sys")
MARK_SLURM = ["NHC_RM=slurm", "MARK_OFFLINE=1"]


def test_nhc_drains_with_ibdiag_s_reason_and_resumes_after_repair(tmp_path):
    stubs = StubBin(tmp_path / "stubs")
    # What python prints when the script it should run is gone: an odd number of quote marks.
    crash = stubs.add(
        "ibdiag-crash",
        "echo \"python3: can't open file '/opt/ibdiag/lib/ibdiag.py': [Errno 2] No such file\""
        " >&2\nexit 2\n",
    )
    with SlurmCluster(tmp_path / "cluster") as cluster:

        def nhc(sysfs: str, ibdiag: str = IBDIAG):
            return run_nhc(
                tmp_path,
                [f"* || check_ibdiag --sysfs {sysfs}"],
                settings=[f"IBDIAG={ibdiag}", *MARK_SLURM],
                env=cluster.env,
            )

        sick = nhc(STUCK)
        assert sick.rc == 1, sick.output
        reason = "NHC: ibdiag: mlx5_6:1 link.state 2: INIT and more"
        assert cluster.node_state() == ("IDLE+DRAIN", reason), sick.output

        healthy = nhc(GOOD)  # repaired: every check passes, NHC resumes what it drained
        assert healthy.rc == 0, healthy.output
        # (right after a RESUME slurmctld may show IDLE+NOT_RESPONDING until slurmd answers)
        assert cluster.wait_for_node_state("IDLE") == ("IDLE", None), healthy.output

        broken = nhc(
            GOOD, ibdiag=str(crash)
        )  # quotes in the message: dropped, the rest reaches Slurm
        assert broken.rc == 1, broken.output
        why = "python3: cant open file /opt/ibdiag/lib/ibdiag.py: [Errno 2] No such file"
        assert cluster.node_state() == (
            "IDLE+DRAIN",
            f"NHC: ibdiag: cannot run {crash} (exit 2): {why}",
        ), broken.output
