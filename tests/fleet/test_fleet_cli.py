"""``ibdiag fleet report`` end to end, on real per-node reports: each written by ``ibdiag check
--json`` on a golden scenario's sysfs tree, as a distinct host (its procfs names it), and on
real bundles written by ``ibdiag collect``. Exit codes are the fleet's verdict; -o is atomic;
--expect-nodes names the missing; a bad option is one line and exit 3."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest
from click.testing import CliRunner
from conftest import REPO, SCENARIOS_DIR
from stubs import write_procfs

from ibdiag.fleet.node import summarize

GOOD = "gcm-8xCX6-HDR-good"
STUCK = "gcm-8xCX6-HDR-2ports-stuck-INIT"  # CRITICAL
FLAPPING = "gcm-8xCX6-HDR-ib4-operstate-down-flapping"  # WARNING
NODES = {"gpu001": GOOD, "gpu002": GOOD, "gpu003": GOOD, "gpu004": STUCK, "gpu005": FLAPPING}
SCHEMA = Path(REPO) / "schema" / "fleet.schema.json"


def sysfs(scenario: str) -> str:
    return os.path.join(SCENARIOS_DIR, scenario, "root", "sys")


def cli(*args: str):
    from ibdiag.cli import cli as command

    try:  # click 8.1 mixes stderr into stdout unless told not to; 8.2 never does
        runner = CliRunner(mix_stderr=False)
    except TypeError:
        runner = CliRunner()
    return runner.invoke(command, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> Dict[str, str]:
    """host -> its report JSON, as ``ibdiag check --json -o`` wrote it."""
    base = tmp_path_factory.mktemp("nodes")
    found = {}
    for host, scenario in NODES.items():
        procfs = write_procfs(base / host / "proc", hostname=host, modules=None)
        out = base / f"{host}.json"
        done = cli(
            "check", "--sysfs", sysfs(scenario), "--procfs", procfs, "--json", "-o", str(out)
        )
        assert done.exit_code in (0, 1, 2), done.stderr
        found[host] = out.read_text()
        assert json.loads(found[host])["snapshot"]["host"] == host
    return found


def fleet_dir(tmp_path: Path, reports: Dict[str, str], hosts, name: str = "reports") -> str:
    folder = tmp_path / name
    folder.mkdir()
    for host in hosts:
        (folder / f"{host}.json").write_text(reports[host])
    return str(folder)


def assert_one_line_error(result, fragment: str) -> None:
    assert result.exit_code == 3
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("ibdiag: error: ")
    assert fragment in result.stderr and "Traceback" not in result.stderr


def drain_reason(report_text: str) -> str:
    return summarize(json.loads(report_text), "x").drain_reason


# -- exit codes: the fleet's verdict ------------------------------------------------------------


def test_a_healthy_fleet_exits_0(tmp_path, reports):
    done = cli("fleet", "report", fleet_dir(tmp_path, reports, ["gpu001", "gpu002", "gpu003"]))
    assert done.exit_code == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("IBDIAG FLEET OK - ") and lines[0].endswith("(3 nodes read)")
    assert lines[1] == "nodes: OK 3, WARNING 0, CRITICAL 0, UNKNOWN 0" or lines[1].startswith(
        "nodes: OK 3, WARNING 0, CRITICAL 0, UNKNOWN 0, MISSING 0"
    )
    assert done.stderr == ""


def test_a_critical_node_makes_the_fleet_critical_and_is_listed_to_drain(tmp_path, reports):
    folder = fleet_dir(tmp_path, reports, NODES)
    done = cli("fleet", "report", folder)
    assert done.exit_code == 2, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("IBDIAG FLEET CRITICAL - ")
    assert lines[1].startswith("nodes: OK 3, WARNING 1, CRITICAL 1, UNKNOWN 0")
    drain = lines.index("drain (CRITICAL, by reason):")
    assert lines[drain + 1] == f"  {drain_reason(reports['gpu004'])}: gpu004 (1)"
    assert f"  {drain_reason(reports['gpu005'])}: gpu005 (1)" in lines  # under warnings
    assert done.stderr == ""


def test_a_warning_node_makes_the_fleet_warn(tmp_path, reports):
    done = cli("fleet", "report", fleet_dir(tmp_path, reports, ["gpu001", "gpu002", "gpu005"]))
    assert done.exit_code == 1, done.stdout


def test_an_unreadable_input_beside_good_reports_warns_and_loses_no_node(tmp_path, reports):
    """A truncated DIR/gpu004.json: its line under read problems, and gpu004 counted UNKNOWN
    (its report could not be read) - not one node fewer - with no --expect-nodes."""
    folder = fleet_dir(tmp_path, reports, ["gpu001", "gpu002", "gpu003"])
    text = reports["gpu004"]
    Path(folder, "gpu004.json").write_text(text[: len(text) // 3])
    done = cli("fleet", "report", folder, "--json")
    assert done.exit_code == 1
    report = json.loads(done.stdout)
    validate(report)
    assert report["nodes_read"] == 3
    assert report["counts"] == {"OK": 3, "WARNING": 0, "CRITICAL": 0, "UNKNOWN": 1, "MISSING": 0}
    assert report["unknown"] == [
        {"reason": "its report could not be read: truncated JSON", "nodes": "gpu004", "count": 1}
    ]
    assert report["verdict_reason"] == "1 UNKNOWN node, 1 unreadable input"
    (problem,) = report["read_problems"]
    assert problem["source"] == os.path.join(folder, "gpu004.json")
    assert problem["reason"].startswith("truncated JSON (it ends inside a value, at byte ")
    lines = cli("fleet", "report", folder).stdout.splitlines()
    assert lines[1] == "nodes: OK 3, WARNING 0, CRITICAL 0, UNKNOWN 1, MISSING 0"
    assert lines[lines.index("unknown (no verdict; by reason):") + 1] == (
        "  its report could not be read: truncated JSON: gpu004 (1)"
    )
    # expected: the node answered with a file, so it is UNKNOWN, not missing - but its answer
    # is lost as a missing node's is, so the fleet is CRITICAL, as it was with the file absent
    done = cli("fleet", "report", folder, "--json", "--expect-nodes", "gpu[001-004]")
    expected = json.loads(done.stdout)
    assert expected["missing"] is None and expected["counts"]["UNKNOWN"] == 1
    assert done.exit_code == 2 and expected["verdict"] == "CRITICAL"
    assert expected["verdict_reason"] == "1 expected node with an unreadable report"


def test_an_unreadable_report_of_a_node_another_input_answers_for_is_no_unknown_node(
    tmp_path, reports
):
    """gpu004's good report in another run's directory answers for it: the truncated one is a
    read problem only. Nor is a fleet report (fleet-old.json) anyone's node."""
    folder = fleet_dir(tmp_path, reports, ["gpu001", "gpu002"])
    Path(folder, "gpu004.json").write_text(reports["gpu004"][:100])
    old = fleet_dir(tmp_path, reports, ["gpu004"], name="earlier")
    Path(folder, "fleet-old.json").write_text(cli("fleet", "report", old, "--json").stdout)
    report = json.loads(cli("fleet", "report", folder, old, "--json").stdout)
    assert report["nodes_read"] == 3 and report["unknown"] == []
    assert report["counts"] == {"OK": 2, "WARNING": 0, "CRITICAL": 1, "UNKNOWN": 0, "MISSING": 0}
    assert sorted(os.path.basename(p["source"]) for p in report["read_problems"]) == [
        "fleet-old.json",
        "gpu004.json",
    ]


