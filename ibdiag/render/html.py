"""HTML: one self-contained page (inline CSS, no script, nothing fetched from the network).

Rendered with jinja2 from reports/templates/report.html.j2 with autoescaping on, so a device
name, hostname or message containing markup stays inert text. The renderer only arranges what
the Report says; it decides no verdict. It looks up static descriptions (the counter catalogue's
meanings, the warning-signs guidance) to explain what is shown, never to grade it.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Tuple

import jinja2

from ibdiag import resources
from ibdiag.counters.catalogue import lookup
from ibdiag.durations import span
from ibdiag.facts import Fact, fact_fields
from ibdiag.facts.history import PortKey, node_keys
from ibdiag.facts.partner import CABLE, short_name
from ibdiag.model import CommandRun, Report, Result, Status
from ibdiag.render.html_config import config_rows
from ibdiag.render.html_fw import firmware_rows
from ibdiag.render.html_pci import pci_rows
from ibdiag.render.html_phy import physical_rows
from ibdiag.render.html_status import SEVERITY, worst
from ibdiag.render.html_system import hca_rows, manifest_rows, system_facts
from ibdiag.render.options import DEFAULT, RenderOptions

# For colouring a cell: a skip (not applicable) never hides that the rest passed.
_ATTENTION = (Status.FAIL, Status.ERROR, Status.WARN)
ALTERED_SHOWN = 10  # altered bundle files named in the banner; the rest as a count
# Characters of a far end's node description shown in the matrix; the whole is in the title
# (hover). The IB spec's NodeDescription is 64 bytes, so a real one is always shown whole: a
# longer one did not come from a real SMA and must not stretch the page.
DESCRIPTION_SHOWN = 64

# Seed 000's "Warning Signs" table (symptom -> likely cause -> action), quoted as guidance.
WARNING_SIGNS: Tuple[Tuple[str, str, str], ...] = (
    (
        "local_ack_timeout_err climbing on one port",
        "Cable fault, switch port issue, or remote node hung",
        "Check cable, run ibdiagnet, contact Azure support for hardware",
    ),
    (
        "packet_seq_err or out_of_sequence on multiple ports",
        "Switch-level congestion or adaptive routing reordering",
        "Check switch health, verify topology",
    ),
    (
        "out_of_buffer",
        "Application not posting enough receive WQEs; memory pressure",
        "Profile NCCL buffer allocation, check for OOM events",
    ),
    (
        "req_transport_retries_exceeded > 0",
        "Remote port unreachable after all retries",
        "Port or node is dead \u2014 check physical state, run NHC",
    ),
    (
        "One port\u2019s RX/TX rate significantly lower than others",
        "Degraded link speed, cable issue",
        "ibstat on the node, check link speed/width",
    ),
    (
        "Physical state != 5 (LinkUp)",
        "Port down or negotiating",
        "Restart the IB interface, check cable and switch",
    ),
)


def port_matrix(report: Report) -> List[Dict[str, Any]]:
    """One row per HCA: each port's worst status and its far end's (``far_end``), for the
    colour of each cell, and the HCA's: the worst of its own results, its ports' and their
    cables' - an HCA whose only port fails is never a green cell."""
    by_target: Dict[str, List[Result]] = {}
    by_local_end: Dict[str, List[Result]] = {}
    for result in report.results:
        by_target.setdefault(result.target, []).append(result)
        if CABLE in result.target:
            by_local_end.setdefault(result.target.split(CABLE, 1)[0], []).append(result)
    rows: List[Dict[str, Any]] = []
    for dev in report.snapshot.devices:
        ports: List[Dict[str, Any]] = []
        for port in dev.ports:
            local = by_target.get(dev.target(port), [])
            cable = by_local_end.get(dev.target(port), [])
            ports.append(
                {
                    "port": port,
                    "status": worst(local),
                    "far_end": far_end(port, cable, local),
                }
            )
        own = worst(by_target.get(dev.name, []))
        cells = [cell["status"] for cell in ports]
        cells += [cell["far_end"]["status"] for cell in ports if cell["far_end"] is not None]
        rows.append({"device": dev, "status": _worst_status([own, *cells]), "ports": ports})
    return rows


