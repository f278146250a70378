"""link.partner and counters.partner (checks/partner.py) on hand-built Snapshots: the far end
of each ACTIVE InfiniBand port's cable, its state, width and speed against ours, and its error
counters graded on change since the baseline reading of the same far-end port."""

from __future__ import annotations

from datetime import timedelta
from typing import Dict, List, Optional

import pytest
import stubs as S
from partner_builders import LEAF_GUID, counters, extended, partner, port_info, with_runs
from snapshots import builtin_registry, device, port, replaced, run, snapshot

from ibdiag import roles
from ibdiag.drain_reason import drain_reason
from ibdiag.facts.partner import Partner, PortInfo
from ibdiag.facts.perfquery import PmaReading
from ibdiag.grade import run_check
from ibdiag.model import CommandRun, Report, Result, Snapshot, Status
from ibdiag.thresholds import CounterRule, Thresholds

OTHER_GUID = "0x0002c90300ffffff"
TARGET = "mlx5_0:1<->leaf07/21"
QDR = "40 Gb/sec (4X QDR)"


def node(far: Optional[Partner], *, rate_text: str = QDR, **port_update) -> Snapshot:
    snap = snapshot([device("mlx5_0", ports=[port(1, rate_text=rate_text, **port_update)])])
    return replaced(snap, "mlx5_0:1", partner=far)


def step_run(step: str, capture: Optional[str] = None, **fields) -> CommandRun:
    """A run of ``step`` on mlx5_0:1; ``capture``: its stdout (tests/captures/ibsim-partner)."""
    tool = "perfquery" if step.startswith("perfquery") else "smpquery"
    if capture is not None:
        fields["stdout"] = open(S.partner_capture(capture)).read()
    return CommandRun(
        argv=[tool, "-C", "mlx5_0", "-P", "1", step],
        role=roles.partner(step, "mlx5_0:1"),
        **fields,
    )


def one(results: List[Result]) -> Result:
    assert len(results) == 1, results
    return results[0]


# --- link.partner --------------------------------------------------------------------------


def test_healthy_far_end_passes_naming_both_ends():
    result = one(run("link.partner", node(partner())))
    assert result.status == Status.PASS
    assert result.target == TARGET
    assert "4X QDR" in result.message and "Active/LinkUp" in result.message


@pytest.mark.parametrize(
    "update, differ",
    [(dict(width_active="1X"), "width"), (dict(speed_active="SDR"), "speed")],
)
def test_width_or_speed_unlike_ours_fails_naming_both_ends(update, differ):
    far = partner(port_info=port_info(**update))
    result = one(run("link.partner", node(far)))
    assert result.status == Status.FAIL
    assert result.target == TARGET
    assert differ in result.message and "mlx5_0:1" in result.message
    assert "leaf07/21" in result.message


def test_ours_from_sysfs_rate_against_the_far_end():
    result = one(run("link.partner", node(partner(), rate_text="10 Gb/sec (1X QDR)")))
    assert result.status == Status.FAIL
    assert "width" in result.message and result.expected == "1X QDR"


def test_ours_from_local_portinfo_when_sysfs_has_no_rate():
    far = partner(local_port_info=port_info("local-portinfo", width_active="2X"))
    result = one(run("link.partner", node(far, rate_text=None)))
    assert result.status == Status.FAIL and result.expected == "2X QDR"


def test_fdr10_in_sysfs_is_qdr_in_portinfo():
    result = one(run("link.partner", node(partner(), rate_text="40 Gb/sec (4X FDR10)")))
    assert result.status == Status.PASS


def test_both_ends_below_what_both_enable_and_support_could_be_4x():
    info = dict(width_active="2X", width_enabled=["1X", "2X", "4X"],
                width_supported=["1X", "2X", "4X"])  # fmt: skip
    far = partner(port_info=port_info(**info), local_port_info=port_info("local-portinfo", **info))
    result = one(run("link.partner", node(far, rate_text="20 Gb/sec (2X QDR)")))
    assert result.status == Status.FAIL
    assert "could be 4X" in result.message


