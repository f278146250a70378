"""Where the built-in checks and report templates are, installed or in a source checkout.

In the repository they are the top-level ``checks/`` and ``reports/templates/`` folders; the
wheel ships them inside the package as ``ibdiag/_builtin/{checks,templates}`` so that nothing
named ``checks`` or ``reports`` lands in site-packages.
"""

from __future__ import annotations

import os

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_PARENT = os.path.dirname(_PACKAGE_DIR)
# Only a checkout (or an editable install of one) has ibdiag's pyproject.toml beside the package;
# an installed copy's parent is site-packages, where an unrelated `checks` package may live.
_SOURCE_TREE = _PARENT if os.path.isfile(os.path.join(_PARENT, "pyproject.toml")) else None


def _find(installed: str, *in_source_tree: str) -> str:
    candidates = [os.path.join(_PACKAGE_DIR, "_builtin", installed)]
    if _SOURCE_TREE is not None:
        candidates.append(os.path.join(_SOURCE_TREE, *in_source_tree))
    for candidate in candidates:
        if os.path.isdir(candidate):
            return candidate
    raise FileNotFoundError(f"ibdiag is installed incompletely: none of {', '.join(candidates)}")


def builtin_checks_dir() -> str:
    return _find("checks", "checks")


def templates_dir() -> str:
    return _find("templates", "reports", "templates")
