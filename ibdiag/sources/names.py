"""Names read from sysfs: how they are shown, which are ports, and which may go on a command line.

A directory entry is bytes. ``os.listdir`` gives it as ``str`` with each byte that is not UTF-8
as a lone surrogate (PEP 383), which JSON cannot carry, and a name may hold a space, ``\\r``,
``;`` or DEL as well as any other byte but ``/`` and NUL. So:

- **shown**: every name that goes into the Snapshot (a device's name and path, a port's path,
  counter names, the keys of ``problems``) is ``shown(name)``: a printable name stays as it
  is (an hfi1 counter's spaces, commas, quotes and backslashes included); in one that is not,
  a byte that is not UTF-8 becomes ``\\xNN``, a control character ``\\xNN``/``\\uNNNN`` and a
  backslash ``\\\\``. Every Snapshot serialises and a name never breaks a line of the text
  report. The reading itself uses the name as it was listed.
- **ports**: a port directory is a port only when its name is a port number written the
  kernel's way: ASCII digits, no leading zero, 1..254 (an HCA numbers its ports from 1;
  the 8-bit port number field keeps 255 for "all ports"). ``²``, ``①``, ``٣``, ``01``, ``0``,
  ``65536`` are recorded as not a port and not read.
- **command lines**: a device or netdev name goes into a command's argv (perfquery ``-C``,
  ethtool, ib_write_bw ``-d``) only when it matches a conservative pattern; any other name is one
  problem on its device or netdev, and no command is run for it (each family's ``plan``:
  ``ibdiag.families``).
"""

from __future__ import annotations

import re
from typing import Optional

PORT_MIN = 1
PORT_MAX = 254
# Letters, digits and _ . : - (mlx5_0, mlx5_bond_0, hfi1_0, rocep12s0f0, irdma-0), at most 64,
# not starting with "-" (which a tool could take for an option).
_DEVICE_NAME = re.compile(r"[A-Za-z0-9_.:][A-Za-z0-9_.:-]{0,63}")
# The same for a netdev, without ":" and at most 15 bytes (the kernel's IFNAMSIZ - 1).
_NETDEV_NAME = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]{0,14}")

_NOT_RUN = "no command is run for it"
NOT_A_PORT = f"not a port number ({PORT_MIN}..{PORT_MAX})"
DEVICE_NAME_RULE = "letters, digits and _.:- only, at most 64, not starting with -"
NETDEV_NAME_RULE = "letters, digits and _.- only, at most 15, not starting with -"


def shown(name: str) -> str:
    """``name`` as the Snapshot shows it: printable, serialisable, one line (module doc)."""
    if name.isprintable():  # False for a lone surrogate (a byte that was not UTF-8)
        return name
    out = []
    for char in name:
        code = ord(char)
        if char == "\\":
            out.append("\\\\")
        elif 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
            out.append(f"\\x{code - 0xDC00:02x}")
        elif char.isprintable():
            out.append(char)
        elif code <= 0xFF:
            out.append(f"\\x{code:02x}")
        else:
            out.append(f"\\u{code:04x}")
    return "".join(out)


def port_number(name: str) -> Optional[int]:
    """The port number a ``ports/`` entry names, or None when it names none (module doc)."""
    if not (0 < len(name) <= 3 and name.isascii() and name.isdigit()) or name[0] == "0":
        return None
    number = int(name)
    return number if PORT_MIN <= number <= PORT_MAX else None


def device_name_problem(name: str) -> Optional[str]:
    """Why an RDMA device's (shown) name may not go on a command line; None when it may."""
    if _DEVICE_NAME.fullmatch(name):
        return None
    return f"name '{name}' is not safe on a command line ({DEVICE_NAME_RULE}): " + _NOT_RUN


def netdev_name_problem(name: str) -> Optional[str]:
    """Why a netdev's (shown) name may not go on a command line; None when it may."""
    if _NETDEV_NAME.fullmatch(name) and name not in (".", ".."):
        return None
    return f"name '{name}' is not safe on a command line ({NETDEV_NAME_RULE}): " + _NOT_RUN


def is_interface_name(name: str) -> bool:
    """What the kernel accepts as a network interface name (``dev_valid_name``): 1..15 bytes,
    no ``/``, ``:`` or white space, not ``.`` or ``..``. A ``gid_attrs/ndevs/0`` that is not one
    names no netdev (and must never become a path: ``../..``)."""
    try:
        size = len(name.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:
        return False
    return (
        0 < size <= 15
        and name not in (".", "..")
        and not any(char in "/:\0" or char.isspace() for char in name)
    )


def port_problem(number: object) -> Optional[str]:
    """Why a port number may not go on a command line (None: it may)."""
    if isinstance(number, int) and PORT_MIN <= number <= PORT_MAX:
        return None
    return f"port {number}: {NOT_A_PORT}: no command is run for it"
