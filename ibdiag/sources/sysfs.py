"""Read every RDMA device, every port, its PCIe function and its netdev from sysfs.

Layout read (relative to the sysfs root, ``/sys`` unless ``--sysfs`` moves it):

    class/infiniband/<dev>/{node_type,hca_type,board_id,fw_ver,node_guid,...}
    class/infiniband/<dev>/hw_counters/*                     device-level counters (mlx5)
    class/infiniband/<dev>/ports/<n>/{state,phys_state,rate,link_layer,lid,sm_lid}
    class/infiniband/<dev>/ports/<n>/{counters,counters_ext,hw_counters}/*
    class/infiniband/<dev>/ports/<n>/pkeys/*                 partition table (sources.partitions)
    class/infiniband/<dev>/ports/<n>/gid_attrs/ndevs/0       RoCE: the Ethernet netdev's name
    class/infiniband/<dev>/device -> the PCI function (numa_node, *_link_speed/width, net/<if>)

A missing, unreadable or odd file is recorded in the owner's ``problems`` for that attribute
only; the device and the run go on. Ports are whatever ``ports/`` lists — never assume port 1.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar

from ibdiag.model import INFINIBAND_CLASS, Device, NetDev, Pci, Port, Problems
from ibdiag.natural import natural_key
from ibdiag.read_files import OPEN_FLAGS, describe_os_error, not_regular
from ibdiag.sources import names
from ibdiag.sources import sysfs_values as parse
from ibdiag.sources.hwmon import device_facts
from ibdiag.sources.names import shown
from ibdiag.sources.partitions import read_pkeys

T = TypeVar("T")

_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", re.IGNORECASE)
_MAX_ATTRIBUTE_BYTES = 64 * 1024  # sysfs attributes are at most a page; guard against odd files
_COUNTER_DIRS = ("counters", "counters_ext")
_OPEN_NOFOLLOW = OPEN_FLAGS | os.O_NOFOLLOW
_FILE_TYPE, _REGULAR = stat.S_IFMT(0o177777), stat.S_IFREG


class SysfsReader:
    """Reads a tree rooted at ``root`` (sysfs, or procfs); every path it is given is relative
    to that root, and none is followed out of it.

    Containment: each directory a path goes through is resolved once (cached, on its parent's
    resolution) and must lie under the root's own resolved path; an attribute is opened
    ``O_NOFOLLOW``, and one that is a symlink is resolved and held to the same rule. What
    resolves outside is refused and recorded ("refused: resolves outside ROOT (to TARGET)"), so
    a root-only file linked into a ``--sysfs`` capture as ``fw_ver`` is never read into a report
    or a bundle. The links sysfs is made of (``class/infiniband/<dev>`` ->
    ``../../devices/...``, ``device`` -> the PCI function) stay inside the root and are followed.

    Only regular files are read (``ibdiag.read_files``): a FIFO, device or socket in place of
    an attribute is recorded as such, never waited on.

    ``watch``: set by ``ibdiag.runner.watchdog`` while a bounded read is in progress; every
    file read, listing, ``exists`` and link resolution then goes through it.
    """

    watch: Optional[Any] = None

    def __init__(self, root: str) -> None:
        self.root = root
        self._real_root: Optional[str] = None
        self._dirs: Dict[str, Tuple[Optional[str], Optional[str]]] = {}
        self._abs: Dict[str, str] = {}

    def abspath(self, rel: str) -> str:
        return os.path.join(self.root, rel)

    # -- what the sources call ------------------------------------------------------------

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

    def read_bytes(self, rel: str) -> Tuple[Optional[bytes], Optional[str]]:
        """The raw bytes one ``read`` returns (what ``read_text`` decodes), or (None, why)."""
        if self.watch is not None:
            return self.watch.call(self, "read", rel, self._read_bytes)
        return self._read_bytes(rel)

    def listdir(self, rel: str) -> Tuple[List[str], Optional[str]]:
        """Sorted entry names, or ([], why) when the directory is missing or unreadable."""
        if self.watch is not None:
            return self.watch.call(self, "listdir", rel, self._listdir)
        return self._listdir(rel)

    def exists(self, rel: str) -> bool:
        if self.watch is not None:
            return self.watch.call(self, "exists", rel, self._exists)
        return self._exists(rel)

    def realname(self, rel: str) -> str:
        """The last component of the path a symlink resolves to (a PCI address for ``device``)."""
        return os.path.basename(self.target(rel))

    def target(self, rel: str) -> str:
        """The absolute path ``rel`` resolves to (wherever that is: nothing is read there)."""
        if self.watch is not None:
            return self.watch.call(self, "target", rel, self._target)
        return self._target(rel)

    # -- the file system, held to the root ------------------------------------------------

    @property
    def real_root(self) -> str:
        if self._real_root is None:
            self._real_root = os.path.realpath(self.root)
        return self._real_root

    def inside(self, real: str) -> bool:
        """Whether the resolved path ``real`` is the root or under it."""
        root = self.real_root
        return real == root or real.startswith(root if root.endswith(os.sep) else root + os.sep)

    def _refused(self, real: str) -> str:
        return f"refused: resolves outside {self.root} (to {real})"

    def _resolve(self, rel: str) -> Tuple[Optional[str], Optional[str]]:
        """(the resolved path of ``rel``, None) inside the root, or (None, why not)."""
        real = os.path.realpath(self.abspath(rel))
        return (real, None) if self.inside(real) else (None, self._refused(real))

    def _directory(self, rel: str) -> Tuple[Optional[str], Optional[str]]:
        """``_resolve`` of a directory, cached and built on its parent's: the hundreds of
        attributes of a node sit in a few hundred directories, and only the few that are
        symlinks (``class/infiniband/<dev>``, ``device``, ``class/net/<if>``) need resolving
        beyond one ``lstat``."""
        found = self._dirs.get(rel)
        if found is not None:
            return found
        head, _, name = rel.rpartition("/")
        if not rel:
            found = (self.real_root, None)
        elif name in ("", ".", ".."):
            found = self._resolve(rel)
        else:
            parent, problem = self._directory(head)
            if problem is not None:
                found = (None, problem)
            else:
                path = os.path.join(parent, name)  # type: ignore[arg-type]
                try:
                    is_link = stat.S_ISLNK(os.lstat(path).st_mode)
                except OSError:
                    is_link = False  # missing: what is done there says so
                if is_link:
                    real = self._real(path)
                    found = (real, None) if self.inside(real) else (None, self._refused(real))
                else:
                    found = (path, None)
        self._dirs[rel] = found
        return found

    def _real(self, path: str, depth: int = 0) -> str:
        """``os.path.realpath`` of an absolute path, remembering each directory it resolves
        (the links of a node point into a few shared trees: devices/pci..., devices/virtual).
        A chain of more than 40 links (a loop) is left unresolved, as realpath leaves it."""
        found = self._abs.get(path)
        if found is not None:
            return found
        parent, name = os.path.split(path)
        if not name or depth > 40:
            return path
        real_parent = self._real(parent, depth)
        if name == ".":
            real = real_parent
        elif name == "..":
            real = os.path.dirname(real_parent)
        else:
            real = os.path.join(real_parent, name)
            try:
                target = os.readlink(real)
            except OSError:
                target = None  # not a link (or not there): itself
            if target is not None:
                real = self._real(os.path.join(real_parent, target), depth + 1)
        self._abs[path] = real
        return real

    def _read_bytes(self, rel: str) -> Tuple[Optional[bytes], Optional[str]]:
        head, _, base = rel.strip("/").rpartition("/")
        directory, problem = self._dirs.get(head) or self._directory(head)
        if problem is not None:
            return None, problem
        if base in ("", ".", ".."):
            path, problem = self._resolve(rel)
            if problem is not None:
                return None, problem
        else:  # os.path.join(directory, base) for a base with no "/", at a third of its cost
            sep = "" if directory.endswith("/") else "/"  # type: ignore[union-attr]
            path = f"{directory}{sep}{base}"
        try:
            fd = os.open(path, _OPEN_NOFOLLOW)  # type: ignore[arg-type]
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                return None, describe_os_error(exc)
            # The attribute itself is a symlink (sysfs has none; a capture may): follow it
            # only to a file inside the root.
            path, problem = self._resolve(rel)
            if problem is not None:
                return None, problem
            try:
                fd = os.open(path, _OPEN_NOFOLLOW)  # type: ignore[arg-type]
            except OSError as again:
                return None, describe_os_error(again)
        try:
            mode = os.fstat(fd).st_mode
            if mode & _FILE_TYPE != _REGULAR:
                return None, not_regular(mode)
            return os.read(fd, _MAX_ATTRIBUTE_BYTES), None
        except IsADirectoryError:
            return None, "is a directory"
        except OSError as exc:
            return None, describe_os_error(exc)
        finally:
            os.close(fd)

    def _listdir(self, rel: str) -> Tuple[List[str], Optional[str]]:
        directory, problem = self._directory(rel.strip("/"))
        if problem is not None:
            return [], problem
        try:
            names = os.listdir(directory)
        except OSError as exc:
            return [], describe_os_error(exc)
        return sorted(names, key=natural_key), None

    def _exists(self, rel: str) -> bool:
        """Whether ``rel`` is there, reached through directories inside the root (a symlink
        as its last component counts wherever it points: reading through it is refused)."""
        head, _, base = rel.strip("/").rpartition("/")
        directory, problem = self._directory(head)
        if problem is not None:
            return False
        return os.path.exists(os.path.join(directory, base))  # type: ignore[arg-type]

    def _target(self, rel: str) -> str:
        return os.path.realpath(self.abspath(rel))


def decode_attribute(data: bytes) -> Tuple[Optional[str], Optional[str]]:
    """What ``SysfsReader.read_text`` makes of the bytes it read: text, or why it is none."""
    text = data.decode("utf-8", errors="replace").rstrip("\n")
    if not text.strip():
        return None, "empty"
    return text, None


class Recording:
    """Everything a collection read, keyed by logical path (``sys/<rel>`` or ``proc/<rel>``).

    ``files``: the exact bytes read; ``unreadable``: why a file could not be read (refusals
    included: nothing outside the tree is ever in ``files``); ``listings`` and
    ``listing_errors``: directory listings; ``links``: each symlink resolved by ``realname``
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
            self.recording.listings.pop(self.key(rel), None)
        else:
            self.recording.listings[self.key(rel)] = list(names)
        return names, problem

    def exists(self, rel: str) -> bool:
        answer = super().exists(rel)
        self.recording.exists[self.key(rel)] = answer
        return answer

    def realname(self, rel: str) -> str:
        target = self.target(rel)
        shown = os.path.relpath(target, self.real_root) if self.inside(target) else target
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
        """The converted value of ``directory/name``, or None with the reason in ``problems``
        (under ``label or name`` as shown: ``ibdiag.sources.names.shown``).

        ``required=False`` attributes that do not exist at all (``mode`` on a RoCE netdev, say)
        are simply absent, not a problem.
        """
        text, problem = self.reader.read_text(f"{self.directory}/{name}")
        if problem is not None:
            if required or problem != "missing":
                self.problems[shown(label or name)] = problem
            return None
        try:
            return convert(text)  # type: ignore[arg-type]
        except ValueError as exc:
            self.problems[shown(label or name)] = str(exc)
            return None

    def text(self, name: str, required: bool = True) -> Optional[str]:
        return self.get(name, str.strip, required)

    def counters(self, subdir: str, into: Dict[str, int]) -> None:
        """Every file of ``subdir`` as a counter; names are kept as the driver spells them
        (shown: a name that is not UTF-8 or holds control characters is escaped)."""
        directory = f"{self.directory}/{subdir}"
        entries, problem = self.reader.listdir(directory)
        if problem not in (None, "missing"):
            self.problems[subdir] = problem
        read_text, problems = self.reader.read_text, self.problems
        for name in entries:  # self.get(f"{subdir}/{name}", parse_counter), unrolled: the
            # hundreds of counters are most of a node's files, read on every scrape
            text, problem = read_text(f"{directory}/{name}")
            if problem is not None:
                problems[shown(f"{subdir}/{name}")] = problem
                continue
            try:
                into[shown(name)] = parse.parse_counter(text)  # type: ignore[arg-type]
            except ValueError as exc:
                problems[shown(f"{subdir}/{name}")] = str(exc)


