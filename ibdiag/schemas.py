"""The JSON Schemas ibdiag publishes: the report (``--json``), a bundle's manifest.json and the
fleet report (``ibdiag fleet report --json``).

Consumers - a fleet aggregator, a support engineer's script, a monitoring pipeline - validate
what ibdiag writes against these instead of reverse-engineering it. They are generated from the
pydantic models that write the files (``Report``, ``ibdiag.bundle.manifest.Manifest``,
``fleet.report.FleetReport``), in serialization mode (what the JSON holds, not what validation
would accept), and the same text is
committed under ``schema/`` in the repository: a test fails when a model changes and the
committed file was not regenerated (``ibdiag schema NAME -o schema/NAME.schema.json``), so a
change to the published contract is always a visible change in review.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict

SCHEMA_DRAFT = "https://json-schema.org/draft/2020-12/schema"


def _report() -> Dict[str, Any]:
    from ibdiag.model import Report

    return Report.model_json_schema(mode="serialization")


def _manifest() -> Dict[str, Any]:
    from ibdiag.bundle.manifest import Manifest

    return Manifest.model_json_schema(mode="serialization")


def _fleet() -> Dict[str, Any]:
    from ibdiag.fleet.report import FleetReport

    return FleetReport.model_json_schema(mode="serialization")


_BUILDERS: Dict[str, Callable[[], Dict[str, Any]]] = {
    "report": _report,
    "manifest": _manifest,
    "fleet": _fleet,
}
NAMES = tuple(_BUILDERS)


def json_schema(name: str) -> Dict[str, Any]:
    """The schema called ``name`` (one of ``NAMES``), with its ``$schema`` draft and ``$id``."""
    schema = _BUILDERS[name]()
    return {"$schema": SCHEMA_DRAFT, "$id": f"ibdiag/{name}.schema.json", **schema}


def schema_text(name: str) -> str:
    """The schema as committed under schema/: two-space indented JSON, one final newline."""
    return json.dumps(json_schema(name), indent=2, ensure_ascii=False) + "\n"
