"""A command's own timeout (issue 26): the support catalogue gives each command its
``timeout_s`` (mstflint 10 s, ofed_info 5 s), capped by the Runner's (``--command-timeout``).

Healthy: the smaller of the two kills the command, the run is recorded ``timed_out`` with no
exit code, and nothing it started is left running. Bounds are generous (a loaded 2-core
machine): these are correctness tests, each bound still tells "killed at the smaller limit"
from "killed at the larger one".
"""

from __future__ import annotations

from stubs import assert_no_strays, marker

from ibdiag.roles import Role
from ibdiag.runner.command_runner import Runner


def _hang(stubs, name: str) -> str:
    mark = marker()
    stubs(name, f"echo starting\nsleep {mark}\n")
    return mark


def test_a_commands_own_timeout_below_the_runners_kills_it_at_its_own(stubs, stub_path):
    mark = _hang(stubs, "hang")
    run = Runner(timeout_s=5, deadline_s=60, path=stub_path).run(["hang"], timeout_s=0.5)
    assert run.timed_out and run.rc is None, run
    assert 0.4 < run.duration_s < 3.5, run.duration_s  # not the Runner's 5 s
    assert "timed out" in (run.failure() or "")
    assert_no_strays(mark)


def test_a_commands_own_timeout_above_the_runners_is_capped_by_the_runners(stubs, stub_path):
    mark = _hang(stubs, "hang")
    run = Runner(timeout_s=1, deadline_s=60, path=stub_path).run(["hang"], timeout_s=30)
    assert run.timed_out and run.rc is None, run
    assert 0.9 < run.duration_s < 6.0, run.duration_s  # not the command's 30 s
    assert_no_strays(mark)


def test_no_own_timeout_means_the_runners(stubs, stub_path):
    mark = _hang(stubs, "hang")
    run = Runner(timeout_s=1, deadline_s=60, path=stub_path).run(["hang"], timeout_s=None)
    assert run.timed_out and 0.9 < run.duration_s < 6.0, run
    assert_no_strays(mark)


def test_run_planned_takes_each_commands_own_timeout_from_its_3_tuple(stubs, stub_path):
    mark = _hang(stubs, "hang")
    stubs("answers", "echo fine\n")
    short, long_, plain, fine = (Role("test", name) for name in ("short", "long", "plain", "ok"))
    runner = Runner(timeout_s=2, deadline_s=60, max_workers=4, path=stub_path)
    runs = runner.run_planned(
        [
            (short, ["hang", "short"], 0.5),  # its own, below the Runner's
            (long_, ["hang", "long"], 30),  # capped at the Runner's 2 s
            (plain, ["hang", "plain"]),  # a 2-tuple: the Runner's
            (fine, ["answers"], 0.5),
        ]
    )
    assert set(runs) == {str(short), str(long_), str(plain), str(fine)}
    by_role = {run.role: run for run in runs.values()}
    assert all(by_role[role].timed_out for role in (short, long_, plain))
    assert by_role[short].duration_s < by_role[long_].duration_s
    assert 0.4 < by_role[short].duration_s < 1.9, by_role[short].duration_s
    assert 1.9 < by_role[long_].duration_s < 8.0, by_role[long_].duration_s
    assert 1.9 < by_role[plain].duration_s < 8.0, by_role[plain].duration_s
    assert by_role[fine].succeeded and by_role[fine].stdout == "fine\n"
    assert_no_strays(mark)


def test_an_own_timeout_never_outlives_the_deadline(stubs, stub_path):
    mark = _hang(stubs, "hang")
    run = Runner(timeout_s=30, deadline_s=1, path=stub_path).run(["hang"], timeout_s=20)
    assert run.timed_out and 0.9 < run.duration_s < 6.0, run
    assert_no_strays(mark)
