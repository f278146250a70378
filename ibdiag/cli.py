"""The ``ibdiag`` command line: with ``ibdiag.slurm.commands``, the only code that prints or
exits (the options they share are in ``ibdiag.cli_options``).

Exit codes follow the Nagios plugin convention: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN. A usage
or configuration error is one line on stderr and exit 3 (not click's default 2), so a Slurm
prolog or NHC never mistakes a typo for a sick node's "critical".
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Optional, Sequence, Tuple

import click

from ibdiag import __version__
from ibdiag.cli_options import (
    EXIT_UNKNOWN,
    UsageFailure,
    checks_dir_option,
    command_limits,
    compat_option,
    effective_config,
    expectation_options,
    output_options,
    pipeline_options,
    prepare,
    registry_for,
    source_options,
)
from ibdiag.render.inert import inert


class IbdiagGroup(click.Group):
    """Maps every way of failing to one stderr line and the Nagios exit code 3."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as exc:
            hint = f" (try '{exc.ctx.command_path} --help')" if exc.ctx else ""
            click.echo(f"ibdiag: error: {inert(exc.format_message())}{hint}", err=True)
            code = EXIT_UNKNOWN
        except click.ClickException as exc:  # a path or a bundle's content may be in it
            click.echo(f"ibdiag: error: {inert(exc.format_message())}", err=True)
            code = EXIT_UNKNOWN
        except click.Abort:
            click.echo("ibdiag: interrupted", err=True)
            code = EXIT_UNKNOWN
        except Exception as exc:
            if os.environ.get("IBDIAG_DEBUG"):
                raise
            click.echo(
                f"ibdiag: internal error: {type(exc).__name__}: {inert(exc)} "
                "(set IBDIAG_DEBUG=1 for a traceback)",
                err=True,
            )
            code = EXIT_UNKNOWN
        code = code if isinstance(code, int) else 0
        if standalone_mode:
            sys.exit(code)
        return code


def _format_for(output: Optional[str], fmt: Optional[str], as_json: bool) -> str:
    if as_json:
        return "json"
    if fmt:
        return fmt
    extension = os.path.splitext(output or "")[1].lower()
    return {".json": "json", ".html": "html", ".htm": "html"}.get(extension, "text")


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
        return EXIT_UNKNOWN
    return None


