"""The counter catalogue: every InfiniBand port counter and mlx5 hw_counter ibdiag knows.

One table the whole product uses - check messages, ``ibdiag explain``, the HTML tooltips and the
Prometheus HELP text. Each entry says what the counter means, its category, its width where the
IB specification fixes one (a counter stuck at 2**width - 1 is saturated and cannot count any
more), its unit, and its default grading rule with the reason for it.

Categories: ``error`` (should not move on a healthy port), ``congestion`` (moves under load;
reported), ``traffic`` (informative), ``config`` (a setting, not an event). A counter missing
from the table is still read and shown, as category ``unknown``, and never graded.

The table is data, not code: ``catalogue.toml`` beside this module (its header documents the
keys). It is read on first use and once per process - the quick check of every Slurm prolog
reads it, so it is parsed with the tomllib that config already imports and checked by hand
rather than by a pydantic model - and validated as it is read: an unknown key, a missing or
mistyped field, a value outside its choices, or a name defined twice raises CatalogueError
naming the entry. The shipped file is tested (tests/counters/test_catalogue.py), so a user
meets that error only with a damaged install.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import sys
from types import MappingProxyType
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Pattern, Tuple

from ibdiag.thresholds import CounterRule, Thresholds

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.9/3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]  # mypy targets 3.10


class CounterInfo(NamedTuple):  # immutable; made a tenth as fast as a frozen dataclass
    name: str
    directory: str  # counters, counters_ext, hw_counters, perfquery or ethtool (DIRECTORIES)
    category: str  # error, congestion, traffic, config, unknown
    meaning: str
    width: Optional[int] = None  # bits, where the IB spec fixes it
    unit: str = "events"  # events, packets, bytes, words (4 bytes: bytes = value x 4), ms
    on_increase: str = "info"  # default: what any increase since the baseline means
    rate_warn_per_hour: Optional[float] = None
    rate_fail_per_hour: Optional[float] = None
    reason: str = ""  # why the default rule is what it is
    action: str = ""  # what to do when it moves
    aliases: Tuple[str, ...] = ()  # the same counter as perfquery names it

    @property
    def saturated_value(self) -> Optional[int]:
        return 2**self.width - 1 if self.width else None

    def default_rule(self) -> CounterRule:
        return CounterRule.model_construct(
            on_increase=self.on_increase,  # type: ignore[arg-type]
            rate_warn_per_hour=self.rate_warn_per_hour,
            rate_fail_per_hour=self.rate_fail_per_hour,
            lifetime_limit=None,
        )


CATALOGUE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "catalogue.toml")
CATALOGUE_JSON = os.path.join(os.path.dirname(CATALOGUE_FILE), "catalogue.json")

DIRECTORIES = ("counters", "counters_ext", "hw_counters", "perfquery", "ethtool")
CATEGORIES = ("error", "congestion", "traffic", "config")
UNITS = ("events", "packets", "bytes", "words", "ms")
ON_INCREASE = ("info", "warn", "fail")
_ACTIONS_TABLE = "actions"

# Every key an entry may have, with the types its value may take; only the first two are required.
_FIELDS: Dict[str, Tuple[type, ...]] = {
    "category": (str,),
    "meaning": (str,),
    "width": (int,),
    "unit": (str,),
    "on_increase": (str,),
    "rate_warn_per_hour": (int, float),
    "rate_fail_per_hour": (int, float),
    "reason": (str,),
    "action": (str,),
    "aliases": (list,),
    "pattern": (str,),
}
_REQUIRED = ("category", "meaning")
_CHOICES = {"category": CATEGORIES, "unit": UNITS, "on_increase": ON_INCREASE}
_MAX_WIDTH = 64


class CatalogueError(Exception):
    """The catalogue file is malformed (a broken install or a bad edit); the message names the
    file and the entry."""


class Catalogue:
    """The catalogue as read: counters by name (in the file's order), the same by perfquery
    alias, and the numbered families (entries with a ``pattern``).

    A family's pattern is compiled when a name first misses the table (``family``), not on
    load: a prolog on a node whose every counter is catalogued never pays the quarter of a
    millisecond, as before the table was data. A pattern that does not compile raises
    CatalogueError naming its entry then (the shipped file's are tested). A plain class rather
    than a NamedTuple for the same reason: defining one costs as much.
    """

    __slots__ = ("_compiled", "_families", "by_alias", "counters")

    def __init__(
        self,
        counters: Mapping[str, CounterInfo],
        by_alias: Mapping[str, CounterInfo],
        families: Tuple[Tuple[str, str, CounterInfo], ...],  # (entry, pattern, info)
    ) -> None:
        self.counters = counters
        self.by_alias = by_alias
        self._families = families
        self._compiled: Optional[Tuple[Tuple[Pattern[str], CounterInfo], ...]] = None

    @property
    def families(self) -> Tuple[Tuple[Pattern[str], CounterInfo], ...]:
        """(compiled pattern, entry) of every numbered family, in the file's order."""
        if self._compiled is None:
            compiled = []
            for entry, pattern, info in self._families:
                try:
                    compiled.append((re.compile(pattern), info))
                except re.error as exc:
                    raise CatalogueError(f"{entry}: pattern {pattern!r}: {exc}") from None
            self._compiled = tuple(compiled)
        return self._compiled

    def family(self, name: str) -> Optional[CounterInfo]:
        """The numbered family whose pattern matches all of ``name``, if any."""
        for pattern, info in self.families:
            if pattern.fullmatch(name):
                return info
        return None


def parse_catalogue(text: str, source: str = "catalogue.toml") -> Catalogue:
    """The catalogue in ``text`` (``source`` names it in errors), validated: CatalogueError for
    invalid TOML, an unknown directory, key, category, unit, rule or action, a missing or
    mistyped field, and a name or alias defined twice (a family's pattern: when first used)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogueError(f"{source}: not valid TOML: {exc}") from None
    return catalogue_of(data, source)


def catalogue_of(data: Dict[str, Any], source: str) -> Catalogue:
    """The catalogue a parsed ``catalogue.toml`` holds (its tables as dicts), validated as
    ``parse_catalogue`` says."""
    data = dict(data)
    actions = data.pop(_ACTIONS_TABLE, {})
    if not isinstance(actions, dict) or not all(isinstance(v, str) for v in actions.values()):
        raise CatalogueError(f"{source}: [{_ACTIONS_TABLE}]: every action must be a string")
    counters: Dict[str, CounterInfo] = {}
    by_alias: Dict[str, CounterInfo] = {}
    families: List[Tuple[str, str, CounterInfo]] = []
    where: Dict[str, str] = {}  # every name and alias -> the entry that defines it
    for directory, entries in data.items():
        if directory not in DIRECTORIES or not isinstance(entries, dict):
            raise CatalogueError(
                f"{source}: [{directory}]: not a counter directory (one of "
                f"{', '.join(DIRECTORIES)}, or [{_ACTIONS_TABLE}])"
            )
        for name, fields in entries.items():
            entry = f"{source}: [{directory}.{name}]"
            info = _entry(entry, name, directory, fields, actions)
            pattern = fields.get("pattern")
            for key in (name, *info.aliases):
                if key in where:
                    raise CatalogueError(f"{entry}: {key!r} is already defined by {where[key]}")
                where[key] = f"[{directory}.{name}]"
            if pattern is not None:
                families.append((entry, pattern, info))
                continue
            counters[name] = info
            by_alias.update(dict.fromkeys(info.aliases, info))
    return Catalogue(MappingProxyType(counters), MappingProxyType(by_alias), tuple(families))


def _entry(
    entry: str, name: str, directory: str, fields: object, actions: Dict[str, str]
) -> CounterInfo:
    """One entry's fields as a CounterInfo, or CatalogueError naming ``entry``."""
    if not isinstance(fields, dict):
        raise CatalogueError(f"{entry}: a table of fields is expected, got {fields!r}")
    for key, value in fields.items():
        types = _FIELDS.get(key)
        if types is None:
            raise CatalogueError(f"{entry}: unknown key {key!r} (known: {', '.join(_FIELDS)})")
        if isinstance(value, bool) or not isinstance(value, types):
            expected = " or ".join(t.__name__ for t in types)
            raise CatalogueError(f"{entry}: {key} must be {expected}, got {value!r}")
        choices = _CHOICES.get(key)
        if choices is not None and value not in choices:
            raise CatalogueError(f"{entry}: {key} {value!r} is not one of {', '.join(choices)}")
    missing = [key for key in _REQUIRED if key not in fields]
    if missing:
        raise CatalogueError(f"{entry}: missing {', '.join(missing)}")
    width = fields.get("width")
    if width is not None and not 0 < width <= _MAX_WIDTH:
        raise CatalogueError(f"{entry}: width must be 1 to {_MAX_WIDTH} bits, got {width}")
    for key in ("rate_warn_per_hour", "rate_fail_per_hour"):
        rate = fields.get(key)
        if rate is not None and not 0 <= rate < math.inf:
            raise CatalogueError(f"{entry}: {key} must be a number of at least 0, got {rate}")
    aliases = fields.get("aliases", [])
    if not all(isinstance(alias, str) for alias in aliases):
        raise CatalogueError(f"{entry}: aliases must be strings, got {aliases!r}")
    action = fields.get("action", "")
    if action and action not in actions:
        raise CatalogueError(
            f"{entry}: action {action!r} is not in [{_ACTIONS_TABLE}] ({', '.join(actions)})"
        )
    return CounterInfo(
        name,
        directory,
        fields["category"],
        fields["meaning"],
        width,
        fields.get("unit", "events"),
        fields.get("on_increase", "info"),
        fields.get("rate_warn_per_hour"),
        fields.get("rate_fail_per_hour"),
        fields.get("reason", ""),
        actions[action] if action else "",
        tuple(aliases),
    )


@functools.cache
def _loaded() -> Catalogue:
    """The shipped catalogue, read and validated on first use (``ibdiag --version`` and the
    like never read it) and once per process.

    Read from ``catalogue.json``, the same tables as JSON (``write_json``; a test keeps the two
    equal): the quick check reads the catalogue on every Slurm prolog, and the standard
    library's JSON parser reads it in a tenth of a millisecond where tomllib takes three."""
    with open(CATALOGUE_JSON, encoding="utf-8") as handle:
        try:
            data = json.load(handle)
        except ValueError as exc:
            raise CatalogueError(f"{CATALOGUE_JSON}: not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CatalogueError(f"{CATALOGUE_JSON}: not a table of counter directories")
    return catalogue_of(data, CATALOGUE_FILE)


def write_json(toml_path: str = CATALOGUE_FILE, json_path: Optional[str] = None) -> str:
    """Write ``catalogue.json`` from ``catalogue.toml`` (after validating it): run
    ``python -m ibdiag.counters.catalogue`` after editing the TOML. Returns the path written."""
    with open(toml_path, encoding="utf-8") as handle:
        text = handle.read()
    parse_catalogue(text, toml_path)  # refuse to write what would not load
    path = json_path or CATALOGUE_JSON
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(tomllib.loads(text), handle, indent=1, sort_keys=False)
        handle.write("\n")
    return path


def catalogue() -> Mapping[str, CounterInfo]:
    """Every catalogued counter by name, in the file's order (families excluded)."""
    return _loaded().counters


@functools.lru_cache(maxsize=4096)  # entries are frozen; renderers ask per sample, per scrape
def lookup(name: str, directory: str = "counters") -> CounterInfo:
    """The catalogue entry (by name, perfquery alias or numbered family), or an ``unknown``
    entry: the counter is shown, never graded."""
    tables = _loaded()
    info = tables.counters.get(name) or tables.by_alias.get(name)
    if info is not None:
        return info
    family = tables.family(name)
    if family is not None:
        return family
    return CounterInfo(name, directory, "unknown", "Not in ibdiag's catalogue; shown as read.")


def catalogue_name(name: str) -> str:
    """The catalogue's name for a counter perfquery names otherwise (``SymbolErrorCounter`` ->
    ``symbol_error``); any other name as it is. The far end's counters (``checks/partner.py``,
    the Prometheus renderer) are named this way, so they read as our own port's."""
    info = lookup(name)
    return info.name if name in info.aliases else name


def rule_for(name: str, thresholds: Thresholds) -> CounterRule:
    """The catalogue's default rule for ``name`` with the thresholds' overrides on top.

    An override of ``symbol_error`` also applies to perfquery's ``SymbolErrorCounter``.
    """
    info, default = _default_rule(name)
    override = thresholds.counters.get(info.name) or thresholds.counters.get(name)
    if override is None:
        return default
    fields = {key: getattr(override, key) for key in override.model_fields_set}
    return default.model_copy(update=fields)


@functools.lru_cache(maxsize=4096)
def _default_rule(name: str) -> Tuple[CounterInfo, CounterRule]:
    """``lookup(name)`` and its default rule, made once (CounterRule is frozen: shared safely)."""
    info = lookup(name)
    return info, info.default_rule()


if __name__ == "__main__":
    print(f"wrote {write_json()}")
