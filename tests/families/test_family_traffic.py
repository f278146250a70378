"""Level full's families through the family protocol: the collector calls each level-full
family's ``run(snap, context)`` in ORDER with one ``TrafficContext`` (``ibdiag.families``,
``ibdiag.families._traffic``), the loopback pairs GPUs from the GPU topology family's reading,
and the checks grade the attempts from their typed outcome alone."""

from __future__ import annotations

import time
import types

import pytest
from conftest import read_capture
from snapshots import device, run, snapshot

from ibdiag import families, roles
from ibdiag.bandwidth import perftest_timeout_s
from ibdiag.families import FamilyError, _validate, loopback
from ibdiag.families._traffic import Limits, TrafficContext
from ibdiag.families.loopback import traffic
from ibdiag.model import CommandRun, Pci
from ibdiag.thresholds import Thresholds

RAIL = read_capture("nvidia_smi_topo", "sglang-issue30401-8xH100-8xmlx5-PIX-rail.txt")


def test_the_level_full_families_run_in_order_and_only_those_needed():
    full = ["perftest", "nccl_tests", "nccl_inspector"]
    assert [m.SOURCE for m in families.full_level(full)] == full  # loopback, nccl, Inspector
    assert [m.SOURCE for m in families.full_level(["nccl_inspector", "perfquery"])] == [
        "nccl_inspector"
    ]
    assert families.full_level(["perfquery", "gpu_topology", "sysfs"]) == []  # standard: no run


def test_run_full_hands_every_family_the_one_context(monkeypatch):
    seen = []

    def recorder(source):
        def run_(snap, context):
            seen.append((source, context))
            return snap.model_copy(update={"problems": {**snap.problems, source: "ran"}})

        return run_

    for module in families.full_level(["perftest", "nccl_tests", "nccl_inspector"]):
        monkeypatch.setattr(module, "run", recorder(module.SOURCE))
    context = TrafficContext(Thresholds(), Limits(started_at=time.monotonic(), deadline_s=5))
    snap = families.run_full(snapshot(), ["nccl_inspector", "perftest"], context)
    assert [source for source, _ in seen] == ["perftest", "nccl_inspector"]
    assert all(given is context for _, given in seen)
    assert snap.problems == {"perftest": "ran", "nccl_inspector": "ran"}  # each sees the last


def test_level_fulls_own_bound_is_the_sum_of_the_families_shares():
    th = Thresholds(perftest_duration_s=5, nccl_tests="/opt/nccl-tests/all_reduce_perf")
    loopback_share = 2 * (traffic.SERVER_START_S + perftest_timeout_s(th))
    assert loopback.bound_s(th) == loopback_share == 72
    assert families.full_level_bound(th, ["perftest", "nccl_tests"]) == 72 + th.nccl_timeout_s
    assert families.full_level_bound(Thresholds(), ["nccl_inspector"]) == 1.0  # at least 1 s


def test_the_loopback_pairs_each_hca_with_its_rail_gpu_from_the_topology_run():
    topo = CommandRun(argv=["nvidia-smi", "topo", "-m"], role=roles.GPU_TOPOLOGY, rc=0,
                      stdout=RAIL)  # fmt: skip
    snap = snapshot([device("mlx5_0"), device("mlx5_3")]).model_copy(
        update={"commands": {topo.key: topo}}
    )
    near = loopback.gpu_near(snap)
    assert (near("mlx5_0"), near("mlx5_3"), near("mlx5_9")) == (0, 3, None)
    assert loopback.gpu_near(snapshot())("mlx5_0") is None  # no topology run: no GPU


def test_the_loopback_reads_each_numa_nodes_cpus_through_the_collections_reader(monkeypatch):
    """taskset's CPU list is read through the context's sysfs reader (a bundle records it),
    and a deadline already passed leaves every test recorded as never started."""
    read = []

    class Reader:
        def read_text(self, path):
            read.append(path)
            return "0-15\n", None

    monkeypatch.setattr(traffic.shutil, "which", lambda name, path=None: "/usr/bin/taskset"
                        if name == "taskset" else None)  # fmt: skip
    hca = device("mlx5_0", pci=Pci(address="0000:10:00.0", numa_node=1))
    context = TrafficContext(
        Thresholds(), Limits(started_at=time.monotonic() - 10, deadline_s=1), sysfs=Reader()
    )
    snap = loopback.run(snapshot([hca]), context)
    assert read == ["devices/system/node/node1/cpulist"]
    client = snap.run(roles.loopback_client("mlx5_0:1", 1))
    assert client.argv[:3] == ["taskset", "-c", "0-15"] and client.skipped
    graded = families.interpret(snap)
    (attempt,) = graded.loopback
    assert attempt.client_run.no_data.value == "not-started"
    # the check reads the typed outcome alone: the runs themselves are not needed
    (result,) = run("perftest.bandwidth", graded.model_copy(update={"commands": {}}))
    assert result.status.value == "skip"
    assert result.message == client.failure()
    assert result.evidence == [" ".join(client.argv)]


def test_a_level_full_family_without_run_is_refused():
    module = types.ModuleType("ibdiag.families.planted")
    module.SOURCE, module.LEVEL, module.interpret = "planted", "full", lambda snap, runs: None
    with pytest.raises(FamilyError, match="LEVEL full but no run"):
        _validate(module)
    module.run = lambda snap, context: snap
    _validate(module)
