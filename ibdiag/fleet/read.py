"""Reading the fleet's inputs: per-node report JSONs, directories of them, and support bundles in;
one ``NodeSummary`` - or one ``ReadProblem`` line - at a time out.

Healthy looks like: every input gives exactly one item, in the order given (a directory's
entries by name), and the good reports beside bad ones are all read. Streaming: each report is
read, parsed into its view and summarized (``ibdiag.fleet.node``) and then dropped, so memory holds
the summaries, never all reports at once; with ``workers`` > 1 the parsing runs in a process
pool (chunks of files, results in order), which reads 10,000 level-full reports
in about 25 s on two cores.

What an input may be:

- a report JSON (``ibdiag check --json``, ``fleet run``'s ``DIR/<node>.json``);
- a support bundle (``ibdiag collect``): a tarball (``.tar.gz``, ``.tgz``, ``.tar``,
  ``.tar.bz2``, ``.tar.xz``, or any file whose first bytes say so) or a directory holding
  ``manifest.json``; it is opened and verified with ``ibdiag.bundle.opener.open_bundle`` and its
  ``report.json`` - the report as graded when it was collected, not re-graded - is read. A
  bundle whose files differ from its manifest's sha256 is a problem line unless
  ``accept_altered``; then its node is read with a note saying so;
- a directory, read non-recursively: its ``*.json`` files, bundle tarballs and bundle
  directories. Ignored there: hidden names (``.ibdiag-*.tmp`` temp files of a write in
  progress), ``*.sha256``, ``*.redaction-map.json`` (``collect --redact``'s map) and what
  ``fleet report -o`` writes (``fleet.json``, ``fleet.html``, ``fleet.txt``), other files and
  subdirectories. A directory that gives no input at all is one problem: ``no reports in DIR``.

Bad input is one ``ReadProblem`` each, never a traceback, never a hang: a missing or
unreadable path (permissions), a FIFO, socket or device (judged by ``stat`` first, then opened
``O_NONBLOCK`` and checked again: nothing blocks), a file over ``MAX_REPORT_BYTES`` (refused by
its size, never read into memory), empty, binary or truncated JSON, JSON nested too deep, JSON
that is not a node's report (a fleet report, a snapshot, anything foreign: what ``summarize``
raises), and a bundle ``open_bundle`` refuses. A field of an unexpected type costs its node
that field alone (``ibdiag.fleet.report_view``).

Decisions:

- Symlinks are followed, in a directory and out of it: reading a report is only parsing it, so
  a link leads to nothing the user could not read by hand; the target must still be a regular
  file within the size limit (or a bundle). The same file reached twice (a directory and a file
  in it both given, or two links) is read once.
- A report with a ``schema_version`` newer than this ibdiag's is read best-effort - a summary
  reads few fields and tolerates new ones - and its node gets a note (``read_notes``) saying
  so: a newer ibdiag on part of the fleet is not a reason to lose those nodes.
- A number in a report that no measurement can be (an integer of hundreds or thousands of
  digits, infinite, NaN, negative) is read as unknown and noted on its node
  (``ibdiag.fleet.report_view.Reading``): one node's value never costs the fleet report.
- Which reports are one node is ``ibdiag.fleet.identity``'s: a host name in several reports
  is one node only when they share an HCA GUID, the boot id or their file's node name; that
  node keeps its newest report (unless a file not named for its host, or a time past the
  fleet report's clock, would win: then its reports conflict) and is listed with its sources.
  Different machines saying one host name are named by their report files' names, with a
  read note. An input that could not be read but is ``<node>.json`` counts that node UNKNOWN,
  unless another input gave it a report (or it is a fleet report or a bundle's manifest:
  ibdiag files that are no node's).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections import deque
from datetime import datetime, timezone
from typing import (
    Deque,
    Dict,
    Iterator,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from pydantic import ValidationError

from ibdiag.fleet.identity import TARBALL_SUFFIXES, Machines, is_future, unreadable_nodes
from ibdiag.fleet.node import NODE_NAME, NodeSummary, NotAReport, summarize, summarize_view
from ibdiag.fleet.report import NodeGroup, ReadProblem
from ibdiag.fleet.report_view import ReportView
from ibdiag.hostlist import compress
from ibdiag.natural import natural_key

MiB = 1 << 20
# The largest report ibdiag writes is a level-full run's: every command's output (each kept to
# its last 1 MiB) and up to 64 MiB of NCCL Inspector dumps - the bundle reader's limit for one
# member, ``ibdiag.bundle.limits.MAX_MEMBER_BYTES``. A level-standard report is 0.2-1 MB.
MAX_REPORT_BYTES = 256 * MiB
REPORT = "report.json"  # a bundle's report (ibdiag.bundle.write)
MANIFEST = "manifest.json"

# What ``ibdiag fleet report -o`` writes into a directory it may read again.
# and what ``ibdiag fleet run`` writes beside the node reports (its summary).
FLEET_OUTPUTS = ("fleet.json", "fleet.html", "fleet.txt", "fleet-run.json")
IGNORED_SUFFIXES = (".sha256", ".redaction-map.json")

_COMPRESSED = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CHUNK_MAX = 64  # files per task sent to a worker
_WINDOW_PER_WORKER = 4  # tasks in flight per worker: results wait in order, memory stays small
_MP_CONTEXT: Optional[str] = None  # multiprocessing start method; None: the platform's default

Item = Union[NodeSummary, ReadProblem]
_Result = Tuple[Item, Optional[str]]  # an item and its caveat (None: none)


class _Job(NamedTuple):
    """One input to read: a JSON report, a bundle, or (a file named explicitly) either."""

    kind: str  # "json", "bundle" or "file"
    path: str


class _Options(NamedTuple):
    accept_altered: bool
    max_bytes: int


class FleetInput(NamedTuple):
    """What ``read_fleet`` gathered: the nodes (one per machine, and an ``unread`` UNKNOWN one
    per unreadable ``<node>.json`` no other input answers for), the problem lines, the nodes
    read more than once and the caveats, grouped."""

    nodes: List[NodeSummary]
    problems: List[ReadProblem]
    duplicates: List[NodeGroup]
    notes: List[NodeGroup]
    conflicts: List[NodeGroup]  # nodes whose reports disagree (ibdiag.fleet.identity)


def default_workers() -> int:
    """The CPUs this process may run on (at most 8: parsing is the work, reading the disk
    soon becomes the limit)."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    return max(1, min(count, 8))


