"""The ``ibdiag`` command line: every click command, and the only code that prints or exits.

One module per command family: ``check`` (check, report), ``support_bundle`` (collect),
``metrics`` (export, serve), ``snapshot`` (snapshot, counters), ``reference`` (checks, explain,
config, schema), ``history`` (history, history clear), ``watch`` (the passive monitor),
``slurm`` (the Slurm hooks), ``fleet`` with ``fleet_run`` and ``fleet_report``;
the options they share are in ``options``, where text goes (a file or stdout) in ``output``.
What to grade and how is ``ibdiag.pipeline``'s: a command maps its options to it.

Exit codes are ``ibdiag.exit_codes.ExitCode``, the Nagios plugin convention: 0 OK, 1 WARNING,
2 CRITICAL, 3 UNKNOWN. Every way of failing is one line on stderr and exit 3, here
(``IbdiagGroup``): ibdiag's own errors (``ibdiag.errors.IbdiagError``: a bad config, bundle or
setting), click's usage errors (not click's default 2, so a Slurm prolog or NHC never mistakes
a typo for a sick node's "critical"), an interrupt, and any other exception (an internal error).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Optional, Sequence

import click

from ibdiag import __version__
from ibdiag.cli import (
    check,
    fleet,
    history,
    metrics,
    reference,
    slurm,
    snapshot,
    support_bundle,
    watch,
)
from ibdiag.errors import IbdiagError
from ibdiag.exit_codes import ExitCode
from ibdiag.render.inert import inert


class IbdiagGroup(click.Group):
    """Maps every way of failing to one stderr line and the Nagios exit code 3."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except IbdiagError as exc:  # ibdiag's own: its message names what and why
            click.echo(f"ibdiag: error: {inert(exc)}", err=True)
            code = ExitCode.UNKNOWN
        except click.UsageError as exc:
            hint = f" (try '{exc.ctx.command_path} --help')" if exc.ctx else ""
            click.echo(f"ibdiag: error: {inert(exc.format_message())}{hint}", err=True)
            code = ExitCode.UNKNOWN
        except click.ClickException as exc:  # a path may be in it
            click.echo(f"ibdiag: error: {inert(exc.format_message())}", err=True)
            code = ExitCode.UNKNOWN
        except click.Abort:
            click.echo("ibdiag: interrupted", err=True)
            code = ExitCode.UNKNOWN
        except Exception as exc:
            if os.environ.get("IBDIAG_DEBUG"):
                raise
            click.echo(
                f"ibdiag: internal error: {type(exc).__name__}: {inert(exc)} "
                "(set IBDIAG_DEBUG=1 for a traceback)",
                err=True,
            )
            code = ExitCode.UNKNOWN
        code = int(code if isinstance(code, int) else ExitCode.OK)
        if standalone_mode:
            sys.exit(code)
        return code


@click.group(
    cls=IbdiagGroup,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, prog_name="ibdiag")
@click.pass_context
def cli(ctx: click.Context) -> Optional[int]:
    """InfiniBand health check and support-bundle collector for GPU/HPC nodes.

    Exit codes: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (usage, config or internal error, or
    nothing could be collected).
    """
    if ctx.invoked_subcommand is None:  # `ibdiag` alone is a usage error: show help, exit 3
        click.echo(ctx.get_help())
        return ExitCode.UNKNOWN
    return None


for _command in (
    check.check_command,
    support_bundle.collect_command,
    check.report_command,
    metrics.export_command,
    metrics.serve_command,
    snapshot.snapshot_command,
    snapshot.counters_command,
    reference.list_checks,
    reference.explain,
    reference.config_group,
    reference.schema,
    slurm.slurm_group,
    fleet.fleet_group,
    history.history_group,
    watch.watch_command,
):
    cli.add_command(_command)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def main(argv: Optional[Sequence[str]] = None) -> None:
    # pydantic scans every installed package's metadata for its own plugins the first time a
    # model validates (~15 ms); ibdiag uses none, and the prolog is on every job's critical path.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    # Slurm stops a prolog or health check with SIGTERM, NHC's watchdog starts with SIGALRM, a
    # closed terminal sends SIGHUP: make each unwind like Ctrl-C, so the command runner kills
    # the process groups of the commands still running instead of leaving them behind.
    for stop in (signal.SIGTERM, signal.SIGALRM, signal.SIGHUP):
        signal.signal(stop, _interrupt)
    cli.main(args=list(argv) if argv is not None else None, prog_name="ibdiag")
