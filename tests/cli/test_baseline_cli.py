"""Baselines on the command line: ``snapshot``, ``check --baseline``/``--state``, ``explain``.

Every test runs the real CLI in-process against a builder mlx5 tree in tmp_path (2 healthy
ConnectX-6 HCAs) and a procfs with a fixed hostname and boot id, with real files for the
snapshots and state files.
"""

from __future__ import annotations

import json
import os
import stat
from datetime import datetime, timedelta, timezone

import pytest
from cli_node import BOOT_ID, HOST, Node, by_check, load_snapshot, not_passing

from ibdiag.model import SCHEMA_VERSION, Snapshot


@pytest.fixture
def node(tmp_path, run_cli):
    return Node(tmp_path, run_cli)


# --- ibdiag snapshot --------------------------------------------------------------------------


def test_snapshot_writes_a_private_json_snapshot(node, tmp_path):
    out = str(tmp_path / "base.json")
    result = node.snapshot("-o", out)
    assert result.exit_code == 0
    assert result.stdout == "" and result.stderr == ""
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    snap = load_snapshot(out)
    assert snap.host == HOST and snap.boot_id == BOOT_ID
    assert snap.schema_version == SCHEMA_VERSION
    assert [dev.name for dev in snap.devices] == ["mlx5_0", "mlx5_1"]
    port = snap.devices[0].ports[0]
    assert port.counters["port_xmit_wait"] == 1931
    assert port.counters["symbol_error"] == 0
    assert port.hw_counters["local_ack_timeout_err"] == 0
    assert "sysfs" in snap.sources
    assert sorted(os.listdir(tmp_path)) == ["base.json", "proc", "sys"]  # no temp file left


def test_snapshot_without_output_prints_json(node):
    result = node.snapshot()
    assert result.exit_code == 0
    snap = Snapshot.model_validate_json(result.stdout)
    assert snap.devices[1].ports[0].counters["port_rcv_data"] == 9837712934


# --- check --baseline -------------------------------------------------------------------------


@pytest.fixture
def baseline_file(node, tmp_path):
    path = str(tmp_path / "base.json")
    assert node.snapshot("-o", path).exit_code == 0
    return path


def test_unchanged_tree_against_its_baseline_is_ok(node, baseline_file):
    result, report = node.check_json("--baseline", baseline_file)
    assert result.exit_code == 0
    assert report["verdict"] == "OK"
    [baseline] = by_check(report, "counters.baseline")
    assert baseline["status"] == "pass"
    assert baseline["message"].startswith("baseline of ")
    errors = by_check(report, "counters.port_errors")
    assert [r["status"] for r in errors] == ["pass", "pass"]
    assert all("no graded increase since the baseline" in r["message"] for r in errors)


def test_link_downed_increase_fails_exit_2(node, baseline_file):
    node.bump("mlx5_1", "link_downed", 1)
    result, report = node.check_json("--baseline", baseline_file)
    assert result.exit_code == 2
    assert report["verdict"] == "CRITICAL"
    bad = not_passing(report)
    assert list(bad) == ["counters.port_errors"]
    [fail] = bad["counters.port_errors"]
    assert fail["status"] == "fail" and fail["target"] == "mlx5_1:1"
    assert fail["message"].startswith("link_downed +1 since the baseline")
    assert fail["message"].endswith("any increase fails")


def test_symbol_error_increase_warns_exit_1_in_text(node, baseline_file):
    node.bump("mlx5_0", "symbol_error", 3)
    result = node.check("--baseline", baseline_file)
    assert result.exit_code == 1
    warn_lines = [line for line in result.stdout.splitlines() if line.startswith("WARN")]
    assert len(warn_lines) == 1
    assert "mlx5_0:1" in warn_lines[0] and "symbol_error +3 since the baseline" in warn_lines[0]
    assert result.stdout.splitlines()[-1].startswith("IBDIAG WARNING - 1 warn")


