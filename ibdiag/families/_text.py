"""Helpers every command-output parser shares: accept any input, quote odd lines briefly."""

from __future__ import annotations

import re
from typing import List, Optional, Union

MAX_PROBLEMS = 50  # a parser reports at most this many problems, then how many more
MAX_QUOTE = 120  # characters of an odd line quoted in a problem

# Lines that are always errors of the infiniband-diags tools (libibmad/libibumad), whatever
# follows ("ibwarn: [12] f: x", "perfquery: iberror: ...").
IB_TOOL_ERROR = re.compile(r"^(?:ibwarn|ibpanic)\b|\biberror\b", re.IGNORECASE)


def as_text(text: Union[str, bytes, None]) -> str:
    """Whatever a command printed, as text: None is empty, bytes are decoded leniently."""
    if text is None:
        return ""
    if isinstance(text, bytes):
        return text.decode("utf-8", errors="replace")
    return str(text)


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
