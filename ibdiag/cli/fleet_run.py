"""``ibdiag fleet run``: one ``ibdiag check --json`` per node through Slurm's srun
(``ibdiag.fleet.run``), and ``ibdiag fleet node-task``, the hidden command srun starts on each
node (``ibdiag.fleet.node_task``)."""

from __future__ import annotations

import os
import sys
from typing import Dict, Sequence, Tuple

import click

from ibdiag.cli.check import check_command
from ibdiag.cli.options import UsageFailure, level_option, seconds_option
from ibdiag.cli.output import write_file
from ibdiag.exit_codes import ExitCode

# check's options that fleet run sets itself, or that would change what a node prints.
_SET_BY_FLEET_RUN = frozenset(
    {
        "--level",
        "--json",
        "--format",
        "-o",
        "--output",
        "-q",
        "--quiet",
        "-v",
        "--verbose",
        "--reason",
        "--from",
        "--accept-altered",
        "-h",
        "--help",
    }
)


@click.command(
    "run",
    context_settings={"ignore_unknown_options": True},
    short_help="Run ibdiag check on many nodes through one srun.",
)
@level_option("The level of every node's check.")
@click.option(
    "--nodes",
    "hostlist",
    metavar="HOSTLIST",
    help="The nodes, as Slurm writes them: gpu[001-128],login1.",
)
@click.option(
    "--partition",
    metavar="NAME",
    help="Every node of this partition (with --nodes: those of them in it); srun runs there.",
)
@click.option(
    "-o",
    "--output-dir",
    "out_dir",
    required=True,
    metavar="DIR",
    help="Where each node writes DIR/<node>.json and the run DIR/fleet-run.json: a new or "
    "empty directory on a filesystem every node mounts at the same path.",
)
@seconds_option(
    "--node-timeout",
    "node_timeout",
    minimum=1,
    help="Stop a node's check after this long (it then never answered) [default: 60 quick, "
    "120 standard, 900 full].",
)
@seconds_option(
    "--wait-for-nodes",
    "allocation_wait",
    minimum=0,
    default=300,
    help="Give up when Slurm has not allocated the nodes after this long (busy with jobs, with "
    "--include-busy, or a request it cannot grant now); 0 waits as long as it takes.",
)
@click.option(
    "--include-busy",
    is_flag=True,
    help="Give srun the nodes busy with jobs too: an allocated node is waited for, up to "
    "--wait-for-nodes, with every other node (srun starts none until it has them all); a mixed "
    "one runs beside its job, at --level full too. By default allocated nodes (and at --level "
    "full mixed ones) are not run, and are listed as never answered (busy).",
)
@click.option("--srun", default="srun", show_default=True, metavar="PATH", help="The srun.")
@click.option("--sinfo", default="sinfo", show_default=True, metavar="PATH", help="The sinfo.")
@click.option(
    "--srun-arg",
    "srun_args",
    multiple=True,
    metavar="ARG",
    help="One more srun option, repeatable: --srun-arg=--reservation=maint, "
    "--srun-arg=--account=ops.",
)
@click.option(
    "--ibdiag",
    "ibdiag",
    metavar="PATH",
    help="The ibdiag the nodes run, the same path on every node [default: "
    "/opt/ibdiag/bin/ibdiag, where README's node install puts it].",
)
@click.option(
    "--python",
    "python",
    metavar="PATH",
    help="Run 'PATH -m ibdiag' on the nodes instead: a Python with ibdiag installed, the same "
    "path on every node.",
)
@click.argument("check_args", nargs=-1, type=click.UNPROCESSED, metavar="[CHECK OPTIONS]...")
def run_command(
    level,
    hostlist,
    partition,
    out_dir,
    node_timeout,
    allocation_wait,
    include_busy,
    srun,
    sinfo,
    srun_args,
    ibdiag,
    python,
    check_args,
) -> int:
    """Run 'ibdiag check --json' on every node through one srun, each under a time limit of
    its own, each report written as DIR/<node>.json; then read them with 'ibdiag fleet report
    DIR'. Check options (--sysfs, --profile, --config, --expect-hcas, --deadline ...) are
    passed to every node's check.

    Nodes Slurm cannot run now (down, drained, unknown) or busy with jobs (allocated; at
    --level full, mixed too: full moves traffic, and must not run beside a job) are not given
    to srun, so they cannot hold it (--include-busy waits for the busy ones); they, and nodes
    whose check failed or timed out, are listed as never answered.

    Exit codes: 0 every node answered (whatever its verdict: 'fleet report' judges), 1 some
    never answered, 3 none did, the run was interrupted, or a usage error.
    """
    from ibdiag.fleet.run import NODE_IBDIAG, RunRequest, execute
    from ibdiag.fleet.run_record import SUMMARY_NAME
    from ibdiag.render.inert import inert

    if not hostlist and not partition:
        raise click.UsageError("give --nodes HOSTLIST or --partition NAME (or both)")
    if ibdiag and python:
        raise click.UsageError("give --ibdiag PATH or --python PATH, not both")
    request = RunRequest(
        out_dir=out_dir,
        level=level,
        hostlist=hostlist,
        partition=partition,
        node_timeout_s=node_timeout,
        srun=_program(srun, "--srun"),
        sinfo=_program(sinfo, "--sinfo"),
        srun_args=tuple(srun_args),
        ibdiag=(python, "-m", "ibdiag") if python else (ibdiag or NODE_IBDIAG,),
        allocation_wait_s=allocation_wait,
        check_args=validated_check_args(check_args),
        include_busy=include_busy,
    )
    # a run that cannot start: fleet.run.RunError, exit 3
    result = execute(request, on_message=lambda line: click.echo(inert(line), err=True))
    summary = os.path.join(result.out_dir, SUMMARY_NAME)
    try:
        write_file(summary, result.model_dump_json(indent=2) + "\n")
    except UsageFailure as exc:  # the reports are written: say so, and go on
        click.echo(f"ibdiag: fleet run: {exc}", err=True)
        summary = "(not written)"
    for outcome in result.nodes:
        if not outcome.answered:
            click.echo(
                f"ibdiag: fleet run: {inert(outcome.node)}: never answered: "
                f"{inert(outcome.reason)}",
                err=True,
            )
    for node in result.unexpected_nodes:
        click.echo(
            f"ibdiag: fleet run: {inert(node)}: answered but was not asked for (is its Slurm "
            "name not the one given?)",
            err=True,
        )
    seconds = (result.ended_at - result.started_at).total_seconds()
    stopped = " (interrupted)" if result.interrupted else ""
    click.echo(
        f"ibdiag fleet run: {len(result.answered_nodes)} of {result.expected} nodes answered"
        f"{stopped} in {seconds:.0f} s; reports in {result.out_dir}, summary {summary}; "
        f"next: ibdiag fleet report {result.out_dir}"
    )
    return result.exit_code


