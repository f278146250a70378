"""Shared test helpers: run the CLI in-process and find the golden scenarios."""

from __future__ import annotations

import os
import shutil
import signal
import sys
from typing import Callable, List

import pytest
from click.testing import CliRunner

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TESTS_DIR)
SCENARIOS_DIR = os.path.join(TESTS_DIR, "scenarios")
# The real-hardware captures the tests read (copied from the shared capture set, see
# tests/fixtures/COPIED.md); the sysfs trees among them live in tests/scenarios/<name>/root.
FIXTURES_DIR = os.path.join(TESTS_DIR, "fixtures")

if TESTS_DIR not in sys.path:  # tests import sysfs_builder, snapshots
    sys.path.insert(0, TESTS_DIR)


def scenario_names() -> List[str]:
    return sorted(
        name
        for name in os.listdir(SCENARIOS_DIR)
        if os.path.isfile(os.path.join(SCENARIOS_DIR, name, "expected.json"))
    )


def scenario_sysfs(name: str) -> str:
    """The sysfs tree of the golden scenario ``name`` (tests/scenarios/<name>/root/sys)."""
    return os.path.join(SCENARIOS_DIR, name, "root", "sys")


def capture_names(kind: str) -> list:
    """The captures in tests/fixtures/<kind> (for parametrize). A missing or empty folder
    yields one ``None`` parameter, which ``read_capture`` turns into a failure, not a skip."""
    folder = os.path.join(FIXTURES_DIR, kind)
    if not os.path.isdir(folder):
        return [pytest.param(None, id=f"{kind}-fixtures-missing")]
    names = sorted(
        name
        for name in os.listdir(folder)
        if os.path.isfile(os.path.join(folder, name))
        and name != "SOURCES.md"
        and not name.startswith(".")
    )
    return names or [pytest.param(None, id=f"{kind}-fixtures-empty")]


def captures_without_facts(kind: str, facts) -> List[str]:
    """The captures in tests/fixtures/<kind> that ``facts`` says nothing about (a new
    capture must have its facts written down); fails when the folder has none at all."""
    names = [name for name in capture_names(kind) if isinstance(name, str)]
    assert names, f"no {kind} captures under {os.path.join(FIXTURES_DIR, kind)}"
    return sorted(set(names) - set(facts))


def read_capture(kind: str, name) -> str:
    folder = os.path.join(FIXTURES_DIR, kind)
    if name is None or not os.path.isdir(folder):
        pytest.fail(
            f"capture folder {folder} is missing or empty: the tests read the captures in "
            "tests/fixtures"
        )
    with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as handle:
        return handle.read()


@pytest.fixture(autouse=True)
def no_machine_site_config(tmp_path_factory, monkeypatch):
    """Point every default path ibdiag reads at a fresh empty directory, for every test.

    Without it a test would read this machine's /etc/ibdiag/ibdiag.toml and checks.d, and its
    result would depend on where it runs. Environment variables, so that ``python -m ibdiag``
    and an installed ibdiag run from a test (subprocesses) are isolated the same way:
    IBDIAG_CONFIG_DIR (ibdiag.toml and checks.d), IBDIAG_SLURM_ENV (the Slurm hook script's
    /etc/ibdiag/slurm.env) and no NCCL_INSPECTOR_DUMP_DIR (level full's default dump folder).
    A directory of the session's base temp, not tmp_path, so tests listing tmp_path see
    only what they made.
    """
    site = tmp_path_factory.mktemp("site-config-dir")
    monkeypatch.setenv("IBDIAG_CONFIG_DIR", str(site))
    monkeypatch.setenv("IBDIAG_SLURM_ENV", str(site / "slurm.env"))
    monkeypatch.delenv("NCCL_INSPECTOR_DUMP_DIR", raising=False)
    return site


