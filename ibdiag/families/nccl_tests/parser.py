"""nccl-tests (``all_reduce_perf``, ``all_gather_perf``, ...) output -> ranks, result table,
NCCL warnings and errors, as ``ibdiag.facts.nccl.NcclTestsResult``. (The argv of a run is built
by the family that runs it, ``ibdiag.families.nccl_tests.nccl_tests_argv``.)

What a run prints (``all_reduce_perf -b 32M -e 1G -f 2 -g 1`` under mpirun, 8 ranks)::

    # nThread 1 nGpus 1 minBytes 33554432 maxBytes 1073741824 step: 2(factor) warmup iters: 5 ...
    #
    # Using devices
    #  Rank  0 Group  0 Pid  66421 on node01 device  0 [0x07] NVIDIA A100-SXM4-80GB
    ...
    NCCL version 2.16.2+cuda11.6
    #
    #                                                              out-of-place  (then in-place)
    #       size         count      type   redop    root     time   algbw   busbw #wrong  ...
    #        (B)    (elements)                               (us)  (GB/s)  (GB/s)         ...
        33554432       8388608     float     sum      -1    344.8   97.32  170.31      0  ...
    ...
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 210.99
    #

Healthy: every row has ``#wrong`` 0 (or ``N/A`` where validation is off, ``-c 0``), ``Out of
bounds values : 0 OK``, the run ended (``finished()``: the ``Avg bus bandwidth`` line is there,
``complete``; or, without it, the table reaches the end of its size sweep, the ``Out of bounds``
line is there and nccl-tests said ``# Collective test concluded``), and busbw at the
largest sizes is near what the fabric can carry (8x A100 NVLink ~230 GB/s; across nodes it is
bounded by the HCAs: 8x HDR ~ 8 x 24 GB/s). All bandwidths here are GB/s = 10^9 **bytes**/s as
nccl-tests prints them (so ``*_gbps`` fields are gigaBYTES per second, unlike perftest's Gb/s).

Layouts and versions seen:

- Current: ``size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong``;
  newer builds add ``# nccl-tests version 2.x.y nccl-headers=N nccl-library=N``,
  ``# Collective test starting: all_reduce_perf``, an optional ``timestamp`` column, ``cputime``
  for ``time`` (``-C``), per-iteration columns (``i_min i_max i_p99 i_cv%``), ``OK``/``FAILED``
  after the average (``-G``-style bandwidth check) and ``# error: ...`` at the end.
- Old (nccl-tests < 2.10, e.g. superbench's capture): no ``root`` column (all_reduce) or no
  ``redop`` (broadcast: ``root``), an ``error`` column (max relative error, ``N/A`` with
  ``validation: 0``) instead of ``#wrong``; rank lines without ``Group``.
- Numbers wider than their column are printed ``%.0f`` (``11013``) or in exponent form
  (``1.2e+04``); ``#wrong`` is ``%g``.
- ``NCCL version X`` is printed by NCCL itself (NCCL_DEBUG=VERSION/INFO), with or without a
  ``host:pid:tid [dev] NCCL INFO`` prefix; otherwise the version comes from
  ``nccl-library=21903`` (2.19.3). ``NCCL INFO`` lines may interleave with table rows.
- A capture edited by hand may miss the ``#`` of header lines; the table header itself may be
  missing (a partial capture): the columns are then inferred from the row's width.

How it fails: NCCL ``WARN`` lines (``host:pid:tid [gpu] transport/net_ib.cc:2244 NCCL WARN
NET/IB: Got completion from peer 192.168.3.5<53908> with status=12 opcode=129 len=1048576 vendor
err 129 (Recv) localGid ... hca mlx5_10``: status 12 = transport retry counter exceeded, a link
or the peer went away) become ``warnings`` with the HCA, status and vendor error when named.
``errors``: ``Test NCCL failure common.cu:1204 'unhandled cuda error ...'``, ``Test failure
common.cu:915``, Open MPI's ``There are not enough slots available``, ``mpirun noticed that
process rank ...``, ``srun: error:``, ``Segmentation fault``, ``Invalid number of GPUs``,
``# error: ...``. Data corruption shows as ``#wrong`` > 0 (``wrong_results()``) and ``Out of
bounds values : N FAILED`` (``out_of_bounds``), not in ``errors``. Several ``# nThread`` headers in
one output (``runs`` > 1) usually mean nccl-tests built without MPI=1 and launched by mpirun:
every process ran alone.

Parsers never raise: garbage, binary junk, empty or truncated output give what could be read plus
``problems``.
"""

