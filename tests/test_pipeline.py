"""The one grading sequence (ibdiag.pipeline): settle thresholds and checks, collect, read the
baseline, save the state, grade - shared by `ibdiag check`, `collect`, `report`, `export`,
`serve` and the Slurm hooks."""

from __future__ import annotations

import json
import os

import pytest
from conftest import SCENARIOS_DIR

from ibdiag.cli.options import pipeline_options
from ibdiag.config import ConfigError
from ibdiag.errors import IbdiagError
from ibdiag.model import Status
from ibdiag.pipeline import (
    Input,
    Pipeline,
    PipelineOptions,
    SetupError,
    effective_config,
    grade,
    grade_recorded,
)

GOOD = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-good", "root")
OPTIONS = PipelineOptions(
    sysfs_root=os.path.join(GOOD, "sys"), procfs_root=os.path.join(GOOD, "proc")
)


def _baseline_results(report):
    return [r for r in report.results if r.check_id == "counters.baseline"]


def test_options_are_immutable_and_know_when_expectations_were_given():
    with pytest.raises(AttributeError):
        OPTIONS.level = "full"  # type: ignore[misc]
    assert not OPTIONS.expectations_given
    assert not OPTIONS._replace(level="standard", checks_dirs=("/x",)).expectations_given
    for given in ({"profile": "generic"}, {"expect_rate": 200.0}, {"ignore_hcas": ("mlx5_an*",)}):
        assert OPTIONS._replace(**given).expectations_given


def test_prepare_settles_thresholds_and_the_sources_the_level_needs():
    quick = Pipeline.prepare(OPTIONS._replace(expect_hcas="8", expect_rate=200.0))
    assert quick.thresholds.expect_hcas == 8 and quick.thresholds.expect_rate_gbps == 200.0
    assert "sysfs" in quick.needs and "perfquery" not in quick.needs
    assert "perfquery" in Pipeline.prepare(OPTIONS._replace(level="standard")).needs


def test_a_bad_setting_is_one_ibdiag_error_raised_once_not_translated():
    with pytest.raises(SetupError, match="give a count"):
        effective_config(OPTIONS._replace(expect_hcas=",,"))
    with pytest.raises(ConfigError, match="no-such-profile") as raised:
        Pipeline.prepare(OPTIONS._replace(profile="no-such-profile"))
    assert isinstance(raised.value, IbdiagError) and raised.value.__cause__ is None


def test_run_grades_the_node_at_the_options_level():
    report = Pipeline.prepare(OPTIONS).run()
    assert report.level == "quick" and report.verdict.value == "OK"
    assert report.snapshot.sysfs_root == OPTIONS.sysfs_root
    [skip] = _baseline_results(report)
    assert skip.status == Status.SKIP  # no baseline asked for


def test_a_baseline_that_cannot_be_used_is_a_warning_on_a_new_snapshot(tmp_path):
    pipeline = Pipeline.prepare(OPTIONS)
    snapshot = pipeline.collect()
    missing = str(tmp_path / "nope.json")
    report = pipeline.grade_snapshot(snapshot, baseline_path=missing)
    assert "no such file" in report.snapshot.problems["baseline"]
    assert "baseline" not in snapshot.problems  # the collected snapshot is left as it was
    [warn] = _baseline_results(report)
    assert warn.status == Status.WARN


def test_the_state_is_saved_before_grading_and_used_as_the_next_baseline(tmp_path):
    pipeline = Pipeline.prepare(OPTIONS)
    state = tmp_path / "state" / "ibdiag.json"  # its directory is made (0700)
    first = pipeline.run(save_path=str(state))
    saved = json.loads(state.read_text())
    assert saved["collected_at"] == first.snapshot.model_dump(mode="json")["collected_at"]
    second = pipeline.run(baseline_path=str(state), save_path=str(state))
    [passed] = _baseline_results(second)
    assert passed.status == Status.PASS


def test_a_state_that_cannot_be_saved_is_a_problem_of_the_graded_snapshot(tmp_path):
    unwritable = str(tmp_path / "no" / "such" / "dir" / "state.json")
    report = Pipeline.prepare(OPTIONS).run(save_path=unwritable)
    assert "cannot write state file" in report.snapshot.problems["state"]
    assert [r.status for r in _baseline_results(report)] == [Status.WARN]


def test_command_line_parameters_map_onto_the_options_and_nothing_is_dropped():
    options = pipeline_options(
        {"level": "standard", "deadline": 9.0, "ignore_hcas": ["a*"], "checks_dirs": []},
        sysfs_root="/host/sys",
    )
    assert options == PipelineOptions(
        level="standard", deadline_s=9.0, ignore_hcas=("a*",), sysfs_root="/host/sys"
    )
    with pytest.raises(TypeError, match="listen"):
        pipeline_options({"level": "quick", "listen": "127.0.0.1:9477"})


# --- input selection: this node, or a recording of one (grade, grade_recorded) -----------------


def test_grade_without_a_recording_grades_this_node_live():
    report, pipeline = grade(OPTIONS, Input())
    assert report.snapshot.sysfs_root == OPTIONS.sysfs_root and report.verdict.value == "OK"
    assert pipeline.registry.get("counters.baseline") is not None


def test_grade_with_a_state_uses_it_when_present_and_replaces_it(tmp_path):
    state = tmp_path / "state.json"
    first, _ = grade(OPTIONS, Input(state_path=str(state)))
    assert [r.status for r in _baseline_results(first)] == [Status.SKIP]  # the first run
    assert state.is_file()
    second, _ = grade(OPTIONS, Input(state_path=str(state)))
    assert [r.status for r in _baseline_results(second)] == [Status.PASS]


def test_a_saved_report_is_graded_at_its_level_with_its_thresholds(tmp_path):
    live, _ = grade(OPTIONS._replace(expect_hcas="8"), Input())
    saved = tmp_path / "report.json"
    saved.write_text(live.model_dump_json())
    report, pipeline = grade(OPTIONS, Input(recorded=str(saved)))
    assert pipeline.options.level == live.level and pipeline.thresholds.expect_hcas == 8
    assert report.verdict == live.verdict
    # expectations given: those instead of the recorded ones
    _, regraded = grade(OPTIONS._replace(expect_hcas="4"), Input(recorded=str(saved)))
    assert regraded.thresholds.expect_hcas == 4


def test_a_bare_snapshot_is_graded_at_quick(tmp_path):
    snapshot = Pipeline.prepare(OPTIONS).collect()
    saved = tmp_path / "snapshot.json"
    saved.write_text(snapshot.model_dump_json())
    report, pipeline = grade_recorded(str(saved), OPTIONS._replace(level="full"))
    assert pipeline.options.level == "quick" and report.level == "quick"


def test_a_recording_that_cannot_be_graded_is_one_setup_error(tmp_path):
    live, _ = grade(OPTIONS, Input())
    data = json.loads(live.model_dump_json())
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps({**data, "level": "turbo"}))
    with pytest.raises(SetupError, match="level 'turbo' is not one of quick, standard, full"):
        grade_recorded(str(saved), OPTIONS)
    saved.write_text(json.dumps({**data, "thresholds": {"expect_hcas": "many"}}))
    with pytest.raises(SetupError, match="the thresholds it records are not valid"):
        grade_recorded(str(saved), OPTIONS)