def read_with_notes(
    paths: Sequence[str],
    workers: Optional[int] = None,
    accept_altered: bool = False,
    max_bytes: int = MAX_REPORT_BYTES,
) -> Iterator[_Result]:
    """One ``NodeSummary`` or ``ReadProblem`` per input (see the module docstring), in order,
    each with its caveat (None: none): a newer report schema, an altered bundle accepted.
    ``workers`` > 1 (default: ``default_workers()``) parses in a process pool."""
    options = _Options(accept_altered, max_bytes)
    jobs = list(_jobs(paths))  # small: paths, and the problems found listing them
    workers = default_workers() if workers is None else max(1, workers)
    if workers > 1 and len(jobs) > 1:
        results = _pooled(jobs, workers, options)
    else:
        results = (result for job in jobs for result in _read_job(job, options))
    for item, note in results:
        notes = [text for text in (note, _schema_note(item), _numbers_note(item)) if text]
        yield item, "; ".join(notes) or None


def read_fleet(
    paths: Sequence[str],
    workers: Optional[int] = None,
    accept_altered: bool = False,
    max_bytes: int = MAX_REPORT_BYTES,
    now: Optional[datetime] = None,
) -> FleetInput:
    """Everything ``ibdiag fleet report`` needs of its inputs, read as a stream: only the
    newest summary of each machine is held (``ibdiag.fleet.identity``). Note groups list their
    hosts comma-separated, in natural order: the caveats first, then the host names several
    machines share. ``now``: the fleet report's clock (default: this machine's), after which
    no report's ``collected_at`` is believed."""
    now = now or datetime.now(timezone.utc)
    machines = Machines(now)
    problems: List[ReadProblem] = []
    notes: Dict[str, str] = {}  # source -> its caveat
    for item, note in read_with_notes(paths, workers, accept_altered, max_bytes):
        if isinstance(item, ReadProblem):
            problems.append(item)
            continue
        machines.add(item)
        if note:
            notes[item.source] = note
    nodes, duplicates, shared_names = machines.result()
    grouped: Dict[str, List[str]] = {}
    for node in nodes:
        note = notes.get(node.source)
        if is_future(node.collected_at, now):
            future = "collected_at is later than this fleet report's clock: never taken as newest"
            note = f"{note}; {future}" if note else future
        if note:
            grouped.setdefault(note, []).append(node.host)
    groups = [
        NodeGroup(reason=note, nodes=compress(sorted(hosts, key=natural_key)), count=len(hosts))
        for note, hosts in grouped.items()
    ]
    nodes += unreadable_nodes(
        [problem for problem in problems if problem.reason not in (FLEET_REPORT, BUNDLE_MANIFEST)],
        nodes,
    )
    return FleetInput(nodes, problems, duplicates, groups + shared_names, machines.conflicts())


