"""What the subnet manager and the kernel set up, in Prometheus terms (level quick, sysfs):

- ``ibdiag_port_lid`` and ``ibdiag_port_sm_lid`` (labels ``device``, ``port``, ``ib_port``, as
  every ``ibdiag_port_*`` family): each InfiniBand port's LID and the LID of the subnet
  manager that configured it. A change of ``sm_lid`` on many nodes at once is an SM failover;
  0 is a port no SM has configured.
- ``ibdiag_port_pkey_info`` (always 1; labels ``pkey``, ``index``, ``membership``: full or
  limited): each partition key the port's table holds, for joins and for counting the nodes
  in a partition.
- ``ibdiag_hca_char_devices`` (labels ``device``, ``kind``: uverbs, umad, issm): how many of
  the kernel's character devices serve the HCA; healthy is 1 uverbs and a umad per port.

A value that was not read is no sample (never a 0). Pure functions of the Report.
"""

from __future__ import annotations

from ibdiag.facts.char_devices import CharDevices
from ibdiag.facts.partitions import PKeyTable
from ibdiag.model import Report
from ibdiag.render.prometheus_family import Family, Labels

_CHAR_KINDS = (("verbs", "uverbs"), ("mad", "umad"), ("issm", "issm"))


def add_configuration(family: Family, report: Report) -> None:
    """Add the families above through ``family(name, kind, help)`` (``_Exposition.family``)."""
    lid = family("ibdiag_port_lid", "gauge", "The InfiniBand port's LID (0: not assigned).")
    sm_lid = family(
        "ibdiag_port_sm_lid",
        "gauge",
        "LID of the subnet manager that configured the port (0: none has).",
    )
    pkey = family(
        "ibdiag_port_pkey_info",
        "gauge",
        "Always 1: a partition key the port's table holds (labels pkey, index, membership).",
    )
    found = report.snapshot.facts.get("char_devices")
    counts = family(
        "ibdiag_hca_char_devices",
        "gauge",
        "Character devices (uverbs, umad, issm) the kernel made for the HCA.",
    )
    for dev in report.snapshot.devices:
        for port in dev.ports:
            if not port.is_infiniband:
                continue
            base: Labels = (
                ("device", dev.name),
                ("port", str(port.number)),
                ("ib_port", dev.target(port)),
            )
            if port.lid is not None:
                lid.add(base, port.lid)
            if port.sm_lid is not None:
                sm_lid.add(base, port.sm_lid)
            table = port.facts.get("pkeys")
            if isinstance(table, PKeyTable):
                for key in table.keys:
                    member = "full" if key.full_member else "limited"
                    labels = (("pkey", key.text), ("index", str(key.index)), ("membership", member))
                    pkey.add((*base, *labels), 1)
        if isinstance(found, CharDevices):
            for kind, name in _CHAR_KINDS:
                counts.add(
                    (("device", dev.name), ("kind", name)), len(found.serving(kind, dev.name))
                )
