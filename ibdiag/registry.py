"""Checks: the ``@check`` decorator, discovery of the three kinds of check, and validation.

The decorator only records a frozen ``CheckSpec`` on the function (pluggy style): importing a
module of checks registers nothing. ``load_registry`` then finds, loads and validates checks as
separate steps (flake8's plugin finder does the same), from three places into one registry:

- built-ins: the repository's ``checks/`` folder (shipped inside the wheel);
- third-party packages: the entry-point group ``ibdiag.checks`` (a module or a function);
- a site drop-in directory: ``checks.d/*.py`` in the site config directory (``/etc/ibdiag``,
  or ``$IBDIAG_CONFIG_DIR``) or ``--checks-dir``.

Every validation error names the offender: the file or entry point and the check id. That
includes the signature: a check is called ``fn(snapshot, thresholds)``, with the baseline as a
third argument when it takes a third positional parameter, and one that cannot be called so is
refused when the registry loads rather than turning into an error on every run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.util
import inspect
import os
import re
import sys
import zlib
from types import ModuleType
from typing import (
    Any,
    Callable,
    Dict,
    FrozenSet,
    Iterable,
    Iterator,
    List,
    Optional,
    Sequence,
    Tuple,
)

from ibdiag import resources
from ibdiag.errors import IbdiagError
from ibdiag.read_files import regular_file_problem
from ibdiag.sources import SOURCE_LEVELS

LEVELS = ("quick", "standard", "full")
ENTRY_POINT_GROUP = "ibdiag.checks"
DROPIN_DIR_NAME = "checks.d"  # in the site config directory: see default_dropin_dir()
CHECK_ID = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")
_SPEC_ATTRIBUTE = "__ibdiag_check__"


class RegistryError(IbdiagError):
    """A check could not be loaded or is invalid; the message names the offender."""


@dataclasses.dataclass(frozen=True)
class CheckSpec:
    """What ``@check`` records: identity, what the check needs and at which level it runs."""

    id: str
    title: str
    needs: FrozenSet[str]
    level: str
    func: Callable
    origin: str = "<unregistered>"  # file or entry point it was loaded from

    @functools.cached_property  # asked on every run of the check (a scrape, say): read once
    def takes_baseline(self) -> bool:
        """A check written ``(snapshot, thresholds, baseline)`` is also given the baseline.

        The third positional parameter is the baseline, whatever its name. A wrapper that
        passes everything on (``*args``) takes one when the function it wraps does.
        """
        own = _signature(self.func, follow_wrapped=False)
        if own is None:
            return False
        if _positional_count(own) >= 3:
            return True
        if any(param.kind is param.VAR_POSITIONAL for param in own.parameters.values()):
            wrapped = _signature(self.func, follow_wrapped=True)
            return wrapped is not None and _positional_count(wrapped) >= 3
        return False

    @property
    def doc(self) -> str:
        """The check's docstring: what healthy looks like, why it matters, what to do."""
        return inspect.cleandoc(self.func.__doc__ or "")

    def runs_at(self, level: str) -> bool:
        return LEVELS.index(self.level) <= LEVELS.index(level)

    def can_use(self, need: str) -> bool:
        """Whether source ``need`` is collected at this check's level (quick runs no command)."""
        return LEVELS.index(SOURCE_LEVELS[need]) <= LEVELS.index(self.level)


def check(
    id: str,
    *,
    title: str,
    needs: Iterable[str] = ("sysfs",),
    level: str = "quick",
) -> Callable[[Callable], Callable]:
    """Mark a function ``(snapshot, thresholds) -> Iterable[Result]`` as a check.

    A check that grades change declares a third parameter, ``(snapshot, thresholds,
    baseline)``: the baseline Snapshot, or None when there is none. Records a frozen spec on
    the function and returns it unchanged; nothing is registered.
    """

    def mark(func: Callable) -> Callable:
        spec = CheckSpec(id=id, title=title, needs=frozenset(needs), level=level, func=func)
        setattr(func, _SPEC_ATTRIBUTE, spec)
        return func

    return mark


def spec_of(obj: object) -> Optional[CheckSpec]:
    spec = getattr(obj, _SPEC_ATTRIBUTE, None)
    return spec if isinstance(spec, CheckSpec) else None


