"""Generated fleets: N nodes' ibdiag Reports with planted faults, and the truth beside them.

    truth = write_fleet(root, nodes=1000, seed=15, workers=2)
    # root/nodes/<host>.json (what `ibdiag fleet run` leaves) and root/truth.json

Each node is an 8-GPU, 8-rail node (H100, eight ConnectX-7 HCAs mlx5_0..mlx5_7, NDR 400 Gb/s,
IPoIB ib0..ib7) of a rail-optimized fabric: nodes come in scalable units (SUs) of 32, and HCA k
of node i is cabled to leaf ``su<i // 32>-rail<k>`` (``MF0;su03-rail2:MQM9790/U1``), port
``i % 32 + 1``. Its Report is what ``ibdiag check --level full --json`` writes on such a node,
graded against the node's snapshot of a day earlier (``--state``):

- the Snapshot holds what collect records: the sysfs devices (``tests/snapshots.py``'s
  factories), and every command of levels standard and full as a ``CommandRun`` with the argv
  and role collect plans for it (``ibdiag.families``) and, as
  stdout, a real capture with this node's values written in (GUIDs, LIDs, far end, bandwidth):
  ``tests/fixtures`` (perfquery -x/-E/-X, ethtool -S, nvidia-smi topo, perftest,
  nccl-tests; ibstat/ibv_devinfo in their layout) and ``tests/captures/ibsim-partner`` (the
  far-end chain, made NDR). perfquery and ethtool -S are ``benchmarks/bench_standard.py``'s
  captures, so a report weighs what a real level-standard one does, plus level full's runs
  (about 0.75 MB as ``check --json`` indents it);
- the typed facts are parsed from those runs by ibdiag's own interpret step, and the node is
  graded by ``ibdiag.grade.grade`` with ``SITE_THRESHOLDS``: every verdict, result, drain
  reason and counter increase in a report is ibdiag's.

Healthy nodes differ only as a real fleet's do: ib_write_bw loopback 370-395 Gb/s per rail,
nccl-tests busbw 465-485 GB/s, and a few VL15_dropped a day on some ports (an ``error``
counter whose increase is only reported: a rate far below the fleet's floor). A few nodes see
one or two symbol errors in the day (ibdiag warns on any): noise the fleet lists under
warnings, never an outlier.

Planted (``plan_fleet``: nodes drawn by the seed among full SUs, each fault on its own node):

- ``slow_rail``: three nodes each with one rail at 80% of the fleet's ib_write_bw (above the
  site's 300 Gb/s floor: the node passes its own check);
- ``slow_nccl``: one node at 75% of the fleet's nccl-tests busbw (above its 300 GB/s floor);
- ``fw_off`` (every HCA on another firmware), ``kernel_off``, ``ofed_off`` (the five OFED
  modules of another release): drift, one node each, nothing the node itself flags;
- ``rate``: two nodes whose own port counts errors far faster than the fleet (symbol_error
  20/h, port_rcv_errors 10/h: below the 120/h that fails, so they warn);
- ``swapped``: one node whose rail 3 and rail 5 cables are swapped at the node (each lands on
  the other rail's leaf, at the node's port): two rail misplacements, nothing else wrong;
- ``switch``: one leaf where the far-end ports of four nodes fail (the switch side counts
  symbol errors above 120/h, or its link went down): the suspect switch, its nodes
  switch-suspect rather than drained;
- ``bad_port``: one node elsewhere whose one far-end port went down: drained;
- ``bad_lot``: every rail-k cable of one SU comes from one manufacturing lot (each node's
  ``mlxlink -m -c --json`` says its part number, serial and date code with lot: one lot per
  SU and rail), and six cables of one lot read an effective BER of 5e-11 (phy.ber warns):
  the fleet report names that part number and lot, 6 of its 32 cables, on its leaf.

``truth.json`` says what ``ibdiag fleet report`` must find and nothing more (``fleet_truth``):
the outliers, drift, switches (with their failing and outlying ports and whether they are the
suspect), rail misplacements, and each node's verdict and drain reason as ibdiag graded it,
with the drain / switch-suspect / warning groups they make.

The same ``(nodes, seed)`` writes byte-identical files, with any number of worker processes: a
node depends only on the plan and its own ``random.Random(f"{seed}:{index}")``.
"""

from __future__ import annotations

import functools
import json
import os
import random
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

import stubs as S
from snapshots import builtin_registry, device, netdev, pci, port
from sysfs_builder import HW_COUNTERS, PORT_COUNTERS

from ibdiag import __version__, families, roles
from ibdiag.drain_reason import drain_reason
from ibdiag.facts.partner import local_port_info_matters, rcv_error_details_matter
from ibdiag.families import nccl_tests
from ibdiag.families.loopback import traffic
from ibdiag.families.partner import chain as partner_source
from ibdiag.families.partner.readings import port_info_of
from ibdiag.families.perfquery import reading
from ibdiag.grade import grade
from ibdiag.model import CommandRun, Device, Pci, Report, Snapshot
from ibdiag.render.json import render as render_json
from ibdiag.sources import BUNDLE_ONLY, SOURCE_LEVELS
from ibdiag.thresholds import Thresholds

RAILS = 8
SU_SIZE = 32  # nodes per scalable unit: one leaf per rail per SU, ports 1..32
LEAF_PORTS = 64  # MQM9790: 32 ports down to the nodes, 32 up to the spines
LEVEL = "full"
REPORTS = "nodes"  # write_fleet(root): the reports in root/nodes/, the truth in root/truth.json
TRUTH = "truth.json"
EPOCH = datetime(2025, 3, 3, 2, 0, tzinfo=timezone.utc)  # the fleet run's start
BASELINE_HOURS = 24.0  # the previous run (--state) a day earlier

HCA_TYPE = "MT4129"  # ConnectX-7
HCA_PCI_ID = "0x1021"
BOARD_ID = "MT_0000000838"
FW = "28.41.1000"
FW_OFF = "28.39.2048"
KERNEL = "5.15.0-119-generic"
KERNEL_OFF = "5.15.0-122-generic"
OFED = "24.10-1.1.4"
OFED_OFF = "24.07-0.6.1"
OFED_MODULES = ("mlx5_core", "mlx5_ib", "ib_core", "ib_uverbs", "ib_umad")
PEERMEM = "550.90.07"
NDR = "400 Gb/sec (4X NDR)"
NDR_WIDTH_SPEED = ("4X", "NDR")  # NDR's, as PortInfo names them
NCCL_PROGRAM = "/opt/nccl-tests/build/all_reduce_perf"

