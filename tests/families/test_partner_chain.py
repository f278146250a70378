"""The far end of each cable, collected through stub smpquery and perfquery
(``ibdiag.families.partner.chain``).

Each test builds a node (``sysfs_builder``: mlx5_0.. with one ACTIVE InfiniBand port each) and a
stub directory as the only PATH; the stubs print the real tools' outputs against the ibsim
simulator (tests/captures/ibsim-partner), hang, fail as the tools fail, or are absent. Then
``collect`` runs with ``partner`` in ``needs``, as a check declaring it would make it: every
step is recorded with its role, run or never started with the reason, within the deadline.
"""

from __future__ import annotations

import re
import time
from typing import Dict, Optional

import pytest
import stubs as S
from sysfs_builder import mlx5_node, write_node

from ibdiag import roles
from ibdiag.collect import collect
from ibdiag.families.partner import chain as source
from ibdiag.model import CommandRun, Snapshot

SLACK = 3.0  # seconds beyond a deadline: threads, interpretation, a loaded CI machine


class Node:
    def __init__(self, tmp_path, count: int = 2, **hca: str) -> None:
        self.hcas = mlx5_node(count, **hca)
        self.sysfs = str(tmp_path / "sys")
        write_node(self.sysfs, self.hcas)
        self.procfs = S.write_procfs(tmp_path / "proc", boot_time=time.time() - 3600)
        self.stubs = S.StubBin(tmp_path / "stubs")

    def tools(self, prefix: str = "switch-hdr", smpquery: Optional[Dict[str, str]] = None) -> None:
        """Stubs answering as the ``prefix`` captures do; ``smpquery``: cases that answer
        otherwise (each replaces the case of the same pattern, in its place)."""
        self.stubs.add("smpquery", S.by_args({**S.partner_smpquery(prefix), **(smpquery or {})}))
        self.stubs.add("perfquery", S.by_args(S.partner_perfquery(prefix)))

    def collect(self, needs=("sysfs", "partner"), timeout_s=10.0, deadline_s=25.0) -> Snapshot:
        options = {"path": self.stubs.path, "timeout_s": timeout_s, "deadline_s": deadline_s}
        return collect(self.sysfs, self.procfs, set(needs), options)


def by_role(snap: Snapshot) -> Dict[str, CommandRun]:
    return {run.role: run for run in snap.commands.values()}


ALWAYS = [step for step in roles.PARTNER_STEPS if step not in source.CONDITIONAL_STEPS]


def test_every_step_of_a_switch_partner_runs_with_its_role_and_mad_timeout(tmp_path):
    """A healthy switch partner without the extended error counters (ibsim's -x): nodeinfo,
    nodedesc, portinfo, portinfo0, -x and the plain fallback run; our own PortInfo and -E do
    not (nothing beyond 4X HDR is enabled at the far end; PortRcvErrors and the relay errors
    are 0), and are not recorded."""
    node = Node(tmp_path)
    # mlx5_0 on the switch's port 1, mlx5_1 on its port 2 (one cable end is in one port)
    for tool, cases in (("smpquery", S.partner_smpquery), ("perfquery", S.partner_perfquery)):
        node.stubs.add(tool, S.by_args({
            **{f"-C mlx5_1 {key}": body for key, body in cases("switch-port2").items()},
            **cases("switch-hdr"),
        }))  # fmt: skip
    snap = node.collect(timeout_s=4.0)
    runs = by_role(snap)
    for target, far_port in (("mlx5_0:1", "1"), ("mlx5_1:1", "2")):
        device = target.split(":")[0]
        for step in (*ALWAYS, "perfquery"):
            run = runs[roles.partner(step, target)]
            assert run.succeeded, run
            assert run.argv[1:7] == ["-C", device, "-P", "1", "-t", "500"], run.argv
        assert runs[roles.partner("portinfo", target)].argv[-3:] == ["portinfo", "0,1", far_port]
        assert runs[roles.partner("portinfo0", target)].argv[-3:] == ["portinfo", "0,1", "0"]
        # the switch's LID (1, from its port 0) and the partner's port (its LocalPort)
        assert runs[roles.partner("perfquery-x", target)].argv[-3:] == ["-x", "1", far_port]
        assert runs[roles.partner("perfquery", target)].argv[-2:] == ["1", far_port]
        for step in ("local-portinfo", "perfquery-E"):
            assert roles.partner(step, target) not in runs
    assert len(snap.commands) == 2 * (len(ALWAYS) + 1)
    found = snap.devices[0].ports[0].partner
    assert (found.node_type, found.description, found.port, found.lid) == (
        "Switch", "MF0;leaf07:MQM8700/U1", 1, 1)  # fmt: skip
    assert str(found.counters.role) == "partner-perfquery mlx5_0:1"  # ibsim's -x: data only
    assert found.local_port_info is None and found.rcv_error_details is None
    assert sorted(S.StubBin.calls(node.stubs)) == sorted(" ".join(r.argv) for r in runs.values())
    assert not [call for call in node.stubs.calls() if " -E " in call or "portinfo 0 1" in call]


