"""``ibdiag slurm prolog|epilog|healthcheck``: the commands contrib/slurm's scripts run.

The exit contract (contrib/slurm/ibdiag-slurm-hook maps each value for Slurm; not the Nagios
codes of ``ibdiag check``: a WARNING is 0 here, never 1):

- 0 go on: healthy, a warning (logged), not judged (logged; ``--strict`` drains as if sick), or
  sick and handled: the epilog or the health check drained the node itself.
- 2 sick, and Slurm must see a failure: the prolog drained the node (or tried) and the job must
  not start here, so Slurm requeues it; the epilog or the health check could not drain it (the
  epilog's failure makes Slurm drain with "Epilog error"; Slurm ignores the health check's).
- 3 ibdiag could not run as configured: a bad option, config file, job id or state directory
  (one line on stderr). The script logs it and lets the job start unless IBDIAG_STRICT=1.

Any other exit is not ibdiag's answer (1: Python itself failed, a broken virtualenv; 126/127:
not executable/not installed; 124/137: hung and killed; 128+N: a signal): the script logs it and
lets the job start unless IBDIAG_STRICT=1, except a hung one, which fails the prolog/epilog.

What happened (drained, resumed, left an admin's reason alone, warnings) goes to stderr and
syslog (facility daemon, ident ``ibdiag``), where slurmd's own messages are.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Callable, Optional

import click

from ibdiag.cli.options import (
    checks_dir_option,
    command_timeout_option,
    expectation_options,
    history_options,
    level_option,
    pipeline_options,
    seconds_option,
    source_options,
)
from ibdiag.slurm import DEFAULT_SCONTROL_TIMEOUT_S, DEFAULT_STATE_DIR

DEFAULT_DEADLINE_S = 30.0


def _hook_options(default_level: str):
    """The options every hook takes, on top of check's source and expectation options."""

    def decorate(command):
        options = [
            level_option(
                "quick reads files only; standard also runs perfquery, ethtool -S, dmesg.",
                default=default_level,
                highest="standard",
            ),
            click.option(
                "--node",
                envvar="SLURMD_NODENAME",
                metavar="NAME",
                help="The Slurm node name [default: $SLURMD_NODENAME, else the short hostname].",
            ),
            click.option(
                "--state-dir",
                default=DEFAULT_STATE_DIR,
                show_default=True,
                metavar="DIR",
                help="Where job baselines and the health check's state live (0700).",
            ),
            click.option(
                "--scontrol",
                "scontrol_program",
                default="scontrol",
                show_default=True,
                metavar="PROGRAM",
                help="The scontrol to drain and resume with.",
            ),
            seconds_option(
                "--scontrol-timeout",
                default=DEFAULT_SCONTROL_TIMEOUT_S,
                help="Kill an scontrol call that takes longer (a hung slurmctld).",
            ),
            seconds_option(
                "--deadline",
                minimum=2,
                default=DEFAULT_DEADLINE_S,
                help="The whole hook, scontrol included, ends within this; a check still "
                "running then (a hung HCA) drains the node.",
            ),
            command_timeout_option,
            click.option(
                "--strict",
                is_flag=True,
                help="Also drain when ibdiag cannot judge the node (UNKNOWN).",
            ),
            expectation_options,
            checks_dir_option,
            source_options,
            history_options,
        ]
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


def _job_id_option(command):
    return click.option(
        "--job-id",
        envvar="SLURM_JOB_ID",
        required=True,
        metavar="ID",
        help="The job's id [default: $SLURM_JOB_ID].",
    )(command)


@click.group("slurm")
def slurm_group() -> None:
    """Slurm prolog, epilog and HealthCheckProgram: drain sick nodes, resume repaired ones.

    Drain reasons start with 'ibdiag:'; a reason that does not (an admin's) is never
    overwritten nor resumed. 'ibdiag: held:' and 'ibdiag: epilog:' reasons (error counters
    that rose, a link that went down: faults that do not heal by themselves) are never
    replaced nor resumed either: an admin resumes them. See contrib/slurm/README.md for the
    slurm.conf lines.
    """


