"""``ibdiag fleet report`` against reports written to hurt it (issue 21), end to end through the
CLI over directories of realistic node reports (``tests/fleet_gen.py``: 128 level-full
H100/NDR nodes; gpu0031 has a far-end port down and is the one node to drain, four nodes on
leaf su03-rail1 are switch-suspect).

- Any value a node writes costs at most that node: a number no measurement can be (401 or
  5,000 digits, infinite, NaN, negative, ``true``), in any numeric field, leaves every other
  node's verdict, group and outliers as they were, the exit code the fleet's, and ``-o``
  written.
- A report under another file name, or from the future, cannot hide a sick node: a file not
  named for its host never replaces ``<host>.json``; a ``collected_at`` past the fleet
  report's clock never wins; a conflict keeps the worse verdict and is listed.
- Expectations cannot be switched off or bypassed: a ``fleet-run.json`` that cannot be read is
  a read problem that makes the fleet CRITICAL, names no node can have are refused, and
  reports from nodes nobody expected are listed and kept out of switch blame.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import pytest
from conftest import REPO
from fleet_gen import REPORTS, write_fleet
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fleet_cli import cli

from ibdiag.hostlist import expand

NODES = 128
SEED = 15
SICK = "gpu0031"  # the one node to drain (its rail-2 far end went down)
HEALTHY = "gpu0002"
SMALL = [f"gpu{n:04d}" for n in range(1, 11)] + [SICK]  # healthy gpu0001-0010 and the sick one
SCHEMA = Path(REPO) / "schema" / "fleet.schema.json"
GROUPS = ("drain", "switch_suspect", "warnings", "unknown")


# --- the fleet and how it is read -------------------------------------------------------------


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Iterator[str]:
    """The 128 nodes' reports (``DIR/<host>.json``), written once for the module."""
    root = str(tmp_path_factory.mktemp("hostile-fleet"))
    write_fleet(root, NODES, SEED, workers=2)
    yield os.path.join(root, REPORTS)
    shutil.rmtree(root, ignore_errors=True)


def text_of(fleet: str, host: str) -> str:
    return Path(fleet, f"{host}.json").read_text()


def directory(where: Path, fleet: str, hosts: Optional[Sequence[str]] = None, **files: str) -> str:
    """A directory of the fleet's reports (links) for ``hosts`` (default: all), with ``files``
    (name -> text) written in, replacing a report of that name."""
    where.mkdir(parents=True)
    names = [f"{h}.json" for h in hosts] if hosts is not None else sorted(os.listdir(fleet))
    for name in names:
        if name not in files:
            os.symlink(os.path.join(fleet, name), where / name)
    for name, text in files.items():
        (where / name).write_text(text)
    return str(where)


def fleet_report(folder: str, *args: str, out: Optional[Path] = None) -> Tuple[int, dict]:
    """``ibdiag fleet report FOLDER -o OUT.json ARGS``: the exit code and the report -o wrote."""
    out = out or Path(folder + "-fleet.json")
    done = cli("fleet", "report", folder, "-o", str(out), *args)
    assert "internal error" not in (done.stdout + done.stderr), done.stderr
    assert out.exists(), (done.exit_code, done.stdout, done.stderr)
    return done.exit_code, json.loads(out.read_text())


def validate(document: dict) -> None:
    import jsonschema

    schema = json.loads(SCHEMA.read_text())
    errors = list(jsonschema.validators.validator_for(schema)(schema).iter_errors(document))
    assert not errors, [f"{list(e.absolute_path)}: {e.message[:200]}" for e in errors[:5]]


def placed(report: dict) -> Dict[str, Tuple[str, str]]:
    """host -> (group section, reason) over drain, switch-suspect, warnings and unknown."""
    found = {}
    for section in GROUPS:
        for group in report[section]:
            for host in expand(group["nodes"]):
                found[host] = (section, group["reason"])
    return found


def outliers_of_others(report: dict, host: str) -> List[Tuple[str, str, Any]]:
    return sorted(
        (o["host"], o["metric"], o["rail"]) for o in report["outliers"] if o["host"] != host
    )


def notes_of(report: dict, host: str) -> List[str]:
    return [note["reason"] for note in report["read_notes"] if host in expand(note["nodes"])]


@pytest.fixture(scope="module")
def baseline(fleet, tmp_path_factory) -> Tuple[int, dict]:
    """The untouched fleet's report: 1 node to drain (gpu0031), 4 switch-suspect."""
    code, report = fleet_report(directory(tmp_path_factory.mktemp("b") / "all", fleet))
    assert code == 2 and report["nodes_read"] == NODES
    assert report["drain"][0]["nodes"] == SICK and len(report["drain"]) == 1
    assert report["verdict_reason"] == "5 CRITICAL nodes (1 to drain, 4 switch-suspect)"
    return code, report