def read_devices(
    reader: SysfsReader, ignored: Optional[Callable[[str], bool]] = None
) -> Tuple[List[Device], Problems]:
    """Every device under class/infiniband, and node-level problems (e.g. the class is missing).

    ``ignored``: whether a device (by its Snapshot name) is left out of grading (the thresholds'
    ``ignore_hcas``: ``Thresholds.ignores``). Such a device is still listed with its identity,
    ports and PCI function, but no file whose read queries its firmware is read: its counters
    (``counters/``, ``counters_ext/``, ``hw_counters/``, the port's and the device's: the
    PPCNT register), its hwmon temperatures (the MTMP register) and its partition tables
    (MAD_IFC). On a restricted PF (DGX/HGX B200/B300 Fabric Manager-managed PFs) the firmware
    refuses such register reads, and each read adds ``mlx5_cmd_out_err ... ACCESS_REG(0x805)
    ... failed`` to the kernel log (node_exporter #3434, #3823)."""
    entries, problem = reader.listdir(INFINIBAND_CLASS)
    node_problems: Problems = {}
    if problem is not None:
        node_problems[INFINIBAND_CLASS] = problem
    if ignored is None:
        return [read_device(reader, name) for name in entries], node_problems
    return [
        read_device(reader, name, queries=not ignored(shown(name))) for name in entries
    ], node_problems


