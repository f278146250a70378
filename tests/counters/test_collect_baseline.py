"""``ibdiag collect``'s exit code (``--exit-verdict``) and its ``--baseline``/``--state``.

A bundle taken after a job (the epilog, an admin by hand) shows what changed during the job:
its report grades counters on their change since the baseline, as ``ibdiag check --baseline``
does, and the baseline goes into the bundle, so ``ibdiag report BUNDLE`` re-grades the same way
offline, with nothing but the bundle. Every test runs the real CLI in-process against the builder
mlx5 tree of ``cli_node`` (2 healthy HCAs) with real snapshot and state files.
"""

from __future__ import annotations

import json
import os
import tarfile

import pytest
from cli_node import HOST, Node, by_check, load_snapshot, not_passing
from conftest import REPO


@pytest.fixture
def node(tmp_path, run_cli):
    return Node(tmp_path, run_cli)


@pytest.fixture
def baseline_file(node, tmp_path):
    path = str(tmp_path / "before.json")
    assert node.snapshot("-o", path).exit_code == 0
    return path


def collect(node, *args: str):
    """``ibdiag collect --level quick`` of the node into tmp/out: (result, bundle path or None)."""
    config = os.path.join(str(node.tmp), "site.toml")
    if not os.path.exists(config):
        node.write(config, "")
    result = node._run(
        "collect", "--level", "quick", "--sysfs", node.sys, "--procfs", node.proc,
        "--config", config, "-o", str(node.tmp / "out"), *args,
    )  # fmt: skip
    assert "Traceback" not in result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("bundle: ")]
    return result, (lines[0][len("bundle: ") :] if lines else None)


def bundle_report(path: str) -> dict:
    if path.endswith(".tar.gz"):
        with tarfile.open(path) as archive:
            member = next(m for m in archive.getmembers() if m.name.endswith("/report.json"))
            return json.load(archive.extractfile(member))
    with open(os.path.join(path, "report.json"), encoding="utf-8") as handle:
        return json.load(handle)


def regrade(run_cli, path: str, *args: str):
    result = run_cli("report", path, "--json", *args)
    assert result.stdout.startswith("{"), (result.exit_code, result.stderr)
    return result, json.loads(result.stdout)


# --- the exit code ----------------------------------------------------------------------------


def _break_a_port(node: Node) -> None:
    node.write(os.path.join(node.sys, "class", "infiniband", "mlx5_1", "ports", "1", "state"),
               "2: INIT")  # fmt: skip


def test_collect_on_a_critical_node_exits_0_once_the_bundle_is_written(node):
    _break_a_port(node)
    result, path = collect(node)
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0].startswith("IBDIAG CRITICAL")
    assert bundle_report(path)["verdict"] == "CRITICAL"


@pytest.mark.parametrize("broken, code, verdict", [(False, 0, "OK"), (True, 2, "CRITICAL")])
def test_exit_verdict_exits_with_the_verdicts_code_after_writing_the_bundle(
    node, broken, code, verdict
):
    if broken:
        _break_a_port(node)
    result, path = collect(node, "--exit-verdict", "--tarball")
    assert result.exit_code == code
    assert result.stdout.splitlines()[0].startswith(f"IBDIAG {verdict}")
    assert os.path.isfile(path) and os.path.isfile(path + ".sha256")  # written, then the code
    assert bundle_report(path)["verdict"] == verdict


def test_exit_verdict_warning_is_1(node, baseline_file):
    node.bump("mlx5_0", "symbol_error", 3)
    result, path = collect(node, "--exit-verdict", "--baseline", baseline_file)
    assert result.exit_code == 1 and bundle_report(path)["verdict"] == "WARNING"


def test_the_exit_code_is_documented_in_help_and_readme(run_cli):
    text = " ".join(run_cli("collect", "--help").stdout.split()).lower()
    assert "--exit-verdict" in text
    assert "exits 0 once the bundle is written, whatever the verdict" in text
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    section = " ".join(readme.split("## Support bundles", 1)[1].split("\n## ", 1)[0].split())
    assert "exits 0 once the bundle is written, whatever the verdict" in section
    assert "`--exit-verdict`" in section and "`--baseline FILE`" in section
    assert "`--state FILE`" in section