from __future__ import annotations

import math
import re
from typing import Dict, List, Optional, Sequence, Union

from ibdiag.facts.nccl import NcclRank, NcclSide, NcclTestsResult, NcclTestsRow, NcclWarning
from ibdiag.families._text import FLOAT, NOT_STARTED, as_text, cap, quote, trim

__all__ = ["parse_nccl_tests"]  # the facts it fills live in ibdiag.facts.nccl

_RANK = re.compile(
    r"^#?\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+(?P<group>\d+)\s+)?Pid\s+(?P<pid>\d+)\s+on\s+"
    r"(?P<host>\S+)\s+device\s+(?P<device>\d+)\s+\[(?P<bus>[^\]]*)\]\s*(?P<gpu>.*?)\s*$"
)
_NCCL_VERSION = re.compile(r"\bNCCL version (\d+\.\d+\.\d+\S*)")
_TESTS_VERSION = re.compile(
    r"nccl-tests version (?P<version>\S+)(?:.*?nccl-library=(?P<library>\d+))?"
)
_TEST_START = re.compile(r"Collective test starting:\s*(\S+)")
_TEST_CONCLUDED = re.compile(r"^Collective test concluded\b")
_REDUCED = re.compile(r"Reducing maxBytes to (\d{1,20})\b")
_OUT_OF_BOUNDS = re.compile(r"Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?", re.IGNORECASE)
_AVG = re.compile(
    rf"Avg bus bandwidth\s*:\s*({FLOAT}|[-+]?nan|[-+]?inf)\s*(OK|FAILED)?",
    re.IGNORECASE,
)
# "host:pid:tid [6] transport/net_ib.cc:2244 NCCL WARN ..." (the file:line part is optional)
_NCCL_LINE = re.compile(
    r"^(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+)\s+\[(?P<gpu>\d+)\]\s+(?:\S+:\d+\s+)?"
    r"NCCL\s+(?P<level>WARN|INFO|TRACE|ABORT)\s*(?P<message>.*)$"
)
_NCCL_BARE = re.compile(r"\bNCCL\s+(?P<level>WARN|INFO|TRACE|ABORT)\b\s*(?P<message>.*)$")
_ERROR = re.compile(
    r"Test NCCL failure|Test CUDA failure|Test failure|unhandled cuda error|unhandled system error"
    r"|internal error|invalid usage|remote process exited|NCCL error|CUDA error|cuda failure"
    r"|There are not enough slots|not enough slots available|mpirun noticed|mpirun was unable"
    r"|ORTE was unable|prterun|PRTE has lost|MPI_ABORT|\bsrun: error|slurmstepd: error"
    r"|Segmentation fault|Bus error|core dumped|\bAborted\b|Killed|Out of memory|out of memory"
    r"|Invalid number of GPUs|Please check the number of processes"
    r"|non-zero exit code|non-zero status|exited on signal"
    rf"|{NOT_STARTED}"
    r"|^#?\s*error:",
    re.IGNORECASE,
)
# Lines of launcher noise that say nothing about the run (ssh, kubectl, mpirun banners).
_BENIGN = re.compile(
    r"^Warning: Permanently added|^Defaulted container|^#\s*$|^#?\s*Using devices\s*$"
    r"|^#?\s*GPU memory usage|^#?\s*Blocking Enabled"
    r"|^#?\s*Parallel Init|^#?\s*Per-Iteration Report|^#?\s*Writing JSON output|^#?\s*skipping json"
    r"|^#?\s*out-of-place\s+in-place|^#?\s*\(B\)\s+\(elements\)"
)
_DASHES = re.compile(r"^-{10,}$")
_INT = re.compile(r"^[-+]?\d+$")
_MAX_ROWS = 10_000
_MAX_RANKS = 100_000