def test_only_unreadable_reports_is_unknown_exit_3_and_names_their_nodes(tmp_path):
    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / "gpu001.json").write_text("{")
    (folder / "gpu002.json").write_bytes(b"\x00\x01")
    done = cli("fleet", "report", str(folder), "--json")
    assert done.exit_code == 3
    report = json.loads(done.stdout)
    assert report["nodes_read"] == 0 and report["counts"]["UNKNOWN"] == 2
    assert report["verdict_reason"] == "no node report could be read, 2 unreadable inputs"
    assert [(g["reason"], g["nodes"]) for g in report["unknown"]] == [
        ("its report could not be read: binary data, not JSON", "gpu002"),
        ("its report could not be read: truncated JSON", "gpu001"),
    ]


def test_no_node_read_is_unknown_exit_3(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    done = cli("fleet", "report", str(empty))
    assert done.exit_code == 3
    assert done.stdout.startswith("IBDIAG FLEET UNKNOWN - ")
    assert f"  {empty}: no reports in {empty}" in done.stdout
    assert done.stderr == ""


def test_expected_nodes_without_a_report_are_missing_and_critical(tmp_path, reports):
    folder = fleet_dir(tmp_path, reports, ["gpu001", "gpu002", "gpu003"])
    done = cli("fleet", "report", folder, "--expect-nodes", "gpu[001-004]", "--json")
    assert done.exit_code == 2
    report = json.loads(done.stdout)
    assert report["verdict"] == "CRITICAL"
    assert report["missing"]["nodes"] == "gpu004" and report["missing"]["count"] == 1
    text = cli("fleet", "report", folder, "--expect-nodes", "gpu[001-004]")
    lines = text.stdout.splitlines()
    assert lines[lines.index("missing (expected, no report):") + 1] == "  gpu004 (1)"
    everyone = cli("fleet", "report", folder, "--expect-nodes", "gpu[001-003]")
    assert everyone.exit_code == 0


def test_a_fleet_run_directory_expects_the_nodes_that_run_was_asked_for(tmp_path, reports):
    """fleet run's DIR: its fleet-run.json is no read problem, and a node that never answered
    is missing without --expect-nodes (which, given, still wins)."""
    from datetime import datetime, timezone

    from ibdiag.fleet.run_record import SUMMARY_NAME, FleetRun, NodeOutcome

    folder = fleet_dir(tmp_path, reports, ["gpu001", "gpu002"])
    now = datetime(2026, 11, 25, tzinfo=timezone.utc)
    outcomes = [NodeOutcome(node=n, answered=True, rc=0) for n in ("gpu001", "gpu002")]
    outcomes.append(NodeOutcome(node="gpu009", answered=False, reason="time limit"))
    run = FleetRun(tool_version="x", level="quick", node_timeout_s=60, started_at=now,
                   ended_at=now, out_dir=folder, srun_argv=["srun"], expected=3,
                   answered_nodes=["gpu001", "gpu002"], never_answered_nodes=["gpu009"],
                   nodes=outcomes, exit_code=1)  # fmt: skip
    Path(folder, SUMMARY_NAME).write_text(run.model_dump_json())
    done = cli("fleet", "report", folder, "--json")
    report = json.loads(done.stdout)
    assert report["read_problems"] == [] and report["nodes_read"] == 2
    assert report["missing"]["nodes"] == "gpu009" and done.exit_code == 2
    given = cli("fleet", "report", folder, "--json", "--expect-nodes", "gpu[001-002]")
    assert json.loads(given.stdout)["missing"] is None
    Path(folder, SUMMARY_NAME).write_text("{not json")
    done = cli("fleet", "report", folder, "--json")
    broken = json.loads(done.stdout)
    # Which nodes were expected is unknown: never silently nothing expected (issue 21).
    assert broken["missing"] is None and done.exit_code == 2
    (problem,) = broken["read_problems"]
    assert problem["source"] == str(Path(folder, SUMMARY_NAME))
    assert problem["reason"].startswith("not JSON (")
    assert problem["reason"].endswith("): the nodes it expects are unknown")
    assert broken["verdict_reason"] == ("the fleet run's list of expected nodes unreadable")


# -- output -------------------------------------------------------------------------------------


def validate(document: dict) -> None:
    import jsonschema

    schema = json.loads(SCHEMA.read_text())
    cls = jsonschema.validators.validator_for(schema)
    errors = list(cls(schema).iter_errors(document))
    assert not errors, [f"{list(e.absolute_path)}: {e.message[:200]}" for e in errors[:5]]


def test_the_json_validates_against_the_published_schema(tmp_path, reports):
    folder = fleet_dir(tmp_path, reports, NODES)
    Path(folder, "garbage.json").write_bytes(b"\x00\x01\x02")
    Path(folder, "gpu001-again.json").write_text(reports["gpu001"])
    done = cli("fleet", "report", folder, "--json", "--switch-min-nodes", "7")
    assert done.exit_code == 2
    report = json.loads(done.stdout)
    validate(report)
    assert report["settings"]["switch_min_nodes"] == 7
    assert report["nodes_read"] == 5
    assert [d["nodes"] for d in report["duplicates"]] == ["gpu001"]
    assert [p["reason"] for p in report["read_problems"]] == ["binary data, not JSON"]
    assert cli("fleet", "report", folder, "--format", "json").stdout.startswith("{")


def test_o_writes_atomically_and_prints_the_verdict_line(tmp_path, reports):
    folder = fleet_dir(tmp_path, reports, NODES)
    out = Path(folder, "fleet.json")
    out.write_text("the previous run's report\n")
    held = open(out)  # a reader of the previous file keeps it whole: the new one is renamed in
    try:
        done = cli("fleet", "report", folder, "-o", str(out))
        assert held.read() == "the previous run's report\n"
    finally:
        held.close()
    assert done.exit_code == 2
    assert done.stdout.startswith("IBDIAG FLEET CRITICAL - ") and done.stdout.count("\n") == 1
    written = json.loads(out.read_text())
    validate(written)
    assert not [name for name in os.listdir(folder) if name.startswith(".ibdiag-")]
    # fleet.json beside the reports is not read as one of them next time
    again = cli("fleet", "report", folder, "--json")
    assert json.loads(again.stdout)["nodes_read"] == 5
    assert json.loads(again.stdout)["read_problems"] == []
    text = Path(folder, "fleet.txt")
    quiet = cli("fleet", "report", folder, "-o", str(text), "-q")
    assert quiet.stdout == "" and quiet.exit_code == 2
    assert text.read_text().startswith("IBDIAG FLEET CRITICAL - ")
    dash = cli("fleet", "report", folder, "-o", "-", "--json")
    assert json.loads(dash.stdout)["nodes_read"] == 5


def test_o_where_it_cannot_write_is_one_line(tmp_path, reports):
    folder = fleet_dir(tmp_path, reports, ["gpu001"])
    done = cli("fleet", "report", folder, "-o", str(tmp_path / "no-such-dir" / "fleet.json"))
    assert_one_line_error(done, "cannot write")


def test_html_output(tmp_path, reports):
    """Needs the HTML helper's ibdiag.fleet.render_html (merged separately)."""
    folder = fleet_dir(tmp_path, reports, NODES)
    out = tmp_path / "fleet.html"
    done = cli("fleet", "report", folder, "-o", str(out))
    assert done.exit_code == 2, done.stderr
    page = out.read_text()
    assert "<html" in page.lower() and "gpu004" in page


# -- usage errors: one line, exit 3 -------------------------------------------------------------


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--expect-nodes", "gpu[001-"], "--expect-nodes: unbalanced '['"),
        (["--expect-nodes", "gpu[1-99999999]"], "--expect-nodes: "),
        (["--expect-nodes", ","], "--expect-nodes names no host"),
        (["--switch-min-share", "0"], "--switch-min-share 0.0: Input should be greater than 0"),
        (["--outlier-min-nodes", "2"], "--outlier-min-nodes 2: Input should be greater than"),
        (["--outlier-margin", "lots"], "'lots' is not a valid float"),
        (["--workers", "0"], "--workers"),
        (["--format", "pdf"], "--format"),
        (["--no-such-option"], "--no-such-option"),
    ],
)
def test_a_bad_option_is_one_line_and_exit_3(tmp_path, reports, args, fragment):
    folder = fleet_dir(tmp_path, reports, ["gpu001"])
    assert_one_line_error(cli("fleet", "report", folder, *args), fragment)


