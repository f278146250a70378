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
import time
from pathlib import Path

from conftest import SCENARIOS_DIR
from nhc_run import IBDIAG, run_nhc
from slurm_cluster import SlurmCluster
from stubs import StubBin
from sysfs_builder import bump_counter, mlx5_node, write_node

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


def _counter_node(root) -> str:
    """A two-HCA node with error counters (all zero) to bump, as /sys."""
    sys_root = root / "sys"
    write_node(str(sys_root), mlx5_node(2))
    return str(sys_root)


def test_a_counter_rise_stays_drained_through_clean_passes_until_an_admin_resumes(tmp_path):
    """The field report, through NHC: a link_downed rise drains; the next pass (the state file
    now holds the risen value: no new rise) must not resume it, nor may a later, different
    fault replace its reason; an admin's RESUME ends it and the next clean pass keeps it IDLE."""
    sys_root = _counter_node(tmp_path / "node")
    state = tmp_path / "var" / "nhc-state.json"
    with SlurmCluster(tmp_path / "cluster") as cluster:

        def nhc():
            return run_nhc(
                tmp_path,
                [f"* || check_ibdiag --sysfs {sys_root} --state {state}"],
                settings=[f"IBDIAG={IBDIAG}", *MARK_SLURM],
                env=cluster.env,
            )

        first = nhc()
        assert first.rc == 0, first.output
        assert cluster.node_state() == ("IDLE", None)

        bump_counter(sys_root, "mlx5_0", "link_downed", 1)
        risen = nhc()
        assert risen.rc == 1, risen.output
        held = "NHC: ibdiag: held: mlx5_0:1 counters.port_errors link_downed"
        assert cluster.node_state() == ("IDLE+DRAIN", held), risen.output
        stamped = cluster.node_info()["Reason"]  # "... [root@2026-11-27T11:11:20]"

        for _ in range(2):  # quiet since: NHC's node-mark-online must not resume it
            time.sleep(1.1)  # (the stamp counts seconds)
            quiet = nhc()
            assert quiet.rc == 1, quiet.output
            assert quiet.failure == held[len("NHC: ") :], quiet.output
            assert "stays drained until an admin resumes it" in quiet.output
            assert cluster.node_state() == ("IDLE+DRAIN", held), quiet.output
            assert cluster.node_info()["Reason"] == stamped  # the same note: its time kept

        port = Path(sys_root, "class", "infiniband", "mlx5_1", "ports", "1", "state")
        port.write_text("2: INIT\n")  # another fault, one that heals: the first reason stays
        other = nhc()
        assert other.rc == 1 and "link.state" in other.output, other.output
        assert cluster.node_state() == ("IDLE+DRAIN", held), other.output
        port.write_text("4: ACTIVE\n")

        cluster.scontrol("update", f"NodeName={cluster.node_name}", "State=RESUME")
        assert cluster.wait_for_node_state("IDLE") == ("IDLE", None)
        after = nhc()  # judged afresh: healthy, nothing new since the last pass
        assert after.rc == 0 and "check_ibdiag" not in after.output, after.output
        assert cluster.wait_for_node_state("IDLE") == ("IDLE", None)


def test_a_fault_that_heals_is_still_resumed_by_nhc(tmp_path):
    """Only held faults wait for an admin: a port stuck in INIT that comes back is resumed."""
    sys_root = _counter_node(tmp_path / "node")
    port = Path(sys_root, "class", "infiniband", "mlx5_1", "ports", "1", "state")
    with SlurmCluster(tmp_path / "cluster") as cluster:

        def nhc():
            return run_nhc(
                tmp_path,
                [f"* || check_ibdiag --sysfs {sys_root} --state {tmp_path / 'state.json'}"],
                settings=[f"IBDIAG={IBDIAG}", *MARK_SLURM],
                env=cluster.env,
            )

        assert nhc().rc == 0
        port.write_text("2: INIT\n")
        sick = nhc()
        assert cluster.node_state() == ("IDLE+DRAIN", "NHC: ibdiag: mlx5_1:1 link.state 2: INIT")
        port.write_text("4: ACTIVE\n")
        healed = nhc()
        assert healed.rc == 0, (sick.output, healed.output)
        assert cluster.wait_for_node_state("IDLE") == ("IDLE", None)
