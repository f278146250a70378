"""The nccl-tests family (source ``nccl_tests``, level full): NCCL's own collective run by
ibdiag on the node's GPUs -> ``Snapshot.nccl_tests``.

**What it runs** (``run``, in level full's traffic phase, after the loopback): nccl-tests once,
as configured (``nccl_tests``: the program, ``nccl_launcher``, sizes, GPUs), under
``nccl_timeout_s`` capped by the phase's limits; not at all when no program is configured. Its
role is ``nccl-tests`` (``ibdiag.roles.NCCL_TESTS``) whatever the program is called
(all_reduce_perf, all_reduce_perf_mpi, a site's wrapper script): the check finds it by role.

**What it gives**: ``Snapshot.nccl_tests``, the run's stdout and stderr together (NCCL writes
its WARN lines to either) parsed by ``parser.parse_nccl_tests`` into an ``NcclTestsResult`` that
records the role and what became of the run (``outcome``: a ``RunOutcome``: never started, not
installed, timed out...), so the check says why it gave nothing without seeing the run. Parser
problems are recorded on the result, never raised.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional, Sequence

from ibdiag import roles
from ibdiag.families import Runs, Update, outcome_of
from ibdiag.families._traffic import Limits, Progress, TrafficContext, unlimited
from ibdiag.model import CommandRun, Snapshot
from ibdiag.thresholds import Thresholds

if TYPE_CHECKING:
    from ibdiag.runner.command_runner import OutputBudget

SOURCE = "nccl_tests"
LEVEL = "full"
ORDER = 80  # after the loopback: the traffic phase runs ib_write_bw first

LAUNCHERS = ("plain", "mpirun", "srun")  # how nccl-tests start: see nccl_tests_argv


def nccl_tests_argv(
    binary: str,
    launcher: str = "plain",
    gpus: int = 8,
    min_bytes: str = "8",
    max_bytes: str = "8G",
    step_factor: int = 2,
    iters: int = 20,
    warmup_iters: int = 5,
    check: int = 1,
    extra: Sequence[str] = (),
    launcher_args: Sequence[str] = (),
) -> List[str]:
    """The argv of one nccl-tests run over ``gpus`` local GPUs.

    ``plain``: one process drives every GPU (``-g GPUS``). ``mpirun`` (``-np GPUS --bind-to
    numa``) and ``srun`` (``--ntasks-per-node=GPUS --gpus-per-task=1``) start one process per
    GPU (``-g 1``; the binary must be built with MPI=1). ``extra`` goes to the binary (e.g.
    ``("-d", "bfloat16")``), ``launcher_args`` to mpirun/srun (e.g. ``--allow-run-as-root``).
    Options (nccl-tests README): ``-b`` min bytes, ``-e`` max bytes, ``-f`` step factor, ``-g``
    GPUs per thread, ``-n`` iterations, ``-w`` warm-up iterations, ``-c`` check (validation)
    iterations. Sizes take nccl-tests' K/M/G suffixes ("8", "128M", "8G") or a byte count.

    It only builds: ``binary``, ``launcher``, ``min_bytes``, ``max_bytes`` and
    ``launcher_args`` are ``Thresholds``' nccl_tests (a program path, not starting with
    ``-``), nccl_launcher (one of ``LAUNCHERS``), nccl_min_bytes/nccl_max_bytes (a byte count)
    and nccl_launcher_args (each non-empty, no NUL), refused by the config when they are not
    (exit 3). ``gpus`` is nccl_gpus (1..64), else the number of NVIDIA GPUs sysfs listed, else
    1 (``run_nccl_tests``). The iteration counts and ``extra`` are the code's own (their
    defaults: ``run_nccl_tests`` passes none of them).
    """
    per_process = gpus if launcher == "plain" else 1
    args = [
        binary,
        "-b",
        min_bytes,
        "-e",
        max_bytes,
        "-f",
        str(step_factor),
        "-g",
        str(per_process),
        "-n",
        str(iters),
        "-w",
        str(warmup_iters),
        "-c",
        str(check),
        *extra,
    ]
    if launcher == "mpirun":
        return ["mpirun", "-np", str(gpus), "--bind-to", "numa", *launcher_args, *args]
    if launcher == "srun":
        return [
            "srun",
            f"--ntasks-per-node={gpus}",
            "--gpus-per-task=1",
            *launcher_args,
            *args,
        ]
    return args


def bound_s(thresholds: Thresholds) -> float:
    """Its share of level full's bound: nccl-tests' own timeout, when a program is set."""
    return float(thresholds.nccl_timeout_s) if thresholds.nccl_tests else 0.0


def run(snap: Snapshot, context: TrafficContext) -> Snapshot:
    """``snap`` with the nccl-tests run recorded (none when no program is configured)."""
    gpus = len(snap.gpus or [])
    th, limits = context.thresholds, context.limits
    runs = run_nccl_tests(th, gpus, context.progress, limits, context.budget)
    return snap.model_copy(update={"commands": {**snap.commands, **runs}}) if runs else snap


def run_nccl_tests(
    thresholds: Thresholds,
    gpu_count: int,
    progress: Optional[Progress] = None,
    limits: Optional[Limits] = None,
    budget: Optional[OutputBudget] = None,
) -> Dict[str, CommandRun]:
    """nccl-tests once, as configured (``nccl_tests``, ``nccl_launcher``, sizes, GPUs)."""
    if not thresholds.nccl_tests:
        return {}
    limits = limits or unlimited()
    gpus = thresholds.nccl_gpus or gpu_count or 1
    argv = nccl_tests_argv(
        thresholds.nccl_tests,
        launcher=thresholds.nccl_launcher,
        gpus=gpus,
        min_bytes=thresholds.nccl_min_bytes,
        max_bytes=thresholds.nccl_max_bytes,
        launcher_args=thresholds.nccl_launcher_args,
    )
    runner = limits.runner(float(thresholds.nccl_timeout_s), budget)
    if progress is not None and not limits.passed:
        progress(f"nccl-tests on {gpus} GPU(s): {' '.join(argv)}")
    recorded = runner.run(argv, roles.NCCL_TESTS)
    return {recorded.key: recorded}


def interpret(snap: Snapshot, runs: Runs) -> Update:
    """``Snapshot.nccl_tests`` from the run of role nccl-tests, with what became of it; no
    update (the field stays None) when there is none."""
    recorded = runs.get(roles.NCCL_TESTS)
    if recorded is None:
        return Update()
    from ibdiag.families.nccl_tests.parser import parse_nccl_tests

    parsed = parse_nccl_tests(f"{recorded.stdout}\n{recorded.stderr}")
    update = {"role": recorded.role, "outcome": outcome_of(recorded)}
    return Update(node={"nccl_tests": parsed.model_copy(update=update)})
