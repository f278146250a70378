"""contrib/nhc/ibdiag.nhc inside the real LBNL NHC (tests/vendor/nhc, run from source).

What an admin relies on: a sick node fails NHC with ibdiag's stable reason, a healthy one
passes, a warning or an "I could not judge" is logged and passes (unless IBDIAG_STRICT=1); a
node where ibdiag cannot run at all fails, naming what to set; ibdiag always ends before NHC's
own watchdog, with an ``ibdiag:`` reason; nothing it started outlives NHC.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest
from conftest import REPO, SCENARIOS_DIR
from nhc_run import IBDIAG, NHC_PATH, nhc_argv, nhc_conf_dir, run_nhc
from stubs import (
    StubBin,
    fails,
    hangs,
    ignores_sigterm,
    in_turn,
    marker,
    prints_text,
    processes_with,
    wait_no_strays,
)

GOOD = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-good", "root", "sys")
STUCK = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-2ports-stuck-INIT", "root", "sys")
FLAPPING = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-ib4-operstate-down-flapping", "root", "sys")
USE_IBDIAG = f"IBDIAG={IBDIAG}"


def test_the_ibdiag_under_test_is_installed():
    assert os.access(IBDIAG, os.X_OK), f"no console script {IBDIAG}: pip install -e '.[test]'"


# -- verdicts ------------------------------------------------------------------------------------


def test_failing_node_fails_nhc_with_the_stable_reason(tmp_path):
    run = run_nhc(tmp_path, [f"* || check_ibdiag --sysfs {STUCK}"], settings=[USE_IBDIAG])
    assert run.rc == 1, run.output
    assert run.failure == "ibdiag: mlx5_6:1 link.state 2: INIT and more"


def test_healthy_node_passes_silently(tmp_path):
    run = run_nhc(tmp_path, [f"* || check_ibdiag --sysfs {GOOD}"], settings=[USE_IBDIAG])
    assert (run.rc, run.output) == (0, "")


def test_warning_is_logged_and_passes(tmp_path):
    run = run_nhc(tmp_path, [f"* || check_ibdiag --sysfs {FLAPPING}"], settings=[USE_IBDIAG])
    assert run.rc == 0, run.output
    assert run.output == "check_ibdiag: warning: ibdiag: mlx5_6:1 netdev.operstate down\n"


def test_a_later_check_still_runs_after_a_pass(tmp_path):
    run = run_nhc(
        tmp_path,
        [f"* || check_ibdiag --sysfs {GOOD}", f"* || check_ibdiag --sysfs {STUCK}"],
        settings=[USE_IBDIAG],
    )
    assert run.rc == 1 and run.failure.startswith("ibdiag: mlx5_6:1 link.state"), run.output


def test_unknown_is_logged_not_fatal_unless_strict(tmp_path):
    empty = tmp_path / "empty-sys"
    empty.mkdir()
    run = run_nhc(tmp_path, [f"* || check_ibdiag --sysfs {empty}"], settings=[USE_IBDIAG])
    assert run.rc == 0, run.output
    assert run.output.startswith("check_ibdiag: could not judge the node (exit 3):")

    run = run_nhc(tmp_path, ["* || check_ibdiag --bogus-option"], settings=[USE_IBDIAG])
    assert run.rc == 0, run.output
    assert run.output.startswith("check_ibdiag: could not judge the node (exit 3): ibdiag: error:")
    assert "No such option" in run.output and "--bogus-option" in run.output

    strict = run_nhc(
        tmp_path, ["* || check_ibdiag --bogus-option"], settings=[USE_IBDIAG, "IBDIAG_STRICT=1"]
    )
    assert strict.rc == 1, strict.output
    assert strict.failure.startswith("ibdiag: could not judge the node: ibdiag: error: No such")


# -- A1: finding ibdiag where NHC looks -----------------------------------------------------------


def test_ibdiag_not_installed_where_nhc_looks_fails_the_node_naming_what_to_set(tmp_path):
    # nhc resets PATH; a pip install into a venv is on none of its directories.
    assert shutil.which("ibdiag", path=NHC_PATH) is None, "an ibdiag is installed on NHC's PATH"
    nowhere = tmp_path / "no-ibdiag-here"
    nowhere.mkdir()
    run = run_nhc(
        tmp_path,
        [f"* || check_ibdiag --sysfs {STUCK}"],
        settings=[f"IBDIAG_SEARCH_DIRS={nowhere}"],
    )
    assert run.rc == 1, run.output
    assert run.failure == (
        f"ibdiag: ibdiag not found on NHC PATH or in {nowhere}; install it there or set "
        "IBDIAG=/path/to/ibdiag in nhc.conf"
    )


def test_ibdiag_is_found_in_the_usual_install_directories(tmp_path):
    venv_bin = os.path.dirname(IBDIAG)
    search = f"IBDIAG_SEARCH_DIRS={tmp_path / 'absent'}:{venv_bin}"
    sick = run_nhc(tmp_path, [f"* || check_ibdiag --sysfs {STUCK}"], settings=[search])
    assert sick.rc == 1 and sick.failure.startswith("ibdiag: mlx5_6:1 link.state"), sick.output
    healthy = run_nhc(tmp_path, [f"* || check_ibdiag --sysfs {GOOD}"], settings=[search])
    assert (healthy.rc, healthy.output) == (0, "")


def test_the_default_search_directories_include_pip_and_the_readme_venv():
    script = Path(REPO) / "contrib" / "nhc" / "ibdiag.nhc"
    default = "/usr/local/bin:/usr/local/sbin:/opt/ibdiag/bin"
    assert f"IBDIAG_SEARCH_DIRS:-{default}" in script.read_text()


def test_ibdiag_set_in_nhc_conf_is_used(tmp_path):
    lines = [f"* || export IBDIAG={IBDIAG}", f"* || check_ibdiag --sysfs {STUCK}"]
    run = run_nhc(tmp_path, lines, settings=[f"IBDIAG_SEARCH_DIRS={tmp_path}"])
    assert run.rc == 1 and run.failure.startswith("ibdiag: mlx5_6:1 link.state"), run.output


def test_an_ibdiag_setting_that_is_not_executable_fails_naming_it(tmp_path):
    missing = tmp_path / "opt" / "bin" / "ibdiag"
    run = run_nhc(tmp_path, [f"* || check_ibdiag --sysfs {GOOD}"], settings=[f"IBDIAG={missing}"])
    assert run.rc == 1, run.output
    assert run.failure == (
        f"ibdiag: IBDIAG={missing} is not an executable file; set IBDIAG in nhc.conf to where "
        "ibdiag is installed"
    )


def test_a_broken_install_fails_instead_of_passing(tmp_path):
    stubs = StubBin(tmp_path / "stubs")
    # A venv whose interpreter is gone: the kernel cannot run the script's #! line.
    gone = stubs.bin / "ibdiag-moved-venv"
    gone.write_text("#!/nonexistent/venv/bin/python3\nimport ibdiag\n")
    gone.chmod(0o755)
    run = run_nhc(tmp_path, [f"* || check_ibdiag --sysfs {GOOD}"], settings=[f"IBDIAG={gone}"])
    assert run.rc == 1, run.output
    assert run.failure.startswith(f"ibdiag: cannot run {gone} (exit 127): ")

    # Python starts but ibdiag's imports fail: a traceback, exit 1, no verdict printed.
    crash = stubs.add(
        "ibdiag-crash",
        "echo 'Traceback (most recent call last):' >&2\n"
        "echo \"ModuleNotFoundError: No module named 'pydantic'\" >&2\nexit 1\n",
    )
    run = run_nhc(tmp_path, [f"* || check_ibdiag --sysfs {GOOD}"], settings=[f"IBDIAG={crash}"])
    assert run.rc == 1, run.output
    # no quote marks: NHC passes the message to its offline helper inside single quotes
    assert run.failure == (
        f"ibdiag: cannot run {crash} (exit 1): ModuleNotFoundError: No module named pydantic"
    )


# -- A2: the time limit ends before NHC's watchdog -------------------------------------------------


def _term_limit(nhc_timeout: int, ibdiag_timeout: int, elapsed_s: int) -> str:
    """check_ibdiag's time limit for ibdiag (contrib/nhc: 80% of what NHC's TIMEOUT leaves after
    ``elapsed_s`` whole seconds and half a second, capped by IBDIAG_TIMEOUT, at least 1.2 s,
    less the kill grace), in seconds as it prints them."""
    budget = (nhc_timeout * 10 - elapsed_s * 10 - 5) * 8 // 10
    if ibdiag_timeout and ibdiag_timeout * 10 < budget:
        budget = ibdiag_timeout * 10
    budget = max(budget, 12)
    term = max(budget - min(max(budget // 10, 2), 20), 10)
    return f"{term // 10}.{term % 10}"


@pytest.mark.parametrize(
    ("nhc_timeout", "settings", "limit"),
    [
        (5, [], "3.3"),  # 80% of the 4.5 s NHC leaves, less the 0.3 s kill grace
        (10, ["IBDIAG_TIMEOUT=25"], "6.9"),  # a longer IBDIAG_TIMEOUT is capped
        (10, ["IBDIAG_TIMEOUT=2"], "1.8"),  # a shorter one is kept
        (2, [], "1.0"),  # at least 1 s
    ],
)
def test_a_hung_ibdiag_times_out_with_an_ibdiag_reason_before_nhc_does(
    tmp_path, nhc_timeout, settings, limit
):
    stubs = StubBin(tmp_path / "stubs")
    mark = marker()
    hung = stubs.add("ibdiag", hangs(mark))
    start = time.monotonic()
    run = run_nhc(
        tmp_path,
        [f"* || check_ibdiag --sysfs {GOOD}"],
        timeout=nhc_timeout,
        settings=[f"IBDIAG={hung}", *settings],
    )
    elapsed = time.monotonic() - start
    assert run.rc == 1, run.output
    assert run.failure == "ibdiag: check timed out"
    assert "Script timed out" not in run.output and "watchdog" not in run.output
    # NHC's clock counts whole seconds: on a loaded machine its own start can take one, and
    # check_ibdiag then rightly leaves ibdiag less (what is left of TIMEOUT, not all of it).
    cap = next((int(s.split("=")[1]) for s in settings if s.startswith("IBDIAG_TIMEOUT=")), 0)
    assert limit == _term_limit(nhc_timeout, cap, elapsed_s=0)
    printed = re.search(r"did not finish within (\d+\.\d) s", run.output)
    assert printed, run.output
    assert printed.group(1) in {_term_limit(nhc_timeout, cap, e) for e in (0, 1, 2)}, run.output
    assert elapsed < nhc_timeout + 0.5
    assert wait_no_strays(mark, within=1.0) == []


def test_an_ibdiag_timeout_that_is_not_a_number_is_logged_and_ignored(tmp_path):
    lines = [f"* || check_ibdiag --sysfs {STUCK}"]
    run = run_nhc(tmp_path, lines, settings=[USE_IBDIAG, "IBDIAG_TIMEOUT=2m"])
    assert run.rc == 1, run.output
    assert run.output.startswith(
        "check_ibdiag: IBDIAG_TIMEOUT=2m is not a whole number of seconds; ignored\n"
    )
    assert run.failure == "ibdiag: mlx5_6:1 link.state 2: INIT and more"


# -- A3: nothing started by check_ibdiag outlives NHC ----------------------------------------------


def test_nothing_survives_a_hung_ibdiag_that_ignores_sigterm(tmp_path):
    stubs = StubBin(tmp_path / "stubs")
    mark = marker()
    hung = stubs.add("ibdiag", ignores_sigterm(mark))
    run = run_nhc(
        tmp_path, [f"* || check_ibdiag --sysfs {GOOD}"], timeout=5, settings=[f"IBDIAG={hung}"]
    )
    assert run.failure == "ibdiag: check timed out", run.output
    assert processes_with(mark) == [] or wait_no_strays(mark, within=1.0) == []


def _start_nhc(tmp_path: Path, conf_lines, timeout: int, settings) -> subprocess.Popen:
    confdir = nhc_conf_dir(tmp_path / "nhc", conf_lines)
    # NHC's log goes to a file: its watchdog (a sleep of TIMEOUT seconds, which NHC leaves
    # running when a signal ends it) would hold a pipe open.
    with open(tmp_path / "nhc.log", "wb") as log:
        return subprocess.Popen(  # its own session, as nhc makes itself and slurmd starts it
            nhc_argv(confdir, timeout, settings),
            cwd=str(tmp_path),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _wait_for_calls(stubs: StubBin, within: float = 10.0) -> None:
    end = time.monotonic() + within
    while not stubs.calls() and time.monotonic() < end:
        time.sleep(0.02)
    assert stubs.calls(), "the ibdiag stub never started"


def test_nothing_survives_when_nhc_is_stopped_from_outside(tmp_path):
    """slurmd, systemd or a Ctrl-C stop NHC by signalling its process group."""
    stubs = StubBin(tmp_path / "stubs")
    mark = marker()
    hung = stubs.add("ibdiag", ignores_sigterm(mark))
    nhc = _start_nhc(tmp_path, [f"* || check_ibdiag --sysfs {GOOD}"], 30, [f"IBDIAG={hung}"])
    try:
        _wait_for_calls(stubs)
        time.sleep(0.2)
        assert processes_with(mark), "the hung stub is not running"
        os.killpg(nhc.pid, signal.SIGTERM)
        rc = nhc.wait(timeout=10)
    finally:
        if nhc.poll() is None:
            os.killpg(nhc.pid, signal.SIGKILL)
            nhc.wait()
    output = (tmp_path / "nhc.log").read_text()
    assert rc == 143 and "Health check failed:  Terminated by signal SIGTERM." in output, output
    assert wait_no_strays(mark, within=2.0) == []


def test_nothing_survives_nhc_s_own_watchdog(tmp_path):
    """Earlier checks used up NHC's time: its watchdog (ALRM, TERM, KILL to its group) fires
    while ibdiag still runs its minimum second."""
    stubs = StubBin(tmp_path / "stubs")
    mark = marker()
    hung = stubs.add("ibdiag", ignores_sigterm(mark))
    lines = ["* || sleep 4", f"* || check_ibdiag --sysfs {GOOD}"]
    run = run_nhc(tmp_path, lines, timeout=5, settings=[f"IBDIAG={hung}"])
    assert run.rc != 0, run.output
    assert wait_no_strays(mark, within=2.0) == []


def test_level_standard_ends_on_its_own_deadline_inside_nhc_s_limit(tmp_path):
    """Every command hangs and ignores SIGTERM: ibdiag's --deadline (set by check_ibdiag from
    NHC's TIMEOUT) kills them and ibdiag still answers; nothing is left behind."""
    stubs = StubBin(tmp_path / "stubs")
    mark = marker()
    for tool in ("perfquery", "ethtool", "dmesg", "journalctl", "ibstat", "ibv_devinfo"):
        stubs.add(tool, ignores_sigterm(mark))
    wrapper = stubs.root / "ibdiag-with-stub-tools"
    wrapper.write_text(f'#!/bin/sh\nPATH={stubs.path}; export PATH\nexec {IBDIAG} "$@"\n')
    wrapper.chmod(0o755)
    start = time.monotonic()
    run = run_nhc(
        tmp_path,
        [f"* || check_ibdiag --level standard --sysfs {GOOD}"],
        timeout=10,
        settings=[f"IBDIAG={wrapper}"],
    )
    elapsed = time.monotonic() - start
    assert stubs.calls(), "no command ran"
    assert "timed out" not in run.failure, run.output
    assert "Script timed out" not in run.output
    assert elapsed < 10
    assert wait_no_strays(mark, within=2.0) == []