def test_no_input_is_a_usage_error():
    assert_one_line_error(cli("fleet", "report"), "Missing argument")


def test_the_settings_options_are_the_fleet_settings():
    from ibdiag.cli.fleet_report import _SETTINGS
    from ibdiag.fleet.report import FleetSettings

    assert list(_SETTINGS) == list(FleetSettings.model_fields)
    for name, field in FleetSettings.model_fields.items():
        assert f"[default: {field.default}]" in _SETTINGS[name][2], name
    for name in _SETTINGS:
        assert f"--{name.replace('_', '-')}" in cli("fleet", "report", "--help").stdout


# -- bundles, duplicates, a real process ------------------------------------------------------


def collect(tmp_path: Path, host: str, scenario: str, out: Path, tarball: bool) -> str:
    procfs = write_procfs(tmp_path / f"proc-{host}", hostname=host, modules=None)
    args = ["collect", "--level", "quick", "--sysfs", sysfs(scenario), "--procfs", procfs]
    done = cli(*args, "-o", str(out), *(["--tarball"] if tarball else []))
    assert done.exit_code == 0, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("bundle: ")]
    return line[len("bundle: ") :]


def test_bundles_from_ibdiag_collect_beside_reports(tmp_path, reports):
    folder = Path(fleet_dir(tmp_path, reports, ["gpu001", "gpu002"]))
    collect(tmp_path, "gpu011", GOOD, folder, tarball=True)
    directory = collect(tmp_path, "gpu012", STUCK, folder, tarball=False)
    done = cli("fleet", "report", str(folder), "--json")
    report = json.loads(done.stdout)
    assert report["nodes_read"] == 4 and report["read_problems"] == []
    assert done.exit_code == 2  # gpu012's bundle holds a CRITICAL report
    # an altered bundle is a read problem, unless accepted - then its node is noted
    report_json = Path(directory, "report.json")
    report_json.write_text(report_json.read_text().replace('"CRITICAL"', '"OK"', 1))
    refused = json.loads(cli("fleet", "report", str(folder), "--json").stdout)
    assert refused["nodes_read"] == 3
    (problem,) = refused["read_problems"]
    assert problem["source"] == directory and "report.json" in problem["reason"]
    accepted = cli("fleet", "report", str(folder), "--accept-altered")
    lines = accepted.stdout.splitlines()
    note = lines[lines.index("read with a caveat:") + 1]
    assert note.startswith("  read from a bundle whose files differ from its manifest")
    assert note.endswith(": gpu012 (1)")


