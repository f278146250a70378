"""``check --reason`` marks a fault that does not heal by itself ``ibdiag: held: ...``.

The same definition as the Slurm hooks' held drains (``ibdiag.held``): a failure of a check
graded on change since a baseline. NHC's check_ibdiag reads the mark from this line, so a drain
for a counter rise stays until an admin resumes the node, whichever of NHC or a Slurm hook
drained first.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from sysfs_builder import bump_counter, mlx5_node, write_node

from ibdiag.held import HELD_PREFIX, held_reason


def _node(tmp_path: Path, **port) -> str:
    sys_root = tmp_path / "sys"
    write_node(str(sys_root), mlx5_node(2, port=port or None))
    return str(sys_root)


def test_a_counter_rise_since_the_state_file_is_a_held_reason(run_cli, tmp_path):
    sys_root = _node(tmp_path)
    state = str(tmp_path / "state.json")
    first = run_cli("check", "--sysfs", sys_root, "--state", state, "--reason")
    assert (first.exit_code, first.stdout) == (0, "")
    bump_counter(sys_root, "mlx5_0", "link_downed", 1)
    risen = run_cli("check", "--sysfs", sys_root, "--state", state, "--reason")
    assert risen.exit_code == 2
    assert risen.stdout == "ibdiag: held: mlx5_0:1 counters.port_errors link_downed\n"
    assert risen.stdout.strip() == held_reason("ibdiag: mlx5_0:1 counters.port_errors link_downed")
    quiet = run_cli("check", "--sysfs", sys_root, "--state", state, "--reason")
    assert (quiet.exit_code, quiet.stdout) == (0, "")  # no new rise: nothing (NHC holds it)


def test_a_fault_that_is_seen_to_come_back_is_not_held(run_cli, tmp_path):
    sys_root = _node(tmp_path, state="2: INIT")
    result = run_cli("check", "--sysfs", sys_root, "--reason")
    assert result.exit_code == 2
    assert result.stdout.startswith("ibdiag: mlx5_0:1 link.state 2: INIT")
    assert not result.stdout.startswith(HELD_PREFIX)


def test_a_rise_behind_another_failure_still_holds_the_line(run_cli, tmp_path):
    """As the hooks decide: held when any check graded on change failed, whichever finding
    the line names first."""
    sys_root = _node(tmp_path)
    state = str(tmp_path / "state.json")
    assert run_cli("check", "--sysfs", sys_root, "--state", state).exit_code == 0
    Path(sys_root, "class", "infiniband", "mlx5_1", "ports", "1", "state").write_text("2: INIT\n")
    bump_counter(sys_root, "mlx5_0", "symbol_error", 500)
    result = run_cli("check", "--sysfs", sys_root, "--state", state, "--reason")
    assert result.exit_code == 2
    assert result.stdout.startswith(HELD_PREFIX), result.stdout
    assert "and more" in result.stdout


def test_a_site_check_that_takes_the_baseline_is_held_too(run_cli, tmp_path):
    """No list of held checks: a drop-in written (snapshot, thresholds, baseline) counts."""
    checks = tmp_path / "checks.d"
    checks.mkdir()
    (checks / "site.py").write_text(
        textwrap.dedent(
            '''
            from ibdiag.model import Result, Status
            from ibdiag.registry import check

            @check("site.changed", title="Something changed since the baseline")
            def changed(snap, th, baseline):
                """Healthy: nothing changed since the baseline."""
                yield Result(target="node", status=Status.FAIL, message="changed")

            @check("site.now", title="Something wrong now")
            def now(snap, th):
                """Healthy: never here."""
                yield Result(target="node", status=Status.FAIL, message="wrong")
            '''
        )
    )
    sys_root = _node(tmp_path)
    both = run_cli("check", "--sysfs", sys_root, "--checks-dir", str(checks), "--reason")
    assert both.exit_code == 2
    assert both.stdout.startswith(HELD_PREFIX), both.stdout

    (checks / "site.py").write_text(
        (checks / "site.py").read_text().replace("def changed(snap, th, baseline)", "def x(s, t)")
    )
    plain = run_cli("check", "--sysfs", sys_root, "--checks-dir", str(checks), "--reason")
    assert plain.exit_code == 2
    assert plain.stdout.startswith("ibdiag: node site.") and HELD_PREFIX not in plain.stdout
