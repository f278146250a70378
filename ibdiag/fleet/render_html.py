"""The fleet's HTML page: one self-contained file (inline CSS, no script, nothing fetched).

Rendered with jinja2 from reports/templates/fleet.html.j2, as the node page is
(``ibdiag.render.html``): autoescaping on and undefined names an error, so a host name, drain
reason, switch description or file name holding markup stays inert text. The renderer only
arranges what the ``FleetReport`` says - it decides no verdict and moves no node; it formats
numbers, names metrics with their units and orders the switches with suspects first.

A healthy fleet's page is a green banner with every node OK and each section saying "none".
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import jinja2

from ibdiag import resources
from ibdiag.fleet.drift import merged_rails, rail_ranges
from ibdiag.fleet.node import (
    ERROR_RATE_PREFIX,
    IB_WRITE_BW,
    INSPECTOR_BUSBW_PREFIX,
    NCCL_TESTS_BUSBW,
)
from ibdiag.fleet.report import FleetReport, FleetSettings, Outlier, SuspectSwitch

# The banner's counts, in this order; a key the report adds beyond these follows them.
COUNT_ORDER = ("OK", "WARNING", "CRITICAL", "UNKNOWN", "MISSING")

# Metric name -> (what it is, unit), for the outliers table.
METRICS: Dict[str, Tuple[str, str]] = {
    IB_WRITE_BW: ("ib_write_bw loopback bandwidth", "Gb/s"),
    NCCL_TESTS_BUSBW: ("nccl-tests bus bandwidth", "GB/s"),
}

# What each FleetSettings knob means, for the settings table (FleetSettings' docstring says why
# its defaults are what they are). A knob missing here is still shown, by its name.
SETTINGS: Dict[str, str] = {
    "outlier_mad_factor": "an outlier is further from its rail's median than this many robust "
    "standard deviations (1.4826 x MAD) ...",
    "outlier_margin": "... and further than this fraction of the median",
    "outlier_min_nodes": "fewest peers on a rail for outliers to be looked for",
    "rate_floor_per_hour": "an error-counter rate is an outlier only above this (increases/hour)",
    "switch_min_nodes": "a switch is the suspect when at least this many nodes fail on it ...",
    "switch_min_share": "... or 2 or more nodes whose failing ports are at least this share of "
    "the node ports cabled to it",
    "cable_lot_min_ports": "a cable part number and lot is listed when at least this many of its "
    "cables have physical-layer findings",
}


def number(value: float) -> str:
    """A measured value as an admin reads it: 392.5, 1,234.5, 0.25, 3 (three significant
    digits below 10, one decimal above)."""
    if value != value:  # NaN: never expected, never hidden
        return "NaN"
    if abs(value) >= 10:
        return f"{value:,.1f}"
    return f"{value:.3g}"


def metric_label(name: str) -> Tuple[str, str]:
    """(what the metric is, its unit) for a ``ibdiag.fleet.node`` metric name."""
    if name in METRICS:
        return METRICS[name]
    if name.startswith(ERROR_RATE_PREFIX):
        return (f"{name[len(ERROR_RATE_PREFIX) :]} error rate", "per hour")
    if name.startswith(INSPECTOR_BUSBW_PREFIX):
        collective, _, rest = name[len(INSPECTOR_BUSBW_PREFIX) :].partition(":")
        size, _, nodes = rest.partition(":")
        span = f", {nodes[:-1]}-node communicator" if nodes.endswith("n") else ""
        return (f"NCCL Inspector {collective} {size} bus bandwidth{span}", "Gb/s")
    return (name, "")


def rail_label(rail: Optional[int]) -> str:
    return "node-wide" if rail is None else str(rail)


def rails_label(rails: List[int]) -> str:
    """``0-7`` of a drift row's rails (``ibdiag.fleet.drift.merged_rails``); node-wide: none."""
    return rail_ranges(rails) if rails else "node-wide"


def outlier_rows(outliers: List[Outlier]) -> List[Dict[str, object]]:
    rows = []
    for outlier in outliers:
        label, unit = metric_label(outlier.metric)
        rows.append(
            {
                "outlier": outlier,
                "label": label,
                "unit": unit,
                "rail": rail_label(outlier.rail),
                "value": number(outlier.value),
                "median": number(outlier.median),
                "mad": number(outlier.mad),
                "gap": f"{outlier.gap * 100:+.1f}%",
            }
        )
    return rows


def outlier_text(outlier: Outlier) -> str:
    """``ib_write_bw loopback bandwidth 312.0 Gb/s vs median 392.0 (-20.4%)``: a switch port's
    outlier, in one line."""
    label, unit = metric_label(outlier.metric)
    unit = f" {unit}" if unit else ""
    return (
        f"{label} {number(outlier.value)}{unit} vs median {number(outlier.median)}{unit} "
        f"({outlier.gap * 100:+.1f}%)"
    )


def switch_order(switches: List[SuspectSwitch]) -> List[SuspectSwitch]:
    """The suspects first (a ticket each), then the switches below the threshold; otherwise
    in the report's order."""
    return [s for s in switches if s.suspect] + [s for s in switches if not s.suspect]


def settings_rows(settings: FleetSettings) -> List[Tuple[str, str, str]]:
    """(knob, value, meaning) for every field of the settings."""
    return [
        (name, str(getattr(settings, name)), SETTINGS.get(name, ""))
        for name in type(settings).model_fields
    ]


def counts_row(counts: Dict[str, int]) -> List[Tuple[str, int]]:
    known = [(key, counts.get(key, 0)) for key in COUNT_ORDER]
    return known + sorted((k, v) for k, v in counts.items() if k not in COUNT_ORDER)


def render_html(report: FleetReport) -> str:
    """The self-contained page of the fleet's answer."""
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(resources.templates_dir()),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    switches = switch_order(report.switches)
    return environment.get_template("fleet.html.j2").render(
        report=report,
        counts=counts_row(report.counts),
        suspects=[s for s in switches if s.suspect],
        below=[s for s in switches if not s.suspect],
        outliers=outlier_rows(report.outliers),
        settings=settings_rows(report.settings),
        drift_rows=merged_rails(report.drift),
        rail_label=rail_label,
        rails_label=rails_label,
        outlier_text=outlier_text,
        groups_total=lambda groups: sum(group.count for group in groups),
    )