def test_slower_than_both_support_could_be_qdr():
    far = partner(
        port_info=port_info(speed_active="DDR"),
        local_port_info=port_info("local-portinfo", speed_active="DDR"),
    )
    result = one(run("link.partner", node(far, rate_text="20 Gb/sec (4X DDR)")))
    assert result.status == Status.FAIL and "could be QDR" in result.message


def test_a_width_only_one_end_enables_is_no_capability():
    far = partner(port_info=port_info(width_enabled=["1X", "4X", "8X"],
                                      width_supported=["1X", "4X", "8X"]))  # fmt: skip
    assert one(run("link.partner", node(far))).status == Status.PASS


def _far_ends() -> List[PortInfo]:
    """Partner PortInfos around a 4X QDR link: states, active values, what it enables and
    supports (narrower, the same, wider; empty lists: not printed)."""
    found = []
    for state in ("Active", "Armed"):
        for width_active in ("4X", "2X", None):
            for widths in ([], ["1X", "4X"], ["1X", "4X", "8X"], ["1X", "2X", "4X"]):
                for speeds in ([], ["SDR", "QDR"], ["SDR", "QDR", "FDR"]):
                    for which in ("enabled", "supported", "both"):
                        lists = {}
                        for kind in ("enabled", "supported"):
                            lists[f"width_{kind}"] = widths if which in (kind, "both") else ["4X"]
                            lists[f"speed_{kind}"] = speeds if which in (kind, "both") else ["QDR"]
                        found.append(port_info(link_state=state, width_active=width_active,
                                               **lists))  # fmt: skip
    return found


_OURS = [
    port_info("local-portinfo", port=1),
    port_info(
        "local-portinfo",
        port=1,
        width_enabled=["1X", "4X", "8X"],
        width_supported=["1X", "4X", "8X"],
        speed_enabled=["SDR", "QDR", "FDR"],
        speed_supported=["SDR", "QDR", "FDR"],
    ),
    port_info("local-portinfo", port=1, width_active="2X", speed_active="DDR"),
    port_info(
        "local-portinfo",
        port=1,
        width_enabled=[],
        width_supported=[],
        speed_enabled=[],
        speed_supported=[],
    ),
]


@pytest.mark.parametrize("rate_text", [QDR, "20 Gb/sec (2X QDR)", "80 Gb/sec (8X QDR)", None])
def test_our_portinfo_is_not_needed_where_it_cannot_change_link_partner(rate_text):
    """``local_port_info_matters`` (the source reads our own PortInfo only where it says so):
    wherever it says no, link.partner's result is the same without our PortInfo as with any of
    ours; and it says yes somewhere a PortInfo of ours changes the result."""
    from ibdiag.facts.partner import local_port_info_matters, our_width_speed

    mattered = 0
    for info in _far_ends():
        without = one(run("link.partner", node(partner(port_info=info, local_port_info=None),
                                               rate_text=rate_text)))  # fmt: skip
        snap = node(partner(port_info=info), rate_text=rate_text)
        ours = our_width_speed(snap.devices[0].ports[0].rate)
        differs = False
        for local in _OURS:
            far = partner(port_info=info, local_port_info=local)
            with_ours = one(run("link.partner", node(far, rate_text=rate_text)))
            same = (with_ours.status, with_ours.message) == (without.status, without.message)
            differs = differs or not same
            if not local_port_info_matters(info, *ours):
                assert same, (info, local, with_ours, without)
        mattered += differs
    # ours can change the result only where some far end runs our width (else: a mismatch)
    width = our_width_speed(node(None, rate_text=rate_text).devices[0].ports[0].rate)[0]
    comparable = [info for info in _far_ends() if info.width_active in (width or "4X", "2X")]
    assert (mattered > 0) == (width is None or any(i.width_active == width for i in comparable))


