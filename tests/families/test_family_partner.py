"""The far end's runs -> ``Port.partner``, on the ibsim captures (tests/captures/ibsim-partner)
and the real switch-side perfquery captures (tests/fixtures/perfquery).

Each test records CommandRuns as the family's chain (``ibdiag.families.partner.chain``) records
them (argv from its ``steps``, the role from ``ibdiag.roles.partner``, a capture as stdout),
runs the family's interpret step shared by collect and replay, and reads the typed fields.
"""

from __future__ import annotations

import os
from typing import Optional

import pytest
import stubs as S
from conftest import TESTS_DIR, read_capture
from snapshots import device, port

from ibdiag import roles
from ibdiag.facts.outcome import NoData
from ibdiag.facts.partner import Partner, PortInfo
from ibdiag.families import Runs, apply, families, without_facts
from ibdiag.families import partner as family
from ibdiag.families.partner import chain as source
from ibdiag.model import CommandRun, Port, Snapshot

TARGET = "mlx5_0:1"
SWITCH_GUID = "0x0000000000200000"


def step(name: str, capture: str = "", *, lid=1, local_port=1, rc: Optional[int] = 0, **kw):
    """The run of one step on mlx5_0 port 1; stdout is the named capture (ibsim-partner)."""
    argv = source.steps("mlx5_0", 1, 1000, local_port=local_port, lid=lid)[name].argv
    stdout = open(S.partner_capture(capture)).read() if capture else ""
    return CommandRun(argv=argv, role=roles.partner(name, TARGET), rc=rc, stdout=stdout, **kw)


def switch_chain(*, x_capture: Optional[str] = None):
    runs = [
        step("nodeinfo", "switch-hdr-nodeinfo.txt"),
        step("local-portinfo", "b2b-ca-portinfo0.txt"),
        step("nodedesc", "switch-hdr-nodedesc.txt"),
        step("portinfo", "switch-hdr-portinfo.txt"),
        step("portinfo0", "switch-hdr-portinfo0.txt"),
        step("perfquery-E", "switch-hdr-perfquery-E.txt"),
        ibsim_fec_step(),
    ]
    if x_capture is None:
        runs += [step("perfquery-x", "switch-hdr-perfquery-x.txt"),
                 step("perfquery", "switch-hdr-errors-perfquery.txt")]  # fmt: skip
    else:
        x = step("perfquery-x")
        runs.append(x.model_copy(update={"stdout": x_capture}))
    return runs


def ibsim_fec_step() -> CommandRun:
    """perfquery -T as the simulator answers it (tests/captures/perfquery-T/ibsim-T-*)."""
    folder = os.path.join(TESTS_DIR, "captures", "perfquery-T")  # see its SOURCES.md
    with open(os.path.join(folder, "ibsim-T-switch-port-unsupported.txt")) as handle:
        out = handle.read()
    with open(os.path.join(folder, "ibsim-T-switch-port-unsupported.stderr")) as handle:
        err = handle.read()
    return step("perfquery-T", rc=255).model_copy(update={"stdout": out, "stderr": err})


def interpret(devices, runs) -> Snapshot:
    """``devices`` with the family's facts from ``runs``, as collect and replay set them."""
    from snapshots import snapshot

    commands = {item.key: item for item in runs}
    snap = snapshot(devices).model_copy(update={"commands": commands})
    return apply(snap, family.interpret(snap, Runs(commands)), family.SOURCE)


def interpreted(*runs: CommandRun) -> Port:
    return interpret([device("mlx5_0")], runs).devices[0].ports[0]


def test_the_family_is_interpreted():
    assert family in families() and (family.SOURCE, family.LEVEL) == ("partner", "standard")


def test_a_switch_partner_is_typed_from_its_chain():
    found = interpreted(*switch_chain()).partner
    assert isinstance(found, Partner) and found.is_switch
    assert (found.node_type, found.node_guid, found.num_ports) == ("Switch", SWITCH_GUID, 36)
    assert (found.description, found.port, found.lid) == ("MF0;leaf07:MQM8700/U1", 1, 1)
    info = found.port_info
    assert isinstance(info, PortInfo) and str(info.role) == "partner-portinfo mlx5_0:1"
    assert (info.port, info.link_state, info.phys_link_state) == (1, "Active", "LinkUp")
    assert (info.width_active, info.speed_active) == ("4X", "HDR")
    assert info.width_supported == ["1X", "2X", "4X", "8X", "12X"]
    assert info.speed_supported == ["SDR", "DDR", "QDR", "FDR", "EDR", "HDR"]
    assert str(found.local_port_info.role) == "partner-local-portinfo mlx5_0:1"
    # ibsim's -x has no error counters: plain perfquery's reading is the one graded.
    assert str(found.counters.role) == "partner-perfquery mlx5_0:1"
    assert found.counters.counters["SymbolErrorCounter"] == 1234
    assert found.counters.counters["LinkDownedCounter"] == 3
    assert found.rcv_error_details.counters["PortLocalPhysicalErrors"] == 0
    assert found.roles == [roles.partner(name, TARGET) for name in roles.PARTNER_STEPS]
    assert found.problems == []


