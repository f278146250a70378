"""The HCA's own temperature sensors, as the mlx5 driver's hwmon device shows them in sysfs.

Where they come from (``drivers/net/ethernet/mellanox/mlx5/core/hwmon.c``, mainline 6.5+):
the driver registers one hwmon device named ``mlx5`` on the HCA's PCI function, so it appears
at ``class/infiniband/<dev>/device/hwmon/hwmonN/``. Each channel ``tempN_`` has ``_input``
(now), ``_highest`` (the highest seen since the driver enabled tracking) and ``_crit`` (the
sensor's own high threshold from the firmware's MTMP register), in millidegrees C, and a
``_label``: the firmware's sensor name (``asic``, ``Module0``), or ``sensor<index>`` when the
firmware gives none. The ASIC sensors come first; the cable module's sensor, when the module
reports a temperature, is last, at MTMP index 64 + the module number (``sensor64`` is module
0). One PCI function has one physical port, so the module sensor is that port's cable.

Healthy: every sensor reads below its own ``crit`` by more than ``temperature_margin_c``.
No hwmon at all (a kernel before 6.5, a VF, not mlx5) is "not available", never a fault.
"""

from typing import ClassVar, List, Literal, Optional

from pydantic import Field

from ibdiag.facts._base import Fact

SensorKind = Literal["asic", "module", "other"]


class HcaSensor(Fact):
    """One temperature channel (``tempN_*``), in degrees C.

    ``kind``: ``asic`` (the HCA chip, label ``asic`` or ``sensor<index below 64>``),
    ``module`` (the cable module: ``Module<n>`` or ``sensor<64 + n>``), ``other`` (a label
    that says neither, or none could be read). ``module``: the module number the label gives;
    ``port``: the HCA port the module serves (the device's only port; None when the device
    has several, or the sensor is not a module's). A value that could not be read, was not a
    number, or is absurd (below -60 or above 200 degrees) is None, with why in ``problems``
    (``"temp2_input: unreadable: Input/output error"``). ``crit_c`` is None also when the
    firmware sets no threshold (the driver then reports 0).
    """

    channel: int  # N of tempN_*
    label: Optional[str] = None  # tempN_label as the driver gives it
    kind: SensorKind = "other"
    module: Optional[int] = None
    port: Optional[int] = None
    input_c: Optional[float] = None
    highest_c: Optional[float] = None
    crit_c: Optional[float] = None
    problems: List[str] = Field(default_factory=list)

    @property
    def name(self) -> str:
        """How a message names it: ``asic``, ``module 0``, or its label / channel."""
        if self.kind == "module" and self.module is not None:
            return f"module {self.module}"
        if self.kind == "asic":
            return self.label if self.label and self.label.lower() != "asic" else "asic"
        return self.label or f"temp{self.channel}"


class HcaSensors(Fact, fact_name="hwmon"):
    """The HCA's hwmon temperatures (``Device.facts["hwmon"]``), read at level quick.

    ``hwmon``: the directory read, relative to the sysfs root
    (``class/infiniband/mlx5_0/device/hwmon/hwmon3``); None when there is none, and
    ``unavailable`` then says why (no ``hwmon`` directory: a kernel before 6.5, a VF, a
    driver other than mlx5). ``problems``: what went wrong reading the device as a whole (an
    unreadable listing or ``name``); each sensor keeps its own.
    """

    FROM_FILES: ClassVar[bool] = True  # read from sysfs: kept when runs are reinterpreted

    hwmon: Optional[str] = None
    unavailable: Optional[str] = None
    sensors: List[HcaSensor] = Field(default_factory=list)
    problems: List[str] = Field(default_factory=list)
