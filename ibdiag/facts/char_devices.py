"""The character devices user space opens to use an HCA, as sysfs lists them.

``/dev/infiniband/uverbsN`` (class ``infiniband_verbs``, module ``ib_uverbs``) is what every
verbs program - NCCL, MPI, ib_write_bw - opens: one per HCA. ``/dev/infiniband/umadN`` (class
``infiniband_mad``, module ``ib_umad``) is what perfquery, ibstat's MAD queries and opensm
open: one per port. ``issmN`` (same class) only matters where a subnet manager runs on the
node. Each class entry names its HCA in ``ibdev`` (and its port in ``port``, for MAD devices).

A port whose devices are missing reads ACTIVE/LinkUp and still fails every job: the module
was not loaded, or the driver's registration failed half-way (NVSentinel checks this).

Healthy: one ``uverbs`` per HCA, one ``umad`` per InfiniBand port.
"""

from typing import ClassVar, Dict, List, Optional

from pydantic import Field

from ibdiag.facts._base import Fact

VERBS_CLASS = "class/infiniband_verbs"
MAD_CLASS = "class/infiniband_mad"
# The module that makes each class (``/sys/module/<name>`` when loaded or built in).
CLASS_MODULE = {VERBS_CLASS: "ib_uverbs", MAD_CLASS: "ib_umad"}


class CharDevice(Fact):
    """One class entry: ``uverbs0``, ``umad3`` or ``issm3``; the HCA it serves and, for MAD
    devices, the port. None where the attribute could not be read (why: in ``problems``)."""

    name: str
    ibdev: Optional[str] = None
    port: Optional[int] = None


class CharDevices(Fact, fact_name="char_devices"):
    """The node's verbs and MAD devices (``Snapshot.facts["char_devices"]``), read at level
    quick. ``verbs`` / ``mad`` / ``issm``: the entries, in name order; ``missing``: the classes
    whose directory is not there at all; ``modules``: whether the modules that make them are
    there; ``problems``: what could not be read, by entry (``"umad2/port: not a number"``)."""

    FROM_FILES: ClassVar[bool] = True  # read from sysfs: kept when runs are reinterpreted

    verbs: List[CharDevice] = Field(default_factory=list)
    mad: List[CharDevice] = Field(default_factory=list)
    issm: List[CharDevice] = Field(default_factory=list)
    missing: List[str] = Field(default_factory=list)
    # ib_uverbs / ib_umad -> whether sysfs has ``module/<name>`` (loaded, or built in); None:
    # the tree has no ``module`` directory at all (a partial capture) - nothing is known.
    modules: Optional[Dict[str, bool]] = None
    problems: List[str] = Field(default_factory=list)

    def serving(self, kind: str, ibdev: str, port: Optional[int] = None) -> List[CharDevice]:
        """The entries of ``kind`` (verbs, mad, issm) naming ``ibdev`` (and ``port``)."""
        entries = getattr(self, kind)
        return [e for e in entries if e.ibdev == ibdev and (port is None or e.port == port)]
