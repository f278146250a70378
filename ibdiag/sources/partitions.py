"""Read a port's partition key table from sysfs ``ports/<n>/pkeys/<index>`` (files only).

Facts are built with ``model_construct``: every value is typed here, and validating would
build the models' schemas on the prolog's path.

Cost: one file per slot, and each read is one query of the HCA (the kernel's
``ib_query_pkey``; on mlx5 InfiniBand ports a MAD_IFC firmware command): 128 files a port.
``benchmarks/bench_quick.py`` measures it with the rest of level quick.
"""

from __future__ import annotations

from typing import List, Optional

from ibdiag.facts.partitions import PKeyEntry, PKeyTable
from ibdiag.sources.names import shown

MAX_SLOTS = 65536  # the table's index is 16 bits; more entries than that is not a pkey table


def read_pkeys(reader, port_path: str) -> Optional[PKeyTable]:
    """The table under ``port_path/pkeys``; None when the port has no ``pkeys`` directory."""
    directory = f"{port_path}/pkeys"
    entries, problem = reader.listdir(directory)
    if problem == "missing":
        return None
    if problem is not None:
        return PKeyTable.model_construct(problems=[f"pkeys: {problem}"])
    slots = sorted(int(name) for name in entries if _index(name) and int(name) < MAX_SLOTS)
    problems: List[str] = [
        f"pkeys/{shown(name)}: not a table index" for name in entries if not _index(name)
    ]
    keys = []
    for index in slots:
        text, problem = reader.read_text(f"{directory}/{index}")
        if problem is not None:
            problems.append(f"pkeys/{index}: {problem}")
            continue
        value = parse_pkey(text.strip())
        if value is None:
            problems.append(f"pkeys/{index}: not a partition key: '{shown(text.strip()[:20])}'")
        elif value:
            keys.append(PKeyEntry.model_construct(index=index, value=value))
    return PKeyTable.model_construct(size=len(slots), keys=keys, problems=problems)


def _index(name: str) -> bool:
    return name.isascii() and name.isdigit()


def parse_pkey(text: str) -> Optional[int]:
    """``0x8001`` -> 0x8001; None for anything that is not a 16-bit hex number."""
    if not text.lower().startswith("0x") or not 2 < len(text) <= 6:
        return None
    try:
        return int(text, 16)
    except ValueError:
        return None
