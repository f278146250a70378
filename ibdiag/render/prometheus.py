"""Prometheus output: text exposition 0.0.4 (``ibdiag export`` writes it with the one atomic
writer, ``ibdiag.write_files.write_output``, so node_exporter's textfile collector never reads half
a file; ``ibdiag serve``, ``ibdiag.exporter``, answers scrapes with it).

Written by hand with the standard library only (no prometheus_client), so importing this module
costs nothing on the quick check path and adds no dependency.

Metric scheme (every name starts with ``ibdiag_``; values in base units):

Counters, one family per counter name, HELP from ``ibdiag.counters.catalogue``:

- ``ibdiag_port_<name>_total{device,port}``: each entry of a port's ``counters``
  (counters/ and counters_ext/). ``<name>`` is the sysfs name lower-cased with a leading
  ``port_`` dropped: ``symbol_error`` -> ``ibdiag_port_symbol_error_total``,
  ``port_rcv_errors`` -> ``ibdiag_port_rcv_errors_total``.
- ``ibdiag_port_hw_<name>_total{device,port}``: each entry of a port's ``hw_counters``.
- ``ibdiag_device_hw_<name>_total{device}``: each device-level ``hw_counters`` entry.
- Units: a counter the catalogue counts in ``words`` (4 bytes) is multiplied by 4 and named
  ``..._bytes_total`` (``port_rcv_data`` -> ``ibdiag_port_rcv_data_bytes_total``); ``bytes``
  gets ``_bytes``; a ``config`` counter is a gauge without ``_total`` (``ms`` -> ``_seconds``,
  divided by 1000: ``lifespan`` -> ``ibdiag_port_hw_lifespan_seconds``).
- A counter whose name is not a valid metric-name fragment (hfi1 names with spaces, commas,
  ...), or whose derived family name is already taken by another counter, is never made into a
  metric name: it goes, raw, into the untyped ``ibdiag_port_other_value{device,port,source,
  counter}`` (``source``: ``counters`` or ``hw_counters``) or
  ``ibdiag_device_other_value{device,counter}``, with the name as an escaped label value.

Every per-port sample also carries ``ib_port`` (``mlx5_0:1``), the name check targets and
existing dashboards use for a port, so one label (one Grafana variable) selects it.

The far end of each cable (``Port.partner``: the switch port, or the other HCA of a
back-to-back cable, read at level standard; ``ibdiag.render.prometheus_partner``): its samples
carry our port's ``device, port, ib_port`` plus ``peer_guid`` (its node GUID), ``peer_name``
(``leaf07`` from ``MF0;leaf07:MQM9700/U1``, as check targets name it:
``ibdiag.facts.partner.short_name``) and ``peer_port`` (its port number); "" for what was not
read. A port whose far end was not collected, or whose chain named nothing (no node GUID, no
description), has none.

- ``ibdiag_partner_<name>_total{...,peer_guid,peer_name,peer_port}``: each counter of the far
  end's perfquery reading (``counters``, then ``rcv_error_details``, perfquery -E: read only
  while PortRcvErrors or PortRcvSwitchRelayErrors is not 0, so the detail series appear with
  the first such error and are absent, not 0, before it). ``<name>``
  follows our port's rule on the catalogue's name for the counter, so the far end's family
  pairs with ours: ``SymbolErrorCounter`` -> ``symbol_error`` ->
  ``ibdiag_partner_symbol_error_total`` (beside ``ibdiag_port_symbol_error_total``),
  ``PortRcvErrors`` -> ``ibdiag_partner_rcv_errors_total``; a name the catalogue has only as
  perfquery's goes to snake case first (``PortLocalPhysicalErrors`` ->
  ``ibdiag_partner_local_physical_errors_total``, ``QP1Dropped`` ->
  ``ibdiag_partner_qp1_dropped_total``). Units as ours: ``PortXmitData``/``PortRcvData`` (4-byte
  words) x 4 as ``ibdiag_partner_xmit_data_bytes_total``. A name that cannot be a metric name
  goes, raw, into the untyped ``ibdiag_partner_other_value{...,counter}``. A far end whose
  counters could not be read has its gauges and no counter sample.
- ``ibdiag_partner_info{...,peer_type,peer_description}`` (always 1): ``peer_type`` as smpquery
  prints NodeType (``Switch``, ``Channel Adapter``), ``peer_description`` the node description
  as read (escaped).
- ``ibdiag_partner_port_state`` (LinkState: 1 Down, 2 Initialize, 3 Armed, 4 Active, the
  numbers of ``ibdiag_port_state``), ``ibdiag_partner_phys_state`` (PhysLinkState: 2 Polling,
  3 Disabled, 5 LinkUp, ...), ``ibdiag_partner_width_active`` (lanes: 4 for 4X) and
  ``ibdiag_partner_rate_bytes_per_second`` (lanes x the speed's per-lane rate as sysfs counts
  it: 4X HDR is 200 Gb/s, as ``ibdiag_port_rate_bytes_per_second`` says for our end). A value
  that was not read, or a word that is not one of libibmad's, has no sample.
- ``ibdiag_partner_neighbor_mtu_bytes`` and ``ibdiag_partner_mtu_cap_bytes``: the far end's
  PortInfo NeighborMTU (the MTU it runs the link at) and MtuCap, in bytes
  (``ibdiag.render.prometheus_mtu``, beside our ``ibdiag_port_active_mtu_bytes`` and
  ``ibdiag_port_max_mtu_bytes`` from ibv_devinfo).
- ``ibdiag_partner_status{...}`` (the far end's labels without peer_type/description): the
  worst result naming the cable (``mlx5_3:1<->leaf07/21``: link.partner, counters.partner, a
  site check naming it so) in ``ibdiag_check_status``'s numbers, worst as the verdict ranks
  them (fail 2 above error 3 above warn 1 above pass 0 above skip -1), so
  ``count by (peer_name) (ibdiag_partner_status >= 2)`` ranks switches by failing far-end
  ports. A cable no result names (the checks not run) has no sample.

Gauges:

- ``ibdiag_port_state{device,port}`` (IB PortState: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, ...),
  ``ibdiag_port_phys_state{device,port}`` (5 LinkUp, ...),
  ``ibdiag_port_rate_bytes_per_second{device,port}`` (negotiated rate, Gb/s x 1e9 / 8: promtool
  rejects ``bits`` as a unit, and node_exporter's ``node_infiniband_rate_bytes_per_second``
  does the same),
  ``ibdiag_port_info{device,port,link_layer}`` (always 1).
  A port attribute that could not be read has no sample.
- ``ibdiag_port_rail_info{device,port,ib_port,rail,hca_model}`` (always 1): the rail of the
  port's HCA, its index among the node's InfiniBand HCAs in natural name order (``ibdiag.rails``,
  as the fleet view numbers them), and its model (``ibdiag.hca_capabilities.model_key``:
  ``ConnectX-7``, else the driver's hca_type): the rate class a fleet compares a port within,
  as link.rate compares it with the other ports of its model, so a ConnectX-6 at HDR is not
  slow beside ConnectX-7s at NDR. Every port of an HCA with an InfiniBand port has one, an HCA
  with none has none. A fleet dashboard joins it on ``(instance, ib_port)``:
  ``min by (rail) (ibdiag_port_rate_bytes_per_second * on (instance, ib_port) group_left (rail)
  ibdiag_port_rail_info)``. A new family rather than a label on the others, so no existing
  series changes identity.
- ``ibdiag_port_loopback_bandwidth_bytes_per_second{device,port,ib_port}``: the ib_write_bw
  loopback bandwidth measured from this port (``Snapshot.loopback``, level full): the best of
  its attempts, in bytes per second (Gb/s x 1e9 / 8, as the port's rate). Labelled by the
  client port (the traffic went to the same port, or to its pair's with
  ``perftest_pairing = "pairs"``); a port whose attempts all gave no result has none (the
  perftest check says why). Only ``ibdiag export --level full`` writes it: ``serve`` stops at
  level standard, as a scrape must not start traffic tests.
- ``ibdiag_check_status{check,target}``: 0 pass, 1 warn, 2 fail, 3 error, -1 skip.
- ``ibdiag_verdict``: the node's verdict as its Nagios exit code (0 OK, 1 WARNING,
  2 CRITICAL, 3 UNKNOWN).
- ``ibdiag_run_duration_seconds``: how long collecting and grading took.
- ``ibdiag_last_run_timestamp_seconds``: the snapshot's ``collected_at`` (Unix time).
- ``ibdiag_read_problems{device}``: attributes that could not be read (the device's own, its
  PCI function's, its ports' and their netdevs'); ``device=""`` counts node-level problems.
- ``ibdiag_command_timeouts``: commands of this run that timed out and were killed.
- ``ibdiag_scrape_timeout`` (``ibdiag serve`` only, from ``render_scrape_timeout``): 1 when the
  scrape's collection missed its deadline and the samples are the last complete collection's.

``compat="moneo"`` adds, after the families above, the names existing Moneo / ib_hw_exporter
dashboards query (seed 000), as gauges of the raw sysfs values with labels
``instance`` (the snapshot's host) and ``ib_port`` (``mlx5_ib0:1``):
``ib_<counter>`` for each port counter (``ib_port_rcv_data``, ``ib_symbol_error``; raw, so the
data counters are in 4-byte words as sysfs has them), ``ib_port_physical_state`` and
``ib_hw_<counter>`` for each port hw_counter. Names that are not valid metric names are left
out of the compat set (they are in ``ibdiag_port_other_value``). Prometheus renames a scraped
``instance`` label to ``exported_instance`` unless the job sets ``honor_labels: true``.

The renderer only reports the Report: it decides no verdict. The HTTP server that serves this
text is ``ibdiag.exporter``.
"""

