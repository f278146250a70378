"""The tests carry their own inputs: a clone needs nothing beside it.

The real-hardware captures (tests/fixtures/<kind>, each folder with its SOURCES.md), the sysfs
captures (tests/scenarios/<name>/root, symlinks restored) and the LBNL NHC the NHC tests run
(tests/vendor/nhc, with its LICENSE and COPYING) are copies of the shared capture set the project
was built from. Where that set lies beside the repository (``../shared``, as on the machines the
project is developed and CI-tested on), the copies must still equal it byte for byte; a clone
without it skips only that comparison.
"""

from __future__ import annotations

import os
import re

import pytest
from conftest import FIXTURES_DIR, REPO, SCENARIOS_DIR, TESTS_DIR, scenario_names
from nhc_run import NHC_SOURCE

SHARED = os.path.join(os.path.dirname(REPO), "shared")
SHARED_FIXTURES = os.path.join(SHARED, "fixtures")
SHARED_SYSFS = os.path.join(SHARED_FIXTURES, "sysfs")
SHARED_NHC = os.path.join(SHARED, "vendor", "nhc")
needs_shared = pytest.mark.skipif(
    not os.path.isdir(SHARED_FIXTURES),
    reason=f"no shared capture set at {SHARED} to compare the copies with (a plain clone)",
)


def _files(root: str):
    """Every file under root, as paths relative to it."""
    return sorted(
        os.path.relpath(os.path.join(directory, name), root)
        for directory, _dirs, names in os.walk(root)
        for name in names
    )


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def test_every_capture_folder_keeps_its_sources_file():
    kinds = sorted(os.listdir(FIXTURES_DIR))
    assert {"perfquery", "ethtool", "dmesg", "sysfs"} <= set(kinds), kinds
    for kind in kinds:
        if os.path.isdir(os.path.join(FIXTURES_DIR, kind)):
            assert os.path.isfile(os.path.join(FIXTURES_DIR, kind, "SOURCES.md")), kind
    assert os.path.isfile(os.path.join(FIXTURES_DIR, "README.md"))
    for name in scenario_names():  # the sysfs captures' own provenance
        assert os.path.isfile(os.path.join(SCENARIOS_DIR, name, "SOURCE.md")), name


def test_nhc_is_carried_with_its_licence():
    for name in ("nhc", "LICENSE", "COPYING", "SOURCES.md", "scripts/common.nhc"):
        assert os.path.isfile(os.path.join(NHC_SOURCE, name)), name
    assert NHC_SOURCE == os.path.join(TESTS_DIR, "vendor", "nhc")
    assert os.access(os.path.join(NHC_SOURCE, "nhc"), os.X_OK)


# A path built to a folder beside the repository: "shared" as a path part, or ../shared.
_OUTSIDE = re.compile(r"""["']shared["']\s*[,/)]|\.\./shared|parents\[2\]""")


def test_no_test_or_benchmark_reads_outside_the_repository():
    """Only this file (the comparison above) may name ../shared."""
    offenders = []
    for top in ("tests", "benchmarks"):
        for rel in _files(os.path.join(REPO, top)):
            if not rel.endswith(".py") or rel == "test_fixture_copies.py":
                continue
            text = open(os.path.join(REPO, top, rel), encoding="utf-8").read()
            offenders += [f"{top}/{rel}: {m.group(0)}" for m in _OUTSIDE.finditer(text)]
    assert offenders == []


@needs_shared
def test_capture_copies_equal_the_shared_captures():
    kinds = [k for k in sorted(os.listdir(FIXTURES_DIR)) if k not in ("sysfs", "COPIED.md")]
    compared = 0
    for kind in kinds:
        if not os.path.isdir(os.path.join(FIXTURES_DIR, kind)):
            assert _read(os.path.join(FIXTURES_DIR, kind)) == _read(
                os.path.join(SHARED_FIXTURES, kind)
            ), kind
            continue
        for rel in _files(os.path.join(FIXTURES_DIR, kind)):
            copy = _read(os.path.join(FIXTURES_DIR, kind, rel))
            assert copy == _read(os.path.join(SHARED_FIXTURES, kind, rel)), f"{kind}/{rel}"
            compared += 1
    assert _read(os.path.join(FIXTURES_DIR, "sysfs", "SOURCES.md")) == _read(
        os.path.join(SHARED_SYSFS, "SOURCES.md")
    )
    assert compared > 50


@needs_shared
def test_nhc_copy_equals_the_shared_one_with_its_run_bits():
    assert _files(NHC_SOURCE) == _files(SHARED_NHC)
    for rel in _files(SHARED_NHC):
        ours, theirs = os.path.join(NHC_SOURCE, rel), os.path.join(SHARED_NHC, rel)
        assert _read(ours) == _read(theirs), rel
        assert os.access(ours, os.X_OK) == os.access(theirs, os.X_OK), rel


@needs_shared
def test_every_shared_sysfs_capture_has_a_scenario():
    captures = sorted(
        name for name in os.listdir(SHARED_SYSFS) if os.path.isdir(os.path.join(SHARED_SYSFS, name))
    )
    assert captures
    assert set(captures) <= set(scenario_names())


@needs_shared
@pytest.mark.parametrize("name", scenario_names())
def test_scenario_tree_matches_its_shared_capture(name):
    """The shared captures store symlinks as text files holding the link target; the copies
    restore real symlinks (a live /sys has them). Every other file is byte-identical."""
    source = os.path.join(SHARED_SYSFS, name, "sys")
    if not os.path.isdir(source):
        pytest.skip(f"{name} is not one of the shared sysfs captures")
    copy = os.path.join(SCENARIOS_DIR, name, "root", "sys")
    compared = 0
    for rel in _files(source):
        original = _read(os.path.join(source, rel))
        copied = os.path.join(copy, rel)
        if os.path.islink(copied):
            assert os.readlink(copied) == original.decode().strip(), rel
            assert os.path.exists(copied), f"{rel}: dangling symlink"
        else:
            assert _read(copied) == original, rel
        compared += 1
    assert compared > 0