_SIDE_FIELDS = ("time", "algbw", "busbw", "wrong")


class _Layout:
    """Column layout from the ``# size count type ...`` header line."""

    def __init__(self, lead: List[str], side: List[str], sides: int, timestamp: bool) -> None:
        self.lead = lead  # after size/count: ["type", "redop", "root"]
        self.side = side  # ["time", "algbw", "busbw", "wrong"(or "error"), "i_min", ...]
        self.sides = sides
        self.timestamp = timestamp


def parse_nccl_tests(text: Union[str, bytes, None]) -> NcclTestsResult:
    """Parse one nccl-tests run (stdout and stderr together, in any order)."""
    acc = _Acc()
    text = as_text(text)
    if not text.strip():
        acc.problems.append("empty nccl-tests output")
        return acc.freeze()
    for number, raw in enumerate(text.splitlines(), start=1):
        _parse_line(acc, raw.strip(), number)
    if not acc.rows and not acc.errors:
        acc.problems.append(
            "no result rows in nccl-tests output"
            + ("" if acc.ranks or acc.config or acc.warnings else " (not nccl-tests output?)")
        )
    if acc.runs > 1:
        acc.problems.append(
            f"{acc.runs} '# nThread' headers in one output: several independent runs (nccl-tests "
            "built without MPI=1 under mpirun, or concatenated outputs)"
        )
    return acc.freeze()


class _Acc:
    def __init__(self) -> None:
        self.ranks: List[NcclRank] = []
        self.nccl_version: Optional[str] = None
        self.library_version: Optional[str] = None
        self.tests_version: Optional[str] = None
        self.test: Optional[str] = None
        self.concluded = False
        self.reduced_max_bytes: Optional[int] = None
        self.config: Dict[str, int] = {}
        self.rows: List[NcclTestsRow] = []
        self.avg: Optional[float] = None
        self.avg_check: Optional[str] = None
        self.avg_lines = 0
        self.out_of_bounds: Optional[int] = None
        self.warnings: List[NcclWarning] = []
        self.errors: List[str] = []
        self.problems: List[str] = []
        self.layout: Optional[_Layout] = None
        self.runs = 0
        self.rows_overflowed = False
        self.in_launcher_block = False  # inside an Open MPI / PRRTE "-----" framed message

    def freeze(self) -> NcclTestsResult:
        wrong_total = sum(row.wrong() for row in self.rows)
        return NcclTestsResult(
            ranks=list(self.ranks),
            nccl_version=self.nccl_version or self.library_version,
            rows=list(self.rows),
            avg_bus_bandwidth_gbps=self.avg,
            out_of_bounds=self.out_of_bounds,
            wrong_total=wrong_total,
            warnings=self.warnings[:200],
            errors=cap(self.errors),
            complete=self.avg_lines > 0,
            problems=cap(self.problems),
            test=self.test,
            concluded=self.concluded,
            reduced_max_bytes=self.reduced_max_bytes,
            nccl_tests_version=self.tests_version,
            config=dict(self.config),
            avg_check=self.avg_check,
            runs=self.runs,
        )