def test_a_host_reported_twice_is_listed_once_with_its_sources(tmp_path, reports):
    folder = fleet_dir(tmp_path, reports, ["gpu001", "gpu002"])
    older = json.loads(reports["gpu001"])
    older["snapshot"]["collected_at"] = "2020-01-01T00:00:00Z"
    Path(folder, "old-gpu001.json").write_text(json.dumps(older))
    done = cli("fleet", "report", folder)
    lines = done.stdout.splitlines()
    assert lines[0].endswith("(2 nodes read)")
    (line,) = lines[lines.index("duplicates (one host, several reports):") + 1 :]
    new = os.path.join(folder, "gpu001.json")
    assert line.startswith(f"  2 reports: used {new} (collected ")
    assert line.endswith(f"not {os.path.join(folder, 'old-gpu001.json')}: gpu001 (1)")


def cloned(report_text: str, host: str, machine: int) -> str:
    """The report as another machine of a cloned image writes it: the kernel's host name
    ``host``, its own boot id and its own HCAs' GUIDs."""
    data = json.loads(report_text)
    data["snapshot"]["host"] = host
    data["snapshot"]["boot_id"] = f"5c1f2f6e-7a0e-4c59-9a0b-{machine:012x}"
    for n, device in enumerate(data["snapshot"]["devices"]):
        device["node_guid"] = f"0c42:a103:{machine:04x}:{n:04x}"
    return json.dumps(data)


