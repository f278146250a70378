"""The physical layer: the HCA's ASIC and cable-module temperatures against their own crit."""

from __future__ import annotations

from typing import Iterator

from ibdiag.facts.hwmon import HcaSensor, HcaSensors
from ibdiag.model import Device, Result, Snapshot, Status
from ibdiag.registry import check
from ibdiag.targets import graded_devices
from ibdiag.thresholds import Thresholds

# No ``facts["hwmon"]``: the PCI function has no hwmon directory (or the snapshot was taken by
# an ibdiag that did not read it).
UNAVAILABLE_HERE = "no mlx5 hwmon temperatures in sysfs (a kernel before 6.5, a VF, not mlx5)"


def _target(dev: Device, sensor: HcaSensor) -> str:
    """A module sensor is its port's cable (``mlx5_0:1``); the ASIC, and a module whose port
    is not known, are the HCA (``mlx5_0``)."""
    if sensor.kind == "module" and sensor.port is not None:
        return f"{dev.name}:{sensor.port}"
    return dev.name


def _evidence(found: HcaSensors, sensor: HcaSensor) -> list:
    where = found.hwmon or "hwmon"
    return [f"{where}/temp{sensor.channel}_{name}" for name in ("input", "crit")]


@check(
    "phy.temperature",
    title="HCA ASIC and cable modules below their critical temperature",
    needs={"sysfs"},
    level="quick",
)
def phy_temperature(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: every temperature sensor of every HCA (the mlx5 hwmon device in sysfs: the
    ASIC, and the cable module in each port) reads more than `temperature_margin_c` (5 °C)
    below its own critical threshold, the one the firmware reports in `tempN_crit` (typically
    105 °C for the ASIC, 70-75 °C for an optical module).

    Why it matters: an overheating transceiver first raises its bit error rate, then the
    firmware shuts it down (the kernel logs "Port module event[error] ... High Temperature")
    and the link drops mid-job; an ASIC at its crit is throttled or reset. Within the margin
    is the warning before that happens. A sensor with no crit threshold passes with its
    reading; an HCA without hwmon (a kernel before 6.5, a VF, not mlx5) is skipped.

    What to do: check the chassis airflow and fans around the HCA and the cable's cage
    (blanking panels, fan failures, a hot neighbour); reseat the module, and replace it if it
    stays hot while its neighbours do not. `sensors` or
    /sys/class/infiniband/<dev>/device/hwmon/hwmon*/temp*_{label,input,crit} show the live
    values; the port's module events are in the kernel log.
    """
    margin = th.temperature_margin_c
    for dev in graded_devices(snap, th):
        found = dev.facts.get("hwmon")
        if not isinstance(found, HcaSensors):
            yield Result(
                target=dev.name,
                status=Status.SKIP,
                message=f"not available: {UNAVAILABLE_HERE}",
                evidence=[f"{dev.path}/device/hwmon"],
            )
            continue
        if not found.sensors:
            why = found.unavailable or "the mlx5 hwmon device lists no temperature sensor"
            problems = f" ({'; '.join(found.problems)})" if found.problems else ""
            yield Result(
                target=dev.name,
                status=Status.SKIP,
                message=f"not available: {why}{problems}",
                evidence=[found.hwmon or f"{dev.path}/device/hwmon"],
            )
            continue
        for sensor in found.sensors:
            yield _graded(dev, found, sensor, margin)


def _graded(dev: Device, found: HcaSensors, sensor: HcaSensor, margin: float) -> Result:
    target, name = _target(dev, sensor), sensor.name
    evidence = _evidence(found, sensor)
    now, crit = sensor.input_c, sensor.crit_c
    if now is None:
        why = "; ".join(sensor.problems) or "no reading"
        return Result(
            target=target, status=Status.SKIP, message=f"{name}: {why}", evidence=evidence
        )
    if crit is None:  # nothing to compare with: the reading, and why there is no crit
        prefix = f"temp{sensor.channel}_crit: "
        unread = [
            problem[len(prefix) :] for problem in sensor.problems if problem.startswith(prefix)
        ]
        note = f"crit {unread[0]}" if unread else "no crit threshold reported"
        return Result(
            target=target,
            status=Status.PASS,
            message=f"{name} {now:.1f} °C ({note})",
            observed=now,
            evidence=evidence,
        )
    if now >= crit:
        status, message = Status.FAIL, f"{name} {now:.1f} °C >= crit {crit:.1f} °C"
    elif now >= crit - margin:
        status = Status.WARN
        message = f"{name} {now:.1f} °C within {margin:g} °C of crit {crit:.1f} °C"
    else:
        status = Status.PASS
        message = f"{name} {now:.1f} °C < {crit - margin:.1f} °C (crit {crit:.1f} - {margin:g})"
    return Result(
        target=target,
        status=status,
        message=message,
        observed=now,
        expected=f"< {crit - margin:g} °C (crit {crit:g} °C)",
        evidence=evidence,
    )
