"""The loopback family (``ibdiag.families.loopback``): ib_write_bw runs -> ``Snapshot.loopback``:
runs found by role, perftest's real captures (tests/fixtures/perftest) as what the client
printed, and the perftest check reading the field alone."""

from __future__ import annotations

import json

import pytest
from conftest import capture_names, read_capture
from snapshots import EDR, device, port, run, snapshot
from test_family_loopback_parser import FACTS as PERFTEST_FACTS

from ibdiag import families, roles
from ibdiag.facts.loopback import LoopbackAttempt
from ibdiag.families import Runs
from ibdiag.families import loopback as family
from ibdiag.families.loopback import traffic
from ibdiag.model import CommandRun, Snapshot
from ibdiag.thresholds import Thresholds

KIND = "perftest"
HEALTHY = "superbench-ib_write_bw-loopback-8M-azure-hdr-ib0-server-client-interleaved.txt"
HALF_RATE = "oci-oke-ib_write_bw-roce-mlx5_5-4qp-98gbps.txt"
SERVER_WAITING = "************************************\n* Waiting for client to connect... *\n"
NUMACTL_1 = ("numactl", "--cpunodebind=1", "--membind=1")


def recorded(test: traffic.LoopbackTest, client: CommandRun, server: CommandRun):
    """{key: run} of one test's two sides, argv and role as run_loopback records them."""
    th = Thresholds()
    runs = {}
    for side, base in (("server", server), ("client", client)):
        made = base.model_copy(update={"argv": test.argv(th, side), "role": test.role(side)})
        runs[made.key] = made
    return runs


def interpreted_with(commands, devices=()) -> Snapshot:
    """A Snapshot of ``devices`` with ``commands`` recorded, every family interpreted."""
    return families.interpret(snapshot(list(devices)).model_copy(update={"commands": commands}))


def read_loopback(commands, devices=()):
    return family.read_loopback(Runs(commands), devices)


def ran(stdout: str = "", stderr: str = "", rc: int = 0, **kwargs) -> CommandRun:
    return CommandRun(argv=["placeholder"], rc=rc, stdout=stdout, stderr=stderr, **kwargs)


def test_no_loopback_run_is_none():
    assert read_loopback({}) is None
    other = CommandRun(argv=["ibstat"], role=roles.IBSTAT, rc=0)
    assert interpreted_with({other.key: other}).loopback is None


@pytest.mark.parametrize("name", capture_names(KIND))
def test_every_capture_as_a_clients_output(name):
    """Ports, attempt and GPU from the roles, the Gb/s from the client's output: the BW
    average at the largest size, in Gb/s whatever the unit."""
    text = read_capture(KIND, name)
    test = traffic.LoopbackTest(
        "mlx5_3", 2, "mlx5_3", 2, 18517, gpu=5, server_gpu=5, client_pin=NUMACTL_1,
        server_pin=NUMACTL_1,
    )  # fmt: skip
    commands = recorded(test, ran(text), ran(SERVER_WAITING))
    (attempt,) = interpreted_with(commands).loopback
    assert (attempt.client, attempt.server, attempt.attempt) == ("mlx5_3:2", "mlx5_3:2", 1)
    assert (attempt.gpu, attempt.server_gpu) == (5, 5)
    assert str(attempt.client_role) == "loopback client mlx5_3:2 attempt 1 gpu 5"
    assert str(attempt.server_role) == "loopback server mlx5_3:2 for mlx5_3:2 attempt 1 gpu 5"
    expected = PERFTEST_FACTS[name]["average_gbps"]
    if expected is None:  # a latency test prints no bandwidth
        assert attempt.gbps is None and attempt.why_not == "no result row"
    else:
        assert attempt.gbps == pytest.approx(expected, rel=1e-9)
        assert attempt.why_not is None
    if name in (HEALTHY, HALF_RATE):
        assert attempt.problems == []
    assert LoopbackAttempt.model_validate_json(attempt.model_dump_json()) == attempt


