"""The README's node install, then its NHC recipe and the Slurm prolog, with nothing set.

Nothing is configured: the install commands and the nhc.conf line are read out of README.md and
run as written - ``python3 -m venv /opt/ibdiag``, ``/opt/ibdiag/bin/pip install`` this
repository, then the real NHC (which resets PATH, so it cannot see the venv) with the README's
``check_ibdiag`` line, and contrib/slurm's hook as Slurm runs a Prolog (no PATH, no settings
file). To do that without touching the machine's /opt, /var/lib, /run or /sys, each step runs in
a private mount namespace (``unshare --mount``, as root) where a temporary directory is bound
over /opt (the venv), others over /var/lib and /run (state files) and a captured node's sysfs
over /sys.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Dict, List, Sequence

import pytest
from conftest import REPO, SCENARIOS_DIR
from nhc_run import NhcRun, nhc_argv, nhc_conf_dir

README = os.path.join(REPO, "README.md")
GOOD = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-good", "root", "sys")
STUCK = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-2ports-stuck-INIT", "root", "sys")
INSTALL_TIMEOUT = 600


def _readme_section(heading: str) -> str:
    text = Path(README).read_text(encoding="utf-8")
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _code_blocks(section: str) -> List[List[str]]:
    return [
        block.strip("\n").splitlines() for block in re.findall(r"```\w*\n(.*?)```", section, re.S)
    ]


def readme_install_commands() -> List[str]:
    """The node install block: the one that makes the venv under /opt/ibdiag."""
    for block in _code_blocks(_readme_section("## Try it (two commands)")):
        if any(line.startswith("python3 -m venv /opt/ibdiag") for line in block):
            return [line.split("#", 1)[0].strip() for line in block if line.strip()]
    raise AssertionError("README.md has no 'python3 -m venv /opt/ibdiag' install block")


def readme_nhc_conf_lines() -> List[str]:
    lines = [
        line
        for block in _code_blocks(_readme_section("## Node Health Check (NHC)"))
        for line in block
        if line.startswith("* || check_ibdiag")
    ]
    assert lines, "README.md's NHC section has no '* || check_ibdiag' line"
    return lines


def _in_namespace(binds: Dict[str, Path], argv: Sequence[str], timeout: float, **kwargs):
    """Run argv with each directory of ``binds`` mounted over its key, seen by nothing else."""
    mounts = " && ".join(
        f"mount --bind {shlex.quote(str(source))} {shlex.quote(target)}"
        for target, source in binds.items()
    )
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "bash", "-c", f'{mounts} && exec "$@"',
         "in-namespace", *argv],
        stdin=subprocess.DEVNULL, timeout=timeout, check=False, **kwargs,
    )  # fmt: skip


@pytest.fixture(scope="module")
def opt(tmp_path_factory) -> Path:
    """An /opt holding ibdiag installed by the README's commands, run as written."""
    assert os.geteuid() == 0, "these tests bind-mount over /opt, /var/lib and /sys: run as root"
    opt = tmp_path_factory.mktemp("opt")
    commands = [
        command.replace("./ibdiag", shlex.quote(REPO)) for command in readme_install_commands()
    ]
    proc = _in_namespace(
        {"/opt": opt},
        ["bash", "-ec", " && ".join(commands)],
        INSTALL_TIMEOUT,
        cwd=str(opt),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, f"{commands} failed:\n{proc.stdout}\n{proc.stderr}"
    assert os.access(opt / "ibdiag" / "bin" / "ibdiag", os.X_OK)
    return opt


def run_readme_nhc(opt: Path, tmp_path: Path, sysfs: str) -> NhcRun:
    var_lib = tmp_path / "var-lib"
    var_lib.mkdir(exist_ok=True)
    confdir = nhc_conf_dir(tmp_path / "nhc", readme_nhc_conf_lines())
    proc = _in_namespace(
        {"/opt": opt, "/var/lib": var_lib, "/sys": Path(sysfs)},
        nhc_argv(confdir, 30),
        90,
        cwd=str(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return NhcRun(proc.returncode, proc.stdout)


def test_the_readme_recipe_fails_a_sick_node_with_ibdiag_s_reason(opt, tmp_path):
    run = run_readme_nhc(opt, tmp_path, STUCK)
    assert run.rc == 1, run.output
    assert run.failure == "ibdiag: mlx5_6:1 link.state 2: INIT and more"


def test_the_readme_recipe_passes_a_healthy_node_and_keeps_its_state(opt, tmp_path):
    first = run_readme_nhc(opt, tmp_path, GOOD)
    assert (first.rc, first.output) == (0, "")
    state_dir = tmp_path / "var-lib" / "ibdiag"  # /var/lib/ibdiag inside the namespace
    assert stat.S_IMODE(os.stat(state_dir).st_mode) == 0o700
    assert os.listdir(state_dir) == ["nhc-state.json"]
    written = (state_dir / "nhc-state.json").read_text()
    second = run_readme_nhc(opt, tmp_path, GOOD)  # graded against the first run's state
    assert (second.rc, second.output) == (0, "")
    assert (state_dir / "nhc-state.json").read_text() != written


def test_the_slurm_prolog_finds_the_readme_install_with_no_setting(opt, tmp_path):
    assert not os.path.exists("/etc/ibdiag/slurm.env"), "this machine has Slurm hook settings"
    hook = tmp_path / "ibdiag-prolog"  # installed under the name that picks the hook
    shutil.copy(os.path.join(REPO, "contrib", "slurm", "ibdiag-slurm-hook"), hook)
    run = tmp_path / "run"
    run.mkdir()
    proc = _in_namespace(
        {"/opt": opt, "/run": run, "/sys": Path(GOOD)},
        [str(hook)],
        90,
        env={"SLURM_JOB_ID": "7", "SLURMD_NODENAME": "node1"},  # what slurmd gives: no PATH
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # nothing to log: ibdiag ran and the node is healthy
    baseline = run / "ibdiag" / "job-7.json"  # /run/ibdiag/job-7.json in the namespace
    assert stat.S_IMODE(os.stat(baseline).st_mode) == 0o600
    assert '"devices"' in baseline.read_text()
