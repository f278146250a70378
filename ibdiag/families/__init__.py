"""Command families: one module per family of commands (perfquery, ethtool, the far end...),
each saying, in one place, everything ibdiag knows about its commands.

A family module (``ibdiag/families/<name>.py``, or a package ``<name>/`` whose parser is a
module of its own; a name starting with ``_`` is not a family) declares::

    SOURCE = "perfquery"     # the name a check puts in ``needs`` to have it collected
    LEVEL = "standard"       # the lowest level it is collected at: standard (read-only
                             # commands) or full (tests that move traffic)
    ORDER = 30               # optional (50): families are interpreted in this order, and a
                             # later one sees the earlier ones' facts

    def plan(snap) -> List[Planned]            # what to run: argv + typed role (+ fallback)
    def interpret(snap, runs) -> Update         # parse its runs into its frozen facts
    def collect(snap, runner) -> Dict[str, CommandRun]   # optional: commands that depend on
                                                # earlier answers, run through the runner

A level-full family plans nothing up front; it declares instead (``run`` is required)::

    def run(snap, context) -> Snapshot          # run its tests; ``snap`` with their runs
    def bound_s(thresholds) -> float            # optional: its share of level full's bound

``plan`` gets the Snapshot as the files gave it (devices, ports, netdevs, GPUs) and returns
each command with its role (``ibdiag.roles.Role``); a name sysfs gave that may not go on a
command line is planned ``refused`` (recorded as never started, with why). The collector runs
every planned command concurrently under the one runner and deadline, each recorded with its
role; a command with a ``fallback`` tries it at once when it gave nothing usable.

Level full runs after the read-only commands, one family after the other in ``ORDER``
(``run_full``): ``run`` gets the Snapshot with the read-only runs recorded (the GPU topology, for
GPUDirect RDMA pairing) and the phase's ``TrafficContext`` (``ibdiag.families._traffic``: the
thresholds, one deadline and timeout cap, the shared output budget, the progress callback, the
sysfs reader), and returns the Snapshot with what it collected: its runs added to
``commands`` (each with its role), or the files it read (NCCL Inspector's dumps).

``interpret`` gets the Snapshot (with the earlier families' facts) and the recorded runs
(``Runs``: by role) and returns an ``Update``: the typed facts to set on the node, on ports
(by target, ``mlx5_0:1``) and on netdevs (by name). ``apply`` checks every field it names
exists and every value has the field's type, so a misspelt field or a wrong type is an error
named after the family, never a silently dropped fact. Each fact carries the ``RunOutcome`` of
the runs it came from (``ibdiag.facts.outcome``): why a run gave no data is judged once, here,
by ``outcome_of``; checks read facts and never see a run.

A family's facts are either a field of the Snapshot model (the families the Report's schema
has named fields for) or, for a new family, its entry in the ``facts`` map of the node, a
device or a port: ``Update(node={"facts": {...}})`` is written by ``set_fact``; a family
declaring ``FACTS = {"name": FactModel}`` has those entries read back typed from JSON.
Adding a command family is two files: its module here and its check (docs/architecture.md).

The same step runs live (``ibdiag.collect``) and on a replayed bundle, so a bundle re-graded
with today's code is parsed by today's parsers. A parser never raises on odd input; an
interpreter that breaks anyway (a bug) costs only its own facts: the reason is recorded in the
node's problems as ``interpret.<family>`` and the run goes on.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass, field
from functools import cache
from types import ModuleType
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Type

from pydantic import BaseModel

from ibdiag.facts.outcome import NoData, RunOutcome
from ibdiag.families._traffic import TrafficContext
from ibdiag.model import CommandRun, Device, NetDev, Port, Snapshot
from ibdiag.roles import Role
from ibdiag.thresholds import Thresholds

LEVELS = ("standard", "full")  # a family runs commands: never at level quick
DEFAULT_ORDER = 50


class FamilyError(Exception):
    """A family module that does not declare what a family must (named in the message)."""


class Planned(NamedTuple):
    """One command a family plans: what it is for, its argv, the command to try at once when it
    gives nothing usable (``fallback``), why it may not run at all (``refused``: recorded
    as never started with this reason, so the check says why its port has no data), and its
    own timeout (``timeout_s``: at most the run's ``--command-timeout``; None: that one)."""

    role: Role
    argv: List[str]
    fallback: Optional[Planned] = None
    refused: Optional[str] = None
    timeout_s: Optional[float] = None


@dataclass(frozen=True)
class Update:
    """The typed facts one family sets: Snapshot fields (``node``), Device fields by HCA name,
    Port fields by target (``mlx5_0:1``) and NetDev fields by netdev name. Only fields that
    hold facts may be set; ``facts`` (a new family's, by the name its Fact class declares) is
    merged into the model's map, every other field replaced."""

    node: Mapping[str, Any] = field(default_factory=dict)
    devices: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    ports: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    netdevs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


class Runs:
    """The recorded runs of a Snapshot, found by role."""

    def __init__(self, commands: Mapping[str, CommandRun]) -> None:
        self._by_role = {str(run.role): run for run in commands.values() if run.role is not None}

    def get(self, role: Role) -> Optional[CommandRun]:
        return self._by_role.get(str(role))

    def of(self, family: str) -> List[CommandRun]:
        """Every run of ``family``, in the order they were recorded."""
        return [run for run in self._by_role.values() if run.role and run.role.family == family]

    def __bool__(self) -> bool:
        return bool(self._by_role)


# -- the families ------------------------------------------------------------------------------


@cache
def families() -> Sequence[ModuleType]:
    """Every family module of this package, validated, in interpretation order."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        _validate(module)
        found.append(module)
    return tuple(sorted(found, key=lambda m: (getattr(m, "ORDER", DEFAULT_ORDER), m.__name__)))


def _validate(module: ModuleType) -> None:
    where = f"command family {module.__name__}"
    source = getattr(module, "SOURCE", None)
    if not isinstance(source, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", source):
        raise FamilyError(f"{where}: SOURCE must be a lowercase name, got {source!r}")
    if getattr(module, "LEVEL", None) not in LEVELS:
        raise FamilyError(f"{where}: LEVEL must be one of {', '.join(LEVELS)}")
    if not callable(getattr(module, "interpret", None)):
        raise FamilyError(f"{where}: no interpret(snap, runs) function")
    if module.LEVEL == "full" and not callable(getattr(module, "run", None)):
        raise FamilyError(f"{where}: LEVEL full but no run(snap, context) function")


def source_levels() -> Dict[str, str]:
    """Source name -> the lowest level it is collected at, for every family."""
    return {module.SOURCE: module.LEVEL for module in families()}


def sources_at(level: str) -> frozenset:
    """The sources of the families collected at ``level`` (standard or full)."""
    return frozenset(module.SOURCE for module in families() if module.LEVEL == level)


def by_source(needs: Sequence[str]) -> List[ModuleType]:
    """The families ``needs`` names, in interpretation order."""
    return [module for module in families() if module.SOURCE in needs]


def plan(snap: Snapshot, needs: Sequence[str], level: str = "standard") -> List[Planned]:
    """Every command the families ``needs`` names plan at ``level``, in a stable order."""
    planned: List[Planned] = []
    for module in by_source(needs):
        if module.LEVEL == level and callable(getattr(module, "plan", None)):
            planned.extend(module.plan(snap))
    return planned


def run_full(snap: Snapshot, needs: Sequence[str], context: TrafficContext) -> Snapshot:
    """Level full: every level-full family ``needs`` names runs its tests in ``ORDER`` (the
    loopback first, then nccl-tests, then NCCL Inspector's files), under one ``context``."""
    for module in full_level(needs):
        snap = module.run(snap, context)
    return snap


def full_level(needs: Sequence[str]) -> List[ModuleType]:
    """The level-full families ``needs`` names, in ``ORDER``."""
    return [m for m in by_source(needs) if m.LEVEL == "full" and callable(getattr(m, "run", None))]


def full_level_bound(thresholds: Thresholds, needs: Sequence[str]) -> float:
    """Level full's own bound when no --deadline is given: the sum of each level-full family's
    ``bound_s`` (at least one second)."""
    bounds = [getattr(module, "bound_s", None) for module in full_level(needs)]
    return max(sum(bound(thresholds) for bound in bounds if bound is not None), 1.0)


def collectors(needs: Sequence[str], level: str = "standard") -> List[Any]:
    """The ``collect(snap, runner) -> {key: CommandRun}`` of each family ``needs`` names at
    ``level`` that plans through one: commands that depend on earlier answers (the far end's
    chain), run by the family through the collection's runner while the planned ones run."""
    return [
        module.collect
        for module in by_source(needs)
        if module.LEVEL == level and callable(getattr(module, "collect", None))
    ]


def refused_run(item: Planned) -> CommandRun:
    """A planned command that may not run, recorded as never started with why."""
    return CommandRun(argv=item.argv, role=item.role, skipped=item.refused)


# -- interpreting ------------------------------------------------------------------------------


def interpret(snap: Snapshot) -> Snapshot:
    """``snap`` with the facts of every family set from its recorded runs. One family's bug
    costs only its own facts (``interpret.<family>`` in the node's problems)."""
    runs = Runs(snap.commands)
    problems: Dict[str, str] = {}
    for module in families():
        try:
            snap = apply(snap, module.interpret(snap, runs), module.SOURCE)
        except Exception as exc:  # noqa: BLE001 - one family's bug must not lose the run
            problems[f"interpret.{module.SOURCE}"] = f"{type(exc).__name__}: {exc}"
    if problems:
        snap = snap.model_copy(update={"problems": {**snap.problems, **problems}})
    return snap


def without_facts(snapshot: Snapshot) -> Snapshot:
    """``snapshot`` with every typed fact (on the Snapshot, its ports and their netdevs) unset,
    as the files alone give them (a fact read from files, ``Fact.FROM_FILES``, is kept); its
    runs are kept."""
    from ibdiag.facts import unset_facts
    from ibdiag.facts._base import from_files

    def cleared(port: Port) -> Port:
        update: Dict[str, Any] = {**unset_facts(Port), "facts": from_files(port.facts)}
        if port.netdev is not None:
            update["netdev"] = port.netdev.model_copy(update=unset_facts(NetDev))
        return port.model_copy(update=update)

    devices = [
        dev.model_copy(
            update={
                **unset_facts(Device),
                "facts": from_files(dev.facts),
                "ports": [cleared(port) for port in dev.ports],
            }
        )
        for dev in snapshot.devices
    ]
    unset = {**unset_facts(Snapshot), "facts": from_files(snapshot.facts)}
    return snapshot.model_copy(update={**unset, "devices": devices})


def apply(snap: Snapshot, update: Update, family: str = "?") -> Snapshot:
    """``snap`` with ``update``'s facts set, each validated against its field's type."""
    if not isinstance(update, Update):
        raise TypeError(f"family {family}: interpret returned {type(update).__name__}, not Update")
    node = _checked(Snapshot, update.node, family, snap.facts)
    if update.devices or update.ports or update.netdevs:
        node["devices"] = _with_devices(snap.devices, update, family)
    return snap.model_copy(update=node) if node else snap


def _checked(
    model: Type[BaseModel], fields: Mapping[str, Any], family: str, facts: Mapping[str, Any]
) -> Dict[str, Any]:
    """``fields`` validated against ``model``'s fact fields; ``facts`` (the model's map now)
    merged with the new entries."""
    checked = {}
    for name, value in fields.items():
        if name not in _fact_fields(model):
            raise FamilyError(
                f"family {family}: {model.__name__} has no fact field {name!r}"
                f" (fields: {', '.join(sorted(_fact_fields(model)))})"
            )
        if name == "facts":
            value = {**facts, **_named_facts(value, family)}
        checked[name] = _adapter(model, name).validate_python(value)
    return checked


def _named_facts(value: Any, family: str) -> Dict[str, Any]:
    from ibdiag.facts._base import named_fact

    if not isinstance(value, Mapping):
        raise FamilyError(f"family {family}: facts must be a mapping, got {type(value).__name__}")
    for name, fact in value.items():
        kind = named_fact(name)
        if kind is None or type(fact) is not kind:
            raise FamilyError(
                f"family {family}: facts[{name!r}] must be the Fact class named {name!r}"
                f" (class X(Fact, fact_name={name!r})), got {type(fact).__name__}"
            )
    return dict(value)


@cache
def _fact_fields(model: Type[BaseModel]) -> frozenset:
    from ibdiag.facts import fact_fields

    return frozenset(fact_fields(model))


@cache
def _adapter(model: Type[BaseModel], name: str) -> Any:
    from pydantic import ConfigDict, TypeAdapter

    # Facts the family built are instances already: checked for their type, not rebuilt.
    annotation: Any = model.model_fields[name].annotation
    return TypeAdapter(annotation, config=ConfigDict(revalidate_instances="never"))


def _with_devices(devices: List[Device], update: Update, family: str) -> List[Device]:
    """``devices`` with the device, port and netdev fields of ``update`` set (new models:
    models are frozen); a device nothing of which changed is the same object."""
    rebuilt = []
    for dev in devices:
        new_ports = []
        for port in dev.ports:
            fields = _checked(Port, update.ports.get(dev.target(port), {}), family, port.facts)
            netdev = port.netdev
            if netdev is not None and netdev.name in update.netdevs:
                netdev_fields = _checked(NetDev, update.netdevs[netdev.name], family, {})
                fields["netdev"] = netdev.model_copy(update=netdev_fields)
            new_ports.append(port.model_copy(update=fields) if fields else port)
        fields = _checked(Device, update.devices.get(dev.name, {}), family, dev.facts)
        if any(new is not old for new, old in zip(new_ports, dev.ports)):
            fields["ports"] = new_ports
        rebuilt.append(dev.model_copy(update=fields) if fields else dev)
    return rebuilt


# -- why a run gave no data --------------------------------------------------------------------

# What a tool prints when it cannot reach the device from here (this user's access, a module
# not loaded, another namespace): no finding about the node. A tool that reaches the device and
# whose query then fails, or that hangs or crashes, is one.
_NO_PERMISSION = re.compile(
    r"Permission denied|Operation not permitted|not permitted|insufficient permissions",
    re.IGNORECASE,
)
_NO_DEVICE = re.compile(
    r"can't open UMAD port|Failed to open '[^']*' port|is ib_umad module loaded"
    r"|can't read ABI version|No such device|No such file or directory|can't be found"
    r"|stat of IB device|No IB devices found|Failed to get IB devices list"
    r"|Function not implemented",
    re.IGNORECASE,
)


def outcome_of(run: CommandRun) -> RunOutcome:
    """What became of ``run``, judged once from the run as recorded: the one place outside a
    family's own parser that reads a tool's text (its complaint on a failure)."""
    no_data = _no_data(run)
    return RunOutcome.model_construct(
        role=run.role, command=" ".join(run.argv), no_data=no_data,
        reason=None if no_data is None else run.failure(), rc=run.rc,
        duration_s=run.duration_s, error=run.error,
    )  # fmt: skip


def _no_data(run: CommandRun) -> Optional[NoData]:
    if run.succeeded:
        return None
    if run.skipped:
        return NoData.NOT_STARTED
    if run.not_found:
        return NoData.NOT_INSTALLED
    if run.permission_denied:
        return NoData.NO_PERMISSION
    if run.timed_out:
        return NoData.TIMED_OUT
    if run.error:
        return NoData.CANNOT_EXECUTE
    if run.rc is not None and run.rc < 0:
        return NoData.KILLED
    text = f"{run.stderr}\n{run.stdout}"
    if _NO_PERMISSION.search(text):
        return NoData.NO_PERMISSION
    if _NO_DEVICE.search(text):
        return NoData.NO_DEVICE
    return NoData.FAILED  # a family may judge it further (ethtool: "not supported")
