"""The published JSON Schemas (``schema/``): committed, current, and true of real output.

``schema/report.schema.json`` is what a consumer validates ``--json`` against,
``schema/manifest.schema.json`` a bundle's manifest.json and ``schema/fleet.schema.json`` the
fleet report (``ibdiag fleet report --json``; real output validated in test_fleet_cli). Three
promises, each tested here:

- the committed files are exactly what ``ibdiag schema`` generates from today's models (a model
  change without a regenerated schema fails here, so the contract never drifts silently);
- real output validates: ``--json`` of every golden scenario (quick), of a level-standard run
  whose stub tools print real captures, of the same node with broken tools (timeouts, garbage),
  of a level-full run, and of a support bundle re-graded with ``report --json``;
- the schema is not vacuous: a report missing its verdict, with an unknown status or an
  unexpected key is rejected.

Formats (``date-time``) are annotations here: jsonschema checks them only with optional
packages, and pydantic already wrote them.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import jsonschema
import pytest
from conftest import SCENARIOS_DIR, scenario_names

from ibdiag.schemas import NAMES, schema_text

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schema"


def committed(name: str) -> dict:
    return json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text())


def validator(name: str) -> jsonschema.protocols.Validator:
    schema = committed(name)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)  # a valid 2020-12 schema in the first place
    return cls(schema)


def assert_valid(name: str, document: dict) -> None:
    errors = sorted(validator(name).iter_errors(document), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(
        f"{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}" for e in errors[:10]
    )


@pytest.mark.parametrize("name", NAMES)
def test_the_committed_schema_is_what_the_models_generate(name, run_cli):
    generated = run_cli("schema", name).stdout
    assert generated == schema_text(name)
    path = SCHEMA_DIR / f"{name}.schema.json"
    assert path.read_text() == generated, (
        f"{path} is stale: run `ibdiag schema {name} -o schema/{name}.schema.json` and commit it"
    )


def test_schema_writes_to_a_file_and_refuses_an_unknown_name(run_cli, tmp_path):
    out = tmp_path / "report.json"
    assert run_cli("schema", "-o", str(out)).exit_code == 0
    assert out.read_text() == schema_text("report")
    refused = run_cli("schema", "nodes")
    assert refused.exit_code == 3 and "Traceback" not in refused.stderr


@pytest.mark.parametrize("name", scenario_names())
def test_every_golden_scenarios_json_validates(name, run_cli):
    sysfs = os.path.join(SCENARIOS_DIR, name, "root", "sys")
    report = json.loads(run_cli("check", "--sysfs", sysfs, "--json").stdout)
    assert_valid("report", report)


def _standard_node(tmp_path, run_cli, monkeypatch):
    from standard_node import FW_SYNDROME_BDF, HEALTHY_BDF, Node

    node = Node(tmp_path, run_cli, bdfs=(FW_SYNDROME_BDF, HEALTHY_BDF))
    monkeypatch.setenv("PATH", node.stubs.path)
    node.healthy_tools()
    return node


def test_level_standard_on_real_captures_validates(tmp_path, run_cli, monkeypatch):
    node = _standard_node(tmp_path, run_cli, monkeypatch)
    run = node.check()
    assert run.report["snapshot"]["commands"], "the run recorded its commands"
    assert_valid("report", run.report)


def test_level_standard_with_broken_tools_validates(tmp_path, run_cli, monkeypatch):
    import stubs as S

    node = _standard_node(tmp_path, run_cli, monkeypatch)
    node.stubs.add("perfquery", S.prints_text("\x00\xff garbage ::: = 12\n"))
    node.stubs.add("ethtool", "sleep 30\n")
    node.stubs.add("ibstat", S.fails("ibstat: mad_rpc_open_port failed", 5))
    run = node.check("--deadline", "3", "--command-timeout", "1")
    assert_valid("report", run.report)


def test_level_full_validates(tmp_path, run_cli, monkeypatch):
    from full_level_node import full_check, full_level_node

    node = full_level_node(tmp_path, monkeypatch)
    _, by_check, report = full_check(run_cli, node)
    assert "perftest.bandwidth" in by_check
    assert_valid("report", report)


def test_a_bundle_and_its_regraded_report_validate(tmp_path, run_cli):
    name = "gcm-8xCX6-HDR-2ports-stuck-INIT"
    sysfs = os.path.join(SCENARIOS_DIR, name, "root", "sys")
    out = tmp_path / "out"
    made = run_cli("collect", "--sysfs", sysfs, "-o", str(out))
    assert made.exit_code in (0, 1, 2), made.stderr
    (bundle,) = [p for p in out.iterdir() if p.is_dir()]
    assert_valid("manifest", json.loads((bundle / "manifest.json").read_text()))
    assert_valid("report", json.loads((bundle / "report.json").read_text()))
    regraded = json.loads(run_cli("report", str(bundle), "--json").stdout)
    assert_valid("report", regraded)


def test_the_schema_rejects_what_ibdiag_never_writes(run_cli):
    sysfs = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-good", "root", "sys")
    good = json.loads(run_cli("check", "--sysfs", sysfs, "--json").stdout)
    assert_valid("report", good)
    check = validator("report")
    no_verdict = copy.deepcopy(good)
    del no_verdict["verdict"]
    bad_status = copy.deepcopy(good)
    bad_status["results"][0]["status"] = "maybe"
    extra_key = copy.deepcopy(good)
    extra_key["snapshot"]["devices"][0]["colour"] = "blue"
    for broken in (no_verdict, bad_status, extra_key):
        assert not check.is_valid(broken)
