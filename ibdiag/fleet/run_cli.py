"""``ibdiag fleet run``: one ``ibdiag check --json`` per node through Slurm's srun."""

import click


@click.command("run")
def run_command() -> int:
    """Run ibdiag on many nodes through the scheduler (being built: issue 15)."""
    raise click.UsageError("ibdiag fleet run is not built yet")
