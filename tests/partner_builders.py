"""Hand-built far ends of a cable (``ibdiag.facts.partner``), shared by the partner checks'
tests and every test that needs a port with a switch behind it (counters, HTML, fleet)."""

from __future__ import annotations

from snapshots import replaced

from ibdiag import roles
from ibdiag.facts.partner import Partner, PortInfo
from ibdiag.facts.perfquery import PmaReading
from ibdiag.families import Runs
from ibdiag.families.partner import port_partner
from ibdiag.model import CommandRun, Snapshot

LEAF_GUID = "0x0002c90300a1b2c3"


def port_info(step: str = "portinfo", **update) -> PortInfo:
    fields = dict(
        role=roles.partner(step, "mlx5_0:1"),
        port=21,
        link_state="Active",
        phys_link_state="LinkUp",
        width_active="4X",
        width_enabled=["1X", "4X"],
        width_supported=["1X", "4X"],
        speed_active="QDR",
        speed_enabled=["SDR", "DDR", "QDR"],
        speed_supported=["SDR", "DDR", "QDR"],
    )
    fields.update(update)
    return PortInfo(**fields)


def counters(**values: int) -> PmaReading:
    base = {"SymbolErrorCounter": 0, "LinkDownedCounter": 0, "PortRcvErrors": 0}
    base.update(values)
    return PmaReading(role=roles.partner("perfquery", "mlx5_0:1"), counters=base)


def partner(**update) -> Partner:
    fields = dict(
        node_type="Switch",
        node_guid=LEAF_GUID,
        description="MF0;leaf07:MQM9700/U1",
        port=21,
        lid=5,
        port_info=port_info(),
        local_port_info=port_info("local-portinfo", port=1),
        counters=counters(),
    )
    fields.update(update)
    return Partner(**fields)


def extended(**values: int) -> PmaReading:
    """A ``perfquery -x`` reading: 64-bit PortCountersExtended (with the error counters when
    given; a PMA without the additional fields prints data counters only)."""
    return PmaReading(role=roles.partner("perfquery-x", "mlx5_0:1"),
                      counters={"PortXmitData": 10, "PortRcvData": 10, **values})  # fmt: skip


def with_runs(snap: Snapshot, *runs: CommandRun) -> Snapshot:
    """``snap`` with ``runs`` recorded and, on each hand-built far end they were run for, what
    the real interpreter says of them (``Partner.unread``: why a step gave nothing usable)."""
    commands = {r.key: r for r in runs}
    recorded = Runs(commands)
    for dev in snap.devices:
        for port_ in dev.ports:
            if port_.partner is not None:
                read = port_partner(dev.target(port_), recorded, dev, port_)
                found = {"unread": read.unread, "runs": read.runs} if read is not None else {}
                far = port_.partner.model_copy(update={"unread": [], "runs": {}, **found})
                snap = replaced(snap, dev.target(port_), partner=far)
    return snap.model_copy(update={"commands": commands})