def test_hw_counter_increase_is_graded(node, baseline_file):
    node.bump("mlx5_0", "packet_seq_err", 7, "hw_counters")
    result, report = node.check_json("--baseline", baseline_file)
    assert result.exit_code == 1
    [warn] = not_passing(report)["counters.hw_errors"]
    assert warn["target"] == "mlx5_0:1"
    assert warn["message"].startswith("packet_seq_err +7 ")


def test_baseline_missing_file_is_one_warn_not_exit_3(node, tmp_path):
    missing = str(tmp_path / "nope.json")
    result, report = node.check_json("--baseline", missing)
    assert result.exit_code == 1
    assert list(not_passing(report)) == ["counters.baseline"]
    [warn] = by_check(report, "counters.baseline")
    assert warn["status"] == "warn"
    assert f"{missing}: no such file" in warn["message"]
    assert not os.path.exists(missing)  # --baseline is read, never written


def test_saved_report_works_as_a_baseline(node, tmp_path):
    report_path = str(tmp_path / "r.json")
    first = node.check("-o", report_path)
    assert first.exit_code == 0
    node.bump("mlx5_0", "link_downed", 2)
    result, report = node.check_json("--baseline", report_path)
    assert result.exit_code == 2
    assert by_check(report, "counters.baseline")[0]["status"] == "pass"
    [fail] = not_passing(report)["counters.port_errors"]
    assert fail["target"] == "mlx5_0:1" and "link_downed +2" in fail["message"]


def test_baseline_from_a_reboot_counts_from_zero(node, baseline_file):
    node.set_boot_id("00000000-1111-2222-3333-444444444444")
    result, report = node.check_json("--baseline", baseline_file)
    [baseline] = by_check(report, "counters.baseline")
    assert baseline["status"] == "pass"
    assert "rebooted since" in baseline["message"]
    assert result.exit_code == 0  # all error counters are zero: nothing since boot either


def test_baseline_and_state_together_is_a_usage_error(node, tmp_path):
    result = node.check("--baseline", str(tmp_path / "a"), "--state", str(tmp_path / "b"))
    assert result.exit_code == 3
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("ibdiag: error: give --baseline or --state, not both")


# --- check --state ----------------------------------------------------------------------------


@pytest.fixture
def state_dir(tmp_path):
    path = tmp_path / "state"
    path.mkdir()
    return path


def test_state_first_run_skips_then_compares(node, state_dir):
    state = str(state_dir / "ibdiag.json")
    result, report = node.check_json("--state", state)
    assert result.exit_code == 0
    [baseline] = by_check(report, "counters.baseline")
    assert baseline["status"] == "skip"
    assert "no baseline" in baseline["message"]
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o600
    first = load_snapshot(state)
    assert first.host == HOST

    node.bump("mlx5_0", "symbol_error", 4)
    result, report = node.check_json("--state", state)
    assert result.exit_code == 1
    assert by_check(report, "counters.baseline")[0]["status"] == "pass"
    [warn] = not_passing(report)["counters.port_errors"]
    assert "symbol_error +4 since the baseline" in warn["message"]
    second = load_snapshot(state)
    assert second.collected_at > first.collected_at
    assert second.devices[0].ports[0].counters["symbol_error"] == 4

    # the third run compares with the second, not the first: no new increase
    result, report = node.check_json("--state", state)
    assert result.exit_code == 0
    assert not_passing(report) == {}


