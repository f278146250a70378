"""The command line's package (issue 22): every click command in ``ibdiag/cli/``; one exit-code
enum, one error root that the command line turns into one line and exit 3, one write-or-print
helper, one ``--level``. (Nothing outside ``ibdiag.cli`` imports it, and no import circle:
tests/test_architecture.py.)"""

from __future__ import annotations

import os
from pathlib import Path

import click
import pytest
from conftest import REPO, SCENARIOS_DIR

from ibdiag.errors import IbdiagError
from ibdiag.exit_codes import ExitCode

PACKAGE = Path(REPO, "ibdiag")
GOOD = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-good", "root", "sys")


def test_every_click_command_is_in_the_cli_package():
    outside = [
        str(path.relative_to(REPO))
        for path in PACKAGE.rglob("*.py")
        if path.relative_to(PACKAGE).parts[0] != "cli" and "import click" in path.read_text()
    ]
    assert outside == []


@pytest.mark.parametrize(
    "error",
    [
        "ibdiag.config:ConfigError",
        "ibdiag.registry:RegistryError",
        "ibdiag.pipeline:SetupError",
        "ibdiag.bundle.opener:BundleError",
        "ibdiag.slurm.hooks:HookError",
        "ibdiag.fleet.run:RunError",
        "ibdiag.cli.options:UsageFailure",
    ],
)
def test_each_error_a_user_can_cause_is_an_ibdiag_error(error):
    import importlib

    module, name = error.split(":")
    assert issubclass(getattr(importlib.import_module(module), name), IbdiagError)


def test_an_ibdiag_error_anywhere_is_one_line_and_unknown(run_cli, monkeypatch):
    def broken(*args, **kwargs):
        raise IbdiagError("the thing\nwith a second line")

    monkeypatch.setattr("ibdiag.pipeline.Pipeline.prepare", broken)
    result = run_cli("export", "--sysfs", GOOD, "--textfile", os.devnull)
    assert (result.exit_code, result.stdout) == (3, "")
    assert result.stderr == "ibdiag: error: the thing\\x0awith a second line\n"


def test_the_exit_codes_are_one_enum_written_as_numbers():
    from ibdiag.fleet.report import FleetReport
    from ibdiag.model import Verdict

    assert [int(code) for code in ExitCode] == [0, 1, 2, 3]
    assert {verdict.exit_code for verdict in Verdict} == set(ExitCode)
    assert all(Verdict(code.name).exit_code is code for code in ExitCode)
    # str() and format() are the number on every Python (3.9's IntEnum str() is the name)
    assert (str(ExitCode.UNKNOWN), f"{ExitCode.CRITICAL}", f"{ExitCode.OK:>2}") == ("3", "2", " 0")
    fleet = {v: FleetReport.model_construct(verdict=v).exit_code for v in ("CRITICAL", "?")}
    assert fleet == {"CRITICAL": ExitCode.CRITICAL, "?": ExitCode.UNKNOWN}


@pytest.mark.parametrize("command", ["schema", "check", "snapshot", "fleet report"])
def test_a_file_that_cannot_be_written_says_why_never_none(command, run_cli, tmp_path, monkeypatch):
    """An OSError made from a message alone has no strerror: 'cannot write F: None' before."""

    def full_disk(*args, **kwargs):
        raise OSError("the disk said no")

    monkeypatch.setattr("ibdiag.write_files.write_output", full_disk)
    out = tmp_path / "out.json"
    argv = {
        "schema": ["schema", "-o", str(out)],
        "check": ["check", "--sysfs", GOOD, "-o", str(out)],
        "snapshot": ["snapshot", "--sysfs", GOOD, "-o", str(out)],
        "fleet report": ["fleet", "report", str(tmp_path), "-o", str(out)],
    }[command]
    result = run_cli(*argv)
    assert result.exit_code == 3
    assert result.stderr == f"ibdiag: error: cannot write {out}: the disk said no\n"


def test_write_or_print_prints_for_dash_and_nothing_when_quiet(tmp_path, capsys):
    from ibdiag.cli.output import write_or_print

    assert write_or_print("text\n", "-") is False
    assert write_or_print("hidden\n", None, quiet=True) is False
    assert write_or_print("file\n", str(tmp_path / "f"), quiet=True) is True
    assert capsys.readouterr().out == "text\n"
    assert (tmp_path / "f").read_text() == "file\n"


def test_the_level_option_offers_the_registrys_levels():
    from ibdiag.cli import cli
    from ibdiag.cli.options import LEVELS
    from ibdiag.registry import LEVELS as REGISTRY_LEVELS

    assert LEVELS == tuple(REGISTRY_LEVELS)
    offered = {}
    for path in ("check", "collect", "export", "serve", "snapshot", "slurm prolog", "fleet run"):
        command = cli
        for name in path.split():
            command = command.commands[name]
        [level] = [p for p in command.params if p.name == "level"]
        assert isinstance(level.type, click.Choice)
        offered[path] = (tuple(level.type.choices), level.default)
    assert offered == {
        "check": (LEVELS, "quick"),
        "collect": (LEVELS, "standard"),
        "export": (LEVELS, "quick"),
        "serve": (LEVELS[:2], "quick"),
        "snapshot": (LEVELS[:2], "quick"),
        "slurm prolog": (LEVELS[:2], "quick"),
        "fleet run": (LEVELS, "quick"),
    }