def test_two_machines_saying_localhost_are_both_counted_by_their_file_names(tmp_path, reports):
    """gpu001.json and gpu002.json both say host localhost: two machines (no HCA GUID or boot
    id in common), so two nodes, neither missing nor a duplicate, and one note says so."""
    folder = fleet_dir(tmp_path, reports, ["gpu003"])
    for n in (1, 2):
        Path(folder, f"gpu00{n}.json").write_text(cloned(reports["gpu001"], "localhost", n))
    done = cli("fleet", "report", folder, "--expect-nodes", "gpu[001-003]", "--json")
    report = json.loads(done.stdout)
    validate(report)
    assert done.exit_code == 0, done.stdout
    assert report["nodes_read"] == 3 and report["counts"]["OK"] == 3
    assert report["missing"] is None and report["duplicates"] == []
    assert report["read_notes"] == [
        {
            "reason": "gpu001.json, gpu002.json both say host localhost: named by their file names",
            "nodes": "gpu[001-002]",
            "count": 2,
        }
    ]
    text = cli("fleet", "report", folder, "--expect-nodes", "gpu[001-003]").stdout.splitlines()
    assert text[text.index("read with a caveat:") + 1] == (
        "  gpu001.json, gpu002.json both say host localhost: named by their file names: "
        "gpu[001-002] (2)"
    )