def _program(program: str, option: str) -> str:
    import shutil

    found = shutil.which(program)
    if not found:
        raise UsageFailure(
            f"{program} not found: run fleet run where Slurm's client commands are (a login "
            f"node), or give {option} PATH"
        )
    return found


def validated_check_args(args: Sequence[str]) -> Tuple[str, ...]:
    """``args`` when each is an ``ibdiag check`` option (with its value) that fleet run does
    not set itself; a usage error naming the first that is not - here, once, rather than on
    every node."""
    takes_value: Dict[str, bool] = {}
    for param in check_command.params:
        if isinstance(param, click.Option):
            for name in (*param.opts, *param.secondary_opts):
                takes_value[name] = not (param.is_flag or param.count)
    index = 0
    while index < len(args):
        arg = args[index]
        name, equals, _ = arg.partition("=")
        if not arg.startswith("-"):
            raise click.UsageError(f"unexpected argument {arg!r}")
        if name in _SET_BY_FLEET_RUN:
            raise click.UsageError(
                f"{name} is not passed to the nodes' check: fleet run sets how each node runs "
                "and reports"
            )
        if name not in takes_value:
            raise click.UsageError(f"no such option: {name} (neither fleet run's nor check's)")
        if takes_value[name] and not equals:
            if index + 1 >= len(args):
                raise click.UsageError(f"{name} needs a value")
            index += 1
        index += 1
    return tuple(args)


@click.command("node-task", hidden=True, context_settings={"ignore_unknown_options": True})
@click.option("--out-dir", required=True, metavar="DIR")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0.1), required=True)
@click.option("--node", envvar="SLURMD_NODENAME", metavar="NAME")
@click.argument("check_args", nargs=-1, type=click.UNPROCESSED)
def node_task_command(out_dir, timeout_s, node, check_args) -> int:
    """What 'ibdiag fleet run' starts on each node through srun: run 'ibdiag check --json
    CHECK_ARGS' for at most --timeout seconds, publish its report as DIR/<node>.json, print
    one status line. Exit 0 when a report was written, 1 otherwise."""
    from ibdiag.fleet.node_task import check_argv, node_name, run_task

    status = run_task(node_name(node), out_dir, check_argv(sys.executable, check_args), timeout_s)
    click.echo(status.line())
    return ExitCode.OK if status.report else ExitCode.WARNING
