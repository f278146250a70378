"""The scenario trees are faithful copies of ../shared/fixtures/sysfs.

The shared captures store symlinks as text files holding the link target; the copies restore
real symlinks (a live /sys has them). Every other file must be byte-identical, and every
capture must have a scenario.
"""

from __future__ import annotations

import os

import pytest
from conftest import SCENARIOS_DIR, SHARED_FIXTURES, scenario_names

SHARED_SYSFS = os.path.join(SHARED_FIXTURES, "sysfs")


def _captures():
    return sorted(
        name for name in os.listdir(SHARED_SYSFS) if os.path.isdir(os.path.join(SHARED_SYSFS, name))
    )


def test_every_shared_capture_has_a_scenario():
    assert _captures(), f"no captures under {SHARED_SYSFS}: is ../shared beside the repo?"
    assert set(_captures()) <= set(scenario_names())


@pytest.mark.parametrize("name", _captures() if os.path.isdir(SHARED_SYSFS) else [])
def test_copy_matches_capture(name):
    source = os.path.join(SHARED_SYSFS, name, "sys")
    copy = os.path.join(SCENARIOS_DIR, name, "root", "sys")
    compared = 0
    for directory, _dirs, files in os.walk(source):
        for file_name in files:
            rel = os.path.relpath(os.path.join(directory, file_name), source)
            with open(os.path.join(source, rel), "rb") as handle:
                original = handle.read()
            copied = os.path.join(copy, rel)
            if os.path.islink(copied):
                assert os.readlink(copied) == original.decode().strip(), rel
                assert os.path.exists(copied), f"{rel}: dangling symlink"
            else:
                with open(copied, "rb") as handle:
                    assert handle.read() == original, rel
            compared += 1
    assert compared > 0
