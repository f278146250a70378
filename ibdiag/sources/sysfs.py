"""Read every RDMA device, every port, its PCIe function and its netdev from sysfs.

Layout read (relative to the sysfs root, ``/sys`` unless ``--sysfs`` moves it):

    class/infiniband/<dev>/{node_type,hca_type,board_id,fw_ver,node_guid,...}
    class/infiniband/<dev>/hw_counters/*                     device-level counters (mlx5)
    class/infiniband/<dev>/ports/<n>/{state,phys_state,rate,link_layer,lid,sm_lid}
    class/infiniband/<dev>/ports/<n>/{counters,counters_ext,hw_counters}/*
    class/infiniband/<dev>/ports/<n>/gid_attrs/ndevs/0       RoCE: the Ethernet netdev's name
    class/infiniband/<dev>/device -> the PCI function (numa_node, *_link_speed/width, net/<if>)

A missing, unreadable or odd file is recorded in the owner's ``problems`` for that attribute
only; the device and the run go on. Ports are whatever ``ports/`` lists — never assume port 1.
"""

from __future__ import annotations

import errno
import os
import re
from typing import Callable, Dict, List, Optional, Tuple, TypeVar

from ibdiag.model import Device, NetDev, Pci, Port, Problems
from ibdiag.sources.parsers import sysfs_values as parse

T = TypeVar("T")

INFINIBAND_CLASS = "class/infiniband"
_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", re.IGNORECASE)
_MAX_ATTRIBUTE_BYTES = 64 * 1024  # sysfs attributes are at most a page; guard against odd files
_COUNTER_DIRS = ("counters", "counters_ext")


