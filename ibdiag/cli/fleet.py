"""``ibdiag fleet run|report``: the fleet's commands (``ibdiag.fleet``).

Only click and the command line's own modules are imported here; each command imports what it
needs when it runs, so ``ibdiag check`` on a prolog's path pays nothing for the fleet.
"""

import click

from ibdiag.cli.fleet_report import report_command
from ibdiag.cli.fleet_run import node_task_command, run_command


@click.group("fleet")
def fleet_group() -> None:
    """Many nodes at once: run ibdiag across the cluster through its scheduler (fleet run),
    and answer across their reports which nodes are sick and why, which are slower than their
    peers, what drifted, and which switch the failing nodes share (fleet report)."""


fleet_group.add_command(run_command)
fleet_group.add_command(node_task_command)  # hidden: what fleet run starts on each node
fleet_group.add_command(report_command)
