"""The far end's ``perfquery -T`` (role ``partner-perfquery-T``) -> ``Partner.fec``, through the
partner family's interpreter, on the switch-hdr chain captures (tests/captures/ibsim-partner)
with -T answered by a stub: the simulator's refusal (real), or a hand-made RS-FEC reading."""

from __future__ import annotations

from typing import List

import stubs as S
from fec_captures import capture
from snapshots import builtin_registry, by_target, device, port, snapshot

from ibdiag import roles
from ibdiag.facts.fec import RS_FEC
from ibdiag.facts.outcome import NoData
from ibdiag.families import Runs, apply
from ibdiag.families import partner as family
from ibdiag.families.partner import chain as source
from ibdiag.grade import run_check
from ibdiag.model import CommandRun, Status
from ibdiag.thresholds import Thresholds

TARGET = "mlx5_0:1"
RS = capture("handmade-T-rs-fec-hdr-switch-port21.txt")
IBSIM_OUT = capture("ibsim-T-switch-port-unsupported.txt")
IBSIM_ERR = capture("ibsim-T-switch-port-unsupported.stderr")


def step(name: str, capture: str = "", *, rc=0, stdout: str = "", stderr: str = "", **kw):
    argv = source.steps("mlx5_0", 1, 1000, local_port=1, lid=1)[name].argv
    if capture:
        stdout = open(S.partner_capture(capture)).read()
    return CommandRun(argv=argv, role=roles.partner(name, TARGET), rc=rc, stdout=stdout,
                      stderr=stderr, **kw)  # fmt: skip


def chain(fec_run: CommandRun) -> List[CommandRun]:
    return [
        step("nodeinfo", "switch-hdr-nodeinfo.txt"),
        step("nodedesc", "switch-hdr-nodedesc.txt"),
        step("portinfo", "switch-hdr-portinfo.txt"),
        step("portinfo0", "switch-hdr-portinfo0.txt"),
        step("perfquery-x", "switch-hdr-perfquery-x.txt"),
        step("perfquery", "switch-hdr-errors-perfquery.txt"),
        fec_run,
    ]


def graded(*runs: CommandRun):
    commands = {run.key: run for run in runs}
    snap = snapshot([device("mlx5_0", ports=[port(1)])]).model_copy(update={"commands": commands})
    snap = apply(snap, family.interpret(snap, Runs(commands)), family.SOURCE)
    results = run_check(builtin_registry().get("phy.fec"), snap, Thresholds(), baseline=None)
    return snap.devices[0].ports[0].partner, by_target(results)


def test_the_chain_plans_T_on_the_far_ends_lid_and_port():
    planned = source.steps("mlx5_0", 1, 125, local_port=21, lid=5)["perfquery-T"]
    assert planned.argv == ["perfquery", "-C", "mlx5_0", "-P", "1", "-t", "125", "-T", "5", "21"]
    assert "perfquery-T" in roles.PARTNER_STEPS and "perfquery-T" not in source.CONDITIONAL_STEPS


def test_the_simulators_refusal_is_not_supported_and_no_symptom():
    refused = step("perfquery-T", rc=255, stdout=IBSIM_OUT, stderr=IBSIM_ERR)
    far, results = graded(*chain(refused))
    assert far.fec is not None and far.fec.outcome.no_data == NoData.NOT_SUPPORTED
    assert not any(why.step == "perfquery-T" for why in far.unread)  # optional: never a symptom
    assert far.runs["perfquery-T"].rc == 255
    cable = "mlx5_0:1<->leaf07/1"
    assert results[cable].status == Status.SKIP
    assert "cannot query PortExtendedSpeedsCounters" in results[cable].message


def test_real_T_output_on_the_far_end_is_graded():
    text = RS.replace("Lid 1719 port 21", "Lid 1 port 1").replace(
        "PortFECUncorrectableBlockCtr:....0", "PortFECUncorrectableBlockCtr:....4"
    )
    far, results = graded(*chain(step("perfquery-T", stdout=text)))
    assert far.fec.layout == RS_FEC and far.fec.uncorrected_blocks == 4
    result = results["mlx5_0:1<->leaf07/1"]
    assert result.status == Status.WARN and "4 uncorrectable FEC blocks since the last reset" in (
        result.message
    )
    assert result.evidence == [" ".join(step("perfquery-T").argv)]


def test_an_answer_for_another_port_is_implausible_and_not_graded():
    far, results = graded(*chain(step("perfquery-T", stdout=RS)))  # Lid 1719 port 21: not asked
    assert far.fec.layout is None and far.fec.outcome.no_data == NoData.IMPLAUSIBLE
    assert results["mlx5_0:1<->leaf07/1"].status == Status.SKIP


def test_T_never_started_when_the_lid_is_unknown():
    why = "needs partner-nodeinfo mlx5_0:1, which did not succeed: ..."
    never = CommandRun(argv=step("perfquery-T").argv, role=roles.partner("perfquery-T", TARGET),
                       skipped=why)  # fmt: skip
    far, results = graded(step("nodeinfo", rc=None, timed_out=True, duration_s=1.0), never)
    assert far.fec.outcome.no_data == NoData.NOT_STARTED and why in far.fec.outcome.reason
    unnamed = results["mlx5_0:1<->?"]  # nothing names the far end: never our own port's target
    assert unnamed.status == Status.SKIP and why in unnamed.message
