"""Host names as Slurm and MPI launchers write them: ``gpu[001-004,017],login1``, ``-H a:8,b:8``.

Used to know which other nodes' names a bundle may carry (an nccl-tests run across nodes names
them in its command line and in its rank lines), so redaction can replace them too.
"""

from __future__ import annotations

import re
from typing import List, Sequence

MAX_HOSTS = 65536  # a bigger expansion is a typo ("n[1-99999999]"), not a cluster
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")

# Options whose value lists hosts: mpirun (Open MPI, MPICH/Hydra) and srun.
_HOST_OPTIONS = ("-H", "--host", "-host", "-hosts", "--hosts", "-w", "--nodelist")


class HostlistError(ValueError):
    """A host list that cannot be expanded (unbalanced brackets, a range too large)."""


def _split_top_level(text: str) -> List[str]:
    """Split on commas that are not inside brackets."""
    parts, depth, current = [], 0, []
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"unbalanced ']' in {text!r}")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth:
        raise HostlistError(f"unbalanced '[' in {text!r}")
    parts.append("".join(current))
    return [part for part in parts if part]


def _expand_one(pattern: str) -> List[str]:
    """``n[01-03]x[1,2]`` -> n01x1 n01x2 n02x1 ...; zero padding kept as written."""
    start = pattern.find("[")
    if start == -1:
        return [pattern]
    end = pattern.index("]", start)
    head, body, tail = pattern[:start], pattern[start + 1 : end], pattern[end + 1 :]
    values: List[str] = []
    for item in body.split(","):
        match = _RANGE.match(item.strip())
        if not match:
            raise HostlistError(f"{item!r} in {pattern!r} is not a number or a range")
        first, last = match.group(1), match.group(2) or match.group(1)
        if int(last) - int(first) + len(values) >= MAX_HOSTS:
            raise HostlistError(f"{pattern!r} names more than {MAX_HOSTS} hosts")
        width = len(first) if first.startswith("0") else 0
        values.extend(str(n).zfill(width) for n in range(int(first), int(last) + 1))
    rest = _expand_one(tail)
    if len(values) * len(rest) > MAX_HOSTS:
        raise HostlistError(f"{pattern!r} names more than {MAX_HOSTS} hosts")
    return [f"{head}{value}{suffix}" for value in values for suffix in rest]


def expand(hostlist: str) -> List[str]:
    """Every host a Slurm host list names, in order: ``gpu[001-002],login1`` -> three names."""
    hosts: List[str] = []
    for part in _split_top_level(hostlist.strip()):
        hosts.extend(_expand_one(part))
        if len(hosts) > MAX_HOSTS:
            raise HostlistError(f"{hostlist!r} names more than {MAX_HOSTS} hosts")
    return hosts


def named_in_launcher_args(args: Sequence[str]) -> List[str]:
    """The hosts an mpirun or srun command line names (``-H a:8,b:8``, ``--host=a``,
    ``-w gpu[01-02]``, ``--nodelist=...``), slot counts dropped; what cannot be read is skipped
    (a hostfile's contents are not in the argv)."""
    values: List[str] = []
    for index, arg in enumerate(args):
        if arg in _HOST_OPTIONS and index + 1 < len(args):
            values.append(args[index + 1])
        elif "=" in arg and arg.split("=", 1)[0] in _HOST_OPTIONS:
            values.append(arg.split("=", 1)[1])
    return list(dict.fromkeys(host for value in values for host in _hosts_of(value)))


def _hosts_of(value: str) -> List[str]:
    try:
        names = expand(value)
    except HostlistError:
        return []
    return [name.split(":", 1)[0] for name in names if name.split(":", 1)[0]]
