"""Hand-built Snapshots for check tests, healthy unless told otherwise.

    snap = snapshot(devices=[device("mlx5_0", ports=[port(1, state=2)])])
    results = run("link.state", snap)

Defaults describe a healthy ConnectX-6 (MT4123, PCI 0x101b) node: every port 4: ACTIVE,
5: LinkUp, "200 Gb/sec (4X HDR)", link layer InfiniBand, an IPoIB netdev that is up, and a
PCIe link at 16 GT/s x16 of 16 GT/s x16. Everything goes through the pydantic models of
``ibdiag.model`` (validated), and rates through the same parser the sysfs source uses.
"""

from __future__ import annotations

import functools
import re
from datetime import datetime, timezone
from typing import Dict, Iterable, List, Optional

from ibdiag import __version__
from ibdiag.facts.char_devices import CharDevice, CharDevices
from ibdiag.facts.partitions import PKeyEntry, PKeyTable
from ibdiag.grade import grade, run_check
from ibdiag.model import CommandRun, Device, LinkRate, NetDev, Pci, Port, Report, Result, Snapshot
from ibdiag.registry import Registry, load_registry
from ibdiag.sources.sysfs_values import parse_rate
from ibdiag.thresholds import Thresholds

STATE_NAMES = {0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
PHYS_STATE_NAMES = {
    0: "<unknown>",
    1: "Sleep",
    2: "Polling",
    3: "Disabled",
    4: "PortConfigurationTraining",
    5: "LinkUp",
    6: "LinkErrorRecovery",
    7: "Phy Test",
}

HDR = "200 Gb/sec (4X HDR)"
EDR = "100 Gb/sec (4X EDR)"
NDR = "400 Gb/sec (4X NDR)"

CX6 = "MT4123"  # ConnectX-6, PCI 0x101b, best IB speed HDR
CX6_DX = "MT4125"  # ConnectX-6 Dx, PCI 0x101d, Ethernet only
CX7 = "MT4129"  # ConnectX-7, PCI 0x1021, best IB speed NDR

_PCI_IDS = {CX6: "0x101b", CX6_DX: "0x101d", CX7: "0x1021"}

# The sources level standard reads (the partner chain aside: a check that needs it adds it).
STANDARD_SOURCES = {
    "sysfs", "topology", "gpu_topology", "perfquery", "ethtool", "kernel_log", "ibstat",
    "ibv_devinfo",
}  # fmt: skip


class _Default:
    """Marks an argument left to the factory (None means "not readable / not there")."""

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT = _Default()


def rate(text: str) -> LinkRate:
    """A LinkRate parsed from the sysfs text, as the sysfs source would produce it."""
    return LinkRate.model_validate(parse_rate(text).model_dump())


def netdev(
    name: str = "ib0",
    operstate: Optional[str] = "up",
    *,
    carrier: Optional[int] = 1,
    carrier_changes: Optional[int] = 2,
    mtu: Optional[int] = 4092,
    type: Optional[int] = 32,
    mode: Optional[str] = "datagram",
    speed_mbps: Optional[int] = None,
    problems: Optional[Dict[str, str]] = None,
) -> NetDev:
    return NetDev(
        name=name,
        operstate=operstate,
        carrier=carrier,
        carrier_changes=carrier_changes,
        mtu=mtu,
        type=type,
        mode=mode,
        speed_mbps=speed_mbps,
        problems=problems or {},
    )


_make_netdev = netdev  # port() and device() take arguments named like the factories


DEFAULT_LID = 0x3A4


def port(
    number: int = 1,
    *,
    state: Optional[int] = 4,
    phys_state: Optional[int] = 5,
    rate_text: Optional[str] = HDR,
    link_layer: Optional[str] = "InfiniBand",
    lid: Optional[int] = DEFAULT_LID,  # device() makes it one per port
    sm_lid: Optional[int] = 1,
    netdev: object = DEFAULT,  # a NetDev, None for no netdev, or DEFAULT for a healthy one
    counters: Optional[Dict[str, int]] = None,
    problems: Optional[Dict[str, str]] = None,
    path: str = "",  # filled in by device() when left empty
    pkeys: Optional[Iterable[int]] = (0xFFFF,),  # the partition table; None: none read
) -> Port:
    if netdev is DEFAULT:
        if link_layer == "Ethernet":
            netdev = _make_netdev(f"eth{number - 1}", type=1, mode=None)
        else:
            netdev = _make_netdev(f"ib{number - 1}")
    return Port(
        number=number,
        path=path,
        state=state,
        state_name=STATE_NAMES.get(state) if state is not None else None,
        phys_state=phys_state,
        phys_state_name=PHYS_STATE_NAMES.get(phys_state) if phys_state is not None else None,
        rate=rate(rate_text) if rate_text is not None else None,
        link_layer=link_layer,
        lid=lid,
        sm_lid=sm_lid,
        counters=counters or {},
        netdev=netdev,
        facts={"pkeys": pkey_table(*pkeys)} if pkeys is not None else {},
        problems=problems or {},
    )


def pkey_table(*keys: int) -> PKeyTable:
    """A 128-slot partition table holding ``keys`` from slot 0."""
    entries = [PKeyEntry(index=index, value=value) for index, value in enumerate(keys)]
    return PKeyTable(size=128, keys=entries)


def char_devices_of(devices: Iterable[Device]) -> CharDevices:
    """The verbs and MAD devices a healthy kernel makes for ``devices``: a uverbs per HCA, a
    umad per port, numbered across them."""
    verbs, mad = [], []
    for index, dev in enumerate(devices):
        verbs.append(CharDevice(name=f"uverbs{index}", ibdev=dev.name))
        for p in dev.ports:
            mad.append(CharDevice(name=f"umad{len(mad)}", ibdev=dev.name, port=p.number))
    return CharDevices(verbs=verbs, mad=mad)


def pci(
    address: str = "0000:0c:00.0",
    *,
    device_id: Optional[str] = "0x101b",
    vendor_id: Optional[str] = "0x15b3",
    numa_node: Optional[int] = 0,
    current_link_speed: Optional[float] = 16.0,
    current_link_width: Optional[int] = 16,
    max_link_speed: Optional[float] = 16.0,
    max_link_width: Optional[int] = 16,
    problems: Optional[Dict[str, str]] = None,
) -> Pci:
    return Pci(
        address=address,
        vendor_id=vendor_id,
        device_id=device_id,
        numa_node=numa_node,
        current_link_speed=current_link_speed,
        current_link_width=current_link_width,
        max_link_speed=max_link_speed,
        max_link_width=max_link_width,
        problems=problems or {},
    )


_make_pci = pci


def _index(name: str) -> int:
    match = re.search(r"(\d+)$", name)
    return int(match.group(1)) if match else 0


def device(
    name: str = "mlx5_0",
    ports: Optional[Iterable[Port]] = None,
    *,
    hca_type: Optional[str] = CX6,
    fw_ver: Optional[str] = "20.31.1014",
    board_id: Optional[str] = "MT_0000000223",
    pci: object = DEFAULT,  # a Pci, None for no PCI function, or DEFAULT for a healthy one
    node_guid: Optional[str] = None,
    problems: Optional[Dict[str, str]] = None,
) -> Device:
    """An HCA; ``ports`` defaults to one healthy port 1. Port paths are filled in here."""
    path = f"class/infiniband/{name}"
    index = _index(name)
    built: List[Port] = [port()] if ports is None else list(ports)
    built = [
        p if p.path else p.model_copy(update={"path": f"{path}/ports/{p.number}"}) for p in built
    ]
    built = [  # the default LID made one per port (a subnet hands each LID out once)
        p.model_copy(update={"lid": DEFAULT_LID + 0x10 * index + p.number - 1})
        if p.lid == DEFAULT_LID
        else p
        for p in built
    ]
    if pci is DEFAULT:
        pci = _make_pci(
            f"0000:{0x0C + index:02x}:00.0", device_id=_PCI_IDS.get(hca_type or "", "0x101b")
        )
    return Device(
        name=name,
        path=path,
        node_type=1,
        node_type_name="CA",
        hca_type=hca_type,
        board_id=board_id,
        fw_ver=fw_ver,
        node_guid=node_guid or f"0c42:a103:00{index:02x}:1a2b",
        sys_image_guid=node_guid or f"0c42:a103:00{index:02x}:1a2b",
        node_desc=f"node001 {name}",
        hw_rev="0x0",
        pci=pci,
        ports=built,
        problems=problems or {},
    )


def snapshot(
    devices: Optional[Iterable[Device]] = None,
    *,
    sysfs_root: str = "/sys",
    problems: Optional[Dict[str, str]] = None,
    char_devices: object = DEFAULT,  # CharDevices, None for none read, DEFAULT: healthy ones
) -> Snapshot:
    """A node; ``devices`` defaults to one healthy mlx5_0 (pass ``[]`` for none at all)."""
    built = [device()] if devices is None else list(devices)
    if char_devices is DEFAULT:
        char_devices = char_devices_of(built)
    return Snapshot(
        tool_version=__version__,
        host="node001",
        boot_id="6f1e8a52-3c55-4b8e-9d8e-2a7c0c8f4b11",
        collected_at=datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc),
        sysfs_root=sysfs_root,
        procfs_root="/proc",
        sources=["sysfs"],
        devices=built,
        facts={"char_devices": char_devices} if char_devices is not None else {},
        problems=problems or {},
    )


