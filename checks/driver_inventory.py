"""The driver stack's inventory (ibstat, ibv_devinfo) against what sysfs lists."""

from __future__ import annotations

from typing import Iterator, List, Optional, Set

from ibdiag.facts.inventory import Listing
from ibdiag.model import Result, Snapshot, Status
from ibdiag.outcome_results import symptom_result
from ibdiag.registry import check
from ibdiag.thresholds import Thresholds

# (the tool, the stack it speaks for)
_TOOLS = (
    ("ibstat", "management (umad/MAD)"),
    ("ibv_devinfo", "verbs"),
)
_HINT = "check that ib_umad/ib_uverbs/mlx5_ib are loaded and /dev/infiniband/* is accessible"


def _listing(snap: Snapshot, tool: str) -> Optional[Listing]:
    return getattr(snap.inventory, tool) if snap.inventory is not None else None


@check(
    "hca.driver_inventory",
    title="ibstat and ibv_devinfo list the same HCAs as sysfs",
    needs={"ibstat", "ibv_devinfo", "sysfs"},
    level="standard",
)
def driver_inventory(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: every HCA under /sys/class/infiniband is listed by ibstat (umad/MAD stack) and
    ibv_devinfo (verbs stack), and they list nothing sysfs lacks.

    Why it matters: an HCA that sysfs shows but verbs cannot open is invisible to NCCL and MPI;
    one that ibstat misses has no management (MAD) access - perfquery and the SM cannot reach it.

    An ibstat or ibv_devinfo that hangs, crashes, cannot execute, or fails while sysfs lists
    HCAs warns, naming the command; not installed or no permission is a skip.

    What to do: check that ib_umad, ib_uverbs and mlx5_ib are loaded (lsmod), that
    /dev/infiniband/* exist and are accessible, and rdma-core's version matches the kernel.
    """
    in_sysfs: Set[str] = {dev.name for dev in snap.devices}
    graded = sorted(name for name in in_sysfs if not th.ignores(name))
    for tool, stack in _TOOLS:
        listing = _listing(snap, tool)
        outcome = listing.outcome if listing is not None else None
        command = outcome.command if outcome is not None else tool
        if listing is None:
            yield Result(target="node", status=Status.SKIP,
                         message=f"`{tool}` was not collected (level quick, or not planned here)",
                         evidence=[command])  # fmt: skip
            continue
        if listing.unusable is not None:
            # Failing while sysfs lists HCAs is the stack not seeing what the kernel has.
            what = outcome.symptom(failing_counts=bool(graded)) if outcome is not None else None
            if outcome is not None and what:
                where = f"the {len(graded)} HCAs sysfs lists" if graded else "this node"
                yield symptom_result(
                    "node", outcome, what, where, f"a hung or broken {stack} stack?",
                    f"{_HINT}; the kernel log for mlx5 errors",
                )  # fmt: skip
                continue
            yield Result(target="node", status=Status.SKIP, message=listing.unusable,
                         evidence=[command])  # fmt: skip
            continue
        names = {ca.name for ca in listing.cas}
        trouble = listing.error or (listing.problems[0] if listing.problems else None)
        if not names and (trouble or in_sysfs):
            # Nothing parseable: garbage output is no evidence that HCAs are missing.
            yield Result(target="node", status=Status.SKIP,
                         message=f"{tool} output lists no HCA ({trouble or 'empty'})",
                         evidence=[command])  # fmt: skip
            continue
        listed = {name for name in names if not th.ignores(name)}
        wanted = {name for name in in_sysfs if not th.ignores(name)}
        problems: List[str] = []
        if wanted - listed:
            problems.append(f"missing from {tool}: {', '.join(sorted(wanted - listed))}")
        if listed - wanted:
            problems.append(f"not in sysfs: {', '.join(sorted(listed - wanted))}")
        if problems:
            yield Result(
                target="node", status=Status.WARN,
                message=f"{tool} and sysfs disagree: " + "; ".join(problems),
                observed=", ".join(sorted(listed)), expected=", ".join(sorted(wanted)),
                hint=_HINT, evidence=[command, "class/infiniband"],
            )  # fmt: skip
        else:
            yield Result(target="node", status=Status.PASS,
                         message=f"{tool} lists the same {len(listed)} HCAs as sysfs",
                         evidence=[command, "class/infiniband"])  # fmt: skip
