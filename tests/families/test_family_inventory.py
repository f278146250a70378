"""The inventory families (``ibdiag.families.ibstat``, ``.ibv_devinfo``): what they plan, and
their recorded runs -> ``Snapshot.inventory``, on every capture in
tests/fixtures/{ibstat,ibv_devinfo} (facts hand-read in test_family_inventory_parser), and what
they record for the ibstatus captures, garbage and failures."""

from __future__ import annotations

from typing import Optional

import pytest
from conftest import capture_names, read_capture
from snapshots import snapshot, with_runs
from test_family_inventory_parser import IBSTAT_FACTS, IBV_FACTS

from ibdiag import families, roles
from ibdiag.facts.inventory import Inventory, ListedCA, ListedPort, Listing
from ibdiag.facts.outcome import NoData
from ibdiag.families import ibstat as ibstat_family
from ibdiag.families import ibv_devinfo as ibv_devinfo_family
from ibdiag.model import CommandRun, Snapshot


def ibstat(stdout: str = "", rc: Optional[int] = 0, **kwargs) -> CommandRun:
    return CommandRun(argv=["ibstat"], role=roles.IBSTAT, rc=rc, stdout=stdout, **kwargs)


def ibv_devinfo(stdout: str = "", rc: Optional[int] = 0, **kwargs) -> CommandRun:
    return CommandRun(argv=["ibv_devinfo"], role=roles.IBV_DEVINFO, rc=rc, stdout=stdout, **kwargs)


def inventory_of(*runs: CommandRun) -> Inventory:
    snap = with_runs(snapshot([]), *runs)
    assert snap.problems == {}, snap.problems
    return snap.inventory


def test_the_families_are_found_with_their_level():
    for family in (ibstat_family, ibv_devinfo_family):
        assert family in families.families()
        assert families.source_levels()[family.SOURCE] == "standard"


def test_each_plans_its_tool_once():
    snap = snapshot([])
    assert ibstat_family.plan(snap) == [families.Planned(roles.IBSTAT, ["ibstat"])]
    assert ibv_devinfo_family.plan(snap) == [families.Planned(roles.IBV_DEVINFO, ["ibv_devinfo"])]


@pytest.mark.parametrize("name", capture_names("ibstat"))
def test_every_ibstat_capture_becomes_a_typed_listing(name):
    facts = IBSTAT_FACTS[name]
    listing = inventory_of(ibstat(read_capture("ibstat", name))).ibstat
    assert isinstance(listing, Listing)
    assert listing.role == roles.IBSTAT
    assert listing.outcome is not None and listing.outcome.no_data is None
    assert (listing.unusable, listing.error, listing.problems) == (None, None, [])
    assert [ca.name for ca in listing.cas] == facts["names"]
    cas = {ca.name: ca for ca in listing.cas}
    for ca_name, (_type, firmware, guid, ports) in facts["cas"].items():
        ca = cas[ca_name]
        assert (ca.firmware, ca.node_guid) == (firmware, guid)
        for number, (state, _phys, _rate, link_layer, _lid, _sm) in ports.items():
            assert (number, state, link_layer) in [
                (port.number, port.state, port.link_layer) for port in ca.ports
            ]
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
                ListedPort(number=1, state="Active", link_layer="InfiniBand",
                           physical_state="LinkUp", rate=20.0, lid=3, sm_lid=3, lmc=0,
                           port_guid="0x0002c90300002f79", capability_mask="0x0251086a"),
                ListedPort(number=2, state="Down", link_layer="InfiniBand",
                           physical_state="Polling", rate=10.0, lid=0, sm_lid=0, lmc=0,
                           port_guid="0x0002c90300002f7a", capability_mask="0x02510868"),
            ],
            number_of_ports=2,
            hardware_version="a0",
            system_image_guid="0x0002c90300002f7b",
            ca_type="MT25418",
        )
    ]  # fmt: skip


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
    assert (found.ibstat.outcome.no_data, found.ibv_devinfo.outcome.no_data) == (
        NoData.TIMED_OUT,
        NoData.NO_PERMISSION,
    )
    assert found.ibstat.outcome.command == "ibstat" and found.ibstat.role == roles.IBSTAT


def test_a_tool_not_run_has_no_listing_and_no_tool_no_field():
    found = inventory_of(ibstat(read_capture("ibstat", "gpud-ibstat-h100-cx7-roce-all-active.txt")))
    assert found.ibstat is not None and found.ibv_devinfo is None
    assert inventory_of(ibv_devinfo("No IB devices found\n")).ibstat is None
    other = CommandRun(argv=["dmesg"], role=roles.KERNEL_LOG, rc=0, stdout="x")
    assert with_runs(snapshot([]), other).inventory is None


def test_interpret_sets_the_snapshot_field_and_it_round_trips():
    runs = [
        ibstat(
            read_capture("ibstat", "gpud-ibstat-h100-8xcx7-ndr-plus-bluefield3-bond-all-active.txt")
        ),
        ibv_devinfo(
            read_capture("ibv_devinfo", "linux-rdma-2024-cx5-roce-mlx5_bond_0-after-lag.txt")
        ),
    ]
    snap = with_runs(snapshot([]), *runs)
    assert snap.problems == {}
    again = Snapshot.model_validate_json(snap.model_dump_json())
    assert again.inventory == snap.inventory
    assert [ca.name for ca in again.inventory.ibv_devinfo.cas] == ["mlx5_bond_0"]
    assert again.inventory.ibstat.cas[-1].name == "mlx5_bond_0"
