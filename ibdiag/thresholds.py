"""What a healthy node is expected to look like: HCAs, link rate, devices to ignore, counter rules.

Thresholds are plain validated data handed to every check. They are built in layers - the
counter catalogue's defaults, then a profile (ibdiag/profiles/*.toml), then the site config
(/etc/ibdiag/ibdiag.toml), then command-line flags - by ibdiag.config. The field names are the
keys of those TOML files.
"""

from __future__ import annotations

import fnmatch
from typing import Dict, List, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

Severity = Literal["fail", "warn", "info"]


class CounterRule(BaseModel):
    """How one counter is graded. Unset fields keep the catalogue's default for that counter.

    - ``on_increase``: what any increase since the baseline means (``info``: report only).
    - ``rate_warn_per_hour`` / ``rate_fail_per_hour``: an increase faster than this per hour
      since the baseline warns / fails, whatever ``on_increase`` says.
    - ``lifetime_limit``: without a baseline, a lifetime value above this fails (off: None).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    on_increase: Optional[Severity] = None
    rate_warn_per_hour: Optional[float] = Field(default=None, ge=0)
    rate_fail_per_hour: Optional[float] = Field(default=None, ge=0)
    lifetime_limit: Optional[int] = Field(default=None, ge=0)


class Thresholds(BaseModel):
    """Expectations checks compare the Snapshot against. Empty: judge the node by itself."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    expect_hcas: Optional[int] = Field(
        default=None, ge=0, description="How many InfiniBand HCAs this node must have."
    )
    expect_hca_names: List[str] = Field(
        default_factory=list, description="HCA names that must be present, e.g. mlx5_ib0."
    )
    expect_rate_gbps: Optional[float] = Field(
        default=None, gt=0, description="Rate every InfiniBand port must run at, in Gb/s."
    )
    ignore_hcas: List[str] = Field(
        default_factory=list,
        description="Glob patterns of devices to leave out, e.g. mlx5_an* (Azure's Ethernet NIC).",
    )
    ignore_ethernet: bool = Field(
        default=False,
        description="Leave out devices whose every port is Ethernet (RoCE storage or host NICs) "
        "on nodes where only the InfiniBand compute fabric is graded.",
    )
    expect_ipoib_mtu: Optional[int] = Field(
        default=None, ge=68, description="MTU every IPoIB interface must have (e.g. 4092)."
    )
    expect_roce_mtu: Optional[int] = Field(
        default=None, ge=68, description="MTU every RoCE netdev must have (e.g. 4200 or 9000)."
    )
    counters: Dict[str, CounterRule] = Field(
        default_factory=dict,
        description="Per-counter rules over the catalogue's defaults, by counter name.",
    )

    def ignores(self, device_name: str) -> bool:
        return any(fnmatch.fnmatchcase(device_name, pattern) for pattern in self.ignore_hcas)