def _parse_line(acc: _Acc, line: str, number: int) -> None:
    if not line:
        return
    version = _NCCL_VERSION.search(line)
    if version and acc.nccl_version is None:
        acc.nccl_version = version.group(1)
    nccl = _NCCL_LINE.match(line)
    if nccl is not None or _NCCL_BARE.search(line):
        _nccl_log(acc, line, nccl)
        return
    if version:
        return
    if _DASHES.match(line):
        acc.in_launcher_block = not acc.in_launcher_block
        return
    if acc.in_launcher_block:
        # Open MPI / PRRTE help text between dashed lines: keep what says it failed
        if _ERROR.search(line):
            acc.errors.append(trim(line))
        elif re.match(r"^WARNING\b", line):
            acc.warnings.append(NcclWarning(text=trim(line), source="launcher"))
        return
    body = line.lstrip("#").strip()
    if not body:
        return
    if body.startswith("nThread ") or (body.startswith("nThread") and "nGpus" in body):
        _config(acc, body)
        return
    tests_version = _TESTS_VERSION.search(body)
    if tests_version:
        acc.tests_version = tests_version.group("version")
        library = tests_version.group("library")
        if library:
            acc.library_version = _version_from_code(int(library))
        return
    started = _TEST_START.search(body)
    if started:
        acc.test = acc.test or started.group(1)
        return
    if _TEST_CONCLUDED.match(body):
        acc.concluded = True
        return
    rank = _RANK.match(body)
    if rank:
        _rank(acc, rank, line, number)
        return
    out_of_bounds = _OUT_OF_BOUNDS.search(body)
    if out_of_bounds:
        value = int(out_of_bounds.group(1))
        acc.out_of_bounds = value if acc.out_of_bounds is None else acc.out_of_bounds + value
        return
    avg = _AVG.search(body)
    if avg:
        _avg(acc, avg, number)
        return
    if re.match(r"^size\s+count\s+", body):
        _layout(acc, body, number)
        return
    if "Reducing maxBytes" in body or re.match(r"^(?:WARNING|Warning)\b", body):
        reduced = _REDUCED.search(body)
        if reduced:
            acc.reduced_max_bytes = int(reduced.group(1))
        if not body.startswith("Warning: Permanently added"):
            acc.warnings.append(NcclWarning(text=trim(body), source="nccl-tests"))
            return
    if _BENIGN.search(line) or _BENIGN.search(body):
        return
    if _ERROR.search(line):
        acc.errors.append(trim(line))
        return
    tokens = line.split()
    if len(tokens) >= 7 and _INT.match(tokens[0]) and _INT.match(tokens[1]):
        _row(acc, tokens, line, number)
        return
    if line.startswith("#"):
        return  # other comment lines nccl-tests may add
    acc.problems.append(f"unrecognised line {number}: {quote(line)}")


def _version_from_code(code: int) -> Optional[str]:
    """NCCL_VERSION_CODE -> "2.19.3" (codes >= 10000: major*10000 + minor*100 + patch)."""
    if code >= 10000:
        return f"{code // 10000}.{(code % 10000) // 100}.{code % 100}"
    if code >= 1000:  # NCCL < 2.9: major*1000 + minor*100 + patch
        return f"{code // 1000}.{(code % 1000) // 100}.{code % 100}"
    return None


_CONFIG = re.compile(
    r"(?P<key>nThread|nGpus|minBytes|maxBytes|warmup iters|agg iters|iters|validation|graph"
    r"|unalign)\s*:?\s+(?P<value>\d+)"
)
_STEP = re.compile(r"step:\s*(\d+)\((factor|bytes)\)")


def _config(acc: _Acc, body: str) -> None:
    acc.runs += 1
    if acc.runs > 1:
        return
    for match in _CONFIG.finditer(body):
        key = match.group("key")
        acc.config.setdefault(key, int(match.group("value")))
    step = _STEP.search(body)
    if step:
        acc.config["step_factor" if step.group(2) == "factor" else "step_bytes"] = int(
            step.group(1)
        )


def _rank(acc: _Acc, match: re.Match[str], line: str, number: int) -> None:
    if len(acc.ranks) >= _MAX_RANKS:
        return
    group = match.group("group")
    rank = NcclRank(
        rank=int(match.group("rank")),
        group=int(group) if group is not None else None,
        pid=int(match.group("pid")),
        host=match.group("host"),
        device=int(match.group("device")),
        bus_id=match.group("bus").strip(),
        gpu=match.group("gpu"),
    )
    if rank in acc.ranks:
        return
    if any(r.rank == rank.rank for r in acc.ranks) and acc.runs <= 1:
        acc.problems.append(f"rank {rank.rank} listed twice (line {number}): {quote(line)}")
    acc.ranks.append(rank)


def _avg(acc: _Acc, match: re.Match[str], number: int) -> None:
    acc.avg_lines += 1
    if acc.avg_lines > 1:
        acc.problems.append(f"another 'Avg bus bandwidth' line at line {number}; kept the last")
    value = float(match.group(1))
    if math.isfinite(value):
        acc.avg = value
    else:
        acc.avg = None
        acc.problems.append(f"Avg bus bandwidth is {match.group(1)} at line {number}")
    check = match.group(2)
    acc.avg_check = check.upper() if check else None


