"""The driver stack's inventory (ibstat, ibv_devinfo) against what sysfs lists."""

from __future__ import annotations

from typing import Iterator, List, Set

from ibdiag.command_results import symptom, symptom_result, usable_run
from ibdiag.model import Result, Snapshot, Status
from ibdiag.registry import check
from ibdiag.sources.parsers import IBSTAT_ARGV, IBV_DEVINFO_ARGV
from ibdiag.thresholds import Thresholds


def _listed(tool: str, text: str):
    """(HCA names the tool printed, the first problem or error it had, if any)."""
    # Loaded when a standard-level check runs: a quick run only registers this module.
    from ibdiag.sources.parsers.ibstat import parse_ibstat_report
    from ibdiag.sources.parsers.ibv_devinfo import parse_ibv_devinfo_report

    if tool == "ibstat":
        report = parse_ibstat_report(text)
        names = {ca.name for ca in report.cas}
    else:
        report = parse_ibv_devinfo_report(text)
        names = {dev.hca_id for dev in report.devices}
    return names, report.error or (report.problems[0] if report.problems else None)


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
    for tool, argv in (("ibstat", IBSTAT_ARGV), ("ibv_devinfo", IBV_DEVINFO_ARGV)):
        run, why = usable_run(snap, list(argv))
        if run is None:
            failed = snap.command(list(argv))
            # Failing while sysfs lists HCAs is the stack not seeing what the kernel has.
            what = symptom(failed, failing_counts=bool(graded))
            if failed is not None and what:
                listed = f"the {len(graded)} HCAs sysfs lists" if graded else "this node"
                stack = "management (umad/MAD)" if tool == "ibstat" else "verbs"
                yield symptom_result(
                    "node", failed, what, listed, f"a hung or broken {stack} stack?",
                    "check that ib_umad/ib_uverbs/mlx5_ib are loaded and /dev/infiniband/* is "
                    "accessible; the kernel log for mlx5 errors",
                )  # fmt: skip
                continue
            yield Result(target="node", status=Status.SKIP, message=str(why), evidence=[tool])
            continue
        names, trouble = _listed(tool, run.stdout)
        if not names and (trouble or in_sysfs):
            # Nothing parseable: garbage output is no evidence that HCAs are missing.
            yield Result(target="node", status=Status.SKIP,
                         message=f"{tool} output lists no HCA ({trouble or 'empty'})",
                         evidence=[tool])  # fmt: skip
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
                hint="check that ib_umad/ib_uverbs/mlx5_ib are loaded and /dev/infiniband/* "
                "is accessible",
                evidence=[tool, "class/infiniband"],
            )  # fmt: skip
        else:
            yield Result(target="node", status=Status.PASS,
                         message=f"{tool} lists the same {len(listed)} HCAs as sysfs",
                         evidence=[tool, "class/infiniband"])  # fmt: skip
