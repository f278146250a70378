"""Golden scenarios: every real sysfs capture graded end to end through the CLI.

Each tests/scenarios/<name>/expected.json holds the verdict and every non-pass result derived
by reading the capture (its "why" says how); the run must match exactly.
"""

from __future__ import annotations

import json
import os

import pytest
from conftest import SCENARIOS_DIR, scenario_names


@pytest.mark.parametrize("name", scenario_names())
def test_scenario_grades_as_derived_from_the_data(name, run_cli):
    directory = os.path.join(SCENARIOS_DIR, name)
    with open(os.path.join(directory, "expected.json")) as handle:
        expected = json.load(handle)
    sysfs = os.path.join(directory, "root", "sys")
    result = run_cli("check", "--sysfs", sysfs, "--json", *expected["args"])
    report = json.loads(result.stdout)
    non_pass = sorted(
        f"{r['status']} {r['target']} {r['check_id']}"
        for r in report["results"]
        if r["status"] != "pass"
    )
    assert non_pass == expected["non_pass"]
    assert report["verdict"] == expected["verdict"]
    assert result.exit_code == expected["exit_code"]


def test_faulty_captures_do_not_pass(run_cli):
    """The stuck-INIT, degraded-rate and operstate-down captures must never grade OK."""
    for name in (
        "gcm-8xCX6-HDR-2ports-stuck-INIT",
        "gcm-8xCX6-HDR-all-ports-EDR-degraded-rate",
        "gcm-8xCX6-HDR-ib4-operstate-down-flapping",
    ):
        sysfs = os.path.join(SCENARIOS_DIR, name, "root", "sys")
        result = run_cli("check", "--sysfs", sysfs, "--expect-hcas", "8", "--expect-rate", "200")
        assert result.exit_code in (1, 2), name
        assert "IBDIAG OK" not in result.stdout
