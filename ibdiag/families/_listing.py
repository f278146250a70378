"""What the two inventory families share (``ibdiag.families.ibstat``, ``.ibv_devinfo``): reading
a tool's listing of HCAs - a header per HCA, a header per port, ``key: value`` lines under
each - and setting that tool's listing on ``Snapshot.inventory``.

Each tool's text is described by a ``Dialect``; ``read_blocks`` gives the HCAs with their
fields and their ports' fields as text, the lines it could not place (``problems``) and the
tool's own complaints (``errors``: ``ibpanic: ... can't get CA list``, ``No IB devices
found``), which each family then types into ``ListedCA`` facts. Nothing here raises.
"""

from __future__ import annotations

from typing import Callable, Dict, FrozenSet, List, NamedTuple, Optional, Pattern, Tuple, Union

from ibdiag.facts.inventory import Inventory, Listing
from ibdiag.families import Planned, Runs, Update, outcome_of
from ibdiag.families._text import output_lines, quote
from ibdiag.model import CommandRun, Snapshot
from ibdiag.roles import Role


class Dialect(NamedTuple):
    """How one tool lays out its listing."""

    device: Pattern[str]  # an HCA's header line; its group "name"
    port: Pattern[str]  # a port's header line under it; its group "port"
    key_value: Pattern[str]  # a "key: value" line; groups "key" and "value"
    error: Pattern[str]  # (searched) a line the tool prints instead of a listing
    device_keys: FrozenSet[str] = frozenset()  # keys of the HCA even under a port's header
    strict: bool = True  # a line under an HCA that is no "key: value" is a problem
    before: str = ""  # said of a line before any HCA's header: "(before any hca_id)"
    fold_case: bool = True  # keys in lower case ("Firmware version" -> "firmware version")


class Block:
    """One HCA as read: its name, its fields and each port's fields."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.fields: Dict[str, str] = {}
        self.ports: Dict[int, Dict[str, str]] = {}


def read_blocks(
    text: Union[str, bytes, None], dialect: Dialect
) -> Tuple[List[Block], List[str], List[str]]:
    """(the HCAs in the order listed, the lines that could not be placed, the tool's errors)."""
    problems: List[str] = []
    errors: List[str] = []
    blocks: List[Block] = []
    block: Optional[Block] = None
    port: Optional[Dict[str, str]] = None
    for number, line in output_lines(text, dialect.error, errors):
        match = dialect.device.match(line)
        if match:
            block = Block(match.group("name"))
            blocks.append(block)
            port = None
            continue
        if block is None:
            problems.append(f"unparseable line {number}{dialect.before}: {quote(line)}")
            continue
        match = dialect.port.match(line)
        if match:
            port_number = int(match.group("port"))
            if port_number in block.ports:
                problems.append(f"{block.name}: port {port_number} listed twice (line {number})")
            port = block.ports.setdefault(port_number, {})
            continue
        match = dialect.key_value.match(line)
        if match:
            key, value = match.group("key").strip(), match.group("value")
            key = key.lower() if dialect.fold_case else key
            under_port = port is not None and key not in dialect.device_keys
            (port if under_port and port is not None else block.fields).setdefault(key, value)
        elif dialect.strict:
            problems.append(f"unparseable line {number}: {quote(line)}")
    return blocks, problems, errors


def joined(errors: List[str]) -> Optional[str]:
    """The tool's first three complaints in one line; None when it made none."""
    return "; ".join(errors[:3]) or None


class ListingFamily(NamedTuple):
    """What an inventory family plans and interprets: ``tool`` run bare, once, for ``role``,
    its output read by ``parse`` into the tool's field of ``Snapshot.inventory``."""

    tool: str  # "ibstat": the argv, and the Inventory field its listing goes to
    role: Role
    parse: Callable[[str], Listing]

    def plan(self, snap: Snapshot) -> List[Planned]:
        return [Planned(self.role, [self.tool])]

    def interpret(self, snap: Snapshot, runs: Runs) -> Update:
        return update(snap, runs.get(self.role), self.tool, self.parse)


def update(
    snap: Snapshot, run: Optional[CommandRun], tool: str, parse: Callable[[str], Listing]
) -> Update:
    """``Snapshot.inventory`` with ``tool``'s listing (``ibstat`` or ``ibv_devinfo``) read from
    ``run``; the other tool's listing is kept. No run: no update. A run that failed is not
    parsed (its output is an error message, not a listing): ``unusable`` says why."""
    if run is None:
        return Update()
    outcome = outcome_of(run)
    if outcome.no_data is not None:
        listing = Listing(role=run.role, unusable=outcome.reason, outcome=outcome)
    else:
        listing = parse(run.stdout).model_copy(update={"role": run.role, "outcome": outcome})
    inventory = snap.inventory or Inventory()
    return Update(node={"inventory": inventory.model_copy(update={tool: listing})})
