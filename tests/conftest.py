"""Shared test helpers: run the CLI in-process and find the golden scenarios."""

from __future__ import annotations

import os
import sys
from typing import List

import pytest
from click.testing import CliRunner

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TESTS_DIR)
SCENARIOS_DIR = os.path.join(TESTS_DIR, "scenarios")
SHARED_FIXTURES = os.path.join(os.path.dirname(REPO), "shared", "fixtures")

if TESTS_DIR not in sys.path:  # tests import sysfs_builder, snapshots
    sys.path.insert(0, TESTS_DIR)


def scenario_names() -> List[str]:
    return sorted(
        name
        for name in os.listdir(SCENARIOS_DIR)
        if os.path.isfile(os.path.join(SCENARIOS_DIR, name, "expected.json"))
    )


@pytest.fixture
def run_cli():
    """Invoke ``ibdiag ARGS`` in-process; returns click's Result (exit_code, stdout, stderr)."""
    from ibdiag.cli import cli

    def invoke(*args: str, env=None):
        return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)

    return invoke
