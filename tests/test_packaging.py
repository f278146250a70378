"""What users install is the wheel: build it, install it into fresh venvs, run it from elsewhere.

The built-in checks (``checks/``) and report templates (``reports/templates/``) live at the top of
the repository but must ship inside the package (``ibdiag/_builtin/...``), so an installed
``ibdiag`` finds them from any working directory and nothing named ``checks`` or ``reports``
lands in site-packages (DESIGN §2).

The wheel is built once per session (isolated build, as ``pip install .`` does) and installed
into one venv per interpreter: the one running the tests, and Python 3.9, the oldest supported
(dependencies come from the package index). 3.9 is required: CI machines have it under pyenv
(.ci/run stops without one); elsewhere point ``IBDIAG_TEST_PYTHON39`` at a 3.9 interpreter. Only
``IBDIAG_TEST_PYTHON39=none`` - what ./dev/run-tests sets on a machine with no 3.9 at all
(Debian 12, Ubuntu 22.04) - turns the missing interpreter into a skip that says so.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional

import pytest

REPO = Path(__file__).resolve().parent.parent
SCENARIOS = REPO / "tests" / "scenarios"
GOOD_SYS = SCENARIOS / "gcm-8xCX6-HDR-good" / "root" / "sys"
STUCK_SYS = SCENARIOS / "gcm-8xCX6-HDR-2ports-stuck-INIT" / "root" / "sys"

BUILTIN_CHECK_IDS = (
    "hca.inventory",
    "link.state",
    "link.phys_state",
    "link.rate",
    "pci.link",
    "counters.port_errors",
    "counters.hw_errors",
)

BUILD_TIMEOUT = 300
INSTALL_TIMEOUT = 600
RUN_TIMEOUT = 120


def _repo_version() -> str:
    text = (REPO / "ibdiag" / "__init__.py").read_text(encoding="utf-8")
    match = re.search(r'^__version__ = "([^"]+)"', text, re.MULTILINE)
    assert match, "ibdiag/__init__.py has no __version__"
    return match.group(1)


def _clean_env() -> Dict[str, str]:
    """The environment of a user's shell: nothing that would make the repo importable."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "IBDIAG_DEBUG")
    }
    env.update(NO_COLOR="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return env


def _run(argv: List[str], cwd: Path, timeout: float = RUN_TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(arg) for arg in argv],
        cwd=str(cwd),
        env=_clean_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _must(proc: subprocess.CompletedProcess, what: str) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, (
        f"{what} failed (exit {proc.returncode})\n"
        f"argv: {proc.args}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    )
    return proc


def _version_of(python: str) -> Optional[str]:
    """'3.9' when ``python`` really runs (a pyenv shim may exist and still refuse to)."""
    try:
        proc = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def find_python39() -> Optional[str]:
    """IBDIAG_TEST_PYTHON39, then pyenv's 3.9 builds, then python3.9 on PATH."""
    candidates = [os.environ.get("IBDIAG_TEST_PYTHON39", "")]
    for pyenv_root in (
        os.environ.get("PYENV_ROOT", ""),
        os.path.expanduser("~/.pyenv"),
        "/root/.pyenv",
    ):
        if pyenv_root:
            pattern = os.path.join(pyenv_root, "versions", "3.9*", "bin", "python3.9")
            candidates.extend(sorted(glob.glob(pattern), reverse=True))
    candidates.append(shutil.which("python3.9") or "")
    for candidate in candidates:
        if candidate and _version_of(candidate) == "3.9":
            return candidate
    return None


class Install(NamedTuple):
    label: str
    venv: Path
    python: Path  # the venv's interpreter
    ibdiag: Path  # the console script pip generated
    site_packages: Path
    workdir: Path  # a directory outside the repository to run from


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # An isolated build from the source tree, as `pip install .` does: only what hatchling's
    # wheel target selects ends up in it, whatever else lies in the working tree.
    _must(
        _run(
            [sys.executable, "-m", "build", "--wheel", "--outdir", out, REPO],
            cwd=out,
            timeout=BUILD_TIMEOUT,
        ),
        "python -m build --wheel",
    )
    wheels = sorted(out.glob("*.whl"))
    assert len(wheels) == 1, f"expected one wheel in {out}, found {wheels}"
    return wheels[0]


@pytest.fixture(scope="session", params=["current", "3.9"])
def install(request: pytest.FixtureRequest, wheel: Path, tmp_path_factory) -> Install:
    if request.param == "current":
        base = sys.executable
    else:
        if os.environ.get("IBDIAG_TEST_PYTHON39") == "none":
            pytest.skip(
                "IBDIAG_TEST_PYTHON39=none: no Python 3.9 on this machine (./dev/run-tests "
                "found none); CI installs the wheel on 3.9"
            )
        found = find_python39()
        if found is None:
            pytest.fail(
                "ibdiag supports Python 3.9, but no Python 3.9 interpreter was found to test the "
                "installed wheel on (looked at $IBDIAG_TEST_PYTHON39, $PYENV_ROOT/versions/3.9*, "
                "~/.pyenv/versions/3.9*, python3.9 on PATH). Install one (e.g. `pyenv install "
                "3.9`) or set IBDIAG_TEST_PYTHON39=/path/to/python3.9.",
                pytrace=False,
            )
        base = found
    root = tmp_path_factory.mktemp(f"venv-{request.param}")
    venv = root / "venv"
    workdir = root / "work"
    workdir.mkdir()
    _must(_run([base, "-m", "venv", venv], cwd=root, timeout=INSTALL_TIMEOUT), "python -m venv")
    python = venv / "bin" / "python"
    _must(
        _run([python, "-m", "pip", "install", "--quiet", wheel], cwd=root, timeout=INSTALL_TIMEOUT),
        f"pip install {wheel.name} into a fresh {request.param} venv",
    )
    site_packages = _must(
        _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], root),
        "find site-packages",
    ).stdout.strip()
    return Install(
        label=request.param,
        venv=venv,
        python=python,
        ibdiag=venv / "bin" / "ibdiag",
        site_packages=Path(site_packages),
        workdir=workdir,
    )


