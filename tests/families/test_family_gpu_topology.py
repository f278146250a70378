"""The GPU topology family (``ibdiag.families.gpu_topology``): nvidia-smi topo -m ->
``Snapshot.gpu_topology``: planned where sysfs shows an NVIDIA GPU, the run found by role, the
real captures in tests/fixtures/nvidia_smi_topo (facts written by hand in
test_family_gpu_topology_parser), and the topology.gpu_hca check reading the field alone."""

from __future__ import annotations

import json

import pytest
from conftest import capture_names, read_capture
from snapshots import device, devices, pci, run, snapshot
from test_family_gpu_topology_parser import FACTS, GPUS

from ibdiag import families, roles
from ibdiag.facts.outcome import NoData
from ibdiag.facts.topology import GpuNic, GpuTopology
from ibdiag.families import Runs, gpu_topology
from ibdiag.model import CommandRun, Pci, Snapshot

KIND = "nvidia_smi_topo"
RAIL = "sglang-issue30401-8xH100-8xmlx5-PIX-rail.txt"
ARGV = ["nvidia-smi", "topo", "-m"]


def commands(stdout: str = "", rc=0, role=roles.GPU_TOPOLOGY, **kwargs):
    made = CommandRun(argv=ARGV, role=role, rc=rc, stdout=stdout, **kwargs)
    return {made.key: made}


def interpreted_with(runs) -> Snapshot:
    return families.interpret(snapshot([]).model_copy(update={"commands": runs}))


def read_gpu_topology(runs):
    return gpu_topology.read_gpu_topology(Runs(runs))


def topology_of(text: str) -> GpuTopology:
    topology = interpreted_with(commands(text)).gpu_topology
    assert isinstance(topology, GpuTopology)
    return topology


@pytest.mark.parametrize("name", capture_names(KIND))
def test_every_capture(name):
    facts = FACTS[name]
    topology = topology_of(read_capture(KIND, name))
    assert topology.role == roles.GPU_TOPOLOGY
    assert (topology.failure, topology.error, topology.problems) == (None, None, [])
    assert topology.gpus == GPUS and topology.nics == facts["nics"]
    assert len(topology.links) == len(GPUS) * len(facts["nics"])  # every GPU <-> NIC cell
    cells = {(cell.gpu, cell.nic): cell.link for cell in topology.links}
    legend = facts["legend"]
    for (a, b), link in facts["links"].items():
        a, b = legend.get(a, a), legend.get(b, b)
        if a.startswith("GPU") and not b.startswith("GPU"):
            assert cells[(a, b)] == link, (a, b)
        elif b.startswith("GPU") and not a.startswith("GPU"):
            assert cells[(b, a)] == link, (b, a)
    assert {cell.gpu: (cell.nic, cell.link) for cell in topology.rails} == facts["pairs"]
    assert topology.unpaired_gpus == []
    for gpu, (nic, link) in facts["nearest_nic"].items():
        assert topology.nearest_nic(gpu) == GpuNic(gpu=gpu, nic=nic, link=link)
    for gpu, node in facts["numa"].items():
        assert topology.numa_affinity[gpu] == node
    assert topology.rail_gpus() == {nic: int(gpu[3:]) for gpu, (nic, _) in facts["pairs"].items()}
    assert GpuTopology.model_validate_json(topology.model_dump_json()) == topology


def _without_gpu3_rail(text: str) -> str:
    """The rail capture with GPU3 <-> NIC3 at NODE instead of PIX: GPU3 has no rail HCA."""
    lines = text.split("\n")
    for index, line in enumerate(lines):
        if line.startswith(("GPU3", "NIC3")):
            lines[index] = line.replace("PIX", "NODE")
    return "\n".join(lines)


def test_a_gpu_without_a_rail_hca_is_unpaired_with_its_nearest_nic():
    topology = topology_of(_without_gpu3_rail(read_capture(KIND, RAIL)))
    assert topology.unpaired_gpus == ["GPU3"]
    assert "mlx5_3" not in topology.rail_gpus()
    assert topology.nearest_nic("GPU3") == GpuNic(gpu="GPU3", nic="mlx5_0", link="NODE")


def test_garbage_is_a_recorded_problem_not_a_crash():
    fields = interpreted_with(commands((bytes(range(256)) * 4).decode("latin-1")))
    topology = fields.gpu_topology
    assert topology.gpus == [] and topology.rails == [] and topology.failure is None
    assert topology.problems == ["no topology matrix header (GPU0 ... CPU Affinity) found"]
    assert fields.problems == {}  # the interpreter itself did not break