# A site's config for this fleet (what /etc/ibdiag/ibdiag.toml would say): floors well below
# the fleet's normal, so a node 20% slower than its peers still passes its own check - the
# fleet view is what names it.
SITE_THRESHOLDS = Thresholds(
    expect_hcas=RAILS,
    subnets_per_rail=True,  # each rail its own subnet and SM (_lid): the same LID on each
    expect_rate_gbps=400,
    perftest_floor_gbps=300,
    nccl_tests=NCCL_PROGRAM,
    nccl_busbw_floor_gbytes=300,
)

BW_NORMAL = (383.0, 4.5, 370.0, 395.0)  # ib_write_bw Gb/s: mean, sd, clipped to [low, high]
NCCL_NORMAL = (475.0, 3.5, 465.0, 485.0)  # nccl-tests busbw GB/s at 1 GiB
SLOW_RAIL = 0.80
SLOW_NCCL = 0.75
VL15_NOISE_SHARE = 0.05  # of ports: a few VL15_dropped a day (reported, never graded)
SYMBOL_NOISE_SHARE = 0.003  # of nodes: one or two symbol errors in the day (a warning)
RATE_PLANTS = (("symbol_error", 480), ("port_rcv_errors", 240))  # per day: 20/h, 10/h
SWITCH_NODES = 4  # failing nodes on the suspect leaf (FleetSettings.switch_min_nodes is 3)
BAD_LOT_NODES = 6  # cables of the bad lot with a degraded BER (cable_lot_min_ports is 2)
BAD_LOT_BER = "5E-11"  # between ber_warn (1e-12) and ber_fail (1e-9): phy.ber warns


# --- the plan -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodePlan:
    """What one node is: where it sits, what it runs, and what was planted on it."""

    index: int
    host: str
    fw_ver: str = FW
    kernel: str = KERNEL
    ofed: str = OFED
    slow_rails: Tuple[Tuple[int, float], ...] = ()  # (rail, fraction of the fleet's bandwidth)
    nccl_fraction: float = 1.0
    own_errors: Tuple[Tuple[int, str, int], ...] = ()  # (rail, sysfs counter, increase)
    far_errors: Tuple[Tuple[int, str, int], ...] = ()  # (rail, switch-side counter, increase)
    cabled: Tuple[Tuple[int, int], ...] = ()  # (rail, the rail whose leaf its cable lands on)
    degraded_cables: Tuple[int, ...] = ()  # rails whose cable reads BAD_LOT_BER

    @property
    def su(self) -> int:
        return self.index // SU_SIZE

    @property
    def leaf_port(self) -> int:
        return self.index % SU_SIZE + 1

    def leaf_rail(self, rail: int) -> int:
        return dict(self.cabled).get(rail, rail)


@dataclass(frozen=True)
class FleetPlan:
    nodes: int
    seed: int
    hosts: Tuple[str, ...]
    planted: Dict[int, NodePlan] = field(default_factory=dict)  # index -> plan (others: plain)
    truth: Dict[str, Any] = field(default_factory=dict)  # what the plan alone decides

    def node(self, index: int) -> NodePlan:
        return self.planted.get(index) or NodePlan(index=index, host=self.hosts[index])


def host_name(index: int, nodes: int) -> str:
    return f"gpu{index + 1:0{max(4, len(str(nodes)))}d}"


def leaf_name(su: int, rail: int) -> str:
    return f"su{su:02d}-rail{rail}"


def leaf_guid(su: int, rail: int) -> str:
    return f"0x{0xFC6A1C0300A00000 + su * 16 + rail:016x}"


def leaf_lid(su: int, rail: int) -> int:
    return 2 + su * RAILS + rail  # LID 1: the subnet manager


def plan_fleet(nodes: int, seed: int) -> FleetPlan:
    """Which nodes carry which planted fault (distinct nodes, in full SUs, drawn by ``seed``)."""
    full_sus = nodes // SU_SIZE
    if full_sus < 4:
        raise ValueError(f"a planted fleet needs at least {4 * SU_SIZE} nodes, not {nodes}")
    hosts = tuple(host_name(i, nodes) for i in range(nodes))
    rng = random.Random(f"plan:{seed}:{nodes}")  # noqa: S311 - reproducible, not secret
    switch_su, bad_su, swap_su = rng.sample(range(full_sus), 3)
    switch_rail, bad_rail = rng.randrange(RAILS), rng.randrange(RAILS)

    def in_su(su: int) -> range:
        return range(su * SU_SIZE, (su + 1) * SU_SIZE)

    switch_nodes = sorted(rng.sample(in_su(switch_su), SWITCH_NODES))
    bad_node = rng.choice(in_su(bad_su))
    swap_node = rng.choice(in_su(swap_su))
    taken = {*switch_nodes, bad_node, swap_node}
    free = [i for i in range(full_sus * SU_SIZE) if i not in taken]
    picks = rng.sample(free, 9)
    slow = picks[:3]
    slow_rails = rng.sample(range(RAILS), 3)
    rate_nodes = picks[3:5]
    rate_rails = rng.sample(range(RAILS), 2)
    nccl_node, fw_node, kernel_node, ofed_node = picks[5:9]

    planted: Dict[int, NodePlan] = {}

    def add(index: int, **what: Any) -> None:
        planted[index] = NodePlan(index=index, host=hosts[index], **what)

    for index, rail in zip(slow, slow_rails):
        add(index, slow_rails=((rail, SLOW_RAIL),))
    add(nccl_node, nccl_fraction=SLOW_NCCL)
    add(fw_node, fw_ver=FW_OFF)
    add(kernel_node, kernel=KERNEL_OFF)
    add(ofed_node, ofed=OFED_OFF)
    for index, rail, (counter, increase) in zip(rate_nodes, rate_rails, RATE_PLANTS):
        add(index, own_errors=((rail, counter, increase),))
    add(swap_node, cabled=((3, 5), (5, 3)))
    far_kinds = (("SymbolErrorCounter", 4000), ("LinkDownedCounter", 1))  # 167/h fails; any
    for number, index in enumerate(switch_nodes):
        add(index, far_errors=((switch_rail, *far_kinds[number % 2]),))
    add(bad_node, far_errors=((bad_rail, "LinkDownedCounter", 2),))
    # The bad lot: drawn by a generator of its own, so the plants above stay as they were.
    lot_rng = random.Random(f"lot:{seed}:{nodes}")  # noqa: S311 - reproducible, not secret
    lot_su = lot_rng.choice([su for su in range(full_sus) if su not in (switch_su, bad_su)])
    lot_rail = lot_rng.randrange(RAILS)
    lot_free = [i for i in in_su(lot_su) if i not in taken and i not in picks]
    lot_nodes = sorted(lot_rng.sample(lot_free, BAD_LOT_NODES))
    for index in lot_nodes:
        add(index, degraded_cables=(lot_rail,))

    def item(index: int) -> Dict[str, Any]:
        return {"host": hosts[index], "index": index}

    truth = {
        "slow_rail": [{**item(i), "rail": r} for i, r in zip(slow, slow_rails)],
        "slow_nccl": [item(nccl_node)],
        "rate": [
            {**item(i), "rail": r, "counter": c}
            for i, r, (c, _) in zip(rate_nodes, rate_rails, RATE_PLANTS)
        ],
        "fw_off": [item(fw_node)],
        "kernel_off": [item(kernel_node)],
        "ofed_off": [item(ofed_node)],
        "swapped": [{**item(swap_node), "rails": [3, 5]}],
        "switch": {
            "peer_name": leaf_name(switch_su, switch_rail),
            "rail": switch_rail,
            "hosts": [hosts[i] for i in switch_nodes],
        },
        "bad_port": {
            **item(bad_node),
            "rail": bad_rail,
            "peer_name": leaf_name(bad_su, bad_rail),
        },
        "bad_lot": {
            "part_number": CABLE_PART,
            "lot": cable_lot(lot_su, lot_rail),
            "rail": lot_rail,
            "peer_name": leaf_name(lot_su, lot_rail),
            "hosts": [hosts[i] for i in lot_nodes],
        },
    }
    return FleetPlan(nodes=nodes, seed=seed, hosts=hosts, planted=planted, truth=truth)


