"""Prometheus's text exposition format 0.0.4, checked two ways: ``parse`` (a small strict
parser: every sample as {(name, labels): value}, AssertionError on anything not strictly valid)
and ``promtool_check`` (the real ``promtool check metrics``, Debian's ``prometheus``; a missing
promtool fails the test, it never skips it)."""

from __future__ import annotations

import re
import subprocess
from typing import Dict, List, Tuple

from loopback import prometheus_tool

PROMTOOL_TIMEOUT_S = 60

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
_SAMPLE = re.compile(
    rf"^(?P<name>{_NAME})(?:\{{(?P<labels>{_LABEL}(?:,{_LABEL})*)?\}})? "
    r"(?P<value>[-+]?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|Inf|NaN))$"
)
_LABEL_ITEM = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')
_TYPES = {"counter", "gauge", "untyped", "summary", "histogram"}


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), value)


def parse(text: str) -> Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float]:
    """Every sample as {(name, labels): value}; AssertionError on anything not strictly valid."""
    assert text.endswith("\n"), "the exposition must end with a newline"
    helps: Dict[str, str] = {}
    types: Dict[str, str] = {}
    sampled: set = set()
    samples: Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float] = {}
    for number, line in enumerate(text.splitlines(), 1):
        where = f"line {number}: {line!r}"
        assert line, f"{where}: empty line"
        if line.startswith("#"):
            match = re.fullmatch(rf"# (HELP|TYPE) ({_NAME}) (.*)", line)
            assert match, f"{where}: bad comment"
            kind, name, rest = match.groups()
            assert name not in sampled, f"{where}: {kind} after the family's samples"
            if kind == "HELP":
                assert name not in helps, f"{where}: second HELP"
                assert rest.strip(), f"{where}: empty HELP"
                helps[name] = rest
            else:
                assert name not in types, f"{where}: second TYPE"
                assert rest in _TYPES, f"{where}: unknown type"
                types[name] = rest
            continue
        match = _SAMPLE.match(line)
        assert match, f"{where}: not `name{{labels}} value`"
        name = match.group("name")
        assert name in helps and name in types, f"{where}: no HELP/TYPE before the sample"
        labels = tuple(_LABEL_ITEM.findall(match.group("labels") or ""))
        keys = [key for key, _ in labels]
        assert len(keys) == len(set(keys)), f"{where}: repeated label"
        series = (name, tuple((key, _unescape(value)) for key, value in labels))
        assert series not in samples, f"{where}: duplicate series"
        if types[name] == "counter":
            assert name.endswith("_total"), f"{where}: counter without _total"
        samples[series] = float(match.group("value"))
        sampled.add(name)
    # A family's samples are contiguous: once another family started, it may not come back.
    order = [line.split("{")[0].split(" ")[0] for line in text.splitlines() if line[0] != "#"]
    seen: List[str] = []
    for name in order:
        if not seen or seen[-1] != name:
            assert name not in seen, f"samples of {name} are not contiguous"
            seen.append(name)
    return samples


def promtool_check(text: str) -> None:
    proc = subprocess.run(
        [prometheus_tool("promtool"), "check", "metrics"],
        input=text.encode(),
        capture_output=True,
        timeout=PROMTOOL_TIMEOUT_S,
        check=False,
    )
    output = (proc.stdout + proc.stderr).decode(errors="replace")
    assert proc.returncode == 0, f"promtool check metrics failed ({proc.returncode}):\n{output}"
