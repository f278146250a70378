"""Hostile outputs of the support catalogue's tools, generated from a seed
(``tests/hostile_outputs.py``) from the real captures in tests/captures/support: every parser
returns its declared types and never raises; ``interpret`` on a Snapshot never raises and keeps
one row per item and target; and end to end, ``ibdiag collect --level standard`` with every
catalogue tool a stub printing junk writes a bundle (exit 0) that ``ibdiag report --json``
reads back into one JSON report, never a traceback."""

from __future__ import annotations

import glob
import json
import os
import random
import re
from typing import Any, Dict, List

import hostile_outputs as H
import pytest
import stubs as S
from snapshots import device, netdev, pci, port, snapshot, with_runs
from standard_node import Node

from ibdiag.facts.support import ItemStatus, ModuleInfo, SupportInventory
from ibdiag.families import Runs, support
from ibdiag.families.support import parsers as P
from ibdiag.families.support.catalogue import load
from ibdiag.model import CommandRun, Snapshot

SEED = 26
CASES = 250
CAPTURES = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "captures", "support"
)


def captures(folder: str) -> List[str]:
    found = []
    for path in sorted(glob.glob(os.path.join(CAPTURES, folder, "*"))):
        if not path.endswith("SOURCES.md"):
            with open(path, encoding="utf-8") as handle:
                found.append(handle.read())
    assert found, folder
    return found


ALL = [text for folder in sorted(os.listdir(CAPTURES)) for text in captures(folder)]


def _fine(value: Any) -> bool:
    """A parsed field: None, or a short printable string."""
    return value is None or (
        isinstance(value, str) and 0 < len(value) <= P.MAX_VALUE and value.isprintable()
    )


def _check_fields(parsed: Dict[str, Any], keys: List[str]) -> None:
    assert isinstance(parsed, dict) and sorted(parsed) == sorted(keys), parsed
    assert all(_fine(value) for value in parsed.values()), parsed


# -- every parser -------------------------------------------------------------------------------


def _cases(folder: str, salt: int) -> List:
    return H.cases(random.Random(SEED + salt), captures(folder), CASES, others=ALL)  # noqa: S311


def test_the_harness_reaches_every_kind_of_mutation():
    kinds = {kind for kind, _ in _cases("mstflint", 0)}
    assert kinds == set(H.KINDS)
    texts = [text for _, text in _cases("mstflint", 0)]
    assert any(len(t) > 100_000 for t in texts) and any(t.strip() == "" for t in texts)
    assert any("\x1b[" in t for t in texts) and any("\ufffd" in t for t in texts)


def test_the_harness_is_reproducible_from_its_seed():
    seeds = captures("ethtool")
    assert H.cases(random.Random(7), seeds, 40) == H.cases(random.Random(7), seeds, 40)  # noqa: S311
    assert H.cases(random.Random(7), seeds, 40) != H.cases(random.Random(8), seeds, 40)  # noqa: S311


def test_ofed_info_parser_on_hostile_outputs():
    for kind, text in _cases("ofed_info", 1):
        release = P.parse_ofed_info(text)
        assert _fine(release), (kind, release)
        assert release is None or (release.isascii() and not release.endswith(":")), release


def test_modinfo_parser_on_hostile_outputs():
    for kind, text in _cases("modinfo", 2):
        modules = P.parse_modinfo(text)
        assert isinstance(modules, list), kind
        for module in modules:
            assert isinstance(module, ModuleInfo)
            assert _fine(module.name) and module.name
            assert all(_fine(v) for v in (module.filename, module.version, module.vermagic))
            assert module.inbox in (True, False, None)


def test_flint_query_parser_on_hostile_outputs():
    for _kind, text in _cases("mstflint", 3):
        _check_fields(P.parse_flint_query(text), ["stored", "running", "psid", "security"])


def test_devlink_dev_info_parser_on_hostile_outputs():
    keys = ["driver", "psid", "running", "stored", "board_serial"]
    for _kind, text in _cases("devlink", 4):
        parsed = P.parse_devlink_dev_info(text)
        assert isinstance(parsed, dict)
        for bdf, fields in parsed.items():
            assert P._BDF.match(bdf) and bdf == bdf.lower()
            _check_fields(fields, keys)


