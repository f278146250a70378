"""One reading of every InfiniBand port, as cheaply as sysfs allows: what ``ibdiag watch`` takes
every second on nodes with 8 to 64 HCAs.

Read, per ``class/infiniband/<dev>/ports/<n>``: ``state`` and ``phys_state`` (the number before
the colon of "4: ACTIVE", "5: LinkUp"), ``rate`` ("200 Gb/sec (4X HDR)": 200.0 Gb/s, width
"4X") and ``counters/{link_downed,link_error_recovery,symbol_error}``; per device its
``node_guid``; once per reading the boot id (``<procfs>/sys/kernel/random/boot_id``). That is
six small files a port, one a device and one a reading - nothing else (no ``SysfsReader``, no
pydantic model): plain ``os.open``/``os.read`` of at most a page, ``O_NONBLOCK`` and
``O_NOFOLLOW``, so a FIFO or a link planted in a captured tree is never waited on or followed.

A port is keyed by its HCA's node GUID, written as the store wants it ("0x" and 16 lower-case
hex digits: sysfs's "b859:9f03:00d7:a3bc" is "0xb8599f0300d7a3bc"), so ``mlx5_0`` renamed
``mlx5_5`` keeps its past. Failures are per field, never an exception: a file that cannot be
read or parsed is None in that field; a device or port that vanishes while it is read (a driver
reload, a hot unplug) is left out of this reading.

Healthy: every port ``state`` 4 (ACTIVE), ``phys_state`` 5 (LinkUp), ``link_downed`` steady.
"""

from __future__ import annotations

import errno
import os
import stat
from datetime import datetime, timezone
from typing import Callable, List, Optional, Tuple

from ibdiag.facts.history import node_keys
from ibdiag.history.timeline import PortSample
from ibdiag.sources import sysfs_values

_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW
_PAGE = 4096
_COUNTERS = ("link_downed", "link_error_recovery", "symbol_error")
_GONE = (errno.ENOENT, errno.ENOTDIR)


def read_ports(
    sysfs_root: str = "/sys",
    procfs_root: str = "/proc",
    at: Optional[datetime] = None,
    source: str = "watch",
    ignored: Optional[Callable[[str], bool]] = None,
) -> List[PortSample]:
    """Every port's sample at ``at`` (now, UTC, when None), by device name then port number.

    ``ignored``: devices (by name) left out of the reading altogether (the thresholds'
    ``ignore_hcas``, ``Thresholds.ignores``): reading a restricted PF's counters every second
    would fill the kernel log with ``ACCESS_REG(0x805) ... failed`` (node_exporter #3434).

    A device whose ``node_guid`` cannot be read (or reads all zeros, as an HCA not yet set up
    does, or is the same as another device's in this reading) is keyed ``"name:<dev>"``
    instead: its history then follows the name, the best there is, and does not mix with
    another device's.
    """
    when = at if at is not None else datetime.now(timezone.utc)
    boot_id = _text(os.path.join(procfs_root, "sys", "kernel", "random", "boot_id"))[0]
    base = os.path.join(sysfs_root, "class", "infiniband")
    try:
        devices = sorted(os.listdir(base))
    except OSError:
        return []  # no RDMA devices at all (no driver loaded yet): nothing to sample
    if ignored is not None:
        devices = [device for device in devices if not ignored(device)]
    # the store's key of each device (its GUID; by name where it has none or shares one)
    keys = node_keys(
        (device, _text(os.path.join(base, device, "node_guid"))[0]) for device in devices
    )
    samples: List[PortSample] = []
    for device in devices:
        samples.extend(
            _device(os.path.join(base, device), device, keys[device], when, boot_id, source)
        )
    return samples


def _device(
    path: str, device: str, node_guid: str, at: datetime, boot_id: Optional[str], source: str
) -> List[PortSample]:
    ports_dir = os.path.join(path, "ports")
    try:
        numbers = sorted(int(name) for name in os.listdir(ports_dir) if name.isdigit())
    except OSError:
        return []  # vanished (or never had ports): not part of this reading
    samples = []
    for number in numbers:
        sample = _port(f"{ports_dir}/{number}", node_guid, number, device, at, boot_id, source)
        if sample is not None:
            samples.append(sample)
    return samples


def _port(
    path: str,
    node_guid: str,
    number: int,
    device: str,
    at: datetime,
    boot_id: Optional[str],
    source: str,
) -> Optional[PortSample]:
    """The port's sample, or None when the port vanished while it was read."""
    state, gone_state = _text(f"{path}/state")
    phys, gone_phys = _text(f"{path}/phys_state")
    rate, _ = _text(f"{path}/rate")
    counters = [_text(f"{path}/counters/{name}")[0] for name in _COUNTERS]
    if (gone_state or gone_phys) and not os.path.isdir(path):
        return None
    gbps, width = parse_rate(rate)
    return PortSample(
        node_guid=node_guid,
        port=number,
        device=device,
        at=at,
        boot_id=boot_id,
        state=parse_enum(state),
        phys_state=parse_enum(phys),
        rate_gbps=gbps,
        width=width,
        link_downed=parse_counter(counters[0]),
        link_error_recovery=parse_counter(counters[1]),
        symbol_error=parse_counter(counters[2]),
        source=source,
    )


def _text(path: str) -> Tuple[Optional[str], bool]:
    """(the file's text, stripped; None when it cannot be read or is empty, whether it was
    missing). Only a regular file is read, and at most a page of it."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        return None, exc.errno in _GONE
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, False
        data = os.read(fd, _PAGE)
    except OSError:
        return None, False  # EINVAL: the kernel has no value now (a rate while the link is down)
    finally:
        os.close(fd)
    text = data.decode("ascii", errors="replace").strip()
    return text or None, False


def parse_enum(text: Optional[str]) -> Optional[int]:
    """ "4: ACTIVE" -> 4, "5: LinkUp" -> 5 (a bare "4" too); None when not so."""
    if text is None:
        return None
    head = text.split(":", 1)[0].strip()
    return int(head) if head.isascii() and head.isdigit() else None


def parse_rate(text: Optional[str]) -> Tuple[Optional[float], Optional[str]]:
    """ "200 Gb/sec (4X HDR)" -> (200.0, "4X"); "2.5 Gb/sec" -> (2.5, None): the collector's
    parser (``ibdiag.sources.sysfs_values``), so a monitor's sample and a run's read one rate
    alike; anything else (None, None)."""
    try:
        rate = sysfs_values.parse_rate(text or "")
    except ValueError:
        return None, None
    return rate.gbps, rate.width


def parse_counter(text: Optional[str]) -> Optional[int]:
    """A counter's value by the collector's rules (a non-negative decimal of at most 64 bits);
    None when it is not one."""
    try:
        return sysfs_values.parse_counter(text) if text is not None else None
    except ValueError:
        return None
