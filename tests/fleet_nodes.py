"""Nodes of a small fleet for tests: each its own sysfs tree (``sysfs_builder``), procfs (its
host name) and stub bin whose ``smpquery``/``perfquery`` answer for the far end of each HCA's
cable as the real tools did against the ibsim simulator (tests/captures/ibsim-partner).

The fleet is rail-aligned, as GPU clusters are cabled: HCA k of every node plugs into the same
leaf switch (``mlx5_0`` into ``leaf07``, ``mlx5_1`` into ``leaf08``), node n into its port n.
The captures were all taken on one switch, ``leaf07`` (GUID 0x200000), port 1: a far end here is
that capture with only what tells one switch port from another rewritten - the switch's name in
its node description, its GUID, the port number (nodeinfo LocalPort, portinfo's header and
LocalPort) - and, for a sick far end, the one field that makes it sick: ``LinkState``
``Initialize`` (as the real ``nosm-portinfo.txt`` capture shows it, all else equal),
``LinkWidthActive`` ``1X`` (a narrowed link) or a perfquery counter's value. Lines are kept as
the tools print them (names, dots, order).

Our own ports' PMA counters (perfquery on the local port) print the healthy HCA captures of
``tests/fixtures`` as tests/families/test_standard_level.py does; every other command of level
standard is absent (its checks skip), so a node's verdict comes from its sysfs and its cables.
"""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import stubs as S
from sysfs_builder import mlx5_node, write_node

HDR_4X = "200 Gb/sec (4X HDR)"
SWITCHES = ("leaf07", "leaf08")  # rail k's leaf switch
CAPTURE_GUID = "0x0000000000200000"  # leaf07's in the captures


@dataclasses.dataclass
class FarEnd:
    """The switch port at the far end of one HCA's cable, and how it differs from healthy."""

    switch: str
    guid: str
    port: int
    link_state: str = "Active"
    width: str = "4X"
    counters: Dict[str, int] = dataclasses.field(default_factory=dict)  # perfquery's names


@dataclasses.dataclass
class Node:
    """A node: its host name, its HCAs' sysfs rates (one HCA each) and their far ends (None:
    ``smpquery`` is not installed, nothing is read)."""

    host: str
    rates: List[str]
    far_ends: List[Optional[FarEnd]]


def rail_aligned(host: str, number: int, rates: Tuple[str, ...] = (HDR_4X, HDR_4X)) -> Node:
    """HCA k on ``SWITCHES[k]`` port ``number``, healthy."""
    far_ends: List[Optional[FarEnd]] = [
        FarEnd(switch=SWITCHES[rail], guid=f"0x{0x200000 + 0x10000 * rail:016x}", port=number)
        for rail in range(len(rates))
    ]
    return Node(host=host, rates=list(rates), far_ends=far_ends)


def _set_field(text: str, name: str, value: str) -> str:
    """``Name:.....value`` with a new value (the dots kept as printed); the field must exist."""
    pattern = re.compile(rf"^({re.escape(name)}:\.+).*$", re.M)
    assert pattern.search(text), f"no field {name}"
    return pattern.sub(lambda m: m.group(1) + value, text)