def _portinfo_enabling(tmp_path, widths: str) -> str:
    """The switch's port capture, enabling ``widths`` (its LinkWidthEnabled) instead of 4X."""
    text = open(S.partner_capture("switch-hdr-portinfo.txt")).read()
    assert "LinkWidthEnabled:................4X\n" in text
    path = tmp_path / "wide-portinfo.txt"
    path.write_text(text.replace("LinkWidthEnabled:................4X", f"LinkWidthEnabled:......"
                                 f"..........{widths}"))  # fmt: skip
    return str(path)


def test_our_own_portinfo_is_read_when_the_far_end_could_do_more(tmp_path):
    """The far end enables and supports 8X while the link runs 4X: "could be 8X" depends on
    what our port enables, so our own PortInfo is read, beside -x (no wave of its own)."""
    node = Node(tmp_path, count=1)
    wide = _portinfo_enabling(tmp_path, "4X or 8X")
    node.tools(smpquery={"* portinfo 0,1 *": S.prints(wide)})
    runs = by_role(node.collect())
    local = runs[roles.partner("local-portinfo", "mlx5_0:1")]
    assert local.succeeded and local.argv[-3:] == ["portinfo", "0", "1"]
    assert roles.partner("perfquery-E", "mlx5_0:1") not in runs


def _portinfo_with_mtu(tmp_path, neighbor: str, cap: str) -> str:
    """The switch's port capture with NeighborMTU ``neighbor`` and MtuCap ``cap``."""
    text = open(S.partner_capture("switch-hdr-portinfo.txt")).read()
    for name in ("NeighborMTU", "MtuCap"):
        assert f"{name}:" in text
    text = re.sub(r"(?m)^NeighborMTU:(\.+)2048$", rf"NeighborMTU:\g<1>{neighbor}", text)
    text = re.sub(r"(?m)^MtuCap:(\.+)2048$", rf"MtuCap:\g<1>{cap}", text)
    path = tmp_path / f"mtu-{neighbor}-{cap}-portinfo.txt"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    "neighbor, cap, read",
    [("2048", "4096", True), ("1024", "2048", True), ("4096", "4096", False),
     ("2048", "2048", False), ("?(7)", "4096", False)],
)  # fmt: skip
def test_our_own_portinfo_is_read_when_the_link_runs_below_the_far_ends_mtu_cap(
    tmp_path, neighbor, cap, read
):
    """The switch port could carry a larger MTU than the link was set to: only our own MtuCap
    says whether our end holds it down (link.mtu), so our PortInfo is read; a link at the
    switch port's MtuCap (ibsim: 2048 both) costs no run."""
    from ibdiag.facts.partner import mtu_below_cap

    node = Node(tmp_path, count=1)
    node.tools(smpquery={"* portinfo 0,1 *": S.prints(_portinfo_with_mtu(tmp_path, neighbor, cap))})
    snap = node.collect()
    runs = by_role(snap)
    assert (roles.partner("local-portinfo", "mlx5_0:1") in runs) is read
    found = snap.devices[0].ports[0].partner
    assert mtu_below_cap(found.port_info) is read
    if read:
        assert found.local_port_info is not None and found.local_port_info.mtu_cap == 2048