from __future__ import annotations

import math
import re
from typing import Dict, List, NamedTuple, Optional, Tuple

from ibdiag.counters.catalogue import lookup
from ibdiag.facts.partner import CABLE, Partner, cable_name
from ibdiag.hca_capabilities import model_key
from ibdiag.model import Report, Status
from ibdiag.render import prometheus_partner as far_end
from ibdiag.render.options import DEFAULT, RenderOptions
from ibdiag.render.prometheus_config import add_configuration
from ibdiag.render.prometheus_fw import add_firmware
from ibdiag.render.prometheus_history import add_history
from ibdiag.render.prometheus_mtu import add_mtu
from ibdiag.render.prometheus_pci import add_pci
from ibdiag.render.prometheus_phy import add_physical

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

STATUS_VALUES: Dict[Status, int] = {
    Status.PASS: 0,
    Status.WARN: 1,
    Status.FAIL: 2,
    Status.ERROR: 3,
    Status.SKIP: -1,
}

_FRAGMENT = re.compile(r"[a-zA-Z0-9_]+")
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")

Labels = Tuple[Tuple[str, str], ...]


class _Family:
    def __init__(self, name: str, kind: str, help_text: str) -> None:
        self.name = name
        self.kind = kind
        self.help = help_text
        self.samples: Dict[Labels, float] = {}

    def add(self, labels: Labels, value: float) -> None:
        self.samples[labels] = value