@pytest.mark.parametrize(
    "state, phys", [("Initialize", "LinkUp"), ("Down", "Polling"), ("Active", "Disabled")]
)
def test_far_end_not_active_fails_with_its_state(state, phys):
    far = partner(port_info=port_info(link_state=state, phys_link_state=phys))
    result = one(run("link.partner", node(far)))
    assert result.status == Status.FAIL
    assert result.observed == f"{state}/{phys}"
    assert "leaf07/21" in result.message and "mlx5_0:1" in result.message


def test_ports_not_active_or_ethernet_are_not_graded():
    down = node(partner(), state=1, phys_state=2)
    assert run("link.partner", down) == []
    eth = node(partner(), link_layer="Ethernet")
    assert run("link.partner", eth) == []


def test_back_to_back_hca_is_named_by_its_description():
    far = partner(node_type="Channel Adapter", description="node02 mlx5_0", port=1)
    result = one(run("link.partner", node(far)))
    assert result.target == "mlx5_0:1<->node02_mlx5_0/1"


def test_no_description_names_the_guid():
    far = partner(description=None)
    assert one(run("link.partner", node(far))).target == f"mlx5_0:1<->{LEAF_GUID}/21"


# --- why the far end is unknown: skips with the tool's reason -----------------------------------

_NO_UMAD = "ibwarn: [123] mad_rpc_open_port: can't open UMAD port (mlx5_0:1)\n"
_MAD_FAIL = "ibwarn: [9] mad_rpc: _do_madrpc failed; dport (DR path slid 65535; dlid 65535; 0,1)"


def failed_at_nodeinfo(**fields) -> Snapshot:
    nothing = Partner(roles=[roles.partner("nodeinfo", "mlx5_0:1")])
    return with_runs(node(nothing), step_run("nodeinfo", **fields))


_NO_ABI = (
    "ibwarn: [7] get_abi_version: can't read ABI version from /sys/class/infiniband_mad/"
    "abi_version (No such file or directory): is ib_umad module loaded?\n" + _NO_UMAD
)


@pytest.mark.parametrize(
    "fields, word, phrase",
    [
        (dict(rc=255, stderr=_NO_UMAD), "no-access", "not root"),
        (dict(permission_denied=True), "no-access", "not root"),
        (dict(rc=255, stderr=_NO_ABI), "no-umad", "ib_umad module not loaded"),
        (dict(not_found=True), "not-installed", "not installed"),
    ],
)
def test_an_unread_far_end_skips_with_the_tools_reason(fields, word, phrase):
    snap = failed_at_nodeinfo(**fields)
    for check_id in ("link.partner", "counters.partner"):
        result = one(run(check_id, snap))
        assert result.status == Status.SKIP, result
        assert result.target == "mlx5_0:1"
        assert result.observed == word
        assert phrase in result.message
        assert "smpquery" in result.message


def test_as_root_without_ib_umad_the_skip_does_not_say_not_root():
    """The module missing (get_abi_version) is no permission problem: the skip says so."""
    result = one(run("link.partner", failed_at_nodeinfo(rc=255, stderr=_NO_ABI)))
    assert "not root" not in result.message and "ib_umad" in result.message


_NO_ANSWER_RUN = dict(
    rc=255,
    stderr=_MAD_FAIL,
    stdout="smpquery: iberror: failed: operation nodeinfo: node info query failed",
)


def test_a_far_end_that_does_not_answer_an_active_pf_port_warns():
    """libibmad gave up by itself (-t): the far end of an ACTIVE port on a physical function
    must answer SMPs; it did not - a warn naming the command; counters.partner skips naming it."""
    snap = failed_at_nodeinfo(**_NO_ANSWER_RUN)
    link = one(run("link.partner", snap))
    assert link.status == Status.WARN and link.observed == "no-answer", link
    assert "did not answer" in link.message and "smpquery" in link.message
    assert "mlx5_0:1" in link.message
    counters_ = one(run("counters.partner", snap))
    assert counters_.status == Status.SKIP and counters_.observed == "no-answer"