def _numbers_note(item: Item) -> Optional[str]:
    """``numbers no measurement can be were read as unknown: loopback gbps``."""
    if isinstance(item, NodeSummary) and item.unusable_numbers:
        return (
            "numbers no measurement can be (too large, negative, infinite) were read as "
            f"unknown: {', '.join(item.unusable_numbers)}"
        )
    return None


def _schema_note(item: Item) -> Optional[str]:
    from ibdiag.model import SCHEMA_VERSION

    if isinstance(item, NodeSummary) and item.schema_version > SCHEMA_VERSION:
        return (
            f"report schema_version {item.schema_version} is newer than this ibdiag's "
            f"({SCHEMA_VERSION}): read best-effort"
        )
    return None


# --- what the paths name ----------------------------------------------------------------------


def _jobs(paths: Sequence[str]) -> Iterator[Union[_Job, ReadProblem]]:
    """The files to read, in order; what cannot be one is a problem now (nothing is opened)."""
    seen = set()
    for path in paths:
        for found in _expand(path):
            if isinstance(found, _Job):
                identity = _identity(found.path)
                if identity in seen:
                    continue
                seen.add(identity)
            yield found


def _identity(path: str) -> object:
    try:
        info = os.stat(path)
    except OSError:
        return os.path.abspath(path)
    return (info.st_dev, info.st_ino)


def _expand(path: str) -> Iterator[Union[_Job, ReadProblem]]:
    try:
        info = os.stat(path)  # through symlinks
    except OSError as exc:
        yield ReadProblem(source=path, reason=_os_reason(exc, path))
        return
    if stat.S_ISDIR(info.st_mode):
        if os.path.lexists(os.path.join(path, MANIFEST)):
            yield _Job("bundle", path)
        else:
            yield from _directory(path)
    elif stat.S_ISREG(info.st_mode):
        yield _Job("file", path)
    else:
        yield ReadProblem(source=path, reason=f"{_kind(info.st_mode)}, not a report or bundle")


def _directory(path: str) -> Iterator[Union[_Job, ReadProblem]]:
    """A directory's reports and bundles, by name; not its subdirectories' (non-recursive)."""
    try:
        with os.scandir(path) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
    except OSError as exc:
        yield ReadProblem(source=path, reason=f"cannot list it: {exc.strerror or exc}")
        return
    given = ignored = 0
    for entry in entries:
        name = entry.name
        if name.startswith(".") or name in FLEET_OUTPUTS or name.endswith(IGNORED_SUFFIXES):
            ignored += 1
            continue
        kind = "json" if name.endswith(".json") else "bundle" if _is_tarball(name) else None
        full = os.path.join(path, name)
        try:
            info = os.stat(full)  # through symlinks: a link to a report is a report
        except OSError as exc:
            if kind is None and not entry.is_symlink():
                ignored += 1
                continue
            given += 1
            yield ReadProblem(source=full, reason=_os_reason(exc, full))
            continue
        if stat.S_ISDIR(info.st_mode):
            if kind is None and os.path.lexists(os.path.join(full, MANIFEST)):
                given += 1
                yield _Job("bundle", full)
                continue
            if kind is None:
                ignored += 1  # a subdirectory: not read (non-recursive)
                continue
        if kind is None:
            ignored += 1
            continue
        given += 1
        if stat.S_ISREG(info.st_mode):
            yield _Job(kind, full)
        else:
            yield ReadProblem(source=full, reason=f"{_kind(info.st_mode)}, not a report or bundle")
    if not given:
        others = (
            f"; {ignored} other entr{'ies' if ignored != 1 else 'y'} ignored" if ignored else ""
        )
        yield ReadProblem(
            source=path,
            reason=f"no reports in {path} (no *.json, bundle tarball or bundle directory{others})",
        )


def _is_tarball(name: str) -> bool:
    return name.lower().endswith(TARBALL_SUFFIXES)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def _os_reason(exc: OSError, path: str) -> str:
    if exc.errno == errno.ENOENT:
        if os.path.islink(path):
            return "a symbolic link to nothing (its target does not exist)"
        return "no such file or directory"
    if exc.errno == errno.ELOOP:
        return "a symbolic link loop"
    return f"cannot read it: {exc.strerror or exc}"