def history_strips(report: Report) -> Optional[Dict[str, Any]]:
    """The link-history section: the window, and per port one strip from ``since`` to the
    Snapshot's time with a segment where the port was down (its offset and width as % of the
    window, at least a sliver so a 2 s flap is visible), in the order of the port matrix.
    None when the run read no history."""
    snapshot = report.snapshot
    history = snapshot.history
    if history is None:
        return None
    now = snapshot.collected_at
    since = history.since or now
    length = max((now - since).total_seconds(), 1.0)
    names = node_keys((dev.name, dev.node_guid) for dev in snapshot.devices)
    by_port = history.by_port()
    strips = []
    for dev in snapshot.devices:
        for port in dev.ports:
            outages = by_port.get(PortKey(names[dev.name], port.number), [])
            segments = []
            for outage in outages:
                start = max(0.0, (outage.start - since).total_seconds())
                end = (outage.end or now) - since
                left = min(100.0, 100 * start / length)
                width = max(0.4, 100 * max(0.0, end.total_seconds() - start) / length)
                down = outage.down_s(now)
                segments.append(
                    {
                        "left": round(left, 2),
                        "width": round(min(width, 100 - left), 2),
                        "open": outage.end is None,
                        "title": f"{outage.start:%Y-%m-%d %H:%M:%S}Z - "
                        + (f"{outage.end:%H:%M:%S}Z" if outage.end else "still down")
                        + (f", down {span(down)}" if down is not None else ", length not seen")
                        + f", seen by {outage.source}"
                        + (f", {outage.downs} downs" if outage.downs > 1 else ""),
                    }
                )
            strips.append({"target": dev.target(port), "segments": segments})
    return {
        "history": history,
        "since": since,
        "until": now,
        "window": span(length),
        "strips": strips,
        "outages": sum(len(strip["segments"]) for strip in strips),
    }


def _worst_status(statuses: List[str]) -> str:
    """The worst of cell statuses (``html_status.worst``'s values; "none" below all)."""
    known = [Status(status) for status in statuses if status != "none"]
    return max(known, key=SEVERITY.index).value if known else "none"


def bounded(text: Optional[str], limit: int = DESCRIPTION_SHOWN) -> Optional[Dict[str, str]]:
    """``text`` to show in a cell: ``shown`` (at most ``limit`` characters, then "…" when
    cut) and ``whole`` (for the title attribute, which autoescaping escapes as the text)."""
    if text is None:
        return None
    shown = text if len(text) <= limit else text[:limit] + "…"
    return {"shown": shown, "whole": text}


def far_end(port, cable: List[Result], local: List[Result]) -> Optional[Dict[str, object]]:
    """What the page shows of the far end of ``port``'s cable; None when it was not read for
    this report (level quick, a port not ACTIVE, an older bundle).

    ``name``: the cable's far end as the partner checks name it (``leaf07/21``, from their
    results' targets), else the partner's description; ``status``: the worst of the results
    naming the cable by both ends and of the partner checks' results on our own port (a far
    end that did not answer, a hung tool, nonsense from the far end: a warn there is never a
    grey cell); ``unread``: why the far end could not be graded (the worst of those own-port
    results: ``no-answer``, ``local-hang``, ``no-access``, ...), else None; ``description``:
    the partner's node description, ``bounded``.
    """
    partner = port.partner
    if partner is None:
        return None
    name = cable[0].target.split(CABLE, 1)[1] if cable else None
    if name is None and partner.description is not None:  # as the checks would name it
        name = f"{short_name(partner)}/{partner.port if partner.port is not None else '?'}"
    own = [r for r in local if r.check_id in PARTNER_CHECKS and r.status != Status.PASS]
    unread = max(own, key=lambda r: SEVERITY.index(r.status)) if own else None
    info = partner.port_info
    return {
        "name": name,
        "partner": partner,
        "status": worst(cable + own),
        "link": info,
        "description": bounded(partner.description),
        "unread": (f"{unread.observed}: {unread.message}" if unread is not None else None),
    }


PARTNER_CHECKS = ("link.partner", "counters.partner")


def _counter_rows(values: Dict[str, int], directory: str) -> List[Dict[str, object]]:
    """Each counter with its catalogue category and meaning; ``alarm`` marks a non-zero counter
    the catalogue files as an error (a highlight for the eye, not a verdict)."""
    rows = []
    for name in sorted(values, key=str.lower):
        info = lookup(name, directory)
        value = values[name]
        hover = f"{info.category}: {info.meaning}"
        if info.action:
            hover += f" What to do: {info.action}"
        rows.append(
            {
                "name": name,
                "value": value,
                "category": info.category,
                "title": hover,
                "alarm": info.category == "error" and value != 0,
            }
        )
    return rows