# --- --baseline -------------------------------------------------------------------------------


def test_bundle_grades_counters_on_their_change_since_the_baseline(node, baseline_file, run_cli):
    node.bump("mlx5_1", "link_downed", 1)
    result, path = collect(node, "--baseline", baseline_file)
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0].startswith("IBDIAG CRITICAL")
    report = bundle_report(path)
    [fail] = not_passing(report)["counters.port_errors"]
    assert fail["target"] == "mlx5_1:1" and "link_downed +1 since the baseline" in fail["message"]
    assert by_check(report, "counters.baseline")[0]["status"] == "pass"
    # the baseline travels with the bundle, listed and hashed in its manifest
    with open(os.path.join(path, "manifest.json"), encoding="utf-8") as handle:
        manifest = json.load(handle)
    stored = manifest["baseline"]["file"]
    assert stored in {entry["path"] for entry in manifest["files"]}
    assert (
        load_snapshot(os.path.join(path, stored)).collected_at
        == load_snapshot(baseline_file).collected_at
    )

    os.unlink(baseline_file)  # offline: the bundle alone
    code, offline = regrade(run_cli, path)
    assert code.exit_code == 2
    assert sorted((r["check_id"], r["target"], r["status"], r["message"])
                  for r in offline["results"]) == sorted(
        (r["check_id"], r["target"], r["status"], r["message"]) for r in report["results"]
    )  # fmt: skip


def test_a_tarball_and_a_redacted_one_regrade_the_same_offline(node, baseline_file, run_cli):
    node.bump("mlx5_0", "symbol_error", 5)
    for extra in ((), ("--redact", "all")):
        _, path = collect(node, "--tarball", "--baseline", baseline_file, *extra)
        result, offline = regrade(run_cli, path)
        assert result.exit_code == 1, extra
        [warn] = not_passing(offline)["counters.port_errors"]
        assert "symbol_error +5 since the baseline" in warn["message"]
        assert by_check(offline, "counters.baseline")[0]["status"] == "pass", extra
        if extra:
            with tarfile.open(path) as archive:
                for member in archive.getmembers():
                    if member.isfile():
                        data = archive.extractfile(member).read().decode("utf-8", "replace")
                        assert HOST not in data, member.name


def test_check_from_a_bundle_with_its_own_baseline_option_uses_that_one(
    node, baseline_file, run_cli, tmp_path
):
    node.bump("mlx5_0", "link_downed", 2)
    later = str(tmp_path / "later.json")
    assert node.snapshot("-o", later).exit_code == 0  # already counts the two
    _, path = collect(node, "--baseline", baseline_file)
    assert run_cli("check", "--from", path).exit_code == 2
    assert run_cli("check", "--from", path, "--baseline", later).exit_code == 0


def test_a_bundle_without_a_baseline_regrades_on_lifetime_values(node, run_cli):
    _, path = collect(node)
    with open(os.path.join(path, "manifest.json"), encoding="utf-8") as handle:
        assert "baseline" not in json.load(handle)
    result, offline = regrade(run_cli, path)
    assert result.exit_code == 0
    assert by_check(offline, "counters.baseline")[0]["status"] == "skip"


@pytest.mark.parametrize(
    "content, why",
    [(None, "no such file"), (b"{truncated", "not valid JSON"),
     (b'{"hello": "world"}', "not an ibdiag snapshot")],
)  # fmt: skip
def test_a_bad_baseline_file_is_one_line_and_exit_3_before_collecting(node, tmp_path, content, why):
    bad = str(tmp_path / "before.json")
    if content is not None:
        with open(bad, "wb") as handle:
            handle.write(content)
    result, path = collect(node, "--baseline", bad)
    assert result.exit_code == 3
    assert path is None and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("ibdiag: error: baseline ") and bad in lines[0] and why in lines[0]
    assert not (node.tmp / "out").exists()


def test_baseline_and_state_together_is_a_usage_error(node, tmp_path):
    result, path = collect(node, "--baseline", str(tmp_path / "a"), "--state", str(tmp_path / "b"))
    assert result.exit_code == 3 and path is None
    assert result.stderr.startswith("ibdiag: error: give --baseline or --state, not both")


