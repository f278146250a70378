"""Profiles, the site config and command-line flags -> one validated Thresholds, with provenance.

Layers, later wins:

1. a **profile**: a shipped one by name (``ibdiag/profiles/<name>.toml``) or any TOML file by
   path. A value with a ``/`` in it or ending in ``.toml`` is a path; anything else is a name.
   Chosen by ``--profile``, else by the site config's top-level ``profile = "..."`` key (a
   relative path there is relative to the config file's directory), else ``generic``.
2. the **site config**: ``--config FILE``, else ``ibdiag.toml`` in the site config directory
   when it exists: ``/etc/ibdiag``, or ``$IBDIAG_CONFIG_DIR`` when that is set (the drop-in
   checks' default ``checks.d`` lives there too; see :func:`site_config_dir`).
3. **command-line flags**: the ``cli`` mapping; a key whose value is None or an empty
   list/tuple (a click ``multiple`` option not given) was not given and changes nothing.

Every file is validated on its own, so an error names the file that has it. Keys are the
fields of :class:`ibdiag.thresholds.Thresholds`, flat, plus ``[counters.<name>]`` tables whose
keys are the fields of :class:`~ibdiag.thresholds.CounterRule`; counter tables merge per
counter and per field. A profile may also hold ``description``; a site config, ``profile``.
Anything wrong - unknown key, wrong type, impossible value, unreadable or malformed file -
raises :class:`ConfigError`, whose text is one line: ``<file>: <key>: <what was expected>``.

``Effective.sources`` maps each dotted key some layer set (``expect_rate_gbps``,
``counters.symbol_error.rate_fail_per_hour``) to the layer: ``profile <name> (<path>)``,
``profile <path>``, ``config <path>`` or ``command line``. Keys no layer set are absent (they
hold the model's default, or the counter catalogue's default rule).
"""

from __future__ import annotations

import fnmatch
import math
import os
import re
import stat
import sys
from typing import (
    AbstractSet,
    Annotated,
    Any,
    Dict,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    get_args,
    get_origin,
)

from pydantic import BaseModel, ValidationError

from ibdiag.counters.catalogue import catalogue, rule_for
from ibdiag.errors import IbdiagError
from ibdiag.thresholds import PATTERN_MEANS, CounterRule, Thresholds

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.9/3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

SITE_CONFIG_DIR = "/etc/ibdiag"
SITE_CONFIG_DIR_ENV = "IBDIAG_CONFIG_DIR"
SITE_CONFIG_NAME = "ibdiag.toml"
DEFAULT_PROFILE = "generic"
PROFILES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "profiles")
CLI_SOURCE = "command line"
MAX_FILE_BYTES = 1024 * 1024  # a config is a few hundred bytes; refuse to slurp a log by mistake

_PROFILE_ONLY_KEYS = ("description",)
_CONFIG_ONLY_KEYS = ("profile",)
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_TOML_POSITION = re.compile(r"\s*\(at (line \d+, column \d+|end of document)\)\s*$")


class ConfigError(IbdiagError):
    """A bad profile, config file or flag. ``str()`` is one line: file, key, what was expected."""


# NamedTuples, not dataclasses: as immutable, for a tenth of what making the class costs.
class Effective(NamedTuple):
    thresholds: Thresholds
    profile: str  # the shipped profile's name, or the path of the profile file used
    sources: Dict[str, str]  # dotted key -> the layer that set it last; unset keys are absent


class _Layer(NamedTuple):
    label: str  # how errors name it: the file's path, or "command line"
    source: str  # how Effective.sources names it
    thresholds: Thresholds


def site_config_dir() -> str:
    """Where the site's ibdiag.toml and checks.d are: ``$IBDIAG_CONFIG_DIR``, else /etc/ibdiag.

    Read at each call, and the only place that reads the variable, so a test (or a container
    whose config is mounted elsewhere) can point every default at another directory.
    """
    return os.environ.get(SITE_CONFIG_DIR_ENV) or SITE_CONFIG_DIR


def default_config_path() -> str:
    return os.path.join(site_config_dir(), SITE_CONFIG_NAME)


def profile_names() -> List[str]:
    """The shipped profiles, sorted."""
    try:
        entries = os.listdir(PROFILES_DIR)
    except OSError:
        return []
    return sorted(name[: -len(".toml")] for name in entries if name.endswith(".toml"))