# --- one node -------------------------------------------------------------------------------------


def _guid(index: int, rail: int) -> int:
    return 0xA088C20300000000 + index * 16 + rail


def _sysfs_guid(value: int) -> str:
    text = f"{value:016x}"
    return ":".join(text[i : i + 4] for i in range(0, 16, 4))


def _lid(index: int) -> int:
    return 100 + index  # each rail is its own subnet (its own SM): one LID per node per rail


def _bus(rail: int) -> int:
    return (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)[rail]


def _gpu_bus(rail: int) -> int:
    return (0x19, 0x2B, 0x3B, 0x5E, 0x9B, 0xAC, 0xBB, 0xDC)[rail]


@functools.cache
def _capture(*parts: str) -> str:
    with open(S.fixture(*parts), encoding="utf-8") as handle:
        return handle.read()


@functools.cache
def _perfquery_t(name: str = "handmade-T-extended-speeds-edr-hca.txt") -> str:
    path = os.path.join(S.TESTS_DIR, "captures", "perfquery-T", name)
    with open(path, encoding="utf-8") as handle:
        return handle.read()


CABLE_PART = "T-F4GS-BV0"  # the healthy capture's part number (tests/captures/mlxlink)


def cable_lot(su: int, rail: int) -> str:
    """The lot of SU ``su``'s rail-``rail`` cables as the fleet names it (date code + lot)."""
    return f"{22 + su // 12:02d}{su % 12 + 1:02d}{rail + 1:02d}A{chr(ord('A') + rail)}"


@functools.cache
def _module_capture() -> Dict[str, Any]:
    path = os.path.join(S.TESTS_DIR, "captures", "mlxlink", "mlxlink-ndr-osfp-healthy.json")
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _module_json(node: NodePlan, rail: int) -> str:
    """Rail ``rail``'s ``mlxlink -m -c --json``: the healthy capture with this cable's serial
    and date code (its lot: one per SU and rail), its BER degraded where planted."""
    doc = json.loads(json.dumps(_module_capture()))
    output = doc["result"]["output"]
    lot = cable_lot(node.su, node.leaf_rail(rail))
    output["Module Info"]["Vendor Serial Number"] = f"CW{node.index:06d}{rail:02d}"
    output["Module Info"]["Manufacturing Date"] = "_".join((lot[0:2], lot[2:4], lot[4:6], lot[6:]))
    if rail in node.degraded_cables:
        output["Physical Counters and BER Info"]["Effective Physical BER"] = BAD_LOT_BER
    return json.dumps(doc, indent=1)


@functools.cache
def _partner_capture(name: str) -> str:
    with open(S.partner_capture(name), encoding="utf-8") as handle:
        return handle.read()


def _set_fields(text: str, **values: Any) -> str:
    """``Name:.....value`` lines of an infiniband-diags capture with new values (the dots,
    which pad the name to a fixed column whatever the value, kept as they are)."""
    for name, value in values.items():
        pattern = re.compile(rf"^({re.escape(name)}:\.*)(.*)$", re.M)
        if not pattern.search(text):
            raise KeyError(f"{name} is not in the capture")
        text = pattern.sub(lambda m, v=value: f"{m.group(1)}{v}", text, count=1)
    return text


NDR_EXT = "14.0625 Gbps or 25.78125 Gbps or 53.125 Gbps or 106.25 Gbps"


def _ndr_portinfo(capture: str, header: str, lid: int, sm_lid: int, local_port: int) -> str:
    text = _partner_capture(capture)
    text = re.sub(r"^# Port info: .*$", header, text, count=1, flags=re.M)
    text = text.replace(
        "IsLinkSpeedHDRSupported", "IsLinkSpeedHDRSupported\n\t\t\t\tIsLinkSpeedNDRSupported"
    )
    return _set_fields(
        text,
        Lid=lid,
        SMLid=sm_lid,
        LocalPort=local_port,
        NeighborMTU=4096,
        MtuCap=4096,
        LinkSpeedExtActive="106.25 Gbps",
        LinkSpeedExtSupported=NDR_EXT,
        LinkSpeedExtEnabled=NDR_EXT,
    )


@dataclass
class _Far:
    """The far end of one cable: which leaf, which port, its counters now and a day ago."""

    su: int
    rail: int
    port: int
    now: Dict[str, int]
    then: Dict[str, int]


_SWITCH_X = ("perfquery", "infiniband_exporter-x-switch-edr-0x506b4b03005c2740.txt")


def _switch_counters(rng: random.Random) -> Dict[str, int]:
    """A busy switch port's lifetime counters (perfquery -x), as the real capture's."""
    return {
        "PortXmitData": rng.randrange(10**14, 2 * 10**14),
        "PortRcvData": rng.randrange(10**14, 2 * 10**14),
        "PortXmitPkts": rng.randrange(10**11, 4 * 10**11),
        "PortRcvPkts": rng.randrange(10**11, 4 * 10**11),
        "SymbolErrorCounter": 0,
        "LinkDownedCounter": rng.choice((0, 0, 0, 1)),
        "PortXmitDiscards": rng.randrange(0, 30000),
        "PortXmitWait": rng.randrange(10**6, 10**8),
    }