def write_far_end(dest: Path, far: FarEnd) -> Dict[str, str]:
    """Write the far end's captures under ``dest``; the ``by_args`` cases (after ``-C dev``)
    of ``smpquery`` and ``perfquery`` answering with them, in a dict keyed "smpquery:..." /
    "perfquery:..."."""
    dest.mkdir(parents=True, exist_ok=True)
    capture = S.partner_capture

    def write(name: str, text: str) -> str:
        path = dest / name
        path.write_text(text)
        return str(path)

    desc = Path(capture("switch-hdr-nodedesc.txt")).read_text().replace("leaf07", far.switch)
    info = Path(capture("switch-hdr-nodeinfo.txt")).read_text()
    for field in ("SystemGuid", "Guid", "PortGuid"):
        info = _set_field(info, field, far.guid)
    info = _set_field(info, "LocalPort", str(far.port))
    port_info = Path(capture("switch-hdr-portinfo.txt")).read_text()
    port_info = port_info.replace("0,1 port 1\n", f"0,1 port {far.port}\n", 1)
    port_info = _set_field(port_info, "LocalPort", str(far.port))
    port_info = _set_field(port_info, "LinkState", far.link_state)
    port_info = _set_field(port_info, "LinkWidthActive", far.width)
    for field in ("NeighborMTU", "MtuCap"):  # a real HDR switch port (ibsim's are at 2048)
        port_info = _set_field(port_info, field, "4096")

    def asked_port(name: str) -> str:
        """A captured perfquery of the switch's port 1, answering for ``far.port`` (its header
        and PortSelect), as a switch answers what it is asked."""
        text = re.sub(r" port 1\b", f" port {far.port}", Path(capture(name)).read_text(), count=1)
        return _set_field(text, "PortSelect", str(far.port))

    counters = asked_port("switch-hdr-perfquery.txt")
    for name, value in far.counters.items():
        counters = _set_field(counters, name, str(value))
    files = {
        "nodedesc": write("nodedesc.txt", desc),
        "nodeinfo": write("nodeinfo.txt", info),
        "portinfo": write("portinfo.txt", port_info),
        "perfquery": write("perfquery.txt", counters),
        "perfquery-x": write("perfquery-x.txt", asked_port("switch-hdr-perfquery-x.txt")),
        "perfquery-E": write("perfquery-E.txt", asked_port("switch-hdr-perfquery-E.txt")),
    }
    return {
        "smpquery:* nodeinfo 0,1": S.prints(files["nodeinfo"]),
        "smpquery:* nodedesc 0,1": S.prints(files["nodedesc"]),
        "smpquery:* portinfo 0,1 0": S.prints(capture("switch-hdr-portinfo0.txt")),
        "smpquery:* portinfo 0,1 *": S.prints(files["portinfo"]),
        "smpquery:* portinfo 0 *": S.prints(capture("b2b-ca-portinfo0.txt")),  # our own port
        # ibsim's switches have no extended error counters: -x has the data counters only
        "perfquery:-P * -t * -x *": S.prints(files["perfquery-x"]),
        "perfquery:-P * -t * -E *": S.prints(files["perfquery-E"]),
        "perfquery:-P * -t *": S.prints(files["perfquery"]),
    }


# Our own port's PMA counters (level standard's perfquery runs on the local port).
LOCAL_PERFQUERY = {
    "-x -C *": S.prints(S.fixture(*S.PERFQUERY_X_HEALTHY)),
    "-E -C *": S.prints(S.fixture(*S.PERFQUERY_E)),
    "-X -C *": S.prints_text(S.PERFQUERY_XMIT_SL),
    "-C *": S.prints(S.fixture(*S.PERFQUERY_X_HEALTHY)),
}


def write_fleet_node(root: Path, node: Node) -> Tuple[str, str, S.StubBin]:
    """(sysfs root, procfs root, stubs) of ``node`` under ``root``."""
    hcas = mlx5_node(len(node.rates))
    for hca, rate in zip(hcas, node.rates):
        hca.ports[0].rate = rate
        hca.node_guid = f"b859:9f03:00d4:{0x0A10 + hcas.index(hca):04x}"
    sysfs = str(root / "sys")
    write_node(sysfs, hcas)
    procfs = S.write_procfs(root / "proc", boot_time=time.time() - 3600, hostname=node.host)
    stubs = S.StubBin(root / "stubs")
    smpquery: Dict[str, str] = {}
    perfquery: Dict[str, str] = {}
    for hca, far in zip(hcas, node.far_ends):
        if far is None:
            continue
        for key, body in write_far_end(root / "far-end" / hca.name, far).items():
            tool, pattern = key.split(":", 1)
            (smpquery if tool == "smpquery" else perfquery)[f"-C {hca.name} {pattern}"] = body
    if smpquery:
        stubs.add("smpquery", S.by_args(smpquery))
    stubs.add("perfquery", S.by_args({**perfquery, **LOCAL_PERFQUERY}))
    return sysfs, procfs, stubs
