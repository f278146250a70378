"""``ibdiag fleet run``: one ``ibdiag check --json`` per node through one srun.

Unit tests of its pieces (``ibdiag.fleet.run``: the sinfo plan, the srun argv, status lines,
collecting what came back; ``ibdiag.fleet.node_task``: the per-node task and its time limit;
the pass-through of check options), the whole run against stand-in sinfo/srun programs, and
end to end through the real single-node Slurm of tests/slurm_cluster.py (real srun, sinfo,
slurmd), the node's check reading a scenario's sysfs tree through the passed-through --sysfs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import click
import pytest
from conftest import REPO, SCENARIOS_DIR
from slurm_cluster import MARKER_VARIABLE, SlurmCluster, write_script

from ibdiag.cli.fleet_run import validated_check_args
from ibdiag.fleet import node_task, run
from ibdiag.fleet.node import summarize
from ibdiag.fleet.run_record import STATUS_MARKER, SUMMARY_NAME, FleetRun, NodeStatus

GOOD = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-good", "root", "sys")
STUCK_INIT = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-2ports-stuck-INIT", "root", "sys")
PY = sys.executable
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def ibdiag_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SRUN_"))}
    env["PYTHONPATH"] = os.pathsep.join([REPO, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


def ibdiag(*args: str, env=None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PY, "-m", "ibdiag", *args],
        env=env or ibdiag_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def good_report() -> str:
    """A real report (level quick, the healthy scenario), as `ibdiag check --json` prints it."""
    done = ibdiag("check", "--json", "--sysfs", GOOD)
    assert done.returncode == 0, done.stderr
    return done.stdout


def status(node: str, **fields) -> NodeStatus:
    fields.setdefault("started_at", T0)
    fields.setdefault("ended_at", T0 + timedelta(seconds=2))
    return NodeStatus(node=node, **fields)


# --- the plan: which nodes srun is given ------------------------------------------------------


def test_sinfo_is_asked_for_the_nodes_or_the_partition_one_line_per_node():
    assert run.sinfo_argv("sinfo", "gpu[01-02]", None) == [
        "sinfo", "--noheader", "--Node", "--format=%N|%T", "--nodes=gpu[01-02]",
    ]  # fmt: skip
    assert run.sinfo_argv("/usr/bin/sinfo", None, "gpu")[-1] == "--partition=gpu"
    both = run.sinfo_argv("sinfo", "gpu01", "gpu")
    assert both[-2:] == ["--nodes=gpu01", "--partition=gpu"]


def test_nodes_slurm_cannot_run_are_kept_from_srun_with_their_state():
    # a node in two partitions is listed twice; flags: * not responding, ~ powered off
    text = (
        "gpu01|idle\ngpu02|drained\ngpu03|down*\ngpu01|idle\ngpu04|mixed\ngpu05|idle*\n"
        "gpu06|allocated\ngpu07|draining\ngpu08|idle~\n"
    )
    states = run.parse_sinfo(text)
    assert list(states) == [f"gpu0{n}" for n in range(1, 9)]
    asked = ["gpu01", "gpu02", "gpu03", "gpu04", "gpu05", "gpu06", "gpu07", "gpu08", "gpu99"]
    found = run.plan([*asked, "gpu01"], states)
    assert found.expected == asked  # each node once, in the order given
    assert found.to_run == ["gpu01", "gpu04", "gpu08"]
    assert found.not_run == {
        "gpu02": "not run: Slurm state drained",
        "gpu03": "not run: Slurm state down*",
        "gpu05": "not run: Slurm state idle*",
        "gpu06": "not run: Slurm state allocated (busy)",
        "gpu07": "not run: Slurm state draining",
        "gpu99": "not run: not a node known to Slurm (sinfo does not list it)",
    }
    partition = run.plan(None, states, "gpu")
    assert partition.expected == list(states)  # a partition: every node sinfo lists
    assert "in partition gpu" in run.plan(["x1"], {}, "gpu").not_run["x1"]


def test_busy_nodes_are_kept_from_srun_unless_included_and_mixed_ones_at_level_full():
    """srun allocates all its nodes or none: a node busy with jobs would hold every other
    node's check, so by default it is not run. Mixed (a job on some CPUs) is busy only for
    level full, which moves traffic; --include-busy gives srun every runnable node."""
    states = run.parse_sinfo(
        "n1|idle\nn2|allocated\nn3|mixed\nn4|allocated$\nn5|allocated*\nn6|completing\n"
    )
    nodes = list(states)
    assert run.busy_states("quick") == run.busy_states("standard") == {"allocated"}
    assert run.busy_states("full") == {"allocated", "mixed"}
    assert run.busy_states("full", include_busy=True) == set()
    for level, to_run in [
        ("quick", ["n1", "n3", "n6"]),
        ("standard", ["n1", "n3", "n6"]),
        ("full", ["n1", "n6"]),
    ]:
        found = run.plan(nodes, states, busy=run.busy_states(level))
        assert found.to_run == to_run, level
        assert found.not_run["n2"] == "not run: Slurm state allocated (busy)"
        assert found.not_run["n4"] == "not run: Slurm state allocated$ (busy)"  # in a maint resv
        assert found.not_run["n5"] == "not run: Slurm state allocated*"  # not responding
    assert run.plan(nodes, states, busy=run.busy_states("full")).not_run["n3"] == (
        "not run: Slurm state mixed (busy)"
    )
    included = run.plan(nodes, states, busy=run.busy_states("full", include_busy=True))
    assert included.to_run == ["n1", "n2", "n3", "n4", "n6"]
    assert included.not_run == {"n5": "not run: Slurm state allocated*"}


# --- the srun command -------------------------------------------------------------------------


def test_srun_argv_one_task_per_listed_node_with_slurm_limits_past_the_node_limit():
    task = run.node_task_argv(
        [PY, "-m", "ibdiag"], "/shared/ib", 60, ("--level", "standard", "--sysfs", "/s")
    )
    assert task == [
        PY, "-m", "ibdiag", "fleet", "node-task", "--out-dir=/shared/ib", "--timeout=60", "--",
        "--level", "standard", "--sysfs", "/s",
    ]  # fmt: skip
    argv = run.srun_argv("/usr/bin/srun", ["gpu01", "gpu02", "gpu07"], task, 60)
    # 60 s + 10 s SIGTERM grace + 5 s after SIGKILL + 60 s slack = 135 s: 3 minutes
    assert argv == [
        "/usr/bin/srun", "--job-name=ibdiag-fleet", "--nodes=3", "--ntasks=3",
        "--ntasks-per-node=1", "--nodelist=gpu01,gpu02,gpu07", "--time=3", "--wait=135",
        "--kill-on-bad-exit=0", "--no-kill", "--immediate=300", *task,
    ]  # fmt: skip
    assert all(isinstance(item, str) for item in argv)


def test_srun_argv_partition_time_limit_and_extra_srun_options():
    task = run.node_task_argv([PY, "-m", "ibdiag"], "/d", 900, ("--level", "full"))
    argv = run.srun_argv("srun", ["n1"], task, 900, "gpu", ("--reservation=maint",),
                         allocation_wait_s=0)  # fmt: skip
    assert "--partition=gpu" in argv
    assert "--time=17" in argv and "--wait=975" in argv  # 900 + 75 s: 16.25 min, rounded up
    assert argv[argv.index("--no-kill") + 1] == "--reservation=maint"  # before the task
    assert not [arg for arg in argv if arg.startswith("--immediate")]  # 0: wait for good
    assert "--exclusive" not in argv  # only where asked: level full's traffic tests
    full = run.srun_argv("srun", ["n1"], task, 900, exclusive=True)
    assert full[full.index("--no-kill") + 2] == "--exclusive" and full[-len(task) :] == task
    assert argv[-len(task) :] == task
    with pytest.raises(ValueError):
        run.srun_argv("srun", [], task, 60)


def test_a_node_list_too_long_for_one_argument_goes_to_srun_as_a_file():
    nodes = [f"gpu-rack{n // 100:03d}-node{n:05d}" for n in range(8000)]
    assert run.needs_nodelist_file(nodes) and not run.needs_nodelist_file(nodes[:100])
    path = run.write_nodelist_file(nodes)
    try:
        assert Path(path).read_text().split() == nodes
        argv = run.srun_argv("srun", nodes, ["task"], 60, nodelist=path)
        assert f"--nodelist={path}" in argv and "/" in path  # srun reads a value with / as a file
        assert "--nodes=8000" in argv
    finally:
        os.unlink(path)


# --- status lines -----------------------------------------------------------------------------


def test_status_lines_are_found_amid_noise_and_broken_ones_are_not_statuses():
    sent = status("gpu01", rc=2, verdict="CRITICAL", report="gpu01.json", size=10)
    line = sent.line()
    assert line.startswith(STATUS_MARKER) and "\n" not in line
    assert run.parse_status_line(line) == sent
    assert run.parse_status_line("0: " + line) == sent  # a --label prefix
    assert run.parse_status_line(line[:-5]) is None  # cut short
    assert run.parse_status_line("srun: error: gpu01: task 0: Exited with exit code 1") is None
    assert run.parse_status_line(STATUS_MARKER + ' {"node": "x"}') is None


# --- collecting what came back ----------------------------------------------------------------


def test_collect_names_every_node_that_did_not_answer_and_why(tmp_path, good_report):
    out = str(tmp_path)
    (tmp_path / "ok1.json").write_text(good_report)
    (tmp_path / "lost-status.json").write_text(good_report)  # answered, its line lost
    (tmp_path / "truncated.json").write_text(good_report[: len(good_report) // 2])
    (tmp_path / "foreign.json").write_text('{"hello": 1}')
    (tmp_path / "short.json").write_text(good_report[:100])
    size = len(good_report.encode())
    statuses = {
        "ok1": status("ok1", rc=0, verdict="OK", report="ok1.json", size=size),
        "timed-out": status("timed-out", timed_out=True, error="check still running ..."),
        "not-shared": status("not-shared", rc=0, verdict="OK", report="not-shared.json", size=5),
        "short": status("short", rc=0, verdict="OK", report="short.json", size=size),
    }
    expected = [
        "ok1", "lost-status", "truncated", "foreign", "silent", "timed-out", "not-shared",
        "short", "drained",
    ]  # fmt: skip
    outcomes = run.collect(
        out,
        expected,
        {"drained": "not run: Slurm state drained"},
        statuses,
        "no answer: srun exited 1",
        visible_within_s=0,
    )
    by_node = {outcome.node: outcome for outcome in outcomes}
    assert [outcome.node for outcome in outcomes] == expected
    assert by_node["ok1"].answered and by_node["ok1"].rc == 0
    assert by_node["ok1"].duration_s == 2.0 and by_node["ok1"].started_at == T0
    assert by_node["lost-status"].answered and by_node["lost-status"].verdict == "OK"
    assert by_node["lost-status"].rc is None  # the node never said
    reasons = {node: outcome.reason for node, outcome in by_node.items() if not outcome.answered}
    assert set(reasons) == set(expected) - {"ok1", "lost-status"}
    assert reasons["truncated"].startswith("truncated.json is unreadable: not JSON")
    assert reasons["foreign"] == (
        "foreign.json is unreadable: not an ibdiag report (no verdict, results and snapshot)"
    )
    assert reasons["silent"] == "no answer: srun exited 1"
    assert reasons["timed-out"] == "check still running ..."
    assert "no such file here: is it on a filesystem every node mounts" in reasons["not-shared"]
    assert reasons["short"] == f"its report short.json has 100 bytes here, the node wrote {size}"
    assert reasons["drained"] == "not run: Slurm state drained"
    assert all("\n" not in reason for reason in reasons.values())


def test_a_report_the_shared_filesystem_shows_late_is_waited_for(tmp_path, good_report):
    sent = status("n1", rc=0, verdict="OK", report="n1.json", size=len(good_report))
    temp = tmp_path / ".ibdiag-late.tmp"
    temp.write_text(good_report)
    move = f"os.replace({str(temp)!r}, {str(tmp_path / 'n1.json')!r})"
    appear = subprocess.Popen([PY, "-c", f"import os, time; time.sleep(1); {move}"])
    try:
        [found] = run.collect(str(tmp_path), ["n1"], {}, {"n1": sent}, "", visible_within_s=10)
    finally:
        appear.wait()
    assert found.answered, found.reason


def test_exit_code_says_how_complete_the_collection_is():
    yes = run.NodeOutcome(node="a", answered=True, rc=2)  # CRITICAL is an answer
    no = run.NodeOutcome(node="b", answered=False, reason="x")
    assert run.exit_code([yes, yes]) == 0
    assert run.exit_code([yes, no]) == 1
    assert run.exit_code([no, no]) == 3
    assert run.exit_code([yes, yes], interrupted=True) == 3


def test_why_nodes_that_were_run_said_nothing_comes_from_srun():
    said = ["srun: job 5 queued", "srun: error: Unable to allocate resources: Invalid node"]
    assert run.no_answer_reason(1, said) == (
        "no answer: its task never ran, or died before it could say; srun exited 1: srun: "
        "error: Unable to allocate resources: Invalid node"
    )
    assert run.no_answer_reason(None, ["cannot start srun: Permission denied"]) == (
        "no answer: srun did not start (cannot start srun: Permission denied)"
    )


def test_the_output_directory_must_be_new_or_empty(tmp_path):
    fresh = tmp_path / "a" / "b"
    assert run.prepare_out_dir(str(fresh)) == str(fresh) and fresh.is_dir()
    (fresh / ".ibdiag-x.tmp").write_text("a killed run's temp file")
    assert run.prepare_out_dir(str(fresh)) == str(fresh)
    (fresh / "gpu01.json").write_text("{}")
    with pytest.raises(run.RunError, match=r"is not empty .* e\.g\. gpu01\.json"):
        run.prepare_out_dir(str(fresh))
    (tmp_path / "file").write_text("")
    with pytest.raises(run.RunError, match="cannot use"):
        run.prepare_out_dir(str(tmp_path / "file"))


# --- the per-node task ------------------------------------------------------------------------


def children_of(pid_file: Path) -> int:
    for _ in range(50):
        if pid_file.exists() and pid_file.read_text().strip():
            return int(pid_file.read_text())
        time.sleep(0.1)
    raise AssertionError(f"{pid_file} never written")


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_the_task_publishes_the_report_under_the_node_name(tmp_path):
    sent = node_task.run_task(
        "gpu01", str(tmp_path), node_task.check_argv(PY, ["--sysfs", STUCK_INIT]), 60
    )
    assert (sent.report, sent.rc, sent.verdict, sent.error) == ("gpu01.json", 2, "CRITICAL", "")
    assert os.listdir(tmp_path) == ["gpu01.json"]  # no temp file left
    report = tmp_path / "gpu01.json"
    assert sent.size == report.stat().st_size and report.stat().st_mode & 0o777 == 0o644
    assert summarize(json.loads(report.read_text()), str(report)).verdict == "CRITICAL"
    assert sent.started_at <= sent.ended_at


def test_a_hung_check_is_stopped_at_the_node_limit_with_what_it_started(tmp_path):
    pid_file = tmp_path / "child.pid"
    hang = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "print('{\"partial\": ', flush=True)\n"
        "time.sleep(600)\n"
    )
    out = tmp_path / "out"
    out.mkdir()
    started = time.monotonic()
    sent = node_task.run_task("gpu02", str(out), [PY, "-c", hang], timeout_s=2, grace_s=5)
    took = time.monotonic() - started
    assert sent.timed_out and sent.report is None and sent.rc is None
    assert sent.error == "check still running after the node time limit (2 s): stopped"
    assert 2 <= took < 6, took
    assert os.listdir(out) == []  # the partial output was never published
    assert not alive(children_of(pid_file))  # its whole process group went with it


def test_a_check_that_ignores_sigterm_is_killed_after_the_grace(tmp_path):
    stubborn = (
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(600)\n"
    )
    started = time.monotonic()
    sent = node_task.run_task("n", str(tmp_path), [PY, "-c", stubborn], 1, grace_s=1)
    assert time.monotonic() - started < 5
    assert sent.timed_out
    assert sent.error.endswith("killed (it ignored SIGTERM for 1 s)")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "program, rc, error",
    [
        pytest.param(
            "print('{\"verdict\": \"OK\", \"snapsh')", 0,
            "check exited 0 without a report (its output is not JSON: ", id="truncated",
        ),
        pytest.param(
            "import sys; print('[]'); sys.exit(1)", 1,
            "check exited 1 without a report (not an ibdiag report (a JSON list))",
            id="foreign",
        ),
        pytest.param(
            "import sys; sys.stderr.write('boom\\nTraceback: last words\\n'); sys.exit(70)", 70,
            "check exited 70: Traceback: last words", id="crashed",
        ),
        pytest.param(
            "import os, signal; os.kill(os.getpid(), signal.SIGKILL)", -9,
            "check exited -9", id="killed",
        ),
    ],
)  # fmt: skip
def test_a_check_without_a_report_publishes_nothing_and_says_why(tmp_path, program, rc, error):
    sent = node_task.run_task("n", str(tmp_path), [PY, "-c", program], 30)
    assert (sent.rc, sent.report) == (rc, None)
    assert sent.error.startswith(error), sent.error
    assert "\n" not in sent.error
    assert os.listdir(tmp_path) == []


def test_a_usage_error_of_the_real_check_is_the_nodes_answer_line(tmp_path):
    argv = node_task.check_argv(PY, ["--sysfs", str(tmp_path / "no-such-sys")])
    sent = node_task.run_task("n", str(tmp_path), argv, 60)
    assert sent.rc == 3 and sent.report is None
    assert sent.error.startswith("check exited 3 without a report (it printed nothing): ibdiag:")
    assert "no-such-sys' does not exist" in sent.error


def test_the_task_says_when_it_cannot_write_dir_or_name_the_file(tmp_path):
    missing = node_task.run_task("n", str(tmp_path / "not-mounted"), [PY, "-c", "pass"], 5)
    assert missing.error.startswith(f"cannot write into {tmp_path / 'not-mounted'}: No such")
    assert "every node mounts at the same path" in missing.error
    for bad in ("../escape", ".hidden", "a/b", ""):
        sent = node_task.run_task(bad, str(tmp_path), [PY, "-c", "pass"], 5)
        assert "cannot name a report file" in sent.error and sent.report is None
    assert os.listdir(tmp_path) == []


def test_node_task_command_prints_one_status_line(tmp_path):
    env = ibdiag_env(SLURMD_NODENAME="gpu09")
    done = ibdiag(
        "fleet", "node-task", f"--out-dir={tmp_path}", "--timeout=60", "--", "--sysfs", GOOD,
        env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [line] = done.stdout.splitlines()
    sent = run.parse_status_line(line)
    assert sent is not None and (sent.node, sent.rc, sent.report) == ("gpu09", 0, "gpu09.json")
    assert sorted(os.listdir(tmp_path)) == ["gpu09.json"]
    failed = ibdiag("fleet", "node-task", f"--out-dir={tmp_path}", "--timeout=60", "--",
                    "--sysfs", str(tmp_path / "none"), env=env)  # fmt: skip
    assert failed.returncode == 1
    assert run.parse_status_line(failed.stdout).error.startswith("check exited 3")


# --- check options passed through -------------------------------------------------------------


def test_check_options_are_passed_through_and_checked_once_here():
    args = ("--sysfs", "/host/sys", "--profile=dgx-h100", "--ignore-hca", "mlx5_an*",
            "--deadline", "20", "--baseline", "/var/lib/ibdiag/base.json")  # fmt: skip
    assert validated_check_args(args) == args
    for bad, message in [
        (("--json",), "--json is not passed to the nodes' check"),
        (("-o", "x.json"), "-o is not passed"),
        (("--level=full",), "--level is not passed"),
        (("--nope",), "no such option: --nope"),
        (("/host/sys",), "unexpected argument '/host/sys'"),
        (("--sysfs",), "--sysfs needs a value"),
    ]:
        with pytest.raises(click.UsageError, match=re.escape(message)):
            validated_check_args(bad)


# --- the whole run, with stand-in Slurm programs ----------------------------------------------


def fake_slurm(tmp_path: Path, sinfo_lines: str, srun_body: str):
    """A sinfo printing ``sinfo_lines`` and an srun running ``srun_body`` (Python, argv in
    ``argv``), which records its argv in srun.argv."""
    record = tmp_path / "srun.argv"
    sinfo = write_script(tmp_path / "bin" / "sinfo", f"#!/bin/sh\nprintf '{sinfo_lines}'\n")
    srun = write_script(
        tmp_path / "bin" / "srun",
        f"#!{PY}\nimport json, sys, time\nargv = sys.argv[1:]\n"
        f"open({str(record)!r}, 'w').write(json.dumps(argv))\n{srun_body}\n",
    )
    return str(sinfo), str(srun), record


def test_the_run_with_stand_in_slurm_nodes_down_srun_failing(tmp_path):
    body = "print('srun: error: Unable to allocate resources: oops', file=sys.stderr)\nsys.exit(1)"
    sinfo, srun, record = fake_slurm(tmp_path, "gpu01|idle\\ngpu02|down*\\n", body)
    out = tmp_path / "out"
    done = ibdiag(
        "fleet", "run", "--nodes", "gpu[01-03]", "-o", str(out), "--level", "standard",
        "--srun", srun, "--sinfo", sinfo, "--srun-arg=--reservation=maint",
        "--wait-for-nodes=60",
        "--profile", "generic",
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    argv = json.loads(record.read_text())
    assert "--nodelist=gpu01" in argv and "--nodes=1" in argv and "--reservation=maint" in argv
    assert "--immediate=60" in argv
    assert argv[argv.index("--") + 1 :] == ["--level", "standard", "--profile", "generic"]
    lines = done.stderr.splitlines()
    assert lines == [
        "srun: error: Unable to allocate resources: oops",  # passed on as it came
        "ibdiag: fleet run: gpu01: never answered: no answer: its task never ran, or died "
        "before it could say; srun exited 1: srun: error: Unable to allocate resources: oops",
        "ibdiag: fleet run: gpu02: never answered: not run: Slurm state down*",
        "ibdiag: fleet run: gpu03: never answered: not run: not a node known to Slurm (sinfo "
        "does not list it)",
    ]
    summary = FleetRun.model_validate_json((out / SUMMARY_NAME).read_text())
    assert summary.srun_rc == 1 and summary.exit_code == 3 and summary.expected == 3
    assert summary.never_answered_nodes == ["gpu01", "gpu02", "gpu03"]
    assert summary.srun_messages == ["srun: error: Unable to allocate resources: oops"]
    assert done.stdout.startswith("ibdiag fleet run: 0 of 3 nodes answered in ")


def test_the_run_keeps_busy_nodes_from_srun_unless_included(tmp_path):
    body = "print('srun: error: Unable to allocate resources: oops', file=sys.stderr)\nsys.exit(1)"
    sinfo, srun, record = fake_slurm(
        tmp_path, "gpu01|idle\\ngpu02|allocated\\ngpu03|mixed\\n", body
    )
    busy = "ibdiag: fleet run: {}: never answered: not run: Slurm state {} (busy)"
    for level, extra, nodelist, kept in [
        ("standard", (), "gpu01,gpu03", [("gpu02", "allocated")]),
        ("full", (), "gpu01", [("gpu02", "allocated"), ("gpu03", "mixed")]),
        ("full", ("--include-busy",), "gpu01,gpu02,gpu03", []),
    ]:
        out = tmp_path / f"out-{level}-{len(extra)}"
        done = ibdiag(
            "fleet", "run", "--nodes", "gpu[01-03]", "-o", str(out), "--level", level, *extra,
            "--srun", srun, "--sinfo", sinfo,
        )  # fmt: skip
        assert done.returncode == 3, done.stderr
        assert f"--nodelist={nodelist}" in json.loads(record.read_text()), (level, extra)
        lines = done.stderr.splitlines()
        assert [line for line in lines if "not run" in line] == [busy.format(*k) for k in kept]
        summary = FleetRun.model_validate_json((out / SUMMARY_NAME).read_text())
        assert summary.never_answered_nodes == ["gpu01", "gpu02", "gpu03"]


def test_the_nodes_run_the_installed_ibdiag_by_default_or_the_python_given(tmp_path):
    """Not the launcher's interpreter (a venv a compute node may not have): README's node
    install, /opt/ibdiag/bin/ibdiag, on every node (issue 21)."""
    body = "sys.exit(1)"
    sinfo, srun, record = fake_slurm(tmp_path, "gpu01|idle\\n", body)
    task = ["fleet", "node-task"]
    for extra, program in [
        ((), ["/opt/ibdiag/bin/ibdiag"]),
        (("--ibdiag", "/site/ibdiag"), ["/site/ibdiag"]),
        (("--python", "/opt/py/bin/python3"), ["/opt/py/bin/python3", "-m", "ibdiag"]),
    ]:
        out = tmp_path / f"out-{len(extra)}-{len(program)}"
        done = ibdiag(
            "fleet", "run", "--nodes", "gpu01", "-o", str(out), *extra,
            "--srun", srun, "--sinfo", sinfo,
        )  # fmt: skip
        assert done.returncode == 3, done.stderr
        argv = json.loads(record.read_text())
        start = argv.index("fleet") - len(program)
        assert argv[start : start + len(program) + 2] == program + task, argv
        assert PY not in argv or extra
    both = ibdiag("fleet", "run", "--nodes", "gpu01", "-o", str(tmp_path / "b"),
                  "--ibdiag", "/a", "--python", "/b")  # fmt: skip
    assert both.returncode == 3 and "not both" in both.stderr


def test_sinfo_names_are_node_names_or_host_lists_and_nothing_else():
    """sinfo without --Node writes host lists; a name that is neither a node name nor a host
    list of them is left out (and said), never a node expected by that name (issue 21)."""
    odd: list = []
    states = run.parse_sinfo("gpu[003-005]|idle\na,b|drained\nx y|idle\ngpu[1-|idle\n", odd)
    assert states == {
        "gpu003": "idle", "gpu004": "idle", "gpu005": "idle", "a": "drained", "b": "drained",
    }  # fmt: skip
    assert odd == ["x y", "gpu[1-"]


def test_sinfo_runs_through_the_one_runner_and_each_failure_is_one_line(tmp_path, monkeypatch):
    """sinfo is a command like any other: started by ``ibdiag.runner.command_runner.Runner`` (its
    process tree killed with it, its output capped); what went wrong is one RunError line."""
    from ibdiag.runner import command_runner as commands

    started = []
    real_run = commands.Runner.run

    def recording(self, argv):
        started.append(list(argv))
        return real_run(self, argv)

    monkeypatch.setattr(commands.Runner, "run", recording)
    monkeypatch.setattr(run, "SINFO_TIMEOUT_S", 1.0)
    sinfo = write_script(tmp_path / "sinfo", "#!/bin/sh\nprintf 'gpu01|idle\\ngpu02|down*\\n'\n")
    request = run.RunRequest(out_dir=str(tmp_path / "o"), hostlist="gpu[01-02]", sinfo=str(sinfo))
    assert run._slurm_states(request) == {"gpu01": "idle", "gpu02": "down*"}
    assert started == [run.sinfo_argv(str(sinfo), "gpu[01-02]", None)]
    cases = {
        "#!/bin/sh\necho 'sinfo: error: no such partition' >&2\nexit 1\n": "exited 1: sinfo: "
        "error: no such partition",
        "#!/bin/sh\nexec sleep 30\n": "did not answer in 1 s",
    }
    for n, (text, message) in enumerate(cases.items()):
        script = write_script(tmp_path / f"sinfo{n}", text)
        with pytest.raises(run.RunError, match=re.escape(f"{script} {message}")):
            run._slurm_states(request._replace(sinfo=str(script)))
    missing = str(tmp_path / "nowhere" / "sinfo")
    with pytest.raises(run.RunError, match=f"cannot run {re.escape(missing)}: No such file"):
        run._slurm_states(request._replace(sinfo=missing))


def test_nodes_that_are_no_node_names_are_a_usage_error(tmp_path):
    sinfo, srun, _ = fake_slurm(tmp_path, "gpu01|idle\\n", "")
    done = ibdiag("fleet", "run", "--nodes", "gpu01,bad name", "-o", str(tmp_path / "o"),
                  "--srun", srun, "--sinfo", sinfo)  # fmt: skip
    assert done.returncode == 3 and len(done.stderr.splitlines()) == 1
    assert "--nodes: 'bad name' cannot be a node name" in done.stderr


def test_srun_still_running_after_every_node_answered_is_stopped(tmp_path, monkeypatch):
    sent = status("gpu01", rc=0, verdict="OK", report="gpu01.json", size=2)
    body = f"print({sent.line()!r}, flush=True)\nprint('stray output', flush=True)\ntime.sleep(600)"
    _, srun, _ = fake_slurm(tmp_path, "", body)
    messages = []
    started = time.monotonic()
    launched = run.launch([srun], ["gpu01"], messages.append, all_answered_grace_s=0.5)
    assert time.monotonic() - started < 10
    assert launched.statuses == {"gpu01": sent} and launched.rc == -15
    assert messages[0] == "stray output" and "srun still running" in messages[-1]


def test_usage_errors_are_one_line_exit_3(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "old.json").write_text("{}")
    sinfo, srun, _ = fake_slurm(tmp_path, "n1|idle\\n", "")
    cases = [
        (["-o", str(tmp_path / "x")], "give --nodes HOSTLIST or --partition NAME"),
        (["--nodes", "n1", "-o", str(tmp_path / "full"), "--srun", srun, "--sinfo", sinfo],
         "is not empty"),
        (["--nodes", "n1", "-o", str(tmp_path / "y"), "--srun", "/nonexistent/srun"],
         "/nonexistent/srun not found"),
        (["--nodes", "n[1-", "-o", str(tmp_path / "z"), "--srun", srun, "--sinfo", sinfo],
         "--nodes: unbalanced"),
        (["--partition", "p", "-o", str(tmp_path / "w"), "--srun", srun, "--sinfo",
          write_script(tmp_path / "empty-sinfo", "#!/bin/sh\n")], "partition p has no nodes"),
        (["--nodes", "n1", "-o", str(tmp_path / "v"), "--json"], "--json is not passed"),
    ]  # fmt: skip
    for args, message in cases:
        done = ibdiag("fleet", "run", *args)
        assert done.returncode == 3, (args, done.stderr)
        assert len(done.stderr.splitlines()) == 1 and message in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


# --- end to end through a real Slurm ----------------------------------------------------------


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    with SlurmCluster(tmp_path_factory.mktemp("fleet-slurm") / "cluster") as cluster:
        yield cluster


def fleet_run(cluster: SlurmCluster, *args: str, timeout: float = 120):
    env = ibdiag_env(SLURM_CONF=str(cluster.conf_path))
    env[MARKER_VARIABLE] = cluster.marker  # what the tasks leave behind dies with the cluster
    started = time.monotonic()
    # The nodes run this checkout's ibdiag (by default they run /opt/ibdiag/bin/ibdiag).
    done = ibdiag("fleet", "run", "--python", PY, *args, env=env, timeout=timeout)
    return done, time.monotonic() - started


def test_real_slurm_each_node_writes_its_report(slurm, tmp_path):
    out = tmp_path / "fleet"
    done, _ = fleet_run(
        slurm, "--nodes", slurm.node_name, "-o", str(out), "--level", "standard",
        "--sysfs", STUCK_INIT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(out)) == sorted([f"{slurm.node_name}.json", SUMMARY_NAME])
    report = json.loads((out / f"{slurm.node_name}.json").read_text())
    node = summarize(report, "report")
    assert (node.verdict, node.level) == ("CRITICAL", "standard")  # the passed-through --sysfs
    assert report["snapshot"]["sysfs_root"] == STUCK_INIT
    summary = FleetRun.model_validate_json((out / SUMMARY_NAME).read_text())
    assert summary.answered_nodes == [slurm.node_name] and summary.never_answered_nodes == []
    [outcome] = summary.nodes
    assert (outcome.rc, outcome.verdict, outcome.report) == (2, "CRITICAL", outcome.node + ".json")
    assert summary.started_at <= outcome.started_at <= outcome.ended_at <= summary.ended_at
    assert summary.srun_rc == 0 and summary.exit_code == 0
    assert done.stderr == ""
    assert "1 of 1 nodes answered" in done.stdout


def test_real_slurm_a_partition_runs_its_nodes(slurm, tmp_path):
    done, _ = fleet_run(slurm, "--partition", "debug", "-o", str(tmp_path / "p"),
                        "--sysfs", GOOD)  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = FleetRun.model_validate_json((tmp_path / "p" / SUMMARY_NAME).read_text())
    assert summary.answered_nodes == [slurm.node_name]
    assert "--partition=debug" in summary.srun_argv


def test_real_slurm_a_node_that_does_not_exist_never_answered_one_line(slurm, tmp_path):
    done, _ = fleet_run(slurm, "--nodes", f"{slurm.node_name},ghost07", "-o",
                        str(tmp_path / "o"), "--sysfs", GOOD)  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        "ibdiag: fleet run: ghost07: never answered: not run: not a node known to Slurm "
        "(sinfo does not list it)"
    ]
    assert (tmp_path / "o" / f"{slurm.node_name}.json").is_file()
    # then the fleet report of that directory: the node's verdict, ghost07 missing
    report = ibdiag("fleet", "report", str(tmp_path / "o"), "--json")
    fleet = json.loads(report.stdout)
    assert fleet["nodes_read"] == 1 and fleet["read_problems"] == [], report.stderr
    assert fleet["missing"]["nodes"] == "ghost07" and report.returncode == 2
    alone, _ = fleet_run(slurm, "--nodes", "ghost07", "-o", str(tmp_path / "a"))
    assert alone.returncode == 3 and len(alone.stderr.splitlines()) == 1
    assert "ghost07: never answered" in alone.stderr and "Traceback" not in alone.stderr
    summary = FleetRun.model_validate_json((tmp_path / "a" / SUMMARY_NAME).read_text())
    assert summary.srun_argv == [] and summary.never_answered_nodes == ["ghost07"]


def test_real_slurm_srun_refusing_the_job_leaves_every_node_unanswered_with_its_error(
    slurm, tmp_path
):
    # More CPUs than the node has: Slurm queues the job rather than refuse it; srun gives up
    # after --wait-for-nodes.
    done, took = fleet_run(slurm, "--nodes", slurm.node_name, "-o", str(tmp_path / "r"),
                           "--wait-for-nodes", "3", "--srun-arg=--cpus-per-task=4096")  # fmt: skip
    assert done.returncode == 3 and 3 <= took < 30, done.stderr
    *srun_said, ours = done.stderr.splitlines()
    assert srun_said and all(line.startswith("srun: ") for line in srun_said)
    assert ours.startswith(
        f"ibdiag: fleet run: {slurm.node_name}: never answered: no answer: its task never ran, "
        "or died before it could say; srun exited 1: srun: error: "
    )
    assert "Traceback" not in done.stderr


@pytest.fixture
def hanging_checks(tmp_path) -> Path:
    """A --checks-dir whose one site check hangs (600 s), as a node stuck in a read would."""
    checks = tmp_path / "checks"
    checks.mkdir()
    (checks / "hang.py").write_text(
        "import time\nfrom ibdiag.registry import check\n\n\n"
        '@check("site.hang", title="hangs", needs={"sysfs"}, level="quick")\n'
        "def hang(snap, th):\n"
        '    """Healthy: never: it hangs, like a node stuck in a read."""\n'
        "    time.sleep(600)\n    return []\n"
    )
    return checks


def test_real_slurm_a_hung_node_is_stopped_at_its_limit(slurm, tmp_path, hanging_checks):
    checks = hanging_checks
    done, took = fleet_run(
        slurm, "--nodes", slurm.node_name, "-o", str(tmp_path / "h"), "--node-timeout", "3",
        "--sysfs", GOOD, "--checks-dir", str(checks),
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert took < 30, took  # not the check's 600 s, nor Slurm's --time
    assert (
        f"ibdiag: fleet run: {slurm.node_name}: never answered: check still running after the "
        "node time limit (3 s): stopped"
    ) in done.stderr.splitlines()
    assert os.listdir(tmp_path / "h") == [SUMMARY_NAME]
    summary = FleetRun.model_validate_json((tmp_path / "h" / SUMMARY_NAME).read_text())
    assert summary.nodes[0].duration_s is not None and 3 <= summary.nodes[0].duration_s < 10


def fleet_jobs(cluster: SlurmCluster) -> str:
    return cluster.run("squeue", "--noheader", "--format=%j %T").stdout


def test_real_slurm_an_interrupted_run_ends_the_job_and_still_says_who_answered(
    slurm, tmp_path, hanging_checks
):
    env = ibdiag_env(SLURM_CONF=str(slurm.conf_path))
    env[MARKER_VARIABLE] = slurm.marker
    out = tmp_path / "i"
    launcher = subprocess.Popen(
        [PY, "-m", "ibdiag", "fleet", "run", "--python", PY, "--nodes", slurm.node_name,
         "-o", str(out), "--sysfs", GOOD, "--checks-dir", str(hanging_checks)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        slurm.wait_for(lambda: "ibdiag-fleet RUNNING" in fleet_jobs(slurm), 30, "the job")
        time.sleep(2)  # the node's check is in its hanging check by now
        launcher.send_signal(signal.SIGINT)  # Ctrl-C
        _, stderr = launcher.communicate(timeout=60)
    finally:
        launcher.kill()
        launcher.wait()
    assert launcher.returncode == 3, stderr
    assert "Traceback" not in stderr
    summary = FleetRun.model_validate_json((out / SUMMARY_NAME).read_text())
    assert summary.interrupted and summary.never_answered_nodes == [slurm.node_name]
    assert summary.nodes[0].reason in (
        "no answer: the run was interrupted",  # srun killed the task
        "interrupted: the Slurm job was cancelled or ran out",  # the task said so first
    )
    slurm.wait_for(lambda: "ibdiag-fleet" not in fleet_jobs(slurm), 30, "the job's end")
    assert os.listdir(out) == [SUMMARY_NAME]


def test_real_slurm_a_drained_node_is_not_given_to_srun(slurm, tmp_path):
    slurm.scontrol("update", f"NodeName={slurm.node_name}", "State=DRAIN", "Reason=fleet test")
    try:
        done, took = fleet_run(slurm, "--nodes", slurm.node_name, "-o", str(tmp_path / "d"))
    finally:
        slurm.scontrol("update", f"NodeName={slurm.node_name}", "State=RESUME")
        slurm.wait_for_node_state("IDLE")
    assert done.returncode == 3 and took < 30
    assert done.stderr.splitlines() == [
        f"ibdiag: fleet run: {slurm.node_name}: never answered: not run: Slurm state drained"
    ]


@pytest.fixture
def hold_node(slurm):
    """``hold(*sbatch_args)``: a job sleeping on the node (``--exclusive``: every CPU, the node
    ALLOCATED; one CPU: MIXED), waited for until the node is busy; returns the node's state.
    The jobs are cancelled afterwards, and the node back to IDLE."""
    jobs = []

    def busy() -> str:
        state = slurm.node_state()[0]
        return state if state in ("ALLOCATED", "MIXED") else ""

    def hold(*args: str) -> str:
        jobs.append(slurm.sbatch(None, *args, wrap="sleep 600"))
        return slurm.wait_for(busy, 30, "the job on the node")

    yield hold
    for job in jobs:
        slurm.run("scancel", str(job), check=False)
    slurm.wait_for_node_state("IDLE", timeout=60)


def test_real_slurm_an_allocated_node_is_not_run_unless_included(slurm, tmp_path, hold_node):
    assert hold_node("--exclusive") == "ALLOCATED"
    done, took = fleet_run(slurm, "--nodes", slurm.node_name, "-o", str(tmp_path / "b"),
                           "--sysfs", GOOD)  # fmt: skip
    assert done.returncode == 3 and took < 30, done.stderr
    assert done.stderr.splitlines() == [
        f"ibdiag: fleet run: {slurm.node_name}: never answered: not run: Slurm state allocated "
        "(busy)"
    ]
    assert FleetRun.model_validate_json((tmp_path / "b" / SUMMARY_NAME).read_text()).srun_argv == []
    # --include-busy: srun waits for the node, up to --wait-for-nodes, then gives up
    done, took = fleet_run(slurm, "--nodes", slurm.node_name, "-o", str(tmp_path / "i"),
                           "--sysfs", GOOD, "--include-busy", "--wait-for-nodes", "3")  # fmt: skip
    assert done.returncode == 3 and 3 <= took < 30, done.stderr
    assert done.stderr.splitlines()[-1].startswith(
        f"ibdiag: fleet run: {slurm.node_name}: never answered: no answer: its task never ran, "
        "or died before it could say; srun exited 1: srun: error: "
    )
    assert "Traceback" not in done.stderr


def test_real_slurm_a_mixed_node_runs_quick_beside_its_job_but_not_full(slurm, tmp_path, hold_node):
    if hold_node("--ntasks=1", "--cpus-per-task=1") != "MIXED":
        pytest.fail("a 1-CPU job took the whole node: it needs two cores for this test")
    done, _ = fleet_run(slurm, "--nodes", slurm.node_name, "-o", str(tmp_path / "q"),
                        "--sysfs", GOOD)  # fmt: skip
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert (tmp_path / "q" / f"{slurm.node_name}.json").is_file()
    # level full moves traffic: not beside a job (the check itself never starts)
    done, took = fleet_run(slurm, "--nodes", slurm.node_name, "-o", str(tmp_path / "f"),
                           "--level", "full", "--sysfs", GOOD)  # fmt: skip
    assert done.returncode == 3 and took < 30, done.stderr
    assert done.stderr.splitlines() == [
        f"ibdiag: fleet run: {slurm.node_name}: never answered: not run: Slurm state mixed (busy)"
    ]


# --- the README's recipes ---------------------------------------------------------------------

README = Path(REPO, "README.md")
DAEMONSET = Path(REPO, "contrib", "kubernetes", "ibdiag-daemonset.yaml")
IBDIAG = shutil.which("ibdiag", path=os.path.dirname(PY)) or shutil.which("ibdiag")


def fleet_section() -> str:
    return README.read_text(encoding="utf-8").split("\n## Fleet: ", 1)[1].split("\n## ", 1)[0]


def sh_blocks() -> list:
    return re.findall(r"^```sh\n(.*?)^```", fleet_section(), re.M | re.S)


def test_readme_fleet_run_recipe_parses_as_fleet_run_and_check_options():
    from ibdiag.cli.fleet_run import run_command

    [line] = [line for line in sh_blocks()[0].splitlines() if line.startswith("ibdiag fleet run")]
    context = run_command.make_context("run", shlex.split(line)[3:])
    assert context.params["partition"] == "gpu" and context.params["level"] == "standard"
    assert validated_check_args(context.params["check_args"]) == ("--profile", "dgx-h100")
    assert Path(REPO, "ibdiag", "profiles", "dgx-h100.toml").is_file()


def test_readme_clush_and_pdsh_recipes_write_each_nodes_report(tmp_path):
    """The command clush and pdsh run on each node, run here as they would there (sh -c), into
    a stand-in for /shared/ibdiag: a whole report named after the host."""
    lines = sh_blocks()[1].splitlines()
    clush, pdsh = (
        shlex.split(next(x for x in lines if x.startswith(t))) for t in ("clush", "pdsh")
    )
    assert clush[:5] == ["clush", "-w", "gpu[001-128]", "-u", "120"] and "-b" in clush
    assert pdsh[:5] == ["pdsh", "-w", "gpu[001-128]", "-u", "120"]
    assert clush[-1] == pdsh[-1]  # the same command on each node
    remote = clush[-1]
    assert remote.startswith("/opt/ibdiag/bin/ibdiag check --json -o /shared/ibdiag/")
    assert IBDIAG, "the ibdiag console script is not installed beside this Python"
    here = remote.replace("/opt/ibdiag/bin/ibdiag", shlex.quote(IBDIAG))
    here = here.replace("/shared/ibdiag", str(tmp_path))
    done = subprocess.run(["sh", "-c", here], env=ibdiag_env(), capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode in (0, 1, 2, 3), done.stderr  # this machine's answer, whatever it is
    short = subprocess.run(["hostname", "-s"], capture_output=True, text=True, check=True)
    [name] = os.listdir(tmp_path)
    assert name == short.stdout.strip() + ".json"
    assert summarize(json.loads((tmp_path / name).read_text()), name).verdict


def daemonset_env(text: str) -> dict:
    return dict(re.findall(r"- name: (\w+)(?:  #[^\n]*)?\n\s+value: \"?([^\"\n]*)\"?", text))


def daemonset_script(text: str) -> str:
    block = text.split("args:\n", 1)[1].split("- |\n", 1)[1]
    lines = []
    for line in block.splitlines():
        if line.strip() and not line.startswith(" " * 14):
            break
        lines.append(line[14:])
    return "\n".join(lines) + "\n"


def test_kubernetes_daemonset_reads_host_sys_read_only_without_privilege():
    text = DAEMONSET.read_text()
    assert "\n      hostNetwork: true" in text  # the report names the node, not the pod
    assert "- {name: host-sys, mountPath: /host/sys, readOnly: true}" in text
    assert "hostPath: {path: /sys, type: Directory}" in text
    assert re.search(r"^\s+privileged: false  # standard: true", text, re.M)
    env = daemonset_env(text)
    assert env["IBDIAG_ARGS"] == "--level quick --sysfs /host/sys"
    assert env["IBDIAG_OUT"] == "/shared/ibdiag" and env["IBDIAG_INTERVAL"] == "900"
    assert "- {name: reports, mountPath: /shared/ibdiag}" in text
    assert "fieldPath: spec.nodeName" in text
    assert "contrib/kubernetes/ibdiag-daemonset.yaml" in fleet_section()


def test_kubernetes_daemonset_script_writes_the_nodes_report(tmp_path):
    """The container's script, run by sh as the container would, once (IBDIAG_INTERVAL=0)."""
    script = daemonset_script(DAEMONSET.read_text())
    assert 'ibdiag check --json $IBDIAG_ARGS -o "$IBDIAG_OUT/$NODE_NAME.json"' in script
    env = ibdiag_env(
        NODE_NAME="gpu042",
        IBDIAG_OUT=str(tmp_path),
        IBDIAG_INTERVAL="0",
        IBDIAG_ARGS=f"--level quick --sysfs {GOOD}",
    )
    env["PATH"] = os.pathsep.join([os.path.dirname(IBDIAG or PY), env.get("PATH", "")])
    done = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert os.listdir(tmp_path) == ["gpu042.json"]
    report = json.loads((tmp_path / "gpu042.json").read_text())
    assert summarize(report, "gpu042.json").verdict == "OK"
    assert report["snapshot"]["sysfs_root"] == GOOD
