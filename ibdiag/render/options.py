"""How a Report is to be shown: the one options object every renderer takes.

Every Report renderer (``ibdiag.render.text``, ``json``, ``html``, ``prometheus``) has the one
signature ``render(report, options=RenderOptions()) -> str``: a caller (the command line, the
bundle writer, the exporter) picks a renderer by format and hands it the same two things. Each
renderer reads the options that concern it and ignores the rest, so adding an option never
changes a signature.

A NamedTuple: immutable, built with keywords, and free to import on the quick path (no
dataclass machinery at import time).
"""

from __future__ import annotations

from typing import NamedTuple, Optional


class RenderOptions(NamedTuple):
    color: bool = False  # text: ANSI colours (a terminal, and no NO_COLOR)
    verbose: bool = False  # text: every result, and what the checks printed
    duration_s: float = 0.0  # prometheus: seconds collecting and grading took
    compat: Optional[str] = None  # prometheus: also the metric names of "moneo" dashboards


DEFAULT = RenderOptions()
