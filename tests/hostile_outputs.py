"""Hostile command outputs, generated from a seed: what a tool's text becomes when the tool, the
node or the transport misbehave. Shared by the families' hostile tests (a parser must return
less, never raise; an interpreter must keep one row per target).

    rng = random.Random(SEED)
    for kind, text in cases(rng, [capture_a, capture_b], count=300):
        parse(text)   # never raises

Each case starts from one of the real captures given (``seeds``) and applies one mutation
(``KINDS``); the first ``len(KINDS)`` cases take each kind once, so every kind is reached
whatever the count:

- ``truncated``: cut at a random point (mid-line, mid-character: a tool killed at its timeout);
- ``binary``: random bytes spliced in, decoded as the runner decodes (UTF-8 with replacement);
- ``huge_line``: a line of up to a megabyte, or one field's value thousands of characters long;
- ``control``: control characters and terminal escapes (ANSI CSI/OSC, NUL, CR, backspace, DEL,
  Unicode line separators, a right-to-left override) inside keys and values;
- ``duplicated``: a block of lines repeated, or the whole output twice (a tool run twice);
- ``unrelated``: another tool's output (one of ``others``, or a built-in one: an error, a usage
  text, JSON, HTML);
- ``empty``: nothing, a newline, white space only;
- ``unicode``: digits and colons replaced by look-alikes (Arabic-Indic and full-width digits,
  full-width colon), characters outside the BMP;
- ``line_endings``: CRLF or CR line endings, no final newline;
- ``shuffled``: the lines in another order, some dropped.

``as_bytes`` gives the bytes a stub prints for a case (write them to a file, ``stubs.prints``).
"""

from __future__ import annotations

import random
from typing import List, Sequence, Tuple

KINDS: Tuple[str, ...] = (
    "truncated", "binary", "huge_line", "control", "duplicated", "unrelated", "empty", "unicode",
    "line_endings", "shuffled",
)  # fmt: skip

# Outputs of no tool the families run, or of the wrong one.
UNRELATED: Tuple[str, ...] = (
    "bash: line 1: tool: command not found\n",
    "Usage: tool [OPTIONS] DEVICE\n  -d, --device  the device\n  -h, --help    this text\n",
    "-E- Failed to open device\n",
    '{"health":{"pci/0000:0c:00.0":[{"reporter":"fw","state":"healthy","error":0}]}}\n',
    "<html><body><script>alert(1)</script></body></html>\n",
    "PortXmitData:....................4294967295\nSymbolErrorCounter:..............65535\n",
    "[    2.341892] mlx5_core 0000:0c:00.0: firmware version: 20.31.1014\n",
    "     rx_packets: 123\n     tx_packets: 456\n",
    "Segmentation fault (core dumped)\n",
)

_CONTROL = (
    "\x00", "\x07", "\x08", "\r", "\x1b[2J", "\x1b[31m", "\x1b]0;pwned\x07", "\x7f", "\x85",
    "\u2028", "\u202e", "\x0c", "\x1b[1;1H",
)  # fmt: skip
_LOOKALIKE_DIGITS = ("\u0660", "\uff10", "\u0966")  # Arabic-Indic, full-width, Devanagari zero


def cases(
    rng: random.Random, seeds: Sequence[str], count: int, others: Sequence[str] = ()
) -> List[Tuple[str, str]]:
    """``count`` (kind, text) cases from ``seeds``; every kind among the first ones."""
    found = []
    for index in range(count):
        kind = KINDS[index] if index < len(KINDS) else rng.choice(KINDS)
        found.append((kind, mutate(rng, rng.choice(list(seeds)), kind, others)))
    return found


def mutate(rng: random.Random, text: str, kind: str, others: Sequence[str] = ()) -> str:
    """``text`` with the mutation ``kind`` applied (module docstring)."""
    if kind == "truncated":
        return _as_runner(text.encode("utf-8")[: rng.randrange(len(text.encode("utf-8")) + 1)])
    if kind == "binary":
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
        raw = text.encode("utf-8")
        at = rng.randrange(len(raw) + 1)
        return _as_runner(raw[:at] + junk + raw[at:])
    if kind == "huge_line":
        return _huge(rng, text)
    if kind == "control":
        return _sprinkle(rng, text, _CONTROL, rng.randrange(1, 20))
    if kind == "duplicated":
        return _duplicated(rng, text)
    if kind == "unrelated":
        return rng.choice(list(others) + list(UNRELATED))
    if kind == "empty":
        return rng.choice(["", "\n", "   \n\t\n", "\n" * 50])
    if kind == "unicode":
        return _unicode(rng, text)
    if kind == "line_endings":
        ending = rng.choice(["\r\n", "\r"])
        return ending.join(text.splitlines())
    if kind == "shuffled":
        lines = text.splitlines(keepends=True)
        rng.shuffle(lines)
        return "".join(line for line in lines if rng.random() > 0.2)
    raise ValueError(f"unknown mutation {kind!r}")


def as_bytes(text: str) -> bytes:
    """What a stub prints for ``text`` (any code point; lone surrogates as their bytes)."""
    return text.encode("utf-8", "surrogateescape")


def _as_runner(raw: bytes) -> str:
    """Bytes as the runner records them: UTF-8, invalid sequences replaced."""
    return raw.decode("utf-8", "replace")


def _huge(rng: random.Random, text: str) -> str:
    lines = text.splitlines() or [""]
    at = rng.randrange(len(lines))
    if rng.random() < 0.5:  # one line of up to a megabyte
        line = rng.choice(["x", " ", ":", "9.", "A" * 7, lines[at] or "y"])
        lines.insert(at, line * rng.randrange(1000, 1_000_000 // max(1, len(line))))
    else:  # one field's value far too long
        head, sep, _ = lines[at].partition(":")
        lines[at] = (head + (sep or ":")) + " " + rng.choice(["9", "MT_0", "1.2."]) * 5000
    return "\n".join(lines) + "\n"


def _sprinkle(rng: random.Random, text: str, pieces: Sequence[str], times: int) -> str:
    for _ in range(times):
        at = rng.randrange(len(text) + 1)
        text = text[:at] + rng.choice(list(pieces)) + text[at:]
    return text


def _duplicated(rng: random.Random, text: str) -> str:
    if rng.random() < 0.3:
        return text + text
    lines = text.splitlines(keepends=True)
    if not lines:
        return text
    start = rng.randrange(len(lines))
    end = rng.randrange(start, len(lines)) + 1
    return "".join(lines[:end] + lines[start:end] * rng.randrange(2, 50) + lines[end:])


def _unicode(rng: random.Random, text: str) -> str:
    zero = rng.choice(_LOOKALIKE_DIGITS)
    swapped = "".join(
        chr(ord(zero) + int(ch)) if ch.isdigit() and ch.isascii() and rng.random() < 0.5 else ch
        for ch in text
    )
    swapped = swapped.replace(":", "\uff1a") if rng.random() < 0.5 else swapped
    return _sprinkle(rng, swapped, ["\U0001f4a5", "\u00e9", "\ufeff"], rng.randrange(1, 5))
