"""``FleetReport``: what ``ibdiag fleet report`` answers about many nodes (JSON, with a schema:
``ibdiag schema fleet``), and ``FleetSettings``: the knobs it was computed with.

Host lists are written as Slurm writes them, compressed (``gpu[001-004,017]``,
``ibdiag.hostlist.compress``), so a group of 500 nodes is one line an admin can paste into
``scontrol``. Every list of nodes also has its count.
"""

from __future__ import annotations

from datetime import datetime
from typing import Dict, List, Optional

from pydantic import BaseModel, ConfigDict, Field

from ibdiag.exit_codes import ExitCode

FLEET_SCHEMA_VERSION = 1


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FleetSettings(_Frozen):
    """How the fleet is judged. The defaults, and why:

    - ``outlier_mad_factor`` 3.0: a node is an outlier only when it is more than 3 robust
      standard deviations (1.4826 x the median absolute deviation) from its rail's median - the
      usual robust cut, which a fleet of healthy nodes with normal jitter does not cross ...
    - ``outlier_margin`` 0.10: ... *and* more than 10% from the median: a difference an admin
      would act on (a 400 Gb/s rail at 360 is a cable or a PCIe problem; at 396 it is noise,
      however tight the fleet).
    - ``outlier_min_nodes`` 5: fewer peers than this on a rail say nothing about it.
    - ``rate_floor_per_hour`` 1.0: an error-counter rate is an outlier only above this many
      increases per hour (and above the rail's median by the two cuts above), so a fleet of
      zeros flags nobody and one stray error does not make a node stand out.
    - ``switch_min_nodes`` 3 and ``switch_min_share`` 0.5: a switch is the suspect when at
      least 3 nodes fail on ports of it, or when at least 2 do and their failing ports are at
      least half of the node ports cabled to it: three independent node faults on one leaf in
      one run are far less likely than one switch (or its power, firmware or uplink) fault; the
      nodes move from "drain" to "switch-suspect" so the ticket goes to the switch, not to 18
      nodes. The share counts ports (a node with two HCAs on the leaf is two of its ports).
    - ``cable_lot_min_ports`` 2: a cable part number and lot is listed when at least 2 of its
      cables show a physical-layer finding (``ibdiag.fleet.cables``): one bad cable is that
      node's finding; two of one lot are worth the vendor's look, with how many the fleet has.
    """

    outlier_mad_factor: float = Field(default=3.0, gt=0)
    outlier_margin: float = Field(default=0.10, ge=0, lt=1)
    outlier_min_nodes: int = Field(default=5, ge=3)
    rate_floor_per_hour: float = Field(default=1.0, ge=0)
    switch_min_nodes: int = Field(default=3, ge=1)
    switch_min_share: float = Field(default=0.5, gt=0, le=1)
    cable_lot_min_ports: int = Field(default=2, ge=1)


class NodeGroup(_Frozen):
    """Nodes that share one thing (a drain reason, a verdict): ``nodes`` compressed."""

    reason: str
    nodes: str
    count: int


class Outlier(_Frozen):
    """A node whose ``metric`` on ``rail`` stands out from the rail's peers although it may
    pass its own floor: ``value`` against ``median`` (over ``peers`` nodes), ``gap`` the
    relative difference ((value - median) / median; -0.2 = 20% below)."""

    host: str
    # ibdiag.fleet.node metric names: ib_write_bw_gbps, error_rate:symbol_error,
    # inspector_busbw_gbps:AllReduce:4-5GB:2n (collective, message size bucket, nodes spanned), ...
    metric: str
    rail: Optional[int] = None  # None: a node-wide metric
    value: float
    median: float
    mad: float
    gap: float
    peers: int
    direction: str  # "low" (bandwidth) or "high" (error rates)


class DriftValue(_Frozen):
    value: str  # "(unknown)" when the node did not say
    nodes: str
    count: int


class Drift(_Frozen):
    """An attribute whose value is not the same on every node: the majority, and the others."""

    # fw_ver, board_id, hca_type, ibdiag_version, level, kernel_release, driver:mlx5_core
    attribute: str
    rail: Optional[int] = None  # per-HCA attributes: the rail; None: node-wide
    majority: str
    majority_count: int
    others: List[DriftValue]


class SwitchPort(_Frozen):
    """One failing or outlying port of a switch: its port number, the node end, and what is
    wrong there: the checks that failed, or the outliers of the node's rail on that port."""

    peer_port: Optional[int] = None
    host: str
    target: str  # the node's port: mlx5_3:1
    checks: List[str] = []  # failing check ids (link.partner, counters.partner, link.state, ...)
    outliers: List[Outlier] = []  # an outlying port's metrics (its rail's, as in ``outliers``)


class SuspectSwitch(_Frozen):
    """A switch with failing or outlying node ports; the ``suspect`` ones get one ticket. Only
    failing ports make a suspect (``ibdiag.fleet.switches`` says why)."""

    peer_guid: Optional[str] = None
    peer_name: str
    failing_ports: List[SwitchPort]
    failing_nodes: str  # compressed
    failing_node_count: int
    attached_node_count: int  # nodes with at least one port cabled to it
    attached_port_count: int  # node ports cabled to it (switch_min_share's denominator)
    suspect: bool  # over the settings' k / share: its nodes are switch-suspect, not drained
    # Ports whose rail is an outlier (and does not fail): listed, never counted for ``suspect``.
    outlying_ports: List[SwitchPort] = []
    outlying_nodes: str = ""  # compressed
    outlying_node_count: int = 0
    # Ports whose link flapped or dropped within the window (link.flaps, link.drop: warn or
    # fail), failing or not: the cable's switch end is half of every such cable.
    flapping_port_count: int = 0
    flapping_nodes: str = ""  # compressed
    # Ports whose physical layer (phy.*: temperature, FEC, BER, optics) warned or failed:
    # many on one switch point at its side of the cables (its ports, optics or cooling).
    physical_port_count: int = 0
    physical_nodes: str = ""  # compressed