# --- item 2: a number costs at most its node -------------------------------------------------

HUGE = "9" * 401  # the integer of 401 digits
LONGER = "9" * 5000  # more digits than Python converts to an int (sys.int_info: 4300)


def with_numbers(text: str, edits: Sequence[Tuple[Tuple[Any, ...], str]]) -> str:
    """The report with the value at each path replaced by a JSON number written as given
    (``1e999``, ``-Infinity``, 401 digits: what json.dumps would not write)."""
    data = json.loads(text)
    literals = []
    for path, literal in edits:
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = f"@@number{len(literals)}@@"
        literals.append(literal)
    return re.sub(r'"@@number(\d+)@@"', lambda m: literals[int(m.group(1))], json.dumps(data))


def where_numbers_are(text: str) -> Dict[str, Tuple[Any, ...]]:
    """Paths into the report of the issue's three numbers."""
    data = json.loads(text)
    snapshot = data["snapshot"]
    busbw = ("snapshot", "nccl_tests", "rows", len(snapshot["nccl_tests"]["rows"]) - 1,
             "out_of_place", "busbw_gbps")  # fmt: skip
    return {
        "loopback gbps": ("snapshot", "loopback", 0, "gbps"),
        "counter_increases delta": ("counter_increases", "targets", "mlx5_0:1", "symbol_error"),
        "nccl_tests busbw_gbps": busbw,
    }


def with_a_delta_target(text: str) -> str:
    """The report with a counter increase listed for mlx5_0:1 (a healthy node lists none)."""
    data = json.loads(text)
    data["counter_increases"]["targets"].setdefault("mlx5_0:1", {})["symbol_error"] = 0
    return json.dumps(data)


@pytest.mark.parametrize(
    "field", ["loopback gbps", "counter_increases delta", "nccl_tests busbw_gbps"]
)
@pytest.mark.parametrize("digits", [HUGE, "-" + HUGE, LONGER])
def test_an_integer_of_hundreds_of_digits_costs_its_node_that_value_alone(
    fleet, baseline, tmp_path, field, digits
):
    """The issue's crash: ``internal error: OverflowError``, exit 3, -o written nowhere. Now
    the fleet's verdict, every node in its group, and the value read as unknown - with a note
    on that node saying which field."""
    text = with_a_delta_target(text_of(fleet, HEALTHY))
    text = with_numbers(text, [(where_numbers_are(text)[field], digits)])
    code, report = fleet_report(directory(tmp_path / "d", fleet, **{f"{HEALTHY}.json": text}))
    validate(report)
    base_code, base = baseline
    assert code == base_code == 2 and report["verdict_reason"] == base["verdict_reason"]
    assert report["nodes_read"] == NODES and placed(report) == placed(base)
    assert outliers_of_others(report, HEALTHY) == outliers_of_others(base, HEALTHY)
    (note,) = notes_of(report, HEALTHY)
    assert note.endswith(f"were read as unknown: {field}")


HOSTILE = {
    "401 digits": HUGE,
    "-401 digits": "-" + HUGE,
    "5000 digits": LONGER,
    "1e999 (inf)": "1e999",
    "Infinity": "Infinity",
    "-Infinity": "-Infinity",
    "NaN": "NaN",
    "-1": "-1",
    "-1e308": "-1e308",
    "1.7e308": "1.7e308",
    "2**64": str(2**64),
    "true": "true",
    "false": "false",
    "5e-324": "5e-324",
    "-0.0": "-0.0",
}


