"""Terminal summary: one line per finding that needs attention, then the verdict line.

The verdict line follows the Nagios plugin output convention (``IBDIAG CRITICAL - ...``) so NHC
and monitoring tools can show it as is. Every value from the node (names, messages, the host) is
printed ``inert``: one result is one line, and nothing read from a node can forge another.
"""

from __future__ import annotations

import re
from typing import List

from ibdiag.drain_reason import drain_reason
from ibdiag.model import Report, Result, Status, Verdict
from ibdiag.render.inert import inert
from ibdiag.render.options import DEFAULT, RenderOptions

_ANSI = {
    Status.FAIL: "\033[31m",
    Status.ERROR: "\033[35m",
    Status.WARN: "\033[33m",
    Status.SKIP: "\033[2m",
    Status.PASS: "\033[32m",
    Verdict.CRITICAL: "\033[1;31m",
    Verdict.UNKNOWN: "\033[1;35m",
    Verdict.WARNING: "\033[1;33m",
    Verdict.OK: "\033[1;32m",
}
_RESET = "\033[0m"
_ORDER = {Status.FAIL: 0, Status.ERROR: 1, Status.WARN: 2, Status.SKIP: 3, Status.PASS: 4}


def _paint(text: str, key: str, color: bool) -> str:
    return f"{_ANSI[key]}{text}{_RESET}" if color else text


def result_line(result: Result, color: bool = False) -> str:
    status = _paint(f"{result.status.value.upper():5}", result.status, color)
    hint = f" -- {inert(result.hint)}" if result.hint and result.status != Status.PASS else ""
    target, check_id, message = inert(result.target), inert(result.check_id), inert(result.message)
    return f"{status} {target:12} {check_id:18} {message}{hint}"


def verdict_line(report: Report, color: bool = False) -> str:
    snap = report.snapshot
    ports = sum(len(dev.ports) for dev in snap.devices)
    verdict = _paint(f"IBDIAG {report.verdict.value}", report.verdict, color)
    scope = f"{len(snap.devices)} HCAs, {ports} ports"
    where = f"({scope}, level {inert(report.level)}) on {inert(snap.host)}"
    altered = " (altered bundle)" if report.altered_files else ""
    return f"{verdict} - {inert(report.verdict_reason)} {where}{altered}"


# A drain reason goes to `scontrol update ... Reason=`, NHC's shell, syslog and `sinfo -R`:
# at most this long, and made of these characters only. Whatever a name read from the node or
# off the fabric holds (a far end's node description may hold anything) becomes "_": no
# quotes (scontrol strips a leading or trailing one), no $ ` \ ; | & (shell), no % (printf
# formats), no [ ] @ (Slurm's " [user@time]" stamp after the reason), nothing outside ASCII.
REASON_MAX_CHARS = 128
_REASON_UNSAFE = re.compile(r"[^A-Za-z0-9 _.,:/+<>()-]")
_CUT = "..."


def reason_text(text: str) -> str:
    """``text`` as a drain reason: one line (runs of whitespace one space), every character
    outside the safe set ``_``, at most ``REASON_MAX_CHARS`` (a longer one ends in "...")."""
    line = _REASON_UNSAFE.sub("_", " ".join(text.split()))
    if len(line) > REASON_MAX_CHARS:
        line = line[: REASON_MAX_CHARS - len(_CUT)].rstrip() + _CUT
    return line


def reason_line(report: Report) -> str:
    """The report's drain reason (``ibdiag.drain_reason.drain_reason``, which decides it) as printed
    by ``check --reason`` and the Slurm hooks: ``reason_text``, so a name read from the node
    or the fabric can neither steer a terminal, add a line, nor reach a shell or scontrol as
    anything but plain words."""
    return reason_text(drain_reason(report))


def render(report: Report, options: RenderOptions = DEFAULT) -> str:
    """Fail, error and warn lines (with ``options.verbose`` every result and what checks
    printed), worst first, then the verdict; in colour with ``options.color``."""
    color, verbose = options.color, options.verbose
    shown = [
        r for r in report.results if verbose or r.status in (Status.FAIL, Status.ERROR, Status.WARN)
    ]
    shown.sort(key=lambda r: _ORDER[r.status])
    lines: List[str] = [result_line(result, color) for result in shown]
    if verbose:
        lines += [
            f"OUTPUT {inert(check_id):18} {inert(line)}"
            for check_id, text in report.check_output.items()
            for line in text.splitlines()
        ]
    lines.append(verdict_line(report, color))
    return "\n".join(lines) + "\n"
