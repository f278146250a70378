"""nvidia-smi topo -m parser, on every capture in tests/fixtures/nvidia_smi_topo.

Each capture has facts read from the file by hand (FACTS); a capture added to the folder fails
``test_every_capture_has_facts`` until someone writes its facts down.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES_DIR, capture_names, captures_without_facts, read_capture
from hypothesis import given, settings
from hypothesis import strategies as st

from ibdiag.families import gpu_topology
from ibdiag.families.gpu_topology.parser import parse_nvidia_smi_topo

FIXTURES = Path(FIXTURES_DIR)
KIND = "nvidia_smi_topo"
FOLDER = FIXTURES / KIND

GPUS = [f"GPU{n}" for n in range(8)]

# Read from each file by hand.
FACTS = {
    # DGX A100: two GPUs and two NICs behind each PCIe switch (PXB), NV12 all-to-all,
    # mlx5_8/mlx5_9 (storage) PIX to each other and SYS to every GPU.
    "dgx-a100-10nic-pxb-pairs-kernel5.4.txt": {
        "nics": [f"mlx5_{n}" for n in range(10)],
        "legend": {f"NIC{n}": f"mlx5_{n}" for n in range(10)},
        "pairs": {f"GPU{n}": (f"mlx5_{n}", "PXB") for n in range(8)},
        "other_nics": ["mlx5_8", "mlx5_9"],
        "nearest_nic": {
            "GPU0": ("mlx5_0", "PXB"),
            "GPU1": ("mlx5_0", "PXB"),  # first in column order among equals
            "GPU5": ("mlx5_4", "PXB"),
            "GPU7": ("mlx5_6", "PXB"),
        },
        "nearest_gpu": {"mlx5_3": ("GPU2", "PXB"), "mlx5_9": ("GPU0", "SYS")},
        "links": {
            ("GPU0", "GPU7"): "NV12",
            ("GPU0", "mlx5_1"): "PXB",
            ("GPU0", "mlx5_2"): "SYS",
            ("mlx5_8", "mlx5_9"): "PIX",
            ("mlx5_0", "mlx5_1"): "PXB",
            ("NIC9", "GPU7"): "SYS",
        },
        "cpu_affinity": {
            "GPU0": "48-63,176-191",
            "GPU3": "16-31,144-159",
            "GPU4": "112-127,240-255",
            "GPU7": "80-95,208-223",
        },
        "numa": {"GPU0": 3, "GPU1": 3, "GPU2": 1, "GPU3": 1, "GPU4": 7, "GPU5": 7, "GPU6": 5},
    },
    # H200, blog-reformatted (header "NUMA  GPU NUMA", dashed rule): one PIX NIC per GPU, the
    # legend skips mlx5_1/mlx5_2 (bonded into mlx5_bond_0, NODE to GPU0-3, SYS to GPU4-7).
    "h200-8gpu-9nic-noncontiguous-mlx5-plus-bond-REFORMATTED.txt": {
        "nics": [
            "mlx5_0",
            "mlx5_3",
            "mlx5_4",
            "mlx5_5",
            "mlx5_6",
            "mlx5_7",
            "mlx5_8",
            "mlx5_9",
            "mlx5_bond_0",
        ],
        "legend": {
            "NIC0": "mlx5_0",
            "NIC1": "mlx5_3",
            "NIC2": "mlx5_4",
            "NIC3": "mlx5_5",
            "NIC4": "mlx5_6",
            "NIC5": "mlx5_7",
            "NIC6": "mlx5_8",
            "NIC7": "mlx5_9",
            "NIC8": "mlx5_bond_0",
        },
        "pairs": {
            "GPU0": ("mlx5_0", "PIX"),
            "GPU1": ("mlx5_3", "PIX"),
            "GPU2": ("mlx5_4", "PIX"),
            "GPU3": ("mlx5_5", "PIX"),
            "GPU4": ("mlx5_6", "PIX"),
            "GPU5": ("mlx5_7", "PIX"),
            "GPU6": ("mlx5_8", "PIX"),
            "GPU7": ("mlx5_9", "PIX"),
        },
        "other_nics": ["mlx5_bond_0"],
        "nearest_nic": {"GPU1": ("mlx5_3", "PIX"), "GPU7": ("mlx5_9", "PIX")},
        "nearest_gpu": {"mlx5_bond_0": ("GPU0", "NODE"), "mlx5_6": ("GPU4", "PIX")},
        "links": {
            ("GPU0", "GPU1"): "NV18",
            ("GPU0", "mlx5_bond_0"): "NODE",
            ("GPU4", "mlx5_bond_0"): "SYS",
            ("GPU1", "mlx5_0"): "NODE",
            ("NIC8", "NIC0"): "NODE",
        },
        "cpu_affinity": {"GPU0": "0,2-47,96-143", "GPU7": "48-95,144-191"},
        "numa": {"GPU0": 0, "GPU3": 0, "GPU4": 1, "GPU7": 1},
    },
    # 8x H100 rail-optimised: GPU n PIX to mlx5_n, NODE within the socket, SYS across.
    "sglang-issue30401-8xH100-8xmlx5-PIX-rail.txt": {
        "nics": [f"mlx5_{n}" for n in range(8)],
        "legend": {f"NIC{n}": f"mlx5_{n}" for n in range(8)},
        "pairs": {f"GPU{n}": (f"mlx5_{n}", "PIX") for n in range(8)},
        "other_nics": [],
        "nearest_nic": {f"GPU{n}": (f"mlx5_{n}", "PIX") for n in range(8)},
        "nearest_gpu": {f"mlx5_{n}": (f"GPU{n}", "PIX") for n in range(8)},
        "links": {
            ("GPU2", "GPU5"): "NV18",
            ("GPU0", "mlx5_1"): "NODE",
            ("GPU0", "mlx5_4"): "SYS",
            ("mlx5_7", "mlx5_4"): "NODE",
            ("NIC3", "NIC3"): "X",
        },
        "cpu_affinity": {"GPU0": "0-47,96-143", "GPU5": "48-95,144-191"},
        "numa": {"GPU0": 0, "GPU3": 0, "GPU4": 1, "GPU7": 1},
    },
}


def test_fixture_folder_present():
    assert FOLDER.is_dir(), f"{FOLDER} is missing: the tests read the real captures"


def test_every_capture_has_facts():
    missing = captures_without_facts(KIND, FACTS)
    assert not missing, f"captures without facts in {__file__}: {missing}"


@pytest.mark.parametrize("name", capture_names(KIND))
def test_capture(name):
    text = read_capture(KIND, name)
    facts = FACTS.get(name)
    assert facts is not None, f"write the facts of {name} into FACTS"
    topo = parse_nvidia_smi_topo(text)
    assert topo.problems == [] and topo.error is None
    assert topo.gpus == GPUS
    assert topo.nics == facts["nics"]
    assert topo.legend == facts["legend"]
    # every cell of the square matrix was read, under real names
    size = len(GPUS) + len(facts["nics"])
    assert len(topo.links) == size * size
    assert all(not key[0].startswith("NIC") for key in topo.links)
    for (a, b), kind in facts["links"].items():
        assert topo.link(a, b) == kind, (a, b)
        assert topo.link(b, a) == kind, (b, a)
    for gpu in GPUS:
        assert topo.link(gpu, gpu) == "X"
    for gpu, expected in facts["nearest_nic"].items():
        assert topo.nearest_nic(gpu) == expected, gpu
    for nic, expected in facts["nearest_gpu"].items():
        assert topo.nearest_gpu(nic) == expected, nic
    pairing = topo.gpu_nic_pairs()
    assert {p.gpu: (p.nic, p.link) for p in pairing.pairs} == facts["pairs"]
    assert pairing.as_dict() == {g: nic for g, (nic, _) in facts["pairs"].items()}
    assert pairing.unpaired_gpus == [] and pairing.spare_nics == []
    assert pairing.other_nics == facts["other_nics"]
    assert set(topo.cpu_affinity) == set(GPUS)  # NIC rows print no affinity
    for gpu, cpus in facts["cpu_affinity"].items():
        assert topo.cpu_affinity[gpu] == cpus
    assert set(topo.numa_affinity) == set(GPUS)
    for gpu, node in facts["numa"].items():
        assert topo.numa_affinity[gpu] == node
    assert topo.gpu_numa_id == dict.fromkeys(GPUS)  # "N/A" everywhere


@pytest.mark.parametrize("name", capture_names(KIND))
def test_capture_cut_anywhere_never_raises(name):
    text = read_capture(KIND, name)
    full = parse_nvidia_smi_topo(text)
    for cut in range(0, len(text), max(1, len(text) // 60)):
        partial = parse_nvidia_smi_topo(text[:cut])
        assert set(partial.gpus) <= set(full.gpus)
        assert isinstance(partial.problems, list)


def test_cut_before_the_legend_keeps_aliases_and_says_so():
    text = read_capture(KIND, "h200-8gpu-9nic-noncontiguous-mlx5-plus-bond-REFORMATTED.txt")
    topo = parse_nvidia_smi_topo(text.split("NIC Legend")[0])
    assert topo.nics == [f"NIC{n}" for n in range(9)]
    assert topo.link("GPU1", "NIC1") == "PIX"
    assert any("no NIC Legend entry" in p for p in topo.problems)


def test_cut_inside_the_matrix():
    text = read_capture(KIND, "sglang-issue30401-8xH100-8xmlx5-PIX-rail.txt")
    lines = text.splitlines()
    cut = "\n".join(lines[:4]) + "\n" + lines[4][:30]  # GPU3's row cut after 3 cells
    topo = parse_nvidia_smi_topo(cut)
    assert topo.gpus == GPUS and topo.link("GPU2", "GPU0") == "NV18"
    assert any("GPU3 has 3 of 16 cells" in p for p in topo.problems)
    assert any("no row for GPU4" in p for p in topo.problems)


# Real driver output is tab-separated: a GPU without CPU affinity prints an empty cell, NIC rows
# leave every affinity cell empty, and an extra tab precedes GPU NUMA ID (driver 535+).
TABS = (
    "\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNV4\tPHB\tSYS\t0-31,64-95\t0\t\tN/A\n"
    "GPU1\tNV4\t X \tSYS\tPIX\t\t1\t\t9\n"
    "NIC0\tPHB\tSYS\t X \tSYS\t\t\t\t\n"
    "NIC1\tSYS\tPIX\tSYS\t X \t\t\t\t\n"
    "\n"
    "Legend:\n\n"
    "  X    = Self\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n\n"
    "NIC Legend:\n\n"
    "  NIC0: mlx5_ib0\n"
    "  NIC1: mlx5_ib1\n"
)


def test_real_tab_layout_with_empty_cells():
    topo = parse_nvidia_smi_topo(TABS)
    assert topo.problems == []
    assert topo.gpus == ["GPU0", "GPU1"] and topo.nics == ["mlx5_ib0", "mlx5_ib1"]
    assert topo.cpu_affinity == {"GPU0": "0-31,64-95"}
    assert topo.numa_affinity == {"GPU0": 0, "GPU1": 1}
    assert topo.gpu_numa_id == {"GPU0": None, "GPU1": 9}
    assert topo.nearest_nic("GPU0") == ("mlx5_ib0", "PHB")
    assert topo.nearest_nic("GPU1") == ("mlx5_ib1", "PIX")
    pairing = topo.gpu_nic_pairs()
    assert pairing.as_dict() == {"GPU1": "mlx5_ib1"}
    assert pairing.unpaired_gpus == ["GPU0"] and pairing.other_nics == ["mlx5_ib0"]


def test_ansi_underlined_header_and_crlf():
    text = TABS.replace("\tGPU0\tGPU1", "\x1b[4m\tGPU0\tGPU1", 1).replace(
        "GPU NUMA ID\n", "GPU NUMA ID\x1b[0m\n", 1
    )
    topo = parse_nvidia_smi_topo(text.replace("\n", "\r\n"))
    assert topo.problems == [] and topo.nics == ["mlx5_ib0", "mlx5_ib1"]
    assert topo.gpu_numa_id["GPU1"] == 9


# Older drivers: RDMA device names as columns, no NIC legend, no GPU NUMA ID.
OLD = (
    "\tGPU0\tGPU1\tGPU2\tGPU3\tmlx5_0\tmlx5_1\tCPU Affinity\tNUMA Affinity\n"
    "GPU0\t X \tSYS\tSYS\tSYS\tSYS\tSYS\t48-63,176-191\t3\n"
    "GPU1\tSYS\t X \tSYS\tSYS\tPIX\tSYS\t16-31,144-159\t1\n"
    "GPU2\tSYS\tSYS\t X \tSYS\tSYS\tPIX\t112-127,240-255\t7\n"
    "GPU3\tSYS\tSYS\tSYS\t X \tSYS\tSYS\t80-95,208-223\t5\n"
    "mlx5_0\tSYS\tPIX\tSYS\tSYS\t X \tSYS\n"
    "mlx5_1\tSYS\tSYS\tPIX\tSYS\tSYS\t X\n"
    "\nLegend:\n\n  X    = Self\n"
)


def test_old_layout_with_device_names_as_columns():
    topo = parse_nvidia_smi_topo(OLD)
    assert topo.problems == [] and topo.legend == {}
    assert topo.gpus == ["GPU0", "GPU1", "GPU2", "GPU3"] and topo.nics == ["mlx5_0", "mlx5_1"]
    assert topo.numa_affinity == {"GPU0": 3, "GPU1": 1, "GPU2": 7, "GPU3": 5}
    assert topo.gpu_numa_id == {}
    assert topo.nearest_nic("GPU0") == ("mlx5_0", "SYS")
    assert topo.nearest_gpu("mlx5_1") == ("GPU2", "PIX")
    pairing = topo.gpu_nic_pairs()
    assert pairing.as_dict() == {"GPU1": "mlx5_0", "GPU2": "mlx5_1"}
    assert pairing.unpaired_gpus == ["GPU0", "GPU3"] and pairing.other_nics == []


def test_hand_aligned_double_tabs_and_spaced_affinity_header():
    text = (
        "\t\tGPU0\tGPU1\tmlx5_0\tCPU Affinity    NUMA Affinity\n"
        "GPU0\t X \t\tNV1\t    PIX\t\t0-23,48-71\t\t0\n"
        "GPU1\tNV1\t \tX \t\tSYS\t\t24-47,72-95\t\t1\n"
        "mlx5_0\tPIX\t\tSYS\t \tX \t\t\n"
    )
    topo = parse_nvidia_smi_topo(text)
    assert topo.problems == []
    assert topo.link("GPU1", "GPU0") == "NV1" and topo.link("mlx5_0", "GPU0") == "PIX"
    assert topo.numa_affinity == {"GPU0": 0, "GPU1": 1}
    assert topo.cpu_affinity["GPU1"] == "24-47,72-95"


def test_very_old_soc_layout():
    text = (
        "        GPU0    GPU1    mlx4_0  CPU Affinity\n"
        "GPU0     X      SOC     PHB     0-7\n"
        "GPU1    SOC      X      SOC     8-15\n"
        "mlx4_0  PHB     SOC      X\n"
    )
    topo = parse_nvidia_smi_topo(text)
    assert topo.problems == [] and topo.nics == ["mlx4_0"]
    assert topo.nearest_nic("GPU1") == ("mlx4_0", "SOC")
    assert topo.nearest_nic("GPU0") == ("mlx4_0", "PHB")
    assert topo.gpu_nic_pairs().other_nics == ["mlx4_0"]


def test_pairing_moves_a_gpu_to_free_a_nic():
    """GPU0 could take NIC0 (PIX) or NIC1 (PXB); GPU1 only NIC0: both get a rail."""
    text = (
        "        GPU0    GPU1    NIC0    NIC1    NIC2\n"
        "GPU0     X      NV2     PIX     PXB     SYS\n"
        "GPU1    NV2      X      PXB     SYS     SYS\n"
        "NIC0    PIX     PXB      X      PXB     SYS\n"
        "NIC1    PXB     SYS     PXB      X      SYS\n"
        "NIC2    SYS     SYS     SYS     SYS      X\n"
        "NIC Legend:\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n  NIC2: mlx5_2\n"
    )
    topo = parse_nvidia_smi_topo(text)
    assert topo.problems == []
    pairing = topo.gpu_nic_pairs()
    assert pairing.as_dict() == {"GPU0": "mlx5_1", "GPU1": "mlx5_0"}
    assert [p.link for p in pairing.pairs] == ["PXB", "PXB"]
    assert pairing.other_nics == ["mlx5_2"] and pairing.unpaired_gpus == []


def test_spare_nic_behind_the_same_switch():
    text = (
        "\tGPU0\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\n"
        "GPU0\t X \tPIX\tPIX\t0-7\t0\n"
        "NIC0\tPIX\t X \tPIX\n"
        "NIC1\tPIX\tPIX\t X \n"
        "\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n"
    )
    pairing = parse_nvidia_smi_topo(text).gpu_nic_pairs()
    assert pairing.as_dict() == {"GPU0": "mlx5_0"}
    assert pairing.spare_nics == ["mlx5_1"] and pairing.other_nics == []


def test_gpus_without_nics():
    text = (
        "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        "GPU0\t X \tSYS\t16-31\t1\t\tN/A\n"
        "GPU1\tSYS\t X \t0-15\t0\t\tN/A\n"
    )
    topo = parse_nvidia_smi_topo(text)
    assert topo.problems == [] and topo.nics == []
    assert topo.nearest_nic("GPU0") is None and topo.nearest_gpu("mlx5_0") is None
    assert topo.gpu_nic_pairs().unpaired_gpus == ["GPU0", "GPU1"]


@pytest.mark.parametrize(
    "output, needle",
    [
        (
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
            "Make sure that the latest NVIDIA driver is installed and running.\n",
            "couldn't communicate",
        ),
        ("Failed to initialize NVML: Driver/library version mismatch\n", "version mismatch"),
        ("No devices were found\n", "No devices"),
        # the loader's words when nvidia-smi is there but its library is not (a broken driver)
        (
            "nvidia-smi: error while loading shared libraries: libnvidia-ml.so.1: cannot open "
            "shared object file: No such file or directory\n",
            "libnvidia-ml.so.1",
        ),
    ],
)
def test_failures_become_error(output, needle):
    topo = parse_nvidia_smi_topo(output)
    assert topo.error is not None and needle in topo.error
    assert topo.gpus == [] and topo.links == {} and topo.problems == []


def test_odd_cells_are_problems_not_crashes():
    text = (
        "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
        "GPU0\t X \tWAT\t0-3\t0-1\n"
        "GPU1\tNV2\tNV3\t4-7\t0\t9\n"
        "GPU9\tNV2\t X \t4-7\t0\n"
    )
    topo = parse_nvidia_smi_topo(text)
    joined = " | ".join(topo.problems)
    assert "unknown link type 'WAT'" in joined
    assert "diagonal reads 'NV3'" in joined
    assert "asymmetric link" in joined
    assert "more cell(s)" in joined
    assert "'GPU9' is not a column" in joined
    assert "not a NUMA node number" in joined
    assert topo.numa_affinity == {"GPU0": None, "GPU1": 0}


def test_text_before_the_header_is_noted():
    text = "NVIDIA Topology:\n" + read_capture(KIND, "sglang-issue30401-8xH100-8xmlx5-PIX-rail.txt")
    topo = parse_nvidia_smi_topo(text)
    assert len(topo.gpus) == 8 and len(topo.nics) == 8
    assert len(topo.problems) == 1 and "NVIDIA Topology" in topo.problems[0]


@pytest.mark.parametrize(
    "junk",
    [
        "",
        "\n\n",
        "\x00\x01\x02\xff garbage",
        "GPU0",
        "GPU0\tGPU1\n",
        "\tGPU0\tCPU Affinity\nGPU0",
        "Legend:\n  X = Self\nNIC Legend:\n  NIC0: mlx5_0\n",
        "\tGPU0\tNIC0\nGPU0\t X \tPIX\nNIC0\tPIX\t X\nNIC Legend:\n NIC0 mlx5_0\n NIC0: a\n",
        "\tGPU0\n" + "GPU0\t X \t" * 10_000,
    ],
)
def test_garbage_never_raises(junk):
    topo = parse_nvidia_smi_topo(junk)
    assert isinstance(topo.problems, list)
    topo.gpu_nic_pairs()
    for gpu in topo.gpus:
        topo.nearest_nic(gpu)


def test_empty_and_binary():
    assert parse_nvidia_smi_topo("").problems == ["empty nvidia-smi topo output"]
    assert parse_nvidia_smi_topo(None).gpus == []
    binary = parse_nvidia_smi_topo(bytes(range(256)) * 4)
    assert binary.gpus == [] and binary.problems


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "\t",
                " ",
                "\n",
                "GPU0",
                "GPU1",
                "NIC0",
                "mlx5_0",
                "X",
                "PIX",
                "NV12",
                "SYS",
                "CPU Affinity",
                "NUMA",
                "N/A",
                "0-7",
                "NIC Legend:",
                "NIC0: mlx5_0",
                "Legend:",
            ]
        )
    )
    | st.text()
)
def test_any_text_never_raises(parts):
    text = parts if isinstance(parts, str) else "".join(parts)
    topo = parse_nvidia_smi_topo(text)
    pairing = topo.gpu_nic_pairs()
    assert len({p.nic for p in pairing.pairs}) == len(pairing.pairs)  # one-to-one
    for gpu in topo.gpus:
        topo.nearest_nic(gpu)
    for nic in topo.nics:
        topo.nearest_gpu(nic)


def test_argv():
    assert gpu_topology.argv() == ["nvidia-smi", "topo", "-m"]
