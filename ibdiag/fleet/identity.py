"""Which reports are one node, and what each node is called.

Healthy looks like: one report per node, each saying its own host name: every report is a
node, named by its host. Two reports saying the same host name are not proof of one machine:
cloned images, and hosts whose kernel calls itself ``localhost``, are real. So reports that
share a host name are **the same node only when the evidence says so**:

- they share an RDMA device's node GUID (burnt into the HCA; all-zero GUIDs name nothing), or
- they share the kernel's boot id (random at every boot), or
- they are read from report files of the same node name (``DIR/<node>.json`` of two runs: the
  name is the scheduler's, so it holds across a reboot, on a node whose HCAs are gone, and for
  the chassis that replaced a broken one).

Otherwise they are different machines. The same node read more than once keeps its newest
report (``collected_at``; one that says when beats one that does not; a tie goes to the one
given last) and is listed with its sources (``duplicates``) - with two exceptions, as any node
can write a report saying any host name, and read the HCA GUIDs of others off the fabric:

- a report whose file names its host (``gpu031.json`` saying gpu031, or gpu031.example.com)
  is never replaced by one whose file does not (``zz.json`` saying gpu031, a bundle), nor by one
  whose file's name only holds the host as a word (``naming``: ``gpu031-old.json``);
- a ``collected_at`` later than the fleet report's own clock (``now``) plus ``FUTURE_SKEW`` is
  no time to trust: such a report never wins by it (it ranks below a report of unknown time).

Where these rules, not the newest time, chose the report and the newest says another verdict,
the reports are in *conflict*: the node keeps the worse of the two verdicts (a report that
hides a sick node never hides it; one that frames a healthy node is looked at) and is listed
(``Identified.conflicts``).

Different machines with one host name are each named by their report file's name where that
is a valid node name (``fleet run`` writes ``DIR/<Slurm node>.json``, the clush recipe
``$(hostname -s).json``), one read note per host name saying so. A file that names no node (a
bundle) or a node another report already is gets the host name, or failing that the name
numbered: ``localhost-2``, ``gpu001-2``.

The same notion says which expected node a report answers for (``answers_for``): the one
its file is named for. A fleet run writes each node's report to ``DIR/<node>.json``, so against
its list only that file answers for the node; against a list given by hand (``--expect-nodes``)
a report answers for its host too where its file's name holds that host as a word
(``gpu031-20261127.json``, the bundle ``ibdiag-gpu031-20261127T101500Z.tar.gz``). A report
under any other name (``zz-evil.json`` saying gpu031) answers for no node: no file can make an
expected node that never answered present.

An input that could not be read but is ``<node>.json`` still names a node: that node counts as
UNKNOWN (``unreadable_nodes``: its report could not be read, and why) unless another input
gave it a report - a truncated ``gpu004.json`` is a node to look at, not one fewer node.

Memory: one entry per machine (its newest summary, its sources, its GUIDs and boot ids), never
every report. Cost: per report, a look at the machines already seen under its host name.
"""

from __future__ import annotations

import itertools
import os
import re
from datetime import datetime, timedelta, timezone
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Set, Tuple

from ibdiag.fleet.node import NODE_NAME, NodeSummary
from ibdiag.fleet.report import NodeGroup, ReadProblem
from ibdiag.hostlist import compress
from ibdiag.natural import natural_key

REPORT_SUFFIX = ".json"
# What a bundle tarball's name ends with (``ibdiag collect --tarball`` writes ``.tar.gz``).
TARBALL_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
# How well a report's file names the host the report says (``naming``), best last.
NAMES_NO_HOST, HOLDS_HOST, NAMED_FOR_HOST = 0, 1, 2
# What separates the words of a file's name around a host name in it.
_WORD_EDGE = "-_."
UNREADABLE = "its report could not be read"
_SOURCES_SHOWN = 5
# How far a node's clock may run ahead of the one making the fleet report (NTP keeps them
# within a second; a node booted before its clock was set, minutes): beyond, a report's time
# is not believed.
FUTURE_SKEW = timedelta(minutes=5)
# Worse verdicts last: a conflict keeps the worse (UNKNOWN is no better than a warning).
_VERDICT_ORDER = ("OK", "WARNING", "UNKNOWN", "CRITICAL")


class Identified(NamedTuple):
    """One summary per node, the nodes read more than once, and the read notes of host names
    that several machines share."""

    nodes: List[NodeSummary]
    duplicates: List[NodeGroup]
    notes: List[NodeGroup]


