"""partition.pkeys and its reader (ibdiag.sources.partitions): sysfs ``ports/N/pkeys/<index>``
trees as the kernel lays them out (one file per slot, 0x0000 for an empty one), the expected
keys with their membership, the node's ports compared, and every odd slot a problem."""

from __future__ import annotations

import json
import os

import pytest
from snapshots import device, pkey_table, port, run, snapshot, statuses
from sysfs_builder import mlx5_node, write_node

from ibdiag.facts.partitions import PKeyEntry, PKeyTable, partition_of
from ibdiag.model import Status
from ibdiag.sources.partitions import parse_pkey, read_pkeys
from ibdiag.sources.sysfs import SysfsReader, read_devices
from ibdiag.thresholds import Thresholds

PORT = "class/infiniband/mlx5_0/ports/1"


def _table(tmp_path, slots, **write) -> PKeyTable:
    root = str(tmp_path / "sys")
    write_node(root, mlx5_node(1, port=dict(pkeys=tuple(slots))))
    for index, text in write.items():  # a slot's file replaced by odd content
        with open(os.path.join(root, PORT, "pkeys", index.lstrip("_")), "w") as handle:
            handle.write(text)
    table = read_pkeys(SysfsReader(root), PORT)
    assert table is not None
    return table


def test_the_reader_keeps_non_empty_slots_in_index_order(tmp_path):
    slots = ["0xffff", "0x0000", "0x8001", "0x0000", "0x0002"] + ["0x0000"] * 123
    table = _table(tmp_path, slots)
    assert table.size == 128
    assert table.keys == [
        PKeyEntry(index=0, value=0xFFFF),
        PKeyEntry(index=2, value=0x8001),
        PKeyEntry(index=4, value=0x0002),
    ]
    assert table.texts() == ["0xffff", "0x8001", "0x0002"] and table.problems == []
    assert table.keys[1].full_member and not table.keys[2].full_member


def test_a_garbage_or_unreadable_slot_is_a_problem_of_that_slot_only(tmp_path):
    table = _table(tmp_path, ["0xffff", "0x8001", "0x0000"], _1="N/A\n", _2="0x123456\n")
    assert table.texts() == ["0xffff"]
    assert table.problems == [
        "pkeys/1: not a partition key: 'N/A'",
        "pkeys/2: not a partition key: '0x123456'",
    ]


def test_a_name_that_is_not_an_index_is_noted_and_not_read(tmp_path):
    root = str(tmp_path / "sys")
    write_node(root, mlx5_node(1))
    with open(os.path.join(root, PORT, "pkeys", "²"), "w") as handle:
        handle.write("0x8001\n")
    table = read_pkeys(SysfsReader(root), PORT)
    assert table is not None and table.texts() == ["0xffff"]
    assert table.problems == ["pkeys/²: not a table index"]


def test_no_pkeys_directory_is_no_fact(tmp_path):
    root = str(tmp_path / "sys")
    write_node(root, mlx5_node(1, port=dict(pkeys=())))
    assert read_pkeys(SysfsReader(root), PORT) is None
    devices, _ = read_devices(SysfsReader(root))
    assert "pkeys" not in devices[0].ports[0].facts


def test_the_port_fact_is_read_with_the_port(tmp_path):
    root = str(tmp_path / "sys")
    write_node(root, mlx5_node(2, port=dict(pkeys=("0xffff", "0x8001"))))
    devices, _ = read_devices(SysfsReader(root))
    assert [d.ports[0].facts["pkeys"].texts() for d in devices] == [["0xffff", "0x8001"]] * 2


@pytest.mark.parametrize(
    "text, value",
    [("0xffff", 0xFFFF), ("0x8001", 0x8001), ("0X7FFF", 0x7FFF), ("0x0", 0),
     ("ffff", None), ("0x", None), ("0x10000", None), ("0xzz", None), ("", None)],
)  # fmt: skip
def test_parse_pkey(text, value):
    assert parse_pkey(text) == value


def test_partition_of_drops_the_membership_bit():
    assert partition_of(0x8001) == partition_of(0x0001) == 1
    assert partition_of(0xFFFF) == 0x7FFF


# -- the check -----------------------------------------------------------------------------


def _node(*tables, **port_kwargs):
    return snapshot(
        [device(f"mlx5_{i}", ports=[port(pkeys=t, **port_kwargs)]) for i, t in enumerate(tables)]
    )


def test_expected_key_held_passes():
    th = Thresholds(expect_pkeys=["0x8001"])
    results = run("partition.pkeys", _node((0xFFFF, 0x8001), (0x8001, 0xFFFF)), th)
    assert [r.status for r in results] == [Status.PASS, Status.PASS]
    assert results[0].message == "holds 0xffff 0x8001"


def test_a_port_left_out_of_the_expected_partition_fails_naming_it():
    th = Thresholds(expect_pkeys=["0x8001"])
    results = run("partition.pkeys", _node((0xFFFF, 0x8001), (0xFFFF,)), th)
    assert statuses(results) == {"mlx5_0:1": "pass", "mlx5_1:1": "fail"}
    failed = results[1]
    assert failed.message == "partition key 0x8001 missing (the table holds 0xffff)"
    assert failed.subject == "pkey 0x8001 missing" and failed.evidence == [
        "class/infiniband/mlx5_1/ports/1/pkeys"
    ]
    assert "partitions.conf" in (failed.hint or "")