def _layout(acc: _Acc, body: str, number: int) -> None:
    names = body.split()
    try:
        first_time = next(i for i, n in enumerate(names) if n in ("time", "cputime"))
    except StopIteration:
        acc.problems.append(f"table header without a time column at line {number}")
        return
    lead = names[2:first_time]
    rest = names[first_time:]
    timestamp = bool(rest) and rest[-1] == "timestamp"
    if timestamp:
        rest = rest[:-1]
    starts = [i for i, n in enumerate(rest) if n in ("time", "cputime")]
    width = starts[1] - starts[0] if len(starts) > 1 else len(rest)
    side = ["time" if n == "cputime" else ("wrong" if n == "#wrong" else n) for n in rest[:width]]
    if side[:3] != ["time", "algbw", "busbw"] or "type" not in lead:
        acc.problems.append(f"unexpected table header at line {number}: {quote(body)}")
    acc.layout = _Layout(lead, side, max(1, len(starts)), timestamp)


_DTYPE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,15}$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TIME = re.compile(r"^\d{2}:\d{2}:\d{2}$")


def _row(acc: _Acc, tokens: List[str], line: str, number: int) -> None:
    if len(acc.rows) >= _MAX_ROWS:
        if not acc.rows_overflowed:
            acc.problems.append(f"more than {_MAX_ROWS} result rows; the rest left out")
            acc.rows_overflowed = True
        return
    if len(tokens) >= 2 and _DATE.match(tokens[-2]) and _TIME.match(tokens[-1]):
        tokens = tokens[:-2]  # the optional timestamp column
    layout = acc.layout
    if layout is not None:
        parsed = _row_with_layout(tokens, layout)
    else:
        parsed = _row_guessed(tokens)
    if isinstance(parsed, str):
        acc.problems.append(f"{parsed} at line {number}: {quote(line)}")
        return
    acc.rows.append(parsed)


def _row_with_layout(tokens: List[str], layout: _Layout) -> Union[NcclTestsRow, str]:
    lead_count = 2 + len(layout.lead)
    expected = lead_count + layout.side.__len__() * layout.sides
    if len(tokens) == lead_count + len(layout.side) and layout.sides == 2:
        # trace-replay rows print only the in-place half
        halves = [None, tokens[lead_count:]]
    elif len(tokens) != expected:
        return f"row has {len(tokens)} values, the table header {expected}"
    else:
        body = tokens[lead_count:]
        width = len(layout.side)
        halves = [body[i * width : (i + 1) * width] for i in range(layout.sides)]
        if layout.sides == 1:
            halves = [halves[0], None]
    lead = dict(zip(layout.lead, tokens[2:lead_count]))
    return _make_row(tokens[0], tokens[1], lead, halves, layout.side)


def _row_guessed(tokens: List[str]) -> Union[NcclTestsRow, str]:
    """No table header seen: assume two halves of time/algbw/busbw/#wrong after 3-5 columns."""
    extra = len(tokens) - 3 - 8
    if extra not in (0, 1, 2):
        return f"row of {len(tokens)} values without a table header to read it by"
    names = ["type"]
    if extra == 2:
        names += ["redop", "root"]
    elif extra == 1:
        names.append("root" if _INT.match(tokens[3]) else "redop")
    lead = dict(zip(names, tokens[2 : 3 + extra]))
    body = tokens[3 + extra :]
    return _make_row(tokens[0], tokens[1], lead, [body[:4], body[4:]], list(_SIDE_FIELDS))


def _make_row(
    size: str,
    count: str,
    lead: Dict[str, str],
    halves: Sequence[Optional[Sequence[str]]],
    side_names: Sequence[str],
) -> Union[NcclTestsRow, str]:
    if not _INT.match(size) or not _INT.match(count) or size.startswith("-"):
        return "size/count are not whole numbers"
    dtype = lead.get("type", "")
    if not _DTYPE.match(dtype):
        return f"odd data type {dtype!r}"
    root_text = lead.get("root")
    if root_text is not None and not _INT.match(root_text):
        return f"root {root_text!r} is not a number"
    redop = lead.get("redop")
    if redop is not None and not _DTYPE.match(redop):
        return f"odd reduction {redop!r}"
    sides: List[Optional[NcclSide]] = []
    for half in halves:
        if half is None:
            sides.append(None)
            continue
        side = _side(half, side_names)
        if isinstance(side, str):
            return side
        sides.append(side)
    return NcclTestsRow(
        size_bytes=int(size),
        count=int(count),
        dtype=dtype,
        redop=redop,
        root=int(root_text) if root_text is not None else None,
        out_of_place=sides[0],
        in_place=sides[1],
    )