@pytest.mark.parametrize("rate", ["", "200 Gb/sec"])
def test_our_own_portinfo_is_read_when_sysfs_gives_no_width_or_speed(tmp_path, rate):
    """Without our width and speed from sysfs's rate, link.partner takes them from our own
    PortInfo: it is read (even though the far end enables nothing more)."""
    node = Node(tmp_path, count=1, port={"rate": rate})
    node.tools()
    snap = node.collect()
    assert by_role(snap)[roles.partner("local-portinfo", "mlx5_0:1")].succeeded
    assert snap.devices[0].ports[0].partner.local_port_info.width_active == "4X"


def test_our_own_portinfo_is_not_read_when_the_far_end_is_not_active(tmp_path):
    """A far end that is not Active/LinkUp fails link.partner whatever our port supports."""
    node = Node(tmp_path, count=1)
    text = open(_portinfo_enabling(tmp_path, "4X or 8X")).read()
    down = tmp_path / "down-portinfo.txt"
    down.write_text(text.replace("LinkState:.......................Active",
                                 "LinkState:.......................Armed"))  # fmt: skip
    node.tools(smpquery={"* portinfo 0,1 *": S.prints(str(down))})
    snap = node.collect()
    assert roles.partner("local-portinfo", "mlx5_0:1") not in by_role(snap)
    assert snap.devices[0].ports[0].partner.port_info.link_state == "Armed"


def test_plain_perfquery_is_not_run_when_x_has_the_error_counters(tmp_path):
    """A real switch port's -x with the error counters: no plain perfquery; its
    PortRcvSwitchRelayErrors is 7, so the receive error details (-E) are read after it."""
    node = Node(tmp_path, count=1)
    node.tools()
    real_x = S.fixture("perfquery", "infiniband_exporter-x-switch-edr-0x506b4b03005c2740.txt")
    # read of LID 2052 port 1, answering here for the simulated switch's LID 1 port 1 (an
    # answer for another LID or port than asked is not kept)
    asked = tmp_path / "x-asked.txt"
    asked.write_text(open(real_x).read().replace("Lid 2052 port 1", "Lid 1 port 1", 1))
    cases = {**S.partner_perfquery(), "-C * -P * -t * -x *": S.prints(str(asked))}
    node.stubs.add("perfquery", S.by_args(cases))
    snap = node.collect()
    runs = by_role(snap)
    assert roles.partner("perfquery", "mlx5_0:1") not in runs
    assert runs[roles.partner("perfquery-E", "mlx5_0:1")].succeeded
    counters = snap.devices[0].ports[0].partner.counters
    assert str(counters.role) == "partner-perfquery-x mlx5_0:1"
    assert counters.counters["PortXmitDiscards"] == 20046
    assert counters.counters["PortRcvSwitchRelayErrors"] == 7
    assert snap.devices[0].ports[0].partner.rcv_error_details is not None


@pytest.mark.parametrize(
    ("field", "value", "read"),
    [
        ("PortRcvErrors", 3, True),
        ("PortRcvSwitchRelayErrors", 1, True),
        ("PortRcvErrors", 0, False),
    ],
)
def test_rcv_error_details_are_read_only_when_their_totals_are_not_0(tmp_path, field, value, read):
    """-E breaks PortRcvErrors and PortRcvSwitchRelayErrors down: read after the counters
    (here plain perfquery's, ibsim's -x having none) only when one of them is not 0."""
    node = Node(tmp_path, count=1)
    node.tools()
    text = open(S.partner_capture("switch-hdr-perfquery.txt")).read()
    dots = "." * (33 - len(field) - 1)
    assert f"{field}:{dots}0\n" in text
    path = tmp_path / "plain.txt"
    path.write_text(text.replace(f"{field}:{dots}0\n", f"{field}:{dots}{value}\n"))
    cases = {**S.partner_perfquery(), "-C * -P * -t *": S.prints(str(path))}
    node.stubs.add("perfquery", S.by_args(cases))
    snap = node.collect()
    runs = by_role(snap)
    assert (roles.partner("perfquery-E", "mlx5_0:1") in runs) is read
    far = snap.devices[0].ports[0].partner
    assert far.counters.counters[field] == value
    assert (far.rcv_error_details is not None) is read


