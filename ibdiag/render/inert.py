"""Text read from a node or a bundle, made safe to print on a terminal: shown, never obeyed.

A hostname, a device name, a firmware string or a kernel-log line is whatever the node (or
whoever wrote the bundle) put there. Printed raw, an ANSI/OSC escape sequence could rewrite the
terminal, and a newline could forge a second line - a fake ``IBDIAG OK - ...`` verdict, or a
two-line Slurm drain reason. Every value the text renderers print passes through ``inert``:
control characters (C0, DEL, C1), Unicode line and paragraph separators, bidirectional
overrides and lone surrogates (undecodable bytes) are written as ``\\xNN`` / ``\\uNNNN``.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inert(text: object) -> str:
    """``str(text)`` with every character that could steer a terminal or break a line escaped."""
    return _UNSAFE.sub(_escape, str(text))