def _partner_runs(dev: str, number: int, lid: int, far: _Far, counters: Dict[str, int]):
    """The far-end chain of one port as ``ibdiag.families.partner.chain`` records it."""
    target = f"{dev}:{number}"
    guid = leaf_guid(far.su, far.rail)
    switch_lid = leaf_lid(far.su, far.rail)
    steps = partner_source.steps(
        dev, number, partner_source.MAD_TIMEOUT_MAX_MS, local_port=far.port, lid=switch_lid
    )
    nodeinfo = _set_fields(
        _partner_capture("switch-hdr-nodeinfo.txt"),
        NumPorts=LEAF_PORTS,
        SystemGuid=guid,
        Guid=guid,
        PortGuid=guid,
        DevId="0xd2f2",
        Revision="0x000000a0",
        LocalPort=far.port,
        VendorId="0x0002c9",
    )
    description = f"MF0;{leaf_name(far.su, far.rail)}:MQM9790/U1"
    # smpquery pads the name with dots to 32 characters (one dot before a longer name)
    nodedesc = f"Node Description:{'.' * max(1, 32 - len(description))}{description}\n"
    route = partner_source.DIRECT_ROUTE
    stdout = {
        "nodeinfo": nodeinfo,
        "local-portinfo": _ndr_portinfo(
            "b2b-ca-portinfo0.txt",
            f"# Port info: DR path slid 65535; dlid 65535; 0 port {number}",
            lid,
            1,
            number,
        ),
        "nodedesc": nodedesc,
        "portinfo": _ndr_portinfo(
            "switch-hdr-portinfo.txt",
            f"# Port info: DR path slid 65535; dlid 65535; {route} port {far.port}",
            0,
            0,
            far.port,
        ),
        "portinfo0": _ndr_portinfo(
            "switch-hdr-portinfo0.txt",
            f"# Port info: DR path slid 65535; dlid 65535; {route} port 0",
            switch_lid,
            1,
            far.port,
        ),
        "perfquery-x": _switch_x(switch_lid, far.port, counters),
        "perfquery-E": re.sub(
            r"^# PortRcvErrorDetails counters: .*$",
            f"# PortRcvErrorDetails counters: Lid {switch_lid} port {far.port}",
            _set_fields(_partner_capture("switch-hdr-perfquery-E.txt"), PortSelect=far.port),
            count=1,
            flags=re.M,
        ),
        # phy.fec: the switch port's FEC per lane (hand-made RS-FEC: tests/captures/perfquery-T)
        "perfquery-T": re.sub(
            r"^# (PortExtendedSpeedsCounters with RS-FEC Active counters): .*$",
            rf"# \1: Lid {switch_lid} port {far.port}",
            _set_fields(
                _perfquery_t("handmade-T-rs-fec-hdr-switch-port21.txt"), PortSelect=far.port
            ),
            count=1,
            flags=re.M,
        ),
    }
    runs = {
        step: CommandRun(
            argv=steps[step].argv,
            role=roles.partner(step, target),
            rc=0,
            stdout=text,
            duration_s=0.02,
        )
        for step, text in stdout.items()
    }
    # the steps the chain runs only where they can matter, decided as it decides them
    if not local_port_info_matters(port_info_of(runs["portinfo"]), *NDR_WIDTH_SPEED):
        del runs["local-portinfo"]
    if not rcv_error_details_matter(reading(runs["perfquery-x"]).counters):
        del runs["perfquery-E"]
    return list(runs.values())


def _switch_x(lid: int, port_number: int, counters: Dict[str, int]) -> str:
    text = _capture(*_SWITCH_X)
    text = re.sub(
        r"^# Port extended counters: Lid \d+ port \d+",
        f"# Port extended counters: Lid {lid} port {port_number}",
        text,
        count=1,
        flags=re.M,
    )
    return _set_fields(text, PortSelect=port_number, PortRcvSwitchRelayErrors=0, **counters)


def _ibstat(devices: Sequence[Device]) -> str:
    blocks = []
    for dev in devices:
        guid = "0x" + dev.node_guid.replace(":", "")
        number = dev.ports[0]
        blocks.append(
            f"CA '{dev.name}'\n\tCA type: {dev.hca_type}\n\tNumber of ports: 1\n"
            f"\tFirmware version: {dev.fw_ver}\n\tHardware version: 0\n\tNode GUID: {guid}\n"
            f"\tSystem image GUID: {guid}\n\tPort 1:\n\t\tState: Active\n"
            f"\t\tPhysical state: LinkUp\n\t\tRate: 400\n\t\tBase lid: {number.lid}\n"
            f"\t\tLMC: 0\n\t\tSM lid: 1\n\t\tCapability mask: 0xa751e848\n"
            f"\t\tPort GUID: {guid}\n\t\tLink layer: InfiniBand\n"
        )
    return "".join(blocks)


def _devlink_health(devices: Sequence[Device]) -> str:
    """``devlink -j health show``: each HCA's fw and fw_fatal reporters, healthy, no error (the
    layout of tests/captures/devlink, hand-made from iproute2's devlink.c)."""
    reporters = [
        {"reporter": "fw", "state": "healthy", "error": 0, "recover": 0, "auto_dump": True},
        {"reporter": "fw_fatal", "state": "healthy", "error": 0, "recover": 0,
         "grace_period": 1200000, "auto_recover": True, "auto_dump": True},
    ]  # fmt: skip
    health = {f"pci/{dev.pci.address}": reporters for dev in devices if dev.pci is not None}
    return json.dumps({"health": health})


def _ibv_devinfo(devices: Sequence[Device]) -> str:
    blocks = []
    for dev in devices:
        lid = dev.ports[0].lid
        blocks.append(
            f"hca_id:\t{dev.name}\n"
            "\ttransport:\t\t\tInfiniBand (0)\n"
            f"\tfw_ver:\t\t\t\t{dev.fw_ver}\n"
            f"\tnode_guid:\t\t\t{dev.node_guid}\n"
            f"\tsys_image_guid:\t\t\t{dev.node_guid}\n"
            "\tvendor_id:\t\t\t0x02c9\n"
            "\tvendor_part_id:\t\t\t4129\n"
            "\thw_ver:\t\t\t\t0x0\n"
            f"\tboard_id:\t\t\t{dev.board_id}\n"
            "\tphys_port_cnt:\t\t\t1\n"
            "\t\tport:\t1\n"
            "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
            "\t\t\tmax_mtu:\t\t4096 (5)\n"
            "\t\t\tactive_mtu:\t\t4096 (5)\n"
            "\t\t\tsm_lid:\t\t\t1\n"
            f"\t\t\tport_lid:\t\t{lid}\n"
            "\t\t\tport_lmc:\t\t0x00\n"
            "\t\t\tlink_layer:\t\tInfiniBand\n\n"
        )
    return "".join(blocks)