def test_rcv_error_details_are_not_read_when_no_counters_were(tmp_path):
    """-x and plain perfquery both fail (a PMA that does not answer): -E would fail alike,
    after them - it is not run."""
    node = Node(tmp_path, count=1)
    node.tools()
    node.stubs.add("perfquery", S.fails("ibwarn: [1] _do_madrpc: recv failed", 255))
    runs = by_role(node.collect())
    assert runs[roles.partner("perfquery-x", "mlx5_0:1")].rc == 255
    assert runs[roles.partner("perfquery", "mlx5_0:1")].rc == 255
    assert roles.partner("perfquery-E", "mlx5_0:1") not in runs


def test_a_back_to_back_ca_partner_has_its_lid_in_its_own_port(tmp_path):
    """Port 0 is read with nodeinfo (a switch's LID, before anyone knows it is a switch); a CA's
    LID is its port's own, so -x waits for that PortInfo."""
    node = Node(tmp_path, count=1)
    node.tools("b2b-ca")
    snap = node.collect()
    runs = by_role(snap)
    assert runs[roles.partner("portinfo0", "mlx5_0:1")].succeeded  # read for nothing
    assert runs[roles.partner("perfquery-x", "mlx5_0:1")].argv[-3:] == ["-x", "3", "1"]
    assert snap.devices[0].ports[0].partner.lid == 3


def test_a_switch_partners_counters_are_read_beside_its_port(tmp_path):
    """A switch's LID comes from port 0, read with nodeinfo: -x starts with the partner port's
    PortInfo (2 waves), not after it. Every portinfo stub takes 0.5 s: -x, which needs only
    nodeinfo and port 0, is done before that port's PortInfo is."""
    node = Node(tmp_path, count=1)
    slow = S.partner_smpquery()
    slow["* portinfo 0,1 *"] = slow["* portinfo 0,1 *"].replace("cat ", "sleep 0.5; cat ", 1)
    node.tools(smpquery=slow)
    snap = node.collect()
    runs = by_role(snap)
    x = runs[roles.partner("perfquery-x", "mlx5_0:1")]
    info = runs[roles.partner("portinfo", "mlx5_0:1")]
    assert x.succeeded and info.succeeded and info.duration_s >= 0.5
    assert x.duration_s < info.duration_s


def test_a_partner_that_does_not_answer_times_out_and_the_rest_never_starts(tmp_path):
    """nodeinfo hangs (a MAD that never comes back and a tool that ignores -t): the runner kills
    it at the command timeout; every step that needs it is recorded never started, naming
    nodeinfo."""
    node = Node(tmp_path, count=4)
    mark = S.marker()
    node.tools(smpquery={"* nodeinfo 0,1": S.hangs(mark)})
    started = time.monotonic()
    snap = node.collect(timeout_s=1.0, deadline_s=3.0)
    assert time.monotonic() - started < 1.0 + SLACK  # the four ports waited at once
    assert S.wait_no_strays(mark) == []
    runs = by_role(snap)
    for n in range(4):
        target = f"mlx5_{n}:1"
        assert runs[roles.partner("nodeinfo", target)].timed_out
        for step in ("nodedesc", "portinfo0"):  # asked beside nodeinfo
            assert runs[roles.partner(step, target)].succeeded
        for step in ("portinfo", "perfquery-x", "perfquery-T"):
            run = runs[roles.partner(step, target)]
            assert run.rc is None and run.duration_s == 0.0, run
            assert run.skipped.startswith(
                f"needs partner-nodeinfo {target}, which did not succeed: smpquery timed out after"
            ), run.skipped
        for step in source.CONDITIONAL_STEPS:  # run only on an earlier answer: not planned
            assert roles.partner(step, target) not in runs
        assert runs[roles.partner("portinfo", target)].argv[-1] == source.LOCAL_PORT
        assert runs[roles.partner("perfquery-x", target)].argv[-2:] == [
            source.LID,
            source.LOCAL_PORT,
        ]
    found = snap.devices[0].ports[0].partner
    assert found.node_type is None and len(found.roles) == 6
    # nodedesc and port 0 were asked at once with nodeinfo (the stubs answer them)
    assert found.description == "MF0;leaf07:MQM8700/U1" and found.counters is None


