"""``ibdiag snapshot`` and ``ibdiag counters``: this node's raw state, ungraded - a snapshot
saved for a later ``--baseline``, and every counter of every port with its change since one.
"""

from __future__ import annotations

import click

from ibdiag.cli.options import UsageFailure, command_limits, level_option, source_options
from ibdiag.cli.output import write_or_print


@click.command("snapshot")
@source_options
@level_option(
    "standard also records perfquery and ethtool -S counters and the kernel log.",
    highest="standard",
)
@command_limits
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    help="Write to FILE (atomically; a device or FIFO is written into, '-' is stdout).",
)
def snapshot_command(sysfs_root, procfs_root, level, deadline, command_timeout, output) -> int:
    """Save this node's state (counters included) as JSON, for a later --baseline."""
    from ibdiag.collect import collect
    from ibdiag.registry import LEVELS
    from ibdiag.sources import BUNDLE_ONLY, SOURCE_LEVELS

    upto = LEVELS.index(level)
    needs = {
        source
        for source, at in SOURCE_LEVELS.items()
        if LEVELS.index(at) <= upto and source not in BUNDLE_ONLY
    }
    snapshot = collect(
        sysfs_root, procfs_root, needs, {"timeout_s": command_timeout, "deadline_s": deadline}
    )
    # as ibdiag.counters.baseline.save writes it: 0600, the node's GUIDs and counters are in it
    write_or_print(snapshot.model_dump_json(indent=1) + "\n", output, mode=0o600)
    return 0


@click.command("counters")
@source_options
@click.option("--baseline", "baseline_path", metavar="FILE", help="Also show change since FILE.")
@click.option("--all", "show_all", is_flag=True, help="Include counters that read 0.")
def counters_command(sysfs_root, procfs_root, baseline_path, show_all) -> int:
    """List every counter of every port (known or not) with its category and value."""
    from ibdiag.collect import collect
    from ibdiag.counters import baseline
    from ibdiag.render import counters as renderer

    snapshot = collect(sysfs_root, procfs_root, {"sysfs"})
    previous = None
    if baseline_path:
        previous, problem = baseline.load(baseline_path)
        if problem is not None:
            raise UsageFailure(f"baseline {problem}")
    click.echo(renderer.table(snapshot, previous, nonzero_only=not show_all), nl=False)
    return 0
