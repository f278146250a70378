"""PCIe link of each HCA: trained at the card's full speed and width."""

from __future__ import annotations

from typing import Iterator

from ibdiag.check_results import about
from ibdiag.model import Result, Snapshot, Status
from ibdiag.registry import check
from ibdiag.targets import evidence, graded_devices
from ibdiag.thresholds import Thresholds

_ATTRIBUTES = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")


def _link(speed, width) -> str:
    return f"{speed:g} GT/s x{width}"


@check("pci.link", title="HCA PCIe link at full speed and width", needs={"sysfs"})
def pcie_link(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: each HCA's PCIe link trained at its maximum: current speed and width equal
    max_link_speed and max_link_width (e.g. 16 GT/s x16 for a ConnectX-6 in a Gen4 slot).

    Why it matters: a card that trained at x8 or Gen3 silently halves what the HCA can move
    to and from GPU or host memory, while every InfiniBand counter looks clean.

    What to do: reseat the card or riser, check the slot's BIOS bifurcation/speed settings,
    and dmesg for PCIe AER errors; `lspci -vv -s <BDF>` shows LnkCap vs LnkSta.
    """
    for dev in graded_devices(snap, th):
        pci = dev.pci
        if pci is None:
            yield Result(
                target=dev.name,
                status=Status.SKIP,
                message="no PCI function (virtual device or partial sysfs tree)",
                evidence=evidence(dev.path, "device"),
            )
            continue
        source = evidence(f"{dev.path}/device", *_ATTRIBUTES)
        values = (
            pci.current_link_speed,
            pci.current_link_width,
            pci.max_link_speed,
            pci.max_link_width,
        )
        speed, width, max_speed, max_width = values
        if speed is None or width is None or max_speed is None or max_width is None:
            unread = [name for name, value in zip(_ATTRIBUTES, values) if value is None]
            reasons = ", ".join(f"{name}: {pci.problems.get(name, 'missing')}" for name in unread)
            yield Result(
                target=dev.name,
                status=Status.SKIP,
                message=f"PCIe link not comparable on {pci.address} ({reasons})",
                evidence=source,
            )
            continue
        current = _link(speed, width)
        best = _link(max_speed, max_width)
        result = about(dev.name, source, observed=current, expected=best)
        if speed < max_speed or width < max_width:
            yield result(
                status=Status.FAIL,
                message=f"PCIe {pci.address} trained at {current}, capable of {best}",
                hint="reseat the card/riser, check BIOS slot settings and dmesg for PCIe AER; "
                f"lspci -vv -s {pci.address} shows LnkCap vs LnkSta",
            )
        else:
            yield result(status=Status.PASS, message=f"PCIe {pci.address} at {current}")
