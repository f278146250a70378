"""The site defaults (/etc/ibdiag/ibdiag.toml, /etc/ibdiag/checks.d) come from one place,
``$IBDIAG_CONFIG_DIR`` else /etc/ibdiag, read at call time - and no test reads the machine's.

conftest's autouse ``no_machine_site_config`` points the variable at a fresh empty directory
for every test; subprocesses (``python -m ibdiag``, an installed ibdiag) inherit it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, SCENARIOS_DIR

from ibdiag import config, registry

GOOD = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-good", "root", "sys")
DROPIN = '''\
from ibdiag.model import Result, Status
from ibdiag.registry import check


@check("site.planted", title="A check planted in the site directory")
def planted(snap, th):
    """Healthy: always; it shows where drop-ins were read from."""
    return [Result(target="node", status=Status.PASS, message="planted ran")]
'''


@pytest.mark.parametrize("round_", [1, 2])
def test_every_default_path_points_under_an_empty_temp_dir(tmp_path_factory, round_) -> None:
    site = Path(config.site_config_dir())
    assert site.is_dir()
    assert list(site.iterdir()) == []  # in round 2 too: each test gets its own directory
    assert site.parent == tmp_path_factory.getbasetemp()
    assert config.default_config_path() == str(site / "ibdiag.toml")
    assert registry.default_dropin_dir() == str(site / "checks.d")
    assert os.environ["IBDIAG_SLURM_ENV"] == str(site / "slurm.env")
    assert "NCCL_INSPECTOR_DUMP_DIR" not in os.environ
    (site / "ibdiag.toml").write_text("expect_hcas = 3\n")  # must not leak into round 2


def test_without_the_variable_the_defaults_are_etc_ibdiag(monkeypatch) -> None:
    monkeypatch.delenv("IBDIAG_CONFIG_DIR")
    assert config.default_config_path() == "/etc/ibdiag/ibdiag.toml"
    assert registry.default_dropin_dir() == "/etc/ibdiag/checks.d"
    monkeypatch.setenv("IBDIAG_CONFIG_DIR", "")  # set but empty: as if unset
    assert config.default_config_path() == "/etc/ibdiag/ibdiag.toml"


@pytest.fixture
def planted(tmp_path_factory) -> Path:
    """A site config and a drop-in in the (temporary) site directory."""
    site = Path(config.site_config_dir())
    assert site.parent == tmp_path_factory.getbasetemp(), "never plant files in the real /etc"
    (site / "ibdiag.toml").write_text("expect_hcas = 3\n", encoding="utf-8")
    (site / "checks.d").mkdir()
    (site / "checks.d" / "planted.py").write_text(DROPIN, encoding="utf-8")
    return site


def test_in_process_cli_reads_the_site_dir(run_cli, planted: Path) -> None:
    shown = run_cli("config", "show")
    assert f"expect_hcas = 3  # config {planted / 'ibdiag.toml'}" in shown.stdout
    listed = run_cli("checks")
    assert "site.planted" in listed.stdout
    result = run_cli("check", "--sysfs", GOOD, "--verbose")
    assert "planted ran" in result.stdout


def test_a_subprocess_ibdiag_reads_the_same_site_dir(planted: Path) -> None:
    def ibdiag(*args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "ibdiag", *args],
            cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    assert f"expect_hcas = 3  # config {planted / 'ibdiag.toml'}" in ibdiag("config", "show")
    assert "site.planted" in ibdiag("checks")
