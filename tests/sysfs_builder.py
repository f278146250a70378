"""Build realistic sysfs trees for tests and benchmarks: mlx5 HCAs, their ports, PCI and netdevs.

The layout is a live node's: ``sys/devices/pci0000:00/<BDF>/{infiniband/<dev>,net/<if>}`` with
``sys/class/infiniband/<dev>`` and ``sys/class/net/<if>`` as relative symlinks and a ``device``
symlink from each RDMA device and netdev to its PCI function. It writes through ``os``, so it
works on a real directory and inside pyfakefs alike.

    write_node(tmp_path / "sys", mlx5_node(8))
    write_node(root, mlx5_node(2, port=dict(state="2: INIT")))
"""

from __future__ import annotations

import dataclasses
import os
from typing import Dict, List, Optional, Tuple

# The IB port counters every mlx5 port exposes under counters/ (values: a quiet, healthy port).
PORT_COUNTERS: Dict[str, int] = {
    "excessive_buffer_overrun_errors": 0,
    "link_downed": 0,
    "link_error_recovery": 0,
    "local_link_integrity_errors": 0,
    "multicast_rcv_packets": 1204,
    "multicast_xmit_packets": 77,
    "port_rcv_constraint_errors": 0,
    "port_rcv_data": 9837712934,
    "port_rcv_errors": 0,
    "port_rcv_packets": 22831911,
    "port_rcv_remote_physical_errors": 0,
    "port_rcv_switch_relay_errors": 0,
    "port_xmit_constraint_errors": 0,
    "port_xmit_data": 9912377104,
    "port_xmit_discards": 0,
    "port_xmit_packets": 23001877,
    "port_xmit_wait": 1931,
    "symbol_error": 0,
    "unicast_rcv_packets": 22830707,
    "unicast_xmit_packets": 23001800,
    "VL15_dropped": 0,
}

# mlx5 per-port hw_counters (names from the kernel's mlx5 driver).
HW_COUNTERS: Dict[str, int] = {
    name: 0
    for name in (
        "duplicate_request implied_nak_seq_err lifespan local_ack_timeout_err "
        "np_cnp_sent np_ecn_marked_roce_packets out_of_buffer out_of_sequence packet_seq_err "
        "req_cqe_error req_cqe_flush_error req_remote_access_errors req_remote_invalid_request "
        "resp_cqe_error resp_cqe_flush_error resp_local_length_error resp_remote_access_errors "
        "rnr_nak_retry_err roce_adp_retrans roce_adp_retrans_to roce_slow_restart "
        "roce_slow_restart_cnps roce_slow_restart_trans rp_cnp_handled rp_cnp_ignored "
        "rx_atomic_requests rx_dct_connect rx_icrc_encapsulated rx_read_requests "
        "rx_write_requests"
    ).split()
}


@dataclasses.dataclass
class PortSpec:
    state: str = "4: ACTIVE"
    phys_state: str = "5: LinkUp"
    rate: str = "200 Gb/sec (4X HDR)"
    link_layer: str = "InfiniBand"
    lid: str = "0x12"
    sm_lid: str = "0x1"
    netdev: Optional[str] = None  # IPoIB interface name; None: no netdev
    operstate: str = "up"
    mtu: str = "2044"
    # The partition table, slot by slot (``pkeys/0``...): the default partition, full member.
    pkeys: Tuple[str, ...] = ("0xffff",)
    counters: Dict[str, int] = dataclasses.field(default_factory=lambda: dict(PORT_COUNTERS))
    hw_counters: Dict[str, int] = dataclasses.field(default_factory=lambda: dict(HW_COUNTERS))


@dataclasses.dataclass
class HcaSpec:
    name: str
    pci_address: str
    hca_type: str = "MT4123"  # ConnectX-6
    pci_device_id: str = "0x101b"
    fw_ver: str = "20.31.2354"
    board_id: str = "MT_0000000223"
    node_guid: str = "b859:9f03:00d4:0a10"
    numa_node: str = "0"
    current_link_speed: str = "16.0 GT/s PCIe"
    current_link_width: str = "16"
    max_link_speed: str = "16.0 GT/s PCIe"
    max_link_width: str = "16"
    ports: List[PortSpec] = dataclasses.field(default_factory=lambda: [PortSpec()])


def mlx5_node(count: int, port: Optional[dict] = None, **hca: str) -> List[HcaSpec]:
    """``count`` ConnectX-6 HCAs mlx5_0.., one IB port each with IPoIB ib0..; overrides apply
    to every HCA (``hca``) and every port (``port``)."""
    specs = []
    for index in range(count):
        # Buses 0x10, 0x20, ... 0xf0 in PCI domain 0, then the same in domain 1, ...: valid
        # addresses however many HCAs (a real 8-HCA node looks like 0c, 12, 4b, 54, ...).
        domain, slot = divmod(index, 15)
        address = f"{domain:04x}:{0x10 * (slot + 1):02x}:00.0"
        # Each port its own LID (0x12, 0x13, ...): one subnet hands out each LID once.
        ports = [PortSpec(netdev=f"ib{index}", **{"lid": f"0x{0x12 + index:x}", **(port or {})})]
        specs.append(HcaSpec(name=f"mlx5_{index}", pci_address=address, ports=ports, **hca))
    return specs


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text + "\n")


def _link(link: str, target: str) -> None:
    os.makedirs(os.path.dirname(link), exist_ok=True)
    os.symlink(os.path.relpath(target, os.path.dirname(link)), link)


