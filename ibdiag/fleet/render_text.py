"""The fleet's answer on a terminal: ``render_text(FleetReport)``.

What an admin reads first comes first: the verdict line (``IBDIAG FLEET CRITICAL - ...``, as
``ibdiag check`` starts its own with ``IBDIAG``), the counts, then what to act on - the nodes to
drain grouped by reason (``reason: hostlist (N)``, pasteable into ``scontrol``), the nodes that
are the switch's fault and the switches to open a ticket for - then what to look at: outliers
against their rail's peers, drift, misplaced rails, missing nodes, and the inputs that could
not be read. A section with nothing in it is not printed; a healthy fleet is three lines.

Every value comes from the nodes' reports (host names, reasons, switch descriptions, file
names) and is printed ``inert`` (``ibdiag.render.inert``, as the node's text renderer does):
one line of the output is one line, and nothing read from a node can steer the terminal or
forge a line.
"""

from __future__ import annotations

from typing import Callable, Iterable, List, Optional, Sequence

from ibdiag.fleet.drift import merged_rails, rail_ranges
from ibdiag.fleet.report import (
    CableLot,
    Drift,
    FleetReport,
    NodeGroup,
    Outlier,
    RailMisplacement,
    SuspectSwitch,
    SwitchPort,
)
from ibdiag.render.inert import inert

COUNT_ORDER = ("OK", "WARNING", "CRITICAL", "UNKNOWN", "MISSING")
_PORTS_SHOWN = 8  # a switch's failing (and outlying) ports one a line, then how many more


def render_text(report: FleetReport) -> str:
    """The whole report as text, one finding per line, ending with a newline."""
    lines = [verdict_line(report), counts_line(report)]
    lines += _groups("drain (CRITICAL, by reason)", report.drain)
    lines += _groups(
        "switch-suspect (failing on a suspect switch: ticket the switch, not the nodes)",
        report.switch_suspect,
    )
    suspects = [switch for switch in report.switches if switch.suspect]
    others = [switch for switch in report.switches if not switch.suspect]
    lines += _section("switches to ticket", (line for s in suspects for line in switch_lines(s)))
    lines += _section(
        "switches with failing or outlying ports (below the suspect threshold)",
        (line for s in others for line in switch_lines(s)),
    )
    lines += _groups("warnings (by reason)", report.warnings)
    lines += _groups("unknown (no verdict; by reason)", report.unknown)
    lines += _section("outliers (against their rail's peers)", map(outlier_line, report.outliers))
    lines += _section(
        "drift (the majority, then the others)",
        (drift_line(first, rails) for first, rails in merged_rails(report.drift)),
    )
    lines += _section(
        "rail misplacements (a cable in another rail's switch)",
        map(misplacement_line, report.rail_misplacements),
    )
    lines += _section(
        "cable lots (physical-layer findings by part number and lot)",
        (line for lot in report.cable_lots for line in cable_lot_lines(lot)),
    )
    if report.missing is not None and report.missing.count:
        lines += ["", "missing (expected, no report):", f"  {_group_hosts(report.missing)}"]
    lines += _groups("not run (expected; fleet run did not run them, by reason)", report.not_run)
    if report.unexpected is not None:
        lines += _groups(
            "unexpected (answered, not expected; kept out of switch blame, outliers and drift)",
            [report.unexpected],
        )
    lines += _groups("conflicts (reports of one node that disagree)", report.conflicts)
    lines += _section("read problems (inputs that gave no node)", read_problem_lines(report))
    lines += _groups("duplicates (one host, several reports)", report.duplicates)
    lines += _groups("read with a caveat", report.read_notes)
    return "\n".join(lines) + "\n"


def read_problem_lines(report: FleetReport) -> List[str]:
    """One line per listed read problem, then ``and N more`` for those only counted."""
    lines = [f"  {inert(p.source)}: {inert(p.reason)}" for p in report.read_problems]
    more = report.read_problem_count - len(report.read_problems)
    if more > 0:
        lines.append(f"  and {more} more (read problems: {report.read_problem_count})")
    return lines


