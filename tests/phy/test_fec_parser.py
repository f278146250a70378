"""perfquery -T (PortExtendedSpeedsCounters) -> ``PortFec``: both layouts, each typed field,
odd input, and what became of the run (``ibdiag.families.perfquery_fec``).

The healthy texts are hand-made from libibmad's field list (tests/captures/perfquery-T/SOURCES.md);
the refusal is the real perfquery 44.0 against the ibsim simulator."""

from __future__ import annotations

import re

import pytest
from conftest import read_capture
from fec_captures import capture
from snapshots import device, port, snapshot, with_runs

from ibdiag.facts.fec import EXTENDED_SPEEDS, RS_FEC, PortFec, fec_role
from ibdiag.facts.outcome import NoData
from ibdiag.families import families
from ibdiag.families import perfquery_fec as family
from ibdiag.families.perfquery_fec import parse_fec, port_fec
from ibdiag.model import CommandRun

EXTENDED = capture("handmade-T-extended-speeds-edr-hca.txt")
RS = capture("handmade-T-rs-fec-hdr-switch-port21.txt")
IBSIM_OUT = capture("ibsim-T-local-unsupported.txt")
IBSIM_ERR = capture("ibsim-T-local-unsupported.stderr")
TARGET = "mlx5_0:1"


def run(stdout: str = "", rc=0, stderr: str = "", **kw) -> CommandRun:
    return CommandRun(argv=family.argv("mlx5_0", 1), role=fec_role(TARGET), rc=rc,
                      stdout=stdout, stderr=stderr, **kw)  # fmt: skip


def test_the_family_is_found_at_level_standard():
    assert family in families() and (family.SOURCE, family.LEVEL) == ("perfquery_fec", "standard")
    assert str(fec_role(TARGET)) == "perfquery_fec-T mlx5_0:1"


# --- the extended-speeds layout: each field ---------------------------------------------------


def test_extended_speeds_layout_header_and_port_fields():
    fec = parse_fec(EXTENDED)
    assert fec.layout == EXTENDED_SPEEDS and fec.problems == [] and fec.mad_error is None
    assert (fec.lid, fec.port) == (12, 1)
    assert (fec.sync_header_errors, fec.unknown_blocks) == (0, 0)
    assert len(fec.lanes) == 12 and [lane.lane for lane in fec.lanes] == list(range(12))


def test_extended_speeds_layout_lanes():
    fec = parse_fec(EXTENDED)
    assert [lane.corrected_blocks for lane in fec.lanes[:5]] == [112, 97, 131, 105, 0]
    assert [lane.uncorrected_blocks for lane in fec.lanes] == [0] * 12
    assert [lane.error_detection for lane in fec.lanes[:4]] == [3, 1, 4, 2]
    assert all(lane.corrected_symbols is None for lane in fec.lanes)
    assert fec.lanes[2].corrected == 131


def test_extended_speeds_layout_port_totals_sum_the_lanes():
    fec = parse_fec(EXTENDED)
    assert (fec.corrected_blocks, fec.uncorrected_blocks) == (112 + 97 + 131 + 105, 0)
    assert fec.corrected_symbols is None
    assert fec.lane_unit == "corrected blocks"


# --- the RS-FEC layout: each field ------------------------------------------------------------


def test_rs_fec_layout_header_and_port_fields():
    fec = parse_fec(RS)
    assert fec.layout == RS_FEC and fec.problems == [] and (fec.lid, fec.port) == (1719, 21)
    assert (fec.sync_header_errors, fec.unknown_blocks) == (0, 0)


def test_rs_fec_layout_lanes_are_corrected_symbols():
    fec = parse_fec(RS)
    assert [lane.corrected_symbols for lane in fec.lanes[:4]] == [1520, 1433, 1610, 1498]
    assert all(lane.corrected_blocks is None and lane.uncorrected_blocks is None
               for lane in fec.lanes)  # fmt: skip
    assert fec.lane_corrected()[3] == 1498 and fec.lane_unit == "corrected symbols"


def test_rs_fec_layout_port_totals():
    fec = parse_fec(RS)
    assert (fec.corrected_blocks, fec.uncorrected_blocks, fec.corrected_symbols) == (5931, 0, 6061)


def test_rs_fec_layout_is_known_by_its_fields_without_a_header():
    body = RS.split("\n", 1)[1]
    assert parse_fec(body).layout == RS_FEC
    assert parse_fec(EXTENDED.split("\n", 1)[1]).layout == EXTENDED_SPEEDS


# --- odd input: recorded problems, never an exception ----------------------------------------