def test_x_with_the_error_counters_is_the_reading():
    """A real EDR switch port's -x (tests/fixtures/perfquery) carries the error counters."""
    x = read_capture("perfquery", "infiniband_exporter-x-switch-edr-0x506b4b03005c2740.txt")
    # read of LID 2052 port 1; this chain's switch (the ibsim captures) has LID 1: an answer
    # for another LID than asked is not kept (test_an_answer_for_another_lid_or_port_...)
    x = x.replace("Lid 2052 port 1", "Lid 1 port 1", 1)
    found = interpreted(*switch_chain(x_capture=x)).partner
    assert str(found.counters.role) == "partner-perfquery-x mlx5_0:1"
    assert found.counters.counters["PortXmitDiscards"] == 20046
    assert found.counters.counters["LinkDownedCounter"] == 1


def test_a_real_switch_port_rcv_error_details():
    text = read_capture("perfquery", "infiniband_exporter-E-rcverr-switch-lid1719-port2.txt")
    run = step("perfquery-E", lid=1719, local_port=2).model_copy(update={"stdout": text})
    found = interpreted(step("nodeinfo", "switch-port2-nodeinfo.txt"), run).partner
    assert found.rcv_error_details.counters["PortDLIDMappingErrors"] == 0
    assert found.port == 2 and found.lid is None  # no portinfo0 read: no LID known


def test_steps_the_chain_did_not_need_are_absent_not_failed():
    """The chain reads our own PortInfo and -E only where they can matter: without their runs
    those fields are None, nothing is a problem, the rest is read as usual."""
    unneeded = {roles.partner(name, TARGET) for name in ("local-portinfo", "perfquery-E")}
    needed = [run for run in switch_chain() if run.role not in unneeded]
    assert len(needed) == 7
    found = interpreted(*needed).partner
    assert found.local_port_info is None and found.rcv_error_details is None
    assert found.problems == [] and len(found.roles) == 7
    assert found.counters.counters["SymbolErrorCounter"] == 1234
    assert found.port_info.width_active == "4X"


def test_a_back_to_back_ca_partner_has_its_lid_in_its_own_port():
    found = interpreted(
        step("nodeinfo", "b2b-ca-nodeinfo.txt"),
        step("nodedesc", "b2b-ca-nodedesc.txt"),
        step("portinfo", "b2b-ca-portinfo.txt"),
        step("perfquery-x", "b2b-ca-perfquery-x.txt", lid=3),
        step("perfquery", "b2b-ca-perfquery.txt", lid=3),
    ).partner
    assert (found.node_type, found.is_switch, found.description) == (
        "Channel Adapter",
        False,
        "hostB mlx5_0",
    )
    assert (found.lid, found.port, found.port_guid) == (3, 1, "0x0000000000100003")
    assert str(found.counters.role) == "partner-perfquery mlx5_0:1"


def test_a_chain_that_failed_at_nodeinfo_is_collected_with_nothing_read():
    failed = [step(name, rc=None, timed_out=True, duration_s=1.0)
              for name in ("nodeinfo", "nodedesc", "portinfo0")]  # fmt: skip
    why = "needs partner-nodeinfo mlx5_0:1, which did not succeed: smpquery timed out"
    later = [
        CommandRun(argv=step(name).argv, role=roles.partner(name, TARGET), skipped=why)
        for name in ("portinfo", "perfquery-x", "perfquery-T")
    ]
    found = interpreted(*failed, *later).partner
    assert found.fec is not None and found.fec.outcome.no_data == NoData.NOT_STARTED
    assert found.model_copy(update={"unread": [], "runs": {}, "fec": None}) == Partner(
        roles=[roles.partner(name, TARGET) for name in roles.PARTNER_STEPS
               if name not in source.CONDITIONAL_STEPS])  # fmt: skip
    # killed at the command timeout: a local hang, each named; the rest never started
    assert [(why.step, why.kind, why.no_data, why.symptom) for why in found.unread] == [
        ("nodeinfo", "timed-out", NoData.TIMED_OUT, True),
        ("nodedesc", "timed-out", NoData.TIMED_OUT, True),
        ("portinfo", "never-run", NoData.NOT_STARTED, False),
        ("portinfo0", "timed-out", NoData.TIMED_OUT, True),
        ("perfquery-x", "never-run", NoData.NOT_STARTED, False),
    ]
    # what became of every run, by step: the command lines a result names as evidence
    assert {step: outcome.command for step, outcome in found.runs.items()} == {
        run.role.step: " ".join(run.argv) for run in (*failed, *later)
    }
    assert found.first_unread(("nodeinfo", "portinfo")).step == "nodeinfo"
    assert found.port_info is None and found.counters is None