def test_devlink_dev_info_parser_on_mutated_json_documents():
    """Mutations of the JSON itself (values of every type, keys dropped or changed)."""
    rng = random.Random(SEED)  # noqa: S311 - reproducible, not secret
    odd: List[Any] = [None, True, 2**70, 1e308, "", "x" * 5000, "\x1b[2J", [], {}, [[[]]], "N/A"]
    base = json.loads(captures("devlink")[0])

    def mutated(doc: Any) -> Any:
        if isinstance(doc, dict):
            return {
                (key if rng.random() > 0.1 else rng.choice(["pci/zz", key * 2, "info"])): (
                    mutated(value) if rng.random() > 0.15 else rng.choice(odd)
                )
                for key, value in doc.items()
                if rng.random() > 0.05
            }
        return doc

    for _ in range(CASES):
        parsed = P.parse_devlink_dev_info(json.dumps(mutated(base)))
        for fields in parsed.values():
            _check_fields(fields, ["driver", "psid", "running", "stored", "board_serial"])


def test_ethtool_driver_parser_on_hostile_outputs():
    for _kind, text in _cases("ethtool", 5):
        parsed = P.parse_ethtool_driver(text)
        _check_fields(parsed, ["driver", "running", "psid", "bdf"])
        assert parsed["bdf"] is None or P._BDF.match(parsed["bdf"])


def test_os_release_reader_on_hostile_files():
    from ibdiag.sources.support_files import _os_release

    for _kind, text in _cases("os_release", 6):
        found = _os_release(text)
        assert isinstance(found, dict)
        for key, value in found.items():
            assert re.fullmatch(r"[A-Z0-9_]{1,40}", key), key
            assert isinstance(value, str) and len(value) <= 200 and value.isprintable()


# -- interpret on a Snapshot --------------------------------------------------------------------


def _node() -> Snapshot:
    eth = netdev("enp202s0f0np0", type=1, mode=None)
    return snapshot(
        [
            device("mlx5_0", [port(1, netdev=netdev("ib0"))], pci=pci("0000:08:00.0")),
            device("mlx5_1", [port(1, link_layer="Ethernet", netdev=eth)], pci=pci("0000:ca:00.0")),
        ]
    ).model_copy(update={"gpus": [pci("0000:09:00.0", vendor_id="0x10de")]})


_SEEDS = {
    "ofed_info": "ofed_info", "modinfo": "modinfo", "mstflint_query": "mstflint",
    "mstconfig_query": "mstconfig", "devlink_dev_info": "devlink", "devlink_dev_param": "devlink",
    "lscpu": "lscpu", "numactl": "numactl", "rdma_link": "rdma", "rdma_resource": "rdma",
    "ip_link": "ip", "ethtool_driver": "ethtool", "ethtool_module": "ethtool",
    "ethtool_fec": "ethtool", "sminfo": "sminfo", "saquery_sm": "saquery",
    "nvidia_smi_query": "nvidia_smi",
}  # fmt: skip


OUTCOMES: List[Dict[str, Any]] = [
    {}, {}, {}, {"rc": 1}, {"rc": -9}, {"rc": None, "not_found": True},
    {"rc": None, "timed_out": True}, {"rc": None, "permission_denied": True},
]  # fmt: skip


def _hostile_runs(rng: random.Random, snap: Snapshot) -> List[CommandRun]:
    """One run of every planned command (and of some fallbacks), each a hostile output with a
    random outcome (mostly exit 0)."""
    runs = []
    for planned in support.plan(snap):
        for one in [planned] + (
            [planned.fallback] if planned.fallback and rng.random() < 0.5 else []
        ):
            item_id = one.role.step.replace("-fallback", "")
            seeds = captures(_SEEDS.get(item_id, "ofed_info"))
            _, text = H.cases(rng, seeds, 1 + rng.randrange(len(H.KINDS)), others=ALL)[-1]
            outcome = rng.choice(OUTCOMES)
            fields: Dict[str, Any] = {"rc": 0, "stdout": text, "stderr": text[:200], **outcome}
            runs.append(CommandRun(argv=one.argv, role=one.role, duration_s=0.1, **fields))
    return runs


