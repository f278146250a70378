"""The argv of a nccl-tests run, built by the family that runs it (``ibdiag.families.nccl_tests``).

The builder only builds: what it is given comes from Thresholds, which the config validated
once (a bad value is one line, exit 3: tests/test_config.py), so the tests of bad values are
tests that the config refuses them.
"""

from __future__ import annotations

import time
from typing import get_args

import pytest

from ibdiag.config import ConfigError, load_effective
from ibdiag.families._traffic import Limits
from ibdiag.families.nccl_tests import LAUNCHERS, nccl_tests_argv, run_nccl_tests
from ibdiag.roles import NCCL_TESTS
from ibdiag.thresholds import Thresholds


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
    positional = nccl_tests_argv("all_reduce_perf", "plain", 2, "1048576", "64M", 4, 10, 2, 0)
    assert positional == [
        "all_reduce_perf", "-b", "1048576", "-e", "64M", "-f", "4", "-g", "2",
        "-n", "10", "-w", "2", "-c", "0",
    ]  # fmt: skip


def test_the_launchers_are_the_ones_the_config_accepts():
    assert set(LAUNCHERS) == set(get_args(Thresholds.model_fields["nccl_launcher"].annotation))


def _planned_argv(thresholds: Thresholds, gpu_count: int):
    """The argv run_nccl_tests builds from ``thresholds``, recorded as never started (the
    deadline had passed), so nothing runs."""
    past = Limits(started_at=time.monotonic() - 10, deadline_s=1)
    runs = run_nccl_tests(thresholds, gpu_count, limits=past)
    (run,) = runs.values()
    assert run.role == NCCL_TESTS and run.skipped and run.error is None
    return run.argv


def test_run_nccl_tests_builds_its_argv_from_the_validated_thresholds():
    th = load_effective(None, None, {
        "nccl_tests": "/opt/nccl-tests/build/all_reduce_perf", "nccl_launcher": "mpirun",
        "nccl_min_bytes": "1M", "nccl_max_bytes": "1G",
        "nccl_launcher_args": ["--allow-run-as-root", "-H", "gpu1:8,gpu2:8"], "nccl_gpus": 16,
    }).thresholds  # fmt: skip
    assert _planned_argv(th, 8) == [
        "mpirun", "-np", "16", "--bind-to", "numa", "--allow-run-as-root", "-H", "gpu1:8,gpu2:8",
        "/opt/nccl-tests/build/all_reduce_perf", "-b", "1M", "-e", "1G", "-f", "2", "-g", "1",
        "-n", "20", "-w", "5", "-c", "1",
    ]  # fmt: skip
    plain = Thresholds(nccl_tests="all_reduce_perf")
    assert _planned_argv(plain, 4) == nccl_tests_argv("all_reduce_perf", gpus=4)
    assert _planned_argv(plain, 0) == nccl_tests_argv("all_reduce_perf", gpus=1)  # no GPU listed
    assert run_nccl_tests(Thresholds(), 8) == {}  # nccl_tests unset: nothing is run


@pytest.mark.parametrize(
    "setting",
    [
        {"nccl_tests": "-rf"},
        {"nccl_tests": "all reduce"},
        {"nccl_tests": "a;b"},
        {"nccl_tests": ""},
        {"nccl_tests": "x" * 4097},
        {"nccl_launcher": "ssh"},
        {"nccl_gpus": 0},
        {"nccl_gpus": True},
        {"nccl_gpus": 65},
        {"nccl_min_bytes": "8X"},
        {"nccl_min_bytes": True},
        {"nccl_max_bytes": -8},
        {"nccl_max_bytes": 8.0},
        {"nccl_launcher_args": "-d half"},
        {"nccl_launcher_args": [""]},
        {"nccl_launcher_args": ["-H", "a\x00b"]},
        {"nccl_launcher_args": [1]},
    ],
)
def test_the_config_refuses_what_the_builder_used_to(setting):
    """What nccl_tests_argv raised ValueError on, now refused once, by the config."""
    (key,) = setting
    with pytest.raises(ConfigError) as info:
        load_effective(None, None, setting)
    message = str(info.value)
    assert message.startswith(f"command line: {key}") and "\n" not in message, message
