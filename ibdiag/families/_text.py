"""Helpers every command-output parser shares: accept any input, quote odd lines briefly."""

from __future__ import annotations

import re
from typing import Iterator, List, Optional, Pattern, Tuple, Union

MAX_PROBLEMS = 50  # a parser reports at most this many problems, then how many more
MAX_QUOTE = 120  # characters of an odd line quoted in a problem

# Lines that are always errors of the infiniband-diags tools (libibmad/libibumad), whatever
# follows ("ibwarn: [12] f: x", "perfquery: iberror: ...").
IB_TOOL_ERROR = re.compile(r"^(?:ibwarn|ibpanic)\b|\biberror\b", re.IGNORECASE)
# A number as printf writes one: "12", "-3.5", ".5", "1.2e+03" (a pattern to put in others).
FLOAT = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
# What the shell or the loader prints when a program could not be started at all.
NOT_STARTED = (
    r"command not found|No such file or directory|cannot open shared object"
    r"|error while loading shared libraries"
)


def as_text(text: Union[str, bytes, None]) -> str:
    """Whatever a command printed, as text: None is empty, bytes are decoded leniently."""
    if text is None:
        return ""
    if isinstance(text, bytes):
        return text.decode("utf-8", errors="replace")
    return str(text)


def numbered_lines(text: Union[str, bytes, None]) -> Iterator[Tuple[int, str]]:
    """Each non-blank line of what a command printed, stripped, with its line number (from 1,
    so that a problem can say where the odd line stood)."""
    for number, raw in enumerate(as_text(text).splitlines(), start=1):
        line = raw.strip()
        if line:
            yield number, line


def output_lines(
    text: Union[str, bytes, None], error: Pattern[str], errors: List[str]
) -> Iterator[Tuple[int, str]]:
    """``numbered_lines`` less the tool's own error lines: each line ``error`` finds goes to
    ``errors`` (trimmed) instead, so a failed query among good answers is kept apart from them."""
    for number, line in numbered_lines(text):
        if error.search(line):
            errors.append(trim(line))
        else:
            yield number, line


def trim(line: str) -> str:
    return line if len(line) <= 200 else line[:200] + "..."


def quote(line: str) -> str:
    return repr(line if len(line) <= MAX_QUOTE else line[:MAX_QUOTE] + "...")


def cap(problems: List[str]) -> List[str]:
    if len(problems) <= MAX_PROBLEMS:
        return problems
    return [*problems[:MAX_PROBLEMS], f"... {len(problems) - MAX_PROBLEMS} more problems"]


def number(text: Optional[str], what: str, problems: List[str]) -> Optional[int]:
    """``text`` as an integer (decimal, or hex with 0x); None when it is empty, and a problem
    naming ``what`` when it is not a number."""
    if text is None or not text.strip():
        return None
    value = text.strip()
    try:
        return int(value, 16) if value.lower().startswith("0x") else int(value)
    except ValueError:
        problems.append(f"{what}: not a number {quote(value)}")
        return None
