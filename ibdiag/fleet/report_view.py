"""``ReportView``: the typed view of a node's Report that the fleet reads - only the fields
``ibdiag.fleet.node`` compares across nodes, under the Report's own names
(``schema/report.schema.json``; a test checks every one), every other field ignored.

Healthy: a report ibdiag wrote validates into the view with every field the fleet needs. The
view must also read what ibdiag did not write that way - a report of another version, or one a
disk or a hand damaged - and there one field costs at most itself, never the node:

- a field that is absent, null or of another type (a list where an object belongs, ``"1"``
  where a number does, ``true`` where an integer does) is unknown: its default;
- a list item or map value of another type (a string among the devices) is left out;
- a measurement (``Reading``: a bandwidth, a counter increase, hours) is a finite number from 0
  to ``MAX_MEASUREMENT`` (a 64-bit counter's range). A JSON number or boolean that is none - NaN,
  infinite, negative, too large, ``true`` - reads as ``UNUSABLE``, which the summary names on
  its node (``NodeSummary.unusable_numbers``); anything else there is only unknown (None).

The Report model's own rules (``ibdiag.model``) are not checked again: the fleet compares what
nodes said, it does not re-grade them. The leniency is pydantic-core's (``on_error`` of a
default, ``omit`` of a list item): no Python runs per field but ``collected_at`` (Python's
``datetime.fromisoformat``, as ibdiag writes it) and a number no measurement can be.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Dict, List, Optional, Tuple, TypeVar, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    GetCoreSchemaHandler,
    PlainValidator,
    StrictInt,
    StrictStr,
)
from pydantic_core import CoreSchema, core_schema
from typing_extensions import Annotated

# No measurement the fleet reads is larger: counters are 64-bit, bandwidths and hours far below.
MAX_MEASUREMENT = float(2**64)


class _OrDefault:
    """A value that does not validate is ``default`` (unknown), not an error."""

    def __init__(self, default: Any) -> None:
        self.default = default

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        return core_schema.with_default_schema(
            handler(source), default=self.default, on_error="default"
        )


class _LeftOut:
    """A list item or map value that does not validate is left out."""

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        return core_schema.with_default_schema(handler(source), on_error="omit")


class Unusable:
    """What a number no measurement can be reads as (``UNUSABLE``, the one instance)."""

    def __repr__(self) -> str:
        return "UNUSABLE"


UNUSABLE = Unusable()


class _Reading:
    """A measurement (a finite float from 0 to ``MAX_MEASUREMENT``), ``UNUSABLE`` for any
    other JSON number or boolean, None for anything else (absent, null, text, an object)."""

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        number = core_schema.union_schema(
            [
                core_schema.bool_schema(strict=True),
                core_schema.int_schema(strict=True),
                core_schema.float_schema(strict=True),
            ]
        )
        choices: List[Union[CoreSchema, Tuple[CoreSchema, str]]] = [
            core_schema.float_schema(strict=True, ge=0, le=MAX_MEASUREMENT, allow_inf_nan=False),
            core_schema.no_info_after_validator_function(lambda _: UNUSABLE, number),
            core_schema.none_schema(),
        ]
        return core_schema.with_default_schema(
            core_schema.union_schema(choices, mode="left_to_right"),
            default=None,
            on_error="default",
        )


def _iso_time(value: Any) -> Optional[datetime]:
    """``collected_at``: an ISO 8601 time as Python reads it ("Z" for UTC); None otherwise."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


# Strict: a boolean is no integer, a number no text.
Text = Annotated[Optional[StrictStr], _OrDefault(None)]
Count = Annotated[Optional[StrictInt], _OrDefault(None)]
Reading = Annotated[Union[float, Unusable, None], _Reading()]
Time = Annotated[Optional[datetime], PlainValidator(_iso_time)]
TextMap = Annotated[Dict[str, Annotated[StrictStr, _LeftOut()]], _OrDefault({})]
_V = TypeVar("_V")
Items = Annotated[List[Annotated[_V, _LeftOut()]], _OrDefault([])]  # items of another type left out
Maybe = Annotated[Optional[_V], _OrDefault(None)]  # None when not an object of its kind


