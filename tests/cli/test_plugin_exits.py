"""A drop-in check never decides ibdiag's exit code or corrupts its output (issue 12 item 6).

Every case runs a real ``python -m ibdiag`` process (an exit code set by ``sys.exit`` inside
the process is what a prolog or NHC would see) with one drop-in directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import REPO, SCENARIOS_DIR

GOOD = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-good", "root", "sys")

HEADER = """\
import sys
from ibdiag.model import Result, Status
from ibdiag.registry import check
"""


def _check(body: str, check_id: str = "site.x") -> str:
    return (
        HEADER
        + textwrap.dedent(
            f'''
        @check("{check_id}", title="a site check", needs={{"sysfs"}}, level="quick")
        def site_check(snap, th):
            """Healthy: whatever the site says."""
        '''
        )
        + textwrap.indent(textwrap.dedent(body), "    ")
    )


def _ibdiag(tmp_path, source: str, *args: str) -> subprocess.CompletedProcess:
    dropins = tmp_path / "checks.d"
    dropins.mkdir()
    (dropins / "site.py").write_text(source)
    env = {key: value for key, value in os.environ.items() if key != "IBDIAG_DEBUG"}
    return subprocess.run(
        [sys.executable, "-m", "ibdiag", "check", "--sysfs", GOOD, "--checks-dir", str(dropins),
         *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("at_import", "said"),
    [
        ("sys.exit(42)", "called sys.exit(42)"),
        ('sys.exit("bye")', "called sys.exit('bye')"),
        ("raise GeneratorExit", "GeneratorExit: "),
        ("raise SystemExit", "called sys.exit(None)"),
    ],
)
def test_a_drop_in_that_exits_at_import_is_a_named_configuration_error(tmp_path, at_import, said):
    done = _ibdiag(tmp_path, HEADER + at_import + "\n")
    assert done.returncode == 3
    path = tmp_path / "checks.d" / "site.py"
    assert done.stderr == f"ibdiag: error: {path}: cannot load: {said}\n"
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("sys.exit(5)\n", "check crashed: called sys.exit(5)"),
        ("sys.exit(0)\n", "check crashed: called sys.exit(0)"),
        ("raise GeneratorExit\n", "check crashed: GeneratorExit: "),
    ],
)
def test_a_check_that_exits_is_an_error_result_and_the_others_still_run(tmp_path, body, said):
    done = _ibdiag(tmp_path, _check(body), "--json")
    assert done.returncode == 3, done.stderr  # UNKNOWN: a check broke, not the check's code
    report = json.loads(done.stdout)
    [error] = [r for r in report["results"] if r["check_id"] == "site.x"]
    assert (error["status"], error["message"]) == ("error", said)
    assert len({r["check_id"] for r in report["results"]}) > 10  # the built-ins all ran


def test_what_a_check_prints_is_kept_out_of_the_json_and_shown_with_v(tmp_path):
    body = """\
    print("hello from the site check")
    print("second line")
    yield Result(target="node", status=Status.PASS, message="fine")
    """
    source = _check(body) + 'print("printed at import")\n'
    done = _ibdiag(tmp_path, source, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # stdout is the report and nothing else
    assert report["check_output"] == {"site.x": "hello from the site check\nsecond line\n"}
    assert done.stderr == "printed at import\n"  # import-time prints go to stderr

    verbose = subprocess.run(
        [sys.executable, "-m", "ibdiag", "check", "--sysfs", GOOD, "--checks-dir",
         str(tmp_path / "checks.d"), "-v"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    lines = verbose.stdout.splitlines()
    assert "OUTPUT site.x             hello from the site check" in lines
    assert "OUTPUT site.x             second line" in lines
    assert lines[-1].startswith("IBDIAG OK")
    quiet = subprocess.run(
        [sys.executable, "-m", "ibdiag", "check", "--sysfs", GOOD, "--checks-dir",
         str(tmp_path / "checks.d")],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert quiet.stdout.splitlines() == [lines[-1]]