@cli.command("check")
@click.option(
    "--level",
    type=click.Choice(["quick", "standard", "full"]),
    default="quick",
    show_default=True,
    help="quick: files only, runs no command (prolog, NHC); standard: also read-only commands "
    "(perfquery, ethtool -S, dmesg, ibstat, ibv_devinfo, nvidia-smi topo) under --deadline; "
    "full: also tests that move traffic (ib_write_bw loopback, nccl-tests; minutes).",
)
@command_limits
@source_options
@checks_dir_option
@expectation_options
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
@click.option(
    "--read-timeout",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
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
    options = pipeline_options(settings)
    if from_bundle:
        if state_path:
            raise click.UsageError("--state cannot be used with --from (a bundle is read-only)")
        report, registry = _grade_bundle(from_bundle, options, baseline_path, accept_altered)
        held_checks = _held_checks(registry, report) if reason_only else None
        return _emit(report, fmt, as_json, output, quiet, verbose, held_checks)
    if accept_altered:
        raise click.UsageError("--accept-altered applies to a bundle: give it with --from")
    pipeline = prepare(options)
    if baseline_path and state_path:
        raise click.UsageError("give --baseline or --state, not both")
    if state_path:  # the previous run's state, when there is one (or a link to one); replaced
        # before grading, so a state that cannot be saved is a result, not a stderr line
        baseline_path = state_path if os.path.exists(state_path) else None
    with _status_line() as status:
        report = pipeline.run(baseline_path, state_path, progress=status.say)
    held_checks = _held_checks(pipeline.registry, report) if reason_only else None
    return _emit(report, fmt, as_json, output, quiet, verbose, held_checks)


def _held_checks(registry, report):
    """The checks of the report's level whose failure is a held drain (``ibdiag.held``)."""
    from ibdiag import held

    return held.change_checks(registry, report.level)


def _status_line():
    """What level full is running, on stderr when it is a terminal (nothing otherwise)."""
    from ibdiag.render.progress import StatusLine

    return StatusLine(sys.stderr)


def _grade_bundle(path, options, baseline_path=None, accept_altered=False):
    """Replay a bundle's raw files and outputs and grade them with today's checks.

    Thresholds: the bundle's own, unless --profile, --config or expectation flags are given
    (then those, as for a live run). Counters: against ``baseline_path`` when given, else
    against the baseline the bundle stores (``collect --baseline``/``--state``), as the live
    run graded them. Missing and unlisted files are warned about on stderr
    (the first few, then how many more); a bundle with altered files is refused unless
    ``accept_altered``, and then the Report names them. A bundle that cannot be used at all
    is a one-line error, exit 3. Returns the report and the checks that graded it.
    """
    from pydantic import ValidationError

    from ibdiag.bundle.manifest import describe_validation_error
    from ibdiag.pipeline import Pipeline
    from ibdiag.thresholds import Thresholds

    registry = registry_for(options.checks_dirs)
    altered, stored_baseline = [], None
    if _is_saved_json(path):
        snapshot, level, recorded = _load_saved_json(path)
    else:
        replayed = _replay_bundle(path, accept_altered)
        snapshot, level, recorded, altered, stored_baseline = replayed
    if options.expectations_given or recorded is None:
        thresholds = effective_config(options).thresholds
    else:
        try:
            thresholds = Thresholds.model_validate(recorded)
        except ValidationError as exc:
            raise UsageFailure(
                f"{path}: the thresholds it records are not valid: thresholds."
                f"{describe_validation_error(exc)} (grade it with --profile or --config)"
            ) from None
    pipeline = Pipeline(options._replace(level=level), thresholds, registry)
    report = pipeline.grade_snapshot(snapshot, baseline_path, baseline=stored_baseline)
    if altered:
        report = report.model_copy(update={"altered_files": altered})
    return report, registry


def _replay_bundle(path, accept_altered=False):
    """(snapshot, level, thresholds, altered files, the stored baseline or None) of a bundle."""
    from ibdiag.bundle.opener import BundleError, open_bundle
    from ibdiag.bundle.replay import replay, replay_baseline

    try:
        with open_bundle(path, accept_altered=accept_altered) as opened:
            for warning in opened.warnings():
                click.echo(f"ibdiag: warning: {inert(path)}: {inert(warning)}", err=True)
            level, thresholds = opened.level or "quick", opened.thresholds
            altered = list(opened.altered)
            return replay(opened), level, thresholds, altered, replay_baseline(opened)
    except BundleError as exc:  # its message names the bundle
        raise UsageFailure(str(exc)) from exc


def _is_saved_json(path: str) -> bool:
    """A report or snapshot written as JSON (check -o F.json, ibdiag snapshot), not a bundle."""
    if not os.path.isfile(path):
        return False
    with open(path, "rb") as handle:
        return handle.read(64).lstrip().startswith(b"{")


def _load_saved_json(path: str):
    """(snapshot, level, thresholds) of a saved report, or of a bare snapshot (quick)."""
    import json

    from ibdiag.counters import baseline
    from ibdiag.registry import LEVELS

    snapshot, problem = baseline.load(path)
    if problem is not None:
        raise UsageFailure(problem)
    with open(path, "rb") as handle:
        data = json.loads(handle.read())
    if "results" in data:  # a report: grade as it was graded, unless told otherwise
        level = data.get("level") or "quick"
        if level not in LEVELS:
            shown = inert(repr(level)[:40])
            raise UsageFailure(f"{path}: level {shown} is not one of {', '.join(LEVELS)}")
        return snapshot, level, data.get("thresholds")
    return snapshot, "standard" if snapshot.commands else "quick", None


def _emit(report, fmt, as_json, output, quiet, verbose, held_checks=None) -> int:
    """Print or write the report in the asked-for format; the verdict's exit code. With
    ``held_checks`` (``--reason``) only the drain reason, held when one of them failed."""
    if held_checks is not None:
        from ibdiag.held import report_reason

        line = report_reason(report, held_checks)
        if line:
            click.echo(line)
        return report.verdict.exit_code
    from ibdiag.render.options import RenderOptions

    fmt = _format_for(output, fmt, as_json)
    color = sys.stdout.isatty() and "NO_COLOR" not in os.environ and not output
    text = _render(report, fmt, RenderOptions(color=color, verbose=verbose))
    if output and output != "-":
        from ibdiag.write_files import write_output

        try:
            write_output(output, text)
        except OSError as exc:
            raise UsageFailure(f"cannot write {output}: {exc.strerror}") from exc
    elif not quiet:
        click.echo(text, nl=False)
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


@cli.command("collect")
@source_options
@click.option(
    "--level",
    type=click.Choice(["quick", "standard", "full"]),
    default="standard",
    show_default=True,
    help="What to gather: standard adds perfquery, ethtool -S, the kernel log, ibstat, "
    "nvidia-smi topo; full adds ib_write_bw loopback, nccl-tests and NCCL Inspector dumps.",
)
@command_limits
@checks_dir_option
@expectation_options
@click.option("--tarball", is_flag=True, help="Write one .tar.gz (0600) and its .sha256.")
@click.option(
    "-o",
    "--output-dir",
    type=click.Path(file_okay=False),
    default=".",
    show_default=True,
    help="Where the bundle goes.",
)
@click.option(
    "--redact",
    metavar="KINDS",
    help="Replace hostnames, IP addresses and GUIDs consistently in every file "
    "(hostnames,ips,guids or all); the mapping is written beside the bundle, not in it.",
)
@click.option(
    "--baseline",
    "baseline_path",
    metavar="FILE",
    help="Grade counters on their change since this snapshot (ibdiag snapshot -o FILE), e.g. "
    "the one taken before a job; it goes into the bundle, so 'ibdiag report' re-grades the "
    "same way. A file that cannot be used is an error (exit 3) before anything is collected.",
)
@click.option(
    "--state",
    "state_path",
    metavar="FILE",
    help="Use FILE (the previous run's snapshot) as the baseline when present, then replace "
    "it with this run's, as 'ibdiag check --state' does.",
)
@click.option(
    "--exit-verdict",
    is_flag=True,
    help="Once the bundle is written, exit with the verdict's code (0 OK, 1 WARNING, "
    "2 CRITICAL) instead of 0.",
)
def collect_command(
    tarball, output_dir, redact, baseline_path, state_path, exit_verdict, **settings
) -> int:
    """Gather everything for a support ticket into one bundle, graded, with an HTML report.

    Exits 0 once the bundle is written, whatever the verdict (the first line says it); with
    --exit-verdict, with the verdict's code. 3: nothing could be written, or a bad setting.
    """
    from ibdiag.bundle.write import write_bundle
    from ibdiag.sources.sysfs import Recording

    redact_kinds = _redact_kinds(redact)
    pipeline = prepare(pipeline_options(settings))
    baseline = _collect_baseline(baseline_path, state_path)
    thresholds = pipeline.thresholds
    recording = Recording()
    with _status_line() as status:
        report = pipeline.run(
            None, state_path, baseline=baseline, recording=recording, progress=status.say
        )
    snapshot = report.snapshot
    redactor = None
    if redact_kinds:
        from ibdiag.bundle.redact import Redactor
        from ibdiag.hostlist import named_in_launcher_args

        # and the other nodes a cross-node nccl-tests run names (argv, rank lines)
        peers = named_in_launcher_args(thresholds.nccl_launcher_args)
        redactor = Redactor(kinds=redact_kinds, hostnames=[snapshot.host or "", *peers])
    from ibdiag.write_files import remove_stale_temps

    remove_stale_temps(output_dir)  # what a SIGKILLed collect left here, once old enough
    try:
        path = write_bundle(
            snapshot,
            report,
            recording,
            output_dir,
            tarball,
            redactor=redactor,
            baseline=baseline.snapshot if baseline is not None else None,
        )
    except OSError as exc:
        raise UsageFailure(f"cannot write the bundle in {output_dir}: {exc}") from exc
    from ibdiag.render import text as renderer

    click.echo(renderer.verdict_line(report))
    click.echo(f"bundle: {path}")
    if redactor is not None:
        _write_redaction_map(path, redactor)
    return report.verdict.exit_code if exit_verdict else 0


def _collect_baseline(baseline_path: Optional[str], state_path: Optional[str]):
    """The baseline ``collect`` grades against and stores (``ibdiag.counters.baseline.Loaded``),
    or None.

    --baseline: a file that cannot be used, or too large for a bundle, is a usage error before
    anything is collected (a bundle for a ticket that silently lacks the change it was taken to
    show helps nobody). --state: as ``check --state``: absent on the first run; one that cannot
    be used is a warning of the bundle's report (counters.baseline) and is replaced.
    """
    if baseline_path and state_path:
        raise click.UsageError("give --baseline or --state, not both")
    from ibdiag.counters import baseline

    if baseline_path:
        loaded = baseline.load(baseline_path)
        if loaded.problem is not None:
            raise UsageFailure(f"baseline {loaded.problem}")
    elif state_path and os.path.exists(state_path):
        loaded = baseline.load(state_path)
    else:
        return None
    if loaded.snapshot is not None:
        from ibdiag.bundle.limits import KEPT_AREAS, size_text

        most = next(area[1] for area in KEPT_AREAS if area[0] == "baseline/")
        size = len(loaded.snapshot.model_dump_json(indent=1).encode("utf-8", "surrogatepass"))
        if size > most:
            raise UsageFailure(
                f"baseline {baseline_path or state_path}: its snapshot is {size} bytes; a "
                f"bundle holds one of at most {size_text(most)}"
            )
    return loaded


_REDACT_KINDS = ("hostnames", "ips", "guids", "macs")


def _redact_kinds(value: Optional[str]) -> Tuple[str, ...]:
    """--redact all|hostnames,ips,guids[,macs] -> the kinds (checked before collecting)."""
    if not value:
        return ()
    kinds = ("hostnames", "ips", "guids") if value == "all" else tuple(value.split(","))
    unknown = [kind for kind in kinds if kind not in _REDACT_KINDS]
    if unknown:
        raise click.BadParameter(
            f"unknown kind {', '.join(unknown)}; use all or {', '.join(_REDACT_KINDS)}",
            param_hint="--redact",
        )
    return kinds


def _write_redaction_map(bundle_path: str, redactor) -> None:
    """original -> replacement, 0600 beside the bundle: for the admin, never for the ticket."""
    import json

    from ibdiag.write_files import write_output

    base = bundle_path[: -len(".tar.gz")] if bundle_path.endswith(".tar.gz") else bundle_path
    path = f"{base}.redaction-map.json"
    write_output(path, json.dumps(redactor.table(), indent=1) + "\n", mode=0o600)
    click.echo(f"redaction map (keep it here, do not attach it): {path}")


@cli.command("report")
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
    report, _ = _grade_bundle(bundle, pipeline_options(settings), accept_altered=accept_altered)
    return _emit(report, fmt, as_json, output, quiet, verbose)


_metrics_level_option = click.option(
    "--level",
    type=click.Choice(["quick", "standard"]),
    default="quick",
    show_default=True,
    help="quick: sysfs only, no command; standard: also the read-only commands under "
    "--deadline (perfquery, ethtool -S, ...), the far end of each cable (ibdiag_partner_*) "
    "included.",
)


_export_level_option = click.option(
    "--level",
    type=click.Choice(["quick", "standard", "full"]),
    default="quick",
    show_default=True,
    help="quick: sysfs only, no command; standard: also the read-only commands under "
    "--deadline (perfquery, ethtool -S, ...), the far end of each cable (ibdiag_partner_*) "
    "included; full: also the traffic tests (ib_write_bw loopback: "
    "ibdiag_port_loopback_bandwidth_bytes_per_second; minutes) - from a maintenance job, "
    "never a frequent timer.",
)


def _reporter(settings):
    """A function making a fresh report of the node ``settings`` name at their level, and how
    long it took: the node re-read (and, at level standard, its commands re-run) every time;
    thresholds and checks settled once."""
    import time

    pipeline = prepare(pipeline_options(settings))

    def make_report():
        start = time.monotonic()
        report = pipeline.run()
        return report, time.monotonic() - start

    return make_report


@cli.command("export")
@_export_level_option
@command_limits
@source_options
@checks_dir_option
@expectation_options
@click.option(
    "--textfile",
    metavar="PATH",
    required=True,
    help="Write Prometheus metrics to PATH atomically, e.g. into node_exporter's "
    "--collector.textfile.directory as ibdiag.prom.",
)
@compat_option
def export_command(textfile, compat, **settings) -> int:
    """Write the check's counters, gauges and results as Prometheus metrics (level quick
    unless --level standard or full)."""
    from ibdiag.render import prometheus
    from ibdiag.render.options import RenderOptions
    from ibdiag.write_files import write_output

    report, duration = _reporter(settings)()
    options = RenderOptions(duration_s=duration, compat=compat)
    try:  # atomically, mode 0644: node_exporter's textfile collector never reads half a file
        write_output(textfile, prometheus.render(report, options), mode=0o644)
    except OSError as exc:
        raise UsageFailure(f"cannot write {textfile}: {exc.strerror or exc}") from exc
    return 0


def _listen_address(ctx, param, value: str) -> str:
    """--listen must be HOST:PORT ([IPv6]:PORT) with a port 1-65535: checked before binding."""
    from ibdiag.exporter import parse_listen

    try:
        parse_listen(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from exc
    return value


@cli.command("serve")
@_metrics_level_option
@command_limits
@source_options
@checks_dir_option
@expectation_options
@click.option(
    "--listen",
    default="127.0.0.1:9477",
    show_default=True,
    metavar="ADDR:PORT",
    callback=_listen_address,
    help="Where to answer GET /metrics ([::1]:PORT for IPv6); every scrape re-reads the node "
    "at --level (quick: sysfs, no command).",
)
@click.option(
    "--scrape-timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="Answer a scrape within this long (or Prometheus's own scrape timeout less 0.5 s, if "
    "shorter): past it, with the last complete collection and ibdiag_scrape_timeout 1.",
)
@click.option(
    "--client-timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="Drop a client that has not sent its whole request, or not taken the answer, within "
    "this long.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    metavar="N",
    help="Connections at once; a new one beyond this closes the oldest still sending its request.",
)
@compat_option
def serve_command(
    listen, scrape_timeout, client_timeout, max_connections, compat, **settings
) -> int:
    """Serve the check (level quick unless --level standard) as Prometheus metrics over HTTP.

    Concurrent scrapes share one collection; a scrape answers within --scrape-timeout even if
    sysfs hangs. Stops on SIGTERM, SIGINT or SIGHUP (exit 0).
    """
    from ibdiag import exporter

    make_report = _reporter(settings)
    try:
        exporter.serve(
            listen,
            make_report,
            compat,
            scrape_timeout=scrape_timeout,
            client_timeout=client_timeout,
            max_connections=max_connections,
            log=lambda line: click.echo(f"ibdiag serve: {line}", err=True),
        )
    except OSError as exc:
        raise UsageFailure(f"cannot listen on {listen}: {exc.strerror or exc}") from exc
    return 0


@cli.command("snapshot")
@source_options
@click.option(
    "--level",
    type=click.Choice(["quick", "standard"]),
    default="quick",
    show_default=True,
    help="standard also records perfquery and ethtool -S counters and the kernel log.",
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
    from ibdiag.sources import SOURCE_LEVELS

    upto = LEVELS.index(level)
    needs = {source for source, at in SOURCE_LEVELS.items() if LEVELS.index(at) <= upto}
    snapshot = collect(
        sysfs_root, procfs_root, needs, {"timeout_s": command_timeout, "deadline_s": deadline}
    )
    if output is None or output == "-":
        click.echo(snapshot.model_dump_json(indent=1))
        return 0
    from ibdiag.counters import baseline

    try:
        baseline.save(output, snapshot)
    except OSError as exc:
        raise UsageFailure(f"cannot write {output}: {exc.strerror}") from exc
    return 0


@cli.command("counters")
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


@cli.command("checks")
@checks_dir_option
def list_checks(checks_dirs) -> int:
    """List every check: id, level and title."""
    registry = registry_for(checks_dirs)
    width = max((len(spec.id) for spec in registry), default=10)
    for spec in registry:
        click.echo(f"{spec.id:{width}}  {spec.level:8}  {spec.title}")
    return 0


@cli.command("explain")
@click.argument("check_id")
@checks_dir_option
def explain(check_id, checks_dirs) -> int:
    """Say what healthy looks like for CHECK_ID, why it matters and what to do."""
    from ibdiag.counters.catalogue import catalogue

    registry = registry_for(checks_dirs)
    spec = registry.get(check_id)
    if spec is None and check_id in catalogue():
        click.echo(_explain_counter(catalogue()[check_id]))
        return 0
    if spec is None:
        known = ", ".join(sorted(s.id for s in registry))
        raise UsageFailure(f"no check or counter {check_id!r}; known checks: {known}")
    click.echo(f"{spec.id} - {spec.title}")
    click.echo(f"level: {spec.level}; reads: {', '.join(sorted(spec.needs))}; from: {spec.origin}")
    click.echo()
    click.echo(spec.doc)
    return 0


def _explain_counter(info) -> str:
    rule = [f"any increase: {info.on_increase}"]
    if info.rate_warn_per_hour is not None:
        rule.append(f"warn above {info.rate_warn_per_hour:g}/hour")
    if info.rate_fail_per_hour is not None:
        rule.append(f"fail above {info.rate_fail_per_hour:g}/hour")
    width = f"{info.width}-bit (saturates at {info.saturated_value})" if info.width else "not fixed"
    unit = "4-byte words (bytes = value x 4)" if info.unit == "words" else info.unit
    lines = [
        f"{info.name} - {info.category} counter, in {info.directory}/",
        "",
        info.meaning,
        "",
        f"width: {width}; unit: {unit}",
        f"default rule: {'; '.join(rule)}" + (f" - {info.reason}" if info.reason else ""),
    ]
    if info.action:
        lines.append(f"what to do: {info.action}")
    return "\n".join(lines)


@cli.group("config")
def config_group() -> None:
    """Profiles and the effective configuration."""


@config_group.command("show")
@expectation_options
def config_show(**settings) -> int:
    """Print the effective configuration (TOML) and where each value came from."""
    from ibdiag.config import render_show

    click.echo(render_show(effective_config(pipeline_options(settings))))
    return 0


@config_group.command("profiles")
def config_profiles() -> int:
    """List the shipped profiles with their descriptions."""
    from ibdiag.config import describe_profiles

    for name, description in describe_profiles():
        click.echo(f"{name:14}  {description}")
    return 0


@cli.command("schema")
@click.argument("name", type=click.Choice(["report", "manifest", "fleet"]), default="report")
@click.option("-o", "--output", "output", metavar="FILE", help="Write it to FILE (- for stdout).")
def schema(name, output) -> int:
    """Print the JSON Schema of the report that --json writes, (NAME manifest) of a support
    bundle's manifest.json, or (NAME fleet) of the fleet report that 'ibdiag fleet report
    --json' writes. The same files are committed under schema/ in the source tree."""
    from ibdiag.schemas import schema_text

    text = schema_text(name)
    if output and output != "-":
        from ibdiag.write_files import write_output

        try:
            write_output(output, text)
        except OSError as exc:
            raise UsageFailure(f"cannot write {output}: {exc.strerror}") from exc
    else:
        click.echo(text, nl=False)
    return 0


def _add_slurm_commands() -> None:
    """`ibdiag slurm ...` lives in its own module (it shares ``ibdiag.cli_options``)."""
    from ibdiag.slurm.commands import slurm_group

    cli.add_command(slurm_group)


_add_slurm_commands()


def _add_fleet_commands() -> None:
    """`ibdiag fleet ...` (ibdiag.fleet): click only until a fleet command runs."""
    from ibdiag.fleet.commands import fleet_group

    cli.add_command(fleet_group)


_add_fleet_commands()


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
