"""contrib/slurm's hook script and ``ibdiag slurm ...`` against a fake scontrol.

The same flows run against a real slurmctld and slurmd in tests/slurm/test_slurm_real.py; here
the cases a real cluster makes slow or hard: a hung scontrol, a hung sysfs read, a missing
scontrol, odd job ids, every exit-code mapping of the script.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, SCENARIOS_DIR
from fake_scontrol import FakeScontrol

from ibdiag.held import clean_reason, epilog_reason, held_reason
from ibdiag.slurm.hooks import HEALTHCHECK_STATE
from ibdiag.slurm.scontrol import (
    NodeRecord,
    Scontrol,
    SlurmError,
    mark_healthy,
    mark_unhealthy,
    parse_show_node,
)

HOOK = os.path.join(REPO, "contrib", "slurm", "ibdiag-slurm-hook")
GOOD_NODE = os.path.join(REPO, "examples", "sample-node")
STUCK_INIT = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-2ports-stuck-INIT", "root", "sys")
FLAPPING = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-ib4-operstate-down-flapping", "root", "sys")
STUCK_INIT_REASON = "ibdiag: mlx5_6:1 link.state 2: INIT and more"
IBDIAG = shutil.which("ibdiag", path=os.path.dirname(sys.executable)) or shutil.which("ibdiag")

# What Debian's Slurm 22.05 prints for a drained node (as tests/slurm/test_slurm_real.py's real
# one does).
SHOW_DRAINED = """\
NodeName=node1 Arch=x86_64 CoresPerSocket=1
   CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=0.31
   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=debug
   Reason=ibdiag: mlx5_6:1 link.state 2: INIT [root@2026-11-21T17:03:12]
"""


@pytest.fixture
def node(tmp_path):
    """A good sysfs tree (a copy, so tests can break it), a fake scontrol, a state dir."""
    root = tmp_path / "node"
    shutil.copytree(GOOD_NODE, root, symlinks=True)
    for port in (root / "sys" / "class" / "infiniband").glob("*/ports/*"):
        (port / "counters").mkdir()  # the capture has none; zeros, as on a clean port
        for name in ("link_downed", "symbol_error", "port_rcv_errors"):
            (port / "counters" / name).write_text("0\n")
    return {
        "sysfs": str(root / "sys"),
        "scontrol": FakeScontrol(tmp_path / "slurm"),
        "state_dir": tmp_path / "run-ibdiag",
        "tmp": tmp_path,
    }


def write_settings(node, sysfs=None, extra="", deadline=20, ibdiag=None):
    """The site's /etc/ibdiag/slurm.env for these tests."""
    settings = node["tmp"] / "slurm.env"
    args = [
        "--sysfs", sysfs or node["sysfs"], "--node", "node1",
        "--scontrol", node["scontrol"].path, "--state-dir", str(node["state_dir"]),
    ]  # fmt: skip
    settings.write_text(
        f"IBDIAG={ibdiag or IBDIAG}\n"
        f"IBDIAG_ARGS=({' '.join(repr(arg) for arg in args)})\n"
        f"IBDIAG_DEADLINE={deadline}\n{extra}\n"
    )
    return settings


