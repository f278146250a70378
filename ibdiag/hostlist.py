"""Host names as Slurm and MPI launchers write them: ``gpu[001-004,017],login1``, ``-H a:8,b:8``.

Used to know which other nodes' names a bundle may carry (an nccl-tests run across nodes names
them in its command line and in its rank lines), so redaction can replace them too; and, the
other way (``compress``), to write the fleet's groups of nodes as one line an admin can paste.
"""

from __future__ import annotations

import re
from typing import Dict, Iterable, List, Sequence, Set, Tuple

MAX_HOSTS = 65536  # a bigger expansion is a typo ("n[1-99999999]"), not a cluster
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_DIGITS = re.compile(r"([0-9]+)")  # ASCII digits only: int("٣") would not write back
_LAST_NUMBER = re.compile(r"^(.*?)([0-9]+)([^0-9]*)$")  # the last group of digits, and around it

# Options whose value lists hosts: mpirun (Open MPI, MPICH/Hydra) and srun.
_HOST_OPTIONS = ("-H", "--host", "-host", "-hosts", "--hosts", "-w", "--nodelist")


class HostlistError(ValueError):
    """A host list that cannot be expanded (unbalanced brackets, a range too large)."""


def _split_top_level(text: str) -> List[str]:
    """Split on commas that are not inside brackets."""
    parts: List[str] = []
    depth = 0
    current: List[str] = []
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


def compress(names: Iterable[str]) -> str:
    """A Slurm host list of ``names``: ``gpu[001-004,017],login1``, which ``expand`` turns back
    into the same names (each once).

    Names are grouped by what surrounds their *last* number (``rack1-n08`` and ``rack1-n09``
    share ``rack1-n``), and by that number's zero padding: ``gpu01`` and ``gpu001`` are different
    hosts and land in different brackets (``gpu[01-02],gpu[001-002]``); an unpadded number as
    long as a padded group's joins it (``gpu[098-100]``). Duplicates are dropped; groups and
    numbers come in natural order (``n9`` before ``n10``). A name without digits is kept as is (one
    with ``[`` or ``,`` in it is no host name and would not expand back).
    """
    groups: Dict[Tuple[str, str, int], Set[str]] = {}
    plain: Set[str] = set()
    for name in set(names):
        if not name:
            continue
        match = _LAST_NUMBER.match(name)
        if not match:
            plain.add(name)
            continue
        head, digits, tail = match.groups()
        padded = len(digits) if len(digits) > 1 and digits.startswith("0") else 0
        groups.setdefault((head, tail, padded), set()).add(digits)
    # An unpadded number as long as a padded group's numbers (gpu100 beside gpu099) joins it.
    for (head, tail, padded), numbers in list(groups.items()):
        if padded:
            continue
        for digits in list(numbers):
            wider = groups.get((head, tail, len(digits)))
            if len(digits) > 1 and wider is not None:
                wider.add(digits)
                numbers.discard(digits)
        if not numbers:
            del groups[(head, tail, padded)]
    parts = [(name, name) for name in plain]
    for (head, tail, _), numbers in groups.items():
        ordered = sorted(numbers, key=int)
        first = f"{head}{ordered[0]}{tail}"
        if len(ordered) == 1:
            parts.append((first, first))
        else:
            parts.append((first, f"{head}[{','.join(_ranges(ordered))}]{tail}"))
    parts.sort(key=lambda part: (_natural(part[0]), len(part[0]), part[0]))
    return ",".join(text for _, text in parts)


def _ranges(numbers: List[str]) -> List[str]:
    """``["001", "002", "003", "017"]`` -> ``["001-003", "017"]`` (sorted, same padding)."""
    ranges: List[str] = []
    start = previous = numbers[0]
    for digits in numbers[1:]:
        if int(digits) != int(previous) + 1:
            ranges.append(start if start == previous else f"{start}-{previous}")
            start = digits
        previous = digits
    ranges.append(start if start == previous else f"{start}-{previous}")
    return ranges


def _natural(name: str) -> Tuple[object, ...]:
    """Sort key: ``n9`` before ``n10`` (as ``ibdiag.sources.sysfs.natural_key``)."""
    parts = _DIGITS.split(name)
    return tuple((1, int(part)) if index % 2 else (0, part) for index, part in enumerate(parts))
