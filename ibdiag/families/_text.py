"""Helpers every command-output parser shares: accept any input, quote odd lines briefly."""

from __future__ import annotations

from typing import List, Union

MAX_PROBLEMS = 50  # a parser reports at most this many problems, then how many more
MAX_QUOTE = 120  # characters of an odd line quoted in a problem


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