def test_one_machine_in_two_runs_under_its_kernel_name_is_one_node(tmp_path, reports):
    """The same machine (its HCA GUIDs) in two runs' directories, rebooted in between (another
    boot id), under file names that differ: one node, the newest report, listed."""
    older = json.loads(cloned(reports["gpu001"], "localhost", 1))
    older["snapshot"]["collected_at"] = "2020-01-01T00:00:00Z"
    newer = json.loads(cloned(reports["gpu001"], "localhost", 1))
    newer["snapshot"]["boot_id"] = "another-boot"
    runs = [tmp_path / "run1", tmp_path / "run2"]
    for run, name, data in zip(runs, ("a.json", "b.json"), (older, newer)):
        run.mkdir()
        (run / name).write_text(json.dumps(data))
    report = json.loads(cli("fleet", "report", *map(str, runs), "--json").stdout)
    assert report["nodes_read"] == 1 and report["read_notes"] == []
    (duplicate,) = report["duplicates"]
    assert duplicate["nodes"] == "localhost"
    assert duplicate["reason"].startswith(f"2 reports: used {runs[1] / 'b.json'} (collected ")


# What the first ibdiag's models held (git show bb309c2:ibdiag/model.py): a report as it wrote
# one has none of the fields added since - Snapshot.kernel_release and driver_versions
# (bdaf040), Report.counter_increases (8f5ff84), Port.partner (1c9fe46), the typed facts
# (inventory, kernel_log, loopback, nccl_*, perfquery, ethtool), Result.subject ...
FIRST_FIELDS = {
    "report": {"schema_version", "tool_version", "level", "verdict", "verdict_reason", "results",
               "thresholds", "snapshot"},
    "snapshot": {"schema_version", "tool_version", "host", "boot_id", "collected_at",
                 "sysfs_root", "procfs_root", "sources", "devices", "problems"},
    "device": {"name", "path", "node_type", "node_type_name", "hca_type", "board_id", "fw_ver",
               "node_guid", "sys_image_guid", "node_desc", "hw_rev", "pci", "ports",
               "hw_counters", "problems"},
    "port": {"number", "path", "state", "state_name", "phys_state", "phys_state_name", "rate",
             "link_layer", "lid", "sm_lid", "counters", "hw_counters", "netdev", "problems"},
    "result": {"check_id", "target", "status", "message", "observed", "expected", "hint",
               "evidence"},
}  # fmt: skip