def test_the_chains_end_within_the_run_deadline(tmp_path):
    """Every smpquery answers after 1 s, the run's deadline is 2 s: the second wave's portinfo
    is killed at the deadline, and the step after it (the plain perfquery: ibsim's -x has no
    error counters) never starts, naming the deadline."""
    node = Node(tmp_path, count=3)
    slow = {pattern: body.replace("cat ", "sleep 1; cat ", 1)
            for pattern, body in S.partner_smpquery().items()}  # fmt: skip
    node.tools(smpquery=slow)
    started = time.monotonic()
    snap = node.collect(timeout_s=5.0, deadline_s=2.0)
    assert time.monotonic() - started < 2.0 + SLACK
    runs = by_role(snap)
    assert all(run.succeeded or run.timed_out or run.skipped for run in runs.values()), runs
    for n in range(3):
        assert runs[roles.partner("portinfo", f"mlx5_{n}:1")].timed_out
        plain = runs[roles.partner("perfquery", f"mlx5_{n}:1")]
        assert plain.skipped and "deadline" in plain.skipped, plain


def test_tools_not_installed_are_recorded_as_such(tmp_path):
    node = Node(tmp_path, count=1)  # no stub at all: the PATH has neither tool
    runs = by_role(node.collect())
    nodeinfo = runs[roles.partner("nodeinfo", "mlx5_0:1")]
    assert nodeinfo.not_found
    assert nodeinfo.failure() == "smpquery is not installed (not found on PATH)"
    later = runs[roles.partner("perfquery-x", "mlx5_0:1")]
    assert later.skipped.endswith("smpquery is not installed (not found on PATH)")


def test_no_umad_access_is_the_tools_own_answer(tmp_path):
    """Not root (or no ib_umad): the tool exits 255 saying it cannot open the port; that is the
    reason recorded, judged from its result, never by looking at /dev/infiniband first."""
    node = Node(tmp_path, count=1)
    stdout = open(S.partner_capture("nodevice-nodeinfo.txt")).read().strip()
    stderr = open(S.partner_capture("nodevice-nodeinfo.stderr")).read().strip()
    node.stubs.add("smpquery", S.fails(stderr, 255, stdout=stdout))
    runs = by_role(node.collect())
    nodeinfo = runs[roles.partner("nodeinfo", "mlx5_0:1")]
    assert nodeinfo.rc == 255 and "can't open UMAD port" in nodeinfo.stderr
    for step in ("nodedesc", "portinfo0"):  # asked beside it: each says so itself
        assert "can't open UMAD port" in runs[roles.partner(step, "mlx5_0:1")].stderr
    why = runs[roles.partner("portinfo", "mlx5_0:1")].skipped
    assert why.startswith("needs partner-nodeinfo mlx5_0:1, which did not succeed: smpquery")
    assert "exited 255" in why


def test_no_subnet_manager_yet_leaves_the_counters_unread(tmp_path):
    node = Node(tmp_path, count=1)
    node.tools(smpquery={"* portinfo 0,1 0": S.prints(S.partner_capture("nosm-portinfo0.txt"))})
    runs = by_role(node.collect())
    why = runs[roles.partner("perfquery-x", "mlx5_0:1")].skipped
    assert why == ("needs partner-portinfo0 mlx5_0:1, which succeeded but its LID is 0: no "
                   "subnet manager has configured it yet")  # fmt: skip
    assert runs[roles.partner("portinfo", "mlx5_0:1")].succeeded