def read_device(reader: SysfsReader, name: str, queries: bool = True) -> Device:
    """The device listed as ``name`` (as ``os.listdir`` gave it). Its Snapshot name is
    ``shown(name)``; a name that may not go on a command line is one problem ("name"), and the
    device is read and graded all the same. ``queries`` False: no file whose read queries the
    firmware is read (``read_devices``: an ignored HCA): its ``hw_counters`` and its ports'
    counters are empty, and it has no hwmon or partition table facts."""
    path = f"{INFINIBAND_CLASS}/{name}"
    problems: Problems = {}
    attrs = _AttributeReader(reader, path, problems)
    node_type = attrs.get("node_type", parse.parse_enum)
    hw_counters: Dict[str, int] = {}
    if queries:
        attrs.counters("hw_counters", hw_counters)
    port_names, port_problem = reader.listdir(f"{path}/ports")
    if port_problem is not None:
        problems["ports"] = port_problem
    numbers = []
    for entry in port_names:
        number = names.port_number(entry)
        if number is None:
            problems[f"ports/{shown(entry)}"] = names.NOT_A_PORT
        else:
            numbers.append(number)
    ports = [read_port(reader, path, number, len(numbers), queries) for number in numbers]
    name_problem = names.device_name_problem(shown(name))
    if name_problem is not None:
        problems["name"] = name_problem
    from ibdiag.sources.pcie import device_facts as pcie_facts  # here: one call's import

    return Device.model_construct(
        name=shown(name),
        path=shown(path),
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
        # hwmon temperatures and the PCIe path (AER, IOMMU; ibdiag.sources.pcie): files only
        facts={
            **(device_facts(reader, path, numbers) if queries else {}),
            **pcie_facts(reader, path),
        },
        problems=problems,  # last: every attribute above has had its say
    )