class _View(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class ResultView(_View):
    """A check's result, as a drain reason and a port's status read it (``grade.reason_of``)."""

    check_id: Annotated[StrictStr, _OrDefault("")] = ""
    target: Annotated[StrictStr, _OrDefault("")] = ""
    status: Annotated[StrictStr, _OrDefault("")] = ""
    observed: Text = None  # only text is quoted in a drain reason
    subject: Text = None


class RateView(_View):
    """``LinkRate``: the port's rate."""

    gbps: Reading = None


class PartnerView(_View):
    """The far end of a port's cable (``Partner``)."""

    node_guid: Text = None
    description: Text = None
    port: Count = None
    node_type: Text = None


class CableIdentityView(_View):
    """``CableIdentity``: the cable's (or optical module's) make, as its EEPROM says it."""

    vendor: Text = None
    part_number: Text = None
    date_code: Text = None
    lot: Text = None


class ModuleView(_View):
    """``ModuleReading`` (the port's ``facts["module"]``): only who made the cable."""

    identity: Maybe[CableIdentityView] = None


class PKeyEntryView(_View):
    """``PKeyEntry``: one non-empty slot of a port's partition table."""

    value: Count = None


class PKeyTableView(_View):
    """``PKeyTable`` (the port's ``facts["pkeys"]``): the keys it holds."""

    keys: Items[PKeyEntryView] = []


class PortFactsView(_View):
    """A port's ``facts`` map: the families' facts the fleet reads."""

    module: Maybe[ModuleView] = None
    pkeys: Maybe[PKeyTableView] = None


class PortView(_View):
    """``Port``: where it is, how it is, and its far end."""

    number: Count = None
    state_name: Text = None
    rate: Maybe[RateView] = None
    # Not text: not InfiniBand, and not absent either (absent is None: a kernel without the
    # file, ``ibdiag.rails.infiniband_port``).
    link_layer: Annotated[Optional[StrictStr], _OrDefault("")] = None
    problems: TextMap = {}
    partner: Maybe[PartnerView] = None
    facts: Maybe[PortFactsView] = None


class DeviceView(_View):
    """``Device``: an RDMA device - its inventory, GUID and ports."""

    name: Text = None
    hca_type: Text = None
    board_id: Text = None
    fw_ver: Text = None
    node_guid: Text = None
    ports: Items[PortView] = []


class LoopbackView(_View):
    """``LoopbackAttempt``: one ib_write_bw loopback run of level full."""

    client_device: Text = None
    gbps: Reading = None


class NcclSideView(_View):
    """``NcclSide``: the out-of-place or in-place half of an nccl-tests row."""

    busbw_gbps: Reading = None


class NcclRowView(_View):
    """``NcclTestsRow``: one message size of an nccl-tests run."""

    size_bytes: Count = None
    out_of_place: Maybe[NcclSideView] = None
    in_place: Maybe[NcclSideView] = None


class NcclTestsView(_View):
    """``NcclTestsResult``: the nccl-tests run of level full."""

    rows: Items[NcclRowView] = []


class InspectorSampleView(_View):
    """``InspectorSample``: one NCCL Inspector sample (a collective's or a P2P operation's)."""

    kind: Text = None
    collective: Text = None
    message_bytes: Count = None
    n_nodes: Count = None
    bus_bw_gbps: Reading = None


class InspectorDumpView(_View):
    """``InspectorDump``: one NCCL Inspector file, parsed."""

    samples: Items[InspectorSampleView] = []


class SnapshotView(_View):
    """``Snapshot``: what the node read - who it is, its devices and its measurements."""

    host: Text = None
    collected_at: Time = None
    boot_id: Text = None
    kernel_release: Text = None
    driver_versions: TextMap = {}
    devices: Items[DeviceView] = []
    loopback: Items[LoopbackView] = []
    nccl_tests: Maybe[NcclTestsView] = None
    nccl_inspector_dumps: Items[InspectorDumpView] = []


Counters = Annotated[Dict[str, Reading], _LeftOut()]


class CounterIncreasesView(_View):
    """Counter increases since the baseline (``CounterIncreases``): target -> counter -> delta."""

    hours: Reading = None
    targets: Annotated[Dict[str, Counters], _OrDefault({})] = {}


class ReportView(_View):
    """What the fleet reads of one node's Report. ``verdict``, ``results`` and ``snapshot`` are
    None when the document has none (of the right type): then it is no report."""

    schema_version: Count = None
    tool_version: Text = None
    level: Text = None
    verdict: Text = None
    verdict_reason: Text = None
    results: Annotated[Optional[List[Annotated[ResultView, _LeftOut()]]], _OrDefault(None)] = None
    snapshot: Maybe[SnapshotView] = None
    counter_increases: Maybe[CounterIncreasesView] = None
