"""One definition of "an InfiniBand port", and every user of it agrees.

``Port.is_infiniband``: link layer InfiniBand, or no ``link_layer`` file at all (kernels without
it predate RoCE); a link layer that could not be read is not assumed to be anything. The checks
(``port.is_infiniband``), the command plan (perfquery runs) and level full's loopback plan
used to disagree on the unreadable case.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from ibdiag import families
from ibdiag.families.loopback import traffic
from ibdiag.model import Device, Port, Snapshot
from ibdiag.thresholds import Thresholds

CASES = [
    ("InfiniBand", {}, True),
    ("Ethernet", {}, False),
    (None, {"link_layer": "missing"}, True),  # no such file: an old kernel, InfiniBand only
    (None, {"link_layer": "EINVAL"}, False),  # unreadable: unknown, not assumed
    (None, {}, False),  # not read at all (a hand-built port)
]


def _device(link_layer, problems) -> Device:
    port = Port(number=1, path="p", state=4, link_layer=link_layer, problems=problems)
    return Device(name="mlx5_0", path="d", ports=[port])


def _snapshot(dev: Device) -> Snapshot:
    return Snapshot(
        tool_version="0", collected_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
        sysfs_root="/sys", procfs_root="/proc", devices=[dev],
    )  # fmt: skip


@pytest.mark.parametrize("link_layer, problems, expected", CASES)
def test_the_checks_the_plan_and_the_loopback_agree(link_layer, problems, expected):
    dev = _device(link_layer, problems)
    port = dev.ports[0]
    assert port.is_infiniband is expected
    assert port.is_infiniband is expected
    perfquery = families.plan(_snapshot(dev), {"perfquery"})
    assert bool(perfquery) is expected
    tests = traffic.plan_loopback(
        [dev], Thresholds(), graded=lambda _: True, gpu_near=lambda _: None, pin_for=lambda _: []
    )
    assert bool(tests) is expected
