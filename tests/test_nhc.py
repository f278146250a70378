"""contrib/nhc/ibdiag.nhc, sourced as NHC sources its scripts, with `die` and `log` captured."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from conftest import REPO, SCENARIOS_DIR

NHC_SCRIPT = os.path.join(REPO, "contrib", "nhc", "ibdiag.nhc")
GOOD = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-good", "root", "sys")
STUCK = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-2ports-stuck-INIT", "root", "sys")
FLAPPING = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-ib4-operstate-down-flapping", "root", "sys")

HARNESS = """
set -u
log() { echo "LOG $*" >> "$CAPTURE"; }
die() { echo "DIE $1 $2" >> "$CAPTURE"; return 1; }
source "$NHC_SCRIPT"
check_ibdiag "$@"
echo "RC $?" >> "$CAPTURE"
"""


@pytest.fixture
def nhc(tmp_path):
    """Run check_ibdiag ARGS in bash as NHC would; returns the captured die/log/rc lines."""
    wrapper = tmp_path / "ibdiag"
    wrapper.write_text(f'#!/bin/sh\ncd {REPO} && exec {sys.executable} -m ibdiag "$@"\n')
    wrapper.chmod(0o755)

    def run(*args, ibdiag=str(wrapper), **env):
        capture = tmp_path / "capture.txt"
        if capture.exists():
            capture.unlink()
        environ = {**os.environ, "CAPTURE": str(capture), "NHC_SCRIPT": NHC_SCRIPT,
                   "IBDIAG": ibdiag, **env}  # fmt: skip
        subprocess.run(["bash", "-c", HARNESS, "nhc", *args], env=environ, timeout=60, check=True)
        return capture.read_text().splitlines()

    return run


def test_failing_node_dies_with_the_stable_reason(nhc):
    assert nhc("--sysfs", STUCK) == ["DIE 1 ibdiag: mlx5_6:1 link.state 2: INIT and more", "RC 1"]


def test_healthy_node_passes_silently(nhc):
    assert nhc("--sysfs", GOOD) == ["RC 0"]


def test_warning_is_logged_and_passes(nhc):
    assert nhc("--sysfs", FLAPPING) == [
        "LOG check_ibdiag: warning: ibdiag: mlx5_6:1 netdev.operstate down",
        "RC 0",
    ]


def test_unknown_is_logged_not_fatal_unless_strict(nhc, tmp_path):
    empty = tmp_path / "empty-sys"
    empty.mkdir()
    lines = nhc("--sysfs", str(empty))
    assert lines[-1] == "RC 0" and lines[0].startswith("LOG check_ibdiag: could not judge")
    lines = nhc("--bogus-option")
    assert lines[-1] == "RC 0" and "No such option" in lines[0]
    strict = nhc("--bogus-option", IBDIAG_STRICT="1")
    assert strict[-1] == "RC 1" and strict[0].startswith("DIE 1 ibdiag: could not judge")


def test_a_hung_ibdiag_is_cut_off_within_the_limit(nhc, tmp_path):
    hung = tmp_path / "hung-ibdiag"
    hung.write_text("#!/bin/sh\nexec sleep 60\n")
    hung.chmod(0o755)
    start = time.monotonic()
    lines = nhc("--sysfs", GOOD, ibdiag=str(hung), IBDIAG_TIMEOUT="1")
    assert time.monotonic() - start < 10
    assert lines == ["DIE 1 ibdiag: timed out after 1s", "RC 1"]


def test_limit_follows_nhc_timeout(nhc, tmp_path):
    hung = tmp_path / "hung-ibdiag"
    hung.write_text("#!/bin/sh\nexec sleep 60\n")
    hung.chmod(0o755)
    lines = nhc("--sysfs", GOOD, ibdiag=str(hung), TIMEOUT="11")
    assert lines == ["DIE 1 ibdiag: timed out after 6s", "RC 1"]