def read_port(
    reader: SysfsReader, device_path: str, number: int, port_count: int, queries: bool = True
) -> Port:
    """Port ``number`` of the device at ``device_path``; ``queries`` False: its counter files
    and partition table are not read (``read_devices``: an ignored HCA)."""
    path = f"{device_path}/ports/{number}"
    problems: Problems = {}
    attrs = _AttributeReader(reader, path, problems)
    state = attrs.get("state", parse.parse_enum)
    phys_state = attrs.get("phys_state", parse.parse_enum)
    read: Dict[str, int] = {}
    hw_counters: Dict[str, int] = {}
    if queries:
        for subdir in _COUNTER_DIRS:
            attrs.counters(subdir, read)
        attrs.counters("hw_counters", hw_counters)
    pkeys = read_pkeys(reader, path) if queries else None
    return Port.model_construct(
        number=number,
        path=shown(path),
        state=state[0] if state else None,
        state_name=state[1] if state else None,
        phys_state=phys_state[0] if phys_state else None,
        phys_state_name=phys_state[1] if phys_state else None,
        rate=attrs.get("rate", parse.parse_rate),
        link_layer=attrs.text("link_layer"),
        lid=attrs.get("lid", parse.parse_hex_or_int, required=False),
        sm_lid=attrs.get("sm_lid", parse.parse_hex_or_int, required=False),
        counters=read,
        hw_counters=hw_counters,
        netdev=read_port_netdev(
            reader, device_path, find_netdev_name(reader, device_path, number, port_count, problems)
        ),
        facts={"pkeys": pkeys} if pkeys is not None else {},  # the partition table
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
        problems["device"] = f"not a PCI function: '{shown(address)}'"
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


_GID_NDEV = "gid_attrs/ndevs/0"


def find_netdev_name(
    reader: SysfsReader,
    device_path: str,
    number: int,
    port_count: int,
    problems: Optional[Problems] = None,
) -> Optional[str]:
    """The netdev on top of a port (its name as listed): RoCE names it in gid_attrs; IPoIB is
    matched by dev_port.

    ``dev_port`` is the port number minus one (``dev_id`` on kernels before 3.15); a
    single-port device with a single netdev needs neither. A ``gid_attrs/ndevs/0`` that is not
    an interface name (``../..``) names nothing, and is one problem in ``problems``.
    """
    roce_name, _ = reader.read_text(f"{device_path}/ports/{number}/{_GID_NDEV}")
    roce_name = roce_name.strip() if roce_name else None
    if roce_name and not names.is_interface_name(roce_name):
        if problems is not None:
            problems[_GID_NDEV] = f"not a network interface name: '{shown(roce_name)}'"
    elif roce_name and reader.exists(f"class/net/{roce_name}"):
        return roce_name
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
    reader: SysfsReader, device_path: str, name: Optional[str]
) -> Optional[NetDev]:
    """The port's netdev ``name`` (``find_netdev_name``; None: no netdev), named as shown; a
    name that may not go on a command line is one problem on it ("name"), and its attributes
    are read all the same."""
    if name is None:
        return None
    directory = f"class/net/{name}"
    if not reader.exists(directory):
        directory = f"{device_path}/device/net/{name}"
    problems: Problems = {}
    attrs = _AttributeReader(reader, directory, problems)
    name_problem = names.netdev_name_problem(shown(name))
    if name_problem is not None:
        problems["name"] = name_problem
    return NetDev.model_construct(
        name=shown(name),
        operstate=attrs.text("operstate"),
        carrier=attrs.get("carrier", parse.parse_int),
        carrier_changes=attrs.get("carrier_changes", parse.parse_int, required=False),
        mtu=attrs.get("mtu", parse.parse_int),
        type=attrs.get("type", parse.parse_int, required=False),
        mode=attrs.text("mode", required=False),
        speed_mbps=attrs.get("speed", parse.parse_int, required=False),
        problems=problems,
    )
