"""What the ``ibdiag`` commands share: option decorators (``--level`` and every SECONDS option
from one factory each), the ``ibdiag.pipeline`` options they give, and the usage failure
(an ``IbdiagError``: one line, exit 3) a value that cannot be used becomes.

Only click (and ``ibdiag.errors``) is imported here: every command module uses these.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, TypeVar

import click

from ibdiag.errors import IbdiagError

FORMATS = ("text", "json", "html")
# ibdiag.registry.LEVELS, lightest first (not imported: the registry loads more than click)
LEVELS = ("quick", "standard", "full")

F = TypeVar("F", bound=Callable[..., Any])


class UsageFailure(IbdiagError):
    """A value given on the command line that cannot be used (a file that cannot be written, a
    host list that names no host): one line, exit 3."""


def level_option(help: str, default: str = "quick", highest: str = "full") -> Callable[[F], F]:
    """``--level``, from quick up to ``highest`` (serve, snapshot and the Slurm hooks stop at
    standard: they never run the traffic tests), ``default`` shown in --help."""
    return click.option(
        "--level",
        type=click.Choice(LEVELS[: LEVELS.index(highest) + 1]),
        default=default,
        show_default=True,
        help=help,
    )


def seconds_option(*names: str, minimum: float = 0.1, **settings: Any) -> Callable[[F], F]:
    """A duration option: a number of at least ``minimum`` seconds (metavar SECONDS); its
    default, when it has one, shown in --help. ``settings``: click.option's others."""
    return click.option(
        *names,
        type=click.FloatRange(min=minimum),
        metavar="SECONDS",
        show_default=True,
        **settings,
    )


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


command_timeout_option = seconds_option(
    "--command-timeout",
    default=10.0,
    callback=_unless_given,
    help="Kill a command, and everything it started, that runs longer than this. Level full's "
    "traffic tests have their own timeouts; given, this caps them too.",
)


def command_limits(command):
    """--deadline and --command-timeout: how long levels standard and full may spend."""
    command = command_timeout_option(command)
    return seconds_option(
        "--deadline",
        minimum=1,
        default=25.0,
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


_PROFILE = click.option(
    "--profile",
    metavar="NAME|FILE",
    help="Expectations for this kind of node (generic, azure-ndv5, dgx-h100, ...; "
    "see 'ibdiag config profiles') or a TOML file.",
)
_CONFIG = click.option(
    "--config",
    "config_path",
    metavar="FILE",
    help="Site configuration over the profile [default: /etc/ibdiag/ibdiag.toml, or "
    "$IBDIAG_CONFIG_DIR/ibdiag.toml, if present].",
)
_IGNORE_HCA = click.option(
    "--ignore-hca",
    "ignore_hcas",
    multiple=True,
    metavar="GLOB",
    help="Also leave out matching devices (e.g. 'mlx5_an*', Azure's Ethernet NIC).",
)


def expectation_options(command):
    """--profile, --config and the flags that override them; shared by check and config show."""
    options = [
        _PROFILE,
        _CONFIG,
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
        _IGNORE_HCA,
    ]
    for option in reversed(options):
        command = option(command)
    return command


def ignore_options(command):
    """--profile, --config and --ignore-hca alone: for a command that grades nothing but must
    leave the ignored devices alone (``ibdiag watch``: never read a restricted PF's counters)."""
    for option in (_IGNORE_HCA, _CONFIG, _PROFILE):
        command = option(command)
    return command


def history_options(command):
    """--history PATH and --no-history: each port's past (``ibdiag.history``), read for the
    checks of flaps and drops and appended with this run's sample."""
    command = click.option(
        "--no-history",
        is_flag=True,
        help="Neither read nor write the history store (link.flaps and link.drop skip).",
    )(command)
    return click.option(
        "--history",
        "history_path",
        metavar="PATH",
        help="The history store [default: $IBDIAG_HISTORY (a path, or 'off'), else "
        "/var/lib/ibdiag/history.db when reading this machine's own /sys].",
    )(command)


# A command's click parameter -> the PipelineOptions field it sets (the shared option
# decorators above name them; a command passes what it has).
_PIPELINE_PARAMS = {
    "level": "level",
    "sysfs_root": "sysfs_root",
    "procfs_root": "procfs_root",
    "profile": "profile",
    "config_path": "config_path",
    "expect_hcas": "expect_hcas",
    "expect_rate": "expect_rate",
    "ignore_hcas": "ignore_hcas",
    "checks_dirs": "checks_dirs",
    "deadline": "deadline_s",
    "command_timeout": "command_timeout_s",
    "read_timeout": "read_timeout_s",
    "history_path": "history_path",
    "no_history": "no_history",
    "rootfs": "rootfs",
}


def pipeline_options(params: Mapping[str, Any], **overrides: Any):
    """The ``ibdiag.pipeline.PipelineOptions`` of a command's pipeline parameters (by their
    click names), with ``overrides`` (field names) on top. A parameter it does not know is a
    TypeError: a new option is mapped here, never silently dropped."""
    from ibdiag.pipeline import PipelineOptions

    unknown = sorted(set(params) - set(_PIPELINE_PARAMS))
    if unknown:
        raise TypeError(f"not a pipeline option: {', '.join(unknown)}")
    fields = {
        field: tuple(params[name]) if field in ("ignore_hcas", "checks_dirs") else params[name]
        for name, field in _PIPELINE_PARAMS.items()
        if name in params
    }
    return PipelineOptions(**{**fields, **overrides})


checks_dir_option = click.option(
    "--checks-dir",
    "checks_dirs",
    type=_dir,
    multiple=True,
    help="Drop-in directory of site checks (*.py) [default: /etc/ibdiag/checks.d, or "
    "$IBDIAG_CONFIG_DIR/checks.d].",
)


def node_options(command):
    """What every command that grades this node takes: where it is read (--sysfs, --procfs),
    its ports' past (--history, --no-history), the site's checks (--checks-dir) and what it
    must look like (--profile, --config, --expect-*, --ignore-hca)."""
    for option in (expectation_options, checks_dir_option, history_options, source_options):
        command = option(command)
    return command