def _dmesg(host: str, kernel: str, fw: str, ofed: str, rng: random.Random) -> str:
    """A healthy boot's kernel log around the HCAs (nothing ibdiag's signatures match)."""
    lines = [
        f"Linux version {kernel} (buildd@lcy02-amd64-080) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) "
        "11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38) #129-Ubuntu SMP",
        f"Command line: BOOT_IMAGE=/vmlinuz-{kernel} root=UUID=4f0e3c1a ro iommu=pt "
        "pci=realloc=off",
        "DMI: Supermicro SYS-821GE-TNHR/X13DEG-OAD, BIOS 2.1 06/20/2024",
        "smpboot: CPU0: Intel(R) Xeon(R) Platinum 8480+ (family: 0x6, model: 0x8f)",
        "pci 0000:00:00.0: [8086:09a2] type 00 class 0x088000",
        f"mlx_compat: loading out-of-tree module taints kernel. ({ofed})",
        f"mlx5_core: Mellanox ConnectX core driver {ofed}",
    ]
    for rail in range(RAILS):
        bdf = f"0000:{_bus(rail):02x}:00.0"
        lines += [
            f"mlx5_core {bdf}: enabling device (0000 -> 0002)",
            f"mlx5_core {bdf}: firmware version: {fw}",
            f"mlx5_core {bdf}: 504.112 Gb/s available PCIe bandwidth (32.0 GT/s PCIe x16 link)",
            f"mlx5_core {bdf}: Rate limit: 127 rates are supported, range: 0Mbps to 195312Mbps",
            f"mlx5_core {bdf}: E-Switch: Total vports 2, per vport: max uc(128) max mc(2048)",
            f"mlx5_core {bdf}: MLX5E: StrdRq(1) RqSz(8) StrdSz(2048) RxCqeCmprss(0 enhanced)",
            f"mlx5_core {bdf}: mlx5_pcie_event:301:(pid {rng.randrange(900, 1900)}): PCIe slot "
            "advertised sufficient power (27W).",
        ]
    lines.append(f"mlx5_ib: Mellanox Connect-IB Infiniband driver {ofed}")
    for rail in range(RAILS):
        lines.append(f"mlx5_core 0000:{_bus(rail):02x}:00.0 ib{rail}: ipoib_open: enter")
    lines += [
        "nvidia: module license 'NVIDIA' taints kernel.",
        "nvidia-nvlink: Nvlink Core is being initialized, major device number "
        f"{rng.randrange(230, 240)}",
        f"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {PEERMEM}  Tue Jun  4 20:40:55 UTC 2024",
        f"nvidia_peermem: loading module, version {PEERMEM}",
        f"systemd[1]: Set hostname to <{host}>.",
    ]
    stamp, out = 0.0, []
    for line in lines:
        stamp += rng.uniform(0.0005, 0.4)
        out.append(f"[{stamp:12.6f}] {line}")
    return "\n".join(out) + "\n"


def _perftest(gbps: float, device: str, lid: int, rng: random.Random) -> Tuple[str, str]:
    """(server stdout, client stdout) of one ib_write_bw loopback reporting ``gbps``
    (--report_gbits), in the superbench capture's layout."""
    text = _capture(
        "perftest", "superbench-ib_write_bw-loopback-8M-azure-hdr-ib0-server-client-interleaved.txt"
    )
    text = text.replace("Device         : ib0", f"Device         : {device}")
    text = text.replace("LID 0xd06", f"LID {lid:#06x}")
    text = text.replace("[MB/sec]", "[Gb/sec]")
    peak = gbps + rng.uniform(0.0, 1.5)
    row = (
        f" 65536      {int(gbps * 1e9 / 8 / 65536 * 5):<10d}       {peak:.2f}             "
        f"{gbps:.2f}\t\t   {gbps * 1e9 / 8 / 65536 / 1e6:.6f}"
    )
    text = re.sub(r"^ 8388608 .*$", row, text, flags=re.M)
    server_end = text.index("* Waiting for client to connect... *")
    client_start = text.index("---", server_end)
    server = text[:client_start]
    client = text[client_start:]
    return server, client


def _nccl_tests(busbw: float, host: str, rng: random.Random) -> str:
    """nccl-tests all_reduce_perf on the node's 8 GPUs, the gcm capture's layout, scaled so
    busbw at 1 GiB is ``busbw`` (GB/s)."""
    text = _capture("nccl_tests", "gcm-allreduce-1node-8xA100-80GB-nccl2.16.2.txt")
    text = text.replace("{hostname}", host).replace(
        "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"
    )
    text = text.replace("NCCL version 2.16.2+cuda11.6", "NCCL version 2.21.5+cuda12.4")
    # the plain launcher: one process drives the eight GPUs (-g 8)
    text = text.replace("nThread 1 nGpus 1", f"nThread 1 nGpus {RAILS}")
    pid = rng.randrange(10000, 99999)
    text = re.sub(r"Pid  \d+", f"Pid {pid:6d}", text)
    rows = re.findall(
        r"^ +(\d+) +\d+ +float +sum +-1 +([\d.]+) +([\d.]+) +([\d.]+) .*$", text, flags=re.M
    )
    factor = busbw / float(rows[-1][3])
    total = 0.0
    for size, _, _, old_busbw in rows:
        out_bus = float(old_busbw) * factor * rng.uniform(0.995, 1.0)
        in_bus = float(old_busbw) * factor * rng.uniform(0.995, 1.0)
        if size == rows[-1][0]:
            out_bus = busbw
        total += out_bus
        cells = []
        for bus in (out_bus, in_bus):
            alg = bus / 1.75  # all_reduce: busbw = algbw x 2(n-1)/n, n = 8
            time_us = int(size) / (alg * 1e9) * 1e6
            cells.append(f"{time_us:8.1f} {alg:7.2f} {bus:7.2f} {0:6d}")
        count = int(size) // 4
        line = f"{int(size):12d} {count:13d}     float     sum      -1 {cells[0]}  {cells[1]}"
        text = re.sub(rf"^ +{size} +\d+ +float .*$", line, text, count=1, flags=re.M)
    return re.sub(
        r"# Avg bus bandwidth    : [\d.]+",
        f"# Avg bus bandwidth    : {total / len(rows):.2f}",
        text,
    )


def _clipped(rng: random.Random, mean: float, sd: float, low: float, high: float) -> float:
    return round(min(high, max(low, rng.gauss(mean, sd))), 2)


@functools.cache
def _needs() -> frozenset:
    """Every source a check of the level may read (what ``ibdiag check`` collects at most: the
    support catalogue is ``ibdiag collect``'s alone)."""
    order = ("quick", "standard", "full")
    return frozenset(
        s
        for s, at in SOURCE_LEVELS.items()
        if order.index(at) <= order.index(LEVEL) and s not in BUNDLE_ONLY
    )


def node_report(fleet: FleetPlan, index: int) -> str:
    """The Report JSON (``ibdiag check --json``'s text) of node ``index``."""
    return render_json(graded_node(fleet, index))


