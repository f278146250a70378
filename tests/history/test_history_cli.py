"""``check --history``, ``ibdiag history`` and ``history clear`` on a node whose port flaps.

A builder tree of 2 HCAs (tests/cli_node.py); a test steps mlx5_1's port down and up between
runs of ``ibdiag check``, as a cable that flaps between NHC's runs would.
"""

from __future__ import annotations

import json
import os

import pytest
from cli_node import Node, by_check


@pytest.fixture
def node(tmp_path, run_cli) -> Node:
    return Node(tmp_path, run_cli)


def port_file(node: Node, name: str) -> str:
    return os.path.join(node.sys, "class", "infiniband", "mlx5_1", "ports", "1", name)


def set_link(node: Node, up: bool) -> None:
    node.write(port_file(node, "state"), "4: ACTIVE" if up else "1: DOWN")
    node.write(port_file(node, "phys_state"), "5: LinkUp" if up else "2: Polling")


def flap(node: Node, store: str) -> None:
    set_link(node, up=False)
    node.check("--history", store)
    node.bump("mlx5_1", "link_downed", 1)
    set_link(node, up=True)
    node.check("--history", store)


def test_three_flaps_between_runs_fail_an_active_clean_check_with_a_stable_reason(node, run_cli):
    store = str(node.tmp / "var" / "history.db")
    node.check("--history", store)
    for _ in range(3):
        flap(node, store)
    result, report = node.check_json("--history", store)
    assert result.exit_code == 2
    flaps = {r["target"]: r for r in by_check(report, "link.flaps")}
    assert flaps["mlx5_1:1"]["status"] == "fail" and flaps["mlx5_1:1"]["observed"] == 3
    assert flaps["mlx5_0:1"]["status"] == "pass"
    assert {r["status"] for r in by_check(report, "link.state")} == {"pass"}
    reason = node.check("--history", store, "--reason")
    assert reason.stdout.strip() == "ibdiag: mlx5_1:1 link.flaps 3 in 12h"
    assert oct(os.stat(store).st_mode & 0o777) == "0o600"
    assert oct(os.stat(os.path.dirname(store)).st_mode & 0o777) == "0o700"


def test_history_prints_the_timeline_and_clear_ends_the_finding(node, run_cli):
    store = str(node.tmp / "history.db")
    node.check("--history", store)
    for _ in range(3):
        flap(node, store)
    shown = run_cli("history", "--history", store, "--sysfs", node.sys)
    assert shown.exit_code == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith(f"history {store}: 3 outages of 1 port since ")
    assert sum(line.startswith("mlx5_1:1 ") for line in lines) == 3
    as_json = json.loads(run_cli("history", "--history", store, "--json").stdout)
    assert [o["device"] for o in as_json["outages"]] == ["mlx5_1"] * 3
    assert all(o["source"] == "sample" and o["end"] for o in as_json["outages"])
    only_other = run_cli("history", "--history", store, "--sysfs", node.sys, "--port", "mlx5_0:1")
    assert only_other.stdout.startswith(f"history {store}: 0 outages of 0 ports")

    cleared = run_cli(
        "history", "--history", store, "--sysfs", node.sys,
        "clear", "--port", "mlx5_1:1", "--reason", "cable  swapped\n(ticket 42)",
    )  # fmt: skip
    assert cleared.exit_code == 0, cleared.stderr
    assert cleared.stdout.startswith("cleared mlx5_1:1 (name:mlx5_1) at ")
    assert cleared.stdout.rstrip().endswith(": cable swapped (ticket 42)")
    result, report = node.check_json("--history", store)
    assert result.exit_code == 0
    assert {r["status"] for r in by_check(report, "link.flaps")} == {"pass"}
    again = run_cli("history", "--history", store, "--sysfs", node.sys)
    assert "cleared mlx5_1:1 at " in again.stdout and "cable swapped (ticket 42)" in again.stdout


def test_no_history_reads_and_writes_nothing(node, run_cli):
    store = node.tmp / "history.db"
    result, report = node.check_json("--history", str(store), "--no-history")
    assert result.exit_code == 0 and not store.exists()
    assert by_check(report, "link.flaps") == [] and by_check(report, "history.store") == []
    refused = run_cli("history", "--no-history")
    assert refused.exit_code == 3 and refused.stderr.count("\n") == 1
    assert "history is off" in refused.stderr


def test_an_unusable_store_warns_once_and_the_node_is_still_graded(node, run_cli):
    blocker = node.tmp / "not-a-directory"
    blocker.write_text("a file where the store's directory should be\n")
    result, report = node.check_json("--history", str(blocker / "history.db"))
    assert result.exit_code == 1  # WARNING: the node is healthy, its past unknown
    (store,) = by_check(report, "history.store")
    assert store["status"] == "warn" and str(blocker) in store["message"]
    assert "\n" not in store["message"]
    assert {r["status"] for r in by_check(report, "link.state")} == {"pass"}


