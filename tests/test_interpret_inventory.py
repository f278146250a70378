"""The inventory interpreter: recorded ibstat / ibv_devinfo runs -> ``Snapshot.inventory``, on
every capture in tests/fixtures/{ibstat,ibv_devinfo} (facts hand-read in
test_parsers_inventory), and what it records for the ibstatus captures, garbage and failures."""

from __future__ import annotations

from typing import Optional

import pytest
from conftest import capture_names, read_capture
from snapshots import snapshot
from test_parsers_inventory import IBSTAT_FACTS, IBV_FACTS

from ibdiag import roles
from ibdiag.facts.inventory import Inventory, ListedCA, ListedPort, Listing
from ibdiag.model import CommandRun, Snapshot
from ibdiag.sources.interpret import FAMILIES, interpret
from ibdiag.sources.interpret import inventory as interpreter


def ibstat(stdout: str = "", rc: Optional[int] = 0, **kwargs) -> CommandRun:
    return CommandRun(argv=["ibstat"], role=roles.IBSTAT, rc=rc, stdout=stdout, **kwargs)


def ibv_devinfo(stdout: str = "", rc: Optional[int] = 0, **kwargs) -> CommandRun:
    return CommandRun(argv=["ibv_devinfo"], role=roles.IBV_DEVINFO, rc=rc, stdout=stdout, **kwargs)


def inventory_of(*runs: CommandRun) -> Inventory:
    return interpreter.interpret({"devices": []}, {run.key: run for run in runs})["inventory"]


def test_the_family_is_registered():
    assert "inventory" in FAMILIES


@pytest.mark.parametrize("name", capture_names("ibstat"))
def test_every_ibstat_capture_becomes_a_typed_listing(name):
    facts = IBSTAT_FACTS[name]
    listing = inventory_of(ibstat(read_capture("ibstat", name))).ibstat
    assert isinstance(listing, Listing)
    assert listing.role == roles.IBSTAT
    assert (listing.unusable, listing.error, listing.problems) == (None, None, [])
    assert [ca.name for ca in listing.cas] == facts["names"]
    cas = {ca.name: ca for ca in listing.cas}
    for ca_name, (_type, firmware, guid, ports) in facts["cas"].items():
        ca = cas[ca_name]
        assert (ca.firmware, ca.node_guid) == (firmware, guid)
        for number, (state, _phys, _rate, link_layer, _lid, _sm) in ports.items():
            assert ListedPort(number=number, state=state, link_layer=link_layer) in ca.ports
    for ca in listing.cas:
        assert ca.ports and [p.number for p in ca.ports] == sorted(p.number for p in ca.ports)


@pytest.mark.parametrize("name", capture_names("ibv_devinfo"))
def test_every_ibv_devinfo_capture_becomes_a_typed_listing(name):
    facts = IBV_FACTS[name]
    listing = inventory_of(ibv_devinfo(read_capture("ibv_devinfo", name))).ibv_devinfo
    assert listing is not None and listing.role == roles.IBV_DEVINFO
    assert (listing.unusable, listing.error, listing.problems) == (None, None, [])
    assert [ca.name for ca in listing.cas] == list(facts)
    for ca in listing.cas:
        fw, guid, _part, _board, _count, ports = facts[ca.name]
        assert (ca.firmware, ca.node_guid) == (fw, guid)
        assert [p.number for p in ca.ports] == sorted(ports)
        for got in ca.ports:
            state, _num, _phys, link_layer, _mtu, _sm, _lid = ports[got.number]
            assert (got.state, got.link_layer) == (state, link_layer)


def test_one_ca_typed_in_full():
    listing = inventory_of(
        ibstat(
            read_capture(
                "ibstat", "archwiki-connectx-ddr-mt25418-port1-active-port2-down-polling.txt"
            )
        )
    ).ibstat
    assert listing.cas == [
        ListedCA(
            name="mlx4_0",
            firmware="2.9.1000",
            node_guid="0x0002c90300002f78",
            ports=[
                ListedPort(number=1, state="Active", link_layer="InfiniBand"),
                ListedPort(number=2, state="Down", link_layer="InfiniBand"),
            ],
        )
    ]


@pytest.mark.parametrize("name", capture_names("ibstatus"))
def test_ibstatus_output_where_ibstat_is_expected_is_a_problem_not_a_listing(name):
    """A site that points ``ibstat`` at ibstatus (or a wrapper printing the wrong format):
    no CA is invented, the parser's complaint is recorded."""
    listing = inventory_of(ibstat(read_capture("ibstatus", name))).ibstat
    assert listing.cas == []
    assert listing.problems and listing.problems[0].startswith("unparseable line 1: ")
    assert "Infiniband device" in listing.problems[0]


@pytest.mark.parametrize(
    "junk", ["\x00\xff\xfe" * 50, "Port 1:\n\tState: Active\n", "port:\t1\n", "\n \n"]
)
def test_garbage_output_is_a_recorded_problem_not_a_crash(junk):
    found = inventory_of(ibstat(junk), ibv_devinfo(junk))
    for listing in (found.ibstat, found.ibv_devinfo):
        assert listing.cas == [] and listing.unusable is None
        assert listing.problems, listing


def test_what_a_tool_prints_instead_of_a_listing_is_its_error():
    found = inventory_of(
        ibstat("ibpanic: [1234] main: can't get CA list: No such file or directory\n"),
        ibv_devinfo("No IB devices found\n"),
    )
    assert "can't get CA list" in found.ibstat.error
    assert found.ibv_devinfo.error == "No IB devices found"
    assert found.ibstat.cas == found.ibv_devinfo.cas == []


def test_a_failed_run_is_unusable_and_not_parsed():
    listed = read_capture("ibstat", "gpud-ibstat-h100-cx7-roce-all-active.txt")
    found = inventory_of(
        ibstat(listed, rc=None, timed_out=True, duration_s=10.0),
        ibv_devinfo(rc=None, permission_denied=True),
    )
    assert found.ibstat.unusable == "ibstat timed out after 10.0 s and was killed"
    assert found.ibstat.cas == []  # whatever it printed before it hung is no listing
    assert found.ibv_devinfo.unusable == "ibv_devinfo: permission denied"


def test_a_tool_not_run_has_no_listing_and_no_tool_no_field():
    found = inventory_of(ibstat(read_capture("ibstat", "gpud-ibstat-h100-cx7-roce-all-active.txt")))
    assert found.ibstat is not None and found.ibv_devinfo is None
    other = CommandRun(argv=["dmesg"], role=roles.KERNEL_LOG, rc=0, stdout="x")
    assert interpreter.interpret({"devices": []}, {other.key: other}) == {}


def test_interpret_sets_the_snapshot_field_and_it_round_trips():
    runs = [
        ibstat(
            read_capture("ibstat", "gpud-ibstat-h100-8xcx7-ndr-plus-bluefield3-bond-all-active.txt")
        ),
        ibv_devinfo(
            read_capture("ibv_devinfo", "linux-rdma-2024-cx5-roce-mlx5_bond_0-after-lag.txt")
        ),
    ]
    commands = {run.key: run for run in runs}
    fields = interpret({"devices": [], "problems": {}}, commands)
    assert "interpret.inventory" not in fields["problems"]
    snap = snapshot([]).model_copy(update={"commands": commands, "inventory": fields["inventory"]})
    again = Snapshot.model_validate_json(snap.model_dump_json())
    assert again.inventory == snap.inventory
    assert [ca.name for ca in again.inventory.ibv_devinfo.cas] == ["mlx5_bond_0"]
    assert again.inventory.ibstat.cas[-1].name == "mlx5_bond_0"