@slurm_group.command("prolog")
@_job_id_option
@_hook_options("quick")
def prolog_command(job_id, **options) -> int:
    """Before a job: drain and exit 2 when sick; save the job's baseline when not."""
    return _run_hook("prolog", options, job_id)


@slurm_group.command("epilog")
@_job_id_option
@_hook_options("standard")
def epilog_command(job_id, **options) -> int:
    """After a job: drain on counter or kernel-log faults since its baseline; remove it."""
    return _run_hook("epilog", options, job_id)


@slurm_group.command("healthcheck")
@_hook_options("quick")
def healthcheck_command(**options) -> int:
    """HealthCheckProgram: drain when sick, resume what ibdiag drained once healthy."""
    return _run_hook("healthcheck", options)


def _run_hook(name: str, options: dict, job_id: str = "") -> int:
    """Run the hook ``name`` (prolog, epilog, healthcheck); its exit code."""
    import socket
    import threading

    from ibdiag.slurm import hooks
    from ibdiag.slurm.scontrol import Scontrol

    hook = {key: options.pop(key) for key in _HOOK_PARAMS}  # the rest: how to grade the node
    deadline_at = time.monotonic() + hook["deadline"]
    node = hook["node"] or socket.gethostname().split(".")[0]
    grade, change_checks = _grader(options)
    scontrol = Scontrol(node, hook["scontrol_program"], hook["scontrol_timeout"], deadline_at)
    ctx = hooks.HookContext(
        state_dir=hook["state_dir"],
        scontrol=scontrol,
        deadline_at=deadline_at,
        log=_logger(name, node),
        strict=hook["strict"],
        change_checks=change_checks,
    )
    if name == "prolog":  # a hook that cannot run as configured: hooks.HookError, exit 3
        code = hooks.prolog(ctx, grade, job_id)
    elif name == "epilog":
        code = hooks.epilog(ctx, grade, job_id)
    else:
        code = hooks.healthcheck(ctx, grade)
    if any(thread.name == "ibdiag-check" for thread in threading.enumerate()):
        # The check is stuck in the kernel (a hung HCA's sysfs read): exit without waiting
        # for it, which the interpreter's normal shutdown would.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


# The hook's own parameters; the others (level, sources, expectations, checks, the command
# timeout) say how to grade the node: ibdiag.pipeline.PipelineOptions.
_HOOK_PARAMS = ("node", "state_dir", "scontrol_program", "scontrol_timeout", "deadline", "strict")


def _grader(settings: dict):
    """Collect and grade this node as ``ibdiag check`` would, at the hook's level, within the
    seconds the hook has left (``hooks.Grader``); and the ids of the checks it runs that are
    graded on change since a baseline (their failures are held drains)."""
    from ibdiag import held
    from ibdiag.pipeline import Pipeline

    pipeline = Pipeline.prepare(pipeline_options(settings))
    change_checks = held.change_checks(pipeline.registry, pipeline.options.level)

    def grade_node(baseline_path: Optional[str], save_path: Optional[str], seconds: float):
        timeout = pipeline.options.command_timeout_s  # the option's, or its default
        limits = {
            "timeout_s": seconds if timeout is None else min(timeout, seconds),
            "deadline_s": max(1.0, seconds - 1.0),
        }
        # the baseline saved before grading: one that cannot be saved is a warning result
        return pipeline.run(baseline_path, save_path, runner_options=limits)

    return grade_node, change_checks


def _logger(hook: str, node: str) -> Callable[[str], None]:
    """Log lines to stderr and to syslog (daemon facility), prefixed with hook and node."""
    import syslog

    syslog.openlog("ibdiag", syslog.LOG_PID, syslog.LOG_DAEMON)

    def log(message: str) -> None:
        line = f"slurm {hook} on {node}: {message}"
        click.echo(f"ibdiag: {line}", err=True)
        syslog.syslog(syslog.LOG_NOTICE, line)

    return log