@pytest.mark.parametrize("since", ["yesterday", "0", "-5m", "12x"])
def test_a_bad_since_is_one_line_and_exit_3(node, run_cli, since):
    result = run_cli("history", "--history", str(node.tmp / "h.db"), "--since", since)
    assert result.exit_code == 3 and result.stderr.count("\n") == 1
    assert "--since" in result.stderr


def test_clear_needs_a_port_it_knows_and_a_reason(node, run_cli):
    store = str(node.tmp / "h.db")
    node.check("--history", store)
    unknown = run_cli(
        "history", "--history", store, "--sysfs", node.sys,
        "clear", "--port", "mlx5_9:1", "--reason", "x",
    )  # fmt: skip
    assert unknown.exit_code == 3 and "no HCA mlx5_9" in unknown.stderr
    blank = run_cli(
        "history", "--history", store, "--sysfs", node.sys,
        "clear", "--port", "mlx5_1:1", "--reason", "   ",
    )  # fmt: skip
    assert blank.exit_code == 3 and "--reason" in blank.stderr


def _bundle(node: Node, run_cli, *args: str) -> str:
    out = node.tmp / "bundles"
    out.mkdir(exist_ok=True)
    result = run_cli(
        "collect", "--sysfs", node.sys, "--procfs", node.proc, "--config",
        str(node.tmp / "site.toml"), "-o", str(out), "--tarball", *args,
    )  # fmt: skip
    assert result.exit_code in (0, 1, 2), result.stderr
    (tarball,) = out.glob("*.tar.gz")
    return str(tarball)


@pytest.mark.parametrize("redact", [(), ("--redact", "guids,hostnames")])
def test_a_bundle_carries_the_window_and_its_replay_gives_the_same_verdict(node, run_cli, redact):
    # each HCA its own GUID (the builder gives both one): keyed by GUID, redacted alike in
    # sysfs and in the window, so the replay still finds each port's past
    guid = os.path.join(node.sys, "class", "infiniband", "mlx5_1", "node_guid")
    node.write(guid, "b859:9f03:00d4:0a11")
    store = str(node.tmp / "history.db")
    node.check("--history", store)
    for _ in range(3):
        flap(node, store)
    live = json.loads(node.check("--history", store, "--json").stdout)
    tarball = _bundle(node, run_cli, "--history", store, *redact)
    replayed = run_cli("report", tarball, "--json")
    assert replayed.exit_code == 2, replayed.stderr
    report = json.loads(replayed.stdout)
    flaps = {r["target"]: (r["status"], r["observed"]) for r in by_check(report, "link.flaps")}
    assert flaps == {"mlx5_0:1": ("pass", 0), "mlx5_1:1": ("fail", 3)}
    outages = report["snapshot"]["history"]["outages"]
    assert len(outages) == 3
    redacted = "0xfeed0000000000" if redact else "0xb8599f0300d40a11"
    assert {o["node_guid"][:16] for o in outages} == {redacted[:16]}
    was = {r["target"]: (r["status"], r["observed"]) for r in by_check(live, "link.flaps")}
    assert was == flaps


def test_a_bundle_without_its_history_file_is_graded_without_the_past(node, run_cli, tmp_path):
    import tarfile

    store = str(node.tmp / "history.db")
    node.check("--history", store)
    flap(node, store)
    tarball = _bundle(node, run_cli, "--history", store)
    folder = tmp_path / "unpacked"
    with tarfile.open(tarball) as archive:
        archive.extractall(folder)  # noqa: S202 - our own bundle, in a test
    (window,) = folder.glob("*/history/window.json")
    window.unlink()
    replayed = run_cli("report", str(window.parent.parent), "--json")
    assert "Traceback" not in replayed.stderr
    report = json.loads(replayed.stdout)
    assert report["snapshot"]["history"] is None
    assert "missing from the bundle" in report["snapshot"]["problems"]["history"]
    assert by_check(report, "link.flaps") == []


def test_clear_refuses_a_guid_that_is_not_one(node, run_cli):
    store = str(node.tmp / "h.db")
    node.check("--history", store)
    short = run_cli("history", "--history", store, "clear", "--port", "0xc42a1030003/1",
                    "--reason", "x")  # fmt: skip
    assert short.exit_code == 3 and "is not a node GUID" in short.stderr


def test_serve_runs_no_monitor_on_a_default_store_it_may_not_write(monkeypatch):
    import ibdiag.history
    from ibdiag.cli.metrics import _unwritable_default

    unwritable = "/proc/self/ibdiag/history.db"  # not writable, even by root
    monkeypatch.setattr(ibdiag.history, "DEFAULT_PATH", unwritable)
    assert _unwritable_default(unwritable, None) is True
    assert _unwritable_default(unwritable, unwritable) is False  # named: tried, and warns
    assert _unwritable_default("/tmp/elsewhere.db", None) is False