# --- the wheel itself ---------------------------------------------------------------------------


def test_wheel_ships_checks_and_templates_inside_the_package(wheel: Path) -> None:
    version = _repo_version()
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = archive.read(f"ibdiag-{version}.dist-info/entry_points.txt").decode()
        metadata = archive.read(f"ibdiag-{version}.dist-info/METADATA").decode()

    top_level = {name.split("/", 1)[0] for name in names}
    assert top_level == {"ibdiag", f"ibdiag-{version}.dist-info"}, (
        f"the wheel must hold only the ibdiag package and its dist-info, not {sorted(top_level)}"
    )
    assert "ibdiag/_builtin/checks/link.py" in names
    assert "ibdiag/_builtin/templates/report.html.j2" in names

    # Every built-in check module and every template of the repository made it in.
    for module in sorted((REPO / "checks").glob("*.py")):
        assert f"ibdiag/_builtin/checks/{module.name}" in names, f"checks/{module.name} missing"
    for template in sorted((REPO / "reports" / "templates").glob("*.j2")):
        assert f"ibdiag/_builtin/templates/{template.name}" in names, (
            f"reports/templates/{template.name} missing"
        )
    for profile in sorted((REPO / "ibdiag" / "profiles").glob("*.toml")):
        assert f"ibdiag/profiles/{profile.name}" in names, f"profile {profile.name} missing"
    assert "ibdiag/counters/catalogue.toml" in names, "the counter catalogue (data) missing"
    assert "ibdiag/counters/catalogue.json" in names, "the catalogue the loader reads missing"
    stray = [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".pyo"))]
    assert not stray, f"bytecode in the wheel: {stray}"

    assert re.search(r"^ibdiag\s*=\s*ibdiag\.entry:main\s*$", entry_points, re.MULTILINE), (
        entry_points
    )
    assert re.search(r"^Requires-Python: >=3\.9\s*$", metadata, re.MULTILINE), metadata


# --- the installed package, per interpreter -----------------------------------------------------


