"""What the ``ibdiag`` commands share: option decorators, the thresholds they imply, the
registry, baselines, and the one-line usage error (exit 3).

Kept apart from ``ibdiag.cli`` so that command groups in other modules (``ibdiag slurm``) can
use the same options without importing the command line itself.
"""

from __future__ import annotations

import os
from typing import List, Optional, Sequence, Tuple

import click

EXIT_UNKNOWN = 3
FORMATS = ("text", "json", "html")


class UsageFailure(click.ClickException):
    """A configuration or input problem reported as one line, exit 3."""

    exit_code = EXIT_UNKNOWN


def registry_for(checks_dirs: Sequence[str]):
    from ibdiag.registry import RegistryError, default_dropin_dir, load_registry

    default = default_dropin_dir()
    dirs = list(checks_dirs) or ([default] if os.path.isdir(default) else [])
    try:
        return load_registry(dirs)
    except (RegistryError, OSError) as exc:
        raise UsageFailure(str(exc)) from exc


def _parse_expect_hcas(value: Optional[str]) -> Tuple[Optional[int], List[str]]:
    """ "8" -> a count; "mlx5_0,mlx5_1" -> names that must all be present."""
    if value is None:
        return None, []
    value = value.strip()
    if value.isascii() and value.isdigit():  # "²" is a digit to isdigit(), not to int()
        return int(value), []
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        raise click.BadParameter("give a count (8) or HCA names (mlx5_0,mlx5_1)")
    return None, names


_dir = click.Path(exists=True, file_okay=False, dir_okay=True)


def source_options(command):
    """--sysfs and --procfs: where the node's state is read from (a host /sys, a capture)."""
    command = click.option(
        "--procfs",
        "procfs_root",
        type=_dir,
        default="/proc",
        show_default=True,
        help="Where procfs is mounted.",
    )(command)
    return click.option(
        "--sysfs",
        "sysfs_root",
        type=_dir,
        default="/sys",
        show_default=True,
        help="Where sysfs is mounted (a host /sys in a container, or a captured tree).",
    )(command)


def _unless_given(ctx, param, value):
    """The option's value; its default marked as such (``DefaultSeconds``), so that level full
    keeps its own bound unless the option was given."""
    from click.core import ParameterSource

    if value is not None and ctx.get_parameter_source(param.name) is ParameterSource.DEFAULT:
        from ibdiag.collect import DefaultSeconds

        return DefaultSeconds(value)
    return value


command_timeout_option = click.option(
    "--command-timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    callback=_unless_given,
    help="Kill a command, and everything it started, that runs longer than this. Level full's "
    "traffic tests have their own timeouts; given, this caps them too.",
)


def command_limits(command):
    """--deadline and --command-timeout: how long levels standard and full may spend."""
    command = command_timeout_option(command)
    return click.option(
        "--deadline",
        type=click.FloatRange(min=1),
        default=25.0,
        show_default=True,
        metavar="SECONDS",
        callback=_unless_given,
        help="Start no command after this long (well inside Slurm's 60 s HealthCheckTimeout). "
        "Level full's traffic tests have their own bound, 2 x (perftest_duration_s + 31 s) + "
        "nccl_timeout_s; given, this bounds the whole run, them included.",
    )(command)


compat_option = click.option(
    "--compat",
    type=click.Choice(["moneo"]),
    help="Also emit the metric names existing dashboards use (moneo: ib_hw_<counter>, "
    'ib_port_rcv_data, ... with ib_port="mlx5_0:1").',
)