class Registry:
    """Validated checks by id, in the order they were added."""

    def __init__(self) -> None:
        self._specs: Dict[str, CheckSpec] = {}

    def add(self, spec: CheckSpec) -> None:
        validate(spec)
        previous = self._specs.get(spec.id)
        if previous is not None:
            raise RegistryError(
                f"duplicate check id {spec.id!r}: defined in {previous.origin} and {spec.origin}"
            )
        self._specs[spec.id] = spec

    def get(self, check_id: str) -> Optional[CheckSpec]:
        return self._specs.get(check_id)

    def __iter__(self) -> Iterator[CheckSpec]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def for_level(self, level: str) -> List[CheckSpec]:
        return [spec for spec in self if spec.runs_at(level)]


def validate(spec: CheckSpec) -> None:
    """Raise RegistryError naming the check and where it came from when the spec is invalid."""
    where = f"check {spec.id!r} in {spec.origin}"
    if not isinstance(spec.id, str) or not CHECK_ID.match(spec.id):
        raise RegistryError(f"{where}: bad id; ids are lowercase dotted names like 'link.state'")
    if spec.level not in LEVELS:
        choices = ", ".join(LEVELS)
        raise RegistryError(f"{where}: unknown level {spec.level!r}; use one of {choices}")
    unknown = sorted(need for need in spec.needs if need not in SOURCE_LEVELS)
    if unknown:
        raise RegistryError(
            f"{where}: unknown need {', '.join(unknown)}; known: {', '.join(sorted(SOURCE_LEVELS))}"
        )
    too_slow = sorted(need for need in spec.needs if not spec.can_use(need))
    if too_slow:
        raise RegistryError(
            f"{where}: level {spec.level} cannot use {', '.join(too_slow)} "
            f"(collected from level {SOURCE_LEVELS[too_slow[0]]})"
        )
    if not spec.title.strip():
        raise RegistryError(f"{where}: empty title")
    if not spec.doc:
        raise RegistryError(f"{where}: no docstring; say what healthy looks like and what to do")
    _validate_signature(spec, where)


def _signature(func: Callable, follow_wrapped: bool) -> Optional[inspect.Signature]:
    try:
        return inspect.signature(func, follow_wrapped=follow_wrapped)
    except (TypeError, ValueError):  # not callable, or a builtin without a signature
        return None


def _positional_count(signature: inspect.Signature) -> int:
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(param.kind in positional for param in signature.parameters.values())


def _shown(signature: inspect.Signature) -> str:
    """``(snap, th, baseline=None)``: the parameters as written, without annotations."""
    bare = [param.replace(annotation=param.empty) for param in signature.parameters.values()]
    return str(signature.replace(parameters=bare, return_annotation=signature.empty))


def _validate_signature(spec: CheckSpec, where: str) -> None:
    """Refuse a check that the call ``grade.run_check`` makes cannot work with.

    What is called is the function itself: for a ``functools.wraps`` wrapper that is the
    wrapper, so its own parameters are checked, not those ``inspect.signature`` would report
    by following ``__wrapped__``.
    """
    func = spec.func
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
    if inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func):
        raise RegistryError(
            f"{where}: function {name} is async, but checks are called synchronously "
            "and must return or yield Results"
        )
    own = _signature(func, follow_wrapped=False)
    if own is None:
        raise RegistryError(f"{where}: {name} is not a function whose parameters can be read")
    arguments = ("snapshot", "thresholds", "baseline")[: 3 if spec.takes_baseline else 2]
    try:
        own.bind(*arguments)
    except TypeError:
        wrapped = _signature(func, follow_wrapped=True)
        note = ""
        if wrapped is not None and _shown(wrapped) != _shown(own):
            note = (
                f"; {name} is a wrapper (functools.wraps) and the wrapper is what is called, "
                f"not the function it wraps, which takes {_shown(wrapped)}"
            )
        raise RegistryError(
            f"{where}: function {name} takes {_shown(own)} "
            f"but checks are called as fn({', '.join(arguments)}){note}"
        ) from None


# --- find -----------------------------------------------------------------------------------


def default_dropin_dir() -> str:
    """``checks.d`` in the site config directory (``/etc/ibdiag`` or ``$IBDIAG_CONFIG_DIR``)."""
    from ibdiag.config import site_config_dir  # the one place that reads the variable

    return os.path.join(site_config_dir(), DROPIN_DIR_NAME)


def find_module_files(directory: str) -> List[str]:
    """The ``*.py`` files of a checks directory, skipping ``_private.py`` helpers."""
    names = sorted(os.listdir(directory))
    return [
        os.path.join(directory, name)
        for name in names
        if name.endswith(".py") and not name.startswith("_")
    ]