def describe_profiles() -> List[Tuple[str, str]]:
    """(name, description) of every shipped profile."""
    described = []
    for name in profile_names():
        description = _read_toml(os.path.join(PROFILES_DIR, f"{name}.toml")).get("description")
        described.append((name, description if isinstance(description, str) else ""))
    return described


def load_effective(
    profile: Optional[str], config_path: Optional[str], cli: Mapping[str, object]
) -> Effective:
    """Profile, then site config, then ``cli``: the effective Thresholds and who set what."""
    config_layer: Optional[_Layer] = None
    config_profile: Optional[Tuple[str, str]] = None  # (value, config path) from `profile = ...`
    if config_path is None and os.path.lexists(default_config_path()):
        config_path = default_config_path()
    if config_path is not None:
        data = _read_toml(config_path)
        wanted = data.pop("profile", None)
        if wanted is not None:
            _check_profile_value(config_path, wanted)
            config_profile = (wanted, config_path)
        config_layer = _validate_layer(config_path, f"config {config_path}", data, "config")

    if profile is not None:
        profile_label, profile_path, profile_source = _resolve_profile(profile, None)
    elif config_profile is not None:
        profile_label, profile_path, profile_source = _resolve_profile(*config_profile)
    else:
        profile_label, profile_path, profile_source = _resolve_profile(DEFAULT_PROFILE, None)
    data = _read_toml(profile_path)
    description = data.pop("description", None)
    if description is not None and not isinstance(description, str):
        raise ConfigError(
            f"{profile_path}: description: expected a string, got {_show(description)}"
        )
    layers = [_validate_layer(profile_path, profile_source, data, "profile")]
    if config_layer is not None:
        layers.append(config_layer)
    cli_data = {
        key: list(value) if isinstance(value, tuple) else value
        for key, value in cli.items()
        if value is not None and not (isinstance(value, (list, tuple)) and not value)
    }
    if cli_data:
        layers.append(_validate_layer(CLI_SOURCE, CLI_SOURCE, cli_data, "cli"))
    return _merge(profile_label, layers)


def render_show(effective: Effective) -> str:
    """``ibdiag config show``: every setting as TOML, each with a ``# <source>`` comment.

    Settings no layer set are shown with ``# default``; an unset optional one (TOML has no
    null) and the catalogue's defaults of an overridden counter are commented out, so the
    text, comments ignored, parses back to the same Thresholds.
    """
    th = effective.thresholds
    sources = effective.sources
    lines = [f"# profile: {_one_line(effective.profile)}"]
    for name in Thresholds.model_fields:
        if name == "counters":
            continue
        lines.append(_setting(name, getattr(th, name), sources.get(name, "default")))
    if not th.counters:
        lines.append("# counters: no overrides; every counter uses the catalogue's default rule")
    for counter in sorted(th.counters):
        override = th.counters[counter]
        effective_rule = rule_for(counter, th)
        lines.append("")
        lines.append(f"[counters.{_toml_key(counter)}]")
        for field in CounterRule.model_fields:
            key = f"counters.{counter}.{field}"
            if field in override.model_fields_set:
                lines.append(_setting(field, getattr(override, field), sources.get(key, "default")))
            else:
                value = getattr(effective_rule, field)
                shown = "<not set>" if value is None else _toml_value(value)
                lines.append(f"# {field} = {shown}  # catalogue default")
    return "\n".join(lines) + "\n"


# --- reading files ------------------------------------------------------------------------


def _read_toml(path: str) -> Dict[str, Any]:
    """The file's TOML table, or a ConfigError naming the file and what is wrong with it."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {_strerror(exc)}") from None
    if stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{path}: is a directory, expected a TOML file")
    if not stat.S_ISREG(info.st_mode):  # a FIFO or device would block or never end
        raise ConfigError(f"{path}: not a regular file, expected a TOML file")
    if info.st_size > MAX_FILE_BYTES:
        raise ConfigError(
            f"{path}: {info.st_size} bytes, expected a TOML file of at most {MAX_FILE_BYTES}"
        )
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {_strerror(exc)}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(
            f"{path}: line {line}, column {column}: not UTF-8 text "
            f"(byte 0x{raw[exc.start]:02x}); save the file as UTF-8"
        ) from None
    if text.startswith("\ufeff"):  # a byte-order mark some editors add: harmless
        text = text[1:]
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {_toml_error(exc)}") from None
    except RecursionError:  # tomllib recurses per nested array or inline table
        raise ConfigError(f"{path}: invalid TOML: arrays or tables nested too deeply") from None


def _strerror(exc: OSError) -> str:
    return exc.strerror.lower() if exc.strerror else str(exc)


def _toml_error(exc: Exception) -> str:
    """tomllib's "Invalid value (at line 3, column 7)" -> "line 3, column 7: invalid value"."""
    message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    match = _TOML_POSITION.search(message)
    if match is None:
        return f"invalid TOML: {message}"
    where = "end of file" if match.group(1) == "end of document" else match.group(1)
    what = message[: match.start()].strip()
    return f"{where}: invalid TOML: {what[:1].lower()}{what[1:]}"


