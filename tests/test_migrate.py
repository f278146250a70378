"""Schema 1 -> 2 (``ibdiag.migrate``): commands keyed by role, and runs recorded before roles
were kept get them back from today's plan, and nothing else does.

A state file or bundle from an older ibdiag holds runs with ``role`` None, keyed by argv;
re-grading it with today's code must find perfquery's run of ``mlx5_0:1`` as ``perfquery-x
mlx5_0:1`` although it is known only by its argv there (``ibdiag.migrate``, the one place
that may).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

from conftest import read_capture

from ibdiag import roles
from ibdiag.counters import baseline
from ibdiag.migrate import upgrade
from ibdiag.model import SCHEMA_VERSION, CommandRun, Device, NetDev, Port, Snapshot


def _devices():
    port = Port(number=1, path="p", state=4, link_layer="InfiniBand", netdev=NetDev(name="ib0"))
    return [Device(name="mlx5_0", path="d", ports=[port])]


HEALTHY_BW = "superbench-ib_write_bw-loopback-8M-azure-hdr-ib0-server-client-interleaved.txt"
NEEDS = {"sysfs", "perfquery", "ethtool", "kernel_log", "ibstat", "ibv_devinfo"}


# What ibdiag 0.1 ran at level standard on _devices(), fallbacks included, as it recorded them.
OLD_ARGVS = (
    "perfquery -x -C mlx5_0 -P 1",
    "perfquery -C mlx5_0 -P 1",
    "perfquery -E -C mlx5_0 -P 1",
    "perfquery -X -C mlx5_0 -P 1",
    "ethtool -S ib0",
    "dmesg --kernel --nopager",
    "journalctl -k -b --no-pager -o short-monotonic",
    "ibstat",
    "ibv_devinfo",
)


def _old_runs():
    """Every planned run and its fallback, recorded without a role, keyed by argv (schema 1),
    plus two foreign runs."""
    runs = {}
    for line in OLD_ARGVS:
        runs[line] = CommandRun(argv=line.split(), rc=0, stdout="x")
    for argv in (["/opt/site/nccl.sh", "-g", "8"], ["perfquery", "-x", "-C", "mlx5_9", "-P", "1"]):
        runs[" ".join(argv)] = CommandRun(argv=argv, rc=0)
    return runs


def _old_snapshot(commands):
    return Snapshot(
        schema_version=1, tool_version="0.1.0", sysfs_root="/sys", procfs_root="/proc",
        collected_at=datetime(2026, 1, 1, tzinfo=timezone.utc), sources=sorted(NEEDS),
        devices=_devices(), commands=commands,
    )  # fmt: skip


def test_every_planned_argv_gets_its_role_back_and_foreign_runs_get_none():
    upgraded = upgrade(_old_snapshot(_old_runs()), nccl_program="/opt/site/nccl.sh")
    assert upgraded.schema_version == SCHEMA_VERSION == 2
    restored = upgraded.commands
    assert all(key == run.key for key, run in restored.items())  # keyed by role now
    by_role = {run.role: " ".join(run.argv) for run in restored.values()}
    assert by_role[roles.perfquery("x", "mlx5_0:1")] == "perfquery -x -C mlx5_0 -P 1"
    assert by_role[roles.perfquery("basic", "mlx5_0:1")] == "perfquery -C mlx5_0 -P 1"
    assert by_role[roles.perfquery("E", "mlx5_0:1")] == "perfquery -E -C mlx5_0 -P 1"
    assert by_role[roles.perfquery("X", "mlx5_0:1")] == "perfquery -X -C mlx5_0 -P 1"
    assert by_role[roles.ethtool_stats("ib0")] == "ethtool -S ib0"
    assert by_role[roles.KERNEL_LOG] == "dmesg --kernel --nopager"
    assert by_role[roles.KERNEL_LOG_FALLBACK].startswith("journalctl -k")
    assert by_role[roles.IBSTAT] == "ibstat"
    assert by_role[roles.IBV_DEVINFO] == "ibv_devinfo"
    assert by_role[roles.NCCL_TESTS] == "/opt/site/nccl.sh -g 8"
    # a port this node does not have is not given one of its roles (kept, filed by argv)
    assert restored["perfquery -x -C mlx5_9 -P 1"].role is None
    assert len(restored) == len(OLD_ARGVS) + 2


def test_runs_recorded_with_roles_are_kept_and_the_others_restored_run_by_run():
    """ibdiag recorded roles for nccl-tests and the loopback runs (a8e7a2d) before it did for
    the read-only commands: one snapshot holds both kinds, and each unnamed run is restored."""
    site = CommandRun(argv=["/opt/site/nccl.sh"], role=roles.NCCL_TESTS, rc=0)
    planned = CommandRun(argv=["ibv_devinfo"], rc=0)
    foreign = CommandRun(argv=["ibv_devinfo", "-v"], rc=0)
    commands = {" ".join(run.argv): run for run in (site, planned, foreign)}
    restored = upgrade(_old_snapshot(commands)).commands
    assert restored[str(roles.NCCL_TESTS)] is site
    assert restored[str(roles.IBV_DEVINFO)].argv == ["ibv_devinfo"]
    assert restored["ibv_devinfo -v"] is foreign  # not a command today's plan would run
    today = upgrade(_old_snapshot({site.key: site}))
    assert upgrade(today) is today  # today's format: nothing to do


def test_a_saved_snapshot_is_parsed_anew_and_stale_facts_are_dropped():
    """reinterpret: typed fields come from today's parsers only; an older ibdiag's value of a
    field no run supports any more is not kept."""
    from ibdiag.facts import fact_fields
    from ibdiag.facts.kernel_log import KernelLog
    from ibdiag.migrate import reinterpret

    assert "kernel_log" in fact_fields(Snapshot) and "perfquery" in fact_fields(Port)
    assert fact_fields(NetDev) == ("ethtool",)
    stale = KernelLog(role=roles.KERNEL_LOG, unusable=["from an older ibdiag"])
    runs = {key: run for key, run in _old_runs().items() if run.argv[0] == "ibstat"}
    runs = {run.key: run.model_copy(update={"role": roles.IBSTAT}) for run in runs.values()}
    snapshot = Snapshot(
        tool_version="0.0-old", collected_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
        sysfs_root="/sys", procfs_root="/proc", sources=sorted(NEEDS), devices=_devices(),
        commands=runs, kernel_log=stale,
    )  # fmt: skip
    again = reinterpret(snapshot)
    assert again.kernel_log is None  # no kernel-log run: nothing to parse, nothing kept
    assert again.inventory is not None and again.inventory.ibstat.role == roles.IBSTAT


def test_a_state_file_written_before_roles_loads_with_its_roles(tmp_path):
    snapshot = Snapshot(
        tool_version="0.0-old",
        collected_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
        sysfs_root="/sys",
        procfs_root="/proc",
        sources=sorted(NEEDS | {"procfs"}),
        devices=_devices(),
        commands=_old_runs(),
    )
    data = json.loads(snapshot.model_dump_json())
    for run in data["commands"].values():
        del run["role"]  # as an older ibdiag wrote it
    path = tmp_path / "state.json"
    path.write_text(json.dumps(data))
    loaded, problem = baseline.load(str(path))
    assert problem is None
    assert loaded.run(roles.perfquery("x", "mlx5_0:1")).argv == [
        "perfquery", "-x", "-C", "mlx5_0", "-P", "1",
    ]  # fmt: skip
    assert loaded.run(roles.ethtool_stats("ib0")).argv == ["ethtool", "-S", "ib0"]


def test_loopback_runs_recorded_before_roles_keep_their_gpu(tmp_path):
    """An old state file's ib_write_bw runs (numactl-pinned, GPUDirect RDMA, no role) get the
    roles today's plan gives them, GPU included, and so the typed loopback its GPUs."""
    from ibdiag.families.loopback import traffic
    from ibdiag.thresholds import Thresholds

    healthy = read_capture("perftest", HEALTHY_BW)
    pin = ("numactl", "--cpunodebind=0", "--membind=0")
    tests = [
        traffic.LoopbackTest("mlx5_0", 1, "mlx5_0", 1, 18515, gpu=3, server_gpu=3, client_pin=pin),
        traffic.LoopbackTest("mlx5_0", 1, "mlx5_0", 1, 18615, attempt=2, gpu=3, server_gpu=3),
    ]
    runs = {}
    for test in tests:
        for side in ("server", "client"):
            run = CommandRun(argv=test.argv(Thresholds(), side), rc=0, stdout=healthy)
            runs[run.key] = run
    snapshot = Snapshot(
        tool_version="0.0-old",
        collected_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
        sysfs_root="/sys",
        procfs_root="/proc",
        sources=["sysfs", "perftest"],
        devices=_devices(),
        commands=runs,
    )
    data = json.loads(snapshot.model_dump_json())
    for run in data["commands"].values():
        del run["role"]  # as an older ibdiag wrote it
    del data["loopback"]  # nor had it the typed field
    path = tmp_path / "state.json"
    path.write_text(json.dumps(data))
    loaded, problem = baseline.load(str(path))
    assert problem is None
    assert loaded.run(roles.loopback_client("mlx5_0:1", 1, 3)).argv[:3] == list(pin)
    assert loaded.run(roles.loopback_server("mlx5_0:1", "mlx5_0:1", 2, 3)) is not None
    assert [(a.client, a.server, a.attempt, a.gpu, a.server_gpu) for a in loaded.loopback] == [
        ("mlx5_0:1", "mlx5_0:1", 1, 3, 3),
        ("mlx5_0:1", "mlx5_0:1", 2, 3, 3),
    ]


