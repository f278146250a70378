"""The README's node install, then its NHC recipe and the Slurm prolog, with nothing set.

One install story, run word for word: README.md's node install block (``python3 -m venv
/opt/ibdiag``, ``/opt/ibdiag/bin/pip install .``) is the start of contrib/slurm/README.md's
Install block, which then installs the hook under its three names; that whole block is run as
written, from the repository's root (where README's "Try it" leaves you). Then the real NHC
(which resets PATH, so it cannot see the venv) runs with the README's ``check_ibdiag`` line, and
the hook the block installed runs as Slurm runs a Prolog (no PATH, no settings file). To do that
without touching the machine's /opt, /etc/slurm, /var/lib, /run or /sys, each step runs in a
private mount namespace (``unshare --mount``, as root) where temporary directories are bound over
/opt (the venv), /etc/slurm (the hooks), /var/lib and /run (state files) and a captured node's
sysfs over /sys: the commands themselves are not changed.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import stat
import subprocess
from pathlib import Path
from typing import Dict, List, Sequence

import pytest
from conftest import REPO, SCENARIOS_DIR
from nhc_run import NhcRun, nhc_argv, nhc_conf_dir

README = os.path.join(REPO, "README.md")
SLURM_README = os.path.join(REPO, "contrib", "slurm", "README.md")
GOOD = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-good", "root", "sys")
STUCK = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-2ports-stuck-INIT", "root", "sys")
INSTALL_TIMEOUT = 600


def _readme_section(heading: str, path: str = README) -> str:
    text = Path(path).read_text(encoding="utf-8")
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _code_blocks(section: str) -> List[List[str]]:
    return [
        block.strip("\n").splitlines() for block in re.findall(r"```\w*\n(.*?)```", section, re.S)
    ]


def _install_block(path: str, heading: str) -> List[str]:
    """The code block of ``heading`` in ``path`` that makes the venv under /opt/ibdiag."""
    for block in _code_blocks(_readme_section(heading, path)):
        if any(line.startswith("python3 -m venv /opt/ibdiag") for line in block):
            return [line for line in block if line.strip()]
    raise AssertionError(f"{path} has no 'python3 -m venv /opt/ibdiag' block under {heading}")


def readme_install_commands() -> List[str]:
    """README.md's node install block, exactly as written."""
    return _install_block(README, "## Try it (two commands)")


def slurm_install_commands() -> List[str]:
    """contrib/slurm/README.md's Install block, exactly as written."""
    return _install_block(SLURM_README, "## Install")


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


def test_one_install_story_in_every_doc():
    """contrib/slurm's install starts with the README's node install, line for line, and no
    doc installs ibdiag by a package name (it is not published)."""
    readme = readme_install_commands()
    assert readme == ["python3 -m venv /opt/ibdiag", "/opt/ibdiag/bin/pip install ."]
    assert slurm_install_commands()[: len(readme)] == readme
    docs = [README, *glob.glob(os.path.join(REPO, "contrib", "**", "*"), recursive=True)]
    for path in (doc for doc in docs if os.path.isfile(doc)):
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        for line in text.splitlines():
            if "does not work" in line:
                continue  # the README saying so
            assert not re.search(r"pip install (-U )?ibdiag(\s|$)", line), f"{path}: {line}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Dict[str, Path]:
    """/opt and /etc/slurm as contrib/slurm's Install block leaves them, run as written from the
    repository's root: the README's node install, then the hook under its three names."""
    assert os.geteuid() == 0, "these tests bind-mount over /opt, /var/lib and /sys: run as root"
    assert os.path.isdir("/etc/slurm"), "no /etc/slurm to bind over (slurm-wlm not installed?)"
    binds = {"/opt": tmp_path_factory.mktemp("opt"), "/etc/slurm": tmp_path_factory.mktemp("slurm")}
    commands = slurm_install_commands()
    proc = _in_namespace(
        binds,
        ["bash", "-ec", "\n".join(commands)],
        INSTALL_TIMEOUT,
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, f"{commands} failed:\n{proc.stdout}\n{proc.stderr}"
    assert os.access(binds["/opt"] / "ibdiag" / "bin" / "ibdiag", os.X_OK)
    return binds


@pytest.fixture(scope="module")
def opt(installed) -> Path:
    return installed["/opt"]


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


def test_the_slurm_prolog_finds_the_readme_install_with_no_setting(installed, tmp_path):
    assert not os.path.exists("/etc/ibdiag/slurm.env"), "this machine has Slurm hook settings"
    for name in ("ibdiag-prolog", "ibdiag-epilog", "ibdiag-healthcheck"):
        hook = installed["/etc/slurm"] / name
        assert stat.S_IMODE(os.stat(hook).st_mode) == 0o755, name
        assert hook.read_bytes() == Path(REPO, "contrib", "slurm", "ibdiag-slurm-hook").read_bytes()
    run = tmp_path / "run"
    run.mkdir()
    var_lib = tmp_path / "var-lib"  # the default history store's /var/lib, not this machine's
    var_lib.mkdir()
    proc = _in_namespace(
        {**installed, "/run": run, "/sys": Path(GOOD), "/var/lib": var_lib},
        ["/etc/slurm/ibdiag-prolog"],  # where slurm.conf's Prolog= points
        90,
        env={"SLURM_JOB_ID": "7", "SLURMD_NODENAME": "node1"},  # what slurmd gives: no PATH
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # nothing to log: ibdiag ran and the node is healthy
    # the prolog keeps the ports' past in the default store, made 0600 in a new 0700 folder
    store = var_lib / "ibdiag" / "history.db"
    assert stat.S_IMODE(os.stat(store).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(store.parent).st_mode) == 0o700
    baseline = run / "ibdiag" / "job-7.json"  # /run/ibdiag/job-7.json in the namespace
    assert stat.S_IMODE(os.stat(baseline).st_mode) == 0o600
    assert '"devices"' in baseline.read_text()