def test_state_is_replaced_atomically_each_run(node, state_dir):
    state = str(state_dir / "ibdiag.json")
    assert node.check("--state", state).exit_code == 0
    readers = []
    try:
        for _ in range(3):
            readers.append(open(state, encoding="utf-8"))  # a reader of the old file
            node.bump("mlx5_0", "port_xmit_wait", 1)
            assert node.check("--state", state).exit_code == 0
            assert os.listdir(state_dir) == ["ibdiag.json"]  # no temp file left beside it
            load_snapshot(state)
        inodes = {os.fstat(reader.fileno()).st_ino for reader in readers}
        inodes.add(os.stat(state).st_ino)
        assert len(inodes) == 4  # a new file renamed into place each run, never rewritten
        for reader in readers:  # each reader still sees a whole, valid older snapshot
            old = Snapshot.model_validate_json(reader.read())
            assert old.devices[0].ports[0].counters["port_xmit_wait"] < 1931 + 3
    finally:
        for reader in readers:
            reader.close()
    assert load_snapshot(state).devices[0].ports[0].counters["port_xmit_wait"] == 1931 + 3


def _valid_snapshot_json(node, tmp_path) -> str:
    path = str(tmp_path / "valid.json")
    assert node.snapshot("-o", path).exit_code == 0
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    os.unlink(path)
    return text


def _future_schema(text: str) -> bytes:
    data = json.loads(text)
    data["schema_version"] = SCHEMA_VERSION + 98
    return json.dumps(data).encode()


def _naive_timestamp(text: str) -> bytes:
    data = json.loads(text)
    data["collected_at"] = "2020-01-01T00:00:00"  # no timezone: hand-edited or foreign
    return json.dumps(data).encode()


