"""Names from a node cannot forge text output (issue 12 item 8).

A device name and a hostname carrying an OSC title sequence, a clear-screen and a newline
followed by a fake verdict: the text report keeps one line per result and one verdict line,
``--reason`` stays one line, and no control character reaches the terminal.
"""

from __future__ import annotations

import os
import re
import shutil

import pytest
from conftest import SCENARIOS_DIR

from ibdiag.render.inert import inert

STUCK = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-2ports-stuck-INIT", "root", "sys")
FORGED = "\x1b]0;owned\x07\x1b[2J\nIBDIAG OK - 105 pass (8 HCAs, 8 ports, level quick) on gpu001"
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # anything but \n and \t


@pytest.fixture
def hostile_node(tmp_path):
    sysfs = tmp_path / "sys"
    shutil.copytree(STUCK, sysfs, symlinks=True)
    devices = sysfs / "class" / "infiniband"
    os.rename(devices / "mlx5_6", devices / f"mlx5_6{FORGED}")  # a failing port's device
    proc = tmp_path / "proc"
    (proc / "sys" / "kernel").mkdir(parents=True)
    (proc / "sys" / "kernel" / "hostname").write_text(f"node7{FORGED}\n")
    return str(sysfs), str(proc)


def test_inert_escapes_what_steers_a_terminal_and_keeps_the_rest():
    assert inert("mlx5_0:1 link.state 2: INIT") == "mlx5_0:1 link.state 2: INIT"
    assert inert("a\nb\r\x1b[2J\x07\x7f\x9b") == "a\\x0ab\\x0d\\x1b[2J\\x07\\x7f\\x9b"
    assert inert("x\u2028y\u202ez\udcff") == "x\\u2028y\\u202ez\\udcff"
    assert inert("Grüße ConnectX-7 ①") == "Grüße ConnectX-7 ①"


def test_text_report_keeps_one_line_per_result_and_one_verdict(run_cli, hostile_node):
    sysfs, proc = hostile_node
    result = run_cli("check", "--sysfs", sysfs, "--procfs", proc)
    assert result.exit_code == 2
    lines = result.stdout.splitlines()
    assert [line for line in lines if line.startswith("IBDIAG")] == [lines[-1]]
    assert lines[-1].startswith("IBDIAG CRITICAL - ")
    assert lines[-1].endswith("on node7\\x1b]0;owned\\x07\\x1b[2J\\x0aIBDIAG OK - 105 pass "
                              "(8 HCAs, 8 ports, level quick) on gpu001")  # fmt: skip
    assert all(line.startswith(("FAIL ", "WARN ", "ERROR")) for line in lines[:-1]), lines
    assert not CONTROL.search(result.stdout)
    assert any(line.startswith("FAIL  mlx5_6\\x1b]0;owned") for line in lines), lines


def test_reason_is_one_line(run_cli, hostile_node):
    sysfs, proc = hostile_node
    result = run_cli("check", "--sysfs", sysfs, "--procfs", proc, "--reason")
    assert result.exit_code == 2
    assert result.stdout.count("\n") == 1 and not CONTROL.search(result.stdout)
    # one line of the drain reasons' safe characters, at most 128 of them
    assert result.stdout.startswith("ibdiag: mlx5_6_x1b_0_owned_x07_x1b_2J_x0aIBDIAG OK - ")
    assert re.fullmatch(r"[A-Za-z0-9 _.,:/+<>()-]{1,128}\n", result.stdout), result.stdout


def test_verbose_and_counters_listing_stay_inert(run_cli, hostile_node):
    sysfs, proc = hostile_node
    verbose = run_cli("check", "--sysfs", sysfs, "--procfs", proc, "-v")
    assert not CONTROL.search(verbose.stdout)
    assert verbose.stdout.count("\nIBDIAG ") + verbose.stdout.startswith("IBDIAG ") == 1
    counters = run_cli("counters", "--sysfs", sysfs, "--procfs", proc, "--all")
    assert counters.exit_code == 0 and not CONTROL.search(counters.stdout)