_NUMBER = re.compile(rf"^{FLOAT}$")


def _side(values: Sequence[str], names: Sequence[str]) -> Union[NcclSide, str]:
    fields = dict(zip(names, values))
    numbers: Dict[str, float] = {}
    for name in ("time", "algbw", "busbw"):
        token = fields.get(name)
        if token is None or not _NUMBER.match(token):
            return f"{name} {token!r} is not a number"
        numbers[name] = float(token)
        if not math.isfinite(numbers[name]) or numbers[name] < 0:
            return f"{name} {token!r} is out of range"
    wrong: Optional[int] = None
    max_error: Optional[float] = None
    if "wrong" in fields:
        token = fields["wrong"]
        if token.upper() != "N/A":
            if not _NUMBER.match(token) or not 0 <= float(token) < math.inf:
                return f"#wrong {token!r} is not a count"
            wrong = int(float(token))
    elif "error" in fields:
        token = fields["error"]
        if token.upper() != "N/A":
            if not _NUMBER.match(token) or not math.isfinite(float(token)):
                return f"error {token!r} is not a number"
            max_error = float(token)
    return NcclSide(
        time_us=numbers["time"],
        algbw_gbps=numbers["algbw"],
        busbw_gbps=numbers["busbw"],
        wrong=wrong,
        max_error=max_error,
    )


_SUBSYSTEM = re.compile(r"^(NET/[\w-]+|[A-Z][\w]*/[\w/-]+)\s*:?")
_HCA = re.compile(
    r"\bhca\s+(?P<hca>[A-Za-z][\w.-]*)"
    r"|\b(?P<dev>(?:mlx\d|bnxt_re|irdma|efa|qedr|hns|erdma|ionic|rxe|siw|hfi1)_?[A-Za-z0-9_]{0,32}?\d+)"
    r"(?::(?P<port>\d+))?\b"
)
_INTERFACE = re.compile(r"\b(?P<if>(?:eth|ens|enp|eno|ib|bond|hsn)\d[\w.]*)")
_STATUS = re.compile(r"(?:status\s*=\s*|with error\s+)(\d+)")
_VENDOR = re.compile(r"vendor err\s+(\d+)")
_PEER = re.compile(r"from peer\s+(\S+?)(?:<\d+>)?(?=\s|$)")


def _nccl_log(acc: _Acc, line: str, match: Optional[re.Match[str]]) -> None:
    if match is None:
        bare = _NCCL_BARE.search(line)
        if bare is None:  # pragma: no cover - guarded by the caller
            return
        level, message, host, gpu = bare.group("level"), bare.group("message"), None, None
    else:
        level, message = match.group("level"), match.group("message")
        host, gpu = match.group("host"), int(match.group("gpu"))
    if level not in ("WARN", "ABORT"):
        return  # INFO/TRACE: NCCL_DEBUG=INFO chatter
    message = message.strip()
    subsystem = _SUBSYSTEM.match(message)
    hca = _HCA.search(message)
    interface = _INTERFACE.search(message)
    status = _STATUS.search(message)
    vendor = _VENDOR.search(message)
    peer = _PEER.search(message)
    acc.warnings.append(
        NcclWarning(
            text=trim(message),
            source="nccl",
            host=host,
            gpu=gpu,
            subsystem=subsystem.group(1) if subsystem else None,
            hca=(hca.group("hca") or hca.group("dev")) if hca else None,
            port=int(hca.group("port")) if hca and hca.group("port") else None,
            interface=interface.group("if") if interface else None,
            status=int(status.group(1)) if status else None,
            vendor_err=int(vendor.group(1)) if vendor else None,
            peer=peer.group(1) if peer else None,
        )
    )