# --- --state ----------------------------------------------------------------------------------


def test_state_first_run_then_the_change_since_it(node, tmp_path, run_cli):
    state = str(tmp_path / "state" / "ibdiag.json")
    os.mkdir(os.path.dirname(state))
    result, first = collect(node, "--state", state)
    assert result.exit_code == 0
    assert by_check(bundle_report(first), "counters.baseline")[0]["status"] == "skip"
    assert load_snapshot(state).host == HOST  # this run's snapshot, for the next

    node.bump("mlx5_0", "symbol_error", 4)
    result, second = collect(node, "--state", state, "--exit-verdict")
    assert result.exit_code == 1
    [warn] = not_passing(bundle_report(second))["counters.port_errors"]
    assert "symbol_error +4 since the baseline" in warn["message"]
    assert load_snapshot(state).devices[0].ports[0].counters["symbol_error"] == 4
    offline = regrade(run_cli, second)[1]
    assert "symbol_error +4" in not_passing(offline)["counters.port_errors"][0]["message"]


def test_a_corrupt_state_is_one_warning_in_the_bundle_and_offline(node, tmp_path, run_cli):
    state = str(tmp_path / "ibdiag.json")
    with open(state, "wb") as handle:
        handle.write(b"{truncated")
    result, path = collect(node, "--state", state)
    assert result.exit_code == 0 and result.stderr == ""
    for report in (bundle_report(path), regrade(run_cli, path)[1]):
        assert list(not_passing(report)) == ["counters.baseline"]
        [warn] = by_check(report, "counters.baseline")
        assert warn["status"] == "warn" and "not valid JSON" in warn["message"]
    assert load_snapshot(state).host == HOST  # rewritten with this run's


def test_a_bundle_whose_stored_baseline_is_gone_regrades_with_one_warning(
    node, baseline_file, run_cli
):
    node.bump("mlx5_1", "link_downed", 1)
    _, path = collect(node, "--baseline", baseline_file)
    os.unlink(os.path.join(path, "baseline", "snapshot.json"))
    result, offline = regrade(run_cli, path)
    assert "missing: baseline/snapshot.json" in result.stderr
    [warn] = by_check(offline, "counters.baseline")
    assert warn["status"] == "warn" and "the bundle's baseline/snapshot.json" in warn["message"]
    assert result.exit_code == 1  # link_downed is graded on its lifetime value: 1 is no fail


@pytest.mark.parametrize(
    "entry, why",
    [({"file": "../../etc/passwd"}, "baseline.file: an unsafe path"),
     ({"problems": {"devices": "x"}}, "baseline.problems: 'devices' is not one of baseline, state"),
     ({"file": 7}, "baseline.file: Input should be a valid string")],
)  # fmt: skip
def test_a_forged_baseline_entry_in_the_manifest_is_refused_in_one_line(
    node, baseline_file, run_cli, entry, why
):
    _, path = collect(node, "--baseline", baseline_file)
    manifest_path = os.path.join(path, "manifest.json")
    with open(manifest_path, encoding="utf-8") as handle:
        manifest = json.load(handle)
    manifest["baseline"] = entry
    with open(manifest_path, "w", encoding="utf-8") as handle:
        json.dump(manifest, handle)
    result = run_cli("report", path)
    assert result.exit_code == 3 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"ibdiag: error: refusing {path}: manifest.json: ") and why in line


def test_a_stored_baseline_that_is_not_a_snapshot_is_one_warning(node, baseline_file, run_cli):
    """The manifest pointing at another of the bundle's files (its summary, say): graded as a
    baseline that cannot be used, never a crash."""
    _, path = collect(node, "--baseline", baseline_file)
    manifest_path = os.path.join(path, "manifest.json")
    with open(manifest_path, encoding="utf-8") as handle:
        manifest = json.load(handle)
    manifest["baseline"]["file"] = "summary.txt"
    with open(manifest_path, "w", encoding="utf-8") as handle:
        json.dump(manifest, handle)
    _, offline = regrade(run_cli, path)
    [warn] = by_check(offline, "counters.baseline")
    assert (
        warn["status"] == "warn" and "the bundle's summary.txt: not valid JSON" in warn["message"]
    )