# --- profiles -----------------------------------------------------------------------------


def _check_profile_value(config_path: str, value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(
            f"{config_path}: profile: expected a profile name or a path to a TOML file, "
            f"got {_show(value)}"
        )


def _is_path(value: str) -> bool:
    return "/" in value or os.sep in value or value.endswith(".toml")


def _resolve_profile(value: str, config_path: Optional[str]) -> Tuple[str, str, str]:
    """(name or path used, file to read, source label) for a profile name or path."""
    # From --profile: "profile 'x': ..."; from the config's key: "<config>: profile: 'x': ...".
    where = f"{config_path}: profile: {value!r}" if config_path else f"profile {value!r}"
    if _is_path(value):
        path = os.path.expanduser(value)
        if config_path is not None and not os.path.isabs(path):
            path = os.path.join(os.path.dirname(config_path), path)
        if not os.path.lexists(path):
            looked = "" if path == value else f" (looked for {path})"
            raise ConfigError(f"{where}: no such file{looked}")
        return path, path, f"profile {path}"
    known = profile_names()
    if value not in known:
        raise ConfigError(
            f"{where}: no such profile; known: {', '.join(known)} (or give a path to a TOML file)"
        )
    path = os.path.join(PROFILES_DIR, f"{value}.toml")
    return value, path, f"profile {value} ({path})"


# --- validating one layer -----------------------------------------------------------------


def _validate_layer(label: str, source: str, data: Dict[str, Any], kind: str) -> _Layer:
    allowed = set(Thresholds.model_fields)
    for key in data:
        if key not in allowed:
            raise ConfigError(f"{label}: {_unknown_key(key, allowed, kind)}")
    if not data:  # the usual profile (generic) and no flags: nothing to validate
        return _Layer(label=label, source=source, thresholds=_defaults())
    _check_counter_names(label, data.get("counters"))
    _check_values(label, data)
    try:
        thresholds = Thresholds.model_validate(data, strict=True)
    except ValidationError as exc:
        raise ConfigError(f"{label}: {_describe(exc)}") from None
    return _Layer(label=label, source=source, thresholds=thresholds)


def _defaults() -> Thresholds:
    """``Thresholds()`` - every field its default, none set - without building the model's
    validator: that costs more than the rest of a quick check's configuration (the build is
    deferred to first use), and an empty layer has nothing to validate. Equal to
    ``Thresholds.model_validate({})`` (``tests/test_config.py`` holds it to that)."""
    return Thresholds.model_construct()


def _unknown_key(key: str, allowed: AbstractSet[str], kind: str) -> str:
    if kind == "profile" and key in _CONFIG_ONLY_KEYS:
        return (
            f"unknown key {key!r}: a profile cannot choose another profile "
            "(set profile in the site config, or use --profile)"
        )
    if kind == "config" and key in _PROFILE_ONLY_KEYS:
        return f"unknown key {key!r}: only a profile has a description"
    if kind == "cli":
        return f"unknown key {key!r}"
    return f"unknown key {key!r}{_did_you_mean(key, sorted(allowed))}"


def _did_you_mean(key: str, known: Sequence[str], list_known: bool = True) -> str:
    import difflib  # only on the error path

    close = difflib.get_close_matches(key, sorted(known), n=1)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f"; known: {', '.join(sorted(known))}" if list_known else ""


def _check_counter_names(label: str, counters: object) -> None:
    if not isinstance(counters, dict):
        return  # a wrong type is pydantic's to report
    for name in counters:
        if name not in catalogue():
            hint = _did_you_mean(name, list(catalogue()), list_known=False)
            raise ConfigError(
                f"{label}: counters.{_toml_key(name)}: unknown counter (not in the catalogue)"
                + hint
            )


def _check_values(label: str, data: Mapping[str, Any], prefix: Tuple[Any, ...] = ()) -> None:
    """What the model allows but a config cannot mean: inf/nan, empty names and patterns."""
    for key, value in data.items():
        where = (*prefix, key)
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(
                f"{label}: {_path(where)}: expected a finite number, got {_show(value)}"
            )
        if isinstance(value, dict):
            _check_values(label, value, where)
        if key in ("expect_hca_names", "ignore_hcas") and isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, str) and not item.strip():
                    what = "HCA name" if key == "expect_hca_names" else "pattern"
                    raise ConfigError(
                        f"{label}: {_path((*where, index))}: expected a non-empty {what}, "
                        f"got {_show(item)}"
                    )