def naming(summary: NodeSummary) -> int:
    """How well the report's file names the host it says (or that host's first DNS label):
    ``NAMED_FOR_HOST``, the file is ``<host>.json`` (``gpu031.json`` saying gpu031 or
    gpu031.cluster.example); ``HOLDS_HOST``, the file's name less ``.json`` or a tarball's
    suffix holds the host as a whole word - at its start or end or between ``-``, ``_`` or
    ``.`` (``gpu031-20261127.json``, ``2026-11-27_gpu031.json``, the bundle
    ``ibdiag-gpu031-20261127T101500Z.tar.gz``, not ``zzgpu031.json``); else ``NAMES_NO_HOST``
    (``zz-evil.json``)."""
    hosts = {summary.host, summary.host.split(".", 1)[0]}
    if file_node_name(summary.source) in hosts:
        return NAMED_FOR_HOST
    stem = _stem(summary.source)
    edge = re.escape(_WORD_EDGE)
    for host in hosts:
        if re.search(f"(?:^|[{edge}]){re.escape(host)}(?:[{edge}]|$)", stem):
            return HOLDS_HOST
    return NAMES_NO_HOST


def answers_for(node: NodeSummary, run_files: bool) -> Set[str]:
    """The expected nodes ``node`` may answer for (the module docstring): its report file's
    node name (``gpu004`` of ``DIR/gpu004.json``: fleet run names the file for the Slurm node,
    whose kernel may call itself otherwise); and unless the expectation is a fleet run's
    (``run_files``: its nodes write ``DIR/<node>.json`` and nothing else), its host and that
    host's first DNS label (Slurm names nodes short) where its file's name holds the host."""
    names: Set[str] = set()
    named = file_node_name(node.source)
    if named:
        names.add(named)
    if not run_files and naming(node) != NAMES_NO_HOST:
        names.update((node.host, node.host.split(".", 1)[0]))
    return names


def stand_in_note(node: NodeSummary, claimed: str, run_files: bool) -> NodeGroup:
    """The read note of a report that says it is the expected node ``claimed`` but answers
    for no node (``answers_for``): ``zz-evil.json says host gpu0011, an expected node, but
    ...: it answers for no node``."""
    if run_files:
        why = f"fleet run writes that node's report to {claimed}{REPORT_SUFFIX}"
    else:
        why = "its file's name does not hold that host as a word"
    name = os.path.basename(node.source.rstrip("/"))
    return NodeGroup(
        reason=f"{name} says host {node.host}, an expected node, but {why}: it answers for no node",
        nodes=node.host,
        count=1,
    )


def is_future(value: Optional[datetime], now: datetime) -> bool:
    """Whether ``value`` (naive: UTC) is later than ``now`` plus ``FUTURE_SKEW``."""
    return value is not None and _when(value)[1] > _when(now)[1] + FUTURE_SKEW.total_seconds()


def file_node_name(source: str) -> Optional[str]:
    """The node a report file names: ``gpu001`` of ``DIR/gpu001.json``; None for a file that
    names none (a bundle, a name a node cannot have)."""
    base = os.path.basename(source.rstrip("/"))
    if not base.endswith(REPORT_SUFFIX):
        return None
    name = base[: -len(REPORT_SUFFIX)]
    return name if NODE_NAME.fullmatch(name) else None


def _stem(source: str) -> str:
    """``ibdiag-gpu031-20261127T101500Z`` of ``DIR/ibdiag-gpu031-20261127T101500Z.tar.gz``:
    the file's name less ``.json`` or a tarball's suffix."""
    base = os.path.basename(source.rstrip("/"))
    for suffix in (REPORT_SUFFIX, *TARBALL_SUFFIXES):
        if base.lower().endswith(suffix):
            return base[: -len(suffix)]
    return base


def names_taken(nodes: Sequence[NodeSummary]) -> Set[str]:
    """The names ``nodes`` go by: each one's host, that host's first DNS label (Slurm names
    nodes short, a kernel may say gpu001.cluster.example) and its report file's node name."""
    names: Set[str] = set()
    for node in nodes:
        names.add(node.host)
        names.add(node.host.split(".", 1)[0])
        named = file_node_name(node.source)
        if named:
            names.add(named)
    return names


def deduplicate(summaries: Iterable[NodeSummary]) -> Identified:
    """The nodes of ``summaries`` (see the module docstring), in the order first seen."""
    machines = Machines()
    for summary in summaries:
        machines.add(summary)
    return machines.result()


