"""What a healthy node is expected to look like: HCA count, link rate, devices to ignore.

Thresholds are plain validated data handed to every check. Command-line options fill them in
today; per-platform profiles and a site config (TOML) will feed the same model.
"""

from __future__ import annotations

import fnmatch
from typing import List, Optional

from pydantic import BaseModel, ConfigDict, Field


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

    def ignores(self, device_name: str) -> bool:
        return any(fnmatch.fnmatchcase(device_name, pattern) for pattern in self.ignore_hcas)