def run_hook(node, hook, job_id="42", timeout=60, **settings):
    env = {
        "PATH": os.environ["PATH"],
        "IBDIAG_SLURM_ENV": str(write_settings(node, **settings)),
        "SLURM_JOB_ID": job_id,
        "SLURMD_NODENAME": "node1",
    }
    started = time.monotonic()
    done = subprocess.run(
        [HOOK, hook], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    done.elapsed = time.monotonic() - started
    return done


def bump_counter(sysfs: str, device: str, port: int, name: str, by: int) -> None:
    path = Path(sysfs, "class", "infiniband", device, "ports", str(port), "counters", name)
    path.write_text(f"{int(path.read_text()) + by}\n")


# -- scontrol: parsing and the drain/resume rules -----------------------------------------------


def test_show_node_gives_state_and_reason_without_the_stamp():
    record = parse_show_node("node1", SHOW_DRAINED)
    assert record == NodeRecord("node1", "IDLE+DRAIN", "ibdiag: mlx5_6:1 link.state 2: INIT")
    assert record.drained and record.reason_is_ours


def test_show_node_without_reason_and_with_an_admin_reason():
    idle = parse_show_node("n", "NodeName=n\n   State=MIXED ThreadsPerCore=1\n")
    assert idle.reason is None and not idle.drained
    admin = parse_show_node("n", "   State=DOWN+DRAIN\n   Reason=RMA [ops@2026-01-01T00:00:00]\n")
    assert admin.reason == "RMA" and admin.drained and not admin.reason_is_ours
    # "MCS_label=" or "NextState=" on the same line must not be taken for State=
    odd = parse_show_node("n", "   NextState=IDLE State=ALLOCATED Owner=N/A\n")
    assert odd.state == "ALLOCATED"


def test_show_node_without_state_is_a_one_line_error():
    with pytest.raises(SlurmError, match="no State="):
        parse_show_node("n", "slurm_load_node error: Unable to contact slurm controller\n")


def test_reasons_get_the_prefix_one_line_and_a_bounded_length():
    assert clean_reason("mlx5_0:1 link.state\nDOWN") == "ibdiag: mlx5_0:1 link.state DOWN"
    assert clean_reason("ibdiag: x") == "ibdiag: x"
    assert len(clean_reason("ibdiag: " + "y" * 500)) == 128
    # what the hooks add to a reason goes through the same safe set as `check --reason`
    assert clean_reason('ibdiag: a "$(b)" [c@d]') == "ibdiag: a __(b)_ _c_d_"
    assert len(epilog_reason("ibdiag: " + "y" * 500)) == 128
    assert len(held_reason("ibdiag: " + "y" * 500)) == 128


def test_drain_sets_our_reason_when_there_is_none(tmp_path):
    fake = FakeScontrol(tmp_path)
    message = mark_unhealthy(Scontrol("node1", fake.path), "ibdiag: mlx5_0:1 link.state DOWN")
    assert fake.node()["reason"] == "ibdiag: mlx5_0:1 link.state DOWN"
    assert fake.node()["state"] == "IDLE+DRAIN"
    assert message.startswith("drained node1")


def test_drain_never_overwrites_an_admin_reason(tmp_path):
    fake = FakeScontrol(tmp_path)
    fake.set("IDLE+DRAIN", "cable swap, ticket 4411")
    message = mark_unhealthy(Scontrol("node1", fake.path), "ibdiag: mlx5_0:1 link.state DOWN")
    assert fake.node()["reason"] == "cable swap, ticket 4411"
    assert fake.updates() == []
    assert "left alone" in message and "ticket 4411" in message


def test_drain_replaces_our_own_older_reason_but_does_not_restamp_the_same(tmp_path):
    fake = FakeScontrol(tmp_path)
    fake.set("IDLE+DRAIN", "ibdiag: mlx5_0:1 link.state DOWN")
    scontrol = Scontrol("node1", fake.path)
    assert mark_unhealthy(scontrol, "ibdiag: mlx5_0:1 link.state DOWN").startswith("already")
    assert fake.updates() == []
    mark_unhealthy(scontrol, "ibdiag: mlx5_3:1 link.rate")
    assert fake.node()["reason"] == "ibdiag: mlx5_3:1 link.rate"


HELD = "ibdiag: held: mlx5_1:1 counters.port_errors link_downed"


def test_a_held_drain_is_neither_replaced_nor_resumed(tmp_path):
    """Counter rises and flaps do not heal by themselves: whichever hook drained first, the
    node stays drained, with that reason, until an admin resumes it."""
    fake = FakeScontrol(tmp_path)
    scontrol = Scontrol("node1", fake.path)
    for held in (HELD, "ibdiag: epilog: mlx5_1:1 counters.port_errors link_downed"):
        fake.set("MIXED+DRAIN", held)
        for later in (held_reason(HELD), epilog_reason(HELD), STUCK_INIT_REASON):
            assert mark_unhealthy(scontrol, later).startswith("already drained, held")
        message = mark_healthy(scontrol)
        assert message.startswith("left drained") and "State=RESUME" in message
        assert fake.node()["reason"] == held and fake.updates() == []


def test_a_plain_drain_becomes_held_when_a_hook_finds_a_fault_that_does_not_heal(tmp_path):
    """A node drained for a state (or by an older ibdiag) that then shows a counter rise gets
    the held reason; its plain reason would have been resumed by the next quiet check."""
    fake = FakeScontrol(tmp_path)
    scontrol = Scontrol("node1", fake.path)
    plain = "ibdiag: mlx5_1:1 counters.port_errors link_downed"
    fake.set("IDLE+DRAIN", plain)
    assert mark_unhealthy(scontrol, epilog_reason(plain)).startswith("drained node1")
    assert fake.node()["reason"] == "ibdiag: epilog: mlx5_1:1 counters.port_errors link_downed"
    fake.set("IDLE+DRAIN", STUCK_INIT_REASON)
    mark_unhealthy(scontrol, HELD)
    assert fake.node()["reason"] == HELD


def test_held_reasons_are_marked_once_and_an_admins_reason_is_never_marked():
    assert held_reason("ibdiag: mlx5_1:1 counters.port_errors link_downed") == HELD
    assert held_reason(HELD) == HELD
    epilog = "ibdiag: epilog: mlx5_1:1 counters.port_errors link_downed"
    assert held_reason(epilog) == epilog  # the epilog's reasons are held already
    assert parse_show_node("n", f"   State=IDLE+DRAIN\n   Reason={HELD} [root@t]\n").held
    assert not parse_show_node("n", f"   State=IDLE+DRAIN\n   Reason={STUCK_INIT_REASON}\n").held
    assert not parse_show_node("n", "   State=IDLE+DRAIN\n   Reason=held: RMA 12\n").held


def test_resume_only_what_ibdiag_drained(tmp_path):
    fake = FakeScontrol(tmp_path)
    scontrol = Scontrol("node1", fake.path)
    assert mark_healthy(scontrol).startswith("nothing to resume")
    fake.set("IDLE+DRAIN", "memory test")
    assert mark_healthy(scontrol).startswith("left alone")
    assert fake.node()["state"] == "IDLE+DRAIN" and fake.updates() == []
    fake.set("IDLE+DRAIN", "ibdiag: mlx5_0:1 link.state DOWN")
    assert mark_healthy(scontrol).startswith("resumed node1")
    assert fake.node() == {"name": "node1", "state": "IDLE", "reason": None}


def test_a_hung_scontrol_is_killed_within_its_timeout(tmp_path):
    fake = FakeScontrol(tmp_path)
    fake.hang()
    started = time.monotonic()
    with pytest.raises(SlurmError, match="timed out"):
        Scontrol("node1", fake.path, timeout_s=0.5).show()
    assert time.monotonic() - started < 5


def test_scontrol_missing_or_failing_is_a_one_line_error(tmp_path):
    with pytest.raises(SlurmError, match="not installed"):
        Scontrol("node1", str(tmp_path / "no-scontrol")).show()
    fake = FakeScontrol(tmp_path)
    with pytest.raises(SlurmError, match="Node other not found"):
        Scontrol("other", fake.path).show()


def test_no_scontrol_call_starts_after_the_deadline(tmp_path):
    fake = FakeScontrol(tmp_path)
    with pytest.raises(SlurmError, match="deadline had passed"):
        Scontrol("node1", fake.path, until=time.monotonic() - 1).show()
    assert fake.calls() == []


# -- the prolog --------------------------------------------------------------------------------


def test_prolog_healthy_node_saves_the_job_baseline_privately(node):
    done = run_hook(node, "prolog")
    assert done.returncode == 0, done.stderr
    baseline = node["state_dir"] / "job-42.json"
    assert stat.S_IMODE(baseline.stat().st_mode) == 0o600
    assert stat.S_IMODE(node["state_dir"].stat().st_mode) == 0o700
    assert '"devices"' in baseline.read_text()
    assert node["scontrol"].updates() == []


def test_prolog_sick_node_is_drained_with_a_stable_reason_and_fails(node):
    done = run_hook(node, "prolog", sysfs=STUCK_INIT)
    assert done.returncode == 1
    assert node["scontrol"].node() == {
        "name": "node1", "state": "IDLE+DRAIN", "reason": STUCK_INIT_REASON,
    }  # fmt: skip
    assert f"drained node1: {STUCK_INIT_REASON}" in done.stderr
    assert not (node["state_dir"] / "job-42.json").exists()  # no epilog will want it


def test_prolog_leaves_an_admin_reason_alone_but_still_fails_the_job(node):
    node["scontrol"].set("MIXED+DRAIN", "bad DIMM, ticket 77")
    done = run_hook(node, "prolog", sysfs=STUCK_INIT)
    assert done.returncode == 1
    assert node["scontrol"].node()["reason"] == "bad DIMM, ticket 77"
    assert node["scontrol"].updates() == []
    assert "left alone" in done.stderr


def test_prolog_warning_lets_the_job_start_and_is_logged(node):
    done = run_hook(node, "prolog", sysfs=FLAPPING)  # IPoIB netdev down: a warning
    assert done.returncode == 0
    assert "WARNING: ibdiag: mlx5_6:1 netdev.operstate down" in done.stderr
    assert node["scontrol"].updates() == []
    assert (node["state_dir"] / "job-42.json").exists()


def test_prolog_fails_a_port_below_the_expected_rate(node):
    Path(node["sysfs"], "class", "infiniband", "mlx5_0", "ports", "1", "rate").write_text(
        "100 Gb/sec (2X HDR)\n"
    )
    done = run_hook(node, "prolog", extra="IBDIAG_ARGS+=(--expect-rate 200)")
    assert done.returncode == 1
    # the observed rate and the expected one, so 100 and 50 Gb/s ports group apart
    assert node["scontrol"].node()["reason"] == "ibdiag: mlx5_0:1 link.rate 100<200 Gb/s"


def test_prolog_finishes_within_its_deadline_when_scontrol_hangs(node):
    node["scontrol"].hang()
    done = run_hook(
        node, "prolog", sysfs=STUCK_INIT, deadline=4,
        extra="IBDIAG_ARGS+=(--scontrol-timeout 1)",
    )  # fmt: skip
    assert done.returncode == 1
    assert done.elapsed < 4 + 3, done.elapsed  # its deadline, plus Python's start
    assert "could not drain the node" in done.stderr and "timed out" in done.stderr


def test_prolog_drains_when_a_sysfs_read_hangs(node):
    """A hung HCA blocks a counter read in the kernel: the check is abandoned, the node drained.

    A FIFO no longer stands in for the hang (ibdiag refuses one at once): an ``ibdiag`` that
    blocks in its one file-reading function, for ever, on that attribute does."""
    hung = "class/infiniband/mlx5_0/ports/1/state"
    wrapper = node["tmp"] / "ibdiag-hung-hca"
    wrapper.write_text(
        f"#!{sys.executable}\n"
        "import threading\n"
        "from ibdiag.sources import sysfs\n"
        "real = sysfs.SysfsReader._read_bytes\n"
        "def blocking(self, rel):\n"
        f"    if rel.strip('/') == {hung!r}:\n"
        "        threading.Event().wait()\n"
        "    return real(self, rel)\n"
        "sysfs.SysfsReader._read_bytes = blocking\n"
        "from ibdiag.cli import main\n"
        "main()\n"
    )
    wrapper.chmod(0o755)
    done = run_hook(
        node, "prolog", deadline=6, ibdiag=str(wrapper), extra="IBDIAG_ARGS+=(--scontrol-timeout 1)"
    )
    assert done.returncode == 1
    assert done.elapsed < 6 + 3, done.elapsed
    reason = node["scontrol"].node()["reason"]
    assert reason.startswith("ibdiag: prolog check timed out"), reason


def test_prolog_config_error_lets_the_job_start_and_is_logged(node):
    bad = node["tmp"] / "bad.toml"
    bad.write_text("[thresholds\n")
    done = run_hook(node, "prolog", sysfs=STUCK_INIT, extra=f"IBDIAG_ARGS+=(--config {bad})")
    assert done.returncode == 0
    assert "could not run as configured" in done.stderr and "ignored" in done.stderr
    assert str(bad) in done.stderr
    assert node["scontrol"].updates() == []


def test_prolog_config_error_fails_when_strict(node):
    done = run_hook(node, "prolog", extra="IBDIAG_ARGS+=(--profile no-such)\nIBDIAG_STRICT=1")
    assert done.returncode == 1
    assert "failing (IBDIAG_STRICT=1)" in done.stderr


def test_prolog_refuses_a_job_id_that_is_not_slurms(node):
    done = run_hook(node, "prolog", job_id="../../etc/passwd")
    assert done.returncode == 0  # exit 3 from ibdiag, logged and ignored by the script
    assert "not a Slurm job id" in done.stderr
    assert not node["state_dir"].exists() or not any(node["state_dir"].iterdir())


def test_hook_named_for_nothing_runs_nothing(tmp_path):
    other = tmp_path / "ibdiag-something"
    other.symlink_to(HOOK)
    done = subprocess.run([str(other)], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "cannot tell which hook" in done.stderr


# -- the epilog --------------------------------------------------------------------------------


def test_epilog_drains_on_a_counter_that_rose_during_the_job_and_removes_the_baseline(node):
    assert run_hook(node, "prolog").returncode == 0
    bump_counter(node["sysfs"], "mlx5_3", 1, "link_downed", 2)
    done = run_hook(node, "epilog", extra="IBDIAG_EPILOG_ARGS=(--level quick)")
    assert done.returncode == 0, done.stderr  # drained by us: Slurm need not add "Epilog error"
    reason = node["scontrol"].node()["reason"]
    assert reason.startswith("ibdiag: epilog: mlx5_3:1 counters."), reason
    assert not (node["state_dir"] / "job-42.json").exists()


def test_epilog_without_new_errors_leaves_the_node_alone(node):
    assert run_hook(node, "prolog").returncode == 0
    done = run_hook(node, "epilog", extra="IBDIAG_EPILOG_ARGS=(--level quick)")
    assert done.returncode == 0
    assert node["scontrol"].updates() == []
    assert not (node["state_dir"] / "job-42.json").exists()


def test_epilog_without_a_baseline_grades_since_boot(node):
    done = run_hook(node, "epilog", job_id="7", extra="IBDIAG_EPILOG_ARGS=(--level quick)")
    assert done.returncode == 0
    assert "no baseline for job 7" in done.stderr


def test_epilog_fails_when_it_must_drain_but_scontrol_is_gone(node):
    assert run_hook(node, "prolog").returncode == 0
    bump_counter(node["sysfs"], "mlx5_0", 1, "link_downed", 1)
    node["scontrol"].hang()
    done = run_hook(
        node, "epilog", deadline=4,
        extra="IBDIAG_EPILOG_ARGS=(--level quick --scontrol-timeout 1)",
    )  # fmt: skip
    assert done.returncode == 1  # so Slurm drains the node itself ("Epilog error")
    assert not (node["state_dir"] / "job-42.json").exists()


def test_an_epilog_drain_is_left_for_an_admin_by_the_health_check(node):
    """A drained node carries no traffic: its counters stop rising whether the cable is fixed
    or not, so the health check must not take the quiet for a repair."""
    assert run_hook(node, "healthcheck").returncode == 0  # its state file, before the job
    assert run_hook(node, "prolog").returncode == 0
    bump_counter(node["sysfs"], "mlx5_3", 1, "link_downed", 2)
    run_hook(node, "epilog", extra="IBDIAG_EPILOG_ARGS=(--level quick)")
    drained = node["scontrol"].node()["reason"]
    assert drained.startswith("ibdiag: epilog: mlx5_3:1")
    for _ in range(2):  # the first sees the rise itself, the second a quiet node
        done = run_hook(node, "healthcheck")
    assert node["scontrol"].node()["reason"] == drained
    assert "left drained" in done.stderr and "resume by hand" in done.stderr


# -- the health check --------------------------------------------------------------------------


def test_healthcheck_drains_then_resumes_after_repair(node):
    done = run_hook(node, "healthcheck", sysfs=STUCK_INIT)
    assert done.returncode == 0  # Slurm ignores it; the drain is ibdiag's own
    assert node["scontrol"].node()["reason"] == STUCK_INIT_REASON
    done = run_hook(node, "healthcheck")
    assert done.returncode == 0
    assert node["scontrol"].node() == {"name": "node1", "state": "IDLE", "reason": None}
    assert "resumed node1" in done.stderr


@pytest.mark.parametrize("hook", ["prolog", "healthcheck"])
def test_a_baseline_that_cannot_be_saved_is_a_logged_warning_not_silence(node, hook):
    """The prolog's job baseline and the health check's state are saved before grading, so a
    failure to save them is a counters.baseline warning the hook logs (stderr alone is lost)."""
    node["state_dir"].mkdir(mode=0o700)
    blocked = node["state_dir"] / ("job-42.json" if hook == "prolog" else HEALTHCHECK_STATE)
    blocked.mkdir()  # a directory where the file must go
    (blocked / "keep").write_text("")
    done = run_hook(node, hook)
    assert done.returncode == 0, done.stderr
    assert "WARNING: ibdiag: node counters.baseline" in done.stderr
    assert node["scontrol"].updates() == []


def test_healthcheck_never_resumes_an_admin_drain(node):
    node["scontrol"].set("IDLE+DRAIN", "reserved for firmware update")
    run_hook(node, "healthcheck")
    assert node["scontrol"].node()["reason"] == "reserved for firmware update"
    assert node["scontrol"].updates() == []


def test_healthcheck_keeps_a_counter_rise_drained_until_an_admin_resumes(node):
    """A drained node carries no traffic: counters that stop rising are no repair, so the
    health check's own drain for a rise is held, as the epilog's is."""
    assert run_hook(node, "healthcheck").returncode == 0  # first run: the state file
    bump_counter(node["sysfs"], "mlx5_1", 1, "link_downed", 1)
    run_hook(node, "healthcheck")
    assert node["scontrol"].node() == {"name": "node1", "state": "IDLE+DRAIN", "reason": HELD}
    bump_counter(node["sysfs"], "mlx5_1", 1, "link_downed", 1)
    run_hook(node, "healthcheck")
    for _ in range(2):
        done = run_hook(node, "healthcheck")  # quiet since the last run: still held
        assert node["scontrol"].node()["reason"] == HELD
    assert "left drained" in done.stderr and "resume by hand" in done.stderr
    assert len(node["scontrol"].updates()) == 1
    node["scontrol"].set("IDLE", None)  # the admin checked the cable and resumed the node
    run_hook(node, "healthcheck")  # nothing new since: it stays in service
    assert node["scontrol"].node()["state"] == "IDLE" and len(node["scontrol"].updates()) == 1


def test_a_rise_the_health_check_drained_first_is_not_undone_after_the_epilog(node):
    """The field report: the health check sees a job's link_downed rise before the epilog
    does; the epilog finds the node drained already; the next health checks, finding no new
    rise, must not resume it."""
    assert run_hook(node, "healthcheck").returncode == 0  # its state file, before the job
    assert run_hook(node, "prolog").returncode == 0  # the job's baseline
    bump_counter(node["sysfs"], "mlx5_3", 1, "link_downed", 2)  # under the job
    run_hook(node, "healthcheck")  # mid-job: it drains first
    drained = "ibdiag: held: mlx5_3:1 counters.port_errors link_downed"
    assert node["scontrol"].node()["reason"] == drained
    done = run_hook(node, "epilog", extra="IBDIAG_EPILOG_ARGS=(--level quick)")
    assert done.returncode == 0 and "already drained, held" in done.stderr
    for _ in range(2):
        run_hook(node, "healthcheck")
    assert node["scontrol"].node() == {"name": "node1", "state": "IDLE+DRAIN", "reason": drained}
    assert len(node["scontrol"].updates()) == 1


def test_a_state_fault_the_health_check_drained_still_resumes_once_repaired(node):
    """Only faults that do not heal by themselves are held: a port stuck in INIT is seen to
    come back (``link.state`` reads the port as it is now)."""
    run_hook(node, "healthcheck", sysfs=STUCK_INIT)
    assert node["scontrol"].node()["reason"] == STUCK_INIT_REASON
    done = run_hook(node, "healthcheck")
    assert node["scontrol"].node()["state"] == "IDLE" and "resumed node1" in done.stderr


@pytest.mark.parametrize("name", ["ibdiag-prolog", "ibdiag-epilog", "ibdiag-healthcheck"])
def test_the_name_the_script_runs_under_picks_the_hook(node, name):
    """The links in contrib/slurm (and copies installed under those names) need no argument."""
    env = {
        "PATH": os.environ["PATH"],
        "IBDIAG_SLURM_ENV": str(write_settings(node, sysfs=STUCK_INIT)),
        "SLURM_JOB_ID": "42",
    }
    script = os.path.join(REPO, "contrib", "slurm", name)
    done = subprocess.run([script], env=env, capture_output=True, text=True, check=False)
    hook = name.split("-")[1]
    assert f"ibdiag: slurm {hook} on node1: drained node1" in done.stderr, done.stderr


def test_epilog_at_level_standard_ends_within_its_deadline_when_commands_hang(node):
    """perfquery, ethtool, dmesg ... all hang: the epilog still ends inside --deadline, the
    commands' process groups killed, and a healthy node is not drained for it."""
    import stubs as S

    bin_dir = S.StubBin(node["tmp"] / "bin")
    mark = S.marker()
    for tool in ("perfquery", "ethtool", "dmesg", "journalctl", "ibstat", "ibv_devinfo"):
        bin_dir.add(tool, S.hangs(mark))
    assert run_hook(node, "prolog").returncode == 0
    started = time.monotonic()
    done = subprocess.run(
        [IBDIAG, "slurm", "epilog", "--job-id", "42", "--node", "node1", "--sysfs", node["sysfs"],
         "--scontrol", node["scontrol"].path, "--state-dir", str(node["state_dir"]),
         "--deadline", "6", "--scontrol-timeout", "1"],
        env=bin_dir.env(), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert elapsed < 6 + 3, elapsed
    assert bin_dir.calls(), "no command ran: the test proves nothing"
    assert node["scontrol"].updates() == []
    assert S.processes_with(mark) == []
    assert not (node["state_dir"] / "job-42.json").exists()


def test_an_odd_deadline_setting_falls_back_to_30_seconds(node):
    odd = run_hook(node, "prolog", job_id="43", extra="IBDIAG_DEADLINE=30.5")
    assert odd.returncode == 0, odd.stderr
    assert "IBDIAG_DEADLINE=30.5 is not a whole number of seconds: using 30" in odd.stderr
    assert (node["state_dir"] / "job-43.json").exists()


# -- the exit contract: every value `ibdiag slurm ...` can exit with, through the script ---------

HOOKS = ("prolog", "epilog", "healthcheck")


def stub_ibdiag(folder: Path, body: str) -> Path:
    """An ``ibdiag`` that records its argv (one per line, in argv.<hook>) and then runs body."""
    folder.mkdir(parents=True, exist_ok=True)
    stub = folder / "ibdiag"
    stub.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{folder}/argv.$2"\n{body}\n')
    stub.chmod(0o755)
    return stub


def run_hooks_with(ibdiag, folder: Path, strict: bool = False, deadline: int = 0) -> dict:
    """Run the script as each of the three hooks at once; {hook: CompletedProcess}."""
    settings = folder / "slurm.env"
    settings.write_text(
        f"IBDIAG={ibdiag}\nIBDIAG_DEADLINE={deadline}\nIBDIAG_STRICT={int(strict)}\n"
    )
    env = {
        "PATH": os.environ["PATH"],
        "IBDIAG_SLURM_ENV": str(settings),
        "SLURM_JOB_ID": "42",
        "SLURMD_NODENAME": "node1",
    }
    running = {
        hook: subprocess.Popen(
            [HOOK, hook], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for hook in HOOKS
    }
    done = {}
    for hook, process in running.items():
        stdout, stderr = process.communicate(timeout=60)
        done[hook] = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    return done


# The contract as the script's header documents it: ibdiag's exit -> (the prolog's and the
# epilog's exit, the health check's exit); "0|1": 1 only with IBDIAG_STRICT=1; "logged": the
# script logs one line saying why.
CONTRACT = {
    "0": ("0", "0"),
    "2": ("1", "0"),
    "3": ("0|1 logged", "0 logged"),
    "1": ("0|1 logged", "0 logged"),
    "126": ("0|1 logged", "0 logged"),
    "127": ("0|1 logged", "0 logged"),
    "128+N": ("0|1 logged", "0 logged"),
    "124, 137": ("1 logged", "0 logged"),
    "other": ("0|1 logged", "0 logged"),
}
_CONTRACT_ROW = re.compile(
    r"^#   (\d+(?:, \d+)*|\d+\+N|other)\s{2,}(\S+(?: logged)?)\s{2,}(\S+(?: logged)?)\s{2,}\S"
)

# Each case: (the row of the contract, what the stub does, the line the script logs).
CASES = {
    "0 go on": ("0", "exit 0", None),
    "2 sick": ("2", "exit 2", None),
    "3 could not run as configured": (
        "3",
        "echo 'ibdiag: error: no such profile' >&2; exit 3",
        "ibdiag could not run as configured (exit 3, see its error above)",
    ),
    "1 Python failed": (
        "1",
        "echo 'ModuleNotFoundError: No module named pydantic' >&2; exit 1",
        "ibdiag failed (exit 1: Python itself, e.g. a broken virtualenv; see above)",
    ),
    "126 not executable": ("126", None, "is not executable (exit 126)"),
    "127 not found": ("127", None, "was not found (exit 127)"),
    "134 crashed": ("128+N", "kill -ABRT $$", "ibdiag was killed by signal 6 (exit 134)"),
    "137 killed at once": (
        "128+N",
        "kill -KILL $$",
        "ibdiag was killed by signal 9 (exit 137; the OOM killer?)",
    ),
    "5 not ibdiag's": ("other", "exit 5", "exited 5, which ibdiag never does"),
}


def test_the_script_documents_the_contract_these_tests_drive():
    """The table in the script's header is the one every test below checks, row for row."""
    header = Path(HOOK).read_text().split("\nset -u\n", 1)[0]
    rows = {}
    for line in header.splitlines():
        found = _CONTRACT_ROW.match(line)
        if found:
            rows[found.group(1)] = (found.group(2), found.group(3))
    assert rows == CONTRACT
    assert {row for row, _, _ in CASES.values()} | {"124, 137"} == set(CONTRACT)


def test_the_command_documents_the_same_answers():
    from ibdiag.cli import slurm as commands
    from ibdiag.slurm import hooks

    assert (hooks.GO_ON, hooks.SICK) == (0, 2)
    for answer in ("- 0 go on", "- 2 sick", "- 3 ibdiag could not run as configured"):
        assert answer in commands.__doc__, answer


def script_lines(done, hook):
    """The lines the script itself logged ("ibdiag: slurm HOOK: ..."; ibdiag's own lines say
    "ibdiag: slurm HOOK on NODE: ...")."""
    return [line for line in done.stderr.splitlines() if line.startswith(f"ibdiag: slurm {hook}: ")]


def _stub_for(case: str, body, folder: Path) -> Path:
    if case.startswith("126"):
        stub = stub_ibdiag(folder, "exit 0")
        stub.chmod(0o644)  # no x bit at all: not even root may run it
        return stub
    if case.startswith("127"):
        return folder / "no-such-ibdiag"
    return stub_ibdiag(folder, body)


def _expected(outcome: str, strict: bool) -> int:
    code = outcome.split()[0]
    return int(code.split("|")[1 if strict else 0]) if "|" in code else int(code)


@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict"])
@pytest.mark.parametrize("case", list(CASES))
def test_every_exit_of_ibdiag_through_the_script(tmp_path, case, strict):
    """Each value ibdiag (here a stub) can exit with, for each hook, with and without
    IBDIAG_STRICT=1: what Slurm sees and what the script logs. A configuration slip or a
    broken install never drains the cluster; strict fails the prolog and epilog instead."""
    row, body, message = CASES[case]
    done = run_hooks_with(_stub_for(case, body, tmp_path), tmp_path, strict=strict)
    for hook in HOOKS:
        outcome = CONTRACT[row][1 if hook == "healthcheck" else 0]
        assert done[hook].returncode == _expected(outcome, strict), (hook, done[hook])
        logged = script_lines(done[hook], hook)
        if "logged" not in outcome:
            assert done[hook].stderr == "", (hook, done[hook].stderr)  # ibdiag said it all
            continue
        assert len(logged) == 1 and message in logged[0], (hook, done[hook].stderr)
        assert logged[0].endswith("; failing (IBDIAG_STRICT=1)" if strict else "; ignored")
    argvs = {hook: tmp_path / f"argv.{hook}" for hook in HOOKS}
    if not case.startswith(("126", "127")):  # the stub ran, for the hook named
        for hook, path in argvs.items():
            argv = path.read_text().splitlines()
            assert argv[:2] == ["slurm", hook] and ("--strict" in argv) is strict, argv


@pytest.mark.parametrize(
    "code, body, elapsed",
    [
        pytest.param("124", "exec sleep 60", 5, id="124 stopped by SIGTERM"),
        pytest.param("137", "trap '' TERM; sleep 60", 7, id="137 killed after ignoring SIGTERM"),
    ],
)
def test_a_hung_ibdiag_is_killed_and_fails_the_prolog_and_epilog(tmp_path, code, body, elapsed):
    """Hung past IBDIAG_DEADLINE + 5 s (here 0 + 5): killed, and the prolog and epilog fail,
    strict or not: a node that cannot run a short program to its end takes no jobs."""
    started = time.monotonic()
    done = run_hooks_with(stub_ibdiag(tmp_path, body), tmp_path)
    assert elapsed <= time.monotonic() - started < elapsed + 5
    for hook in HOOKS:
        outcome = CONTRACT["124, 137"][1 if hook == "healthcheck" else 0]
        assert done[hook].returncode == _expected(outcome, False), (hook, done[hook])
        message = f"ibdiag: slurm {hook}: ibdiag did not finish within 5 s and was killed"
        assert f"{message} (exit {code})" in done[hook].stderr, done[hook].stderr


# -- the exit contract with the real ibdiag ------------------------------------------------------


def run_ibdiag_slurm(node, hook, sysfs, *options):
    """`ibdiag slurm HOOK` itself, without the script."""
    argv = [IBDIAG, "slurm", hook, "--node", "node1", "--sysfs", sysfs,
            "--scontrol", node["scontrol"].path, "--state-dir", str(node["state_dir"]),
            "--deadline", "6", "--scontrol-timeout", "1", *options]  # fmt: skip
    if hook != "healthcheck":
        argv += ["--job-id", "42"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def test_healthcheck_on_a_warning_node_exits_0_and_the_script_logs_no_failure(node):
    """A WARNING is the verdict's Nagios 1 in `ibdiag check`, never in `ibdiag slurm`: the
    script took that 1 for a broken Python on every health check of such a node."""
    direct = run_ibdiag_slurm(node, "healthcheck", FLAPPING)
    assert direct.returncode == 0, direct.stderr
    done = run_hook(node, "healthcheck", sysfs=FLAPPING)
    assert done.returncode == 0
    assert "WARNING: ibdiag: mlx5_6:1 netdev.operstate down" in done.stderr
    assert script_lines(done, "healthcheck") == [], done.stderr
    assert node["scontrol"].updates() == []


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_exits_0_on_a_warning_node(node, hook):
    done = run_ibdiag_slurm(node, hook, FLAPPING)
    assert done.returncode == 0, done.stderr
    assert "WARNING" in done.stderr


def test_healthcheck_exits_0_once_it_drained_and_2_when_it_could_not(node):
    drained = run_ibdiag_slurm(node, "healthcheck", STUCK_INIT)
    assert drained.returncode == 0, drained.stderr
    assert node["scontrol"].node()["reason"] == STUCK_INIT_REASON
    node["scontrol"].set("IDLE", None)
    node["scontrol"].hang()
    undrained = run_ibdiag_slurm(node, "healthcheck", STUCK_INIT)
    assert undrained.returncode == 2, undrained.stderr
    assert "could not drain the node" in undrained.stderr
    through_script = run_hook(
        node, "healthcheck", sysfs=STUCK_INIT, deadline=4,
        extra="IBDIAG_ARGS+=(--scontrol-timeout 1)",
    )  # fmt: skip
    assert through_script.returncode == 0  # Slurm ignores it; the next health check retries
    assert script_lines(through_script, "healthcheck") == [], through_script.stderr


def test_a_node_ibdiag_cannot_judge_goes_on_and_strict_drains_it(node, tmp_path):
    """No InfiniBand and none expected: UNKNOWN. The hooks go on (exit 0, logged) unless
    IBDIAG_STRICT=1, which the script passes on as --strict: then the node is drained."""
    empty = tmp_path / "no-ib" / "sys"
    (empty / "class").mkdir(parents=True)
    for hook in HOOKS:
        done = run_hook(node, hook, sysfs=str(empty))
        assert done.returncode == 0, (hook, done.stderr)
        assert "UNKNOWN" in done.stderr and script_lines(done, hook) == [], done.stderr
    assert node["scontrol"].updates() == []
    strict = run_hook(node, "healthcheck", sysfs=str(empty), extra="IBDIAG_STRICT=1")
    assert strict.returncode == 0
    assert node["scontrol"].node()["reason"] == "ibdiag: could not judge the node"
    node["scontrol"].set("IDLE", None)
    strict = run_hook(node, "prolog", sysfs=str(empty), extra="IBDIAG_STRICT=1")
    assert strict.returncode == 1
    assert node["scontrol"].node()["reason"] == "ibdiag: could not judge the node"