def as_first_ibdiag_wrote_it(report_text: str, version: str) -> str:
    """The report with only the fields the first ibdiag wrote, as ibdiag ``version``."""

    def keep(data: dict, kind: str) -> dict:
        return {key: value for key, value in data.items() if key in FIRST_FIELDS[kind]}

    data = keep(json.loads(report_text), "report")
    data["tool_version"] = version
    data["results"] = [keep(result, "result") for result in data["results"]]
    snap = data["snapshot"] = keep(data["snapshot"], "snapshot")
    snap["tool_version"] = version
    snap["devices"] = [keep(device, "device") for device in snap["devices"]]
    for device in snap["devices"]:
        device["ports"] = [keep(port, "port") for port in device["ports"]]
    return json.dumps(data)


def test_reports_of_an_older_ibdiag_are_read_and_only_its_version_drifts(tmp_path, reports):
    """5 nodes as this ibdiag writes them (kernel release, driver versions, counter increases
    since a baseline) and 3 as the first ibdiag did (none of those): all 8 read, and the only
    drift is the ibdiag version - nothing from the fields the older one did not write."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    current = json.loads(reports["gpu001"])
    current["snapshot"]["kernel_release"] = "5.15.0-1068-azure"
    current["snapshot"]["driver_versions"] = {"mlx5_core": "24.10-1.1.4", "ib_core": "24.10"}
    current["counter_increases"] = {"hours": 2.0, "rebooted": False, "targets": {}}
    for n in range(1, 9):
        host = f"gpu{n:03d}"
        text = json.dumps(current).replace('"gpu001"', f'"{host}"')
        if n > 5:
            text = as_first_ibdiag_wrote_it(text, "0.0.9")
            assert "kernel_release" not in text and "driver_versions" not in text
        (folder / f"{host}.json").write_text(text)
    done = cli("fleet", "report", str(folder), "--json")
    report = json.loads(done.stdout)
    validate(report)
    assert report["read_problems"] == [] and report["read_notes"] == []
    assert report["nodes_read"] == 8 and report["counts"]["OK"] == 8
    assert report["outliers"] == []
    (drift,) = report["drift"]
    assert drift == {
        "attribute": "ibdiag_version",
        "rail": None,
        "majority": json.loads(reports["gpu001"])["tool_version"],
        "majority_count": 5,
        "others": [{"value": "0.0.9", "nodes": "gpu[006-008]", "count": 3}],
    }
    assert done.exit_code == 1 and report["verdict_reason"] == "1 drifting attribute"
    lines = cli("fleet", "report", str(folder)).stdout.splitlines()
    assert lines[lines.index("drift (the majority, then the others):") + 1] == (
        f"  ibdiag_version: {drift['majority']} on 5 nodes; 0.0.9 on gpu[006-008] (3)"
    )


def test_a_real_process_with_a_pool_of_workers(tmp_path, reports):
    folder = fleet_dir(tmp_path, reports, NODES)
    for n in range(6, 40):  # more reports than one chunk per worker
        text = reports["gpu001"].replace('"gpu001"', f'"gpu{n:03d}"')
        Path(folder, f"gpu{n:03d}.json").write_text(text)
    Path(folder, "trunc.json").write_text("{")
    env = {**os.environ, "PYTHONPATH": REPO}
    argv = [sys.executable, "-m", "ibdiag", "fleet", "report", folder, "--workers", "2", "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 2 and done.stderr == ""
    report = json.loads(done.stdout)
    validate(report)
    assert report["nodes_read"] == 39 and report["counts"]["OK"] == 37
    assert report["counts"]["UNKNOWN"] == 1  # "trunc": the node trunc.json names
    assert [p["source"] for p in report["read_problems"]] == [os.path.join(folder, "trunc.json")]