def natural_key(name: str) -> Tuple[object, ...]:
    """Sort mlx5_2 before mlx5_10 and port 2 before port 10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def describe_os_error(exc: OSError) -> str:
    """ "EINVAL (Invalid argument)": the errno name admins grep for, and its meaning."""
    if isinstance(exc, FileNotFoundError):
        return "missing"
    if isinstance(exc, PermissionError):
        return "permission denied"
    name = errno.errorcode.get(exc.errno or 0, "error")
    return f"{name} ({exc.strerror})" if exc.strerror else name


class SysfsReader:
    """Reads a sysfs tree rooted at ``root``; every path it is given is relative to that root."""

    def __init__(self, root: str) -> None:
        self.root = root

    def abspath(self, rel: str) -> str:
        return os.path.join(self.root, rel)

    def read_text(self, rel: str) -> Tuple[Optional[str], Optional[str]]:
        """(text without the trailing newline, None) or (None, why it could not be read).

        Raw ``os.open``/``os.read``: a sysfs attribute is returned whole by one read, and
        skipping Python's buffered-file layer halves the cost of each of the hundreds of files
        a node has.
        """
        data, problem = self.read_bytes(rel)
        if problem is not None:
            return None, problem
        return decode_attribute(data)  # type: ignore[arg-type]

    def listdir(self, rel: str) -> Tuple[List[str], Optional[str]]:
        """Sorted entry names, or ([], why) when the directory is missing or unreadable."""
        try:
            names = os.listdir(self.abspath(rel))
        except OSError as exc:
            return [], describe_os_error(exc)
        return sorted(names, key=natural_key), None

    def exists(self, rel: str) -> bool:
        return os.path.exists(self.abspath(rel))

    def realname(self, rel: str) -> str:
        """The last component of the path a symlink resolves to (a PCI address for ``device``)."""
        return os.path.basename(os.path.realpath(self.abspath(rel)))

    def read_bytes(self, rel: str) -> Tuple[Optional[bytes], Optional[str]]:
        """The raw bytes one ``read`` returns (what ``read_text`` decodes), or (None, why)."""
        try:
            fd = os.open(self.abspath(rel), os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            return None, describe_os_error(exc)
        try:
            return os.read(fd, _MAX_ATTRIBUTE_BYTES), None
        except IsADirectoryError:
            return None, "is a directory"
        except OSError as exc:
            return None, describe_os_error(exc)
        finally:
            os.close(fd)


def decode_attribute(data: bytes) -> Tuple[Optional[str], Optional[str]]:
    """What ``SysfsReader.read_text`` makes of the bytes it read: text, or why it is none."""
    text = data.decode("utf-8", errors="replace").rstrip("\n")
    if not text.strip():
        return None, "empty"
    return text, None


class Recording:
    """Everything a collection read, keyed by logical path (``sys/<rel>`` or ``proc/<rel>``).

    ``files``: the exact bytes read; ``unreadable``: why a file could not be read; ``listings``
    and ``listing_errors``: directory listings; ``links``: each symlink resolved by ``realname``
    (``{"name": <basename>, "target": <target relative to its root, or absolute>}``);
    ``exists``: each ``exists`` answer. A support bundle stores this and replays it.
    """

    def __init__(self) -> None:
        self.files: Dict[str, bytes] = {}
        self.unreadable: Dict[str, str] = {}
        self.listings: Dict[str, List[str]] = {}
        self.listing_errors: Dict[str, str] = {}
        self.links: Dict[str, Dict[str, str]] = {}
        self.exists: Dict[str, bool] = {}


class RecordingReader(SysfsReader):
    """A SysfsReader that also notes every answer in a ``Recording`` under ``prefix/``.

    Only used when a bundle is being collected: the plain reader's quick path is untouched.
    """

    def __init__(self, root: str, recording: Recording, prefix: str) -> None:
        super().__init__(root)
        self.recording = recording
        self.prefix = prefix

    def key(self, rel: str) -> str:
        return f"{self.prefix}/{rel.strip('/')}"

    def read_text(self, rel: str) -> Tuple[Optional[str], Optional[str]]:
        data, problem = self.read_bytes(rel)
        if data is None:
            self.recording.unreadable[self.key(rel)] = problem or "unreadable"
            return None, problem
        self.recording.files[self.key(rel)] = data
        return decode_attribute(data)

    def listdir(self, rel: str) -> Tuple[List[str], Optional[str]]:
        names, problem = super().listdir(rel)
        if problem is not None:
            self.recording.listing_errors[self.key(rel)] = problem
        else:
            self.recording.listings[self.key(rel)] = list(names)
        return names, problem

    def exists(self, rel: str) -> bool:
        answer = super().exists(rel)
        self.recording.exists[self.key(rel)] = answer
        return answer

    def realname(self, rel: str) -> str:
        target = os.path.realpath(self.abspath(rel))
        root = os.path.realpath(self.root)
        shown = os.path.relpath(target, root) if target.startswith(root + os.sep) else target
        name = os.path.basename(target)
        self.recording.links[self.key(rel)] = {"name": name, "target": shown}
        return name


class _AttributeReader:
    """Reads attributes of one sysfs directory into values, noting problems per attribute."""

    def __init__(self, reader: SysfsReader, directory: str, problems: Problems) -> None:
        self.reader = reader
        self.directory = directory
        self.problems = problems

    def get(
        self,
        name: str,
        convert: Callable[[str], T],
        required: bool = True,
        label: Optional[str] = None,
    ) -> Optional[T]:
        """The converted value of ``directory/name``, or None with the reason in ``problems``.

        ``required=False`` attributes that do not exist at all (``mode`` on a RoCE netdev, say)
        are simply absent, not a problem.
        """
        text, problem = self.reader.read_text(f"{self.directory}/{name}")
        key = label or name
        if problem is not None:
            if required or problem != "missing":
                self.problems[key] = problem
            return None
        try:
            return convert(text)  # type: ignore[arg-type]
        except ValueError as exc:
            self.problems[key] = str(exc)
            return None

    def text(self, name: str, required: bool = True) -> Optional[str]:
        return self.get(name, str.strip, required)

    def counters(self, subdir: str, into: Dict[str, int]) -> None:
        """Every file of ``subdir`` as a counter; names are kept as the driver spells them."""
        names, problem = self.reader.listdir(f"{self.directory}/{subdir}")
        if problem not in (None, "missing"):
            self.problems[subdir] = problem  # type: ignore[assignment]
        for name in names:
            value = self.get(f"{subdir}/{name}", parse.parse_counter)
            if value is not None:
                into[name] = value


def read_devices(reader: SysfsReader) -> Tuple[List[Device], Problems]:
    """Every device under class/infiniband, and node-level problems (e.g. the class is missing)."""
    names, problem = reader.listdir(INFINIBAND_CLASS)
    node_problems: Problems = {}
    if problem is not None:
        node_problems[INFINIBAND_CLASS] = problem
    return [read_device(reader, name) for name in names], node_problems


def read_device(reader: SysfsReader, name: str) -> Device:
    path = f"{INFINIBAND_CLASS}/{name}"
    problems: Problems = {}
    attrs = _AttributeReader(reader, path, problems)
    node_type = attrs.get("node_type", parse.parse_enum)
    hw_counters: Dict[str, int] = {}
    attrs.counters("hw_counters", hw_counters)
    port_names, port_problem = reader.listdir(f"{path}/ports")
    if port_problem is not None:
        problems["ports"] = port_problem
    numbers = [int(name) for name in port_names if name.isdigit()]
    problems.update(
        {f"ports/{name}": "not a port number" for name in port_names if not name.isdigit()}
    )
    ports = [read_port(reader, path, number, len(numbers)) for number in numbers]
    return Device.model_construct(
        name=name,
        path=path,
        node_type=node_type[0] if node_type else None,
        node_type_name=node_type[1] if node_type else None,
        hca_type=attrs.text("hca_type", required=False),
        board_id=attrs.text("board_id", required=False),
        fw_ver=attrs.text("fw_ver"),
        node_guid=attrs.text("node_guid"),
        sys_image_guid=attrs.text("sys_image_guid", required=False),
        node_desc=attrs.text("node_desc", required=False),
        hw_rev=attrs.text("hw_rev", required=False),
        pci=read_pci(reader, path, problems),
        ports=ports,
        hw_counters=hw_counters,
        problems=problems,  # last: every attribute above has had its say
    )


def read_port(reader: SysfsReader, device_path: str, number: int, port_count: int) -> Port:
    path = f"{device_path}/ports/{number}"
    problems: Problems = {}
    attrs = _AttributeReader(reader, path, problems)
    state = attrs.get("state", parse.parse_enum)
    phys_state = attrs.get("phys_state", parse.parse_enum)
    counters: Dict[str, int] = {}
    for subdir in _COUNTER_DIRS:
        attrs.counters(subdir, counters)
    hw_counters: Dict[str, int] = {}
    attrs.counters("hw_counters", hw_counters)
    return Port.model_construct(
        number=number,
        path=path,
        state=state[0] if state else None,
        state_name=state[1] if state else None,
        phys_state=phys_state[0] if phys_state else None,
        phys_state_name=phys_state[1] if phys_state else None,
        rate=attrs.get("rate", parse.parse_rate),
        link_layer=attrs.text("link_layer"),
        lid=attrs.get("lid", parse.parse_hex_or_int, required=False),
        sm_lid=attrs.get("sm_lid", parse.parse_hex_or_int, required=False),
        counters=counters,
        hw_counters=hw_counters,
        netdev=read_port_netdev(reader, device_path, number, port_count),
        problems=problems,  # last: every attribute above has had its say
    )


def read_pci(reader: SysfsReader, device_path: str, problems: Problems) -> Optional[Pci]:
    """The PCIe function behind ``<dev>/device``; None for devices with no PCI parent."""
    link = f"{device_path}/device"
    if not reader.exists(link):
        problems["device"] = "missing: no PCI function (virtual device or partial tree)"
        return None
    address = reader.realname(link)
    if not _BDF.match(address):
        problems["device"] = f"not a PCI function: {address!r}"
        return None
    pci_problems: Problems = {}
    attrs = _AttributeReader(reader, link, pci_problems)
    return Pci.model_construct(
        address=address.lower(),
        vendor_id=attrs.text("vendor", required=False),
        device_id=attrs.text("device", required=False),
        numa_node=attrs.get("numa_node", parse.parse_int, required=False),
        current_link_speed=attrs.get("current_link_speed", parse.parse_pcie_speed, False),
        current_link_width=attrs.get("current_link_width", parse.parse_pcie_width, False),
        max_link_speed=attrs.get("max_link_speed", parse.parse_pcie_speed, False),
        max_link_width=attrs.get("max_link_width", parse.parse_pcie_width, False),
        problems=pci_problems,
    )


def find_netdev_name(
    reader: SysfsReader, device_path: str, number: int, port_count: int
) -> Optional[str]:
    """The netdev on top of a port: RoCE names it in gid_attrs; IPoIB is matched by dev_port.

    ``dev_port`` is the port number minus one (``dev_id`` on kernels before 3.15); a
    single-port device with a single netdev needs neither.
    """
    roce_name, _ = reader.read_text(f"{device_path}/ports/{number}/gid_attrs/ndevs/0")
    if roce_name and reader.exists(f"class/net/{roce_name.strip()}"):
        return roce_name.strip()
    candidates, _ = reader.listdir(f"{device_path}/device/net")
    candidates = [name for name in candidates if "." not in name]  # skip pkey children ib0.8001
    for name in candidates:
        for attribute in ("dev_port", "dev_id"):
            text, _ = reader.read_text(f"{device_path}/device/net/{name}/{attribute}")
            try:
                index = parse.parse_hex_or_int(text) if text else None
            except ValueError:
                index = None
            if index is not None:
                if index + 1 == number:
                    return name
                break
    if port_count == 1 and len(candidates) == 1:
        return candidates[0]
    return None


def read_port_netdev(
    reader: SysfsReader, device_path: str, number: int, port_count: int
) -> Optional[NetDev]:
    name = find_netdev_name(reader, device_path, number, port_count)
    if name is None:
        return None
    directory = f"class/net/{name}"
    if not reader.exists(directory):
        directory = f"{device_path}/device/net/{name}"
    problems: Problems = {}
    attrs = _AttributeReader(reader, directory, problems)
    return NetDev.model_construct(
        name=name,
        operstate=attrs.text("operstate"),
        carrier=attrs.get("carrier", parse.parse_int),
        carrier_changes=attrs.get("carrier_changes", parse.parse_int, required=False),
        mtu=attrs.get("mtu", parse.parse_int),
        type=attrs.get("type", parse.parse_int, required=False),
        mode=attrs.text("mode", required=False),
        speed_mbps=attrs.get("speed", parse.parse_int, required=False),
        problems=problems,
    )