def verdict_line(report: FleetReport) -> str:
    """``IBDIAG FLEET <VERDICT> - <reason> (<N> nodes read)``."""
    nodes = f"{report.nodes_read} node{'s' if report.nodes_read != 1 else ''} read"
    return f"IBDIAG FLEET {inert(report.verdict)} - {inert(report.verdict_reason)} ({nodes})"


def counts_line(report: FleetReport) -> str:
    """``nodes: OK 480, WARNING 3, CRITICAL 12, UNKNOWN 1, MISSING 4`` (a count of 0 shown
    too, so the line always reads the same; other keys after those, as the report has them)."""
    keys = [key for key in COUNT_ORDER if key in report.counts or key != "MISSING"]
    keys += [key for key in report.counts if key not in COUNT_ORDER]
    return "nodes: " + ", ".join(f"{inert(key)} {report.counts.get(key, 0)}" for key in keys)


def group_line(group: NodeGroup) -> str:
    """``reason: hostlist (N)``."""
    return f"  {inert(group.reason)}: {_group_hosts(group)}"


def outlier_line(outlier: Outlier) -> str:
    """``gpu017 rail 3 ib_write_bw_gbps 312 vs median 392 (-20.4%, low; 64 peers, MAD 2.1)``."""
    where = f"rail {outlier.rail}" if outlier.rail is not None else "node-wide"
    return (
        f"  {inert(outlier.host)} {where} {inert(outlier.metric)} {_number(outlier.value)} "
        f"vs median {_number(outlier.median)} ({_percent(outlier.gap)}, "
        f"{inert(outlier.direction)}; {outlier.peers} peers, MAD {_number(outlier.mad)})"
    )


def drift_line(drift: Drift, rails: Sequence[int] = ()) -> str:
    """``fw_ver rails 0-7: 28.39.1002 on 495 nodes; 28.36.1010 on gpu[017,033] (2)``."""
    rails = list(rails) or ([drift.rail] if drift.rail is not None else [])
    where = ""
    if rails:
        where = f" rail{'s' if len(rails) > 1 else ''} {rail_ranges(rails)}"
    others = "; ".join(
        f"{inert(other.value)} on {inert(other.nodes)} ({other.count})" for other in drift.others
    )
    majority = f"{inert(drift.majority)} on {drift.majority_count} node"
    majority += "s" if drift.majority_count != 1 else ""
    return f"  {inert(drift.attribute)}{where}: {majority}; {others}"


EXPECTED_SHOWN = 4  # a rail spans a leaf per scalable unit: 32 names make no line


def misplacement_line(item: RailMisplacement) -> str:
    """``gpu044 rail 2 mlx5_2:1 lands on leaf15; rail 2 of the others: leaf03, leaf04``."""
    shown = ", ".join(inert(name) for name in item.expected[:EXPECTED_SHOWN]) or "(none)"
    more = len(item.expected) - EXPECTED_SHOWN
    expected = f"{shown} and {more} more" if more > 0 else shown
    return (
        f"  {inert(item.host)} rail {item.rail} {inert(item.target)} lands on "
        f"{inert(item.peer_name)}; rail {item.rail} of the others: {expected}"
    )


def switch_lines(switch: SuspectSwitch) -> List[str]:
    """The switch's head line (its failing, then its outlying nodes and ports), then its failing
    ports with their checks and its outlying ports with their metrics, one a line."""
    guid = f" ({inert(switch.peer_guid)})" if switch.peer_guid else ""
    parts = []
    if switch.failing_ports:
        parts.append(
            f"{switch.failing_node_count} of {switch.attached_node_count} attached nodes fail on "
            f"it ({_ports_of(switch, switch.failing_ports)}): {inert(switch.failing_nodes)}"
        )
    if switch.outlying_ports:
        parts.append(
            f"{switch.outlying_node_count} of {switch.attached_node_count} attached nodes "
            f"outlying ({_ports_of(switch, switch.outlying_ports)}): "
            f"{inert(switch.outlying_nodes)}"
        )
    if switch.flapping_port_count:
        plural = "s" if switch.flapping_port_count != 1 else ""
        parts.append(
            f"{switch.flapping_port_count} node port{plural} flapped or dropped on it: "
            f"{inert(switch.flapping_nodes)}"
        )
    if switch.physical_port_count:
        plural = "s" if switch.physical_port_count != 1 else ""
        parts.append(
            f"{switch.physical_port_count} node port{plural} with physical-layer findings on "
            f"it: {inert(switch.physical_nodes)}"
        )
    lines = [f"  {inert(switch.peer_name)}{guid}: " + "; ".join(parts)]
    lines += _port_lines(switch.failing_ports, _checks)
    lines += _port_lines(switch.outlying_ports, _outlying)
    return lines