@pytest.mark.parametrize(
    "dev_update, port_update",
    [
        (dict(hca_type="MT4124"), {}),  # a ConnectX-6 virtual function
        ({}, dict(problems={"counters/symbol_error": "N/A (no PMA)"})),  # sysfs: no PMA
    ],
)
def test_on_a_virtual_function_no_answer_stays_a_skip(dev_update, port_update):
    nothing = Partner(roles=[roles.partner("nodeinfo", "mlx5_0:1")])
    dev = device("mlx5_0", ports=[port(1, rate_text=QDR, **port_update)], **dev_update)
    snap = replaced(snapshot([dev]), "mlx5_0:1", partner=nothing)
    snap = with_runs(snap, step_run("nodeinfo", **_NO_ANSWER_RUN))
    for check_id in ("link.partner", "counters.partner"):
        result = one(run(check_id, snap))
        assert result.status == Status.SKIP and result.observed == "virtual-function", result
        assert "virtual function" in result.message


@pytest.mark.parametrize("step", ["nodeinfo", "nodedesc", "portinfo"])
def test_a_far_end_tool_killed_at_the_command_timeout_warns_naming_it(step):
    """-t lets libibmad give up in seconds: a kill at the command timeout is a local hang (the
    umad device, the MAD agent) - a warn naming the command, never a skip or a pass."""
    hung = step_run(step, rc=None, timed_out=True, duration_s=4.0)
    ok = [step_run(name, rc=0) for name in ("nodeinfo", "nodedesc", "portinfo") if name != step]
    far = partner() if step == "nodedesc" else Partner(roles=[hung.role])
    snap = with_runs(node(far), hung, *ok)
    results = run("link.partner", snap)
    warns = [r for r in results if r.status == Status.WARN]
    assert len(warns) == 1, results
    assert warns[0].observed == "timed-out"
    assert f"smpquery -C mlx5_0 -P 1 {step}" in warns[0].message
    assert "timed out after 4.0 s and was killed" in warns[0].message
    assert "local hang" in warns[0].message
    assert not [r for r in results if r.status == Status.SKIP and r.observed == "timed-out"]


def test_a_hung_partner_perfquery_x_warns_though_plain_perfquery_read():
    hung = step_run("perfquery-x", rc=None, timed_out=True, duration_s=4.0)
    snap = with_runs(node(partner()), step_run("nodeinfo", rc=0), hung,
                     step_run("perfquery", rc=0))  # fmt: skip
    results = run("counters.partner", snap)
    assert sorted(r.status for r in results) == [Status.PASS, Status.WARN], results
    warn = next(r for r in results if r.status == Status.WARN)
    assert warn.observed == "timed-out" and "perfquery -C mlx5_0 -P 1 perfquery-x" in warn.message
    assert one(run("link.partner", snap)).status == Status.PASS


def test_no_subnet_manager_yet_skips_the_counters():
    why = ("needs partner-portinfo0 mlx5_0:1, which succeeded but its LID is 0: no subnet "
           "manager has configured it yet")  # fmt: skip
    far = partner(lid=0, counters=None)
    snap = with_runs(
        node(far),
        step_run("nodeinfo", "switch-hdr-nodeinfo.txt", rc=0),
        step_run("portinfo", "nosm-portinfo.txt", rc=0),
        step_run("portinfo0", "nosm-portinfo0.txt", rc=0),
        step_run("perfquery-x", skipped=why),
        step_run("perfquery-E", skipped=why),
    )
    result = one(run("counters.partner", snap))
    assert result.status == Status.SKIP and result.target == TARGET
    assert result.observed == "no-sm" and "LID 0" in result.message