def test_installed_package_is_the_wheel_not_the_source_tree(install: Install) -> None:
    code = (
        "import ibdiag, ibdiag.resources as r; "
        "print(ibdiag.__file__); print(r.builtin_checks_dir()); print(r.templates_dir())"
    )
    out = _must(_run([install.python, "-c", code], install.workdir), "import ibdiag").stdout
    package_file, checks_dir, templates_dir = out.splitlines()
    for path in (package_file, checks_dir, templates_dir):
        assert Path(path).resolve().is_relative_to(install.site_packages.resolve()), (
            f"{path} is not inside {install.site_packages}"
        )
    assert Path(checks_dir).name == "checks" and Path(checks_dir).parent.name == "_builtin"
    assert Path(templates_dir).name == "templates"


def test_no_top_level_checks_or_reports_in_site_packages(install: Install) -> None:
    for name in ("checks", "reports"):
        assert not (install.site_packages / name).exists(), (
            f"{install.site_packages / name} exists: the wheel publishes a top-level {name!r}"
        )
        assert not (install.site_packages / f"{name}.py").exists()
    assert (install.site_packages / "ibdiag" / "_builtin" / "checks" / "link.py").is_file()
    assert (
        install.site_packages / "ibdiag" / "_builtin" / "templates" / "report.html.j2"
    ).is_file()


def test_checks_lists_the_builtin_checks(install: Install) -> None:
    out = _must(_run([install.ibdiag, "checks"], install.workdir), "ibdiag checks").stdout
    listed = {line.split()[0] for line in out.splitlines() if line.strip()}
    missing = [check_id for check_id in BUILTIN_CHECK_IDS if check_id not in listed]
    assert not missing, f"`ibdiag checks` ({install.label}) does not list {missing}:\n{out}"


def test_check_on_a_healthy_node_is_ok(install: Install) -> None:
    proc = _run([install.ibdiag, "check", "--sysfs", GOOD_SYS], install.workdir)
    _must(proc, "ibdiag check on the healthy 8-HCA node")
    lines = proc.stdout.strip().splitlines()
    assert lines and lines[-1].startswith("IBDIAG OK"), proc.stdout


def test_installed_profiles_are_found(install: Install) -> None:
    listed = _must(_run([install.ibdiag, "config", "profiles"], install.workdir), "profiles")
    assert {"generic", "azure-ndv5", "dgx-h100"} <= {
        line.split()[0] for line in listed.stdout.splitlines()
    }
    proc = _run([install.ibdiag, "check", "--sysfs", GOOD_SYS, "--profile", "azure-ndv4"],
                install.workdir)  # fmt: skip
    assert proc.returncode == 2 and "mlx5_ib0 is missing" in proc.stdout, proc.stdout


def test_check_on_a_sick_node_is_critical(install: Install) -> None:
    # Guards against a hollow OK: the installed checks really ran and found the stuck ports.
    proc = _run([install.ibdiag, "check", "--sysfs", STUCK_SYS], install.workdir)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout.strip().splitlines()[-1].startswith("IBDIAG CRITICAL"), proc.stdout


def test_check_json_report(install: Install) -> None:
    proc = _run([install.ibdiag, "check", "--sysfs", GOOD_SYS, "--json"], install.workdir)
    report = json.loads(_must(proc, "ibdiag check --json").stdout)
    assert report["verdict"] == "OK"
    assert "schema_version" in report
    assert {result["check_id"] for result in report["results"]} >= set(BUILTIN_CHECK_IDS)


def test_check_html_report_finds_the_templates(install: Install) -> None:
    proc = _run([install.ibdiag, "check", "--sysfs", GOOD_SYS, "--format", "html"], install.workdir)
    html = _must(proc, "ibdiag check --format html").stdout
    assert "<html" in html
    assert "IBDIAG OK" in html, html[:2000]


def test_python_m_ibdiag_version(install: Install) -> None:
    proc = _run([install.python, "-m", "ibdiag", "--version"], install.workdir)
    out = _must(proc, "python -m ibdiag --version").stdout
    assert _repo_version() in out, out