def test_pairs_and_a_retry_in_planned_order():
    """Each client port's attempts, its partner's server, the retry after every first
    attempt (the devices' port order), whatever order the runs were recorded in."""
    healthy, half = read_capture(KIND, HEALTHY), read_capture(KIND, HALF_RATE)
    first = traffic.LoopbackTest("mlx5_0", 1, "mlx5_1", 1, 18515)
    second = traffic.LoopbackTest("mlx5_1", 1, "mlx5_0", 1, 18516)
    retry = traffic.LoopbackTest("mlx5_1", 1, "mlx5_0", 1, 18616, attempt=2)
    commands = {}
    for test, output in ((retry, healthy), (second, half), (first, healthy)):
        commands.update(recorded(test, ran(output), ran(SERVER_WAITING)))
    attempts = read_loopback(commands)
    assert [(a.client, a.server, a.attempt) for a in attempts] == [
        ("mlx5_0:1", "mlx5_1:1", 1),
        ("mlx5_1:1", "mlx5_0:1", 1),
        ("mlx5_1:1", "mlx5_0:1", 2),
    ]
    assert [round(a.gbps, 2) for a in attempts] == [201.80, 98.01, 201.80]
    # the plan's order is the devices' (mlx5_1 listed first here), not the names'
    devices = [device("mlx5_1"), device("mlx5_0")]
    fields = interpreted_with(commands, devices)
    assert [(a.client, a.attempt) for a in fields.loopback] == [
        ("mlx5_1:1", 1),
        ("mlx5_0:1", 1),
        ("mlx5_1:1", 2),
    ]


def test_why_not_is_the_first_error_either_side_then_the_run_failure():
    test = traffic.LoopbackTest("mlx5_0", 1, "mlx5_0", 1, 18515)
    refused = ran(stdout=" Couldn't connect to localhost:18515\n", rc=1)
    server_error = ran(stderr=" Failed to modify QP 0x1234 to RTR\n", rc=1)
    (attempt,) = read_loopback(recorded(test, refused, server_error))
    assert attempt.gbps is None and attempt.why_not == "Couldn't connect to localhost:18515"
    (attempt,) = read_loopback(recorded(test, ran(rc=1), server_error))
    assert attempt.why_not == "Failed to modify QP 0x1234 to RTR"  # the client said nothing
    hung = ran(rc=None, timed_out=True, duration_s=36.0)
    (attempt,) = read_loopback(recorded(test, hung, hung))
    assert attempt.why_not == "ib_write_bw timed out after 36.0 s and was killed"
    never = ran(rc=None, skipped="the run's deadline of 2 s had passed")
    (attempt,) = read_loopback(recorded(test, never, never))
    assert attempt.why_not == "ib_write_bw not run: the run's deadline of 2 s had passed"


def test_garbage_from_the_client_is_a_recorded_problem_not_a_crash():
    junk = (bytes(range(256)) * 3).decode("latin-1") + "\n 65536 garbage 1.0\n"
    test = traffic.LoopbackTest("mlx5_0", 1, "mlx5_0", 1, 18515)
    commands = recorded(test, ran(junk), ran(SERVER_WAITING))
    fields = interpreted_with(commands)
    (attempt,) = fields.loopback
    assert attempt.gbps is None and attempt.why_not == "no result row"
    assert any(problem.startswith("unrecognised line 1:") for problem in attempt.problems)
    assert fields.problems == {}  # the interpreter itself did not break


def test_a_server_without_its_client_is_left_out():
    test = traffic.LoopbackTest("mlx5_0", 1, "mlx5_0", 1, 18515)
    server = {k: r for k, r in recorded(test, ran(), ran(SERVER_WAITING)).items()
              if r.role.step == "server"}  # fmt: skip
    assert read_loopback(server) == []


def test_the_roles_read_back():
    Role = roles.Role
    assert roles.loopback_client("mlx5_0:1", 2) == Role("loopback", "client", "mlx5_0:1", None, 2)
    assert roles.loopback_server("mlx5_1:3", "mlx5_0:1", 1) == (
        Role("loopback", "server", "mlx5_0:1", "mlx5_1:3", 1)
    )
    client = roles.loopback_client("mlx5_0:1", 2, gpu=3)
    assert str(client) == "loopback client mlx5_0:1 attempt 2 gpu 3"
    server = roles.loopback_server("mlx5_1:1", "mlx5_0:1", 1, gpu=0)
    assert str(server) == "loopback server mlx5_1:1 for mlx5_0:1 attempt 1 gpu 0"
    assert Role.parse("loopback client mlx5_0:1 attempt 2 gpu 3") == client
    assert Role.parse("loopback server mlx5_1:1 for mlx5_0:1 attempt 1 gpu 0") == server
    for other in (
        None,
        "",
        "loopback client mlx5_0 attempt 1",
        "loopback client mlx5_0:1 attempt 1 gpu",
        "loopback client mlx5_0:1 attempt 1 gpu -1",
        "loopback client mlx5_0:1 attempt 1 gpu 3 extra",
    ):
        assert Role.parse(other) is None
    assert Role.parse(str(roles.NCCL_TESTS)).family != "loopback"


