"""``ibdiag export`` and ``ibdiag serve``: the check as Prometheus metrics, written for
node_exporter's textfile collector or answered over HTTP (``ibdiag.render.prometheus``,
``ibdiag.exporter``). Both exit 0 once done (a textfile written, a server stopped); the node's
health is in the metrics.
"""

from __future__ import annotations

from typing import Optional

import click

from ibdiag.cli.options import (
    UsageFailure,
    command_limits,
    compat_option,
    level_option,
    node_options,
    pipeline_options,
    seconds_option,
)
from ibdiag.cli.output import write_file

_LEVELS_HELP = (
    "quick: sysfs only, no command; standard: also the read-only commands under --deadline "
    "(perfquery, ethtool -S, ...), the far end of each cable (ibdiag_partner_*) included"
)


def _unwritable_default(path: str, named: Optional[str]) -> bool:
    """Whether ``path`` is the default store and this user may not write it (an exporter run as
    its own user): then no monitor, and each scrape's history.store skips naming it."""
    from ibdiag.history import DEFAULT_PATH
    from ibdiag.history.record import not_writable

    return not named and path == DEFAULT_PATH and not_writable(path) is not None


def _pipeline(settings, history_sampled: bool = False):
    """The grading run ``settings`` name (thresholds and checks settled once)."""
    from ibdiag.pipeline import Pipeline

    return Pipeline.prepare(pipeline_options(settings, history_sampled=history_sampled))


def _reporter(pipeline):
    """A function making a fresh report of the node ``pipeline`` reads at its level, and how
    long it took: the node re-read (and, at level standard, its commands re-run) every time."""
    import time

    def make_report():
        start = time.monotonic()
        report = pipeline.run()
        return report, time.monotonic() - start

    return make_report


@click.command("export")
@level_option(
    f"{_LEVELS_HELP}; full: also the traffic tests (ib_write_bw loopback: "
    "ibdiag_port_loopback_bandwidth_bytes_per_second; minutes) - from a maintenance job, "
    "never a frequent timer."
)
@command_limits
@node_options
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

    report, duration = _reporter(_pipeline(settings))()
    options = RenderOptions(duration_s=duration, compat=compat)
    # atomically, mode 0644: node_exporter's textfile collector never reads half a file
    write_file(textfile, prometheus.render(report, options), mode=0o644)
    return 0


def _listen_address(ctx, param, value: str) -> str:
    """--listen must be HOST:PORT ([IPv6]:PORT) with a port 1-65535: checked before binding."""
    from ibdiag.exporter import parse_listen

    try:
        parse_listen(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from exc
    return value


@click.command("serve")
@level_option(f"{_LEVELS_HELP}.", highest="standard")
@command_limits
@node_options
@click.option(
    "--listen",
    default="127.0.0.1:9477",
    show_default=True,
    metavar="ADDR:PORT",
    callback=_listen_address,
    help="Where to answer GET /metrics ([::1]:PORT for IPv6); every scrape re-reads the node "
    "at --level (quick: sysfs, no command).",
)
@seconds_option(
    "--scrape-timeout",
    default=10.0,
    help="Answer a scrape within this long (or Prometheus's own scrape timeout less 0.5 s, if "
    "shorter): past it, with the last complete collection and ibdiag_scrape_timeout 1.",
)
@seconds_option(
    "--client-timeout",
    default=10.0,
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
@seconds_option(
    "--max-age",
    minimum=0,
    default=0.0,
    help="Answer a scrape at once from the last collection while it is younger than this (the "
    "next one starts in the background past half that): a scrape then costs the HTTP answer "
    "only. 0: every scrape collects and waits.",
)
@seconds_option(
    "--interval",
    minimum=0.05,
    default=1.0,
    help="With a history store, sample every port's state and link counters this often in the "
    "background (ibdiag watch's monitor), so no flap falls between scrapes.",
)
@compat_option
def serve_command(
    listen, scrape_timeout, client_timeout, max_connections, max_age, interval, compat, **settings
) -> int:
    """Serve the check (level quick unless --level standard) as Prometheus metrics over HTTP.

    Concurrent scrapes share one collection; a scrape answers within --scrape-timeout even if
    sysfs hangs. With a history store (default /var/lib/ibdiag/history.db on this machine's
    /sys) the ports are sampled every --interval in the background into it, and a scrape reads
    the window. Stops on SIGTERM, SIGINT or SIGHUP (exit 0).
    """
    from ibdiag import exporter
    from ibdiag.history import store_path

    path = store_path(
        settings["history_path"], settings["no_history"], sysfs_root=settings["sysfs_root"]
    )
    sampled = path is not None and not _unwritable_default(path, settings["history_path"])
    pipeline = _pipeline(settings, history_sampled=sampled)
    sampler = None
    if sampled and path is not None:
        from ibdiag.cli.watch import BackgroundMonitor

        thresholds = pipeline.thresholds  # the sampler leaves the ignored HCAs alone too
        ignored = thresholds.ignores if thresholds.ignore_hcas else None
        sampler = BackgroundMonitor(
            path, interval, settings["sysfs_root"], settings["procfs_root"], ignored
        )
    make_report = _reporter(pipeline)
    if sampler is not None:
        sampler.start()
    try:
        exporter.serve(
            listen,
            make_report,
            compat,
            scrape_timeout=scrape_timeout,
            client_timeout=client_timeout,
            max_connections=max_connections,
            max_age=max_age,
            log=lambda line: click.echo(f"ibdiag serve: {line}", err=True),
        )
    except OSError as exc:
        raise UsageFailure(f"cannot listen on {listen}: {exc.strerror or exc}") from exc
    finally:
        if sampler is not None:
            sampler.stop()
    return 0
