"""``ibdiag fleet report``: per-node reports and bundles in, the fleet's answer out."""

import click


@click.command("report")
def report_command() -> int:
    """Read per-node reports and bundles and answer for the fleet (being built: issue 15)."""
    raise click.UsageError("ibdiag fleet report is not built yet")