def test_an_unsafe_device_name_runs_nothing_and_says_why(tmp_path):
    """A device name that could be taken for an option: its chain is recorded never started,
    the other device's runs."""
    hcas = mlx5_node(2)
    hcas[0].name = "-mlx5_0"
    write_node(str(tmp_path / "odd"), hcas)
    node = Node(tmp_path, count=1)
    node.sysfs = str(tmp_path / "odd")
    node.tools()
    runs = by_role(node.collect())
    refused = [run for role, run in runs.items() if role.target == "-mlx5_0:1"]
    assert {run.role for run in refused} == {roles.partner(step, "-mlx5_0:1") for step in ALWAYS}
    assert all("not safe on a command line" in run.skipped for run in refused)
    assert runs[roles.partner("perfquery", "mlx5_1:1")].succeeded
    assert not [call for call in node.stubs.calls() if "-mlx5_0" in call]


def test_inert_unless_a_check_needs_it(tmp_path):
    """No ``partner`` in needs: not one smpquery, at any level, nor from ``ibdiag snapshot``."""
    from snapshots import STANDARD_SOURCES as STANDARD

    node = Node(tmp_path, count=1)
    node.tools()
    snap = node.collect(needs=STANDARD)
    assert not any(run.role.family == "partner" for run in snap.commands.values())
    assert not [call for call in node.stubs.calls() if call.startswith("smpquery")]
    assert snap.devices[0].ports[0].partner is None


def test_the_snapshot_command_reads_the_far_end_for_a_later_baseline(
    tmp_path, run_cli, monkeypatch
):
    """``ibdiag snapshot --level standard`` saves the partner counters too: the baseline
    ``counters.partner`` grades the far end's change against (a prolog's snapshot, then
    ``check --baseline`` in the epilog)."""
    node = Node(tmp_path, count=1)
    node.tools()
    monkeypatch.setenv("PATH", node.stubs.path)
    out = tmp_path / "snap.json"
    argv = ["snapshot", "--sysfs", node.sysfs, "--procfs", node.procfs, "--level", "standard"]
    assert run_cli(*argv, "-o", str(out)).exit_code == 0
    assert "partner" in Snapshot.model_validate_json(out.read_text()).sources
    assert [call for call in node.stubs.calls() if call.startswith("smpquery")]


@pytest.mark.parametrize(
    ("timeout_s", "expected"), [(10.0, 1000), (4.0, 500), (1.0, 125), (0.1, 50)]
)
def test_the_mad_timeout_is_well_inside_the_command_timeout(timeout_s, expected):
    assert source.mad_timeout_ms(timeout_s) == expected


def test_a_bundle_replays_a_chain_cut_short_into_the_same_snapshot(tmp_path):
    """Runs that timed out and steps never started (their argv holding <LocalPort>/<LID>) go
    into the bundle like any run and replay into the same Snapshot, ``Port.partner`` included."""
    from snapshots import assert_same_snapshot

    from ibdiag.bundle.opener import open_bundle
    from ibdiag.bundle.replay import replay
    from ibdiag.bundle.write import write_bundle
    from ibdiag.grade import grade
    from ibdiag.registry import load_registry
    from ibdiag.sources.sysfs import Recording
    from ibdiag.thresholds import Thresholds

    node = Node(tmp_path, count=2)
    mark = S.marker()
    node.stubs.add("smpquery", S.by_args({"-C mlx5_1 * nodeinfo 0,1": S.hangs(mark),
                                          **S.partner_smpquery()}))  # fmt: skip
    node.stubs.add("perfquery", S.by_args(S.partner_perfquery()))
    recording = Recording()
    options = {"path": node.stubs.path, "timeout_s": 1.0, "deadline_s": 10.0}
    live = collect(node.sysfs, node.procfs, {"sysfs", "partner"}, options, recording=recording)
    assert S.wait_no_strays(mark) == []
    runs = by_role(live)
    assert runs[roles.partner("nodeinfo", "mlx5_1:1")].timed_out
    assert runs[roles.partner("perfquery-x", "mlx5_1:1")].skipped
    assert runs[roles.partner("perfquery", "mlx5_0:1")].succeeded
    report = grade(live, load_registry(), Thresholds(), "standard")
    path = write_bundle(live, report, recording, str(tmp_path / "out"), tarball=True)
    with open_bundle(path) as opened:
        assert opened.problems == []
        replayed = replay(opened)
    assert_same_snapshot(replayed, live)
    assert replayed.devices[0].ports[0].partner.counters.counters["SymbolErrorCounter"] == 0
    assert replayed.devices[1].ports[0].partner.node_type is None