def replaced(snap: Snapshot, target: str, **update: object) -> Snapshot:
    """A new Snapshot whose device (``mlx5_0``) or port (``mlx5_0:1``) ``target`` has the fields
    ``update`` gives: models are frozen, so a test builds a changed copy, never edits one."""
    name, _, number = target.partition(":")
    assert snap.device(name) is not None, target

    def changed(dev: Device) -> Device:
        if not number:
            return dev.model_copy(update=update)
        assert any(p.number == int(number) for p in dev.ports), target
        ports = [p.model_copy(update=update) if p.number == int(number) else p for p in dev.ports]
        return dev.model_copy(update={"ports": ports})

    devices = [changed(dev) if dev.name == name else dev for dev in snap.devices]
    return snap.model_copy(update={"devices": devices})


def assert_same_snapshot(replayed: Snapshot, live: Snapshot) -> None:
    """Field by field (the first that differs is named), then whole, then as JSON."""
    for name in Snapshot.model_fields:
        assert getattr(replayed, name) == getattr(live, name), name
    assert replayed == live
    assert replayed.model_dump_json() == live.model_dump_json()


def devices(count: int, **kwargs: object) -> List[Device]:
    """``count`` healthy devices mlx5_0..mlx5_<count-1> with the same keyword arguments."""
    return [device(f"mlx5_{n}", **kwargs) for n in range(count)]  # type: ignore[arg-type]


