"""The command families as a whole (``ibdiag.families``): found, validated, each fact they set
checked, their levels known to a quick check without importing them."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REPO
from snapshots import device, port, snapshot

from ibdiag import families
from ibdiag.facts.perfquery import PortPma
from ibdiag.sources import BUILTIN_FAMILY_LEVELS, SOURCE_LEVELS


def test_the_builtin_levels_a_quick_check_reads_are_what_the_families_declare():
    assert families.source_levels() == BUILTIN_FAMILY_LEVELS
    assert all(SOURCE_LEVELS[name] == level for name, level in BUILTIN_FAMILY_LEVELS.items())


def test_a_quick_check_imports_no_family(tmp_path):
    """The prolog path validates every check's needs from the built-in list alone."""
    probe = (
        "import sys\n"
        "from ibdiag.cli import main\n"
        "try:\n"
        "    main(['check', '--level', 'quick', '--sysfs', sys.argv[1], '-q'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('ibdiag.families')))\n"
    )
    sysfs = f"{REPO}/examples/sample-node/sys"
    out = subprocess.run(
        [sys.executable, "-c", probe, sysfs], capture_output=True, text=True, cwd=REPO, check=False
    )
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout + out.stderr


def test_a_misspelt_fact_field_is_an_error_naming_the_family():
    snap = snapshot([device("mlx5_0", ports=[port(1)])])
    update = families.Update(ports={"mlx5_0:1": {"perfqeury": PortPma()}})
    misspelt = "family demo: Port has no fact field 'perfqeury'"
    with pytest.raises(families.FamilyError, match=misspelt):
        families.apply(snap, update, "demo")


def test_a_fact_of_the_wrong_type_is_refused():
    from pydantic import ValidationError

    snap = snapshot([device("mlx5_0", ports=[port(1)])])
    with pytest.raises(ValidationError):
        families.apply(snap, families.Update(ports={"mlx5_0:1": {"perfquery": [1]}}), "demo")
    with pytest.raises(families.FamilyError, match="Snapshot has no fact field 'devicez'"):
        families.apply(snap, families.Update(node={"devicez": [1]}), "demo")


def test_a_family_that_breaks_costs_only_its_own_facts(monkeypatch):
    from ibdiag.families import perfquery

    def broken(snap, runs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(perfquery, "interpret", broken)
    snap = families.interpret(snapshot([device("mlx5_0")]))
    assert snap.problems == {"interpret.perfquery": "RuntimeError: a bug"}


def test_a_family_module_must_declare_what_a_family_is(tmp_path, monkeypatch):
    (tmp_path / "nolevel.py").write_text('SOURCE = "nolevel"\ndef interpret(snap, runs): pass\n')
    monkeypatch.setattr(families, "__path__", [*families.__path__, str(tmp_path)])
    families.families.cache_clear()
    try:
        with pytest.raises(families.FamilyError, match="nolevel: LEVEL must be one of"):
            families.families()
    finally:
        monkeypatch.undo()
        sys.modules.pop("ibdiag.families.nolevel", None)
        families.families.cache_clear()
