"""The perfquery -T texts the FEC tests read (tests/captures/perfquery-T, see its SOURCES.md)."""

from __future__ import annotations

import os

FOLDER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "captures",
                      "perfquery-T")  # fmt: skip


def path(name: str) -> str:
    return os.path.join(FOLDER, name)


def capture(name: str) -> str:
    with open(path(name), encoding="utf-8") as handle:
        return handle.read()