def unreadable_nodes(
    problems: Sequence[ReadProblem], nodes: Sequence[NodeSummary]
) -> List[NodeSummary]:
    """An UNKNOWN node (``unread``) for each input that could not be read but is
    ``<node>.json``, unless a node of ``nodes`` goes by that name (``names_taken``). Its reason is
    the problem's line less its parenthesised detail (``truncated JSON``, not the byte it ends
    at: the detail stays in the problem's line), so such nodes group."""
    answered = names_taken(nodes)
    found: Dict[str, NodeSummary] = {}
    for problem in problems:
        name = file_node_name(problem.source)
        if name is None or name in answered or name in found:
            continue
        found[name] = NodeSummary(
            host=name,
            source=problem.source,
            level="?",
            tool_version="?",
            schema_version=0,
            verdict="UNKNOWN",
            verdict_reason=f"{UNREADABLE}: {_gist(problem.reason)}",
            unread=True,
        )
    return list(found.values())


def _gist(reason: str) -> str:
    """``truncated JSON`` of ``truncated JSON (it ends inside a value, at byte 812)``."""
    if reason.endswith(")") and " (" in reason:
        return reason[: reason.rindex(" (")]
    return reason


# --- machines ---------------------------------------------------------------------------------


class _Machine:
    """The reports one machine gave: the newest, every source, and what identifies it."""

    def __init__(self, summary: NodeSummary, key: tuple, newest: tuple) -> None:
        self.best: Tuple[tuple, NodeSummary] = (key, summary)
        self.newest: Tuple[tuple, NodeSummary] = (newest, summary)  # by time alone
        self.sources: List[str] = []
        self.guids: Set[str] = set()
        self.boot_ids: Set[str] = set()
        self.file_names: Set[str] = set()
        self.add(summary, key, newest)

    @property
    def summary(self) -> NodeSummary:
        """The report the node is judged by: the best ranked, or in a conflict the worse."""
        if self.in_conflict:
            return max(self.best[1], self.newest[1], key=_badness)
        return self.best[1]

    @property
    def in_conflict(self) -> bool:
        """The newest report by time alone was not the one ranked best, and says another
        verdict (the module docstring)."""
        chosen, newest = self.best[1], self.newest[1]
        return chosen is not newest and chosen.verdict != newest.verdict

    def is_it(self, summary: NodeSummary) -> bool:
        """Whether the evidence says ``summary`` is this machine's (the module docstring)."""
        if not self.guids.isdisjoint(summary.guids):
            return True
        if summary.boot_id and summary.boot_id in self.boot_ids:
            return True
        name = file_node_name(summary.source)
        return name is not None and name in self.file_names

    def add(self, summary: NodeSummary, key: tuple, newest: tuple) -> None:
        self.sources.append(summary.source)
        self.guids.update(summary.guids)
        if summary.boot_id:
            self.boot_ids.add(summary.boot_id)
        name = file_node_name(summary.source)
        if name:
            self.file_names.add(name)
        if key > self.best[0]:
            self.best = (key, summary)
        if newest > self.newest[0]:
            self.newest = (newest, summary)

    def merge(self, other: _Machine) -> None:
        self.sources += other.sources
        self.guids |= other.guids
        self.boot_ids |= other.boot_ids
        self.file_names |= other.file_names
        if other.best[0] > self.best[0]:
            self.best = other.best
        if other.newest[0] > self.newest[0]:
            self.newest = other.newest


