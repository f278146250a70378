"""The argv of a nccl-tests run, built by the source that runs it (``ibdiag.sources.active``)."""

from __future__ import annotations

import pytest

from ibdiag.sources.active import LAUNCHERS, nccl_tests_argv


def test_argv_plain():
    assert nccl_tests_argv("/opt/nccl-tests/build/all_reduce_perf") == [
        "/opt/nccl-tests/build/all_reduce_perf",
        "-b", "8", "-e", "8G", "-f", "2", "-g", "8", "-n", "20", "-w", "5", "-c", "1",
    ]  # fmt: skip


def test_argv_launchers():
    mpirun = nccl_tests_argv(
        "all_reduce_perf", "mpirun", gpus=4, min_bytes="1M", max_bytes="1G", extra=("-d", "half")
    )
    assert mpirun == [
        "mpirun", "-np", "4", "--bind-to", "numa",
        "all_reduce_perf", "-b", "1M", "-e", "1G", "-f", "2", "-g", "1",
        "-n", "20", "-w", "5", "-c", "1", "-d", "half",
    ]  # fmt: skip
    srun = nccl_tests_argv("all_gather_perf", "srun", gpus=8, launcher_args=("--mpi=pmix",))
    assert srun[:4] == ["srun", "--ntasks-per-node=8", "--gpus-per-task=1", "--mpi=pmix"]
    assert srun[4] == "all_gather_perf" and srun[srun.index("-g") + 1] == "1"
    assert set(LAUNCHERS) == {"plain", "mpirun", "srun"}
    positional = nccl_tests_argv("all_reduce_perf", "plain", 2, 1048576, "64M", 4, 10, 2, 0)
    assert positional == [
        "all_reduce_perf", "-b", "1048576", "-e", "64M", "-f", "4", "-g", "2",
        "-n", "10", "-w", "2", "-c", "0",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "kwargs",
    [
        {"binary": "-rf"},
        {"binary": "all reduce"},
        {"binary": "a;b"},
        {"launcher": "ssh"},
        {"gpus": 0},
        {"gpus": True},
        {"min_bytes": "8X"},
        {"max_bytes": -8},
        {"max_bytes": 8.0},
        {"min_bytes": True},
        {"step_factor": 1},
        {"iters": 0},
        {"warmup_iters": -1},
        {"check": -1},
        {"extra": "-d half"},
        {"extra": ("",)},
    ],
)
def test_argv_rejects_bad_arguments(kwargs):
    arguments = {"binary": "all_reduce_perf", **kwargs}
    with pytest.raises(ValueError):
        nccl_tests_argv(**arguments)