# -- A4: --state in a directory that does not exist yet -------------------------------------------


def test_state_directory_is_created_and_counters_are_graded_on_change(tmp_path):
    lib = tmp_path / "var-lib"
    lib.mkdir()
    state = lib / "ibdiag" / "nhc-state.json"
    line = f"* || check_ibdiag --sysfs {GOOD} --state {state}"
    first = run_nhc(tmp_path, [line], settings=[USE_IBDIAG])
    assert (first.rc, first.output) == (0, "")
    assert stat.S_IMODE(os.stat(state.parent).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o600
    saved = state.read_text()
    second = run_nhc(tmp_path, [line], settings=[USE_IBDIAG])
    assert (second.rc, second.output) == (0, "")
    assert state.read_text() != saved  # replaced by the second run's snapshot


def test_a_state_file_that_cannot_be_written_is_a_logged_warning(tmp_path):
    state = tmp_path / "no" / "such" / "dir" / "nhc-state.json"
    line = f"* || check_ibdiag --sysfs {GOOD} --state {state}"
    run = run_nhc(tmp_path, [line], settings=[USE_IBDIAG])
    assert run.rc == 0, run.output
    assert run.output == "check_ibdiag: warning: ibdiag: node counters.baseline\n"
    assert not state.parent.exists()


# -- held drains: a fault that does not heal by itself waits for an admin ------------------------
# (on a real slurmctld/slurmd: tests/slurm/test_nhc_slurm.py; here the cases a real one makes hard)

HELD = "ibdiag: held: mlx5_0:1 counters.port_errors link_downed"


def _slurm_stubs(tmp_path: Path, sinfo_body: str) -> tuple:
    """A stub sinfo (its body) and a stub scontrol that only logs; NHC_RM=slurm settings and
    the environment that gives them to NHC's helpers too (as /etc/sysconfig/nhc would)."""
    stubs = StubBin(tmp_path / "stubs")
    env = dict(
        os.environ,
        SLURM_SINFO=str(stubs.add("sinfo", sinfo_body)),
        SLURM_SCONTROL=str(stubs.add("scontrol", "exit 0\n")),
    )
    return stubs, [USE_IBDIAG, "NHC_RM=slurm", "MARK_OFFLINE=1"], env


def test_the_script_s_held_prefixes_are_ibdiag_s():
    from ibdiag.held import HELD_PREFIXES

    script = Path(REPO) / "contrib" / "nhc" / "ibdiag.nhc"
    line = re.search(r"^IBDIAG_NHC_HELD_PREFIXES=\((.*)\)$", script.read_text(), re.M)
    assert line, "no IBDIAG_NHC_HELD_PREFIXES=(...) line"
    assert tuple(re.findall(r'"([^"]*)"', line.group(1))) == HELD_PREFIXES


def test_a_held_node_keeps_its_reason_whatever_this_pass_finds(tmp_path):
    """Offline with NHC's held note: a clean pass, another fault, a broken ibdiag all fail
    with the held reason, so node-mark-online never resumes it and nothing replaces it."""
    stubs, settings, env = _slurm_stubs(tmp_path, prints_text(f"drain NHC: {HELD}"))
    crash = stubs.add("ibdiag-crash", "echo 'Traceback' >&2\nexit 1\n")
    for sysfs, ibdiag in ((GOOD, IBDIAG), (STUCK, IBDIAG), (GOOD, str(crash))):
        run = run_nhc(
            tmp_path,
            [f"* || check_ibdiag --sysfs {sysfs}"],
            settings=[*settings, f"IBDIAG={ibdiag}"],
            env=env,
        )
        assert run.rc == 1, run.output
        assert run.failure == HELD, run.output
        assert "stays drained until an admin resumes it" in run.output
    resumes = [call for call in stubs.calls() if "State=RESUME" in call]
    assert resumes == [], stubs.calls()
    assert f"Reason=NHC: {HELD}" in stubs.calls()[-1]  # node-mark-offline set it again


@pytest.mark.parametrize(
    ("note", "resumed"),
    [
        ("idle none", False),  # an admin resumed it: judged afresh, nothing to resume
        ("drain NHC: ibdiag: mlx5_6:1 link.state 2: INIT", True),  # not held: NHC resumes
        ("drain cable swap INC123", False),  # an admin's note: never NHC's to resume
    ],
)
def test_a_node_not_held_is_judged_by_this_pass(tmp_path, note, resumed):
    stubs, settings, env = _slurm_stubs(tmp_path, prints_text(note))
    run = run_nhc(tmp_path, [f"* || check_ibdiag --sysfs {GOOD}"], settings=settings, env=env)
    assert run.rc == 0 and "check_ibdiag" not in run.output, run.output
    assert any("State=RESUME" in call for call in stubs.calls()) == resumed, stubs.calls()


@pytest.mark.parametrize("how", ["fails", "hangs"])
def test_a_slurm_state_that_cannot_be_read_is_logged_and_never_drains_a_healthy_node(tmp_path, how):
    mark = marker()
    unreachable = fails("slurm_load_partitions: Unable to contact slurm controller")
    # hangs once, for check_ibdiag (NHC's own helpers would hang on it too, past its watchdog)
    hung = in_turn(hangs(mark), prints_text("idle none"), tmp_path / "sinfo-turns")
    _, settings, env = _slurm_stubs(tmp_path, hung if how == "hangs" else unreachable)
    start = time.monotonic()
    line = [f"* || check_ibdiag --sysfs {GOOD}"]
    run = run_nhc(tmp_path, line, timeout=8, settings=settings, env=env)
    # 80% of the 8 s NHC allows: a quarter of it at most for sinfo, ibdiag in what is left
    assert run.rc == 0, run.output
    assert "check_ibdiag: cannot read " in run.output and "may be resumed" in run.output
    why = r"timed out after [12]\.\d s" if how == "hangs" else "Unable to contact slurm controller"
    assert re.search(why, run.output), run.output
    assert time.monotonic() - start < 8
    assert wait_no_strays(mark, within=2.0) == []
    line = [f"* || check_ibdiag --sysfs {STUCK}"]
    sick = run_nhc(tmp_path, line, timeout=8, settings=settings, env=env)
    assert sick.failure == "ibdiag: mlx5_6:1 link.state 2: INIT and more", sick.output


def test_other_resource_managers_never_online_what_a_state_run_offlined(tmp_path):
    """NHC_RM=pbs: no note is read, so with --state NHC's onlining is off in check_ibdiag's
    passes; offlined nodes wait for an admin (pbsnodes -c)."""
    stubs = StubBin(tmp_path / "stubs")
    pbsnodes = stubs.add("pbsnodes", prints_text(f"node1 offline NHC: {HELD}"))
    env = dict(os.environ, PBSNODES=str(pbsnodes))
    settings = [USE_IBDIAG, "NHC_RM=pbs", "MARK_OFFLINE=1"]
    state = tmp_path / "state.json"
    for _ in range(2):
        run = run_nhc(tmp_path, [f"* || check_ibdiag --sysfs {GOOD} --state {state}"],
                      settings=settings, env=env)  # fmt: skip
        assert run.rc == 0, run.output
    assert [call for call in stubs.calls() if " -c" in call] == [], stubs.calls()
    # without --state or --baseline nothing held can vanish: NHC onlines as it always did
    run = run_nhc(tmp_path, [f"* || check_ibdiag --sysfs {GOOD}"], settings=settings, env=env)
    assert run.rc == 0 and any(" -c" in call for call in stubs.calls()), stubs.calls()
    # forked checks (nhc -f) cannot turn it off: said in the log, never silently
    forked = [*settings, "NHC_CHECK_FORKED=1"]
    run = run_nhc(tmp_path, [f"* || check_ibdiag --sysfs {GOOD} --state {state}"],
                  settings=forked, env=env)  # fmt: skip
    assert run.rc == 0 and "with forked checks (nhc -f): NHC may online" in run.output, run.output