def _declared_anywhere(group: str) -> bool:
    """Whether any installed distribution lists ``[group]`` in its entry_points.txt.

    A cheap pre-scan: importlib.metadata parses every distribution's metadata (tens of ms on a
    full site-packages), which a prolog should not pay on the many nodes that have no plugin.
    """
    marker = f"[{group}]"
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(entry, name, "entry_points.txt"), encoding="utf-8") as fh:
                    if marker in fh.read():
                        return True
            except (OSError, UnicodeDecodeError):
                continue
    return False


def find_entry_points() -> list:
    if not _declared_anywhere(ENTRY_POINT_GROUP):
        return []
    from importlib.metadata import entry_points  # imported here: scanning metadata is slow

    found = entry_points()
    if hasattr(found, "select"):  # Python 3.10+ (which also drops shadowed duplicates)
        return list(found.select(group=ENTRY_POINT_GROUP))
    # Python 3.9 lists a distribution once per sys.path entry it is visible on: keep the first.
    unique: Dict[Tuple[str, str], Any] = {}
    for entry_point in found.get(ENTRY_POINT_GROUP, []):
        unique.setdefault((entry_point.name, entry_point.value), entry_point)
    return list(unique.values())


# --- load -----------------------------------------------------------------------------------


def load_module_file(path: str, namespace: str) -> ModuleType:
    """Import one checks file under a private module name; any failure names the file.

    Its directory is on sys.path while it loads, so it can import ``_helpers.py`` beside it.
    Only a regular file (or a symlink to one) is imported: a FIFO, a device, a socket or a
    directory named ``*.py`` is refused first, naming it, without reading it.
    """
    problem = regular_file_problem(path)  # a FIFO would block the import for ever
    if problem is not None:
        raise RegistryError(f"{path}: cannot load: {problem}")
    digest = f"{zlib.crc32(os.path.abspath(path).encode()):08x}"  # unique per file, cheap
    stem = os.path.splitext(os.path.basename(path))[0]
    module_name = f"ibdiag._loaded.{namespace}.{stem}_{digest}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:
        raise RegistryError(f"{path}: not a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    directory = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, directory)
    try:
        with contextlib.redirect_stdout(sys.stderr):  # a print at import never joins --json
            module_spec.loader.exec_module(module)
    except KeyboardInterrupt:
        raise
    # A plugin file can fail in any way at all - sys.exit(42) and GeneratorExit included -
    # and never decides ibdiag's exit code: the error names it, exit 3, and nothing crashes.
    except BaseException as exc:
        sys.modules.pop(module_name, None)
        raise RegistryError(f"{path}: cannot load: {failure_of(exc)}") from exc
    finally:
        sys.path.remove(directory)
    return module


def failure_of(exc: BaseException) -> str:
    """One line for a plug-in's failure: ``called sys.exit(42)`` for SystemExit, else the
    exception's type and message."""
    if isinstance(exc, SystemExit):
        return f"called sys.exit({exc.code!r})"
    return f"{type(exc).__name__}: {exc}"


def specs_in(obj: object, origin: str) -> List[CheckSpec]:
    """Every decorated check in a module (or the object itself when it is a check)."""
    spec = spec_of(obj)
    if spec is not None:
        return [dataclasses.replace(spec, origin=origin)]
    members = vars(obj).values() if isinstance(obj, ModuleType) else ()
    found: Dict[int, CheckSpec] = {}  # by function: a check bound to two names counts once
    for spec in filter(None, (spec_of(member) for member in members)):
        found.setdefault(id(spec.func), dataclasses.replace(spec, origin=origin))
    return list(found.values())


def load_registry(
    checks_dirs: Sequence[str] = (), entry_points: bool = True, builtins: bool = True
) -> Registry:
    """Built-ins, then entry points, then drop-in directories, validated into one registry."""
    registry = Registry()
    if builtins:
        for path in find_module_files(resources.builtin_checks_dir()):
            for spec in specs_in(load_module_file(path, "builtin"), path):
                registry.add(spec)
    if entry_points:
        for entry_point in find_entry_points():
            origin = f"entry point {entry_point.name!r} ({entry_point.value})"
            try:
                with contextlib.redirect_stdout(sys.stderr):
                    obj = entry_point.load()
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # as for a drop-in file: named, exit 3
                raise RegistryError(f"{origin}: cannot load: {failure_of(exc)}") from exc
            for spec in specs_in(obj, origin):
                registry.add(spec)
    for directory in checks_dirs:
        try:
            paths = find_module_files(directory)
        except OSError as exc:
            raise RegistryError(f"checks directory {directory}: {exc.strerror}") from exc
        for path in paths:
            for spec in specs_in(load_module_file(path, "dropin"), path):
                registry.add(spec)
    return registry
