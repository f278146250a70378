"""devlink health: each HCA's health reporters as ``devlink -j health show`` lists them, typed.

``Device.facts["devlink_health"]`` holds one ``DevlinkHealth`` per HCA with a PCI function,
whenever the family ran (level standard: ``ibdiag.families.devlink_health``): the reporters
of the devlink instance ``pci/<its PCI address>`` (and of that instance's ports,
``pci/<address>/<port index>``), with the outcome of the run.

mlx5's reporters (kernel Documentation/networking/device_drivers/ethernet/mellanox/mlx5/
devlink.rst): ``fw`` (firmware syndromes the driver saw; diagnose and dump), ``fw_fatal`` (a
fatal firmware error: CR-space dump and a recovery that reloads the driver and resets the
firmware), ``tx`` / ``rx`` (send / receive queue errors and timeouts, per port on newer
kernels), ``vnic`` (diagnose only). Each counts ``error`` (reports) and ``recover`` (successful
recoveries) since the driver loaded, and is ``healthy`` or ``error`` (a recovery that has not
succeeded yet, or was not attempted).

Healthy: every reporter ``healthy``, and no ``fw_fatal`` (nor ``fw``) error since the baseline.
"""

from typing import List, Optional

from pydantic import Field

from ibdiag.facts._base import Fact
from ibdiag.facts.outcome import RunOutcome

HEALTHY = "healthy"
ERROR = "error"
FIRMWARE = "fw"  # firmware syndromes: a warning sign
FIRMWARE_FATAL = "fw_fatal"  # the firmware stopped: the device was (or must be) reset


class HealthReporter(Fact):
    """One reporter as devlink printed it (iproute2 ``devlink/devlink.c`` ``pr_out_health``).

    - ``name``: ``reporter`` (``name`` before iproute2 5.4): ``fw``, ``fw_fatal``, ``tx``...;
    - ``handle``: the devlink handle it was listed under, ``pci/0000:08:00.0`` or, for a port's
      reporter, ``pci/0000:08:00.0/65535``; ``port_index``: that port index (None: the device's);
    - ``state``: ``healthy`` or ``error`` (anything else as printed);
    - ``errors`` (``error``), ``recovers`` (``recover``): counts since the driver loaded;
    - ``grace_period_ms`` (``grace_period``): the least time between two automatic recoveries;
    - ``auto_recover``, ``auto_dump``: whether the driver recovers / dumps by itself;
    - ``last_dump``: ``last_dump_date`` and ``last_dump_time`` ("2024-05-02 10:11:12", the
      node's local time) of the last dump kept, when there is one.
    """

    name: str
    handle: str
    port_index: Optional[int] = None
    state: Optional[str] = None
    errors: Optional[int] = None
    recovers: Optional[int] = None
    grace_period_ms: Optional[int] = None
    auto_recover: Optional[bool] = None
    auto_dump: Optional[bool] = None
    last_dump: Optional[str] = None

    @property
    def healthy(self) -> bool:
        return self.state is None or self.state == HEALTHY


class DevlinkHealth(Fact, fact_name="devlink_health"):
    """One HCA's health reporters (``address``: its PCI function), what could not be read of
    them (``problems``: a count that is not one, an entry without a name), and the outcome of
    the node's one ``devlink -j health show`` run (``outcome``: why there is no data, when there is
    none: devlink not installed, not permitted, no devlink support in the kernel...)."""

    address: str
    reporters: List[HealthReporter] = Field(default_factory=list)
    problems: List[str] = Field(default_factory=list)
    outcome: RunOutcome

    def reporter(self, name: str) -> Optional[HealthReporter]:
        """The device's own reporter called ``name`` (a port's when the device has none)."""
        found = [one for one in self.reporters if one.name == name]
        own = [one for one in found if one.port_index is None]
        chosen = own or found
        return chosen[0] if chosen else None
