"""What ibdiag knows, printed: its checks (``ibdiag checks``, ``explain``), the counter
catalogue (``explain COUNTER``), profiles and the effective configuration (``ibdiag config``),
and the JSON Schemas of what it writes (``ibdiag schema``).
"""

from __future__ import annotations

import click

from ibdiag.cli.options import (
    UsageFailure,
    checks_dir_option,
    expectation_options,
    pipeline_options,
)
from ibdiag.cli.output import write_or_print


@click.command("checks")
@checks_dir_option
def list_checks(checks_dirs) -> int:
    """List every check: id, level and title."""
    from ibdiag.pipeline import load_checks

    registry = load_checks(tuple(checks_dirs))
    width = max((len(spec.id) for spec in registry), default=10)
    for spec in registry:
        click.echo(f"{spec.id:{width}}  {spec.level:8}  {spec.title}")
    return 0


@click.command("explain")
@click.argument("check_id")
@checks_dir_option
def explain(check_id, checks_dirs) -> int:
    """Say what healthy looks like for CHECK_ID, why it matters and what to do."""
    from ibdiag.counters.catalogue import catalogue
    from ibdiag.pipeline import load_checks

    registry = load_checks(tuple(checks_dirs))
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


@click.group("config")
def config_group() -> None:
    """Profiles and the effective configuration."""


@config_group.command("show")
@expectation_options
def config_show(**settings) -> int:
    """Print the effective configuration (TOML) and where each value came from."""
    from ibdiag.config import render_show
    from ibdiag.pipeline import effective_config

    click.echo(render_show(effective_config(pipeline_options(settings))))
    return 0


@config_group.command("profiles")
def config_profiles() -> int:
    """List the shipped profiles with their descriptions."""
    from ibdiag.config import describe_profiles

    for name, description in describe_profiles():
        click.echo(f"{name:14}  {description}")
    return 0


@click.command("schema")
@click.argument("name", type=click.Choice(["report", "manifest", "fleet"]), default="report")
@click.option("-o", "--output", "output", metavar="FILE", help="Write it to FILE (- for stdout).")
def schema(name, output) -> int:
    """Print the JSON Schema of the report that --json writes, (NAME manifest) of a support
    bundle's manifest.json, or (NAME fleet) of the fleet report that 'ibdiag fleet report
    --json' writes. The same files are committed under schema/ in the source tree."""
    from ibdiag.schemas import schema_text

    write_or_print(schema_text(name), output)
    return 0
