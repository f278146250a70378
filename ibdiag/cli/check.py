"""``ibdiag check`` and ``ibdiag report``: grade this node, or a recording of one, and exit
with the verdict's Nagios code (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN).

What is graded - this node live, a support bundle, a saved report or snapshot JSON - and at
which level and thresholds is the pipeline's choice (``ibdiag.pipeline.grade``); these commands
map their options to it and show the Report (text, JSON, HTML, or ``--reason``'s one line).
"""

from __future__ import annotations

import os
import sys
from typing import Optional

import click

from ibdiag.cli.options import (
    checks_dir_option,
    command_limits,
    expectation_options,
    level_option,
    node_options,
    output_options,
    pipeline_options,
    seconds_option,
)
from ibdiag.cli.output import format_for, status_line, write_or_print
from ibdiag.render.inert import inert


@click.command("check")
@level_option(
    "quick: files only, runs no command (prolog, NHC); standard: also read-only commands "
    "(perfquery, ethtool -S, dmesg, ibstat, ibv_devinfo, nvidia-smi topo) under --deadline; "
    "full: also tests that move traffic (ib_write_bw loopback, nccl-tests; minutes)."
)
@command_limits
@node_options
@output_options
@click.option(
    "--baseline",
    "baseline_path",
    metavar="FILE",
    help="Grade counters on their change since this snapshot (ibdiag snapshot -o FILE).",
)
@click.option(
    "--from",
    "from_bundle",
    metavar="BUNDLE",
    help="Grade a support bundle (tarball or directory) instead of this node: nothing live "
    "is read or run; the level is the bundle's.",
)
@click.option(
    "--accept-altered",
    is_flag=True,
    help="With --from: grade a bundle whose files differ from its manifest's sha256 (refused "
    "otherwise); the verdict line then says so.",
)
@click.option(
    "--state",
    "state_path",
    metavar="FILE",
    help="Use FILE (the previous run's snapshot) as the baseline when present, then replace "
    "it with this run's (NHC, HealthCheckProgram).",
)
@seconds_option(
    "--read-timeout",
    default=5.0,
    help="A sysfs/procfs read that has not answered after this long (a hung HCA) is named on "
    "its HCA, which fails, and the rest is graded; reading ends by twice this.",
)
@click.option(
    "--reason",
    "reason_only",
    is_flag=True,
    help="Print only one stable line naming the worst finding ('ibdiag: mlx5_6:1 link.state "
    "2: INIT'), nothing when all is well: for drain reasons (NHC, Slurm). A fault that does "
    "not heal by itself (a failed check graded on change: a counter rise, a flap) reads "
    "'ibdiag: held: ...': leave it drained until an admin resumes the node. At most 128 "
    "characters, anything but letters, digits, space and _.,:/+-<>() written as _.",
)
def check_command(
    fmt,
    as_json,
    output,
    baseline_path,
    from_bundle,
    accept_altered,
    state_path,
    quiet,
    verbose,
    reason_only,
    **settings,  # where to read, level, expectations, checks, limits: PipelineOptions
) -> int:
    """Grade this node's InfiniBand health and exit with its Nagios code."""
    from ibdiag.pipeline import Input, grade

    if from_bundle and state_path:
        raise click.UsageError("--state cannot be used with --from (a bundle is read-only)")
    if accept_altered and not from_bundle:
        raise click.UsageError("--accept-altered applies to a bundle: give it with --from")
    if baseline_path and state_path:
        raise click.UsageError("give --baseline or --state, not both")
    given = Input(from_bundle, baseline_path, state_path, accept_altered)
    with status_line() as status:
        report, pipeline = grade(
            pipeline_options(settings), given, progress=status.say, warn=_warner(from_bundle)
        )
    if reason_only:
        return _reason(report, pipeline.registry)
    return _emit(report, fmt, as_json, output, quiet, verbose)


@click.command("report")
@click.argument("bundle", metavar="BUNDLE|REPORT.json", type=click.Path(exists=True))
@checks_dir_option
@expectation_options
@output_options
@click.option(
    "--accept-altered",
    is_flag=True,
    help="Grade a bundle whose files differ from its manifest's sha256 (refused otherwise); "
    "the verdict line and the HTML banner then say so.",
)
def report_command(bundle, fmt, as_json, output, quiet, verbose, accept_altered, **settings) -> int:
    """Re-grade a support bundle - or a saved report or snapshot JSON - offline, with today's
    checks (and your thresholds); render it as text, JSON or HTML."""
    from ibdiag.pipeline import grade_recorded

    options = pipeline_options(settings)
    report, _ = grade_recorded(bundle, options, None, accept_altered, _warner(bundle))
    return _emit(report, fmt, as_json, output, quiet, verbose)


def _warner(path: Optional[str]):
    """What is wrong with the bundle at ``path`` that can still be graded: a stderr line each."""

    def warn(warning: str) -> None:
        click.echo(f"ibdiag: warning: {inert(path)}: {inert(warning)}", err=True)

    return warn


def _reason(report, registry) -> int:
    """--reason: only the drain reason (``ibdiag.held``), held when one of the checks of the
    report's level graded on change failed; the verdict's exit code."""
    from ibdiag import held

    line = held.report_reason(report, held.change_checks(registry, report.level))
    if line:
        click.echo(line)
    return report.verdict.exit_code


def _emit(report, fmt, as_json, output, quiet, verbose) -> int:
    """Print or write the report in the asked-for format; the verdict's exit code."""
    from ibdiag.render.options import RenderOptions

    form = format_for(output, fmt, as_json)
    color = sys.stdout.isatty() and "NO_COLOR" not in os.environ and not output
    text = _render(report, form, RenderOptions(color=color, verbose=verbose))
    write_or_print(text, output, quiet)
    return report.verdict.exit_code


# --format -> the renderer's module, imported when asked for (html: jinja2 only then)
_RENDERERS = {
    "text": "ibdiag.render.text",
    "json": "ibdiag.render.json",
    "html": "ibdiag.render.html",
}


def _render(report, fmt: str, options) -> str:
    """``render(report, options)`` of the format's renderer (they share one signature)."""
    import importlib

    return importlib.import_module(_RENDERERS[fmt]).render(report, options)
