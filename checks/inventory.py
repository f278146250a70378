"""HCA inventory: the RDMA devices this node should have are all there."""

from __future__ import annotations

from typing import Iterator

from ibdiag.check_results import about
from ibdiag.model import INFINIBAND_CLASS, Result, Snapshot, Status
from ibdiag.registry import check
from ibdiag.targets import graded_devices
from ibdiag.thresholds import Thresholds


@check("hca.inventory", title="Expected InfiniBand HCAs are present", needs={"sysfs"})
def inventory(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: every expected HCA is listed under /sys/class/infiniband.

    Why it matters: an HCA that vanished (firmware fatal error, PCIe link loss, driver not
    loaded) takes its rail out of every job on the node; NCCL silently uses fewer rails or
    fails at init.

    What to do: check `lspci -d 15b3:` sees the card, `dmesg` for mlx5_core errors, and that
    mlx5_ib/ib_core are loaded. Set the expectation with --expect-hcas N (or names).
    """
    present = [dev.name for dev in graded_devices(snap, th)]
    where = f"{snap.sysfs_root.rstrip('/')}/{INFINIBAND_CLASS}"
    missing_names = [name for name in th.expect_hca_names if name not in present]
    named = len(th.expect_hca_names)
    for name in missing_names:
        yield Result(
            target=name,
            status=Status.FAIL,
            message=f"expected HCA {name} is missing from {where}",
            observed="missing",
            expected="present",
            subject=f"{named - len(missing_names)}/{named} HCAs, {name} missing",
            hint="check lspci for the card, dmesg for mlx5_core errors, and the driver is loaded",
            evidence=[INFINIBAND_CLASS],
        )
    expected = th.expect_hcas
    if not present:
        if not missing_names:  # named HCAs were already reported one by one
            problem = snap.problems.get(INFINIBAND_CLASS)
            yield Result(
                target="node",
                status=Status.FAIL if expected else Status.SKIP,
                message=f"no InfiniBand devices found under {where}"
                + (f" ({problem})" if problem else "")
                + (f"; expected {expected}" if expected else ""),
                observed=0,
                expected=expected,
                subject=f"0/{expected} HCAs" if expected else None,
                hint="check lspci -d 15b3: sees the cards and mlx5_core/mlx5_ib are loaded; "
                "dmesg for firmware or PCIe errors"
                if expected
                else "no RDMA driver loaded, or not an InfiniBand node",
                evidence=[INFINIBAND_CLASS],
            )
        return
    listing = ", ".join(present)
    result = about("node", [INFINIBAND_CLASS], observed=len(present), expected=expected)
    if expected is not None and len(present) < expected:
        yield result(
            status=Status.FAIL,
            message=f"found {len(present)} of {expected} expected HCAs ({listing})",
            subject=f"{len(present)}/{expected} HCAs",
            hint="a missing HCA: check lspci, dmesg for mlx5_core/PCIe errors, driver loaded",
        )
    elif expected is not None and len(present) > expected:
        yield result(
            status=Status.WARN,
            message=f"found {len(present)} HCAs, more than the {expected} expected ({listing})",
            subject=f"{len(present)}/{expected} HCAs",
            hint="update the expected count, or ignore non-InfiniBand devices (--ignore-hca)",
        )
    elif not missing_names:
        yield result(status=Status.PASS, message=f"{len(present)} HCAs present ({listing})")
