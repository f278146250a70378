"""Firmware consistency across the node's HCAs of the same model."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Dict, Iterator, List

from ibdiag import hca_capabilities
from ibdiag.check_results import about
from ibdiag.model import Device, Result, Snapshot, Status
from ibdiag.registry import check
from ibdiag.targets import evidence, graded_devices
from ibdiag.thresholds import Thresholds


@check("hca.firmware", title="HCAs of the same model run the same firmware", needs={"sysfs"})
def firmware_consistency(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: every HCA of one model on the node reports the same ``fw_ver``.

    Why it matters: a card left behind by a firmware update behaves differently (link
    training, congestion control, known bugs) from its siblings, and support will ask first.

    What to do: update the odd card to the fleet's version (mlxfwmanager / flint) and reboot
    or reset it; keep firmware in your node image's release notes.
    """
    groups: Dict[str, List[Device]] = defaultdict(list)
    for dev in graded_devices(snap, th):
        if dev.fw_ver is not None:
            groups[hca_capabilities.model_key(dev)].append(dev)
        else:
            yield Result(
                target=dev.name,
                status=Status.SKIP,
                message=f"fw_ver unreadable ({dev.problems.get('fw_ver', 'unknown')})",
                evidence=evidence(dev.path, "fw_ver"),
            )
    for model, devices in groups.items():
        versions = Counter(str(dev.fw_ver) for dev in devices)  # fw_ver read: grouped so
        common, common_count = versions.most_common(1)[0]
        tied = sum(1 for count in versions.values() if count == common_count) > 1
        for dev in devices:
            result = about(dev.name, evidence(dev.path, "fw_ver"), observed=dev.fw_ver)
            if len(versions) == 1:
                alike = (
                    f"same as the other {model} HCAs"
                    if len(devices) > 1
                    else f"the only {model} HCA on this node"
                )
                yield result(status=Status.PASS, message=f"firmware {dev.fw_ver}, {alike}")
            elif dev.fw_ver != common or tied:
                others = ", ".join(sorted(v for v in versions if v and v != dev.fw_ver))
                yield result(
                    status=Status.WARN,
                    message=f"firmware {dev.fw_ver} differs from {others} on other {model} HCAs",
                    expected=None if tied else common,
                    hint="bring every card to one firmware version (mlxfwmanager), then reset it",
                )
            else:
                yield result(
                    status=Status.PASS,
                    message=f"firmware {dev.fw_ver}, the version most {model} HCAs run",
                )