def graded_node(fleet: FleetPlan, index: int) -> Report:
    """Node ``index``'s Report: its Snapshot (collect's fields, its runs interpreted by
    ibdiag), graded by ibdiag against its snapshot of a day earlier."""
    node = fleet.node(index)
    rng = random.Random(f"{fleet.seed}:{index}")  # noqa: S311 - reproducible, not secret
    then_counters, now_counters = _port_counters(node, rng)
    fars = _far_ends(node, rng)
    devices = _devices(node, now_counters)
    gpus = _gpus()
    runs = _read_only_runs(node, devices, gpus, fars, rng)
    runs += _loopback_runs(node, devices, rng)
    runs.append(_nccl_tests_run(node, rng))
    collected = EPOCH + timedelta(seconds=round(index * 0.37 + rng.uniform(0, 30), 3))
    parts = [rng.getrandbits(bits) for bits in (32, 16, 12, 16, 48)]
    boot_id = "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}".format(*parts)
    fields = {
        "host": node.host,
        "boot_id": boot_id,
        "boot_time": collected - timedelta(days=rng.randrange(3, 40), seconds=rng.randrange(86400)),
        "kernel_release": node.kernel,
        "driver_versions": {**dict.fromkeys(OFED_MODULES, node.ofed), "nvidia_peermem": PEERMEM},
        "devices": devices,
        "gpus": gpus,
        "kernel_modules": KERNEL_MODULES,
        "problems": {},
    }
    commands = {run.key: run for run in runs}
    snap = families.interpret(
        Snapshot(
            tool_version=__version__,
            collected_at=collected,
            sysfs_root="/sys",
            procfs_root="/proc",
            sources=sorted({"procfs"} | set(_needs())),
            commands=commands,
            **fields,
        )
    )
    baseline = _baseline(snap, _devices(node, then_counters), fars)
    return grade(snap, builtin_registry(), SITE_THRESHOLDS, LEVEL, baseline=baseline)


KERNEL_MODULES = sorted(
    [
        "mlx5_core",
        "mlx5_ib",
        "ib_core",
        "ib_uverbs",
        "ib_umad",
        "ib_ipoib",
        "rdma_cm",
        "mlx_compat",
        "nvidia",
        "nvidia_uvm",
        "nvidia_modeset",
        "nvidia_peermem",
    ]
)


def _port_counters(node: NodePlan, rng: random.Random):
    """Each rail's sysfs port counters a day ago and now: traffic, a little VL15 noise, now
    and then a symbol error or two, and what was planted."""
    then_all: List[Dict[str, int]] = []
    now_all: List[Dict[str, int]] = []
    symbol_noise = rng.random() < SYMBOL_NOISE_SHARE
    noisy_rail = rng.randrange(RAILS)
    for rail in range(RAILS):
        then = dict(PORT_COUNTERS)
        for name in ("port_rcv_data", "port_xmit_data"):
            then[name] = rng.randrange(10**12, 9 * 10**12)
        for name in ("port_rcv_packets", "port_xmit_packets"):
            then[name] = rng.randrange(10**9, 9 * 10**9)
        now = dict(then)
        for name in ("port_rcv_data", "port_xmit_data"):
            now[name] += rng.randrange(10**11, 4 * 10**11)
        for name in ("port_rcv_packets", "port_xmit_packets"):
            now[name] += rng.randrange(10**8, 4 * 10**8)
        now["port_xmit_wait"] += rng.randrange(0, 5000)
        if rng.random() < VL15_NOISE_SHARE:
            now["VL15_dropped"] += rng.randrange(1, 9)
        if symbol_noise and rail == noisy_rail:
            now["symbol_error"] += rng.choice((1, 2))
        for planted_rail, name, increase in node.own_errors:
            if planted_rail == rail:
                now[name] += increase
        then_all.append(then)
        now_all.append(now)
    return then_all, now_all


def _far_ends(node: NodePlan, rng: random.Random) -> List[_Far]:
    """The switch port at the far end of each rail's cable, its counters a day ago and now."""
    fars = []
    for rail in range(RAILS):
        then = _switch_counters(rng)
        now = dict(then)
        for name in ("PortXmitData", "PortRcvData"):
            now[name] += rng.randrange(10**11, 4 * 10**11)
        for name in ("PortXmitPkts", "PortRcvPkts"):
            now[name] += rng.randrange(10**8, 4 * 10**8)
        for planted_rail, name, increase in node.far_errors:
            if planted_rail == rail:
                now[name] += increase
        fars.append(_Far(node.su, node.leaf_rail(rail), node.leaf_port, now, then))
    return fars


def _devices(node: NodePlan, counters: List[Dict[str, int]]) -> List[Device]:
    """The eight HCAs as the sysfs source reads them (``tests/snapshots.py``'s factories)."""
    built = []
    for rail in range(RAILS):
        name = f"mlx5_{rail}"
        ib_port = port(
            1,
            rate_text=NDR,
            lid=_lid(node.index),
            sm_lid=1,
            netdev=netdev(f"ib{rail}"),
            counters=counters[rail],
        )
        dev = device(
            name,
            [ib_port.model_copy(update={"hw_counters": dict(HW_COUNTERS)})],
            hca_type=HCA_TYPE,
            fw_ver=node.fw_ver,
            board_id=BOARD_ID,
            node_guid=_sysfs_guid(_guid(node.index, rail)),
            pci=pci(
                f"0000:{_bus(rail):02x}:00.0",
                device_id=HCA_PCI_ID,
                numa_node=rail * 2 // RAILS,
                current_link_speed=32.0,
                max_link_speed=32.0,
            ),
        )
        built.append(dev.model_copy(update={"node_desc": f"{node.host} {name}"}))
    return built


@functools.cache
def _gpus_cached() -> Tuple[Pci, ...]:
    return tuple(
        Pci(
            address=f"0000:{_gpu_bus(rail):02x}:00.0",
            vendor_id="0x10de",
            device_id="0x2330",
            numa_node=rail * 2 // RAILS,
            current_link_speed=32.0,
            current_link_width=16,
            max_link_speed=32.0,
            max_link_width=16,
        )
        for rail in range(RAILS)
    )


def _gpus() -> List[Pci]:
    """Eight H100 SXM (10de:2330), each beside its HCA (the nvidia-smi topo capture's PIX)."""
    return list(_gpus_cached())