@pytest.fixture
def run_cli():
    """Invoke ``ibdiag ARGS`` in-process; returns click's Result (exit_code, stdout, stderr)."""
    from ibdiag.cli import cli

    try:  # click 8.1 (Python 3.9) mixes stderr into stdout unless told not to; 8.2 never does
        runner = CliRunner(mix_stderr=False)
    except TypeError:
        runner = CliRunner()

    def invoke(*args: str, env=None):
        return runner.invoke(cli, list(args), env=env, catch_exceptions=False)

    return invoke


@pytest.fixture
def stubs(tmp_path) -> Callable[..., str]:
    """``stubs(name, body)`` writes an executable script (``#!/bin/sh`` unless told) into
    tmp_path/bin, the first folder of ``stub_path``; returns its path. For the command runner's
    tests, which need odd modes and interpreters (tests/stubs' StubBin, for the CLI's tests,
    logs every call instead)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()

    def write(name: str, body: str, mode: int = 0o755, shebang: str = "#!/bin/sh\n") -> str:
        path = bindir / name
        path.write_text(shebang + body)
        path.chmod(mode)
        return str(path)

    return write


@pytest.fixture
def stub_path(tmp_path) -> str:
    """PATH for ``stubs``: tmp_path/bin first, then the system's own tools (sh, cat, sleep,
    setsid) for the stubs to use."""
    return f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', os.defpath)}"


@pytest.fixture(scope="session")
def chromium() -> str:
    """The path of headless Chromium, for the HTML pages' tests; fails (never skips) without it."""
    found = shutil.which("chromium") or (
        "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None
    )
    if found is None:
        pytest.fail(
            "headless Chromium is needed to test the HTML report and is not installed: "
            "run `apt-get install -y chromium` (Debian) so that `chromium` is on PATH"
        )
    return found


# The modules whose tests start real services or do a minute of work each (real Slurm, NHC,
# ibsim + opensm, Prometheus and Grafana queries, wheel installs, generated 128-node fleets,
# level full's traffic-test stubs, fuzzing): marked ``slow``, so ``python -m pytest -m "not
# slow"`` is the inner loop (about 3 minutes on 2 CPUs; the whole suite about 11). CI runs the
# whole suite on the newest Python and ``-m "not slow"`` on 3.9, where only Python differs.
SLOW_MODULES = frozenset(
    {
        "test_dev_run_tests",
        "test_fabric_sim",
        "test_fleet_fabric",
        "test_fleet_generated",
        "test_fleet_hostile",
        "test_fleet_run",
        "test_full_level",
        "test_full_level_nccl",
        "test_fuzz_trees",
        "test_grafana",
        "test_grafana_fleet",
        "test_grafana_rate_class",
        "test_history_fabric",
        "test_misconfig_fabric_slow",
        "test_nhc",
        "test_nhc_slurm",
        "test_packaging",
        "test_partner_fabric",
        "test_readme_node_install",
        "test_runner_processes",
        "test_serve",
        "test_serve_monitor",
        "test_slurm_cluster",
        "test_slurm_real",
        "test_redact_support_slow",
        "test_store_slow",
        "test_support_budget_slow",
        "test_support_fabric_slow",
        "test_watch",
        "test_watch_then_check",
    }
)


def pytest_collection_modifyitems(config, items):
    """Mark every test of ``SLOW_MODULES`` ``slow``."""
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and module.__name__.rsplit(".", 1)[-1] in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


def pytest_configure(config):
    """Give the tests Python's own Ctrl-C even when the launcher ignored SIGINT.

    Some tests send the runner a real SIGINT, as Ctrl-C would. A shell starts a background job
    with SIGINT ignored (``./dev/run-tests &`` from a script, a CI step), and Python then never
    raises KeyboardInterrupt, so those tests would fail only because of how pytest was started.
    """
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # No test writes the machine's own history store (/var/lib/ibdiag/history.db, where CI runs
    # as root), and no test's fake ports leave a past that another test's verdict would read:
    # the tests of history name their own store (--history PATH), every other run has none.
    os.environ["IBDIAG_HISTORY"] = "off"
