"""The far end's numbers and identities are range-checked before anything is graded or run
(``ibdiag.facts.partner_ranges``; issue 21 item 6): collected through stub smpquery/perfquery
printing the ibsim captures (tests/captures/ibsim-partner) with one field made impossible, then
graded by link.partner and counters.partner. Each is a warn naming the far end and what was
wrong - never a pass or fail of the cable, never a value on the next command line."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Dict, List

import pytest
import stubs as S
from snapshots import run
from sysfs_builder import mlx5_node, write_node

from ibdiag import roles
from ibdiag.collect import collect
from ibdiag.model import Result, Snapshot, Status

CHECKS = ("link.partner", "counters.partner")
GUIDS = ("b859:9f03:00d4:0a10", "b859:9f03:00d4:0a11")


def capture(name: str) -> str:
    return Path(S.partner_capture(name)).read_text()


def set_field(text: str, name: str, value: str) -> str:
    """``Name:.....value`` with a new value (the dots as printed); the field must exist."""
    pattern = re.compile(rf"^({re.escape(name)}:\.+).*$", re.M)
    assert pattern.search(text), name
    return pattern.sub(lambda m: m.group(1) + value, text, count=1)


class Node:
    """``count`` HCAs (each its own node GUID), one ACTIVE port each; stubs as the only PATH."""

    def __init__(self, tmp_path: Path, count: int = 1) -> None:
        self.tmp = tmp_path
        hcas = mlx5_node(count)
        for hca, guid in zip(hcas, GUIDS):
            hca.node_guid = guid
        self.sysfs = str(tmp_path / "sys")
        write_node(self.sysfs, hcas)
        self.procfs = S.write_procfs(tmp_path / "proc", boot_time=time.time() - 3600)
        self.stubs = S.StubBin(tmp_path / "stubs")

    def prints(self, name: str, text: str) -> str:
        path = self.tmp / name
        path.write_text(text)
        return S.prints(str(path))

    def tools(self, smpquery: Dict[str, str], perfquery: Dict[str, str]) -> None:
        """The switch-hdr answers, ``smpquery``/``perfquery`` cases first (they win)."""
        for tool, mine, usual in (
            ("smpquery", smpquery, S.partner_smpquery()),
            ("perfquery", perfquery, S.partner_perfquery()),
        ):
            cases = dict(mine)  # first: sh takes the first pattern that matches
            cases.update({key: body for key, body in usual.items() if key not in mine})
            self.stubs.add(tool, S.by_args(cases))

    def collect(self) -> Snapshot:
        options = {"path": self.stubs.path, "timeout_s": 10.0, "deadline_s": 25.0}
        return collect(self.sysfs, self.procfs, {"sysfs", "partner"}, options)


def graded(snap: Snapshot) -> List[Result]:
    return [result for check_id in CHECKS for result in run(check_id, snap)]


def assert_never_graded(results: List[Result], *, warned: str) -> None:
    """No pass or fail of the cable: the implausible answer warns, the rest skips."""
    assert {r.status for r in results} <= {Status.WARN, Status.SKIP}, results
    warns = [r for r in results if r.status == Status.WARN]
    assert warns and all(r.observed == "implausible" for r in warns), results
    assert any(warned in r.message for r in warns), warns


@pytest.mark.parametrize(
    "local_port, wrong",
    [("0", "LocalPort 0 is no cable's port"), ("255", "LocalPort 255 is no cable's port"),
     ("40", "LocalPort 40 is beyond its NumPorts 36")],
)  # fmt: skip
def test_an_impossible_local_port_is_never_asked_about_nor_graded(tmp_path, local_port, wrong):
    node = Node(tmp_path)
    info = set_field(capture("switch-hdr-nodeinfo.txt"), "LocalPort", local_port)
    node.tools({"* nodeinfo 0,1": node.prints("nodeinfo.txt", info)}, {})
    snap = node.collect()
    calls = node.stubs.calls()
    assert not [call for call in calls if call.startswith("perfquery")], calls
    assert [call for call in calls if call.endswith(f"portinfo 0,1 {local_port}")] == (
        [] if local_port != "0" else [c for c in calls if c.endswith("portinfo 0,1 0")][:1]
    )  # LocalPort 0's "portinfo 0,1 0" is portinfo0 itself, run once
    runs = {r.role: r for r in snap.commands.values()}
    assert wrong in str(runs[roles.partner("perfquery-x", "mlx5_0:1")].skipped)
    partner = snap.devices[0].ports[0].partner
    assert partner.port is None and partner.port_info is None and partner.counters is None
    results = graded(snap)
    assert_never_graded(results, warned=wrong)
    assert all(r.target == "mlx5_0:1<->leaf07/?" for r in results), results


@pytest.mark.parametrize(
    "lid, wrong",
    [("49152", "LID 49152 (0xc000) is a multicast"), ("65535", "LID 65535 (0xffff)"),
     ("70000", "LID 70000 is not a 16-bit LID")],
)  # fmt: skip
def test_an_impossible_switch_lid_is_never_asked_about_nor_graded(tmp_path, lid, wrong):
    node = Node(tmp_path)
    port0 = set_field(capture("switch-hdr-portinfo0.txt"), "Lid", lid)
    node.tools({"* portinfo 0,1 0": node.prints("portinfo0.txt", port0)}, {})
    snap = node.collect()
    assert not [call for call in node.stubs.calls() if call.startswith("perfquery")]
    assert snap.devices[0].ports[0].partner.lid is None
    counters = run("counters.partner", snap)
    assert [r.status for r in counters] == [Status.SKIP], counters
    assert wrong in counters[0].message
    link = run("link.partner", snap)  # the cable's PortInfo is still the cable's
    assert sorted(r.status for r in link) == [Status.PASS, Status.WARN], link
    assert any(r.observed == "implausible" and wrong in r.message for r in link)


def test_a_perfquery_answer_for_another_port_is_never_graded(tmp_path):
    """Asked about LID 1 port 1, -x prints port 2's counters: not kept (a warn); plain
    perfquery's right answer is what is graded."""
    node = Node(tmp_path)
    x2 = S.prints(S.partner_capture("switch-port2-perfquery-x.txt"))
    node.tools({}, {"-C * -P * -t * -x *": x2})
    snap = node.collect()
    assert str(snap.devices[0].ports[0].partner.counters.role) == "partner-perfquery mlx5_0:1"
    counters = run("counters.partner", snap)
    assert sorted(r.status for r in counters) == [Status.PASS, Status.WARN], counters
    warn = next(r for r in counters if r.status == Status.WARN)
    assert warn.observed == "implausible" and warn.target == "mlx5_0:1<->leaf07/1"
    assert "asked about LID 1 port 1 printed counters of LID 1 port 2" in warn.message