def write_node(sys_root: str, hcas: List[HcaSpec], char_devices: bool = True) -> None:
    """Write the HCAs under ``sys_root`` (the directory that plays /sys); with
    ``char_devices``, each one's uverbs device and each port's umad device as well
    (``write_char_devices``)."""
    sys_root = str(sys_root)
    if char_devices:
        write_char_devices(sys_root, hcas)
    for hca in hcas:
        pci = os.path.join(sys_root, "devices", "pci0000:00", hca.pci_address)
        for name, value in (
            ("vendor", "0x15b3"),
            ("device", hca.pci_device_id),
            ("numa_node", hca.numa_node),
            ("current_link_speed", hca.current_link_speed),
            ("current_link_width", hca.current_link_width),
            ("max_link_speed", hca.max_link_speed),
            ("max_link_width", hca.max_link_width),
        ):
            _write(os.path.join(pci, name), value)
        dev = os.path.join(pci, "infiniband", hca.name)
        for name, value in (
            ("node_type", "1: CA"),
            ("hca_type", hca.hca_type),
            ("board_id", hca.board_id),
            ("fw_ver", hca.fw_ver),
            ("node_guid", hca.node_guid),
            ("sys_image_guid", hca.node_guid),
            ("node_desc", f"node001 {hca.name}"),
            ("hw_rev", "0x0"),
        ):
            _write(os.path.join(dev, name), value)
        _link(os.path.join(dev, "device"), pci)
        _link(os.path.join(sys_root, "class", "infiniband", hca.name), dev)
        for number, port in enumerate(hca.ports, start=1):
            _write_port(sys_root, pci, os.path.join(dev, "ports", str(number)), number, port)


def _write_port(sys_root: str, pci: str, port_dir: str, number: int, port: PortSpec) -> None:
    for name, value in (
        ("state", port.state),
        ("phys_state", port.phys_state),
        ("rate", port.rate),
        ("link_layer", port.link_layer),
        ("lid", port.lid),
        ("sm_lid", port.sm_lid),
    ):
        _write(os.path.join(port_dir, name), value)
    for index, pkey in enumerate(port.pkeys):
        _write(os.path.join(port_dir, "pkeys", str(index)), pkey)
    for name, value in port.counters.items():
        _write(os.path.join(port_dir, "counters", name), str(value))
    for name, value in port.hw_counters.items():
        _write(os.path.join(port_dir, "hw_counters", name), str(value))
    if port.netdev:
        net = os.path.join(pci, "net", port.netdev)
        for name, value in (
            ("operstate", port.operstate),
            ("carrier", "1" if port.operstate == "up" else "0"),
            ("carrier_changes", "2"),
            ("mtu", port.mtu),
            ("type", "32" if port.link_layer == "InfiniBand" else "1"),
            ("dev_port", str(number - 1)),
            ("dev_id", "0x0"),
        ):
            _write(os.path.join(net, name), value)
        _link(os.path.join(net, "device"), pci)
        _link(os.path.join(sys_root, "class", "net", port.netdev), net)


def write_char_devices(
    sys_root: str, hcas: List[HcaSpec], issm: bool = False, skip: Tuple[str, ...] = ()
) -> None:
    """The verbs and MAD devices the kernel makes for ``hcas`` (numbered across them, as
    ib_uverbs and ib_umad number theirs): ``class/infiniband_verbs/uverbsN/ibdev`` per HCA,
    ``class/infiniband_mad/umadN/{ibdev,port}`` per port (and ``issmN`` with ``issm``), each
    class's ``abi_version``, and ``module/ib_uverbs`` and ``module/ib_umad``. ``skip``: entry
    names to leave out (``uverbs2``, ``umad0``), as a half-failed registration would."""
    verbs = os.path.join(sys_root, "class", "infiniband_verbs")
    mad = os.path.join(sys_root, "class", "infiniband_mad")
    _write(os.path.join(verbs, "abi_version"), "6")
    _write(os.path.join(mad, "abi_version"), "5")
    for module in ("ib_uverbs", "ib_umad"):
        _write(os.path.join(sys_root, "module", module, "refcnt"), "2")
    port_index = 0
    for index, hca in enumerate(hcas):
        if f"uverbs{index}" not in skip:
            _write(os.path.join(verbs, f"uverbs{index}", "ibdev"), hca.name)
        for number, _ in enumerate(hca.ports, start=1):
            kinds = ("umad", "issm") if issm else ("umad",)
            for kind in kinds:
                entry = f"{kind}{port_index}"
                if entry not in skip:
                    _write(os.path.join(mad, entry, "ibdev"), hca.name)
                    _write(os.path.join(mad, entry, "port"), str(number))
            port_index += 1


def bump_counter(
    sys_root: str, device: str, name: str, by: int, directory: str = "counters", port: int = 1
) -> None:
    """Add ``by`` to a port counter of the tree at ``sys_root`` (``directory``: ``counters`` or
    ``hw_counters``), as traffic or an error on the link would."""
    path = os.path.join(
        sys_root, "class", "infiniband", device, "ports", str(port), directory, name
    )
    with open(path) as handle:
        value = int(handle.read().strip())
    with open(path, "w") as handle:
        handle.write(f"{value + by}\n")


def write_nvidia_gpus(sys_root: str, count: int, numa_node: str = "0") -> List[str]:
    """``count`` NVIDIA 3D controllers (H100, class 0x030200) under bus/pci/devices, on
    buses 0x80.. (apart from the HCAs'); their PCI addresses."""
    addresses = []
    for index in range(count):
        address = f"0000:{0x80 + index:02x}:00.0"
        device = os.path.join(sys_root, "devices", "pci0000:80", address)
        for name, value in (
            ("vendor", "0x10de"), ("device", "0x2330"), ("class", "0x030200"),
            ("numa_node", numa_node),
        ):  # fmt: skip
            _write(os.path.join(device, name), value)
        _link(os.path.join(sys_root, "bus", "pci", "devices", address), device)
        addresses.append(address)
    return addresses