def _read_only_runs(
    node: NodePlan, devices: List[Device], gpus: List[Pci], fars: List[_Far], rng: random.Random
) -> List[CommandRun]:
    """Level standard's commands as collect plans them (``ibdiag.families.plan``, the far-end
    chain of ``ibdiag.families.partner.chain``), each with its capture as stdout."""
    fixed = {
        "perfquery-x": _capture(*S.PERFQUERY_X_HEALTHY),
        "perfquery-E": _capture(*S.PERFQUERY_E),
        "perfquery-X": S.PERFQUERY_XMIT_SL,
        "perfquery_fec-T": _perfquery_t(),  # phy.fec (hand-made: tests/captures/perfquery-T)
        "ethtool-S": _capture(*S.ETHTOOL_S),
        str(roles.GPU_TOPOLOGY): _capture(
            "nvidia_smi_topo", "sglang-issue30401-8xH100-8xmlx5-PIX-rail.txt"
        ),
    }
    runs = []
    files = Snapshot(  # what sysfs gave: all a family plans from
        tool_version=__version__,
        host=node.host,
        collected_at=EPOCH,
        sysfs_root="/sys",
        procfs_root="/proc",
        devices=devices,
        gpus=gpus,
    )
    for planned in families.plan(files, sorted(_needs())):
        role = planned.role
        if planned.refused or role.family == "partner":
            continue  # no name is refused here; the far-end chains are _partner_runs'
        kind = f"{role.family}-{role.step}" if role.step else role.family
        if kind in fixed or str(role) in fixed:
            stdout = fixed.get(kind) or fixed[str(role)]
        elif role.family == "module":
            stdout = _module_json(node, int(role.target.split(":")[0].rsplit("_", 1)[1]))
        elif planned.role == roles.KERNEL_LOG:
            stdout = _dmesg(node.host, node.kernel, node.fw_ver, node.ofed, rng)
        elif planned.role == roles.IBSTAT:
            stdout = _ibstat(devices)
        elif planned.role == roles.IBV_DEVINFO:
            stdout = _ibv_devinfo(devices)
        elif role.family == "devlink_health":
            stdout = _devlink_health(devices)
        else:
            raise AssertionError(f"no capture for {planned.role}")
        runs.append(
            CommandRun(
                argv=planned.argv,
                role=planned.role,
                rc=0,
                stdout=stdout,
                duration_s=round(rng.uniform(0.01, 0.3), 3),
            )
        )
    for rail, far in enumerate(fars):
        runs += _partner_runs(f"mlx5_{rail}", 1, _lid(node.index), far, far.now)
    return runs


def _loopback_runs(node: NodePlan, devices: List[Device], rng: random.Random) -> List[CommandRun]:
    """Level full's ib_write_bw loopback per port as ``traffic.plan_loopback`` plans it."""
    slow = dict(node.slow_rails)
    tests = traffic.plan_loopback(
        devices,
        SITE_THRESHOLDS,
        graded=lambda dev: True,
        gpu_near=lambda name: None,
        pin_for=traffic.numa_pinning("/usr/bin", {}),
    )
    runs = []
    for test in tests:
        rail = int(test.client_device.rsplit("_", 1)[1])
        gbps = _clipped(rng, *BW_NORMAL)
        if rail in slow:
            gbps = round(BW_NORMAL[0] * slow[rail] + rng.uniform(-1.0, 1.0), 2)
        outputs = _perftest(gbps, test.client_device, _lid(node.index), rng)
        for side, stdout in zip(("server", "client"), outputs):
            seconds = SITE_THRESHOLDS.perftest_duration_s + rng.uniform(0.8, 1.6)
            runs.append(
                CommandRun(
                    argv=test.argv(SITE_THRESHOLDS, side),
                    role=test.role(side),
                    rc=0,
                    stdout=stdout,
                    duration_s=round(seconds, 3),
                )
            )
    return runs


def _nccl_tests_run(node: NodePlan, rng: random.Random) -> CommandRun:
    busbw = _clipped(rng, *NCCL_NORMAL)
    if node.nccl_fraction != 1.0:
        busbw = round(NCCL_NORMAL[0] * node.nccl_fraction, 2)
    argv = nccl_tests.nccl_tests_argv(NCCL_PROGRAM, gpus=RAILS, min_bytes="32M", max_bytes="1G")
    return CommandRun(
        argv=argv,
        role=roles.NCCL_TESTS,
        rc=0,
        stdout=_nccl_tests(busbw, node.host, rng),
        duration_s=round(rng.uniform(40, 44), 3),
    )


def _baseline(snap: Snapshot, then_devices: List[Device], fars: List[_Far]) -> Snapshot:
    """The node's snapshot a day earlier (its ``--state``): the same node, with the port
    counters and the far ends' counters it had then."""
    devices = []
    for dev, old in zip(snap.devices, then_devices):
        far = fars[int(dev.name.rsplit("_", 1)[1])]
        ports = []
        for now_port, old_port in zip(dev.ports, old.ports):
            partner = now_port.partner
            if partner is not None and partner.counters is not None:
                values = {**partner.counters.counters, **far.then}
                partner = partner.model_copy(
                    update={"counters": partner.counters.model_copy(update={"counters": values})}
                )
            ports.append(
                now_port.model_copy(update={"counters": old_port.counters, "partner": partner})
            )
        devices.append(dev.model_copy(update={"ports": ports}))
    return snap.model_copy(
        update={
            "devices": devices,
            "collected_at": snap.collected_at - timedelta(hours=BASELINE_HOURS),
        }
    )


# --- the fleet --------------------------------------------------------------------------------


class Written(NamedTuple):
    """One node's report as written: its verdict and drain reason (the grader's), its size."""

    host: str
    verdict: str
    reason: str
    size: int


_WORKER: Dict[str, Any] = {}  # in a generating process: the fleet's plan and directory


def _start_worker(directory: str, nodes: int, seed: int) -> None:
    _WORKER.update(directory=directory, fleet=plan_fleet(nodes, seed))
    _memoize_parsers()


def _write_node(index: int) -> Written:
    fleet: FleetPlan = _WORKER["fleet"]
    report = graded_node(fleet, index)
    data = render_json(report).encode("utf-8")
    with open(os.path.join(_WORKER["directory"], f"{fleet.hosts[index]}.json"), "wb") as handle:
        handle.write(data)
    return Written(fleet.hosts[index], report.verdict.value, drain_reason(report), len(data))


def write_fleet(root: str, nodes: int, seed: int = 15, workers: int = 1) -> Dict[str, Any]:
    """Write ``nodes`` reports (``root/nodes/<host>.json``: a directory of reports and nothing
    else, as ``fleet run`` leaves one) and ``root/truth.json``, in ``workers`` processes (never
    this one); returns the truth, with ``bytes``: the reports' total size."""
    directory = os.path.join(root, REPORTS)
    os.makedirs(directory, exist_ok=True)
    fleet = plan_fleet(nodes, seed)
    with ProcessPoolExecutor(
        max_workers=max(1, workers),
        initializer=_start_worker,
        initargs=(directory, nodes, seed),
    ) as pool:
        written = list(pool.map(_write_node, range(nodes), chunksize=16))
    truth = {**fleet_truth(fleet, written), "bytes": sum(node.size for node in written)}
    with open(os.path.join(root, TRUTH), "w", encoding="utf-8") as handle:
        json.dump(truth, handle, indent=1, sort_keys=True)
        handle.write("\n")
    return truth


