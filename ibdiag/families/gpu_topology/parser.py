"""``nvidia-smi topo -m`` -> the GPU/NIC PCIe matrix, and which NIC is each GPU's rail.

What it prints (tab-separated; a matrix, then a legend; today's drivers name NICs ``NIC<n>``
and map them in a ``NIC Legend``)::

            GPU0    GPU1    ...  NIC0    NIC1    ...  CPU Affinity    NUMA Affinity   GPU NUMA ID
    GPU0     X      NV18    ...  PIX     NODE    ...  0-47,96-143     0               N/A
    ...
    NIC0    PIX     NODE    ...   X      NODE    ...
    Legend:
      X    = Self
      SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes
      NODE = ... the interconnect between PCIe Host Bridges within a NUMA node
      PHB  = ... a PCIe Host Bridge (typically the CPU)
      PXB  = ... multiple PCIe bridges (without traversing the PCIe Host Bridge)
      PIX  = ... at most a single PCIe bridge
      NV#  = Connection traversing a bonded set of # NVLinks
    NIC Legend:
      NIC0: mlx5_0
      NIC1: mlx5_3

Layouts seen: older drivers put the RDMA device names (``mlx5_0``) straight into the header and
rows and print no NIC legend; ``GPU NUMA ID`` is newer than ``NUMA Affinity``, which is newer
than ``CPU Affinity``; very old drivers say ``SOC`` where today's say ``SYS``. Real output uses
tabs, with empty cells (a GPU without CPU affinity: ``\\t\\t1``; NIC rows leave the affinity
cells empty; an extra tab before ``GPU NUMA ID``); copies from web pages have spaces instead,
and a blog-reformatted copy shortens the header (``NUMA``, ``GPU NUMA``) and adds a dashed rule
line. ANSI underline codes around the header (a terminal capture) are stripped. The NIC legend
may be non-contiguous (``NIC1: mlx5_3`` where mlx5_1/2 are bonded into ``mlx5_bond_0``).

``TopoMatrix`` uses the real device names (legend applied): ``nics`` are ``mlx5_0``...,
``links[("GPU0", "mlx5_0")] == "PIX"``. ``link`` also accepts the ``NIC<n>`` aliases.

Healthy, for GPUDirect RDMA: each GPU has its own NIC at ``PIX`` or ``PXB`` (one PCIe switch
apart; rail-optimised nodes: DGX H100 1:1 PIX, DGX A100 two GPUs and two NICs per PXB switch).
A GPU whose nearest NIC is ``PHB``/``NODE``/``SYS`` sends RDMA traffic through the CPU's root
complex or across sockets. Storage/front-end NICs (bonds) are ``NODE``/``SYS`` to every GPU.

How it fails: no driver (``NVIDIA-SMI has failed because it couldn't communicate with the
NVIDIA driver``), ``Failed to initialize NVML: Driver/library version mismatch``, ``No devices
were found``: these land in ``error``. Parsers never raise: garbage, binary junk, empty or
truncated output give what could be read plus ``problems``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple, Union

from ibdiag.facts.topology import GpuNic, GpuTopology
from ibdiag.families._text import NOT_STARTED, as_text, cap, quote, trim
from ibdiag.roles import Role

__all__ = [
    "CLOSENESS",
    "RAIL_LINKS",
    "GpuNicPair",
    "GpuNicPairing",
    "TopoMatrix",
    "parse_gpu_topology",
    "parse_nvidia_smi_topo",
]

# PCIe closeness of a GPU-NIC (or NIC-NIC) link: lower is closer. SOC is SYS's old name.
CLOSENESS: Dict[str, int] = {"PIX": 0, "PXB": 1, "PHB": 2, "NODE": 3, "SYS": 4, "SOC": 4}
RAIL_LINKS = ("PIX", "PXB")  # close enough for GPUDirect RDMA without the host bridge

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_LINK = re.compile(r"^(?:X|SYS|SOC|NODE|PHB|PXB|PIX|NV\d+)$")
_GPU = re.compile(r"^GPU\d+$")
_NIC_ALIAS = re.compile(r"^NIC\d+$")
_RULE = re.compile(r"^[\s\-=+_|]+$")
_ERROR = re.compile(
    r"NVIDIA-SMI has failed|Failed to initialize NVML|couldn't communicate with the NVIDIA"
    r"|No devices were found|Driver/library version mismatch|Unable to determine"
    r"|Insufficient Permissions|Invalid combination of input arguments|Unknown Error"
    rf"|{NOT_STARTED}",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class GpuNicPair:
    gpu: str
    nic: str
    link: str  # PIX or PXB


@dataclass(frozen=True)
class GpuNicPairing:
    """The rails: GPUs paired one-to-one with a PIX/PXB NIC (see ``TopoMatrix.gpu_nic_pairs``)."""

    pairs: List[GpuNicPair]
    unpaired_gpus: List[str]  # no PIX/PXB NIC left for them
    spare_nics: List[str]  # PIX/PXB to some GPU but left over by the one-to-one pairing
    other_nics: List[str]  # PIX/PXB to no GPU: storage / front-end NICs, bonds

    def as_dict(self) -> Dict[str, str]:
        return {pair.gpu: pair.nic for pair in self.pairs}


@dataclass(frozen=True)
class TopoMatrix:
    gpus: List[str]  # GPU0, GPU1, ... in column order
    nics: List[str]  # real device names (legend applied), column order
    links: Dict[Tuple[str, str], str]  # (row, column) -> X, PIX, PXB, PHB, NODE, SYS, NV12 ...
    cpu_affinity: Dict[str, str]  # row -> "0-47,96-143" (rows that print one)
    numa_affinity: Dict[str, Optional[int]]  # row -> NUMA node; None for "N/A"
    problems: List[str]
    gpu_numa_id: Dict[str, Optional[int]] = field(default_factory=dict)
    legend: Dict[str, str] = field(default_factory=dict)  # NIC0 -> mlx5_0
    error: Optional[str] = None  # nvidia-smi failed (no driver, NVML mismatch, no devices)

    def _name(self, device: str) -> str:
        return self.legend.get(device, device)

    def link(self, a: str, b: str) -> Optional[str]:
        """The link type between two devices (GPU<n>, NIC<n> or the NIC's real name)."""
        a, b = self._name(a), self._name(b)
        if a == b and (a in self.gpus or a in self.nics):
            return "X"
        found = self.links.get((a, b))
        return found if found is not None else self.links.get((b, a))

    def nearest_nic(self, gpu: str) -> Optional[Tuple[str, str]]:
        """(nic, link) closest to ``gpu`` (PIX < PXB < PHB < NODE < SYS); ties: column order."""
        return self._nearest(self._name(gpu), self.nics)

    def nearest_gpu(self, nic: str) -> Optional[Tuple[str, str]]:
        """(gpu, link) closest to ``nic``; ties: the first GPU in column order."""
        return self._nearest(self._name(nic), self.gpus)

    def _nearest(self, device: str, candidates: List[str]) -> Optional[Tuple[str, str]]:
        best: Optional[Tuple[int, str, str]] = None
        for other in candidates:
            if other == device:
                continue
            kind = self.link(device, other)
            rank = CLOSENESS.get(kind or "")
            if rank is None:
                continue
            if best is None or rank < best[0]:
                best = (rank, other, kind or "")
        return None if best is None else (best[1], best[2])

    def gpu_nic_pairs(self) -> GpuNicPairing:
        """Pair each GPU with its own PIX/PXB NIC, one-to-one (the GPUDirect RDMA rails).

        Each GPU, in column order, first takes its closest free NIC (PIX before PXB, then
        column order): on a DGX A100, GPU0/GPU1 share NIC0/NIC1 behind one switch and get
        mlx5_0/mlx5_1. A GPU left without one then tries an augmenting path (another GPU moves
        to its other PIX/PXB NIC), so the pairing is as large as the matrix allows.
        """
        options: Dict[str, List[str]] = {}
        for gpu in self.gpus:
            ranked = []
            for index, nic in enumerate(self.nics):
                kind = self.link(gpu, nic)
                if kind in RAIL_LINKS:
                    ranked.append((CLOSENESS[kind], index, nic))
            options[gpu] = [nic for _, _, nic in sorted(ranked)]
        owner: Dict[str, str] = {}  # nic -> gpu
        matched: Dict[str, str] = {}  # gpu -> nic
        for gpu in self.gpus:
            for nic in options[gpu]:
                if nic not in owner:
                    owner[nic], matched[gpu] = gpu, nic
                    break
        for gpu in self.gpus:
            if gpu not in matched and options[gpu]:
                self._augment(gpu, options, owner, matched, set())
        pairs = [
            GpuNicPair(gpu, matched[gpu], self.link(gpu, matched[gpu]) or "")
            for gpu in self.gpus
            if gpu in matched
        ]
        close = {nic for nics in options.values() for nic in nics}
        return GpuNicPairing(
            pairs=pairs,
            unpaired_gpus=[gpu for gpu in self.gpus if gpu not in matched],
            spare_nics=[nic for nic in self.nics if nic in close and nic not in owner],
            other_nics=[nic for nic in self.nics if nic not in close],
        )

    def _augment(
        self,
        gpu: str,
        options: Dict[str, List[str]],
        owner: Dict[str, str],
        matched: Dict[str, str],
        seen: set,
    ) -> bool:
        for nic in options[gpu]:
            if nic in seen:
                continue
            seen.add(nic)
            holder = owner.get(nic)
            if holder is None or self._augment(holder, options, owner, matched, seen):
                owner[nic], matched[gpu] = gpu, nic
                return True
        return False


def parse_gpu_topology(text: Union[str, bytes, None], role: Role) -> GpuTopology:
    """The fact for one ``nvidia-smi topo -m`` output (stdout of a run that succeeded): the
    GPU <-> NIC cells of the matrix, with the one-to-one rail pairing and each GPU's nearest
    NIC derived once (``TopoMatrix`` keeps the whole matrix: GPU <-> GPU links, CPU affinity)."""
    matrix = parse_nvidia_smi_topo(text)
    pairing = matrix.gpu_nic_pairs()
    nearest = [(gpu, matrix.nearest_nic(gpu)) for gpu in matrix.gpus]
    return GpuTopology.model_construct(
        role=role,
        error=matrix.error,
        gpus=list(matrix.gpus),
        nics=list(matrix.nics),
        links=[
            _cell(gpu, nic, link)
            for gpu in matrix.gpus
            for nic in matrix.nics
            for link in [matrix.link(gpu, nic)]
            if link is not None
        ],
        numa_affinity=dict(matrix.numa_affinity),
        rails=[_cell(pair.gpu, pair.nic, pair.link) for pair in pairing.pairs],
        unpaired_gpus=list(pairing.unpaired_gpus),
        nearest=[_cell(gpu, *found) for gpu, found in nearest if found is not None],
        problems=list(matrix.problems),
    )


def _cell(gpu: str, nic: str, link: str) -> GpuNic:
    return GpuNic.model_construct(gpu=gpu, nic=nic, link=link)


def parse_nvidia_smi_topo(text: Union[str, bytes, None]) -> TopoMatrix:
    """Parse ``nvidia-smi topo -m`` output (stdout; pass stderr too for the failure text)."""
    text = _ANSI.sub("", as_text(text)).replace("\r", "")
    problems: List[str] = []
    lines = text.split("\n")
    header_at = _find_header(lines)
    errors = [trim(line.strip()) for line in lines if _ERROR.search(line)]
    error = "; ".join(errors[:3]) if errors and header_at is None else None
    if header_at is None:
        if error is None:
            problems.append(
                "empty nvidia-smi topo output"
                if not text.strip()
                else "no topology matrix header (GPU0 ... CPU Affinity) found"
            )
        return TopoMatrix([], [], {}, {}, {}, cap(problems), error=error)
    skipped = [line for line in lines[:header_at] if line.strip()]
    if skipped:
        problems.append(
            f"{len(skipped)} line(s) before the matrix header ignored: {quote(skipped[0].strip())}"
        )
    columns, affinity_columns = _header(lines[header_at])
    if len(set(columns)) != len(columns):
        problems.append(f"repeated column names in the header: {columns}")
    rows: Dict[str, List[str]] = {}
    affinity: Dict[str, Dict[str, str]] = {}
    index = header_at
    for index in range(header_at + 1, len(lines)):
        raw = lines[index]
        line = raw.strip()
        if not line:
            if rows:
                break
            continue
        if _RULE.match(line):
            continue
        if line.lower().startswith(("legend", "nic legend")):
            break
        label, cells, extra, problem = _row(raw, columns, affinity_columns)
        if problem:
            problems.append(f"line {index + 1}: {problem}: {quote(line)}")
        if label is None:
            continue
        if label in rows:
            problems.append(f"line {index + 1}: row {label} repeated; kept the first")
            continue
        rows[label] = cells
        affinity[label] = extra
    legend = _legend(lines[index:], problems)

    def real(name: str) -> str:
        return legend.get(name, name)

    gpus = [c for c in columns if _GPU.match(c)]
    nics = [real(c) for c in columns if not _GPU.match(c)]
    unmapped = [c for c in columns if _NIC_ALIAS.match(c) and c not in legend]
    if unmapped:
        problems.append(
            f"no NIC Legend entry for {', '.join(unmapped)}: kept the NIC<n> names"
            + ("" if legend else " (output cut before the legend?)")
        )
    links: Dict[Tuple[str, str], str] = {}
    for label, cells in rows.items():
        for column, cell in zip(columns, cells):
            if not cell:
                continue
            if not _LINK.match(cell):
                problems.append(f"{label}/{column}: unknown link type {quote(cell)}")
            if column == label and cell != "X":
                problems.append(f"{label}/{column}: diagonal reads {quote(cell)}, not X")
            links[(real(label), real(column))] = cell
    for (a, b), kind in links.items():
        back = links.get((b, a))
        if a < b and back is not None and back != kind:
            problems.append(f"asymmetric link: {a}->{b} is {kind}, {b}->{a} is {back}")
    for column in columns:
        if column not in rows:
            problems.append(f"no row for {column} (output cut?)")
    cpu_affinity: Dict[str, str] = {}
    numa: Dict[str, Optional[int]] = {}
    gpu_numa: Dict[str, Optional[int]] = {}
    for label, values in affinity.items():
        name = real(label)
        if values.get("CPU Affinity"):
            cpu_affinity[name] = values["CPU Affinity"]
        for column, target in (("NUMA Affinity", numa), ("GPU NUMA ID", gpu_numa)):
            value = values.get(column)
            if not value:
                continue
            if value.upper() == "N/A":
                target[name] = None
            elif re.fullmatch(r"\d{1,6}", value):
                target[name] = int(value)
            else:
                target[name] = None
                problems.append(f"{label}: {column} {quote(value)} is not a NUMA node number")
    return TopoMatrix(
        gpus=gpus,
        nics=nics,
        links=links,
        cpu_affinity=cpu_affinity,
        numa_affinity=numa,
        problems=cap(problems),
        gpu_numa_id=gpu_numa,
        legend=legend,
        error=error,
    )


def _find_header(lines: List[str]) -> Optional[int]:
    """The header: no ``X`` cell, and affinity column names or only device names (GPU0 ...)."""
    for index, line in enumerate(lines):
        tokens = line.split()
        if not tokens:
            continue
        if tokens[0].lower().startswith("legend"):
            return None
        if "X" in tokens:
            continue
        if re.search(r"\b(?:CPU\s+Affinity|NUMA\s+Affinity|GPU\s+NUMA)\b", line):
            return index
        if _GPU.match(tokens[0]) and not any(_LINK.match(t) for t in tokens):
            return index
    return None


# header tokens: affinity columns (several words, shortened in reformatted copies) or a name
_HEADER_TOKEN = re.compile(
    r"CPU\s+Affinity|NUMA\s+Affinity|GPU\s+NUMA(?:\s+ID)?|NUMA(?:\s+ID)?(?=\s|$)|\S+"
)
_AFFINITY_NAMES = {
    "cpu affinity": "CPU Affinity",
    "numa affinity": "NUMA Affinity",
    "numa": "NUMA Affinity",
    "numa id": "NUMA Affinity",
    "gpu numa id": "GPU NUMA ID",
    "gpu numa": "GPU NUMA ID",
}


def _header(line: str) -> Tuple[List[str], List[str]]:
    """(device columns, affinity columns) of the header line."""
    if "\t" in line:
        cells = [c.strip() for c in line.split("\t")]
        cells = [c for c in cells if c]
        tokens: List[str] = []
        for cell in cells:  # a tab cell is one column; still split "GPU0 GPU1" if spaced
            if cell.lower() in _AFFINITY_NAMES or " " not in cell:
                tokens.append(cell)
            else:
                tokens.extend(_HEADER_TOKEN.findall(cell))
    else:
        tokens = _HEADER_TOKEN.findall(line)
    devices: List[str] = []
    affinity: List[str] = []
    for token in tokens:
        canonical = _AFFINITY_NAMES.get(re.sub(r"\s+", " ", token).lower())
        if canonical is not None:
            affinity.append(canonical)
        elif not affinity:
            devices.append(token)
        else:  # an unknown trailing column: keep it as an affinity-like column
            affinity.append(token)
    return devices, affinity


def _row(
    raw: str, columns: List[str], affinity_columns: List[str]
) -> Tuple[Optional[str], List[str], Dict[str, str], Optional[str]]:
    """(label, link cells, affinity values, problem) of one matrix row."""
    if "\t" in raw:
        cells = [c.strip() for c in raw.split("\t")]
        while cells and not cells[0]:
            cells.pop(0)
        label, rest = (cells[0], cells[1:]) if cells else ("", [])
        # link cells are never empty: skip the stray empty cells of hand-aligned copies
        links: List[str] = []
        used = 0
        for cell in rest:
            if len(links) == len(columns):
                break
            used += 1
            if cell:
                links.append(cell)
        tail = rest[used:]
        filled = [v for v in tail if v]
        values: Dict[str, str] = {}
        if len(filled) >= len(affinity_columns):
            values = dict(zip(affinity_columns, filled))
        else:
            # a cell is empty (no CPU affinity: "\t\t1\t\tN/A"; NIC rows: all empty). CPU and
            # NUMA affinity are positional; later columns take the next non-empty cells
            # (nvidia-smi prints an extra tab before GPU NUMA ID).
            fixed = min(2, len(affinity_columns))
            values = dict(zip(affinity_columns[:fixed], tail[:fixed]))
            later = [v for v in tail[fixed:] if v]
            values.update(zip(affinity_columns[fixed:], later))
        leftover = len(filled) - len(affinity_columns)
    else:
        tokens = raw.split()
        label, rest = tokens[0], tokens[1:]
        links = rest[: len(columns)]
        tail = rest[len(columns) :]
        values = {}
        leftover = len(tail) - len(affinity_columns)
        if tail and leftover < 0:  # a cell left empty vanished: read right-aligned
            values = dict(zip(affinity_columns[-len(tail) :], tail))
        else:
            values = dict(zip(affinity_columns, tail))
    if label not in columns:
        return None, [], {}, f"row {label!r} is not a column of the header; left out"
    problem = None
    if len(links) < len(columns):
        problem = f"row {label} has {len(links)} of {len(columns)} cells (cut?)"
    elif leftover > 0:
        problem = f"row {label} has {leftover} more cell(s) than the header names"
    elif "\t" not in raw and tail and leftover < 0:
        problem = (
            f"row {label}: {len(tail)} affinity values for {len(affinity_columns)} columns; "
            "read right-aligned"
        )
    return label, links, values, problem


_LEGEND_ENTRY = re.compile(r"^\s*(?P<alias>NIC\d+)\s*:\s*(?P<name>\S+)\s*$")


def _legend(lines: List[str], problems: List[str]) -> Dict[str, str]:
    legend: Dict[str, str] = {}
    inside = False
    for line in lines:
        stripped = line.strip()
        if stripped.lower().startswith("nic legend"):
            inside = True
            continue
        if not inside or not stripped:
            continue
        match = _LEGEND_ENTRY.match(stripped)
        if match is None:
            if stripped.lower().startswith("legend"):
                inside = False
                continue
            problems.append(f"odd NIC Legend line {quote(stripped)}")
            continue
        alias, name = match.group("alias"), match.group("name")
        if alias in legend and legend[alias] != name:
            problems.append(f"NIC Legend names {alias} twice; kept {legend[alias]}")
            continue
        legend.setdefault(alias, name)
    return legend
