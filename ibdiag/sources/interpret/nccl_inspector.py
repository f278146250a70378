"""NCCL Inspector dump files -> ``Snapshot.nccl_inspector_dumps``.

Each file read (``Snapshot.nccl_inspector``, which keeps the text for the bundle) is parsed
once, by its name (``.prom``: Prometheus mode, ``.json``/``.jsonl``/``.log``: JSON mode), into
an ``InspectorDump`` of per-GPU, per-collective samples that records the file's ``name``, in the
files' order. A file caught half-written or holding junk gives what could be read and its
``problems``; nothing raises.
"""

from __future__ import annotations

from typing import Any, Dict

from ibdiag.model import CommandRun
from ibdiag.sources.parsers.nccl_inspector import parse_inspector_file


def interpret(fields: Dict[str, Any], commands: Dict[str, CommandRun]) -> Dict[str, Any]:
    """``{"nccl_inspector_dumps": [...]}`` when dumps were read; ``{}`` when none were looked
    for (``nccl_inspector`` None)."""
    files = fields.get("nccl_inspector")
    if files is None:
        return {}
    return {"nccl_inspector_dumps": [parse_inspector_file(f.name, f.text) for f in files]}