def test_a_pma_answering_for_another_port_select_is_never_graded(tmp_path):
    """The header says port 1 (what the tool asked) but the PMA answered for PortSelect 2:
    the error counters are not graded - one warn saying so, no pass."""
    node = Node(tmp_path)
    other = capture("switch-port2-perfquery.txt").replace("Lid 1 port 2", "Lid 1 port 1", 1)
    assert "PortSelect:......................2" in other
    x = S.prints(S.partner_capture("switch-hdr-perfquery-x.txt"))  # data counters only
    node.tools({}, {"-C * -P * -t * -x *": x, "-C * -P * -t *": node.prints("p.txt", other)})
    counters = run("counters.partner", node.collect())
    assert [r.status for r in counters] == [Status.WARN], counters
    assert any("answered for PortSelect 2" in r.message for r in counters), counters


def test_two_ports_claiming_the_same_far_end_port_are_never_graded(tmp_path):
    node = Node(tmp_path, count=2)
    node.tools({}, {})  # both answer leaf07 port 1
    results = graded(node.collect())
    assert_never_graded(results, warned="mlx5_0:1 and mlx5_1:1 claim the same far end")
    assert {r.target for r in results} == {"mlx5_0:1<->leaf07/1", "mlx5_1:1<->leaf07/1"}


def test_a_far_end_claiming_our_own_port_is_never_graded(tmp_path):
    node = Node(tmp_path)
    ours = "0x" + GUIDS[0].replace(":", "")
    info = capture("switch-hdr-nodeinfo.txt")
    for field in ("Guid", "PortGuid", "SystemGuid"):
        info = set_field(info, field, ours)
    node.tools({"* nodeinfo 0,1": node.prints("nodeinfo.txt", info)}, {})
    results = graded(node.collect())
    assert_never_graded(results, warned="node GUID of this node's own mlx5_0")


def test_a_loopback_cable_between_two_of_our_hcas_is_graded(tmp_path):
    """mlx5_0 port 1 cabled to mlx5_1 port 1 of the same node: each names the other back - a
    real cable, graded as any other."""
    node = Node(tmp_path, count=2)
    cases: Dict[str, str] = {}
    for me, other in ((0, 1), (1, 0)):
        info = capture("b2b-ca-nodeinfo.txt")
        for field in ("Guid", "PortGuid", "SystemGuid"):
            info = set_field(info, field, "0x" + GUIDS[other].replace(":", ""))
        cases[f"-C mlx5_{me} * nodeinfo 0,1"] = node.prints(f"nodeinfo{me}.txt", info)
    for step in ("nodedesc", "portinfo"):
        cases[f"* {step} 0,1"] = S.prints(S.partner_capture(f"b2b-ca-{step}.txt"))
    cases["* portinfo 0,1 *"] = S.prints(S.partner_capture("b2b-ca-portinfo.txt"))
    node.tools(cases, S.partner_perfquery("b2b-ca"))
    results = graded(node.collect())
    assert not [r for r in results if r.status in (Status.WARN, Status.FAIL)], results
    assert [r.status for r in results if r.check_id == "link.partner"] == [Status.PASS] * 2
