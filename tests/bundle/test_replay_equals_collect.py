"""A bundle replays into the very Snapshot the live run built, typed command fields included.

Every golden scenario is collected at level standard (every read-only command, each stub
printing a real capture from tests/fixtures), written as a bundle, opened and replayed: the
two Snapshots are equal field for field, so ``ibdiag report BUNDLE`` grades what ``ibdiag check``
graded. Both go through the one interpret step (``ibdiag.families.interpret``); a bundle is
parsed by today's parsers.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, Tuple

import pytest
import stubs as S
from conftest import SCENARIOS_DIR, scenario_names
from snapshots import STANDARD_SOURCES, assert_same_snapshot
from stubs import write_procfs

from ibdiag.bundle.opener import open_bundle
from ibdiag.bundle.replay import replay
from ibdiag.bundle.write import write_bundle
from ibdiag.collect import collect
from ibdiag.grade import grade
from ibdiag.registry import load_registry
from ibdiag.sources import names
from ibdiag.sources.sysfs import Recording
from ibdiag.thresholds import Thresholds


def _switch_ports(root) -> Tuple[Dict[str, str], Dict[str, str]]:
    """smpquery/perfquery cases of the switch-hdr captures, each of our ports on a switch port
    of its own (one cable end is in one port: two ports claiming the same far-end port are not
    graded): nodeinfo's LocalPort is the first free one (``mkdir``, atomic, as the chains run
    at once), perfquery answers for the port it is asked about."""
    ports = Path(root) / "switch-ports"
    ports.mkdir(parents=True, exist_ok=True)
    nodeinfo = (
        f"i=1; while ! mkdir {ports}/$i 2>/dev/null; do i=$((i + 1)); done\n"
        f'sed "s/^LocalPort:\\(\\.*\\)1$/LocalPort:\\1$i/" '
        f"{S.partner_capture('switch-hdr-nodeinfo.txt')}\nexit 0\n"
    )
    smpquery = {**S.partner_smpquery(), "* nodeinfo 0,1": nodeinfo}
    perfquery = {}
    for pattern, body in S.partner_perfquery().items():
        capture = body.split("cat ", 1)[1].split("\n", 1)[0]
        perfquery[pattern] = (
            "for port; do :; done\n"
            'sed -e "s/ port 1\\b/ port $port/" '
            '-e "s/^PortSelect:\\(\\.*\\)1$/PortSelect:\\1$port/" '
            f"{capture}\nexit 0\n"
        )
    return smpquery, perfquery


def _tools(root) -> S.StubBin:
    stubs = S.StubBin(root)
    smpquery, far_perfquery = _switch_ports(root)
    stubs.add("smpquery", S.by_args(smpquery))  # run only when "partner" is needed
    stubs.add(
        "perfquery",
        S.by_args(
            {
                **far_perfquery,  # the far end's LID and port (-t first)
                "-x -C *": S.prints(S.fixture(*S.PERFQUERY_X_HEALTHY)),
                "-E -C *": S.prints(S.fixture(*S.PERFQUERY_E)),
                "-X -C *": S.prints_text(S.PERFQUERY_XMIT_SL),
            }
        ),
    )
    stubs.add("ethtool", S.prints(S.fixture(*S.ETHTOOL_S)))
    stubs.add("dmesg", S.prints(S.fixture(*S.DMESG_FW_SYNDROME)))
    stubs.add("ibstat", S.prints(S.fixture("ibstat", "gpud-ibstat-h100-cx7-roce-all-active.txt")))
    stubs.add(
        "ibv_devinfo",
        S.prints(S.fixture("ibv_devinfo", "linux-rdma-2024-cx5-roce-two-pf-before-bonding.txt")),
    )
    stubs.add(
        "nvidia-smi",
        S.prints(S.fixture("nvidia_smi_topo", "sglang-issue30401-8xH100-8xmlx5-PIX-rail.txt")),
    )
    return stubs


@pytest.mark.parametrize("name", scenario_names())
def test_replayed_bundle_is_the_live_snapshot_at_level_standard(name, tmp_path):
    live = _replayed_equals_live(name, tmp_path, STANDARD_SOURCES)
    assert not any(port.partner for dev in live.devices for port in dev.ports)


@pytest.mark.parametrize("name", scenario_names())
def test_replayed_bundle_is_the_live_snapshot_with_the_far_end_of_each_cable(name, tmp_path):
    """``partner`` needed (as a check declaring it makes it): the chains' runs - run, and never
    started for a name no command may carry - are in the bundle and replay into the same
    ``Port.partner`` of every ACTIVE InfiniBand port."""
    live = _replayed_equals_live(name, tmp_path, STANDARD_SOURCES | {"partner"})
    active = [(dev, port) for dev in live.devices for port in dev.ports
              if port.state == 4 and port.is_infiniband]  # fmt: skip
    for dev, port in active:
        assert port.partner is not None, dev.target(port)
        if names.device_name_problem(dev.name) is None:
            assert port.partner.node_type == "Switch" and port.partner.lid == 1
            assert port.partner.counters.counters["SymbolErrorCounter"] == 0
            assert port.partner.port_info.speed_active == "HDR"
    others = [port for dev in live.devices for port in dev.ports if port.state != 4]
    assert all(port.partner is None for port in others)


def _replayed_equals_live(name, tmp_path, needs):
    procfs = write_procfs(tmp_path / "proc")
    stubs = _tools(tmp_path / "stubs")
    recording = Recording()
    sysfs = os.path.join(SCENARIOS_DIR, name, "root", "sys")
    options = {"path": stubs.path, "timeout_s": 10.0, "deadline_s": 30.0}
    live = collect(sysfs, procfs, needs, options, recording=recording)
    assert live.commands and all(run.role for run in live.commands.values())
    report = grade(live, load_registry(), Thresholds(), "standard")
    path = write_bundle(live, report, recording, str(tmp_path / "out"), tarball=True)
    with open_bundle(path) as opened:
        assert opened.problems == []
        replayed = replay(opened)
    assert_same_snapshot(replayed, live)
    _assert_typed_fields_were_filled(live)
    return live


def _assert_typed_fields_were_filled(snap) -> None:
    """The equality above is not an empty one: every family's typed fields hold the captures."""
    active = [port for dev in snap.devices for port in dev.ports
              if port.state == 4 and port.is_infiniband]  # fmt: skip
    for port in active:
        assert port.perfquery is not None and port.perfquery.counters is not None
        assert port.perfquery.counters.counters["SymbolErrorCounter"] >= 0
        assert port.perfquery.rcv_error_details is not None
    netdevs = [port.netdev for dev in snap.devices for port in dev.ports if port.netdev]
    assert all(netdev.ethtool is not None and netdev.ethtool.counters for netdev in netdevs)
    assert snap.kernel_log is not None and snap.kernel_log.findings
    assert snap.inventory is not None and snap.inventory.ibstat.cas
    assert snap.inventory.ibv_devinfo.cas
