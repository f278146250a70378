"""perftest (``ib_write_bw``, ``ib_read_bw``, ``ib_send_bw``, ``ib_atomic_bw``, the ``*_lat`` tools)
output -> header, result rows, errors. (The argv of an ``ib_*_bw`` run is built by the family
that runs it: ``ibdiag.families.loopback.traffic``.)

What a run prints (client side, ``ib_write_bw -d mlx5_5 -q 4 --report_gbits HOST``)::

    ---------------------------------------------------------------------------------------
                        RDMA_Write BW Test
     Dual-port       : OFF          Device         : mlx5_5
     Number of qps   : 4            Transport type : IB
     Connection type : RC           Using SRQ      : OFF
     TX depth        : 128
     CQ Moderation   : 100
     Mtu             : 4096[B]
     Link type       : Ethernet
     GID index       : 3
     ...
    ---------------------------------------------------------------------------------------
     local address: LID 0000 QPN 0x0093 PSN 0xbf9bfe
     GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:224:04:233
     remote address: LID 0000 QPN 0x0093 PSN 0x62655e
    ---------------------------------------------------------------------------------------
     #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
     65536      20000            98.01              98.01              0.186932
    ---------------------------------------------------------------------------------------

Healthy: a title line, the header, a results table with one row per message size and a closing
dashed line; ``BW average`` near the link's data rate for large messages (a 100G RoCE port gives
~98 Gb/s, HDR loopback ~190-200 Gb/s) and no error lines. Latency tools print
``#bytes #iterations t_min[usec] t_max[usec] t_typical[usec] t_avg[usec] t_stdev[usec]
99% percentile[usec] 99.9% percentile[usec]`` (perftest < 3.x: only t_min/t_max/t_typical;
``-D``: ``t_avg`` and ``tps average``; ``-C``: ``[cycles]`` instead of ``[usec]``).

Layouts and versions seen:

- The title is ``<verb> [<atomic op>] [Bidirectional] [Post List] BW|Latency [...] Test``
  (``Send BW Test``, ``RDMA_Read Latency Test``, ``Atomic FETCH_AND_ADD BW Test``).
- Header lines hold one or two ``Name : value`` pairs, separated by tabs or runs of spaces
  (``rdma_cm QPs\\t : OFF``, ``Data ex. method : rdma_cm \\tTOS    : 41``); leading spaces may be
  stripped. ``Mtu : 2048[B]`` (old builds: ``2048B``).
- The table's columns come from its header line: ``#sl`` (QoS), ``BW Port1[...]`` (dual port),
  ``CPU_Util[%]`` (``--cpu_util``) are kept in ``extra``. The BW unit is the header's:
  ``Gb/sec`` (``--report_gbits``), ``MiB/sec`` (perftest >= 4.5) or ``MB/sec`` (older builds).
  perftest has always divided by 2^20 for the non-Gbit unit (``format_factor = 0x100000``);
  the old ``MB/sec`` label was renamed ``MiB/sec`` without changing the number, so both convert to
  Gb/s as x 8 x 1048576 / 1e9.
- ``Conflicting CPU frequency values detected: A != B. CPU Frequency is not max.`` (no ``-F``) is
  printed anywhere, even between rows: a warning (latency numbers may be skewed).
- A server and its client written into one stream (a loopback run, ``run_perftest_loopback``,
  superbench): header lines of both sides interleave, and every result row is printed twice (the
  server prints the client's report). Identical rows are kept once and counted in
  ``duplicate_rows``; that is expected, not a problem.
- Several tools in one output (``ib_atomic_bw`` then ``ib_atomic_lat``): ``parse_perftest``
  returns all rows with the first test's header (``tests`` names them all, ``problems`` says so);
  ``parse_perftest_runs`` gives one result per test.

How perftest fails (stderr, pass it too): ``Couldn't connect to HOST:PORT`` / ``Unable to init
the socket connection`` (no server), `` Unable to find the Infiniband/RoCE device``, ``IB device
X not found``, ``Couldn't get context for the device``, ``Failed to modify QP ... to RTR``,
``Couldn't allocate MR``, ``ethernet_read_keys: Couldn't read remote address``, ``Failed to
exchange data between server and clients``, `` Completion with error at client`` / `` Failed
status 12: wr_id 0 syndrom 0x81`` / ``scnt=128, ccnt=0`` (transport retries exceeded: link or
peer went away mid-run), ``Failed to complete run_iter_bw function successfully``, ``Can't
produce a report`` (CPU frequency unknown without ``-F``), ``Error: BW result is below bw
limit``. Those lines land in ``errors``; ``complete`` says a result row and the dashed line after
it were printed (a run cut off mid-table is not complete).

Parsers never raise: garbage, binary junk, empty or truncated output give what could be read plus
``problems``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

from ibdiag.families._text import FLOAT, as_text, cap, quote, trim

__all__ = [
    "UNIT_TO_GBPS",
    "PerftestBwRow",
    "PerftestLatRow",
    "PerftestResult",
    "parse_perftest",
    "parse_perftest_runs",
    "to_gbps",
]

_MIB_TO_GBIT = 8 * 1048576 / 1e9
# The BW unit as the table header prints it -> factor to Gb/s (10^9 bits per second).
UNIT_TO_GBPS: Dict[str, float] = {
    "Gb/sec": 1.0,
    "MiB/sec": _MIB_TO_GBIT,
    "MB/sec": _MIB_TO_GBIT,  # perftest's "MB" has always been 2^20 bytes (see module doc)
}

_DASHES = re.compile(r"^-{20,}$")
_BANNER = re.compile(r"^\*+$|^\*.*\*$")
_ADDRESS = re.compile(r"^(?:local|remote) address\s*:", re.IGNORECASE)
_GID = re.compile(r"^GID\s*:\s*[0-9a-fA-F:.]+$")
_TABLE_HEADER = re.compile(r"^#\s*bytes\b")
_NUMBER = re.compile(rf"^{FLOAT}$|^[-+]?(?:inf|nan)$", re.I)
_INT = re.compile(r"^\d+$")
_HISTOGRAM = re.compile(r"^#,\s*\w+$|^\d+,\s*\S+$")
_CQE_DUMP = re.compile(r"^(?:[0-9a-fA-F]{8}\s+){3}[0-9a-fA-F]{8}$")
_COMMAND = re.compile(
    r"(?:^|[#$>]\s*)(?:sudo\s+)?(?:\S{0,200}/)?(?:ib_\w+_(?:bw|lat)|raw_ethernet_\w+"
    r"|run_perftest_\w+)(?:\s|$)"
)
_WARNING = re.compile(
    r"Conflicting CPU frequency|CPU Frequency is not max|^\s*Warning\b|^\s*WARNING\b"
    r"|Requested mtu is higher|Changing to active mtu|Changing to this MTU|Changing to 0"
    r"|peak won't be measured",
    re.IGNORECASE,
)
_ERROR = re.compile(
    r"Couldn't|Could not|Unable to|Failed to|Failed status|Completion with error|not found"
    r"|No IB devices|Did not detect devices|If device exists|Cannot |Can't |Error occur+ed"
    r"|aborting|Parser function exited|Problems with warm up|ethernet_(?:read|write)_keys"
    r"|Segmentation fault|core dumped|Killed|Error:|\berror\b|\bfailed\b|^\s*scnt=\d+"
    r"|invalid option|unrecognized option|should be between",
    re.IGNORECASE,
)
# Benign lines perftest prints that carry no header field, row or verdict.
_INFO = re.compile(
    r"Waiting for client|Test with events|MultiCast runs on UD|^(?:Local|Remote) results:"
    r"|^Using \w+ (?:device|memory)|^Picking device|^initializing CUDA|^Listing all CUDA"
    r"|^CUDA device|^allocated \d+ bytes|^cuMemAlloc|^Calling ibv_reg_dmabuf_mr"
    r"|^GPU|^using GPU",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class PerftestBwRow:
    """One row of a BW table. ``bw_peak``/``bw_average`` are in ``unit`` (as printed)."""

    size_bytes: int
    iterations: int
    bw_peak: Optional[float]
    bw_average: Optional[float]
    msg_rate_mpps: Optional[float]
    unit: Optional[str]  # "Gb/sec", "MiB/sec" or "MB/sec"; None when no table header was seen
    # Other columns by name: "sl", "cpu_util", "bw_port1", "msg_rate_port1", ...
    extra: Dict[str, float] = field(default_factory=dict)

    @property
    def average_gbps(self) -> Optional[float]:
        """BW average in Gb/s (10^9 bit/s), or None when the unit is unknown."""
        return to_gbps(self.bw_average, self.unit)

    @property
    def peak_gbps(self) -> Optional[float]:
        """BW peak in Gb/s. 0 where perftest measured no peak (``-D``, ``-N``)."""
        return to_gbps(self.bw_peak, self.unit)


@dataclass(frozen=True)
class PerftestLatRow:
    """One row of a latency table; times in ``unit`` ("usec", or "cycles" with ``-C``)."""

    size_bytes: int
    iterations: int
    t_min: Optional[float]
    t_max: Optional[float]
    t_typical: Optional[float]
    t_avg: Optional[float]
    t_stdev: Optional[float]
    p99: Optional[float]
    p99_9: Optional[float]
    unit: Optional[str]
    extra: Dict[str, float] = field(default_factory=dict)  # "tps_average", "cpu_util"


@dataclass(frozen=True)
class PerftestResult:
    """One perftest output (see module doc). ``errors`` non-empty means the run failed."""

    test: Optional[str]  # the first title, e.g. "RDMA_Write BW Test"
    device: Optional[str]
    transport: Optional[str]  # "IB" (also for RoCE: the verbs transport)
    connection: Optional[str]  # "RC", "UC", "UD", "XRC", "DC"
    link_type: Optional[str]  # "IB" or "Ethernet" (RoCE)
    mtu: Optional[int]  # bytes
    qps: Optional[int]
    unit: Optional[str]  # the BW unit of the (first) BW table
    bw_rows: List[PerftestBwRow]
    lat_rows: List[PerftestLatRow]
    errors: List[str]
    warnings: List[str]
    problems: List[str]
    complete: bool = False
    tests: List[str] = field(default_factory=list)  # every distinct title, in order
    header: Dict[str, str] = field(default_factory=dict)  # every "Name : value", first wins
    duplicate_rows: int = 0  # identical rows dropped (server+client output interleaved)

    @property
    def average_gbps(self) -> Optional[float]:
        """BW average in Gb/s at the largest message size (the best of its rows), or None."""
        return _at_largest(self.bw_rows, "average_gbps")

    @property
    def peak_gbps(self) -> Optional[float]:
        """BW peak in Gb/s at the largest message size, or None."""
        return _at_largest(self.bw_rows, "peak_gbps")

    @property
    def kind(self) -> Optional[str]:
        """ "bw", "lat" (from the title, else the rows), or None."""
        title = self.test or ""
        if " BW " in f" {title} ":
            return "bw"
        if " Latency " in f" {title} ":
            return "lat"
        if self.bw_rows:
            return "bw"
        if self.lat_rows:
            return "lat"
        return None


def to_gbps(value: Optional[float], unit: Optional[str]) -> Optional[float]:
    """A perftest BW value in ``unit`` ("Gb/sec", "MiB/sec", "MB/sec") as Gb/s, or None."""
    if value is None or unit is None or unit not in UNIT_TO_GBPS:
        return None
    return value * UNIT_TO_GBPS[unit]


def _at_largest(rows: Sequence[PerftestBwRow], attribute: str) -> Optional[float]:
    if not rows:
        return None
    largest = max(row.size_bytes for row in rows)
    values = [getattr(row, attribute) for row in rows if row.size_bytes == largest]
    known = [v for v in values if v is not None]
    return max(known) if known else None


# ---------------------------------------------------------------------------------- parse


def parse_perftest(text: Union[str, bytes, None]) -> PerftestResult:
    """Parse one perftest output (stdout, plus stderr if you have it) as one result.

    Several different tests in one output keep all their rows here (header of the first);
    ``parse_perftest_runs`` splits them.
    """
    lines = as_text(text).splitlines()
    result = _parse_lines(lines, 1)
    if len(result.tests) > 1:
        result.problems.insert(
            0,
            f"{len(result.tests)} tests in one output ({', '.join(result.tests)}); header "
            "fields are the first test's (parse_perftest_runs gives one result each)",
        )
    return result.freeze()


def parse_run(stdout: str, stderr: str) -> PerftestResult:
    """What one side of a run printed: stdout, then stderr (perftest writes its errors there)."""
    return parse_perftest(f"{stdout}\n{stderr}")


def parse_perftest_runs(text: Union[str, bytes, None]) -> List[PerftestResult]:
    """One result per test in the output: a title naming another test starts a new one (a
    repeated title, as in interleaved server+client output, does not). Lines before the first
    title go to the first result. Empty output gives an empty list."""
    lines = as_text(text).splitlines()
    if not any(line.strip() for line in lines):
        return []
    segments: List[Tuple[int, List[str]]] = []
    current_title: Optional[str] = None
    start = 0
    for index, raw in enumerate(lines):
        line = raw.strip()
        if _is_title(line):
            if current_title is not None and line != current_title:
                segments.append((start, lines[start:index]))
                start = index
            current_title = line
    segments.append((start, lines[start:]))
    return [_parse_lines(chunk, first + 1).freeze() for first, chunk in segments]


_TITLE = re.compile(r"^[A-Za-z][\w]*(?: [\w]+)*? (?:BW|Latency)(?: [\w]+)* Test$")


def _is_title(line: str) -> bool:
    return len(line) <= 100 and ":" not in line and bool(_TITLE.match(line))


class _Table:
    def __init__(self, kind: str, columns: List[str], unit: Optional[str]) -> None:
        self.kind = kind  # "bw" or "lat"
        self.columns = columns
        self.unit = unit


class _Acc:
    """Mutable accumulator while parsing."""

    def __init__(self) -> None:
        self.tests: List[str] = []
        self.header: Dict[str, str] = {}
        self.bw_rows: List[PerftestBwRow] = []
        self.lat_rows: List[PerftestLatRow] = []
        self.seen: set = set()
        self.duplicates = 0
        self.errors: List[str] = []
        self.warnings: List[str] = []
        self.problems: List[str] = []
        self.unit: Optional[str] = None
        self.table: Optional[_Table] = None
        self.last_row_at = -1  # line index of the last result row
        self.closed_after_row = False  # a dashed line came after the last row
        self.in_error_dump = False

    def freeze(self) -> PerftestResult:
        header = self.header
        return PerftestResult(
            test=self.tests[0] if self.tests else None,
            device=header.get("Device"),
            transport=header.get("Transport type"),
            connection=header.get("Connection type"),
            link_type=header.get("Link type"),
            mtu=_mtu(header.get("Mtu")),
            qps=_int_or_none(header.get("Number of qps")),
            unit=self.unit,
            bw_rows=list(self.bw_rows),
            lat_rows=list(self.lat_rows),
            errors=cap(self.errors),
            warnings=cap(self.warnings),
            problems=cap(self.problems),
            complete=bool(self.bw_rows or self.lat_rows) and self.closed_after_row,
            tests=list(self.tests),
            header=dict(header),
            duplicate_rows=self.duplicates,
        )


def _int_or_none(value: Optional[str]) -> Optional[int]:
    return int(value) if value is not None and _INT.match(value) else None


def _mtu(value: Optional[str]) -> Optional[int]:
    if value is None:
        return None
    match = re.fullmatch(r"(\d{2,6})\s*\[?B?\]?", value.strip())
    return int(match.group(1)) if match else None


def _parse_lines(lines: List[str], first_number: int) -> _Acc:
    acc = _Acc()
    if not any(line.strip() for line in lines):
        acc.problems.append("empty perftest output")
        return acc
    for offset, raw in enumerate(lines):
        _parse_line(acc, raw.strip(), first_number + offset, offset)
    if not acc.bw_rows and not acc.lat_rows and not acc.errors:
        acc.problems.append(
            "no result rows in perftest output"
            + ("" if acc.tests or acc.header else " (not perftest output?)")
        )
    return acc


def _parse_line(acc: _Acc, line: str, number: int, index: int) -> None:
    if not line:
        return
    if _DASHES.match(line):
        if acc.last_row_at >= 0:
            acc.closed_after_row = True
        acc.in_error_dump = False
        return
    if _CQE_DUMP.match(line) and acc.in_error_dump:
        acc.errors.append(trim(line))  # the CQE hex dump after "got completion with error"
        return
    acc.in_error_dump = False
    if _BANNER.match(line):
        return
    if _is_title(line):
        if line not in acc.tests:
            acc.tests.append(line)
        return
    if _WARNING.search(line):
        acc.warnings.append(trim(line))
        return
    if _TABLE_HEADER.match(line):
        _table_header(acc, line, number)
        return
    tokens = line.split()
    if len(tokens) >= 2 and all(_NUMBER.match(token) for token in tokens):
        _row(acc, tokens, line, number, index)
        return
    if _ADDRESS.match(line) or _GID.match(line) or _HISTOGRAM.match(line):
        return
    if _COMMAND.search(line) and not _ERROR.search(line):
        return  # a shell prompt echoing the command (``root@host:~# ib_write_lat -a HOST``)
    if _ERROR.search(line):
        acc.errors.append(trim(line))
        if re.search(r"completion with error", line, re.IGNORECASE):
            acc.in_error_dump = True
        return
    fields = _header_fields(line)
    if fields is not None:
        for key, value in fields:
            _add_header(acc, key, value, number)
        return
    if _INFO.search(line):
        return
    acc.problems.append(f"unrecognised line {number}: {quote(line)}")


_HEADER_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9 _.*/()-]{0,40}$")


def _header_fields(line: str) -> Optional[List[Tuple[str, str]]]:
    """``Dual-port : OFF\\t\\tDevice : mlx5_0`` -> [("Dual-port", "OFF"), ("Device", "mlx5_0")]."""
    pieces = re.split(r"\s*:\s*", line)
    if len(pieces) < 2 or len(pieces) > 4:
        return None
    pairs: List[Tuple[str, str]] = []
    key = pieces[0]
    for middle in pieces[1:-1]:
        split = re.split(r"\s*\t\s*|\s{2,}", middle.strip(), maxsplit=1)
        if len(split) != 2:
            return None
        pairs.append((key, split[0]))
        key = split[1]
    pairs.append((key, pieces[-1]))
    cleaned: List[Tuple[str, str]] = []
    for key, value in pairs:
        key = re.sub(r"\s+", " ", key.strip())
        value = value.strip()
        if not _HEADER_KEY.match(key) or not value or len(value) > 80:
            return None
        cleaned.append((key, value))
    return cleaned


# Header fields whose values must agree between interleaved copies of the same header.
_KEY_FIELDS = ("Device", "Number of qps", "Transport type", "Connection type", "Link type", "Mtu")


def _add_header(acc: _Acc, key: str, value: str, number: int) -> None:
    old = acc.header.get(key)
    if old is None:
        acc.header[key] = value
    elif old != value and key in _KEY_FIELDS:
        acc.problems.append(
            f"header field {key!r} is {old!r} and later {value!r} (line {number}); kept the first"
        )


_COLUMN = re.compile(
    r"#\s*bytes|#\s*sl|#\s*iterations"
    r"|BW peak\[[^\]]*\]|BW average\[[^\]]*\]|BW Port\d\[[^\]]*\]"
    r"|MsgRate(?: Port\d)?\[[^\]]*\]"
    r"|t_\w+\[[^\]]*\]|99(?:\.9)?% percentile\[[^\]]*\]|tps average"
    r"|CPU_Util\[[^\]]*\]"
)
_UNIT = re.compile(r"\[([^\]]*)\]")


def _table_header(acc: _Acc, line: str, number: int) -> None:
    names = _COLUMN.findall(line)
    columns = [_column_key(name) for name in names]
    if "bw_average" in columns or "bw_peak" in columns:
        kind = "bw"
        unit_source = next(n for n in names if n.startswith("BW "))
    elif any(c.startswith("t_") or c in ("p99", "p99_9") for c in columns):
        kind = "lat"
        unit_source = next(n for n in names if n.startswith("t_"))
    else:
        acc.problems.append(f"unrecognised table header at line {number}: {quote(line)}")
        acc.table = None
        return
    unit_match = _UNIT.search(unit_source)
    unit = unit_match.group(1).strip() if unit_match else None
    if kind == "bw":
        if unit not in UNIT_TO_GBPS:
            acc.problems.append(f"unknown BW unit {unit!r} at line {number}: no Gb/s conversion")
        if acc.unit is None:
            acc.unit = unit
        elif unit != acc.unit:
            acc.problems.append(f"BW unit changes from {acc.unit!r} to {unit!r} at line {number}")
    acc.table = _Table(kind, columns, unit)


def _column_key(name: str) -> str:
    base = re.sub(r"\[[^\]]*\]", "", name).strip()
    fixed = {
        "#bytes": "bytes",
        "#sl": "sl",
        "#iterations": "iterations",
        "BW peak": "bw_peak",
        "BW average": "bw_average",
        "MsgRate": "msg_rate",
        "99% percentile": "p99",
        "99.9% percentile": "p99_9",
        "tps average": "tps_average",
        "CPU_Util": "cpu_util",
    }
    base = re.sub(r"#\s+", "#", base)
    if base in fixed:
        return fixed[base]
    port = re.fullmatch(r"(BW|MsgRate) Port(\d)", base)
    if port:
        return ("bw" if port.group(1) == "BW" else "msg_rate") + f"_port{port.group(2)}"
    return re.sub(r"\W+", "_", base).strip("_").lower()


# The columns a row's own fields hold (field, column name), per table kind; the rest go to extra.
_NAMED_COLUMNS: Dict[str, Tuple[Tuple[str, str], ...]] = {
    "bw": (("bw_peak", "bw_peak"), ("bw_average", "bw_average"), ("msg_rate_mpps", "msg_rate")),
    "lat": tuple(
        (name, name) for name in ("t_min", "t_max", "t_typical", "t_avg", "t_stdev", "p99", "p99_9")
    ),
}


_MAX_ROWS = 10_000


def _row(acc: _Acc, tokens: List[str], line: str, number: int, index: int) -> None:
    table = acc.table
    if table is None:
        acc.problems.append(f"result row before any table header at line {number}: {quote(line)}")
        return
    columns = table.columns
    if len(tokens) != len(columns):
        acc.problems.append(
            f"row at line {number} has {len(tokens)} values for {len(columns)} columns: "
            f"{quote(line)}"
        )
    values: Dict[str, float] = {}
    for name, token in zip(columns, tokens):
        if name in ("bytes", "sl", "iterations"):
            if not _INT.match(token):
                acc.problems.append(f"{name} is not a whole number at line {number}: {quote(line)}")
                return
            values[name] = int(token)
            continue
        number_value = float(token)
        if not math.isfinite(number_value):
            acc.problems.append(f"{name} is {token} at line {number}")
            continue
        values[name] = number_value
    if "bytes" not in values or "iterations" not in values:
        acc.problems.append(f"row without size or iterations at line {number}: {quote(line)}")
        return
    size = int(values.pop("bytes"))
    iterations = int(values.pop("iterations"))
    if size < 1:
        acc.problems.append(f"message size 0 at line {number}: {quote(line)}")
        return
    key = (table.kind, table.unit, size, iterations, tuple(sorted(values.items())))
    acc.last_row_at = index
    acc.closed_after_row = False
    if key in acc.seen:
        acc.duplicates += 1
        return
    if len(acc.seen) >= _MAX_ROWS:
        acc.problems.append(f"more than {_MAX_ROWS} result rows; the rest left out")
        acc.table = None
        return
    acc.seen.add(key)
    named = {name: values.pop(column, None) for name, column in _NAMED_COLUMNS[table.kind]}
    if table.kind == "bw":
        acc.bw_rows.append(PerftestBwRow(size, iterations, **named, unit=table.unit, extra=values))
    else:
        acc.lat_rows.append(
            PerftestLatRow(size, iterations, **named, unit=table.unit, extra=values)
        )
