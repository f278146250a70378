"""Where the built-in checks and report templates are, installed or in a source checkout.

In the repository they are the top-level ``checks/`` and ``reports/templates/`` folders; the
wheel ships them inside the package as ``ibdiag/_builtin/{checks,templates}`` so that nothing
named ``checks`` or ``reports`` lands in site-packages.
"""

from __future__ import annotations

import os

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_SOURCE_TREE = os.path.dirname(_PACKAGE_DIR)


def _first_existing(*candidates: str) -> str:
    for candidate in candidates:
        if os.path.isdir(candidate):
            return candidate
    raise FileNotFoundError(f"ibdiag is installed incompletely: none of {', '.join(candidates)}")


def builtin_checks_dir() -> str:
    return _first_existing(
        os.path.join(_PACKAGE_DIR, "_builtin", "checks"), os.path.join(_SOURCE_TREE, "checks")
    )


def templates_dir() -> str:
    return _first_existing(
        os.path.join(_PACKAGE_DIR, "_builtin", "templates"),
        os.path.join(_SOURCE_TREE, "reports", "templates"),
    )