def test_a_state_file_whose_facts_have_another_shape_still_loads(tmp_path):
    """Typed facts are derived data: a file from an ibdiag whose facts had other fields (here
    a field that no longer exists, on the Snapshot, a port and a netdev) loads, and its facts
    are parsed anew from its runs."""
    snapshot = Snapshot(
        tool_version="0.0-other", collected_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
        sysfs_root="/sys", procfs_root="/proc", sources=sorted(NEEDS | {"procfs"}),
        devices=_devices(), commands=_old_runs(),
    )  # fmt: skip
    data = json.loads(snapshot.model_dump_json())
    data["loopback"] = [{"client_device": "mlx5_0", "tcp_port": 18515}]
    port = data["devices"][0]["ports"][0]
    port["perfquery"] = {"counters": {"role": "x", "counters": {}, "dropped_field": 1}}
    port["netdev"]["ethtool"] = {"role": "ethtool-S ib0", "renamed": {}}
    path = tmp_path / "state.json"
    path.write_text(json.dumps(data))
    loaded, problem = baseline.load(str(path))
    assert problem is None
    assert loaded.loopback is None  # no loopback run among its runs
    assert loaded.devices[0].ports[0].perfquery is not None  # parsed anew from its -x run
    assert loaded.devices[0].ports[0].netdev.ethtool is not None