# --- reading (in a worker, or in-process) -----------------------------------------------------


def _pooled(
    jobs: List[Union[_Job, ReadProblem]], workers: int, options: _Options
) -> Iterator[_Result]:
    """The jobs read in a process pool, in order, a bounded number of chunks in flight. A pool
    that breaks (a worker killed from outside) is not the inputs' fault: what it had not
    answered is read here, in-process."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    size = max(1, min(_CHUNK_MAX, len(jobs) // (workers * _WINDOW_PER_WORKER)))
    chunks = [jobs[start : start + size] for start in range(0, len(jobs), size)]
    pending: Deque[Tuple[list, object]] = deque()
    done = 0
    try:
        context = multiprocessing.get_context(_MP_CONTEXT)
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            for chunk in chunks:
                pending.append((chunk, pool.submit(_read_chunk, chunk, options)))
                if len(pending) >= workers * _WINDOW_PER_WORKER:
                    yield from pending.popleft()[1].result()  # type: ignore[attr-defined]
                    done += 1
            while pending:
                yield from pending.popleft()[1].result()  # type: ignore[attr-defined]
                done += 1
    except BrokenProcessPool:
        for chunk in chunks[done:]:
            yield from _read_chunk(chunk, options)


def _read_chunk(jobs: Sequence[Union[_Job, ReadProblem]], options: _Options) -> List[_Result]:
    return [result for job in jobs for result in _read_job(job, options)]


def _read_job(job: Union[_Job, ReadProblem], options: _Options) -> List[_Result]:
    if isinstance(job, ReadProblem):  # found while listing: passed on in its place
        return [(job, None)]
    try:
        if job.kind == "bundle":
            return [_read_bundle(job.path, options)]
        return [_read_file(job.path, options, may_be_bundle=job.kind == "file")]
    except _Problem as exc:
        return [(ReadProblem(source=job.path, reason=str(exc)), None)]


class _Problem(Exception):
    """Why an input gave no node (one line)."""


def _read_file(path: str, options: _Options, may_be_bundle: bool) -> _Result:
    data = _read_regular(path, options.max_bytes, head=may_be_bundle)
    if may_be_bundle and _looks_like_tarball(data):
        return _read_bundle(path, options)
    if may_be_bundle:
        data = _read_regular(path, options.max_bytes)
    return _summary(data, path), None


def _read_regular(
    path: str, max_bytes: int, head: bool = False, what: str = "a node's report"
) -> bytes:
    """The file's bytes (its first 512 when ``head``: a tarball may be larger than a report):
    stat'ed first, opened without blocking, checked again on the open file, refused past
    ``max_bytes`` by its size, never read past it."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise _Problem(f"{_kind(info.st_mode)}, not a report or bundle")
        if not head:
            _check_size(info.st_size, max_bytes, what)
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise _Problem(_os_reason(exc, path)) from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):  # replaced since it was stat'ed
            raise _Problem(f"{_kind(info.st_mode)}, not a report or bundle")
        try:
            data = handle.read(512 if head else max_bytes + 1)
        except OSError as exc:
            raise _Problem(f"cannot read it: {exc.strerror or exc}") from None
    _check_size(len(data), max_bytes, what)
    return data


def _check_size(size: int, max_bytes: int, what: str = "a node's report") -> None:
    if size > max_bytes:
        raise _Problem(f"{size} bytes: more than {_size_text(max_bytes)}, the most {what} may be")


def _size_text(size: int) -> str:
    return f"{size // MiB} MiB" if size >= MiB and not size % MiB else f"{size} bytes"


def _looks_like_tarball(head: bytes) -> bool:
    return head.startswith(_COMPRESSED) or head[257:262] == b"ustar"


