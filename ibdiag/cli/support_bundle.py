"""``ibdiag collect``: everything a support ticket needs in one bundle, graded, with its HTML
report (``ibdiag.bundle``); optionally redacted, with the mapping kept beside it for the admin.
"""

from __future__ import annotations

import os
from typing import List, Optional, Tuple

import click

from ibdiag.cli.options import (
    UsageFailure,
    command_limits,
    level_option,
    node_options,
    pipeline_options,
)
from ibdiag.cli.output import status_line


@click.command("collect")
@node_options
@level_option(
    "What to gather: quick reads files only (sysfs, procfs, the catalogue's files); standard "
    "adds perfquery, ethtool -S, the kernel log, ibstat, nvidia-smi topo and the catalogue's "
    "commands (--list); full adds ib_write_bw loopback, nccl-tests and NCCL Inspector dumps.",
    default="standard",
)
@command_limits
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
    help="Replace identifying values consistently in every file and file name: a comma list "
    "of hostnames, ips, guids, macs, serials (board, GPU, cable serials, UUIDs), users (home "
    "directories, limits.conf, the invoking user), paths (the kernel command line's), or all "
    "(every one of them); the mapping is written beside the bundle, not in it.",
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
    "--rootfs",
    "rootfs",
    type=click.Path(exists=True, file_okay=False, dir_okay=True),
    default="/",
    show_default=True,
    help="Where the node's root file system is (the host's, mounted in a container): the "
    "RDMA, SM, NCCL and limits configuration files under its /etc go into the bundle.",
)
@click.option(
    "--list",
    "list_items",
    is_flag=True,
    help="Print what a bundle collects (the catalogue: each command and file, why a vendor "
    "asks for it, and what ibdiag never runs) and exit.",
)
@click.option(
    "--exit-verdict",
    is_flag=True,
    help="Once the bundle is written, exit with the verdict's code (0 OK, 1 WARNING, "
    "2 CRITICAL) instead of 0.",
)
def collect_command(
    tarball, output_dir, redact, baseline_path, state_path, list_items, exit_verdict, **settings
) -> int:
    """Gather everything for a support ticket into one bundle, graded, with an HTML report:
    what the checks read, and what NVIDIA's sysinfo-snapshot and sos report gather for a
    vendor (--list prints the catalogue), each command under --command-timeout and all of
    them inside --deadline.

    Exits 0 once the bundle is written, whatever the verdict (the first line says it); with
    --exit-verdict, with the verdict's code. 3: nothing could be written, or a bad setting.
    """
    if list_items:
        from ibdiag.families.support.catalogue import load

        click.echo(load().text(), nl=False)
        return 0
    from ibdiag.bundle.write import write_bundle
    from ibdiag.pipeline import Pipeline
    from ibdiag.sources.sysfs import Recording

    redact_kinds = _redact_kinds(redact)
    pipeline = Pipeline.prepare(pipeline_options(settings, support=True))
    baseline = _collect_baseline(baseline_path, state_path)
    thresholds = pipeline.thresholds
    recording = Recording()
    with status_line() as status:
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
        redactor = Redactor(
            kinds=redact_kinds, hostnames=[snapshot.host or "", *peers], users=_invoking_users()
        )
        _learn(redactor, snapshot, recording)
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


# ibdiag.bundle.redact.KINDS (not imported: redaction loads only when asked for); "all" is
# every one of them, each safe to turn on (tests/bundle/test_redact_support.py holds them equal)
_REDACT_KINDS = ("hostnames", "ips", "guids", "macs", "serials", "users", "paths")


def _redact_kinds(value: Optional[str]) -> Tuple[str, ...]:
    """--redact all|KIND[,KIND...] -> the kinds (checked before collecting)."""
    if not value:
        return ()
    kinds = _REDACT_KINDS if value == "all" else tuple(value.split(","))
    unknown = [kind for kind in kinds if kind not in _REDACT_KINDS]
    if unknown:
        raise click.BadParameter(
            f"unknown kind {', '.join(unknown)}; use all or {', '.join(_REDACT_KINDS)}",
            param_hint="--redact",
        )
    return kinds


def _invoking_users() -> List[str]:
    """Who runs collect: sudo's invoking user and the login name (the Redactor skips root)."""
    import getpass

    names = [os.environ.get("SUDO_USER") or ""]
    try:
        names.append(getpass.getuser())
    except (KeyError, OSError, ImportError):  # no name for this uid (a container)
        pass
    return [name for name in names if name]


def _learn(redactor, snapshot, recording) -> None:
    """Teach the redactor every labelled value (serials, users, the command line's paths) of
    the raw files and command outputs before any file is written, so that a value the report
    shows unlabelled gets its token whatever the order the bundle's files are written in."""
    for data in recording.files.values():
        try:
            redactor.learn(data.decode("utf-8"))
        except UnicodeDecodeError:
            continue
    for run in snapshot.commands.values():
        redactor.learn(run.stdout)
        redactor.learn(run.stderr)


def _write_redaction_map(bundle_path: str, redactor) -> None:
    """original -> replacement, 0600 beside the bundle: for the admin, never for the ticket."""
    import json

    from ibdiag.write_files import write_output

    base = bundle_path[: -len(".tar.gz")] if bundle_path.endswith(".tar.gz") else bundle_path
    path = f"{base}.redaction-map.json"
    write_output(path, json.dumps(redactor.table(), indent=1) + "\n", mode=0o600)
    click.echo(f"redaction map (keep it here, do not attach it): {path}")