CORRUPT = {
    "empty": (lambda valid: b"", "not valid JSON (truncated or corrupt)"),
    "truncated": (
        lambda valid: valid.encode()[: len(valid) // 2],
        "not valid JSON (truncated or corrupt)",
    ),
    "not-json": (lambda valid: b"ibdiag state\nsymbol_error=3\n", "not valid JSON"),
    "json-list": (lambda valid: b"[1, 2, 3]", "a JSON object is expected"),
    "json-number": (lambda valid: b"42", "a JSON object is expected"),
    "json-null": (lambda valid: b"null", "a JSON object is expected"),
    "other-object": (lambda valid: b'{"hello": "world"}', "not an ibdiag snapshot"),
    "future-schema": (
        _future_schema,
        f"written by a newer ibdiag (schema {SCHEMA_VERSION + 98} > {SCHEMA_VERSION})",
    ),
    "binary-junk": (lambda valid: bytes(range(256)) * 8, "not valid JSON"),
    "deeply-nested": (lambda valid: b"[" * 100_000, "not valid JSON"),
}


@pytest.mark.parametrize("kind", sorted(CORRUPT))
def test_corrupt_state_file_is_one_warn_and_rewritten(node, tmp_path, state_dir, kind):
    make, reason = CORRUPT[kind]
    state = str(state_dir / "ibdiag.json")
    with open(state, "wb") as handle:
        handle.write(make(_valid_snapshot_json(node, tmp_path)))
    result, report = node.check_json("--state", state)
    assert result.stderr == ""
    assert result.exit_code == 1  # the one warning; the healthy node grades OK otherwise
    assert list(not_passing(report)) == ["counters.baseline"]
    [warn] = by_check(report, "counters.baseline")
    assert warn["status"] == "warn"
    assert state in warn["message"] and reason in warn["message"]
    assert warn["message"].startswith("baseline unusable, counters graded without one: ")
    lifetime = by_check(report, "counters.port_errors")
    assert all("no baseline" in r["message"] for r in lifetime)
    assert os.listdir(state_dir) == ["ibdiag.json"]
    rewritten = load_snapshot(state)  # a valid snapshot of this run
    assert rewritten.host == HOST
    assert rewritten.devices[0].ports[0].counters["port_xmit_wait"] == 1931


def test_corrupt_state_exit_code_follows_the_other_results(node, tmp_path, state_dir):
    state = str(state_dir / "ibdiag.json")
    with open(state, "wb") as handle:
        handle.write(b"{truncated")
    node.write(os.path.join(node.sys, "class", "infiniband", "mlx5_1", "ports", "1", "state"),
               "2: INIT")  # fmt: skip
    result, report = node.check_json("--state", state)
    assert result.exit_code == 2
    assert [r["status"] for r in by_check(report, "counters.baseline")] == ["warn"]
    assert [r["target"] for r in not_passing(report)["link.state"]] == ["mlx5_1:1"]
    load_snapshot(state)


def test_state_snapshot_with_a_naive_timestamp_does_not_break_the_checks(node, tmp_path, state_dir):
    state = str(state_dir / "ibdiag.json")
    with open(state, "wb") as handle:
        handle.write(_naive_timestamp(_valid_snapshot_json(node, tmp_path)))
    result, report = node.check_json("--state", state)
    errors = [r for r in report["results"] if r["status"] == "error"]
    assert errors == []
    assert result.exit_code in (0, 1)
    load_snapshot(state)


def test_directory_at_the_state_path_is_one_warn(node, state_dir):
    state = state_dir / "ibdiag.json"
    state.mkdir()
    result, report = node.check_json("--state", str(state))
    assert result.exit_code == 1
    assert list(not_passing(report)) == ["counters.baseline"]
    [warn] = by_check(report, "counters.baseline")
    # neither read as a baseline nor replaced by this run's: one result says both
    assert warn["message"].startswith(f"cannot write state file {state}: Is a directory: ")
    assert f"{state}: is a directory" in warn["message"]
    assert result.stderr == ""
    assert os.listdir(state_dir) == ["ibdiag.json"] and state.is_dir()


def test_state_directory_is_made_private_when_its_parent_exists(node, tmp_path):
    """`--state /var/lib/ibdiag/nhc-state.json` on a node where nothing made /var/lib/ibdiag."""
    state = tmp_path / "var-lib" / "ibdiag" / "nhc-state.json"
    state.parent.parent.mkdir()
    result, report = node.check_json("--state", str(state))
    assert (result.exit_code, result.stderr) == (0, "")
    assert by_check(report, "counters.baseline")[0]["status"] == "skip"  # the first run
    assert stat.S_IMODE(os.stat(state.parent).st_mode) == 0o700
    assert load_snapshot(str(state)).host == HOST

    node.bump("mlx5_0", "link_downed", 1)
    result, report = node.check_json("--state", str(state))
    assert result.exit_code == 2  # graded on its change since the first run
    assert [r["subject"] for r in not_passing(report)["counters.port_errors"]] == ["link_downed"]


@pytest.mark.parametrize("break_node", [False, True])
def test_unwritable_state_path_is_a_warning_result_and_keeps_a_worse_verdict(
    node, tmp_path, break_node
):
    state = str(tmp_path / "no" / "such-dir" / "ibdiag.json")
    if break_node:
        node.bump("mlx5_0", "link_downed", 1)  # lifetime only: no baseline, still OK
        node.write(os.path.join(node.sys, "class", "infiniband", "mlx5_0", "ports", "1",
                                "phys_state"), "3: Disabled")  # fmt: skip
    result, report = node.check_json("--state", state)
    assert result.exit_code == (2 if break_node else 1)
    assert result.stderr == ""  # NHC and Slurm discard stderr on success: a result, not a line
    [warn] = by_check(report, "counters.baseline")
    assert warn["status"] == "warn"
    assert warn["message"] == (
        f"cannot write state file {state}: its directory {os.path.dirname(state)} does not "
        "exist: the next run has no baseline"
    )
    assert "writable path" in warn["hint"]
    assert not os.path.exists(os.path.dirname(os.path.dirname(state)))
    reason = node.check("--state", state, "--reason")
    worst = "mlx5_0:1 link.phys_state 3: Disabled" if break_node else "node counters.baseline"
    assert reason.stdout.strip() == f"ibdiag: {worst}"


# --- explain ----------------------------------------------------------------------------------


def test_explain_symbol_error(run_cli):
    result = run_cli("explain", "symbol_error")
    assert result.exit_code == 0
    out = result.stdout
    assert out.startswith("symbol_error - error counter")
    assert "width: 16-bit (saturates at 65535)" in out
    assert "fail above 120/hour" in out and "any increase: warn" in out
    assert "1e-12" in out
    assert "what to do: reseat or replace the cable/transceiver" in out


def test_explain_data_counter_says_words(run_cli):
    result = run_cli("explain", "port_rcv_data")
    assert result.exit_code == 0
    assert "unit: 4-byte words (bytes = value x 4)" in result.stdout


def test_explain_unknown_counter_exits_3(run_cli):
    result = run_cli("explain", "no_such_counter")
    assert result.exit_code == 3
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("ibdiag: error: no check or counter 'no_such_counter'")


# --- timestamps in state files ----------------------------------------------------------------


def test_state_older_than_an_hour_gives_rates(node, state_dir):
    state = str(state_dir / "ibdiag.json")
    assert node.check("--state", state).exit_code == 0
    snap = load_snapshot(state)
    snap = snap.model_copy(update={"collected_at": datetime.now(timezone.utc) - timedelta(hours=2)})
    with open(state, "w", encoding="utf-8") as handle:
        handle.write(snap.model_dump_json())
    node.bump("mlx5_0", "symbol_error", 300)  # ~150/hour: above 120/hour
    result, report = node.check_json("--state", state)
    assert result.exit_code == 2
    [fail] = not_passing(report)["counters.port_errors"]
    assert fail["message"].startswith("symbol_error +300 since the baseline 2.0 h ago (150.0/hour)")
    assert "above 120/hour" in fail["message"]


def _within(seconds: float, run):
    """``run()`` in a thread: its result, or a failure when it has not returned in time (a
    read that blocks must fail the test, not hang the suite)."""
    import threading

    outcome = {}
    worker = threading.Thread(target=lambda: outcome.update(result=run()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"ibdiag did not return within {seconds} s"
    return outcome["result"]


def test_a_fifo_given_as_baseline_is_one_warn_not_a_hang(node, tmp_path):
    fifo = str(tmp_path / "before.json")
    os.mkfifo(fifo)
    result, report = _within(30, lambda: node.check_json("--baseline", fifo))
    assert result.exit_code == 1
    [warn] = by_check(report, "counters.baseline")
    assert warn["status"] == "warn"
    assert f"{fifo}: not a regular file (a FIFO): not read" in warn["message"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # --baseline is read, never written


def test_a_fifo_at_the_state_path_is_one_warn_and_left_a_fifo(node, state_dir):
    """Neither read (it could block forever) nor replaced (an output option never replaces
    what is not a regular file): with no reader, the state cannot be written either, and
    one result says both; the run does not hang."""
    state = str(state_dir / "ibdiag.json")
    os.mkfifo(state)
    result, report = _within(30, lambda: node.check_json("--state", state))
    assert result.exit_code == 1
    [warn] = by_check(report, "counters.baseline")
    assert f"{state}: not a regular file (a FIFO): not read" in warn["message"]
    assert f"cannot write state file {state}: a FIFO with no reader" in warn["message"]
    assert stat.S_ISFIFO(os.stat(state).st_mode)


def test_counters_with_a_fifo_as_baseline_is_a_usage_error(node, tmp_path, run_cli):
    fifo = str(tmp_path / "before.json")
    os.mkfifo(fifo)
    result = _within(
        30,
        lambda: run_cli("counters", "--sysfs", node.sys, "--procfs", node.proc, "--baseline", fifo),
    )
    assert result.exit_code == 3
    assert "not a regular file (a FIFO)" in result.stderr


def test_a_device_node_given_as_baseline_is_not_read(node):
    """/dev/zero never ends: refused before a byte is read."""
    result, report = _within(30, lambda: node.check_json("--baseline", "/dev/zero"))
    assert result.exit_code == 1
    [warn] = by_check(report, "counters.baseline")
    assert "/dev/zero: not a regular file (a character device): not read" in warn["message"]