class _Exposition:
    def __init__(self) -> None:
        self.families: Dict[str, _Family] = {}
        self.owner: Dict[str, Tuple[str, str]] = {}  # family name -> (scope, counter name)

    def family(self, name: str, kind: str, help_text: str) -> _Family:
        found = self.families.get(name)
        if found is None:
            found = self.families[name] = _Family(name, kind, help_text)
        return found

    def text(self) -> str:
        lines: List[str] = []
        for family in self.families.values():
            if not family.samples:
                continue
            lines.append(f"# HELP {family.name} {escape_help(family.help)}")
            lines.append(f"# TYPE {family.name} {family.kind}")
            for labels, value in family.samples.items():
                lines.append(f"{family.name}{format_labels(labels)} {format_value(value)}")
        return "\n".join(lines) + "\n" if lines else ""


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def format_labels(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{key}="{escape_label(value)}"' for key, value in labels) + "}"


def format_value(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 2**63:
        return str(int(value))
    return repr(value)


def _counter_family(
    out: _Exposition,
    scope: str,
    prefix: str,
    name: str,
    directory: str,
    stem: Optional[str] = None,
    where: Optional[str] = None,
) -> Optional[Tuple[_Family, float]]:
    """The family for counter ``name`` and the factor its raw value is multiplied by; None when
    the name cannot be part of a metric name (it then goes to the generic family).

    ``stem``: the family's name fragment when it is not ``name``'s own (the far end's
    counters, ``prometheus_partner.counter_stem``); ``where``: what HELP says the value is
    (``directory/name`` unless given)."""
    if not _FRAGMENT.fullmatch(name):
        return None
    info = lookup(name, directory)
    if stem is None:
        stem = name.lower()
        if prefix == "ibdiag_port_" and stem.startswith("port_"):
            stem = stem[len("port_") :]
    factor: float = 1
    unit = ""
    if info.unit == "words":
        factor, unit = 4, "_bytes"
    elif info.unit == "bytes":
        unit = "_bytes"
    elif info.unit == "ms":
        factor, unit = 0.001, "_seconds"
    if info.category == "config":
        kind, full = "gauge", f"{prefix}{stem}{unit}"
    else:
        kind, full = "counter", f"{prefix}{stem}{unit}_total"
    if not _NAME.fullmatch(full):
        return None
    owner = out.owner.setdefault(full, (scope, name))
    if owner != (scope, name):
        return None  # two counters would share one name: keep the second one generic
    meaning = info.meaning
    if info.unit == "words":
        meaning += " Converted from 4-byte words to bytes."
    elif info.unit == "ms":
        meaning += " Converted from milliseconds to seconds."
    if where is None:
        where = f"{directory}/{name}"
    help_text = f"{where} ({info.category}): {meaning}"
    return out.family(full, kind, help_text), factor


def _add_counters(
    out: _Exposition,
    scope: str,
    prefix: str,
    directory: str,
    values: Dict[str, int],
    base: Labels,
    other: _Family,
    other_labels: Labels = (),
) -> None:
    for name in sorted(values):
        value = values[name]
        found = _counter_family(out, scope, prefix, name, directory)
        if found is None:
            other.add(base + other_labels + (("counter", name),), value)
            continue
        family, factor = found
        family.add(base, value * factor)


def _port_labels(device, port) -> Labels:
    """device, port, and ib_port ("mlx5_0:1": how check targets and dashboards name a port)."""
    return (
        ("device", device.name),
        ("port", str(port.number)),
        ("ib_port", device.target(port)),
    )


def _problem_count(device) -> int:
    count = len(device.problems)
    if device.pci is not None:
        count += len(device.pci.problems)
    for port in device.ports:
        count += len(port.problems)
        if port.netdev is not None:
            count += len(port.netdev.problems)
    return count


COMPAT_CHOICES = ("moneo",)


def render(report: Report, options: RenderOptions = DEFAULT) -> str:
    """The Report as Prometheus text exposition format 0.0.4 (see the module docstring).

    ``options.duration_s``: how long collecting and grading took (``ibdiag_run_duration_seconds``);
    ``options.compat``: None, or ``"moneo"`` to add the Moneo / ib_hw_exporter names as well."""
    duration_s, compat = options.duration_s, options.compat
    if compat is not None and compat not in COMPAT_CHOICES:
        raise ValueError(f"unknown compat {compat!r}: choose from {', '.join(COMPAT_CHOICES)}")
    out = _Exposition()
    snapshot = report.snapshot
    out.family(
        "ibdiag_verdict",
        "gauge",
        "Node verdict as a Nagios code: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.",
    ).add((), report.verdict.exit_code)
    out.family(
        "ibdiag_run_duration_seconds", "gauge", "Seconds ibdiag took to collect and grade."
    ).add((), float(duration_s))
    out.family(
        "ibdiag_last_run_timestamp_seconds",
        "gauge",
        "Unix time at which the snapshot was collected.",
    ).add((), snapshot.collected_at.timestamp())
    timeouts = sum(1 for run in snapshot.commands.values() if run.timed_out)
    out.family(
        "ibdiag_command_timeouts", "gauge", "Commands of this run that timed out and were killed."
    ).add((), timeouts)
    problems = out.family(
        "ibdiag_read_problems",
        "gauge",
        'Attributes that could not be read, per device (device="": node-level).',
    )
    problems.add((("device", ""),), len(snapshot.problems))
    status = out.family(
        "ibdiag_check_status",
        "gauge",
        "Result of one check on one target: 0 pass, 1 warn, 2 fail, 3 error, -1 skip.",
    )
    for result in report.results:
        status.add(
            (("check", result.check_id), ("target", result.target)),
            STATUS_VALUES[Status(result.status)],
        )
    state = out.family(
        "ibdiag_port_state", "gauge", "IB port state: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE."
    )
    phys = out.family(
        "ibdiag_port_phys_state",
        "gauge",
        "IB physical port state: 2 Polling, 3 Disabled, 5 LinkUp, 7 PhyTest, ...",
    )
    rate = out.family(
        "ibdiag_port_rate_bytes_per_second",
        "gauge",
        "Negotiated port rate in bytes per second (the sysfs Gb/s x 1e9 / 8).",
    )
    info = out.family(
        "ibdiag_port_info", "gauge", "Always 1; carries the port's link layer as a label."
    )
    rail_info = out.family(
        "ibdiag_port_rail_info",
        "gauge",
        "Always 1; carries the rail of the port's HCA as a label (its index among the node's "
        "InfiniBand HCAs in natural name order: mlx5_0 is rail 0) and its model (hca_model: "
        "the rate class its ports are compared within).",
    )
    loopback = out.family(
        "ibdiag_port_loopback_bandwidth_bytes_per_second",
        "gauge",
        "Measured ib_write_bw loopback bandwidth from this port (level full; the best attempt, "
        "BW average at the largest message size), in bytes per second (Gb/s x 1e9 / 8).",
    )
    port_other = out.family(
        "ibdiag_port_other_value",
        "untyped",
        "Raw port counters whose names cannot be metric names (name in label counter).",
    )
    device_other = out.family(
        "ibdiag_device_other_value",
        "untyped",
        "Raw device hw_counters whose names cannot be metric names (name in label counter).",
    )
    far = _partner_families(out)
    rails = snapshot.rails()
    cables = _cable_statuses(report)
    for device in snapshot.devices:
        problems.add((("device", device.name),), _problem_count(device))
        for port in device.ports:
            base = _port_labels(device, port)
            if port.state is not None:
                state.add(base, port.state)
            if port.phys_state is not None:
                phys.add(base, port.phys_state)
            if port.rate is not None:
                rate.add(base, port.rate.gbps * 1e9 / 8)
            info.add((*base, ("link_layer", port.link_layer or "")), 1)
            if device.name in rails:
                model = ("hca_model", model_key(device))
                rail_info.add((*base, ("rail", str(rails[device.name])), model), 1)
        for port in device.ports:
            base = _port_labels(device, port)
            _add_counters(
                out,
                "counters",
                "ibdiag_port_",
                "counters",
                port.counters,
                base,
                port_other,
                (("source", "counters"),),
            )
            _add_counters(
                out,
                "hw_counters",
                "ibdiag_port_hw_",
                "hw_counters",
                port.hw_counters,
                base,
                port_other,
                (("source", "hw_counters"),),
            )
        for port in device.ports:
            if port.partner is not None and far_end.known(port.partner):
                base = _port_labels(device, port)
                _add_partner(out, far, base, port.partner)
                found = cables.get(cable_name(device.target(port), port.partner))
                if found is not None:
                    far.status.add(base + far_end.peer_labels(port.partner), STATUS_VALUES[found])
        _add_counters(
            out,
            "device_hw_counters",
            "ibdiag_device_hw_",
            "hw_counters",
            device.hw_counters,
            (("device", device.name),),
            device_other,
        )
    for (dev_name, number), gbps in _best_loopback(snapshot).items():
        labels = (("device", dev_name), ("port", str(number)), ("ib_port", f"{dev_name}:{number}"))
        loopback.add(labels, gbps * 1e9 / 8)
    add_history(out.family, report)
    add_physical(out.family, report)
    add_configuration(out.family, report)
    add_pci(out.family, report)
    add_firmware(out.family, report)
    add_mtu(out.family, report)
    if compat == "moneo":
        _add_moneo(out, report)
    return out.text()


# Worst first when several results name one cable: as the verdict ranks them (a fail is
# CRITICAL, an error UNKNOWN, a warn WARNING), a skip least.
_SEVERITY = (Status.SKIP, Status.PASS, Status.WARN, Status.ERROR, Status.FAIL)


def _cable_statuses(report: Report) -> Dict[str, Status]:
    """Cable name (``mlx5_3:1<->leaf07/21``) -> the worst status of the results naming it
    (link.partner, counters.partner, and any site check that names a cable so)."""
    worst: Dict[str, Status] = {}
    for result in report.results:
        if CABLE not in result.target:
            continue
        status = Status(result.status)
        known = worst.get(result.target)
        if known is None or _SEVERITY.index(status) > _SEVERITY.index(known):
            worst[result.target] = status
    return worst


def _best_loopback(snapshot) -> Dict[Tuple[str, int], float]:
    """(client device, port) -> the best Gb/s of its ib_write_bw attempts that gave one."""
    best: Dict[Tuple[str, int], float] = {}
    for attempt in snapshot.loopback or ():
        if attempt.gbps is None or not math.isfinite(attempt.gbps):
            continue
        key = (attempt.client_device, attempt.client_port)
        best[key] = max(best.get(key, attempt.gbps), attempt.gbps)
    return best


class _PartnerFamilies(NamedTuple):
    info: _Family
    status: _Family
    state: _Family
    phys: _Family
    lanes: _Family
    rate: _Family
    other: _Family


def _partner_families(out: _Exposition) -> _PartnerFamilies:
    """The far end's gauges (module docstring), made in this order after our own port's."""
    return _PartnerFamilies(
        info=out.family(
            "ibdiag_partner_info",
            "gauge",
            "Always 1: the far end of the port's cable (peer_guid, peer_name, peer_port, "
            "peer_type, peer_description: the switch port or the other HCA).",
        ),
        status=out.family(
            "ibdiag_partner_status",
            "gauge",
            "The worst result on the port's cable (link.partner, counters.partner): 0 pass, "
            "1 warn, 2 fail, 3 error, -1 skip, as ibdiag_check_status (a fail ranks above an "
            "error).",
        ),
        state=out.family(
            "ibdiag_partner_port_state",
            "gauge",
            "The far end's IB port state (smpquery portinfo LinkState): 1 Down, 2 Initialize, "
            "3 Armed, 4 Active.",
        ),
        phys=out.family(
            "ibdiag_partner_phys_state",
            "gauge",
            "The far end's IB physical port state (smpquery portinfo PhysLinkState): 1 Sleep, "
            "2 Polling, 3 Disabled, 4 PortConfigurationTraining, 5 LinkUp, 6 "
            "LinkErrorRecovery, 7 PhyTest.",
        ),
        lanes=out.family(
            "ibdiag_partner_width_active",
            "gauge",
            "Lanes the far end's port runs (smpquery portinfo LinkWidthActive: 4 for 4X).",
        ),
        rate=out.family(
            "ibdiag_partner_rate_bytes_per_second",
            "gauge",
            "The far end's active rate in bytes per second (lanes x per-lane Gb/s as sysfs "
            "counts it x 1e9 / 8): compare with ibdiag_port_rate_bytes_per_second.",
        ),
        other=out.family(
            "ibdiag_partner_other_value",
            "untyped",
            "Raw far-end counters whose names cannot be metric names (name in label counter).",
        ),
    )


def _add_partner(out: _Exposition, far: _PartnerFamilies, base: Labels, partner: Partner) -> None:
    """One port's far end: its info, link gauges and counters (perfquery's names mapped to the
    catalogue's, so the families pair with our own port's)."""
    labels = base + far_end.peer_labels(partner)
    far.info.add(labels + far_end.info_labels(partner), 1)
    info = partner.port_info
    if info is not None:
        for family, value in (
            (far.state, far_end.link_state(info.link_state)),
            (far.phys, far_end.phys_state(info.phys_link_state)),
            (far.lanes, far_end.lanes(info.width_active)),
            (far.rate, far_end.rate_bytes_per_second(info.width_active, info.speed_active)),
        ):
            if value is not None:
                family.add(labels, value)
    values: Dict[str, int] = {}
    for reading in (partner.counters, partner.rcv_error_details):
        if reading is not None:
            values.update(reading.counters)
    for name in sorted(values):
        named, stem = far_end.counter_stem(name)
        found = None
        if _FRAGMENT.fullmatch(name):
            where = f"Far end, perfquery {name}"
            found = _counter_family(
                out, "partner", "ibdiag_partner_", named, "perfquery", stem, where
            )
        if found is None:
            # a name no parser gives came with the reading: shown inert, as peer_description
            far.other.add((*labels, ("counter", far_end.inert(name))), values[name])
            continue
        family, factor = found
        family.add(labels, values[name] * factor)


def _add_moneo(out: _Exposition, report: Report) -> None:
    instance = report.snapshot.host or ""
    phys = out.family(
        "ib_port_physical_state",
        "gauge",
        "Moneo name: port physical link state (5 = LinkUp, 3 = Disabled, 2 = Polling).",
    )
    taken = set(out.families)
    for device in report.snapshot.devices:
        for port in device.ports:
            labels: Labels = (("instance", instance), ("ib_port", device.target(port)))
            if port.phys_state is not None:
                phys.add(labels, port.phys_state)
            for prefix, directory, values in (
                ("ib_", "counters", port.counters),
                ("ib_hw_", "hw_counters", port.hw_counters),
            ):
                for name in sorted(values):
                    full = prefix + name
                    if not _FRAGMENT.fullmatch(name) or not _NAME.fullmatch(full):
                        continue
                    if full in taken:
                        continue  # e.g. a counter literally named port_physical_state
                    help_text = f"Moneo name, raw sysfs {directory}/{name}: "
                    help_text += lookup(name, directory).meaning
                    out.family(full, "gauge", help_text).add(labels, values[name])


SCRAPE_TIMEOUT_HELP = (
    "1 when this scrape's collection did not finish within the scrape deadline (ibdiag serve "
    "--scrape-timeout): the other samples are then the last complete collection's (see "
    "ibdiag_last_run_timestamp_seconds), or absent if there was none; 0 otherwise."
)


def render_scrape_timeout(timed_out: bool) -> str:
    """The ``ibdiag_scrape_timeout`` family ``serve`` appends to every scrape's answer."""
    return (
        f"# HELP ibdiag_scrape_timeout {escape_help(SCRAPE_TIMEOUT_HELP)}\n"
        "# TYPE ibdiag_scrape_timeout gauge\n"
        f"ibdiag_scrape_timeout {1 if timed_out else 0}\n"
    )