def counter_tables(report: Report) -> List[Dict[str, Any]]:
    """Per device and per port: the sysfs counters and hw_counters, ready to tabulate."""
    tables: List[Dict[str, Any]] = []
    for dev in report.snapshot.devices:
        if dev.hw_counters:
            rows = _counter_rows(dev.hw_counters, "hw_counters")
            tables.append(
                {"target": dev.name, "groups": [("hw_counters (device)", rows)], "rows": rows}
            )
        for port in dev.ports:
            groups: List[Tuple[str, List[Dict[str, object]]]] = []
            if port.counters:
                groups.append(("counters", _counter_rows(port.counters, "counters")))
            if port.hw_counters:
                groups.append(("hw_counters", _counter_rows(port.hw_counters, "hw_counters")))
            rows = [row for _, group in groups for row in group]
            tables.append({"target": dev.target(port), "groups": groups, "rows": rows})
    for table in tables:
        table["alarms"] = [row for row in table["rows"] if row["alarm"]]
    return tables


def _commands(report: Report) -> List[Tuple[str, CommandRun]]:
    return sorted(report.snapshot.commands.items())


def _problems(report: Report) -> List[Tuple[str, str, str]]:
    """(where, attribute, reason) for everything that could not be read or made no sense."""
    snapshot = report.snapshot
    rows = [("node", key, why) for key, why in snapshot.problems.items()]
    for dev in snapshot.devices:
        rows += [(dev.name, key, why) for key, why in dev.problems.items()]
        if dev.pci is not None:
            rows += [(dev.name, f"pci:{key}", why) for key, why in dev.pci.problems.items()]
        for port in dev.ports:
            target = dev.target(port)
            rows += [(target, key, why) for key, why in port.problems.items()]
            if port.netdev is not None:
                rows += [
                    (target, f"{port.netdev.name}:{key}", why)
                    for key, why in port.netdev.problems.items()
                ]
                for name in fact_fields(type(port.netdev)):
                    rows += _fact_problems(target, name, getattr(port.netdev, name))
            for name in fact_fields(type(port)):
                rows += _fact_problems(target, name, getattr(port, name))
    for name in fact_fields(type(snapshot)):
        rows += _fact_problems("node", name, getattr(snapshot, name))
    return rows


def _fact_problems(where: str, field: str, fact: object) -> List[Tuple[str, str, str]]:
    """(where, the run's role or the field, what the parser could not make sense of) for a
    typed command fact and every fact inside it (``ibdiag.facts``: each keeps ``problems``)."""
    if isinstance(fact, list):
        return [row for item in fact for row in _fact_problems(where, field, item)]
    if isinstance(fact, dict):  # a ``facts`` map: each family's fact by its name
        return [row for name, item in fact.items() for row in _fact_problems(where, name, item)]
    if not isinstance(fact, Fact):
        return []
    label = getattr(fact, "role", None) or field
    rows = [(where, label, str(why)) for why in getattr(fact, "problems", None) or []]
    for name in type(fact).model_fields:
        value = getattr(fact, name)
        if isinstance(value, (Fact, list)):
            rows += _fact_problems(where, label, value)
    return rows


def render(report: Report, options: RenderOptions = DEFAULT) -> str:
    """The self-contained page (no option applies: the page shows every result)."""
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(resources.templates_dir()),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    attention = [r for r in report.results if r.status in _ATTENTION]
    attention.sort(key=lambda r: _ATTENTION.index(r.status))
    counters = counter_tables(report)
    return environment.get_template("report.html.j2").render(
        report=report,
        snapshot=report.snapshot,
        attention=attention,
        others=[r for r in report.results if r.status not in _ATTENTION],
        matrix=port_matrix(report),
        history=history_strips(report),
        physical=physical_rows(report),
        configuration=config_rows(report),
        pcie=pci_rows(report),
        firmware=firmware_rows(report),
        system=system_facts(report),
        system_hcas=hca_rows(report),
        manifest=manifest_rows(report),
        counts=report.counts(),
        node_status=worst([r for r in report.results if r.target == "node"]),
        counters=counters,
        alarm_count=sum(len(table["alarms"]) for table in counters),
        commands=_commands(report),
        problems=_problems(report),
        thresholds=json.dumps(report.thresholds.model_dump(mode="json"), indent=2),
        warning_signs=WARNING_SIGNS,
        altered_shown=report.altered_files[:ALTERED_SHOWN],
        altered_more=max(0, len(report.altered_files) - ALTERED_SHOWN),
    )