def _memoize_parsers() -> None:
    """In a generating process only: every node prints the same perfquery and ethtool -S
    captures, so each text is parsed once, not 32 times a node (the parsers are pure functions
    of the text, and their callers copy what they keep). A third of the generation time."""
    from ibdiag.families import ethtool, perfquery

    for module, name in ((ethtool, "parse_ethtool_stats"), (perfquery, "parse_perfquery")):
        parser = getattr(module, name)
        if not hasattr(parser, "cache_info"):
            setattr(module, name, functools.lru_cache(maxsize=64)(parser))


def fleet_truth(fleet: FleetPlan, written: Iterable[Written]) -> Dict[str, Any]:
    """What ``ibdiag fleet report`` must find, and nothing more: the plan's faults as the
    FleetReport's sections name them, and each node's verdict and drain reason as ibdiag
    graded it (so the drain, switch-suspect and warning groups are ibdiag's own)."""
    planted = fleet.truth
    verdicts = {node.host: node.verdict for node in written}
    reasons = {node.host: node.reason for node in written}
    switch, bad = planted["switch"], planted["bad_port"]

    def groups(verdict: str, keep=lambda host: True) -> Dict[str, List[str]]:
        found: Dict[str, List[str]] = {}
        for host in sorted(h for h, v in verdicts.items() if v == verdict and keep(h)):
            found.setdefault(reasons[host], []).append(host)
        return found

    def hosts(kind: str) -> List[str]:
        return sorted(item["host"] for item in planted[kind])

    outliers = [
        *({"host": s["host"], "metric": "ib_write_bw_gbps", "rail": s["rail"]}
          for s in planted["slow_rail"]),
        *({"host": s["host"], "metric": "nccl_tests_busbw_gbytes", "rail": None}
          for s in planted["slow_nccl"]),
        *({"host": s["host"], "metric": f"error_rate:{s['counter']}", "rail": s["rail"]}
          for s in planted["rate"]),
    ]  # fmt: skip
    for item in outliers:
        item["direction"] = "high" if item["metric"].startswith("error_rate:") else "low"
    drift = [_drift("fw_ver", rail, FW, FW_OFF, hosts("fw_off"), fleet.nodes)
             for rail in range(RAILS)]  # fmt: skip
    drift.append(_drift("kernel_release", None, KERNEL, KERNEL_OFF, hosts("kernel_off"),
                        fleet.nodes))  # fmt: skip
    drift += [_drift(f"driver:{module}", None, OFED, OFED_OFF, hosts("ofed_off"), fleet.nodes)
              for module in OFED_MODULES]  # fmt: skip
    swapped = planted["swapped"][0]
    swap_node = fleet.node(swapped["index"])
    misplacements = [
        {"host": swapped["host"], "rail": rail, "target": f"mlx5_{rail}:1",
         "peer_name": leaf_name(swap_node.su, swap_node.leaf_rail(rail))}
        for rail in swapped["rails"]
    ]  # fmt: skip

    def failing(host: str, rail: int) -> Dict[str, Any]:
        node = fleet.node(fleet.hosts.index(host))
        return {"host": host, "target": f"mlx5_{rail}:1", "peer_port": node.leaf_port}

    switches = [
        {"peer_name": switch["peer_name"], "suspect": True,
         "failing_nodes": sorted(switch["hosts"]), "attached_node_count": SU_SIZE,
         "failing_ports": [failing(host, switch["rail"]) for host in sorted(switch["hosts"])]},
        {"peer_name": bad["peer_name"], "suspect": False, "failing_nodes": [bad["host"]],
         "attached_node_count": SU_SIZE, "failing_ports": [failing(bad["host"], bad["rail"])]},
    ]  # fmt: skip
    lot = planted["bad_lot"]
    # The bad lot's leaf: listed for its ports' physical-layer findings alone (never a suspect).
    switches.append(
        {"peer_name": lot["peer_name"], "suspect": False, "failing_nodes": [],
         "attached_node_count": SU_SIZE, "failing_ports": [], "physical_nodes": lot["hosts"]}
    )  # fmt: skip
    cable_lots = [
        {"part_number": lot["part_number"], "lot": lot["lot"], "hosts": lot["hosts"],
         "port_count": len(lot["hosts"]), "cable_count": SU_SIZE, "checks": ["phy.ber"],
         "switches": [lot["peer_name"]]}
    ]  # fmt: skip
    # Every outlier on a rail is an outlying port of the leaf that rail lands on (its node's
    # cables all pass: each planted fault is on a node of its own).
    by_leaf = {entry["peer_name"]: entry for entry in switches}
    for item in outliers:
        if item["rail"] is None:
            continue
        node = fleet.node(fleet.hosts.index(item["host"]))
        leaf = leaf_name(node.su, node.leaf_rail(item["rail"]))
        entry = by_leaf.get(leaf)
        if entry is None:
            entry = {"peer_name": leaf, "suspect": False, "failing_nodes": [],
                     "attached_node_count": SU_SIZE, "failing_ports": []}  # fmt: skip
            by_leaf[leaf] = entry
            switches.append(entry)
        entry.setdefault("outlying_ports", []).append(
            {**failing(item["host"], item["rail"]), "metrics": [item["metric"]]}
        )
    for entry in switches:
        entry["attached_port_count"] = entry["attached_node_count"]  # one port per leaf a node
        entry.setdefault("outlying_ports", [])
    suspects = set(switch["hosts"])
    return {
        "nodes": fleet.nodes,
        "seed": fleet.seed,
        "level": LEVEL,
        "planted": planted,
        "counts": {v: sum(1 for x in verdicts.values() if x == v) for v in VERDICTS},
        "verdicts": {h: verdicts[h] for h in sorted(verdicts) if verdicts[h] != "OK"},
        "drain": groups("CRITICAL", lambda host: host not in suspects),
        "switch_suspect": groups("CRITICAL", lambda host: host in suspects),
        "warnings": groups("WARNING"),
        "unknown": groups("UNKNOWN"),
        "outliers": sorted(outliers, key=lambda o: (o["host"], o["metric"])),
        "drift": drift,
        "switches": switches,
        "rail_misplacements": misplacements,
        "cable_lots": cable_lots,
    }


VERDICTS = ("OK", "WARNING", "CRITICAL", "UNKNOWN")


def _drift(
    attribute: str, rail: Optional[int], majority: str, other: str, hosts: List[str], nodes: int
) -> Dict[str, Any]:
    """One ``Drift``: ``hosts`` run ``other``, every other node ``majority``."""
    return {
        "attribute": attribute,
        "rail": rail,
        "majority": majority,
        "majority_count": nodes - len(hosts),
        "others": {other: sorted(hosts)},
    }
