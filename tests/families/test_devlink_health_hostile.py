"""Hostile ``devlink -j health show`` output, generated from a seed: every case goes through the
family's interpreter, hca.fw_health and the renderers (Prometheus: promtool-valid where there
are samples; HTML rows) without an exception; and end to end, ``ibdiag check --level standard
--json`` with a stub devlink printing junk gives one JSON report and exit 0-2, never a
traceback."""

from __future__ import annotations

import json
import os
import random
from typing import Any, List

import pytest
import stubs as S
from prometheus_text import parse
from snapshots import builtin_registry, device, snapshot, with_runs
from stubs import write_procfs
from sysfs_builder import mlx5_node, write_node

from ibdiag.families import devlink_health as family
from ibdiag.grade import grade
from ibdiag.model import CommandRun, Status
from ibdiag.render.html_fw import firmware_rows
from ibdiag.render.prometheus import _Exposition
from ibdiag.render.prometheus_fw import add_firmware
from ibdiag.thresholds import Thresholds

SEED = 25
CASES = 300
CAPTURES = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "captures", "devlink"
)
_ODD: List[Any] = [
    None, True, -1, 2**64, 2**70, 1e308, float("nan"), "", "x" * 5000, "\x1b]0;x\x07\nFAIL",
    [], {}, [[[[]]]], "healthy", "error", "pci/0000:0c:00.0", 0,
]  # fmt: skip


def _healthy() -> dict:
    with open(os.path.join(CAPTURES, "handmade-two-pfs-healthy.json")) as handle:
        return json.load(handle)


def _mutate(rng: random.Random, doc: Any, depth: int = 0) -> Any:
    if isinstance(doc, dict):
        out = {}
        for key, value in doc.items():
            roll = rng.random()
            if roll < 0.05:
                continue  # a key dropped
            if roll < 0.1:
                key = rng.choice(["pci/0000:0c:00.0/x", "pci/zz", "\udcff", "reporter", key * 3])
            out[key] = _mutate(rng, value, depth + 1)
        if rng.random() < 0.1:
            out[rng.choice(["error", "recover", "state", "reporter", "grace_period"])] = rng.choice(
                _ODD
            )
        return out
    if isinstance(doc, list):
        items = [_mutate(rng, item, depth + 1) for item in doc]
        if rng.random() < 0.1:
            items.append(rng.choice(_ODD))
        if rng.random() < 0.05:
            items = items * 50
        return items
    return rng.choice(_ODD) if rng.random() < 0.2 else doc


def _text(rng: random.Random) -> str:
    kind = rng.randrange(8)
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))).decode("latin-1")
    if kind == 1:
        return "{" * rng.randrange(1, 5000)
    if kind == 2:
        return json.dumps(_healthy())[: rng.randrange(1, 400)]  # cut short
    return json.dumps(_mutate(rng, _healthy()), allow_nan=True)


def _node():
    return snapshot([device("mlx5_0"), device("mlx5_1")])


def test_seeded_hostile_outputs_never_raise():
    rng = random.Random(SEED)  # noqa: S311 - reproducible, not secret
    statuses = set()
    for index in range(CASES):
        text = _text(rng)
        run = CommandRun(argv=list(family.ARGV), role=family.ROLE, rc=0, stdout=text)
        snap = with_runs(_node(), run)
        assert not any(k.startswith("interpret.") for k in snap.problems), (index, snap.problems)
        report = grade(snap, builtin_registry(), Thresholds(), "standard")
        mine = [r for r in report.results if r.check_id == "hca.fw_health"]
        assert mine and all(r.status != Status.ERROR for r in mine), (index, text[:200])
        assert all("\n" not in r.message for r in mine)
        statuses.update(r.status for r in mine)
        exposition = _Exposition()
        add_firmware(exposition.family, report)
        if exposition.text():
            parse(exposition.text())
        firmware_rows(report)
    assert {Status.PASS, Status.SKIP} <= statuses  # the cases reach both ends


@pytest.mark.parametrize(
    "body",
    [
        S.prints_text('\x00\x01junk\n{"health":'),
        S.prints_text('{"health":{"pci/0000:10:00.0":[{"reporter":"fw","error":"1e999"}]}}'),
        S.fails("kernel answers: Operation not permitted"),
        "sleep 30\n",
    ],
)
def test_end_to_end_with_a_hostile_devlink(tmp_path, run_cli, body):
    sysfs = str(tmp_path / "sys")
    write_node(sysfs, mlx5_node(2))
    procfs = write_procfs(tmp_path / "proc")
    stubs = S.StubBin(tmp_path / "stubs")
    stubs.add("devlink", body)
    config = tmp_path / "site.toml"
    config.write_text("")
    result = run_cli(
        "check", "--sysfs", sysfs, "--procfs", str(procfs), "--config", str(config),
        "--level", "standard", "--json", "--command-timeout", "2", "--deadline", "5",
        env=stubs.env(),
    )  # fmt: skip
    assert result.exit_code in (0, 1, 2), result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    report = json.loads(result.stdout)
    mine = [r for r in report["results"] if r["check_id"] == "hca.fw_health"]
    assert mine and all(r["status"] in ("pass", "warn", "fail", "skip") for r in mine)
