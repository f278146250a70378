"""The far end of a cable as real fabrics show it (tests/fixtures: ibnetdiscover -p and
iblinkinfo on real EDR/HDR/DDR fabrics, a real EDR switch port's perfquery -x, ibqueryerrors):
how results and drain reasons name real switches, and real switch-side counters graded.

The simulator (tests/captures/ibsim*) prints the tools' own formats but its own values; these
are what real switches are called and what they count.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Dict, List

import pytest
from conftest import read_capture
from snapshots import builtin_registry, device, port, replaced, snapshot

from ibdiag import roles
from ibdiag.counters.catalogue import catalogue_name, lookup
from ibdiag.drain_reason import drain_reason
from ibdiag.facts.partner import Partner, cable_name
from ibdiag.families.perfquery import reading
from ibdiag.grade import run_check
from ibdiag.model import CommandRun, Report, Result, Snapshot, Status
from ibdiag.thresholds import Thresholds

_QUOTED = re.compile(r"'([^']*)'")

# Every node description the captures hold -> the name a cable's far end gets in a result
# target, a drain reason and a metric label: one token, what an admin recognises.
NAMES = {
    "5FB0405-leaf-IB01 ": "5FB0405-leaf-IB01",
    "5FB0406-spine-IB01 ": "5FB0406-spine-IB01",
    " 5FB0406-spine-IB02 ": "5FB0406-spine-IB02",
    " 5FB0406-spine-IB03 ": "5FB0406-spine-IB03",
    "Mellanox Technologies Aggregation Node": "Mellanox_Technologies_Aggregation_Node",
    "worker20 mlx5_3": "worker20_mlx5_3",
    "Infiniscale-IV Mellanox Technologies": "Infiniscale-IV_Mellanox_Technologies",
    "o0001 HCA-1": "o0001_HCA-1",
    "o0002 HCA-1": "o0002_HCA-1",
    "p0001 HCA-1": "p0001_HCA-1",
    "ib-i1l1s01": "ib-i1l1s01",
    "ib-i1l2s01": "ib-i1l2s01",
    "ib-i4l1s01": "ib-i4l1s01",
    "ib-i7l2s01": "ib-i7l2s01",
}
IBNETDISCOVER = (
    "infiniband_exporter-ibnetdiscover-p-edr.txt",
    "infiniband_exporter-ibnetdiscover-p-hdr.txt",
)
IBLINKINFO = "archwiki-iblinkinfo-two-connectx-back-to-back-ddr.txt"
SWITCH_X = "infiniband_exporter-x-switch-edr-0x506b4b03005c2740.txt"


def descriptions(name: str) -> List[str]:
    return [found for line in read_capture("ibnetdiscover", name).splitlines()
            for found in _QUOTED.findall(line)]  # fmt: skip


def test_every_real_node_description_names_its_cable_in_one_token():
    seen = {text for name in IBNETDISCOVER for text in descriptions(name)}
    assert seen == set(NAMES), "a new capture: write down the name each description gets"
    for text, expected in NAMES.items():
        far = Partner(node_guid="0x7cfe9003009ce5b0", description=text, port=35)
        assert cable_name("mlx5_0:1", far) == f"mlx5_0:1<->{expected}/35"


def test_a_back_to_back_cable_from_iblinkinfo_names_the_other_hca():
    """iblinkinfo on two ConnectX HCAs cabled back to back: the far end is the other HCA,
    named by its node description ("kvm mlx4_0")."""
    text = read_capture("ibnetdiscover", IBLINKINFO)
    peers = re.findall(r'==>\s+\d+\s+(\d+)\[\s*\]\s+"([^"]+)"', text)
    assert peers == [("1", "kvm mlx4_0"), ("1", "MT25408 ConnectX Mellanox Technologies")]
    far = Partner(node_type="Channel Adapter", node_guid="0x0002c90300002779",
                  description=peers[0][1], port=int(peers[0][0]))  # fmt: skip
    assert cable_name("mlx4_0:1", far) == "mlx4_0:1<->kvm_mlx4_0/1"


def _edr_cable() -> Dict[str, str]:
    """The EDR capture's cable from p0001's HCA to switch ib-i4l1s01 (GUID, LID, port)."""
    text = read_capture("ibnetdiscover", IBNETDISCOVER[0])
    line = next(line for line in text.splitlines() if "'p0001 HCA-1' - 'ib-i4l1s01'" in line)
    fields = line.split()
    return {"lid": fields[8], "port": fields[9], "guid": fields[10], "name": "ib-i4l1s01"}


def _switch_side(counters_text: str, cable: Dict[str, str]) -> Partner:
    role = roles.partner("perfquery-x", "mlx5_0:1")
    argv = ["perfquery", "-x", cable["lid"], cable["port"]]
    run = CommandRun(argv=argv, rc=0, role=role, stdout=counters_text)
    return Partner(
        node_type="Switch",
        node_guid=cable["guid"],
        description=cable["name"],
        port=int(cable["port"]),
        lid=int(cable["lid"]),
        counters=reading(run),
    )


def _node(far: Partner, hours: float = 0.0) -> Snapshot:
    snap = snapshot([device("mlx5_0", ports=[port(1, rate_text="100 Gb/sec (4X EDR)")])])
    snap = replaced(snap, "mlx5_0:1", partner=far)
    return snap.model_copy(update={"collected_at": snap.collected_at + timedelta(hours=hours)})


def _grade(now: Snapshot, baseline: Snapshot) -> List[Result]:
    spec = builtin_registry().get("counters.partner")
    return run_check(spec, now, Thresholds(), baseline=baseline)


def test_a_real_edr_switch_ports_errors_fail_naming_the_real_cable():
    """The switch the EDR capture cables p0001 to (0x506b4b03005c2740, LID 2052 in both
    captures) counted a link down, 7 relay errors and 20046 discards on a port (the -x capture
    is of its port 1; read here as the cable's port 35). Against a baseline of zeros two hours
    earlier: the link down fails, the relay errors warn, the discards (10023/hour, above the
    catalogue's 1000) fail - named by the cable, as a drain reason groups them."""
    cable = _edr_cable()
    assert (cable["guid"], cable["lid"], cable["port"]) == ("0x506b4b03005c2740", "2052", "35")
    text = read_capture("perfquery", SWITCH_X)
    now = _switch_side(text, cable)
    assert now.counters_extended and now.has_error_counters  # a real switch's -x has them
    zeros = re.sub(r"(Counter|Errors|Discards|Dropped|Wait):(\.+)\d+", r"\1:\g<2>0", text)
    then = _switch_side(zeros, cable)
    results = _grade(_node(now, hours=2), _node(then))
    graded = {(r.subject, r.status) for r in results if r.status != Status.PASS}
    assert graded == {
        ("link_downed", Status.FAIL),
        ("port_rcv_switch_relay_errors", Status.WARN),
        ("port_xmit_discards", Status.FAIL),
    }
    assert {r.target for r in results} == {"mlx5_0:1<->ib-i4l1s01/35"}
    reason = drain_reason(Report.model_construct(results=results))
    assert reason == "ibdiag: mlx5_0:1<->ib-i4l1s01/35 counters.partner link_downed and more"


@pytest.mark.parametrize("hours, discards", [(1.0, Status.FAIL), (4.0, Status.WARN)])
def test_what_a_real_ibqueryerrors_flags_is_graded_as_ours(hours, discards):
    """ibqueryerrors (a newer rdma-core, human-readable values) on a real port of a fabric with
    UCX retry errors: every counter it flags is catalogued under perfquery's name; the error
    ones are graded on their increase like ours, PortXmitWait is congestion (not graded)."""
    line = read_capture("ibqueryerrors", next(iter(_ibqueryerrors_names())))
    flagged = {name: int(value) for name, value in re.findall(r"\[(\w+) == (\d+)", line)}
    assert flagged == {"LinkDownedCounter": 25, "PortRcvErrors": 26, "PortXmitDiscards": 2846,
                       "PortXmitWait": 14681376621}  # fmt: skip
    categories = {name: lookup(catalogue_name(name)).category for name in flagged}
    assert categories == {"LinkDownedCounter": "error", "PortRcvErrors": "error",
                          "PortXmitDiscards": "error", "PortXmitWait": "congestion"}  # fmt: skip
    role = roles.partner("perfquery", "mlx5_0:1")

    def far(values: Dict[str, int]) -> Partner:
        counters = reading(
            CommandRun(
                argv=["perfquery"],
                rc=0,
                role=role,
                stdout="\n".join(
                    f"{name}:{'.' * (33 - len(name))}{value}" for name, value in values.items()
                ),
            )
        )
        return Partner(node_type="Switch", node_guid="0x1070fd0300370ea2", port=1,
                       description="leaf", counters=counters)  # fmt: skip

    zero = {name: 0 for name in ("SymbolErrorCounter", *flagged)}
    results = _grade(_node(far({**zero, **flagged}), hours=hours), _node(far(zero)))
    graded = {r.subject: r.status for r in results if r.status != Status.PASS}
    assert graded == {"link_downed": Status.FAIL, "port_rcv_errors": Status.WARN,
                      "port_xmit_discards": discards}  # fmt: skip


def _ibqueryerrors_names() -> List[str]:
    from conftest import capture_names

    return [name for name in capture_names("ibqueryerrors") if isinstance(name, str)]
