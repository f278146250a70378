"""The partition keys of each InfiniBand port: the partitions the site expects, and the same
ones on every InfiniBand port of the node."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Dict, Iterator, List, Optional, Tuple

from ibdiag.check_results import about
from ibdiag.facts.partitions import PKeyTable, pkey_text
from ibdiag.model import Device, Port, Result, Snapshot, Status
from ibdiag.registry import check
from ibdiag.targets import ACTIVE, graded_ports
from ibdiag.thresholds import Thresholds

_LEFT_OUT_HINT = (
    "the subnet manager's partition configuration leaves this port out (opensm: "
    "partitions.conf; UFM: its PKey membership): add the port's GUID, or move the job to "
    "the partition the port has"
)


def table_of(port: Port) -> Optional[PKeyTable]:
    """The port's partition table fact, typed (None: not read, e.g. a capture without it)."""
    table = port.facts.get("pkeys")
    return table if isinstance(table, PKeyTable) else None


@check("partition.pkeys", title="Port holds the expected partition keys", needs={"sysfs"})
def partition_pkeys(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: every ACTIVE InfiniBand port's partition table (sysfs ``ports/N/pkeys/``) holds
    each key of ``expect_pkeys`` with its membership (0x8001: full member of partition 1), and
    the node's InfiniBand ports hold the same keys (with ``subnets_per_rail``: the same keys
    as the ports on the same SM).

    Why it matters: the subnet manager decides which partitions a port belongs to. A port left
    out of the job's partition is ACTIVE with clean counters and still cannot reach its peers:
    NCCL's connections time out or hang (SemiAnalysis ClusterMAX and UFM's fabric validation
    both check PKey consistency). A limited member (0x0001) cannot talk to other limited
    members; an empty table means the SM gave the port no partition at all.

    What to do: a key missing or limited: fix the SM's partition configuration (opensm
    partitions.conf, UFM PKey membership) for the port's GUID and let it re-sweep; a port that
    differs from the node's others: the same, or its cable is on another subnet.
    """
    verdicts: List[Result] = []
    tables: List[Tuple[Device, Port, PKeyTable]] = []
    for dev, port in graded_ports(snap, th):
        if not port.is_infiniband:
            continue  # RoCE ports carry the default key only; partitions are VLANs there
        result = about(dev.target(port), [f"{port.path}/pkeys"])
        table = table_of(port)
        if table is None:
            verdicts.append(result(status=Status.SKIP, message="no pkeys table in sysfs"))
            continue
        if port.state != ACTIVE:
            verdicts.append(
                result(
                    status=Status.SKIP,
                    message="port not ACTIVE: its table is the SM's to set (link.state grades it)",
                )
            )
            continue
        verdict = _own_table(result, table, th)
        if verdict.status == Status.PASS:
            tables.append((dev, port, table))
        verdicts.append(verdict)
    differing = {warning.target: warning for warning in _consistency(tables, th)}
    for verdict in verdicts:  # one result per port: a port that differs warns instead of passing
        yield differing.get(verdict.target, verdict)


def _own_table(result, table: PKeyTable, th: Thresholds) -> Result:
    held = " ".join(table.texts()) or "none"
    if not table.keys:
        why = f" ({'; '.join(table.problems)})" if table.problems else ""
        return result(
            status=Status.FAIL if not table.problems else Status.WARN,
            message=f"the partition table holds no key{why}",
            observed="none",
            expected=" ".join(th.expect_pkeys) or "a partition key",
            subject="no pkey",
            hint=_LEFT_OUT_HINT,
        )
    for wanted_text in th.expect_pkeys:
        wanted = int(wanted_text, 16)
        if table.entry(wanted) is not None:
            continue
        same_partition = table.of_partition(wanted)
        if same_partition is not None:
            kind = "full" if same_partition.full_member else "limited"
            return result(
                status=Status.FAIL,
                message=f"holds {same_partition.text} ({kind} member) at index "
                f"{same_partition.index} where {pkey_text(wanted)} is expected",
                observed=held,
                expected=pkey_text(wanted),
                subject=f"pkey {pkey_text(wanted)} {kind}",
                hint="the SM gives this port the wrong membership: " + _LEFT_OUT_HINT,
            )
        return result(
            status=Status.FAIL,
            message=f"partition key {pkey_text(wanted)} missing (the table holds {held})",
            observed=held,
            expected=pkey_text(wanted),
            subject=f"pkey {pkey_text(wanted)} missing",
            hint=_LEFT_OUT_HINT,
        )
    if table.problems:
        return result(
            status=Status.WARN,
            message=f"holds {held}; unreadable slots: {'; '.join(table.problems[:3])}",
            observed=held,
            hint="read the pkeys files by hand; a driver that cannot report its table is suspect",
        )
    return result(status=Status.PASS, message=f"holds {held}", observed=held)


def _consistency(tables: List[Tuple[Device, Port, PKeyTable]], th: Thresholds) -> Iterator[Result]:
    """Ports whose set of keys differs from most of the node's (per SM with
    ``subnets_per_rail``) warn, naming what the others hold."""
    groups: Dict[Optional[int], List[Tuple[Device, Port, PKeyTable]]] = defaultdict(list)
    for dev, port, table in tables:
        groups[port.sm_lid if th.subnets_per_rail else None].append((dev, port, table))
    for members in groups.values():
        sets = Counter(frozenset(table.texts()) for _, _, table in members)
        if len(sets) < 2:
            continue
        usual, count = sets.most_common(1)[0]
        usual_text = " ".join(sorted(usual)) or "none"
        for dev, port, table in members:
            mine = frozenset(table.texts())
            if mine == usual:
                continue
            only_mine = " ".join(sorted(mine - usual)) or "-"
            lacking = " ".join(sorted(usual - mine)) or "-"
            yield Result(
                target=dev.target(port),
                status=Status.WARN,
                message=f"holds {' '.join(table.texts())} while {count} of the node's other "
                f"InfiniBand ports hold {usual_text} (lacks {lacking}; extra {only_mine})",
                observed=" ".join(table.texts()),
                expected=usual_text,
                subject="pkeys differ",
                hint=_LEFT_OUT_HINT,
                evidence=[f"{port.path}/pkeys"],
            )