def test_nvidia_smis_own_failure_is_its_error():
    text = (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make "
        "sure that the latest NVIDIA driver is installed and running.\n"
    )
    topology = topology_of(text)
    assert topology.error.startswith("NVIDIA-SMI has failed") and topology.gpus == []


def test_a_failed_run_is_its_failure_and_nothing_is_parsed():
    rail = read_capture(KIND, RAIL)
    topology = read_gpu_topology(commands(rail, rc=None, timed_out=True, duration_s=1.0))
    assert topology.failure == "nvidia-smi timed out after 1.0 s and was killed"
    assert topology.gpus == [] and topology.rails == []
    assert topology.outcome.no_data == NoData.TIMED_OUT and topology.outcome.command == " ".join(
        ARGV
    )
    missing = read_gpu_topology(commands(rc=None, not_found=True))
    assert missing.failure == "nvidia-smi is not installed (not found on PATH)"
    assert missing.outcome.no_data == NoData.NOT_INSTALLED


def test_not_run_is_none():
    assert read_gpu_topology({}) is None
    assert read_gpu_topology(commands(read_capture(KIND, RAIL), role=None)) is None


# -- the check reads the field -----------------------------------------------------------------


def _node(text: str, numa=None) -> Snapshot:
    """Eight HCAs (NUMA node 0, or ``numa[name]``) and eight GPUs, ``text`` interpreted."""
    numa = numa or {}
    hcas = [
        device(f"mlx5_{n}", pci=pci(f"0000:{0x10 + n:02x}:00.0", numa_node=numa.get(n, 0)))
        for n in range(8)
    ]
    runs = commands(text)
    gpus = [Pci(address=f"0000:{0x40 + n:02x}:00.0", vendor_id="0x10de") for n in range(8)]
    snap = snapshot(hcas).model_copy(
        update={
            "commands": runs,
            "gpus": gpus,
            "gpu_topology": read_gpu_topology(runs),
        }
    )
    return Snapshot.model_validate(json.loads(snap.model_dump_json()))


def test_the_check_pairs_each_gpu_with_its_rail_hca():
    snap = _node(read_capture(KIND, RAIL), numa={n: 0 if n < 4 else 1 for n in range(8)})
    results = {r.target: r for r in run("topology.gpu_hca", snap)}
    assert set(results) == {f"mlx5_{n}" for n in range(8)}
    for n in range(8):
        assert results[f"mlx5_{n}"].status.value == "pass"
        assert results[f"mlx5_{n}"].message == f"nearest GPU GPU{n} (PIX)"
        assert results[f"mlx5_{n}"].evidence == ["nvidia-smi topo -m"]


def test_the_check_warns_for_an_hca_on_another_numa_node_and_an_unpaired_gpu():
    snap = _node(_without_gpu3_rail(read_capture(KIND, RAIL)), numa={n: 1 for n in range(8)})
    results = {r.target: r for r in run("topology.gpu_hca", snap)}
    assert results["mlx5_0"].status.value == "warn"
    assert results["mlx5_0"].message == "paired with GPU0 (PIX) but on NUMA node 1, GPU0 on 0"
    assert results["mlx5_4"].status.value == "pass"
    assert results["GPU3"].status.value == "warn"
    assert results["GPU3"].message == (
        "no HCA on its PCIe switch (nearest HCA mlx5_0 is NODE away): GPUDirect RDMA goes "
        "through the CPU"
    )


def test_the_check_without_the_field_says_not_collected():
    snap = _node(read_capture(KIND, RAIL)).model_copy(update={"gpu_topology": None})
    (result,) = run("topology.gpu_hca", snap)
    assert result.status.value == "skip"
    assert result.message == (
        "no GPU topology: `nvidia-smi topo -m` was not collected (level quick, or not planned here)"
    )
    no_gpu = snapshot(devices(1)).model_copy(update={"gpus": []})
    (result,) = run("topology.gpu_hca", no_gpu)
    assert result.message == "no NVIDIA GPU on this node"


def test_it_plans_nvidia_smi_only_where_sysfs_shows_an_nvidia_gpu():
    gpu = Pci(address="0000:40:00.0", vendor_id="0x10de")
    with_gpu = snapshot(devices(1)).model_copy(update={"gpus": [gpu]})
    (planned,) = families.plan(with_gpu, ["gpu_topology"])
    assert (planned.role, planned.argv) == (roles.GPU_TOPOLOGY, ARGV)
    for gpus in (None, []):
        assert families.plan(with_gpu.model_copy(update={"gpus": gpus}), ["gpu_topology"]) == []
    assert families.source_levels()["gpu_topology"] == "standard"
