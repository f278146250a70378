"""./dev/run-tests, the one test command: README shows it, .ci/run runs it, a bare clone can.

What it does with missing Debian packages is tested as a user who is not root (nobody): the one
apt-get line and exit 6, before anything is installed or run. ``dpkg-query`` is a stand-in on
PATH that says which packages are "installed", so the test does not depend on this machine's
packages (and never runs apt). What the whole command does as root from a clone with no
no shared capture set beside it was run by hand (see the README's Development section for the time).
"""

from __future__ import annotations

import glob
import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List

import pytest
from conftest import REPO

SCRIPT = os.path.join(REPO, "dev", "run-tests")
NOT_READY = 6


def listed_packages() -> List[str]:
    text = Path(REPO, "dev", "debian-packages").read_text(encoding="utf-8")
    return [word for line in text.splitlines() for word in line.split("#", 1)[0].split()]


def fake_dpkg(tmp_path: Path, missing: List[str]) -> Path:
    """A bin directory whose dpkg-query reports every package installed but ``missing``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    cases = "|".join(missing) or "no-package-is-missing"
    script = bin_dir / "dpkg-query"
    script.write_text(f"#!/bin/sh\ncase \"$3\" in {cases}) exit 1;; esac\nprintf 'ii '\n")
    script.chmod(0o755)
    return bin_dir


@pytest.fixture
def open_dir():
    """A temporary directory user nobody can reach (pytest's tmp_path is root's alone)."""
    with tempfile.TemporaryDirectory(prefix="run-tests-", dir="/tmp") as name:
        os.chmod(name, 0o755)  # noqa: S103  (read and search only, for nobody)
        yield Path(name)


def as_nobody(argv: List[str]) -> List[str]:
    if os.geteuid() != 0:
        return argv  # already not root
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]


def test_readme_and_ci_run_the_same_one_command():
    readme = Path(REPO, "README.md").read_text(encoding="utf-8")
    try_it = readme.split("## Try it", 1)[1].split("\n## ", 1)[0]
    assert "\n./dev/run-tests\n" in try_it
    ci = Path(REPO, ".ci", "run").read_text(encoding="utf-8")
    assert re.findall(r'^TEST_COMMAND="(.*)"$', ci, re.M) == ["./dev/run-tests"]
    assert os.access(SCRIPT, os.X_OK)


def test_without_root_a_missing_package_is_one_apt_line_and_nothing_runs(open_dir):
    packages = listed_packages()
    assert {"slurm-wlm", "opensm", "chromium", "python3-venv"} <= set(packages)
    missing = ["chromium", "opensm"]
    bin_dir = fake_dpkg(open_dir, missing)
    bin_dir.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(open_dir), "LANG": "C.UTF-8"}
    proc = subprocess.run(
        as_nobody([SCRIPT, "-x"]),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == NOT_READY, proc.stderr
    assert "not installed here: chromium opensm" in proc.stderr
    lines = [line.strip() for line in proc.stderr.splitlines() if "apt-get" in line]
    assert lines == ["sudo sh -c 'apt-get update && apt-get install -y chromium opensm'"]
    assert "pytest" not in proc.stderr and proc.stdout == ""  # nothing else was started


def test_pytest_arguments_and_exit_code_pass_through(tmp_path):
    """With the packages present the command installs the test extra into the active virtualenv
    and runs pytest with the given arguments, exiting with pytest's code (4: no such test)."""
    env = dict(os.environ, PATH=f"{fake_dpkg(tmp_path, [])}:{os.environ['PATH']}")
    env["VIRTUAL_ENV"] = sys.prefix  # the environment running these tests
    assert sys.prefix != sys.base_prefix, "run the tests in a virtualenv"
    one = "tests/test_fixture_copies.py::test_nhc_is_carried_with_its_licence"
    ok = [SCRIPT, "-q", "-p", "no:cacheprovider", one]
    proc = subprocess.run(ok, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout
    assert f"({sys.prefix}/bin/python)" in proc.stderr

    absent = [SCRIPT, "-q", "-p", "no:cacheprovider", "tests/test_no_such_file.py"]
    proc = subprocess.run(absent, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, proc.stdout + proc.stderr


def test_a_plain_python_m_pytest_still_finds_everything():
    """No test reads from outside the repository: the captures and NHC are in tests/."""
    from nhc_run import NHC_SOURCE
    from stubs import FIXTURES

    assert os.path.commonpath([FIXTURES, REPO]) == REPO
    assert os.path.commonpath([NHC_SOURCE, REPO]) == REPO


def test_the_suite_started_as_a_background_job_still_gets_ctrl_c():
    """A background job of a script starts with SIGINT ignored; the Ctrl-C tests still pass."""
    one = "tests/runner/test_runner.py::test_keyboard_interrupt_propagates_and_kills_the_group"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", one],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout


def test_without_a_python39_the_wheel_test_on_it_skips_saying_so(tmp_path):
    """IBDIAG_TEST_PYTHON39=none (what ./dev/run-tests sets where dev/python39 finds none): the
    3.9 install is a skip that says why; the install on the running Python still runs. Without
    it (CI: .ci/run stops when there is no 3.9) a missing 3.9 fails the test."""
    env = dict(os.environ, IBDIAG_TEST_PYTHON39="none")
    one = "tests/test_packaging.py::test_installed_package_is_the_wheel_not_the_source_tree"
    argv = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", one]
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed, 1 skipped" in proc.stdout
    assert "no Python 3.9 on this machine" in proc.stdout
    script = Path(SCRIPT).read_text(encoding="utf-8")
    assert "IBDIAG_TEST_PYTHON39=none" in script  # what the command sets when dev/python39 fails


def test_the_slow_marker_names_modules_that_exist_and_marks_their_tests():
    """Every module SLOW_MODULES names is a test module here (a rename would silently move its
    tests into the inner loop), and their tests carry the marker while others do not."""
    from conftest import SLOW_MODULES, TESTS_DIR

    # tests/test_*.py and tests/<package>/test_*.py (not recursive: scenarios/ holds symlink loops)
    modules = glob.glob(f"{TESTS_DIR}/test_*.py") + glob.glob(f"{TESTS_DIR}/*/test_*.py")
    found = {os.path.basename(path)[:-3] for path in modules}
    assert set(SLOW_MODULES) - found == set()
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    slow = subprocess.run(
        [*argv, "-m", "slow", "tests/slurm/test_nhc.py", "tests/cli/test_cli.py"],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    ids = [line for line in slow.stdout.splitlines() if "::" in line]
    assert ids and all(line.startswith("tests/slurm/test_nhc.py::") for line in ids), slow.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="the install path is taken as root only")
def test_as_root_the_missing_packages_are_installed_with_apt_get_then_the_tests_run(tmp_path):
    """As root (CI, a fresh container) the missing packages are installed by apt-get - update,
    then install of exactly those - before pytest runs. apt-get and dpkg-query are stand-ins
    that record what they were asked and mark the package installed."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    installed, asked = tmp_path / "installed", tmp_path / "apt-get.log"
    (bin_dir / "dpkg-query").write_text(
        f'#!/bin/sh\ncase "$3" in opensm) [ -e {installed} ] || exit 1;; esac\nprintf "ii "\n'
    )
    (bin_dir / "apt-get").write_text(
        f'#!/bin/sh\necho "$*" >> {asked}\ncase "$1" in install) touch {installed};; esac\n'
    )
    for tool in ("dpkg-query", "apt-get"):
        (bin_dir / tool).chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", VIRTUAL_ENV=sys.prefix)
    one = "tests/test_fixture_copies.py::test_nhc_is_carried_with_its_licence"
    argv = [SCRIPT, "-q", "-p", "no:cacheprovider", one]
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert asked.read_text().splitlines() == ["update -q", "install -y -q opensm"]
    assert "installing: opensm" in proc.stderr and "1 passed" in proc.stdout