def numeric_paths(value: Any, path: Tuple[Any, ...] = ()) -> Iterator[Tuple[Any, ...]]:
    """Every path to a number (or a boolean, which a careless reader takes for one)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from numeric_paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from numeric_paths(item, (*path, index))
    elif isinstance(value, (int, float)):
        yield path


@pytest.fixture(scope="module")
def small(fleet, tmp_path_factory) -> Dict[str, Any]:
    """11 nodes (10 healthy, the sick one) less one healthy node's report, its text and
    every numeric path in it, and the report of the 11."""
    root = tmp_path_factory.mktemp("small")
    folder = directory(root / "base", fleet, SMALL)
    code, report = fleet_report(folder, "--workers", "1")
    assert code == 2 and report["drain"][0]["nodes"] == SICK
    text = with_a_delta_target(text_of(fleet, HEALTHY))
    paths = sorted(numeric_paths(json.loads(text)), key=str)
    assert len(paths) > 1000  # a level-full report: counters, runs, results
    others = directory(root / "others", fleet, [h for h in SMALL if h != HEALTHY])
    return {"code": code, "report": report, "text": text, "paths": paths, "others": others}


def assert_costs_at_most_its_node(small: Dict[str, Any], text: str, where: Path) -> None:
    """Read beside the 10 others: the same exit code, every node (this one too: its verdict is
    its report's) in the same group, the others' outliers the same, JSON valid against the
    schema, and the text and HTML pages written too."""
    folder = where / "fleet"
    shutil.copytree(small["others"], folder, symlinks=True)
    (folder / f"{HEALTHY}.json").write_text(text)
    code, report = fleet_report(str(folder), "--workers", "1", out=where / "fleet.json")
    validate(report)
    assert code == small["code"], report["verdict_reason"]
    assert report["nodes_read"] == len(SMALL)
    assert placed(report) == placed(small["report"])
    assert outliers_of_others(report, HEALTHY) == outliers_of_others(small["report"], HEALTHY)
    for name in ("fleet.html", "fleet.txt"):
        done = cli("fleet", "report", str(folder), "--workers", "1", "-o", str(where / name))
        assert done.exit_code == code and (where / name).stat().st_size > 0


@pytest.mark.parametrize("value", list(HOSTILE), ids=list(HOSTILE))
def test_every_numeric_field_of_a_report_at_once(small, tmp_path, value):
    """Every number of one node's report - thousands: counters, LIDs, port numbers, sizes,
    bandwidths, hours, exit codes, results' observed values - set to one hostile value."""
    edits = [(path, HOSTILE[value]) for path in small["paths"]]
    assert_costs_at_most_its_node(small, with_numbers(small["text"], edits), tmp_path)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_numeric_fields_with_any_hostile_values(small, data):
    """A few fields at a time, each with its own hostile value (hypothesis draws which)."""
    count = data.draw(st.integers(min_value=1, max_value=6), label="fields")
    edits = [
        (
            data.draw(st.sampled_from(small["paths"]), label="path"),
            HOSTILE[data.draw(st.sampled_from(sorted(HOSTILE)), label="value")],
        )
        for _ in range(count)
    ]
    with tempfile.TemporaryDirectory() as where:
        assert_costs_at_most_its_node(small, with_numbers(small["text"], edits), Path(where))


# --- item 3: a report cannot hide (or replace) another node's --------------------------------


def posing_as(text: str, victim_text: str, collected_at: Optional[str] = None) -> str:
    """``text`` (another node's report) rewritten to say it is the victim: its host name and
    its HCAs' node GUIDs (any node reads those off the fabric), optionally a collected_at."""
    data, victim = json.loads(text), json.loads(victim_text)
    data["snapshot"]["host"] = victim["snapshot"]["host"]
    guids = [device["node_guid"] for device in victim["snapshot"]["devices"]]
    for device, guid in zip(data["snapshot"]["devices"], guids):
        device["node_guid"] = guid
    if collected_at:
        data["snapshot"]["collected_at"] = collected_at
    return json.dumps(data)


def conflict_of(report: dict, host: str) -> str:
    (conflict,) = [group for group in report["conflicts"] if group["nodes"] == host]
    return conflict["reason"]


@pytest.mark.parametrize("collected_at", ["2099-01-01T00:00:00Z", "2025-03-04T00:00:00Z"])
def test_a_report_under_another_file_name_cannot_hide_a_sick_node(
    fleet, baseline, tmp_path, collected_at
):
    """The issue's zz-evil.json: a healthy report saying host gpu0031, with gpu0031's GUIDs,
    collected in 2099 (or merely a day after the fleet run): gpu0031 is still the node to
    drain, and the conflict is listed."""
    evil = posing_as(text_of(fleet, HEALTHY), text_of(fleet, SICK), collected_at)
    code, report = fleet_report(directory(tmp_path / "d", fleet, **{"zz-evil.json": evil}))
    validate(report)
    assert code == 2 and report["verdict_reason"] == baseline[1]["verdict_reason"]
    assert report["drain"] == baseline[1]["drain"] and report["nodes_read"] == NODES
    reason = conflict_of(report, SICK)
    assert reason.startswith(f"{SICK}.json (CRITICAL, collected 2025-03-03T")
    assert f"and zz-evil.json (OK, collected {collected_at[:19]}" in reason
    assert reason.endswith(f"say they are {SICK}: kept the worse, CRITICAL")
    assert ("2099" in collected_at) == ("after this report's clock" in reason)
    text = cli("fleet", "report", str(tmp_path / "d")).stdout.splitlines()
    assert text[text.index("conflicts (reports of one node that disagree):") + 1] == (
        f"  {reason}: {SICK} (1)"
    )


def test_a_conflict_keeps_the_worse_verdict_and_says_so(fleet, baseline, tmp_path):
    """A sick report posing as a healthy node (its file not named for it): the node is kept at
    the worse verdict and listed - a report that frames a node is looked at, not trusted."""
    framed = posing_as(text_of(fleet, SICK), text_of(fleet, HEALTHY), "2099-01-01T00:00:00Z")
    code, report = fleet_report(directory(tmp_path / "d", fleet, **{"zz-frame.json": framed}))
    assert code == 2
    assert placed(report)[HEALTHY][0] == "drain"
    assert conflict_of(report, HEALTHY).endswith(
        f"say they are {HEALTHY}: kept the worse, CRITICAL"
    )


def test_a_collected_at_past_the_fleet_reports_clock_never_wins(
    fleet, baseline, tmp_path, monkeypatch
):
    """Two runs' gpu0031.json (the same file name): the second healthy, collected in 2030.
    Made by a clock before 2030, the fleet report does not believe that time; made after it,
    the later run is the newest and the node is healthy again."""
    from ibdiag.cli import fleet_report as report_cli

    healed = posing_as(text_of(fleet, HEALTHY), text_of(fleet, SICK), "2030-01-01T00:00:00Z")
    run1 = directory(tmp_path / "run1", fleet)
    run2 = directory(tmp_path / "run2", fleet, [], **{f"{SICK}.json": healed})
    found = {}
    for clock in ("2029-12-31T23:00:00+00:00", "2030-01-01T00:10:00+00:00"):
        now = report_cli.datetime.fromisoformat(clock)
        monkeypatch.setattr(report_cli, "clock", lambda now=now: now)
        out = tmp_path / f"{clock[:4]}.json"
        done = cli("fleet", "report", run1, run2, "-o", str(out))
        found[clock[:4]] = (done.exit_code, json.loads(out.read_text()))
        assert found[clock[:4]][1]["generated_at"].startswith(clock[:16])
    code, before = found["2029"]
    assert code == 2 and before["drain"] == baseline[1]["drain"]
    assert "after this report's clock" in conflict_of(before, SICK)
    assert notes_of(before, SICK) == []  # the report used is run1's, from 2025
    code, after = found["2030"]
    assert SICK not in placed(after) and after["conflicts"] == [] and after["drain"] == []


# --- item 4: expectations -------------------------------------------------------------------


def fleet_run_json(nodes: Sequence[str], never: Dict[str, str], folder: str) -> str:
    from datetime import datetime, timezone

    from ibdiag.fleet.run_record import FleetRun, NodeOutcome

    now = datetime(2025, 3, 3, 2, 0, tzinfo=timezone.utc)
    outcomes = [
        NodeOutcome(node=node, answered=node not in never, reason=never.get(node, ""))
        for node in nodes
    ]
    return FleetRun(
        tool_version="x", level="full", node_timeout_s=900, started_at=now, ended_at=now,
        out_dir=folder, srun_argv=["srun"], expected=len(nodes),
        answered_nodes=[n for n in nodes if n not in never], never_answered_nodes=list(never),
        nodes=outcomes, exit_code=1 if never else 0,
    ).model_dump_json()  # fmt: skip


def broken_summaries(folder: Path) -> Dict[str, Tuple[Any, str]]:
    """What fleet-run.json may be instead of a fleet run's summary, and the problem's line."""
    valid = json.loads(fleet_run_json([*SMALL, "gpu0099"], {"gpu0099": "time limit"}, "x"))
    wrong_type = {**valid, "nodes": "gpu0099"}
    names = {**valid, "nodes": [*valid["nodes"], {"node": "a,b", "answered": False},
                                {"node": "gpu[003-009]", "answered": False}]}  # fmt: skip
    return {
        "not JSON": ("{not json", "not JSON ("),
        "wrong field": (json.dumps(wrong_type), "not a fleet run summary ibdiag can read (1 "),
        "odd names": (json.dumps(names), "names 2 nodes no node can be called ('a,b', "),
        "too large": (None, "more than 64 MiB, the most a fleet run summary may be"),
        "a FIFO": (None, "a FIFO, not a report or bundle"),
    }


@pytest.mark.parametrize("case", list(broken_summaries(Path("."))))
def test_a_fleet_run_summary_that_cannot_be_read_is_a_problem_that_counts(fleet, tmp_path, case):
    """Not skipped in silence (so that no node would be missing): one read problem line, and
    the fleet CRITICAL - which nodes should have answered is unknown."""
    from ibdiag.fleet.run_record import SUMMARY_NAME

    folder = directory(tmp_path / "d", fleet, SMALL)
    content, line = broken_summaries(tmp_path)[case]
    summary = Path(folder, SUMMARY_NAME)
    if case == "too large":
        with open(summary, "wb") as handle:
            handle.truncate((64 << 20) + 1)  # sparse: refused by its size, never read
    elif case == "a FIFO":
        os.mkfifo(summary)
    else:
        summary.write_text(content)
    code, report = fleet_report(folder, "--workers", "1")
    assert code == 2, report["verdict_reason"]
    assert "the fleet run's list of expected nodes unreadable" in report["verdict_reason"]
    (problem,) = report["read_problems"]
    assert problem["source"] == str(summary) and line in problem["reason"]
    assert report["missing"] is None and report["nodes_read"] == len(SMALL)
    # The same fleet with a summary that can be read: gpu0099 is missing.
    summary.unlink()
    summary.write_text(fleet_run_json([*SMALL, "gpu0099"], {"gpu0099": "time limit"}, folder))
    code, report = fleet_report(folder, "--workers", "1")
    assert report["missing"]["nodes"] == "gpu0099" and report["read_problems"] == []


def framing(fleet: str) -> Dict[str, str]:
    """Three reports of nodes nobody runs, failing on gpu0031's leaf port as gpu0031 does."""
    files = {}
    for n in (1, 2, 3):
        data = json.loads(text_of(fleet, SICK))
        data["snapshot"]["host"] = f"gpu900{n}"
        data["snapshot"]["boot_id"] = f"forged-{n}"
        for rail, device in enumerate(data["snapshot"]["devices"]):
            device["node_guid"] = f"0xdead{n:04x}0000{rail:04x}"
        files[f"gpu900{n}.json"] = json.dumps(data)
    return files


def blamed(report: dict) -> List[Tuple[str, bool, str]]:
    return [(s["peer_name"], s["suspect"], s["failing_nodes"]) for s in report["switches"]]


def test_reports_nobody_expected_are_listed_and_cannot_frame_a_switch(fleet, baseline, tmp_path):
    """Three forged reports failing on gpu0031's leaf make it a suspect and move gpu0031's
    ticket from drain to switch-suspect - unless the nodes expected are known: then they are
    unexpected, listed, kept out of switch blame, and gpu0031 is drained."""
    from ibdiag.fleet.run_record import SUMMARY_NAME

    folder = directory(tmp_path / "d", fleet, **framing(fleet))
    code, blind = fleet_report(folder)
    suspects = [host for group in blind["switch_suspect"] for host in expand(group["nodes"])]
    assert SICK in suspects and "gpu9001" in suspects and blind["drain"] == []
    assert blind["unexpected"] is None
    hosts = [f"gpu{n:04d}" for n in range(1, NODES + 1)]
    Path(folder, SUMMARY_NAME).write_text(fleet_run_json(hosts, {}, folder))
    for args in (["--expect-nodes", "gpu[0001-0128]"], []):  # given, or fleet run's list
        code, report = fleet_report(folder, *args)
        validate(report)
        # Their own reports say CRITICAL: drained as such, named unexpected too.
        assert code == 2 and report["drain"][0]["nodes"] == "gpu[0031,9001-9003]"
        assert report["unexpected"]["nodes"] == "gpu[9001-9003]"
        assert report["switch_suspect"] == baseline[1]["switch_suspect"]
        assert blamed(report) == blamed(baseline[1])
        assert "3 unexpected nodes" not in report["verdict_reason"]  # CRITICAL: its own parts
    text = cli("fleet", "report", folder).stdout.splitlines()
    title = "unexpected (answered, not expected; kept out of switch blame, outliers and drift):"
    assert text[text.index(title) + 1].endswith(": gpu[9001-9003] (3)")


def test_reports_nobody_expected_cannot_outvote_the_fleets_firmware(fleet, tmp_path):
    """Twelve forged reports with another firmware outnumber the eleven real nodes: counted as
    peers they would make the real firmware the drift minority; unexpected, they are no
    majority, and the outliers are the real nodes' alone."""
    forged = {}
    for n in range(1, 13):
        data = json.loads(text_of(fleet, HEALTHY))
        data["snapshot"]["host"] = f"gpu{9000 + n}"
        data["snapshot"]["boot_id"] = f"forged-{n}"
        for rail, device in enumerate(data["snapshot"]["devices"]):
            device["node_guid"] = f"0xbeef{n:04x}0000{rail:04x}"
            device["fw_ver"] = "99.99.9999"
        forged[f"gpu{9000 + n}.json"] = json.dumps(data)
    expect = ("--expect-nodes", ",".join(SMALL))
    _, honest = fleet_report(directory(tmp_path / "honest", fleet, SMALL), *expect)
    _, report = fleet_report(directory(tmp_path / "d", fleet, SMALL, **forged), *expect)
    assert report["unexpected"]["count"] == 12
    assert report["drift"] == honest["drift"]
    assert not [d for d in report["drift"] if "99.99.9999" in json.dumps(d)]
    assert report["outliers"] == honest["outliers"]


ABSENT = "gpu0011"  # expected, never answered
TEN = [f"gpu{n:04d}" for n in range(1, 11)]  # the ten healthy nodes that did
NEVER = "no answer: its task never ran, or died before it could say"


def standing_in(fleet: str, host: str) -> str:
    """gpu0002's report as another machine saying ``host``: its own boot id and GUIDs."""
    data = json.loads(text_of(fleet, HEALTHY))
    data["snapshot"]["host"] = host
    data["snapshot"]["boot_id"] = "forged-stand-in"
    for rail, device in enumerate(data["snapshot"]["devices"]):
        device["node_guid"] = f"0xfeed00000000{rail:04x}"
    return json.dumps(data)


def expecting(folder: str, source: str) -> List[str]:
    """The fleet report's arguments that expect TEN and ABSENT: a fleet run's summary in the
    folder (ABSENT never answered), or --expect-nodes."""
    from ibdiag.fleet.run_record import SUMMARY_NAME

    if source == "fleet run":
        Path(folder, SUMMARY_NAME).write_text(
            fleet_run_json([*TEN, ABSENT], {ABSENT: NEVER}, folder)
        )
        return []
    return ["--expect-nodes", "gpu[0001-0011]"]


@pytest.mark.parametrize(
    "source,name",
    [
        ("fleet run", "zz-evil.json"),
        ("fleet run", f"{ABSENT}-20261127.json"),  # fleet run writes DIR/<node>.json only
        ("--expect-nodes", "zz-evil.json"),
        ("--expect-nodes", f"zz{ABSENT}.json"),  # the host, but not as a word of the name
    ],
)
def test_a_report_under_another_name_cannot_stand_in_for_an_expected_node(
    fleet, tmp_path, source, name
):
    """The reviewer's case: gpu0001-0010 answered, gpu0011 never did (CRITICAL, 1 missing);
    zz-evil.json (gpu0002's report saying host gpu0011, its own boot id and GUIDs) made the
    fleet OK, 11 nodes, no note. A report in a file not named for the node answers for
    nobody: gpu0011 stays missing, the stand-in is listed unexpected with a note naming its
    file and the host it claims, and it is kept out of drift, outliers and switch blame."""
    folder = directory(tmp_path / "d", fleet, TEN)
    args = expecting(folder, source)
    code, honest = fleet_report(folder, *args)
    assert code == 2 and honest["verdict_reason"] == "1 expected node missing"
    assert honest["missing"]["nodes"] == ABSENT and honest["unexpected"] is None
    Path(folder, name).write_text(standing_in(fleet, ABSENT))
    code, report = fleet_report(folder, *args)
    validate(report)
    assert code == 2 and report["verdict_reason"] == "1 expected node missing"
    assert report["missing"]["nodes"] == ABSENT and report["nodes_read"] == len(TEN) + 1
    assert report["unexpected"]["nodes"] == ABSENT
    (note,) = notes_of(report, ABSENT)
    assert note.startswith(f"{name} says host {ABSENT}, an expected node, but ")
    assert note.endswith(": it answers for no node")
    assert report["drift"] == honest["drift"] and report["outliers"] == honest["outliers"]
    assert blamed(report) == blamed(honest)
    text = cli("fleet", "report", folder, *args).stdout.splitlines()
    assert text[0].startswith("IBDIAG FLEET CRITICAL - 1 expected node missing")
    assert text[text.index("missing (expected, no report):") + 1] == f"  {ABSENT} (1)"


@pytest.mark.parametrize(
    "source,name,host",
    [
        ("fleet run", f"{ABSENT}.json", ABSENT),
        ("fleet run", f"{ABSENT}.json", "vm-7f3a"),  # the kernel's name is not Slurm's
        ("--expect-nodes", f"{ABSENT}.json", ABSENT),
        ("--expect-nodes", f"{ABSENT}.json", f"{ABSENT}.cluster.example"),
        ("--expect-nodes", f"{ABSENT}-20261127.json", ABSENT),
        ("--expect-nodes", f"ibdiag-{ABSENT}-20261127T101500Z.json", ABSENT),
        ("--expect-nodes", f"2026-11-27_{ABSENT}.json", f"{ABSENT}.cluster.example"),
    ],
)
def test_a_report_named_for_its_node_still_answers(fleet, tmp_path, source, name, host):
    """The rule stops stand-ins, not the node's own report: under its fleet run name, or
    (gathered by hand, --expect-nodes) in a file whose name holds its host as a word."""
    folder = directory(tmp_path / "d", fleet, TEN)
    args = expecting(folder, source)
    Path(folder, name).write_text(standing_in(fleet, host))
    code, report = fleet_report(folder, *args)
    assert code == 0, report["verdict_reason"]
    assert report["missing"] is None and report["unexpected"] is None
    assert report["read_notes"] == [] and report["counts"]["OK"] == len(TEN) + 1


def test_a_bundle_named_for_its_node_answers_for_it(fleet, tmp_path):
    """A support bundle gathered by hand (``ibdiag-<host>-<time>.tar.gz``, as collect names
    it) answers for its host under --expect-nodes; renamed ``zz.tar.gz``, for nobody."""
    from test_fleet_read import make_bundle

    tarball = make_bundle(tmp_path, ABSENT, tarball=True)
    assert os.path.basename(tarball).startswith(f"ibdiag-{ABSENT}-")
    folder = directory(tmp_path / "d", fleet, TEN)
    shutil.copy(tarball, folder)
    code, report = fleet_report(folder, "--expect-nodes", "gpu[0001-0011]")
    assert report["missing"] is None and report["unexpected"] is None
    os.rename(Path(folder, os.path.basename(tarball)), Path(folder, "zz.tar.gz"))
    code, report = fleet_report(folder, "--expect-nodes", "gpu[0001-0011]")
    assert code == 2 and report["missing"]["nodes"] == ABSENT
    (note,) = notes_of(report, ABSENT)
    assert note.startswith(f"zz.tar.gz says host {ABSENT}, an expected node, but ")


def test_an_unexpected_node_alone_makes_the_fleet_warn(fleet, tmp_path):
    folder = directory(tmp_path / "d", fleet, ["gpu0001", "gpu0002", "gpu0003"])
    code, report = fleet_report(folder, "--expect-nodes", "gpu[0001-0002]")
    assert code == 1 and report["verdict_reason"] == "1 unexpected node"


def test_expect_nodes_that_no_node_can_be_called_is_a_usage_error(fleet, tmp_path):
    folder = directory(tmp_path / "d", fleet, ["gpu0001"])
    done = cli("fleet", "report", folder, "--expect-nodes", "gpu0001,bad name")
    assert done.exit_code == 3 and len(done.stderr.splitlines()) == 1
    assert "--expect-nodes: 'bad name' cannot be a node name" in done.stderr


# --- item 13 (fleet): drained nodes, drift rows, many read problems ---------------------------


def test_a_node_slurm_had_drained_is_reported_not_run_not_missing(fleet, tmp_path):
    """fleet-run.json says why a node never answered: Slurm's state is its reason, and it is
    no missing node; one that was run and never answered, or that Slurm does not know, is
    still missing."""
    from ibdiag.fleet.run_record import SUMMARY_NAME

    folder = directory(tmp_path / "d", fleet, SMALL)
    never = {
        "gpu0098": "not run: Slurm state drained",
        "gpu0099": "no answer: its task never ran, or died before it could say",
        "gpu0100": "not run: Slurm state drained",
        "gpu0101": "not run: not a node known to Slurm (sinfo does not list it)",
    }
    Path(folder, SUMMARY_NAME).write_text(fleet_run_json(SMALL + list(never), never, folder))
    code, report = fleet_report(folder, "--workers", "1")
    validate(report)
    assert code == 2 and report["missing"]["nodes"] == "gpu[0099,0101]"
    assert report["not_run"] == [
        {"reason": "not run: Slurm state drained", "nodes": "gpu[0098,0100]", "count": 2}
    ]
    assert report["counts"]["MISSING"] == 2 and report["counts"]["NOT_RUN"] == 2
    text = cli("fleet", "report", folder, "--workers", "1").stdout.splitlines()
    title = "not run (expected; fleet run did not run them, by reason):"
    assert text[text.index(title) + 1] == "  not run: Slurm state drained: gpu[0098,0100] (2)"
    html = cli("fleet", "report", folder, "--workers", "1", "--format", "html").stdout
    assert "not run: Slurm state drained" in html
    drained = {node: why for node, why in never.items() if "drained" in why}
    Path(folder, SUMMARY_NAME).write_text(fleet_run_json(SMALL + list(drained), drained, folder))
    code, report = fleet_report(folder, "--workers", "1")
    assert code == 2 and report["missing"] is None  # CRITICAL: gpu0031's own verdict
    assert report["verdict_reason"] == "1 CRITICAL node"
    folder = directory(tmp_path / "healthy", fleet, SMALL[:-1])
    Path(folder, SUMMARY_NAME).write_text(
        fleet_run_json(SMALL[:-1] + list(drained), drained, folder)
    )
    code, report = fleet_report(folder, "--workers", "1")
    assert code == 1 and report["verdict_reason"].endswith("2 expected nodes not run")


def drift_rows(html: str) -> List[str]:
    section = html[html.index('<h2 id="drift">') : html.index('<h2 id="rails">')]
    return re.findall(r"<tr><td class=\"id\"><code>([^<]*)</code></td>\s*<td>([^<]*)</td>", section)


def test_drift_is_folded_alike_in_text_and_html(fleet, tmp_path):
    """One node on other firmware on all 8 HCAs: one drift line in the text and one row in the
    HTML (rails 0-7), not 8 rows for one fact."""
    folder = directory(tmp_path / "d", fleet)
    text = cli("fleet", "report", folder).stdout.splitlines()
    start = text.index("drift (the majority, then the others):") + 1
    lines = text[start : text.index("", start)]
    html = cli("fleet", "report", folder, "--format", "html").stdout
    rows = drift_rows(html)
    assert len(rows) == len(lines) < 8 and f'<h2 id="drift">Drift ({len(rows)})</h2>' in html
    assert [f"  {name} rails {rails}:" for name, rails in rows if rails != "node-wide"] == [
        line.split(":")[0] + ":" for line in lines if " rails " in line
    ]
    assert ("fw_ver", "0-7") in rows


def test_the_verdict_counts_drift_as_the_sections_show_it(fleet, baseline, tmp_path):
    """The fleet's healthy and warning nodes (no CRITICAL one, so the verdict line lists the
    drift): the verdict counted a drift per rail (14) where the text and HTML fold the rails
    (7 lines, ``Drift (7)``); now all three say the same number."""
    critical = {host for host, (section, _) in placed(baseline[1]).items() if section in GROUPS[:2]}
    hosts = [f"gpu{n:04d}" for n in range(1, NODES + 1) if f"gpu{n:04d}" not in critical]
    folder = directory(tmp_path / "d", fleet, hosts)
    text = cli("fleet", "report", folder).stdout.splitlines()
    assert text[0].startswith("IBDIAG FLEET WARNING - "), text[0]
    start = text.index("drift (the majority, then the others):") + 1
    lines = text[start : text.index("", start)]
    html = cli("fleet", "report", folder, "--format", "html").stdout
    (counted,) = re.findall(r"(\d+) drifting attributes?\b", text[0])
    assert int(counted) == len(lines) == len(drift_rows(html)) < 8
    assert f'<h2 id="drift">Drift ({counted})</h2>' in html
    _, report = fleet_report(folder)
    assert f"{counted} drifting attribute" in report["verdict_reason"]


def test_read_problems_of_100000_files_are_counted_past_the_first_1000(fleet, tmp_path):
    """100,000 inputs that give no node beside one node's report: the first 1,000 listed, then
    "and 99000 more", and every count - the verdict's too - says 100,000; the JSON stays small
    (about 100 kB, not 11 MB) and the run takes seconds."""
    folder = directory(tmp_path / "d", fleet, ["gpu0001"])
    for n in range(100_000):
        Path(folder, f"not a node {n:06d}.json").write_bytes(b"")
    out = tmp_path / "fleet.json"
    code, report = fleet_report(folder, "--workers", "1", out=out)
    assert code == 1 and report["verdict_reason"] == "100000 unreadable inputs"
    assert len(report["read_problems"]) == 1000 and report["read_problem_count"] == 100_000
    assert report["read_problems"][-1]["source"].endswith("not a node 000999.json")
    assert out.stat().st_size < 200_000 and report["nodes_read"] == 1
    text = cli("fleet", "report", folder, "--workers", "1").stdout.splitlines()
    assert "  and 99000 more (read problems: 100000)" in text
    assert len([line for line in text if line.endswith(": an empty file, not JSON")]) == 1000
    html = cli("fleet", "report", folder, "--workers", "1", "--format", "html").stdout
    assert "Read problems (100000)" in html and "and 99000 more" in html
    assert html.count("an empty file, not JSON") == 1000
