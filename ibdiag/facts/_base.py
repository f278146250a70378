"""The base of every typed fact: frozen, strict about keys, built on first use."""

import importlib
import inspect
import os
import pkgutil
from typing import Any, ClassVar, Dict, Optional, Type

from pydantic import BaseModel, ConfigDict, GetJsonSchemaHandler

# Facts kept in a ``facts`` map (of the Snapshot, a Device, a Port) by name: the families that
# have no named field in the model (``ibdiag.families``: a new family) declare theirs with
# ``class HelloFact(Fact, fact_name="hello")``.
_NAMED: Dict[str, Type["Fact"]] = {}


class Fact(BaseModel):
    """A value parsed from a command's output. Frozen: built once by its interpreter, never
    changed after (``model_copy(update=...)`` makes a changed one). Unknown keys are refused,
    so a corrupt bundle or state file fails loudly instead of losing a field."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    # True for a fact read from files (sysfs: the mlx5 hwmon sensors), not parsed from a run:
    # reinterpreting a Snapshot's runs (``ibdiag.migrate.reinterpret``) keeps it, as the files
    # it came from are not read again.
    FROM_FILES: ClassVar[bool] = False

    def __init_subclass__(cls, fact_name: Optional[str] = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if fact_name is not None:
            if fact_name in _NAMED and _NAMED[fact_name] is not cls:
                raise TypeError(f"two facts named {fact_name!r}: {_NAMED[fact_name]} and {cls}")
            _NAMED[fact_name] = cls


def named_fact(name: str) -> Optional[Type[Fact]]:
    """The Fact class of ``facts[name]``; the families and the facts' modules are imported
    (plugin discovery, by name: the model does not depend on them) when it is not known yet.
    None: no family has it."""
    if name not in _NAMED:
        _import_facts()
    return _NAMED.get(name)


def from_files(facts: Dict[str, Any]) -> Dict[str, Any]:
    """The entries of a ``facts`` map (typed, or as JSON) that were read from files
    (``Fact.FROM_FILES``): what survives when the facts parsed from runs are dropped."""
    kept = {}
    for name, value in facts.items():
        kind = type(value) if isinstance(value, Fact) else named_fact(name)
        if kind is not None and kind.FROM_FILES:
            kept[name] = value
    return kept


def builtin_facts() -> Dict[str, Type[Fact]]:
    """Every named fact ibdiag itself defines (a module inside this package's directory), by
    name: what the published schema lists. A site's family (a drop-in module) is left out."""
    _import_facts()
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return {
        name: kind
        for name, kind in sorted(_NAMED.items())
        if os.path.abspath(inspect.getfile(kind)).startswith(package + os.sep)
    }


def _import_facts() -> None:
    """Import the families and every module of ``ibdiag.facts`` (a fact a file reader sets,
    such as the mlx5 hwmon sensors, belongs to no family)."""
    importlib.import_module("ibdiag.families").families()
    facts = importlib.import_module("ibdiag.facts")
    for info in pkgutil.iter_modules(facts.__path__):
        importlib.import_module(f"ibdiag.facts.{info.name}")


class FactsMapSchema:
    """The JSON Schema of a ``facts`` map: each built-in fact under its name, and any other
    entry (a site family's) an object. The validation side is ``typed_facts``."""

    def __get_pydantic_json_schema__(
        self, core_schema: Any, handler: GetJsonSchemaHandler
    ) -> Dict[str, Any]:
        properties = {}
        for name, kind in builtin_facts().items():
            kind.model_rebuild()
            properties[name] = handler(kind.__pydantic_core_schema__)
        return {
            "type": "object",
            "properties": properties,
            "additionalProperties": {"type": "object"},
        }


def built_facts(value: Any, handler: Any) -> Any:
    """Serialise a ``facts`` map (the serialising side of ``typed_facts``) once each entry's
    class is built. A reader of files makes its facts with ``model_construct`` (no schema built
    on the prolog's path), and a class that was never validated has no serializer of its own
    yet: pydantic before 2.14 then fails on it (``'MockValSer' object is not an instance of
    'SchemaSerializer'``). Building it here costs only the runs that write JSON."""
    if isinstance(value, dict):
        for item in value.values():
            kind = type(item)
            if isinstance(item, Fact) and not kind.__pydantic_complete__:
                kind.model_rebuild()
    return handler(value)


def typed_facts(value: Any) -> Any:
    """A ``facts`` map read from JSON: each entry validated as its family's Fact."""
    if not isinstance(value, dict):
        return value  # pydantic says what is wrong with it
    typed = {}
    for name, item in value.items():
        if isinstance(item, Fact):
            typed[name] = item
            continue
        kind = named_fact(name) if isinstance(name, str) else None
        if kind is None:
            raise ValueError(f"no command family has a fact named {name!r}")
        typed[name] = kind.model_validate(item)
    return typed