class Machines:
    """The machines seen so far, by the host name their reports say."""

    def __init__(self, now: Optional[datetime] = None) -> None:
        self.by_host: Dict[str, List[_Machine]] = {}
        self.count = 0
        self.now = now or datetime.now(timezone.utc)

    def add(self, summary: NodeSummary) -> None:
        self.count += 1
        newest = (*_when(summary.collected_at), self.count)
        # A time beyond the clock ranks below an unknown one; a file named for its host first
        # (``naming``: ``<host>.json``, then a name holding the host, then any other).
        when = (0, 0, 0.0) if is_future(summary.collected_at, self.now) else (1, *newest[:2])
        key = (naming(summary), *when, self.count)
        machines = self.by_host.setdefault(summary.host, [])
        matching = [machine for machine in machines if machine.is_it(summary)]
        if not matching:
            machines.append(_Machine(summary, key, newest))
            return
        machine = matching[0]
        for other in matching[1:]:  # one report can tie machines seen apart (a GUID, a boot id)
            machine.merge(other)
            machines.remove(other)
        machine.add(summary, key, newest)

    def conflicts(self) -> List[NodeGroup]:
        """One group per node whose reports conflict (the module docstring), saying which
        reports and what was kept: ``gpu031.json (CRITICAL, collected T) and zz.json (OK,
        collected U) say they are gpu031: kept the worse, CRITICAL``."""
        found = []
        for machine, name in self._named():
            if machine.in_conflict:
                chosen, newest = machine.best[1], machine.newest[1]
                found.append(
                    NodeGroup(
                        reason=(
                            f"{_described(chosen, self.now)} and {_described(newest, self.now)}"
                            f" say they are {chosen.host}: kept the worse, "
                            f"{machine.summary.verdict}"
                        ),
                        nodes=name,
                        count=1,
                    )
                )
        return found

    def _named(self) -> List[Tuple[_Machine, str]]:
        """Every machine with the name it goes by (``_names`` where a host name is shared)."""
        taken = {host for host, machines in self.by_host.items() if len(machines) == 1}
        named: List[Tuple[_Machine, str]] = []
        for host, machines in self.by_host.items():
            names = [machine.summary.host for machine in machines]
            if len(machines) > 1:
                names = _names(host, machines, taken)
            named += zip(machines, names)
        return named

    def result(self) -> Identified:
        taken = {host for host, machines in self.by_host.items() if len(machines) == 1}
        nodes: List[NodeSummary] = []
        duplicates: List[NodeGroup] = []
        notes: List[NodeGroup] = []
        for host, machines in self.by_host.items():
            names = [machine.summary.host for machine in machines]
            if len(machines) > 1:
                names = _names(host, machines, taken)
                notes.append(_note(host, machines, names))
            for machine, name in zip(machines, names):
                node = machine.summary
                if name != node.host:
                    node = node.model_copy(update={"host": name})
                nodes.append(node)
                if len(machine.sources) > 1:
                    duplicates.append(_duplicate(name, machine))
        return Identified(nodes, duplicates, notes)


def _names(host: str, machines: Sequence[_Machine], taken: Set[str]) -> List[str]:
    """Each machine's name: its report file's (the newest's) where that names a node no other
    node has; else the host name, then ``<file's or host name>-2``, ``-3`` ... until free."""
    names = []
    for machine in machines:
        base = file_node_name(machine.summary.source)
        candidates = itertools.chain(
            [base or host], (f"{base or host}-{n}" for n in itertools.count(2))
        )
        name = next(candidate for candidate in candidates if candidate not in taken)
        taken.add(name)
        names.append(name)
    return names


def _note(host: str, machines: Sequence[_Machine], names: Sequence[str]) -> NodeGroup:
    """``gpu001.json, gpu002.json both say host localhost: named by their file names``."""
    files = [os.path.basename(machine.summary.source.rstrip("/")) for machine in machines]
    shown = ", ".join(files[:_SOURCES_SHOWN])
    if len(files) > _SOURCES_SHOWN:
        shown += f" and {len(files) - _SOURCES_SHOWN} more"
    said = "both say" if len(files) == 2 else f"all {len(files)} say"
    numbered = [
        name
        for machine, name in zip(machines, names)
        if name != file_node_name(machine.summary.source)
    ]
    how = "named by their file names"
    if numbered:
        how += f", or numbered where a file names no free node: {', '.join(numbered)}"
    return NodeGroup(
        reason=f"{shown} {said} host {host}: {how}",
        nodes=compress(sorted(names, key=natural_key)),
        count=len(names),
    )


def _duplicate(name: str, machine: _Machine) -> NodeGroup:
    """``3 reports: used B (collected T), not A, C``."""
    used = machine.summary
    others = list(machine.sources)
    others.remove(used.source)
    shown = ", ".join(others[:_SOURCES_SHOWN])
    more = len(others) - _SOURCES_SHOWN
    when = used.collected_at.isoformat() if used.collected_at else "time unknown"
    reason = (
        f"{len(machine.sources)} reports: used {used.source} (collected {when}), not {shown}"
        + (f" and {more} more" if more > 0 else "")
    )
    return NodeGroup(reason=reason, nodes=name, count=1)


def _badness(summary: NodeSummary) -> int:
    verdict = summary.verdict
    return _VERDICT_ORDER.index(verdict) if verdict in _VERDICT_ORDER else len(_VERDICT_ORDER)


def _described(summary: NodeSummary, now: datetime) -> str:
    """``zz.json (OK, collected 2099-01-01T00:00:00+00:00, after this report's clock)``."""
    when = summary.collected_at.isoformat() if summary.collected_at else "time unknown"
    if is_future(summary.collected_at, now):
        when += ", after this report's clock"
    return f"{os.path.basename(summary.source.rstrip('/'))} ({summary.verdict}, collected {when})"


def _when(value: Optional[datetime]) -> Tuple[int, float]:
    """A sort key: known times (naive ones taken as UTC) after unknown ones."""
    if value is None:
        return (0, 0.0)
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return (1, value.timestamp())
