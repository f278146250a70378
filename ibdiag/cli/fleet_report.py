"""``ibdiag fleet report``: per-node reports and bundles in, the fleet's answer out.

Reads its inputs as a stream (``ibdiag.fleet.read``), analyses the nodes
(``ibdiag.fleet.analyze``) and writes the ``FleetReport`` as text (``render_text``), JSON
(``FleetReport.model_dump_json``, schema: ``ibdiag schema fleet``) or a self-contained HTML page
(``ibdiag.fleet.render_html``). The exit code is the fleet's verdict, as ``ibdiag check``'s is
the node's: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (no node could be read) - and 3 for a usage
error (a bad option, a host list that cannot be expanded), one line on stderr.

Only click and the command line's own modules are imported here; the rest when the command
runs. The options that tune the analysis mirror ``FleetSettings``'s fields one for one
(``_SETTINGS``; a test keeps them in step).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Dict, Optional, Sequence, Tuple

import click

from ibdiag.cli.options import FORMATS, UsageFailure
from ibdiag.cli.output import format_for, write_or_print

# FleetSettings field -> (type, metavar, help). The defaults (and why) are FleetSettings's.
_SETTINGS: Dict[str, Tuple[Any, str, str]] = {
    "outlier_mad_factor": (
        float,
        "F",
        "An outlier is further than F robust standard deviations (1.4826 x MAD) from its "
        "rail's median [default: 3.0].",
    ),
    "outlier_margin": (
        float,
        "M",
        "... and further than this fraction of the median (0.10: 10%) [default: 0.1].",
    ),
    "outlier_min_nodes": (
        int,
        "N",
        "Compare a rail's metric only across at least N nodes [default: 5].",
    ),
    "rate_floor_per_hour": (
        float,
        "R",
        "An error-counter rate is an outlier only above R increases per hour [default: 1.0].",
    ),
    "switch_min_nodes": (
        int,
        "K",
        "A switch is the suspect when K or more nodes fail on its ports [default: 3].",
    ),
    "switch_min_share": (
        float,
        "X",
        "... or when at least 2 nodes fail on it and their failing ports are this share of the "
        "node ports cabled to it [default: 0.5].",
    ),
    "cable_lot_min_ports": (
        int,
        "N",
        "List a cable part number and lot when N or more of its cables have physical-layer "
        "findings (phy.*) [default: 2].",
    ),
}


def _settings_options(command):
    for name in reversed(list(_SETTINGS)):
        kind, metavar, text = _SETTINGS[name]
        option = "--" + name.replace("_", "-")
        command = click.option(option, name, type=kind, metavar=metavar, help=text)(command)
    return command


@click.command("report")
@click.argument("inputs", nargs=-1, required=True, metavar="DIR|REPORT.json|BUNDLE...")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Write the fleet report to FILE (format from --format or the extension: .html, .json, "
    "else text), atomically; the verdict line is still printed (not with -q).",
)
@click.option("--format", "fmt", type=click.Choice(FORMATS), help="Output format [default: text].")
@click.option("--json", "as_json", is_flag=True, help="The JSON fleet report (--format json).")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing; the exit code tells.")
@click.option(
    "--expect-nodes",
    metavar="HOSTLIST",
    help="The nodes that should have a report (gpu[001-128],login1): those without one are "
    "missing, and the fleet is CRITICAL. A report answers for a node when its file is "
    "<node>.json or its name holds the host it says as a word (gpu001-20261127.json, "
    "ibdiag-gpu001-<time>.tar.gz).",
)
@click.option(
    "--accept-altered",
    is_flag=True,
    help="Read bundles whose files differ from their manifest's sha256 (refused otherwise: a "
    "read problem); their nodes are then noted as such.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    metavar="N",
    help="Processes parsing reports [default: the CPUs this may use, at most 8].",
)
@_settings_options
def report_command(
    inputs: Sequence[str],
    output: Optional[str],
    fmt: Optional[str],
    as_json: bool,
    quiet: bool,
    expect_nodes: Optional[str],
    accept_altered: bool,
    workers: Optional[int],
    **given: Any,
) -> int:
    """Read per-node reports (ibdiag check --json, fleet run's DIR/<node>.json) and support
    bundles - files, or directories of them - and answer for the fleet: which nodes are sick
    and why (grouped), which are slower than their rail's peers, what drifted, which switch the
    failing nodes share. Exit code: the fleet's verdict (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN).

    A directory is read non-recursively: its *.json reports, bundle tarballs and bundle
    directories. An input that gives no node is one line under "read problems". Without
    --expect-nodes, a directory written by 'ibdiag fleet run' expects the nodes that run was
    asked for (its fleet-run.json), so a node that never answered is named missing; only its
    own DIR/<node>.json answers for a node then."""
    settings = _settings(given)
    expected = _expected(expect_nodes)
    form = format_for(output, fmt, as_json)
    from ibdiag.fleet.analyze import analyze
    from ibdiag.fleet.read import RunExpectations, fleet_run_expectations, read_fleet

    now = clock()
    run = RunExpectations(None, {}, [])
    if expected is None:  # a directory fleet run wrote: the nodes it was asked for
        run = fleet_run_expectations(inputs)
        expected = run.nodes

    read = read_fleet(inputs, workers=workers, accept_altered=accept_altered, now=now)
    report = analyze(
        read.nodes,
        settings,
        expected=expected,
        read_problems=run.problems + read.problems,
        duplicates=read.duplicates,
        not_run=run.not_run,
        conflicts=read.conflicts,
        expectations_unread=bool(run.problems),
        now=now,
        run_files=expect_nodes is None,
    )
    if read.notes:
        report = report.model_copy(update={"read_notes": [*read.notes, *report.read_notes]})
    if write_or_print(render(report, form), output, quiet) and not quiet:
        from ibdiag.fleet.render_text import verdict_line

        click.echo(verdict_line(report))
    return report.exit_code


def clock() -> datetime:
    """The fleet report's own time: its ``generated_at``, and the time after which no node's
    ``collected_at`` is believed (tests replace it)."""
    return datetime.now(timezone.utc)


def render(report, form: str) -> str:
    """The report in ``form`` (text, json or html); html's renderer is imported only then."""
    if form == "json":
        return report.model_dump_json(indent=2) + "\n"
    if form == "html":
        from ibdiag.fleet.render_html import render_html

        return render_html(report)
    from ibdiag.fleet.render_text import render_text

    return render_text(report)


def _settings(given: Dict[str, Any]):
    """The FleetSettings of the options given (the others: its defaults); a value it refuses
    is one line naming the option, exit 3."""
    from pydantic import ValidationError

    from ibdiag.fleet.report import FleetSettings

    values = {name: value for name, value in given.items() if value is not None}
    try:
        return FleetSettings(**values)
    except ValidationError as exc:
        error = exc.errors()[0]
        name = str(error["loc"][0]) if error.get("loc") else "?"
        raise UsageFailure(
            f"--{name.replace('_', '-')} {values.get(name)!r}: {error['msg']}"
        ) from None


def _expected(hostlist: Optional[str]) -> Optional[Sequence[str]]:
    """The hosts ``--expect-nodes`` names (None when not given); one that cannot be expanded
    or names no host is exit 3."""
    if hostlist is None:
        return None
    from ibdiag.hostlist import expand

    try:
        hosts = expand(hostlist)
    except ValueError as exc:  # HostlistError, or a pattern it did not foresee
        raise UsageFailure(f"--expect-nodes: {exc}") from None
    if not hosts:
        raise UsageFailure("--expect-nodes names no host")
    from ibdiag.fleet.node import NODE_NAME

    odd = [host for host in hosts if not NODE_NAME.fullmatch(host)]
    if odd:
        raise UsageFailure(f"--expect-nodes: {odd[0][:64]!r} cannot be a node name")
    return list(dict.fromkeys(hosts))