class CablePort(_Frozen):
    """One node port whose cable's physical layer is not healthy: the ``phy.*`` checks that
    warned or failed, and the cable's far end (``leaf07/21``) when it was read."""

    host: str
    target: str  # mlx5_3:1
    checks: List[str]
    far_end: Optional[str] = None


class CableLot(_Frozen):
    """Cables of one part number and lot with physical-layer findings on ``port_count`` node
    ports (of ``cable_count`` such cables the fleet read): a bad batch is the vendor's ticket."""

    vendor: Optional[str] = None
    part_number: str
    lot: Optional[str] = None  # None: the modules did not say
    ports: List[CablePort]
    nodes: str  # compressed
    node_count: int
    port_count: int
    cable_count: int
    checks: List[str]
    switches: List[str] = []  # far-end switches of those ports


class RailMisplacement(_Frozen):
    """HCA ``rail`` of ``host`` lands on a switch outside the group its rail's peers land on:
    a cable in the wrong port (NCCL's rail-aligned traffic then crosses the spine)."""

    host: str
    rail: int
    target: str
    peer_name: str
    expected: List[str]  # the switches rail ``rail`` of the other nodes lands on


class ReadProblem(_Frozen):
    """An input that gave no node: ``source`` and the one-line reason."""

    source: str
    reason: str


# Read problems listed in a FleetReport: beyond, only counted (a directory of 100,000 foreign
# files must not make a report of 100,000 lines).
READ_PROBLEMS_LISTED = 1000


class FleetReport(_Frozen):
    """The fleet's answer. ``verdict``/``exit_code`` as ``ibdiag check``'s, for the fleet:
    CRITICAL when a node is CRITICAL, an expected node is missing, or the fleet run summary
    that says which nodes are expected could not be read; WARNING when a node warns or is
    UNKNOWN, or expected nodes were not run, unexpected nodes answered, a node's reports
    conflict, or outliers, drift, misplaced rails or unreadable inputs were found; OK
    otherwise; UNKNOWN when no node could be read."""

    schema_version: int = FLEET_SCHEMA_VERSION
    tool_version: str
    generated_at: datetime
    settings: FleetSettings
    verdict: str
    verdict_reason: str
    nodes_read: int  # reports read: not the UNKNOWN nodes only an unreadable file names
    counts: Dict[str, int]  # OK WARNING CRITICAL UNKNOWN MISSING -> nodes
    drain: List[NodeGroup] = Field(default_factory=list)  # CRITICAL nodes by drain reason
    switch_suspect: List[NodeGroup] = Field(default_factory=list)  # theirs, on suspect switches
    warnings: List[NodeGroup] = Field(default_factory=list)  # WARNING nodes by reason
    unknown: List[NodeGroup] = Field(default_factory=list)  # UNKNOWN nodes by verdict reason
    missing: Optional[NodeGroup] = None  # expected (--expect-nodes) but no report
    # Expected nodes fleet run did not run, by its reason (``not run: Slurm state drained``):
    # out of service or busy, as Slurm said; not counted missing.
    not_run: List[NodeGroup] = Field(default_factory=list)
    # Nodes that answered although no expectation (--expect-nodes, fleet-run.json) names them:
    # a name mismatch, a report that is not the fleet's, or one saying an expected host from a
    # file not named for it (``identity.answers_for``; a read note says so). Kept out of switch
    # blame and rail conformance, where a few such reports could move a real node's ticket.
    unexpected: Optional[NodeGroup] = None
    # Nodes whose reports disagree and were not ranked by time (``ibdiag.fleet.identity``):
    # each kept at the worse verdict, one group each saying which reports.
    conflicts: List[NodeGroup] = Field(default_factory=list)
    outliers: List[Outlier] = Field(default_factory=list)
    drift: List[Drift] = Field(default_factory=list)
    switches: List[SuspectSwitch] = Field(default_factory=list)
    rail_misplacements: List[RailMisplacement] = Field(default_factory=list)
    # Cable part numbers and lots with physical-layer findings on several ports.
    cable_lots: List[CableLot] = Field(default_factory=list)
    # The first READ_PROBLEMS_LISTED inputs that gave no node; read_problem_count counts all.
    read_problems: List[ReadProblem] = Field(default_factory=list)
    read_problem_count: int = 0
    # Hosts with more than one report: the newest (collected_at) was used.
    duplicates: List[NodeGroup] = Field(default_factory=list)
    # Nodes read with a caveat, by caveat: a report schema newer than this ibdiag's (read
    # best-effort), a bundle whose files differ from its manifest (--accept-altered).
    read_notes: List[NodeGroup] = Field(default_factory=list)

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.__members__.get(self.verdict, ExitCode.UNKNOWN)