@pytest.mark.parametrize("text", ["", None, b"\xff\xfe\x00junk", "garbage\nmore garbage"])
def test_garbage_reads_nothing_with_a_problem(text):
    fec = parse_fec(text)
    assert fec.layout is None and fec.lanes == [] and fec.problems


def test_na_value_is_a_problem_and_the_lane_reads_none():
    text = re.sub(r"(FECCorrectableBlockCtrLane1:\.+)97", r"\1N/A", EXTENDED)
    assert "N/A" in text
    fec = parse_fec(text)
    assert fec.layout == EXTENDED_SPEEDS and fec.lanes[1].corrected_blocks is None
    assert any("N/A" in problem for problem in fec.problems)
    assert fec.corrected_blocks == 112 + 131 + 105  # the lanes read


def test_truncated_output_names_the_missing_fields():
    """perfquery's 1536-byte buffer cuts the extended-speeds layout short when values are wide."""
    lines = EXTENDED.splitlines()
    fec = parse_fec("\n".join(lines[:-5]))
    assert fec.layout == EXTENDED_SPEEDS
    assert fec.lanes[11].uncorrected_blocks is None and fec.lanes[6].uncorrected_blocks == 0
    assert any("5 fields missing" in problem for problem in fec.problems), fec.problems


def test_a_value_wider_than_its_field_is_left_out():
    text = re.sub(r"(SyncHeaderErrorCounter:\.+)0", r"\g<1>70000", EXTENDED)
    fec = parse_fec(text)
    assert fec.sync_header_errors is None and any("16 bits" in p for p in fec.problems)


def test_other_perfquery_output_is_not_fec():
    text = read_capture("perfquery", "infiniband_exporter-x-hca-edr-lid133.txt")
    fec = parse_fec(text)
    assert fec.layout is None and "not PortExtendedSpeedsCounters" in fec.problems[0]


def test_the_simulators_refusal_is_a_mad_error():
    fec = parse_fec(IBSIM_OUT + IBSIM_ERR)
    assert fec.layout is None and "cannot query PortExtendedSpeedsCounters" in fec.mad_error


# --- what became of the run ------------------------------------------------------------------


def test_a_run_that_printed_counters_is_read():
    fec = port_fec(run(RS))
    assert (
        fec.read and fec.outcome.no_data is None and fec.outcome.command.startswith("perfquery -T")
    )


def test_the_simulators_refusal_is_not_supported():
    fec = port_fec(run(IBSIM_OUT, rc=255, stderr=IBSIM_ERR))
    assert not fec.read and fec.outcome.no_data == NoData.NOT_SUPPORTED
    assert "cannot query PortExtendedSpeedsCounters" in fec.outcome.reason


def test_not_installed_and_timed_out_say_so():
    missing = port_fec(run(rc=None, not_found=True))
    assert missing.outcome.no_data == NoData.NOT_INSTALLED and not missing.read
    hung = port_fec(run(rc=None, timed_out=True, duration_s=5.0))
    assert hung.outcome.no_data == NoData.TIMED_OUT


def test_exit_0_with_garbage_is_garbage():
    fec = port_fec(run("hello\n"))
    assert fec.outcome.no_data == NoData.GARBAGE and "perfquery -T" in fec.outcome.reason


# --- planning and interpreting ---------------------------------------------------------------


def test_plans_every_active_infiniband_port_and_no_ethernet_port():
    snap = snapshot([
        device("mlx5_0", ports=[port(1), port(2, state=1)]),
        device("mlx5_1", ports=[port(1, link_layer="Ethernet")]),
        device("mlx5_2", ports=[port(1), port(3)]),
    ])  # fmt: skip
    planned = family.plan(snap)
    assert [str(item.role) for item in planned] == [
        "perfquery_fec-T mlx5_0:1", "perfquery_fec-T mlx5_2:1", "perfquery_fec-T mlx5_2:3"
    ]  # fmt: skip
    assert planned[-1].argv == ["perfquery", "-T", "-C", "mlx5_2", "-P", "3"]
    assert all(item.refused is None for item in planned)


def test_a_name_no_command_may_carry_is_planned_refused():
    planned = family.plan(snapshot([device("mlx5 0;rm", ports=[port(1)])]))
    assert len(planned) == 1 and planned[0].refused


def test_interpret_sets_the_port_fact_and_it_survives_json():
    snap = with_runs(snapshot([device("mlx5_0", ports=[port(1)])]), run(EXTENDED))
    fec = snap.devices[0].ports[0].facts["fec"]
    assert isinstance(fec, PortFec) and fec.layout == EXTENDED_SPEEDS
    again = type(snap).model_validate_json(snap.model_dump_json())
    assert again.devices[0].ports[0].facts["fec"] == fec
