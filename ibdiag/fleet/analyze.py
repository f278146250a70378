"""``analyze``: the fleet's answer (``FleetReport``) from its nodes' summaries.

Healthy is every node OK, every expected node present, no outlier, no drift, no misplaced
rail and every input readable: verdict OK. Otherwise nodes are grouped by what is wrong, so 500
nodes with one reason are one line: CRITICAL nodes by drain reason (``drain``) - except those
whose failing ports all lie on suspect switches, which go to ``switch_suspect`` (their ticket
is the switch's); WARNING nodes by their reason; UNKNOWN nodes by their verdict reason (a node
whose report file could not be read among them: ``nodes_read`` does not count it); expected
hosts without a report as ``missing``, or as ``not_run`` where fleet run says Slurm kept them
from running (drained, down, busy); hosts that answered but nobody expected - and reports
that say an expected host from a file not named for it (``ibdiag.fleet.identity.answers_for``:
they answer for no node, the host stays missing, a read note names the file) - are reported
like any other and listed as ``unexpected``, but kept out of switch blame, rail conformance,
the outliers' peers and drift's majorities, where a few forged reports could otherwise make a
suspect of a real node's switch, pull a rail's median towards a sick node or outvote its
firmware. Groups come largest first; drift counts as the renderers show it, rails that drift
alike as one (``merged_rails``). Cost: O(nodes x ports), plus a sort per rail and metric.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Dict, List, Optional, Sequence, Set, Tuple

from ibdiag import __version__
from ibdiag.fleet.cables import find_cable_lots
from ibdiag.fleet.drift import find_drift, merged_rails
from ibdiag.fleet.identity import answers_for, stand_in_note
from ibdiag.fleet.node import CABLE, VERDICTS, NodeSummary
from ibdiag.fleet.outliers import find_outliers
from ibdiag.fleet.report import (
    READ_PROBLEMS_LISTED,
    FleetReport,
    FleetSettings,
    NodeGroup,
    Outlier,
    ReadProblem,
)
from ibdiag.fleet.switches import (
    blame_switches,
    fails,
    find_rail_misplacements,
    suspect_ports,
)
from ibdiag.hostlist import compress
from ibdiag.natural import natural_key

MISSING = "MISSING"
NOT_RUN = "NOT_RUN"
NO_REPORT = "no report"
UNEXPECTED = "answered, but no expectation (--expect-nodes, fleet-run.json) names it"
NO_REASON = "(no reason given)"


def analyze(
    nodes: Sequence[NodeSummary],
    settings: FleetSettings,
    expected: Optional[Sequence[str]] = None,
    read_problems: Sequence[ReadProblem] = (),
    duplicates: Sequence[NodeGroup] = (),
    not_run: Optional[Dict[str, str]] = None,
    conflicts: Sequence[NodeGroup] = (),
    expectations_unread: bool = False,
    now: Optional[datetime] = None,
    run_files: bool = False,
) -> FleetReport:
    """Everything the fleet report says about ``nodes`` (one summary per host).

    ``expected``: the nodes a report is expected from (None: no expectation); ``not_run``:
    those of them fleet run did not run, and why (Slurm's state); ``conflicts``: the nodes
    whose reports disagree (``ibdiag.fleet.identity``); ``expectations_unread``: a fleet run
    summary that should have said which nodes are expected could not be read; ``now``: the
    report's clock (``generated_at``); ``run_files``: ``expected`` is a fleet run's list, whose
    nodes answer only in ``DIR/<node>.json`` (``ibdiag.fleet.identity.answers_for``)."""
    wanted = set(expected or ())
    answers = [answers_for(node, run_files) & wanted for node in nodes]  # expected names
    strangers = [node for node, names in zip(nodes, answers) if expected is not None and not names]
    known = [node for node, names in zip(nodes, answers) if expected is None or names]
    outliers = unexplained(find_outliers(known, settings), known)
    switches = blame_switches(known, settings, outliers)
    on_suspect = suspect_ports(switches)
    counts = {verdict: 0 for verdict in (*VERDICTS, MISSING)}
    drain: Dict[str, Set[str]] = {}
    switch_suspect: Dict[str, Set[str]] = {}
    warnings: Dict[str, Set[str]] = {}
    unknown: Dict[str, Set[str]] = {}
    for node in nodes:
        counts[node.verdict] = counts.get(node.verdict, 0) + 1
        if node.verdict == "CRITICAL":
            group = switch_suspect if _on_suspect_switch(node, on_suspect) else drain
            _add(group, node.drain_reason or node.verdict_reason, node.host)
        elif node.verdict == "WARNING":
            _add(warnings, node.drain_reason or node.verdict_reason, node.host)
        elif node.verdict == "UNKNOWN":
            _add(unknown, node.verdict_reason or node.drain_reason, node.host)
    unanswered = wanted.difference(*answers)
    not_run = {node: why for node, why in (not_run or {}).items() if node in unanswered}
    absent = sorted(unanswered - set(not_run), key=natural_key)
    counts[MISSING] = len(absent)
    if not_run:
        counts[NOT_RUN] = len(not_run)
    missing = NodeGroup(reason=NO_REPORT, nodes=compress(absent), count=len(absent))
    not_run_groups: Dict[str, Set[str]] = {}
    for host, why in not_run.items():
        _add(not_run_groups, why, host)
    unexpected = [node.host for node in strangers]
    report = FleetReport(
        tool_version=__version__,
        generated_at=now or datetime.now(timezone.utc),
        settings=settings,
        verdict="UNKNOWN",
        verdict_reason="",
        nodes_read=sum(1 for node in nodes if not node.unread),
        counts=counts,
        drain=_groups(drain),
        switch_suspect=_groups(switch_suspect),
        warnings=_groups(warnings),
        unknown=_groups(unknown),
        missing=missing if absent else None,
        not_run=_groups(not_run_groups),
        unexpected=NodeGroup(reason=UNEXPECTED, nodes=compress(unexpected), count=len(unexpected))
        if unexpected
        else None,
        conflicts=list(conflicts),
        outliers=outliers,
        drift=find_drift(known, settings),
        switches=switches,
        rail_misplacements=find_rail_misplacements(known, settings),
        cable_lots=find_cable_lots(known, settings),
        read_problems=list(read_problems[:READ_PROBLEMS_LISTED]),
        read_problem_count=len(read_problems),
        duplicates=list(duplicates),
        read_notes=_stand_ins(strangers, wanted, run_files),
    )
    lost = sum(1 for node in nodes if node.unread and node.host in wanted)
    verdict, reason = _verdict(report, lost, expectations_unread)
    return report.model_copy(update={"verdict": verdict, "verdict_reason": reason})


def _stand_ins(
    strangers: Sequence[NodeSummary], wanted: Set[str], run_files: bool
) -> List[NodeGroup]:
    """A read note for each node that answers for no expected node although its host (or
    that host's first DNS label) is one: a report in a file not named for it."""
    notes = []
    for node in strangers:
        claimed = [name for name in (node.host, node.host.split(".", 1)[0]) if name in wanted]
        if claimed:
            notes.append(stand_in_note(node, claimed[0], run_files))
    return notes


def unexplained(outliers: Sequence[Outlier], nodes: Sequence[NodeSummary]) -> List[Outlier]:
    """The outliers a node's own checks did not already fail: a rail whose port or cable
    fails or errs is drained (or switch-suspect) for it, and a node-wide metric of a CRITICAL
    node adds nothing to its drain. Outliers are for the nodes that pass their own floor."""
    by_host = {node.host: node for node in nodes}
    kept = []
    for outlier in outliers:
        node = by_host.get(outlier.host)
        if node is None:
            kept.append(outlier)
            continue
        if outlier.rail is None:
            if node.verdict != "CRITICAL":
                kept.append(outlier)
            continue
        if not any(port.rail == outlier.rail and fails(port) for port in node.ports):
            kept.append(outlier)
    return kept


def _on_suspect_switch(node: NodeSummary, on_suspect: Set[Tuple[str, str]]) -> bool:
    """Whether every failing port of ``node`` lies on a suspect switch, and its drain reason
    names one of them (a node failing elsewhere too - another port, the node, an HCA - is
    drained: the switch does not explain it)."""
    failing = {port.target for port in node.ports if fails(port)}
    if (
        not failing
        or node.failing_elsewhere
        or any((node.host, target) not in on_suspect for target in failing)
    ):
        return False
    words = node.drain_reason.split(" ")
    named = words[1].split(CABLE, 1)[0] if len(words) > 1 else None
    return named in failing


def _add(groups: Dict[str, Set[str]], reason: str, host: str) -> None:
    groups.setdefault(reason or NO_REASON, set()).add(host)


def _groups(groups: Dict[str, Set[str]]) -> List[NodeGroup]:
    """Largest groups first, then by reason."""
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    return [
        NodeGroup(reason=reason, nodes=compress(hosts), count=len(hosts))
        for reason, hosts in ordered
    ]


def _verdict(
    report: FleetReport, expected_unread: int = 0, expectations_unread: bool = False
) -> Tuple[str, str]:
    """As ``FleetReport`` documents: CRITICAL, WARNING, OK, or UNKNOWN (no node read).

    ``expected_unread``: expected nodes whose only report could not be read. They are UNKNOWN
    nodes, listed with why, but their answer is lost as a missing node's is: CRITICAL, not a
    warning, so a fleet expecting them is never graded better for a truncated file. So is a
    fleet run summary that could not be read (``expectations_unread``): the nodes it expected
    are unknown, so a node that never answered cannot be named missing."""
    counts = report.counts
    unreadable = _count(report.read_problem_count, "unreadable input")
    lost_list = "the fleet run's list of expected nodes unreadable" if expectations_unread else ""
    if not report.nodes_read:
        missing = _count(counts[MISSING], "expected node") + " missing" if counts[MISSING] else ""
        return "UNKNOWN", _join(["no node report could be read", unreadable, missing, lost_list])
    critical = []
    if counts["CRITICAL"]:
        drained = sum(group.count for group in report.drain)
        suspect = sum(group.count for group in report.switch_suspect)
        split = f"{drained} to drain, {suspect} switch-suspect" if suspect else ""
        critical.append(
            _count(counts["CRITICAL"], "CRITICAL node") + (f" ({split})" if split else "")
        )
    if counts[MISSING]:
        critical.append(_count(counts[MISSING], "expected node") + " missing")
    if expected_unread:
        critical.append(_count(expected_unread, "expected node") + " with an unreadable report")
    critical.append(lost_list)
    if any(critical):
        return "CRITICAL", _join(critical)
    not_run = sum(group.count for group in report.not_run)
    warning = [
        _count(counts["WARNING"], "WARNING node"),
        _count(counts["UNKNOWN"], "UNKNOWN node"),
        _count(not_run, "expected node") + " not run" if not_run else "",
        _count(report.unexpected.count, "unexpected node") if report.unexpected else "",
        _count(len(report.conflicts), "node") + " with conflicting reports"
        if report.conflicts
        else "",
        _count(len(report.outliers), "outlier"),
        _count(len(merged_rails(report.drift)), "drifting attribute"),
        _count(len(report.rail_misplacements), "misplaced rail"),
        unreadable,
    ]
    if any(warning):
        return "WARNING", _join(warning)
    return "OK", _count(counts["OK"], "node") + " OK"


def _count(number: int, noun: str) -> str:
    """``3 outliers``; "" for none."""
    return f"{number} {noun}{'' if number == 1 else 's'}" if number else ""


def _join(parts: List[str]) -> str:
    return ", ".join(part for part in parts if part)
