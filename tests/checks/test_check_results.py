"""ibdiag.check_results.about: the Results a check makes through it are the ones it would
have written out in full, field for field (what the golden reports pin)."""

from ibdiag.check_results import about
from ibdiag.model import Result, Status


def test_a_verdict_carries_what_its_target_shares():
    result = about("mlx5_0:1", ["class/infiniband/mlx5_0/ports/1/state"], expected="4: ACTIVE")
    made = result(status=Status.PASS, message="state 4: ACTIVE", observed="4: ACTIVE")
    assert made == Result(
        target="mlx5_0:1",
        status=Status.PASS,
        message="state 4: ACTIVE",
        observed="4: ACTIVE",
        expected="4: ACTIVE",
        evidence=["class/infiniband/mlx5_0/ports/1/state"],
    )


def test_a_verdict_may_name_more_evidence_or_another_expectation():
    result = about("mlx5_0:1", ["a/state"], expected="4: ACTIVE")
    made = result(status=Status.FAIL, message="m", evidence=["a/state", "a/sm_lid"], expected=2)
    assert made.evidence == ["a/state", "a/sm_lid"] and made.expected == 2


def test_what_nobody_gave_stays_unset():
    """Only the fields given are set, as with Result(...) written out: a dump that leaves
    unset fields out (exclude_unset) sees the same Result either way."""
    made = about("node", ["class/infiniband"])(status=Status.SKIP, message="m")
    assert made.model_fields_set == {"target", "evidence", "status", "message"}
    assert made.model_dump(exclude_unset=True) == Result(
        target="node", status=Status.SKIP, message="m", evidence=["class/infiniband"]
    ).model_dump(exclude_unset=True)