@pytest.mark.parametrize(
    "client_argv, server_argv",
    [
        (  # pinned by numactl / taskset: what a live run records
            [*NUMACTL_1, "ib_write_bw", "-d", "mlx5_0", "-p", "18515", "--use_cuda=3", "localhost"],
            ["taskset", "-c", "0-15", "ib_write_bw", "-d", "mlx5_1", "-p", "18515", "--use_cuda=4"],
        ),
        (  # a site wrapper no argv reader could make sense of, naming other GPUs even
            ["/opt/site/bw-wrapper", "--gpu", "7", "mlx5_0"],
            ["/opt/site/bw-wrapper", "--serve", "--use_cuda=9"],
        ),
    ],
)
def test_the_gpu_of_each_side_comes_from_its_role_whatever_ran(client_argv, server_argv):
    """The GPU is what the plan knew (the role), never read back from the argv that ran."""
    test = traffic.LoopbackTest("mlx5_0", 1, "mlx5_1", 1, 18515, gpu=3, server_gpu=4)
    client = ran(read_capture(KIND, HEALTHY)).model_copy(
        update={"argv": client_argv, "role": test.role("client")}
    )
    server = ran(SERVER_WAITING).model_copy(
        update={"argv": server_argv, "role": test.role("server")}
    )
    (attempt,) = read_loopback({client.key: client, server.key: server})
    assert (attempt.client, attempt.server, attempt.attempt) == ("mlx5_0:1", "mlx5_1:1", 1)
    assert (attempt.gpu, attempt.server_gpu) == (3, 4)
    assert round(attempt.gbps, 2) == 201.80
    # and no GPU in the role is no GPU, whatever --use_cuda the argv holds
    plain = traffic.LoopbackTest("mlx5_0", 1, "mlx5_1", 1, 18515)
    client = client.model_copy(update={"role": plain.role("client")})
    server = server.model_copy(update={"role": plain.role("server")})
    (attempt,) = read_loopback({client.key: client, server.key: server})
    assert (attempt.gpu, attempt.server_gpu) == (None, None)


def _graded(commands) -> Snapshot:
    """A Snapshot of two HDR HCAs with ``commands`` interpreted, through JSON and back."""
    fields = interpreted_with(commands)
    snap = snapshot([device("mlx5_0"), device("mlx5_1")]).model_copy(
        update={"commands": commands, "loopback": fields.loopback}
    )
    return Snapshot.model_validate(json.loads(snap.model_dump_json()))


def test_the_check_reads_the_field_alone():
    healthy, half = read_capture(KIND, HEALTHY), read_capture(KIND, HALF_RATE)
    commands = {}
    tests = [
        traffic.LoopbackTest("mlx5_0", 1, "mlx5_1", 1, 18515, gpu=0, client_pin=NUMACTL_1),
        traffic.LoopbackTest("mlx5_1", 1, "mlx5_0", 1, 18516),
        traffic.LoopbackTest("mlx5_1", 1, "mlx5_0", 1, 18616, attempt=2),
    ]
    for test, output in zip(tests, (healthy, half, half)):
        commands.update(recorded(test, ran(output), ran(SERVER_WAITING)))
    snap = _graded(commands)
    assert snap.loopback == read_loopback(commands)
    results = {r.target: r for r in run("perftest.bandwidth", snap)}
    assert results["mlx5_0:1"].status.value == "pass"
    assert results["mlx5_0:1"].message == (
        "201.8 Gb/s >= 180 (90% of the 200 Gb/s link rate) to mlx5_1:1, GPU 0 (GPUDirect RDMA)"
    )
    assert results["mlx5_0:1"].evidence == [" ".join(tests[0].argv(Thresholds(), "client"))]
    assert results["mlx5_1:1"].status.value == "fail"
    assert results["mlx5_1:1"].message == (
        "98.0 Gb/s < 180 (90% of the 200 Gb/s link rate) to mlx5_0:1; runs: 98.0; 98.0 Gb/s"
    )
    # the commands' text is not read again: without the field there is nothing to grade
    bare = snap.model_copy(update={"loopback": None})
    (skipped,) = run("perftest.bandwidth", bare)
    assert skipped.status.value == "skip" and "no ib_write_bw ran" in skipped.message


def test_the_check_takes_the_slower_port_of_a_pair():
    slow = device("mlx5_1", ports=[port(1, rate_text=EDR)])
    test = traffic.LoopbackTest("mlx5_0", 1, "mlx5_1", 1, 18515)
    commands = recorded(test, ran(read_capture(KIND, HEALTHY)), ran(SERVER_WAITING))
    fields = interpreted_with(commands)
    snap = snapshot([device("mlx5_0"), slow]).model_copy(
        update={"commands": commands, "loopback": fields.loopback}
    )
    (result,) = run("perftest.bandwidth", snap)
    assert "(90% of the 100 Gb/s link rate) to mlx5_1:1" in result.message, result
