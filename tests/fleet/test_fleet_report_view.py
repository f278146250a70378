"""``ibdiag.fleet.report_view``: the typed view of a Report that the fleet reads - under the
Report's own field names (checked against ``schema/report.schema.json``, so a renamed Report
field breaks this test, not the fleet silently), and lenient field by field: a value of another
type is that field unknown, never the report unreadable."""

from __future__ import annotations

import json
import math
import os
import typing
from typing import Any, Dict, Iterator, List, Optional, Type

import pytest
from conftest import REPO
from pydantic import BaseModel

from ibdiag.fleet.report_view import (
    MAX_MEASUREMENT,
    UNUSABLE,
    LoopbackView,
    ReportView,
    SnapshotView,
    Text,
)

SCHEMA = os.path.join(REPO, "schema", "report.schema.json")


def nested_views(annotation: Any) -> Iterator[Type[BaseModel]]:
    """The view models inside a field's annotation (``List[Annotated[DeviceView, ...]]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for argument in typing.get_args(annotation):
        yield from nested_views(argument)


def objects_of(node: Dict[str, Any], schema: Dict[str, Any]) -> Iterator[Dict[str, Any]]:
    """The object definitions (with ``properties``) a schema node may hold, through ``$ref``,
    ``anyOf``, array items and map values."""
    if "$ref" in node:
        yield from objects_of(schema["$defs"][node["$ref"].rsplit("/", 1)[1]], schema)
    if "properties" in node:
        yield node
    for choice in node.get("anyOf", []):
        yield from objects_of(choice, schema)
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            yield from objects_of(node[key], schema)


def unknown_fields(
    view: Type[BaseModel], node: Dict[str, Any], schema: Dict[str, Any], where: str = ""
) -> List[str]:
    """Every field of ``view`` (and of the views nested in it) that the schema node it reads
    does not have, as ``snapshot.devices.name``."""
    missing = []
    for name, field in view.model_fields.items():
        key = field.alias or name
        path = f"{where}{key}"
        prop = node["properties"].get(key)
        if prop is None:
            missing.append(path)
            continue
        for nested in nested_views(field.annotation):
            found = list(objects_of(prop, schema))
            if len(found) != 1:
                missing.append(f"{path} (not one object in the schema: {len(found)})")
                continue
            missing += unknown_fields(nested, found[0], schema, f"{path}.")
    return missing


@pytest.fixture(scope="module")
def schema() -> Dict[str, Any]:
    with open(SCHEMA, encoding="utf-8") as handle:
        return json.load(handle)


def test_every_field_of_the_view_is_a_report_field(schema):
    assert unknown_fields(ReportView, schema, schema) == []
    # The walk reaches the nested views (a check that checked nothing would pass too).
    assert len(list(nested_views(ReportView.model_fields["snapshot"].annotation))) == 1


def test_a_misspelt_or_renamed_field_is_caught(schema):
    """A name planted wrong, at the top and deep inside: the check names each."""

    class Snapshot2(SnapshotView):
        devicez: Text = None

    class Planted(ReportView):
        verdikt: Text = None
        snapshot: Optional[Snapshot2] = None  # type: ignore[assignment]

    assert sorted(unknown_fields(Planted, schema, schema)) == ["snapshot.devicez", "verdikt"]
    renamed = json.loads(json.dumps(schema))
    port = renamed["$defs"]["Port"]["properties"]
    port["state_label"] = port.pop("state_name")
    assert unknown_fields(ReportView, renamed, renamed) == ["snapshot.devices.ports.state_name"]


def test_numbers_no_measurement_can_be_are_unusable_and_others_unknown():
    """A measurement is a finite number from 0 to 2**64 (a 64-bit counter's range); any other
    JSON number or boolean is UNUSABLE (the summary names it on its node, issue 21); what is
    no number at all is only unknown."""

    def gbps(value: Any) -> Any:
        return LoopbackView.model_validate({"gbps": value}).gbps

    assert gbps(383.5) == 383.5 and gbps(0) == 0.0 and gbps(2**64) == MAX_MEASUREMENT
    assert math.copysign(1, gbps(-0.0)) == -1  # -0.0 is no negative measurement
    for unknown in (None, "383", [1], {"gbps": 1}):
        assert gbps(unknown) is None, unknown
    assert LoopbackView.model_validate({}).gbps is None
    for bad in (10**400, -(10**400), -1, 2.0**65, float("inf"), float("nan"), True, False):
        assert gbps(bad) is UNUSABLE, bad


def test_a_field_of_another_type_is_unknown_and_a_stray_item_left_out():
    view = ReportView.model_validate(
        {
            "verdict": "OK",
            "schema_version": True,  # a boolean is no integer
            "results": [{"check_id": 7, "target": "mlx5_0:1", "status": "warn"}, "junk"],
            "snapshot": {
                "host": "n1",
                "collected_at": 1714564800,
                "devices": [7, {"name": "mlx5_0", "ports": {"number": 1}}],
                "driver_versions": {"mlx5_core": "24.10", "ib_core": 5},
                "nccl_tests": [],
            },
            "counter_increases": {"hours": "2", "targets": {"mlx5_0:1": [1], "mlx5_1:1": {}}},
        }
    )
    assert view.schema_version is None
    assert [(r.check_id, r.target) for r in view.results or []] == [("", "mlx5_0:1")]
    snapshot = view.snapshot
    assert snapshot is not None and snapshot.collected_at is None
    assert [(d.name, d.ports) for d in snapshot.devices] == [("mlx5_0", [])]
    assert snapshot.driver_versions == {"mlx5_core": "24.10"} and snapshot.nccl_tests is None
    increases = view.counter_increases
    assert increases is not None and increases.hours is None
    assert increases.targets == {"mlx5_1:1": {}}


def test_what_is_no_report_has_no_verdict_results_or_snapshot():
    view = ReportView.model_validate({"verdict": ["OK"], "results": {}, "snapshot": "n1"})
    assert (view.verdict, view.results, view.snapshot) == (None, None, None)


# --- a report file read straight into the view, or parsed by json first: the same summary ------


@pytest.fixture(scope="module")
def level_full_report() -> str:
    from fleet_gen import node_report, plan_fleet

    return node_report(plan_fleet(128, 15), 30)  # gpu0031: a far end down, rates, far ends


@pytest.mark.parametrize(
    "literal",
    ["9" * 401, "-" + "9" * 401, "9" * 5000, "1e999", "Infinity", "NaN", "-1", "true", "-0.0",
     '"7"', "null", "[]", "{}"],
)  # fmt: skip
def test_the_fast_and_the_json_path_read_a_report_alike(level_full_report, literal):
    """``read._summary`` parses a file with pydantic-core (``model_validate_json``), falling
    back on ``json`` for what that does not read; ``summarize`` takes what ``json`` parsed. On
    a real report with every number replaced by a hostile value (or a value of another type),
    both give the same summary."""
    import re

    from test_fleet_hostile import numeric_paths

    from ibdiag.fleet import read
    from ibdiag.fleet.node import summarize

    data = json.loads(level_full_report)
    for path in numeric_paths(data):
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = "@@hostile@@"
    text = re.sub('"@@hostile@@"', lambda _: literal, json.dumps(data))
    fast = read._summary(text.encode(), "x.json")
    assert fast == summarize(read._parse(text.encode()), "x.json")
    assert fast.host == "gpu0031"
    plain = read._summary(level_full_report.encode(), "x.json")
    assert plain == summarize(json.loads(level_full_report), "x.json") and plain.metrics