def test_a_switch_answering_smps_but_not_pma_warns():
    """Every InfiniBand port must answer PMA queries (PortCounters): a far end that answers
    SMPs and lets every PMA step time out has a hung or broken performance agent, and its
    error counters cannot be seen - a warn, never a skip that lets the node pass."""
    far = partner(counters=None)
    failing = dict(rc=255, stderr=_MAD_FAIL, stdout="perfquery: iberror: failed: perfquery")
    snap = with_runs(
        node(far),
        step_run("nodeinfo", "switch-hdr-nodeinfo.txt", rc=0),
        step_run("portinfo", "switch-hdr-portinfo.txt", rc=0),
        step_run("perfquery-x", **failing),
        step_run("perfquery", **failing),
    )
    result = one(run("counters.partner", snap))
    assert result.status == Status.WARN and result.observed == "no-pma"
    assert "answers SMPs but not `perfquery" in result.message
    assert "must answer PMA queries" in result.message and "(so did perfquery)" in result.message
    assert one(run("link.partner", snap)).status == Status.PASS


def test_not_collected_skips():
    result = one(run("link.partner", node(None)))
    assert result.status == Status.SKIP and result.observed == "not-collected"


# --- counters.partner ------------------------------------------------------------------------


def later(snap: Snapshot, hours: float) -> Snapshot:
    return snap.model_copy(update={"collected_at": snap.collected_at + timedelta(hours=hours)})


def grade_counters(now: Snapshot, baseline: Optional[Snapshot]) -> List[Result]:
    spec = builtin_registry().get("counters.partner")
    return run_check(spec, now, Thresholds(), baseline=baseline)


def test_no_baseline_passes_and_never_grades_lifetime_totals():
    snap = node(partner(counters=counters(SymbolErrorCounter=50000, LinkDownedCounter=200)))
    result = one(grade_counters(snap, None))
    assert result.status == Status.PASS and result.target == TARGET
    assert "no baseline" in result.message


def test_no_change_since_the_baseline_passes():
    before = node(partner(counters=counters(SymbolErrorCounter=7)))
    result = one(grade_counters(later(before, 2), before))
    assert result.status == Status.PASS and "no graded increase" in result.message


def test_symbol_errors_since_the_baseline_fail_named_like_ours():
    before = node(partner(counters=counters(SymbolErrorCounter=7)))
    after = later(node(partner(counters=counters(SymbolErrorCounter=7 + 500))), 1)
    results = grade_counters(after, before)
    failed = [r for r in results if r.status == Status.FAIL]
    assert [r.subject for r in failed] == ["symbol_error"]
    assert failed[0].target == TARGET and failed[0].observed == 500
    reason = drain_reason(Report.model_construct(results=results))
    assert reason == "ibdiag: mlx5_0:1<->leaf07/21 counters.partner symbol_error"


def test_a_link_down_on_the_far_end_fails_at_once():
    before = node(partner())
    after = later(node(partner(counters=counters(LinkDownedCounter=1))), 0.1)
    failed = [r for r in grade_counters(after, before) if r.status != Status.PASS]
    assert [(r.status, r.subject) for r in failed] == [(Status.FAIL, "link_downed")]


def test_a_few_symbol_errors_warn_like_ours():
    before = node(partner())
    after = later(node(partner(counters=counters(SymbolErrorCounter=3))), 2)
    (result,) = grade_counters(after, before)
    assert result.status == Status.WARN and result.subject == "symbol_error"


def test_recabled_to_another_switch_port_starts_fresh():
    before = node(partner(counters=counters(SymbolErrorCounter=0)))
    moved = partner(node_guid=OTHER_GUID, counters=counters(SymbolErrorCounter=900))
    result = one(grade_counters(later(node(moved), 1), before))
    assert result.status == Status.PASS and "starts fresh" in result.message
    other_port = partner(port=22, counters=counters(SymbolErrorCounter=900))
    result = one(grade_counters(later(node(other_port), 1), before))
    assert result.status == Status.PASS and "starts fresh" in result.message


def test_the_baseline_port_is_found_by_partner_guid_not_by_our_port():
    before = snapshot([device("mlx5_1", ports=[port(1, rate_text=QDR)])])
    before = replaced(before, "mlx5_1:1", partner=partner(counters=counters(SymbolErrorCounter=5)))
    after = later(node(partner(counters=counters(SymbolErrorCounter=905))), 1)
    failed = [r for r in grade_counters(after, before) if r.status == Status.FAIL]
    assert [r.observed for r in failed] == [900]