@functools.cache
def builtin_registry() -> Registry:
    """The built-in checks only (no entry points, no drop-ins), loaded once per test run."""
    return load_registry(entry_points=False)


@functools.cache
def loaded_registry() -> Registry:
    """What ``ibdiag`` itself loads (built-ins, entry points, the site's drop-ins: none, the
    site config dir is empty in tests), loaded once per test run."""
    return load_registry()


def report_for(snapshot: Snapshot) -> Report:
    """``snapshot`` graded at level quick by ``ibdiag``'s checks, expecting 200 Gb/s (HDR)."""
    return grade(snapshot, loaded_registry(), Thresholds(expect_rate_gbps=200.0), "quick")


def run(check_id: str, snap: Snapshot, th: Optional[Thresholds] = None) -> List[Result]:
    """Run one built-in check through the grader, so results carry the check id."""
    spec = builtin_registry().get(check_id)
    assert spec is not None, f"no built-in check {check_id!r}"
    return run_check(spec, snap, th or Thresholds())


def by_target(results: Iterable[Result]) -> Dict[str, Result]:
    """Results keyed by target; fails when a target has more than one result."""
    keyed: Dict[str, Result] = {}
    for result in results:
        assert result.target not in keyed, f"two results for {result.target}: {result}"
        keyed[result.target] = result
    return keyed


def only(results: List[Result]) -> Result:
    """The one result of a check that must give exactly one."""
    assert len(results) == 1, results
    return results[0]


def statuses(results: Iterable[Result]) -> Dict[str, str]:
    """{target: status value}, for compact assertions."""
    return {target: result.status.value for target, result in by_target(results).items()}


def interpreted(snap: Snapshot) -> Snapshot:
    """``snap`` with its typed command fields set from its runs and dump files, as collect and
    replay set them (``ibdiag.families.interpret``): for hand-built snapshots with commands."""
    from ibdiag.families import interpret

    return interpret(snap)


def with_runs(snap: Snapshot, *runs: CommandRun) -> Snapshot:
    """``snap`` with ``runs`` recorded (by role, as collect records them) and interpreted."""
    commands = {**snap.commands, **{item.key: item for item in runs}}
    return interpreted(snap.model_copy(update={"commands": commands}))