def cable_lot_lines(lot: CableLot) -> List[str]:
    """``6 of 8 cables of part MMA4Z00-NS (Mellanox), lot 230512AB: phy.ber, phy.fec on 6 ports
    of 5 nodes gpu[001-005]; far ends leaf07, leaf09``, then the ports, one a line."""
    vendor = f" ({inert(lot.vendor)})" if lot.vendor else ""
    which = f"lot {inert(lot.lot)}" if lot.lot else "lot not given"
    ends = f"; far ends {', '.join(inert(name) for name in lot.switches)}" if lot.switches else ""
    nodes = f"{lot.node_count} node{'s' if lot.node_count != 1 else ''}"
    head = (
        f"  {lot.port_count} of {lot.cable_count} cables of part {inert(lot.part_number)}{vendor}, "
        f"{which}: {', '.join(inert(check) for check in lot.checks)} on {lot.port_count} ports "
        f"of {nodes} {inert(lot.nodes)}{ends}"
    )
    lines = [head]
    for port in lot.ports[:_PORTS_SHOWN]:
        far = f"<->{inert(port.far_end)}" if port.far_end else ""
        checks = ", ".join(inert(check) for check in port.checks)
        lines.append(f"    {inert(port.host)} {inert(port.target)}{far}: {checks}")
    more = len(lot.ports) - _PORTS_SHOWN
    if more > 0:
        lines.append(f"    and {more} more port{'s' if more != 1 else ''}")
    return lines


def _ports_of(switch: SuspectSwitch, ports: Sequence[SwitchPort]) -> str:
    """``9 of 16 node ports: 21, 22``."""
    numbers = sorted({p.peer_port for p in ports if p.peer_port is not None})
    listed = f": {', '.join(map(str, numbers))}" if numbers else ""
    return f"{len(ports)} of {switch.attached_port_count} node ports{listed}"


def _port_lines(ports: Sequence[SwitchPort], what: Callable[[SwitchPort], str]) -> List[str]:
    lines = []
    for port in ports[:_PORTS_SHOWN]:
        number = f"port {port.peer_port}" if port.peer_port is not None else "port ?"
        lines.append(f"    {number} <- {inert(port.host)} {inert(port.target)}: {what(port)}")
    more = len(ports) - _PORTS_SHOWN
    if more > 0:
        lines.append(f"    and {more} more port{'s' if more != 1 else ''}")
    return lines


def _checks(port: SwitchPort) -> str:
    return ", ".join(inert(check) for check in port.checks) or "(no check named)"


def _outlying(port: SwitchPort) -> str:
    """``outlier ib_write_bw_gbps 312 vs median 392 (-20.4%)``, each of the port's."""
    return ", ".join(
        f"outlier {inert(o.metric)} {_number(o.value)} vs median {_number(o.median)} "
        f"({_percent(o.gap)})"
        for o in port.outliers
    )


def _groups(title: str, groups: Sequence[NodeGroup]) -> List[str]:
    return _section(title, (group_line(group) for group in groups))


def _section(title: str, lines: Iterable[str]) -> List[str]:
    body = list(lines)
    return ["", f"{title}:", *body] if body else []


def _group_hosts(group: NodeGroup) -> str:
    return f"{inert(group.nodes)} ({group.count})"


def _number(value: Optional[float]) -> str:
    if value is None:
        return "?"
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"


def _percent(gap: float) -> str:
    return f"{gap * 100:+.1f}%"