def test_a_value_that_went_down_is_a_reset_not_a_spike():
    before = node(partner(counters=counters(SymbolErrorCounter=60000)))
    after = later(node(partner(counters=counters(SymbolErrorCounter=0))), 1)
    result = one(grade_counters(after, before))
    assert result.status == Status.PASS
    assert "reset since the baseline" in result.message and "symbol_error" in result.message


def test_our_reboot_does_not_restart_the_switch_counters():
    before = node(partner(counters=counters(SymbolErrorCounter=100)))
    after = later(node(partner(counters=counters(SymbolErrorCounter=100))), 1)
    after = after.model_copy(update={"boot_id": "another-boot"})
    result = one(grade_counters(after, before))
    assert result.status == Status.PASS and "no graded increase" in result.message


def test_a_saturated_far_end_counter_warns():
    snap = node(partner(counters=counters(SymbolErrorCounter=65535)))
    results = grade_counters(snap, None)
    warned = [r for r in results if r.status == Status.WARN]
    assert [r.subject for r in warned] == ["symbol_error"]


def test_rcv_error_details_are_graded_too():
    details: Dict[str, int] = {"PortLocalPhysicalErrors": 0}
    reading = PmaReading(role=roles.partner("perfquery-E", "mlx5_0:1"), counters=details)
    before = node(partner(rcv_error_details=reading))
    grown = reading.model_copy(update={"counters": {"PortLocalPhysicalErrors": 40}})
    after = later(node(partner(rcv_error_details=grown)), 1)
    (result,) = grade_counters(after, before)
    assert result.status != Status.PASS and result.subject == "PortLocalPhysicalErrors"
    assert result.observed == 40


@pytest.mark.parametrize("rate", [40, 400])
def test_details_read_only_now_grade_through_their_total(rate):
    """-E is read only once PortRcvErrors (or the relay errors) is not 0, so the baseline of
    the run where errors first appear has no details: they are not graded then (only counters
    in both readings are compared), and PortRcvErrors, whose increase includes theirs, grades
    the cable with the same status as with the details in both (warn; fail above 120/hour)."""
    details = {"PortLocalPhysicalErrors": 0}
    reading = PmaReading(role=roles.partner("perfquery-E", "mlx5_0:1"), counters=details)
    grown = reading.model_copy(update={"counters": {"PortLocalPhysicalErrors": rate}})
    after = later(node(partner(counters=counters(PortRcvErrors=rate), rcv_error_details=grown)), 1)
    lean = grade_counters(after, node(partner(rcv_error_details=None)))
    full = grade_counters(after, node(partner(rcv_error_details=reading)))
    assert [result.subject for result in lean] == ["port_rcv_errors"]
    assert sorted(result.subject for result in full) == ["PortLocalPhysicalErrors",
                                                         "port_rcv_errors"]  # fmt: skip
    assert {result.status for result in lean} == {result.status for result in full}
    assert lean[0].status == (Status.FAIL if rate > 120 else Status.WARN)


# --- what was read decides what is graded (issue 14 review) ------------------------------------


@pytest.mark.parametrize("with_baseline", [False, True])
def test_data_counters_only_and_plain_perfquery_failed_warns_not_passes(with_baseline):
    """-x answered without the error counters (the simulator, older switches) and plain
    perfquery, its fallback, timed out though the SMPs were answered: the far end's error
    counters are unknown and its PMA did not answer what every port must - one warn naming
    plain perfquery, never a pass or nothing at all."""
    failing = dict(rc=255, stderr=_MAD_FAIL, stdout="perfquery: iberror: failed: perfquery")
    far = partner(counters=extended())
    snap = with_runs(later(node(far), 2), step_run("nodeinfo", "switch-hdr-nodeinfo.txt", rc=0),
                     step_run("perfquery-x", rc=0), step_run("perfquery", **failing))  # fmt: skip
    result = one(grade_counters(snap, node(partner()) if with_baseline else None))
    assert result.status == Status.WARN and result.target == TARGET
    assert result.observed == "no-pma"
    assert "answers SMPs but not `perfquery -C mlx5_0 -P 1 perfquery`" in result.message


