"""What a command's failure means (issue 12 item 11): a symptom (warn) or not applicable (skip).

The run is judged once, by its family, into a typed ``RunOutcome`` (``ibdiag.families.outcome_of``:
why it gave no data, as a ``NoData`` word); a check asks the outcome whether it is a symptom
(``RunOutcome.symptom``) and words the warning with ``ibdiag.outcome_results``. Both are pure:
they read a recorded CommandRun, so a bundle is re-graded the same way.
"""

from __future__ import annotations

import pytest

from ibdiag.facts.outcome import NoData
from ibdiag.families import outcome_of
from ibdiag.model import CommandRun, Status
from ibdiag.outcome_results import symptom_result

ARGV = ["perfquery", "-x", "-C", "mlx5_0", "-P", "1"]


def run(**fields) -> CommandRun:
    return CommandRun(argv=ARGV, **fields)


@pytest.mark.parametrize(
    ("recorded", "failing_counts", "expected", "no_data"),
    [
        (run(rc=0, stdout="PortXmitData:....1\n"), True, None, None),
        (run(not_found=True), True, None, NoData.NOT_INSTALLED),
        (run(permission_denied=True), True, None, NoData.NO_PERMISSION),
        (
            run(skipped="the run's deadline of 25 s had passed"),
            True,
            None,
            NoData.NOT_STARTED,
        ),
        (
            run(timed_out=True, duration_s=10.02),
            False,
            "timed out after 10.0 s and was killed",
            NoData.TIMED_OUT,
        ),
        (run(rc=-11), False, "was killed by signal 11 (SIGSEGV)", NoData.KILLED),
        (run(rc=-9), False, "was killed by signal 9 (SIGKILL)", NoData.KILLED),
        (
            run(error="cannot execute: Exec format error (not a program for this machine)"),
            False,
            "could not be run: cannot execute: Exec format error (not a program for this machine)",
            NoData.CANNOT_EXECUTE,
        ),
        # a non-zero exit counts only where the caller says the target is one we can see
        (
            run(rc=5, stderr="ibwarn: [77] _do_madrpc: recv failed: Connection timed out\n"),
            False,
            None,
            NoData.FAILED,
        ),
        (
            run(rc=5, stderr="ibwarn: [77] _do_madrpc: recv failed: Connection timed out\n"),
            True,
            "perfquery exited 5: ibwarn: _do_madrpc: recv failed: Connection timed out",
            NoData.FAILED,
        ),
        # ... and never when the tool says it is about this user's access
        (
            run(
                rc=255,
                stderr="ibwarn: [9] mad_rpc_open_port: can't open UMAD port ((null):0)\n"
                "perfquery: iberror: failed: Failed to open '(null)' port '0'\n",
            ),
            True,
            None,
            NoData.NO_DEVICE,
        ),
        (
            run(rc=1, stderr="dmesg: read kernel buffer failed: Operation not permitted\n"),
            True,
            None,
            NoData.NO_PERMISSION,
        ),
        # ... or that it cannot see the device from here (a module, another namespace)
        (
            run(rc=96, stderr="Cannot get stats strings information: No such device\n"),
            True,
            None,
            NoData.NO_DEVICE,
        ),
        (
            run(rc=255, stderr="Failed to get IB devices list: Function not implemented\n"),
            True,
            None,
            NoData.NO_DEVICE,
        ),
        # ... but a tool that sees the device and whose query fails is a finding
        (
            run(rc=1, stderr="Cannot get stats information: Input/output error\n"),
            True,
            "perfquery exited 1: Cannot get stats information: Input/output error",
            NoData.FAILED,
        ),
    ],
)
def test_which_failures_are_symptoms(recorded, failing_counts, expected, no_data):
    outcome = outcome_of(recorded)
    assert outcome.no_data == no_data
    assert outcome.reason == recorded.failure()
    assert outcome.symptom(failing_counts=failing_counts) == expected


def test_the_warning_names_the_command_the_target_and_a_stable_kind():
    result = symptom_result(
        "mlx5_0:1", outcome_of(run(rc=-11)), "was killed by signal 11 (SIGSEGV)",
        "ACTIVE port mlx5_0:1", "a crash in libibmad?",
    )  # fmt: skip
    assert result.status == Status.WARN and result.target == "mlx5_0:1"
    assert result.message == (
        "`perfquery -x -C mlx5_0 -P 1` on ACTIVE port mlx5_0:1 was killed by signal 11 "
        "(SIGSEGV) (a crash in libibmad?)"
    )
    assert result.observed == "killed-by-SIGSEGV"  # what a drain reason names
    assert result.evidence == ["perfquery -x -C mlx5_0 -P 1"]
    timed_out = symptom_result(
        "node", outcome_of(run(timed_out=True)), "timed out", "this node", "?"
    )
    assert timed_out.observed == "timed-out"
    failed = symptom_result(
        "node", outcome_of(run(rc=3, stderr="x")), "perfquery exited 3: x", "n", "?"
    )
    assert failed.message.startswith("`perfquery -x -C mlx5_0 -P 1` on n exited 3: x")
    assert failed.observed == "exit-3"