def output_options(command):
    """--format, --json, -o FILE, --quiet, --verbose: how a report is shown (check, report)."""
    options = [
        click.option(
            "--format", "fmt", type=click.Choice(FORMATS), help="Output format [default: text]."
        ),
        click.option(
            "--json", "as_json", is_flag=True, help="Print the JSON report (--format json)."
        ),
        click.option(
            "-o",
            "--output",
            type=click.Path(dir_okay=False, writable=True),
            help="Write the report to FILE (format from --format or the extension; written "
            "atomically; a device or FIFO is written into, never replaced; - is stdout).",
        ),
        click.option("-q", "--quiet", is_flag=True, help="Print nothing; the exit code tells."),
        click.option(
            "-v", "--verbose", is_flag=True, help="Also list passing and skipped results."
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def expectation_options(command):
    """--profile, --config and the flags that override them; shared by check and config show."""
    options = [
        click.option(
            "--profile",
            metavar="NAME|FILE",
            help="Expectations for this kind of node (generic, azure-ndv5, dgx-h100, ...; "
            "see 'ibdiag config profiles') or a TOML file.",
        ),
        click.option(
            "--config",
            "config_path",
            metavar="FILE",
            help="Site configuration over the profile [default: /etc/ibdiag/ibdiag.toml, or "
            "$IBDIAG_CONFIG_DIR/ibdiag.toml, if present].",
        ),
        click.option(
            "--expect-hcas",
            metavar="N|NAMES",
            help="HCAs this node must have: a count (8) or names (mlx5_0,mlx5_1).",
        ),
        click.option(
            "--expect-rate",
            type=click.FloatRange(min=0, min_open=True),
            metavar="GBPS",
            help="Rate every InfiniBand port must run at, in Gb/s (e.g. 400 for NDR).",
        ),
        click.option(
            "--ignore-hca",
            "ignore_hcas",
            multiple=True,
            metavar="GLOB",
            help="Also leave out matching devices (e.g. 'mlx5_an*', Azure's Ethernet NIC).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def effective_config(profile, config_path, expect_hcas, expect_rate, ignore_hcas):
    """Profile, then site config, then flags: the thresholds to grade with, and their sources.

    --ignore-hca adds to the patterns the profile and config set; the other flags replace.
    """
    from ibdiag.config import ConfigError, load_effective

    count, names = _parse_expect_hcas(expect_hcas)
    try:
        flags = {"expect_hcas": count, "expect_hca_names": names, "expect_rate_gbps": expect_rate}
        if ignore_hcas:  # added to what the profile and config ignore, so read those first
            layered = load_effective(profile, config_path, {})
            flags["ignore_hcas"] = [*layered.thresholds.ignore_hcas, *ignore_hcas]
        return load_effective(profile, config_path, flags)
    except ConfigError as exc:
        raise UsageFailure(str(exc)) from exc


checks_dir_option = click.option(
    "--checks-dir",
    "checks_dirs",
    type=_dir,
    multiple=True,
    help="Drop-in directory of site checks (*.py) [default: /etc/ibdiag/checks.d, or "
    "$IBDIAG_CONFIG_DIR/checks.d].",
)


def read_baseline(snapshot, baseline_path: Optional[str], state_path: Optional[str]):
    """(snapshot, the baseline Snapshot or None): why a baseline could not be used is a
    problem of the returned snapshot (a new one: models are frozen)."""
    from ibdiag import baseline

    path = baseline_path or state_path
    if path is None or (state_path and not os.path.exists(state_path)):
        return snapshot, None  # no baseline asked for, or the first run with this state file
    previous, problem = baseline.load(path)
    if problem is not None:
        snapshot = snapshot.with_problem(baseline.BASELINE_PROBLEM, problem)
    return snapshot, previous


def replace_state(path: str, snapshot):
    """Save ``snapshot`` as the next run's baseline (--state), before it is graded; the
    snapshot to grade (``snapshot``, or a new one naming why it could not be saved).

    The state file's directory is created (0700) when its parent exists: the README's
    ``/var/lib/ibdiag/nhc-state.json`` works on a node where nothing made /var/lib/ibdiag yet.
    When the file cannot be written, why goes into the snapshot's ``problems`` and the
    ``counters.baseline`` check warns: NHC and Slurm discard stderr on success, and a state
    that silently never saves means counters are never graded on their change.
    """
    from ibdiag import baseline

    directory = os.path.dirname(os.path.abspath(path))
    try:
        if not os.path.isdir(directory) and os.path.isdir(os.path.dirname(directory)):
            os.mkdir(directory, 0o700)
        baseline.save(path, snapshot)
    except OSError as exc:  # the verdict stands; the next run will have no baseline
        why = exc.strerror or str(exc)
        if not os.path.isdir(directory):
            why = f"its directory {directory} does not exist"
        return snapshot.with_problem(
            baseline.STATE_PROBLEM, f"cannot write state file {path}: {why}"
        )
    return snapshot