def test_data_counters_only_without_a_plain_run_skips_as_unread():
    result = one(grade_counters(node(partner(counters=extended())), None))
    assert result.status == Status.SKIP and result.observed == "unread"
    assert "no error counters" in result.message


def test_a_baseline_reading_without_error_counters_is_no_baseline_for_them():
    before = node(partner(counters=extended()))
    after = later(node(partner(counters=counters(SymbolErrorCounter=500))), 1)
    result = one(grade_counters(after, before))
    assert result.status == Status.PASS
    assert "the baseline read no far end's error counters" in result.message


def test_a_baseline_that_never_read_the_far_ends_says_so_not_recabled():
    before = node(None)  # a level quick prolog snapshot
    after = later(node(partner(counters=counters(SymbolErrorCounter=500))), 1)
    result = one(grade_counters(after, before))
    assert result.status == Status.PASS and "re-cabled" not in result.message
    assert "level quick" in result.message


@pytest.mark.parametrize(
    "then, now",
    [
        (extended(SymbolErrorCounter=70000), counters(SymbolErrorCounter=65000)),
        (counters(SymbolErrorCounter=0), extended(SymbolErrorCounter=5000)),
    ],
    ids=["x-then-plain", "plain-then-x"],
)
def test_readings_of_x_and_plain_perfquery_are_not_compared(then, now):
    """PortCountersExtended (64-bit) and PortCounters (16/32-bit, saturating, cleared apart by
    perfquery -r) are other counters: 70000 then 65000 is no reset, and a plain counter cleared
    to 0 then a lifetime -x reading of 5000 is no spike. Not graded that run: a skip."""
    before = node(partner(counters=then))
    result = one(grade_counters(later(node(partner(counters=now)), 1), before))
    assert result.status == Status.SKIP and result.observed == "not-comparable"
    assert "perfquery -x" in result.message and "plain perfquery" in result.message


def test_readings_of_x_both_times_are_graded():
    before = node(partner(counters=extended(SymbolErrorCounter=70000)))
    after = later(node(partner(counters=extended(SymbolErrorCounter=70500))), 1)
    failed = [r for r in grade_counters(after, before) if r.status == Status.FAIL]
    assert [(r.subject, r.observed) for r in failed] == [("symbol_error", 500)]


def test_a_64_bit_x_counter_at_a_16_bit_maximum_is_not_saturated():
    snap = node(partner(counters=extended(SymbolErrorCounter=65535, LinkDownedCounter=255)))
    assert [r.status for r in grade_counters(snap, None)] == [Status.PASS]


def test_a_far_end_counter_that_went_down_names_the_far_end_not_our_driver():
    before = node(partner(counters=counters(SymbolErrorCounter=60000)))
    after = later(node(partner(counters=counters(SymbolErrorCounter=3))), 1)
    spec = builtin_registry().get("counters.partner")
    strict = Thresholds(counters={"symbol_error": CounterRule(on_increase="fail")})
    (result,) = run_check(spec, after, strict, baseline=before)
    assert result.status == Status.FAIL and result.observed == 3
    assert "the far end rebooted or its counters were cleared" in result.message
    assert "driver reload" not in result.message


@pytest.mark.parametrize(
    "far, rate_text, phrase",
    [
        (partner(port_info=port_info(width_active=None)), QDR, "its PortInfo named no"),
        (partner(port_info=port_info(speed_active=None)), QDR, "its PortInfo named no"),
        (partner(local_port_info=None), None, "our width or speed is unknown"),
    ],
)
def test_link_partner_skips_rather_than_passes_what_it_cannot_compare(far, rate_text, phrase):
    result = one(run("link.partner", node(far, rate_text=rate_text)))
    assert result.status == Status.SKIP and result.observed == "unread"
    assert phrase in result.message and result.target == TARGET