def test_the_real_smpquery_without_a_device_fails_in_its_own_words(tmp_path):
    """Not a stub: Debian's smpquery (infiniband-diags, as .ci/run installs it) on HCAs no
    machine has. It exits 255 saying it cannot open the port; the chain records that and never
    starts the rest, naming the step - what a node without the umad device or the right to open
    it sees too."""
    from test_real_tools import DEVICES, TOOLS_PATH, require_real_tools

    require_real_tools()
    hcas = mlx5_node(2)
    for hca, name in zip(hcas, DEVICES):
        hca.name = name
    write_node(str(tmp_path / "sys"), hcas)
    procfs = S.write_procfs(tmp_path / "proc", boot_time=time.time() - 3600)
    options = {"path": TOOLS_PATH, "timeout_s": 10.0, "deadline_s": 30.0}
    snap = collect(str(tmp_path / "sys"), procfs, {"sysfs", "partner"}, options)
    runs = by_role(snap)
    for name in DEVICES:
        target = f"{name}:1"
        nodeinfo = runs[roles.partner("nodeinfo", target)]
        assert nodeinfo.rc == 255, nodeinfo
        assert f"Failed to open '{name}' port '1'" in nodeinfo.stdout + nodeinfo.stderr
        assert roles.partner("local-portinfo", target) not in runs  # nothing to compare with
        why = runs[roles.partner("perfquery-x", target)].skipped
        assert why.startswith(f"needs partner-nodeinfo {target}, which did not succeed: "
                              "smpquery exited 255: "), why  # fmt: skip
        found = snap.device(name).ports[0].partner
        assert found is not None and found.node_type is None and found.counters is None


def test_the_collector_runs_any_familys_collect_hook_through_its_runner(tmp_path, monkeypatch):
    """The collector names no family: any family with ``collect(snap, runner)`` (commands that
    depend on earlier answers, as the far end's chain does) is called in the collector's pool
    with the collection's one runner, and what it ran is recorded and interpreted."""
    import types

    from ibdiag import families
    from ibdiag.families import partner as partner_family

    seen = {}

    def collect_hook(snap, runner):
        seen["runner"], seen["ports"] = runner, [dev.name for dev in snap.devices]
        run = runner.run(["smpquery", "-h"], roles.Role("planted", "probe", "mlx5_0:1"))
        return {run.key: run}

    planted = types.ModuleType("ibdiag.families.planted")
    planted.SOURCE, planted.LEVEL, planted.ORDER = "planted", "standard", 90
    planted.collect = collect_hook
    planted.interpret = lambda snap, runs: families.Update()
    monkeypatch.setattr(families, "families", lambda: (partner_family, planted))
    node = Node(tmp_path, count=1)
    node.tools()
    snap = node.collect(needs=("sysfs", "planted"))
    assert seen["ports"] == ["mlx5_0"] and seen["runner"].timeout_s == 10.0
    assert [str(run.role) for run in snap.commands.values()] == ["planted-probe mlx5_0:1"]
    assert not [call for call in node.stubs.calls() if "0,1" in call]  # partner not needed
