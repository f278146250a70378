"""How much bandwidth a healthy port must deliver in the active tests (level full).

A port can be ACTIVE, at full rate and error-free and still move half its traffic (a PCIe slot
trained at x8, a wrong NUMA pinning, a firmware bug); only moving traffic shows it. The floor
is the profile's number when it has one (Azure's node health checks: 380 Gb/s per ND H100 v5
HCA with GPUDirect RDMA, 180 on ND A100 v4, 390 without a GPU on HBv4), else a fraction of the
port's own link rate (``perftest_min_fraction``, 90% by default: an ib_write_bw loopback on a
healthy HDR port gives 95-98% of 200 Gb/s).

The collection (one retry of a run below its floor) and the check use the same function, so a
run is retried exactly when it would fail; they share each run's own timeout the same way.
"""

from __future__ import annotations

from typing import Optional, Tuple

from ibdiag.thresholds import Thresholds

STARTUP_ALLOWANCE_S = 30.0  # beyond -D: connection setup, warm-up, memory registration


def perftest_timeout_s(thresholds: Thresholds) -> float:
    """An ib_write_bw process's own timeout: its timed run (``perftest_duration_s``, -D) and
    the start-up allowance. The collection kills a run past it (``ibdiag.families.loopback``);
    the check tells a run killed sooner - by the run's deadline or --command-timeout, a limit the
    caller chose - from one that hung on its own."""
    return thresholds.perftest_duration_s + STARTUP_ALLOWANCE_S


def perftest_floor(
    link_rate_gbps: Optional[float], thresholds: Thresholds, gdr: bool
) -> Tuple[Optional[float], str]:
    """(least Gb/s, where that number comes from); (None, why) when nothing to judge by."""
    floor = thresholds.perftest_gdr_floor_gbps if gdr else thresholds.perftest_floor_gbps
    if floor is not None:
        which = "perftest_gdr_floor_gbps" if gdr else "perftest_floor_gbps"
        return floor, f"{which} {floor:g} Gb/s"
    if link_rate_gbps:
        fraction = thresholds.perftest_min_fraction
        return (
            round(link_rate_gbps * fraction, 1),
            f"{fraction:.0%} of the {link_rate_gbps:g} Gb/s link rate",
        )
    return None, "no floor configured and the link rate is unknown"


def below_floor(gbps: Optional[float], floor: Optional[float]) -> bool:
    """A run that gave no number counts as below any floor."""
    return floor is not None and (gbps is None or gbps < floor)