def test_a_failed_run_printed_with_exit_255_has_no_reading():
    stderr = open(S.partner_capture("nodevice-nodeinfo.stderr")).read()
    found = interpreted(step("nodeinfo", "nodevice-nodeinfo.txt", rc=255, stderr=stderr)).partner
    assert found.node_type is None and found.roles == [roles.partner("nodeinfo", TARGET)]


def test_no_partner_run_is_not_collected_and_other_ports_keep_none():
    assert interpreted().partner is None
    [dev] = interpret([device("mlx5_0", ports=[port(1), port(2)])], switch_chain()).devices
    assert dev.ports[0].partner is not None and dev.ports[1].partner is None


def test_garbage_is_a_problem_not_a_crash():
    junk = step("nodeinfo").model_copy(update={"stdout": "\x00\xff garbage ::: = 12\n"})
    found = interpreted(junk).partner
    assert found.node_guid is None
    assert any(problem.startswith("nodeinfo: unparseable") for problem in found.problems)


def test_a_saved_snapshot_round_trips_and_drops_its_stale_partner():
    """JSON and back without loss; ``without_facts`` clears the partner like every fact."""
    from snapshots import snapshot

    port0 = interpreted(*switch_chain())
    snap = snapshot([device("mlx5_0", ports=[port0])])
    again = Snapshot.model_validate_json(snap.model_dump_json())
    assert again.devices[0].ports[0].partner == port0.partner
    assert without_facts(snap).devices[0].ports[0].partner is None


def test_a_partner_role_names_its_step_and_port():
    assert str(roles.partner("portinfo0", "mlx5_3:1")) == "partner-portinfo0 mlx5_3:1"
    assert all(roles.partner(name, TARGET).family == "partner" for name in roles.PARTNER_STEPS)
    assert roles.partner("perfquery-x", TARGET).family != "perfquery"  # not the local's
    with pytest.raises(ValueError, match="unknown partner step"):
        roles.partner("portinfo 1", TARGET)


@pytest.mark.parametrize(
    "step, fields, flags, kind, no_data, symptom",
    [
        ("nodeinfo", dict(rc=255, stderr="ibwarn: [9] _do_madrpc failed; dport (DR path 0,1)"),
         {}, "no-answer", NoData.NO_ANSWER, True),
        ("perfquery-x", dict(rc=255, stderr="perfquery: iberror: failed: query failed"),
         dict(smp_answered=True), "no-pma", NoData.NO_PMA, True),
        ("nodeinfo", dict(rc=255, stderr="ibwarn: _do_madrpc failed"),
         dict(virtual_function=True), "virtual-function", NoData.VIRTUAL_FUNCTION, False),
        ("nodeinfo", dict(rc=255, stderr="ibwarn: umad_init: can't read ABI version "
                                         "(is ib_umad module loaded?)"),
         {}, "no-umad", NoData.NO_UMAD, False),
        ("perfquery-x", dict(rc=255, stderr="ibwarn: can't resolve destination port 0"),
         {}, "no-sm", NoData.NO_SM, False),
        ("nodeinfo", dict(rc=255, stderr="smpquery: Operation not permitted"),
         {}, "no-access", NoData.NO_PERMISSION, False),
        ("nodeinfo", dict(rc=None, not_found=True), {}, "not-installed", NoData.NOT_INSTALLED,
         False),
        ("nodeinfo", dict(rc=-11), {}, "killed-by-SIGSEGV", NoData.KILLED, True),
        ("nodeinfo", dict(rc=1, stderr="something odd"), {}, "unread", NoData.FAILED, False),
    ],
)  # fmt: skip
def test_why_a_step_gave_nothing_is_judged_once_onto_typed_words(
    step, fields, flags, kind, no_data, symptom
):
    """``Unread.kind`` keeps the far end's words (what results show as ``observed``) and
    ``no_data`` says the same in the ``NoData`` every family's ``RunOutcome`` uses."""
    from ibdiag.families.partner.unread import unread

    judged = unread(step, step_run(step, **fields), TARGET,
                    **{"virtual_function": False, "smp_answered": False, **flags})  # fmt: skip
    assert (judged.kind, judged.no_data, judged.symptom) == (kind, no_data, symptom)
    assert judged.command == " ".join(step_run(step).argv) and judged.reason


def step_run(name: str, **fields) -> CommandRun:
    return step(name).model_copy(update={"rc": 0, "stdout": "", **fields})