def _expected_keys(snap: Snapshot) -> List:
    keys = []
    for it in load().item:
        if it.kind == "command":
            found = support.targets(it, snap)
            keys += [(it.id, t.name) for t in found] if found else [(it.id, "")]
        elif it.kind == "family":
            keys.append((it.id, ""))
    return keys


def test_interpret_never_raises_and_keeps_one_row_per_target():
    rng = random.Random(SEED)  # noqa: S311 - reproducible, not secret
    snap = _node()
    expected = _expected_keys(snap)
    statuses = set()
    for index in range(60):
        runs = _hostile_runs(rng, snap)
        update = support.interpret(snap, Runs({run.key: run for run in runs}))
        inv = update.node["facts"]["support"]
        assert isinstance(inv, SupportInventory)
        assert [(row.item, row.target) for row in inv.rows] == expected, index
        statuses.update(row.status for row in inv.rows)
        for fw in inv.firmware:
            assert fw.hca in ("mlx5_0", "mlx5_1") and isinstance(fw.pending, bool)
        if index % 10 == 0:  # the whole path, as collect and replay run it
            whole = with_runs(snap, *runs)
            assert not any(k.startswith("interpret.") for k in whole.problems), whole.problems
            assert whole.facts["support"] == inv
            Snapshot.model_validate_json(whole.model_dump_json())
    assert {ItemStatus.COLLECTED, ItemStatus.FAILED, ItemStatus.ABSENT} <= statuses


# -- end to end ---------------------------------------------------------------------------------

TOOLS = (
    "ofed_info", "modinfo", "dkms", "mstflint", "flint", "mstconfig", "mlxconfig", "devlink",
    "lspci", "lscpu", "numactl", "rdma", "ibdev2netdev", "ip", "ethtool", "sminfo", "saquery",
    "nvidia-smi",
)  # fmt: skip


@pytest.mark.parametrize("salt", [0, 1])
def test_collect_with_every_catalogue_tool_printing_junk(tmp_path, run_cli, monkeypatch, salt):
    node = Node(tmp_path, run_cli)
    node.healthy_tools()
    rng = random.Random(SEED + salt)  # noqa: S311 - reproducible, not secret
    junks = H.cases(rng, ALL, len(TOOLS))  # every kind at least once (18 tools, 10 kinds)
    rng.shuffle(junks)
    for tool, (_kind, text) in zip(TOOLS, junks):
        junk = tmp_path / f"junk-{tool}.out"
        junk.write_bytes(H.as_bytes(text)[:2_000_000])
        node.stubs.add(tool, S.prints(junk, rc=rng.choice([0, 0, 1])))
    monkeypatch.setenv("PATH", node.stubs.path)
    out = tmp_path / "out"
    result = run_cli(
        "collect", "--level", "standard", "--sysfs", node.sysfs, "--procfs", node.procfs,
        "-o", str(out), "--command-timeout", "5", "--deadline", "20",
    )  # fmt: skip
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    (bundle,) = glob.glob(str(out / "ibdiag-*"))
    called = {line.split()[0] for line in node.stubs.calls() if line.strip()}
    assert {"ofed_info", "modinfo", "mstflint", "devlink", "lscpu"} <= called
    replayed = run_cli("report", bundle, "--json")
    assert replayed.exit_code in (0, 1, 2), replayed.stderr
    assert "Traceback" not in replayed.stdout + replayed.stderr
    report = json.loads(replayed.stdout)
    problems = report["snapshot"]["problems"]
    assert not any(key.startswith("interpret.") for key in problems), problems
    support_rows = report["snapshot"]["facts"]["support"]["rows"]
    assert {row["item"] for row in support_rows} >= {"ofed_info", "modinfo", "mstflint_query"}