def _read_bundle(path: str, options: _Options) -> _Result:
    """A bundle's report.json, after ``open_bundle`` verified the bundle."""
    from ibdiag.bundle.opener import BundleError, open_bundle

    try:
        with open_bundle(path, options.accept_altered, keep={REPORT: options.max_bytes}) as opened:
            size = _member_size(opened, path)
            if size is None or REPORT in opened.missing:
                raise _Problem(f"the bundle holds no {REPORT}")
            _check_size(size, options.max_bytes)
            data = opened.read(REPORT)
            if data is None:
                raise _Problem(f"cannot read the bundle's {REPORT}")
            altered = list(opened.altered)
    except BundleError as exc:
        raise _Problem(_bundle_reason(str(exc), path)) from None
    except OSError as exc:
        raise _Problem(_os_reason(exc, path)) from None
    note = None
    if altered:
        which = f" ({REPORT} among them)" if REPORT in altered else ""
        note = (
            f"read from a bundle whose files differ from its manifest{which}: "
            "accepted with --accept-altered"
        )
    return _summary(data, path), note


def _member_size(opened, path: str) -> Optional[int]:
    if opened.archive is not None:
        member = opened.archive.files.get(REPORT)
        return member.size if member is not None else None
    try:
        info = os.lstat(os.path.join(path, REPORT))
    except OSError:
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def _bundle_reason(message: str, path: str) -> str:
    """A ``BundleError`` names the bundle; the problem line already does."""
    for prefix, replacement in (
        (f"refusing bundle {path}: ", "refused: "),
        (f"refusing {path}: ", "refused: "),
        (f"{path}: ", ""),
    ):
        if message.startswith(prefix):
            return replacement + message[len(prefix) :]
    return message


# --- parsing ----------------------------------------------------------------------------------

# ibdiag files that are no node's, whatever they are called: no UNKNOWN node for their name.
FLEET_REPORT = "a fleet report (ibdiag fleet report), not one node's report"
BUNDLE_MANIFEST = "a bundle's manifest.json: give the bundle (its directory) instead"


def _summary(data: bytes, source: str) -> NodeSummary:
    """The summary of a report file's bytes. pydantic-core parses them straight into the view
    (``ReportView.model_validate_json``: no Python object for a field the fleet does not read,
    about twice as fast as ``json.loads``); what it does not read as a report - not JSON as
    it parses it (stricter than ``json``: a byte order mark, UTF-16, an integer of more than
    4,300 digits) or no report - is parsed again by ``json``, which says what it is (and reads
    those three)."""
    try:
        view: Optional[ReportView] = ReportView.model_validate_json(data)
    except ValidationError:
        view = None
    if view is not None:
        try:
            return summarize_view(view, source)
        except NotAReport:
            pass  # named below: a fleet report, a snapshot, or why it is none
    document = _parse(data)
    foreign = _foreign(document)
    if foreign:
        raise _Problem(foreign)
    try:
        return summarize(document, source)
    except NotAReport as exc:
        raise _Problem(str(exc)) from None
    except ValidationError as exc:  # the view reads any field of another type as unknown
        raise _Problem(
            f"not a report this ibdiag can read ({type(exc).__name__} on a field of "
            "an unexpected type)"
        ) from None


def _parse(data: bytes) -> object:
    if not data.strip():
        raise _Problem("an empty file, not JSON")
    try:
        return json.loads(data)  # UTF-8, or UTF-16/32 as RFC 8259 allows: json detects which
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _Problem(_not_json(data, exc)) from None
    except ValueError:  # an integer of more digits than Python converts (sys.int_info)
        return _parse_long_integers(data)
    except RecursionError:
        raise _Problem("JSON nested too deep to be a report") from None
    except MemoryError:
        raise _Problem("JSON too large to parse in the memory left") from None


def _parse_long_integers(data: bytes) -> object:
    """The JSON of a report holding an integer longer than Python converts (4,300 digits):
    such an integer is no measurement, so it is read as an infinity of its sign, which the
    summary then takes for an unusable number (``ibdiag.fleet.report_view.Reading``) - one value of
    one node, not its whole report. Only such a file pays for the slower hook."""
    try:
        return json.loads(data, parse_int=_long_integer)
    except ValueError as exc:
        raise _Problem(f"not JSON: {exc}") from None
    except RecursionError:
        raise _Problem("JSON nested too deep to be a report") from None


def _long_integer(digits: str) -> object:
    try:
        return int(digits)
    except ValueError:
        return float("-inf") if digits.startswith("-") else float("inf")


def _not_json(data: bytes, exc: ValueError) -> str:
    head = data[:4096]
    try:
        head.decode("utf-8")
        text = b"\0" not in head
    except UnicodeDecodeError as bad:
        text = bad.start >= len(head) - 3  # only a character cut at the 4096th byte
    if not text:
        return "binary data, not JSON"
    if isinstance(exc, json.JSONDecodeError):
        if exc.pos >= len(exc.doc.rstrip()) or exc.msg.startswith("Unterminated string"):
            return f"truncated JSON (it ends inside a value, at byte {len(data)})"
        return f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    return "not JSON: not UTF-8 text"