_EXPECTATIONS = {
    "int_type": "expected a whole number",
    "int_parsing": "expected a whole number",
    "int_from_float": "expected a whole number",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "string_type": "expected a string",
    "string_too_short": "expected a non-empty string",
    "list_type": "expected a list of strings",
    "dict_type": "expected a table",
    "model_type": "expected a table",
    "model_attributes_type": "expected a table",
    "finite_number": "expected a finite number",
}


def _describe(exc: ValidationError) -> str:
    """The first of pydantic's errors as ``key: expected ..., got ...`` (+ how many more)."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = tuple(first["loc"])
    kind = first["type"]
    ctx = first.get("ctx") or {}
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    if kind == "extra_forbidden":
        parent, key = loc[:-1], loc[-1]
        fields = (
            CounterRule.model_fields if parent[:1] == ("counters",) else Thresholds.model_fields
        )
        where = f"{_path(parent)}: " if parent else ""
        return f"{where}unknown key {key!r}{_did_you_mean(str(key), list(fields))}{more}"
    whole = _is_int_field(loc)
    number = "a whole number" if whole else "a number"
    if kind == "greater_than":
        expected = f"expected {number} greater than {_num(ctx.get('gt'))}"
    elif kind == "greater_than_equal":
        expected = f"expected {number} of {_num(ctx.get('ge'))} or more"
    elif kind == "less_than_equal":
        expected = f"expected {number} of at most {_num(ctx.get('le'))}"
    elif kind == "literal_error":
        expected = f"expected one of {ctx.get('expected')}"
    elif kind == "string_pattern_mismatch" and ctx.get("pattern") in PATTERN_MEANS:
        expected = f"expected {PATTERN_MEANS[ctx['pattern']]}"
    elif kind in ("int_type", "int_parsing", "int_from_float") or (
        whole and kind in ("float_type", "float_parsing")
    ):
        expected = "expected a whole number"
    else:
        expected = _EXPECTATIONS.get(kind, f"expected {first['msg'][:1].lower()}{first['msg'][1:]}")
    return f"{_path(loc)}: {expected}, got {_show(first.get('input'))}{more}"


def _is_int_field(loc: Tuple[Any, ...]) -> bool:
    field = None
    if len(loc) == 1:
        field = Thresholds.model_fields.get(str(loc[0]))
    elif len(loc) == 3 and loc[0] == "counters":
        field = CounterRule.model_fields.get(str(loc[2]))
    if field is None:
        return False
    kinds = [field.annotation, *get_args(field.annotation)]
    # Optional[NetdevMtu] is Optional[Annotated[int, ...]]: the int sits one level further in.
    kinds += [get_args(kind)[0] for kind in kinds if get_origin(kind) is Annotated]
    return int in kinds


# --- merging the layers -------------------------------------------------------------------


def _merge(profile_label: str, layers: List[_Layer]) -> Effective:
    merged: Dict[str, Any] = {}
    counters: Dict[str, Dict[str, Any]] = {}
    sources: Dict[str, str] = {}
    set_by: Dict[str, int] = {}  # dotted key -> index of the layer that set it last
    for index, layer in enumerate(layers):
        th = layer.thresholds
        for name in Thresholds.model_fields:
            if name not in th.model_fields_set:
                continue
            if name == "counters":
                for counter, rule in th.counters.items():
                    for field in CounterRule.model_fields:
                        if field in rule.model_fields_set:
                            counters.setdefault(counter, {})[field] = getattr(rule, field)
                            key = f"counters.{counter}.{field}"
                            sources[key], set_by[key] = layer.source, index
                continue
            value = getattr(th, name)
            merged[name] = list(value) if isinstance(value, list) else value
            sources[name], set_by[name] = layer.source, index
    if counters:
        merged["counters"] = counters
    thresholds = Thresholds.model_validate(merged) if merged else _defaults()
    _check_consistent(thresholds, layers, sources, set_by)
    return Effective(thresholds=thresholds, profile=profile_label, sources=sources)


def _check_consistent(
    th: Thresholds, layers: List[_Layer], sources: Dict[str, str], set_by: Dict[str, int]
) -> None:
    """Settings each valid alone but impossible together; blames the layer that set one last."""

    def later(a: str, b: str) -> Tuple[str, str]:
        return (a, b) if set_by.get(a, -1) >= set_by.get(b, -1) else (b, a)

    def origin(key: str) -> str:
        return sources.get(key, "the catalogue default")

    names = list(dict.fromkeys(th.expect_hca_names))
    if th.expect_hcas is not None and len(names) > th.expect_hcas:
        blamed, other = later("expect_hcas", "expect_hca_names")
        label = layers[set_by[blamed]].label
        if blamed == "expect_hcas":
            raise ConfigError(
                f"{label}: expect_hcas: expected at least {len(names)} (the HCAs named in "
                f"expect_hca_names, from {origin(other)}), got {th.expect_hcas}"
            )
        raise ConfigError(
            f"{label}: expect_hca_names: expected at most {th.expect_hcas} names "
            f"(expect_hcas = {th.expect_hcas}, from {origin(other)}), got {len(names)}"
        )
    for name in names:
        if th.ignores(name):
            blamed, other = later("ignore_hcas", "expect_hca_names")
            label = layers[set_by[blamed]].label
            pattern = next(p for p in th.ignore_hcas if fnmatch.fnmatchcase(name, p))
            raise ConfigError(
                f"{label}: {blamed}: expected HCA {name!r} is also ignored by pattern "
                f"{pattern!r} ({other} from {origin(other)}); an ignored HCA always reads as "
                "missing"
            )
    for counter in sorted(th.counters):
        rule = rule_for(counter, th)
        warn, fail = rule.rate_warn_per_hour, rule.rate_fail_per_hour
        if warn is None or fail is None or warn <= fail:
            continue
        warn_key = f"counters.{counter}.rate_warn_per_hour"
        fail_key = f"counters.{counter}.rate_fail_per_hour"
        blamed, other = later(warn_key, fail_key)
        label = layers[set_by[blamed]].label
        if blamed == warn_key:
            raise ConfigError(
                f"{label}: {warn_key}: expected at most rate_fail_per_hour ({_num(fail)}, "
                f"from {origin(fail_key)}), got {_num(warn)}"
            )
        raise ConfigError(
            f"{label}: {fail_key}: expected at least rate_warn_per_hour ({_num(warn)}, "
            f"from {origin(warn_key)}), got {_num(fail)}"
        )


# --- formatting ---------------------------------------------------------------------------


def _setting(key: str, value: Any, source: str) -> str:
    if value is None:
        return f"# {key} = <not set>  # {_one_line(source)}"
    return f"{key} = {_toml_value(value)}  # {_one_line(source)}"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)  # always has a '.' or an exponent: stays a TOML float
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    if isinstance(value, BaseModel):
        value = value.model_dump(exclude_unset=True)
    if isinstance(value, dict):
        items = ", ".join(f"{_toml_key(str(k))} = {_toml_value(v)}" for k, v in value.items())
        return "{" + items + "}"
    return _toml_string(str(value))


def _toml_string(text: str) -> str:
    out = []
    for char in text:
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _toml_string(key)


def _path(loc: Sequence[Any]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + _toml_key(str(part))
    return text


def _show(value: Any) -> str:
    """A value as an admin would write it in TOML, cut short on one line."""
    try:
        text = _one_line(_toml_value(value))
    except RecursionError:
        text = "..."

    return text if len(text) <= 60 else text[:57] + "..."


def _num(value: Any) -> str:
    """120.0 -> "120", 0.5 -> "0.5": a limit as an admin would write it."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())