def test_a_limited_member_where_full_is_expected_fails_saying_so():
    th = Thresholds(expect_pkeys=["0x8001"])
    (result,) = run("partition.pkeys", _node((0xFFFF, 0x0001)), th)
    assert result.status is Status.FAIL
    assert result.message == "holds 0x0001 (limited member) at index 1 where 0x8001 is expected"


def test_an_empty_table_fails():
    (result,) = run("partition.pkeys", _node(()))
    assert result.status is Status.FAIL and result.message == "the partition table holds no key"


def test_without_expectations_a_port_that_differs_from_the_others_warns():
    results = run("partition.pkeys", _node((0xFFFF, 0x8001), (0xFFFF, 0x8001), (0xFFFF,)))
    assert statuses(results) == {"mlx5_0:1": "pass", "mlx5_1:1": "pass", "mlx5_2:1": "warn"}
    assert results[2].message == (
        "holds 0xffff while 2 of the node's other InfiniBand ports hold 0x8001 0xffff "
        "(lacks 0x8001; extra -)"
    )
    assert len(results) == 3  # one result per port


def test_subnets_per_rail_compares_only_ports_on_the_same_sm():
    snap = snapshot(
        [
            device("mlx5_0", ports=[port(pkeys=(0xFFFF, 0x8001), sm_lid=1)]),
            device("mlx5_1", ports=[port(pkeys=(0xFFFF, 0x8002), sm_lid=7)]),
        ]
    )
    assert {r.status for r in run("partition.pkeys", snap)} == {Status.WARN, Status.PASS}
    both = run("partition.pkeys", snap, Thresholds(subnets_per_rail=True))
    assert [r.status for r in both] == [Status.PASS, Status.PASS]


def test_no_table_a_port_not_active_and_roce_are_not_graded():
    snap = snapshot(
        [
            device("mlx5_0", ports=[port(pkeys=None)]),
            device("mlx5_1", ports=[port(state=2, pkeys=())]),
            device("mlx5_2", ports=[port(link_layer="Ethernet", pkeys=())]),
        ]
    )
    results = run("partition.pkeys", snap, Thresholds(expect_pkeys=["0x8001"]))
    assert [(r.target, r.status) for r in results] == [
        ("mlx5_0:1", Status.SKIP),
        ("mlx5_1:1", Status.SKIP),
    ]
    assert results[0].message == "no pkeys table in sysfs"


def test_unreadable_slots_warn_when_nothing_else_is_wrong():
    table = pkey_table(0xFFFF).model_copy(update={"problems": ["pkeys/3: unreadable: EIO"]})
    odd = port(pkeys=None).model_copy(update={"facts": {"pkeys": table}})
    snap = snapshot([device(ports=[odd])])
    (result,) = run("partition.pkeys", snap)
    assert result.status is Status.WARN and "pkeys/3: unreadable: EIO" in result.message


def test_a_tree_end_to_end(tmp_path, run_cli):
    root = str(tmp_path / "sys")
    specs = mlx5_node(2, port=dict(pkeys=("0xffff", "0x8001")))
    specs[1].ports[0].pkeys = ("0xffff",)
    write_node(root, specs)
    done = run_cli("check", "--sysfs", root, "--json")
    results = json.loads(done.stdout)["results"]
    mine = [(r["target"], r["status"]) for r in results if r["check_id"] == "partition.pkeys"]
    assert mine == [("mlx5_0:1", "pass"), ("mlx5_1:1", "warn")]


# -- the fleet: PKey drift, like firmware drift --------------------------------------------------


def test_the_fleet_names_a_node_whose_ports_hold_other_partitions(tmp_path, run_cli):
    from stubs import write_procfs

    folder = tmp_path / "reports"
    folder.mkdir()
    for host in ("gpu001", "gpu002", "gpu003"):
        root = str(tmp_path / host / "sys")
        keys = ("0xffff",) if host == "gpu003" else ("0xffff", "0x8001")
        write_node(root, mlx5_node(2, port=dict(pkeys=keys)))
        procfs = write_procfs(tmp_path / host / "proc", hostname=host, modules=None)
        done = run_cli("check", "--sysfs", root, "--procfs", procfs, "--json",
                       "-o", str(folder / f"{host}.json"))  # fmt: skip
        assert done.exit_code == 0, done.stdout
    text = run_cli("fleet", "report", str(folder)).stdout
    assert "  pkeys rails 0-1: 0x8001 0xffff on 2 nodes; 0xffff on gpu003 (1)" in text, text
    found = json.loads(run_cli("fleet", "report", str(folder), "--json").stdout)
    drifts = [d for d in found["drift"] if d["attribute"] == "pkeys"]
    assert [(d["rail"], d["majority"]) for d in drifts] == [
        (0, "0x8001 0xffff"),
        (1, "0x8001 0xffff"),
    ]