def _foreign(document: object) -> Optional[str]:
    """A known ibdiag file that is not a node's report: said by name."""
    if not isinstance(document, dict) or ("verdict" in document and "results" in document):
        return None
    if "nodes_read" in document and "settings" in document:
        return FLEET_REPORT
    if "devices" in document and "collected_at" in document:
        return "an ibdiag snapshot, not a report (ibdiag report FILE --json grades it)"
    if "files" in document and "created_utc" in document:
        return BUNDLE_MANIFEST
    return None


class RunExpectations(NamedTuple):
    """What the ``fleet-run.json`` of the directories read say is expected: ``nodes`` (None:
    no directory has one), ``not_run`` (node -> why fleet run did not run it: Slurm's state),
    and ``problems``: summaries that could not be read, one line each."""

    nodes: Optional[List[str]]
    not_run: Dict[str, str]
    problems: List[ReadProblem]


def fleet_run_expectations(paths: Sequence[str]) -> RunExpectations:
    """The nodes ``ibdiag fleet run`` was asked for, from the ``fleet-run.json`` of each
    directory in ``paths`` that has one (answered or not): the nodes a report is expected from
    when ``--expect-nodes`` is not given. A summary that is not a regular file, is larger than
    ``MAX_RUN_SUMMARY_BYTES``, is not a fleet run's or names a node no node can be called
    (``a,b``, ``gpu[003-009]``) is a problem: it cannot be told which nodes were expected, so
    none of its nodes is (the fleet report then says so, CRITICAL), never silently. A node
    fleet run did not run for its Slurm state (``run_record.NOT_RUN_PREFIX``: drained, down,
    busy) is in ``not_run``; one Slurm does not know is not: it stays missing."""
    from ibdiag.fleet.run_record import NOT_RUN_PREFIX, SUMMARY_NAME

    found: Optional[List[str]] = None
    not_run: Dict[str, str] = {}
    problems: List[ReadProblem] = []
    for path in paths:
        summary = os.path.join(path, SUMMARY_NAME)
        if not os.path.isdir(path) or not os.path.lexists(summary):
            continue
        try:
            run = _fleet_run(summary)
        except _Problem as exc:
            problems.append(ReadProblem(source=summary, reason=str(exc)))
            continue
        found = (found or []) + [outcome.node for outcome in run.nodes]
        for outcome in run.nodes:
            if not outcome.answered and outcome.reason.startswith(NOT_RUN_PREFIX):
                not_run[outcome.node] = outcome.reason
    return RunExpectations(found, not_run, problems)


def _fleet_run(path: str):
    """The ``FleetRun`` at ``path``; ``_Problem`` (one line) when it cannot be one."""
    from ibdiag.fleet.run_record import FLEET_RUN_KIND, FleetRun

    data = _read_regular(path, MAX_RUN_SUMMARY_BYTES, what="a fleet run summary")
    try:
        run = FleetRun.model_validate_json(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        if error.get("type") == "json_invalid":
            what = f"not JSON ({error.get('msg', '?')})"
        else:
            count = exc.error_count()
            what = (
                f"not a fleet run summary ibdiag can read ({count} field"
                f"{'s' if count != 1 else ''} wrong, e.g. {_first_error(error)})"
            )
        raise _Problem(f"{what}: the nodes it expects are unknown") from None
    if run.kind != FLEET_RUN_KIND:
        raise _Problem(f"not a fleet run summary (kind {run.kind[:64]!r})")
    odd = [outcome.node for outcome in run.nodes if not NODE_NAME.fullmatch(outcome.node)]
    if odd:
        shown = ", ".join(repr(name[:64]) for name in odd[:3])
        more = f" and {len(odd) - 3} more" if len(odd) > 3 else ""
        raise _Problem(
            f"names {len(odd)} node{'s' if len(odd) != 1 else ''} no node can be called "
            f"({shown}{more}): the nodes it expects are unknown"
        )
    return run


def _first_error(error) -> str:
    where = ".".join(str(part) for part in error.get("loc", ())) or "the document"
    return f"{where[:80]}: {error.get('msg', '?')}"


MAX_RUN_SUMMARY_BYTES = 64 << 20  # 10,000 nodes' outcomes are a few MiB
