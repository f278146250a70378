"""nccl-tests parser, on every capture in tests/fixtures/nccl_tests.

Each capture has facts read from the file by hand (FACTS); a capture added to the folder fails
``test_every_capture_has_facts`` until someone writes its facts down.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES_DIR, capture_names, captures_without_facts, read_capture
from hypothesis import given, settings
from hypothesis import strategies as st

from ibdiag.families.nccl_tests.parser import parse_nccl_tests

FIXTURES = Path(FIXTURES_DIR)
KIND = "nccl_tests"
FOLDER = FIXTURES / KIND

A100_80 = "NVIDIA A100-SXM4-80GB"
SIZES_32M_1G = [2**i for i in range(25, 31)]
SIZES_8_8G = [2**i for i in range(3, 34)]
CONFIG_32M_1G = {
    "nThread": 1,
    "nGpus": 1,
    "minBytes": 33554432,
    "maxBytes": 1073741824,
    "step_factor": 2,
    "warmup iters": 5,
    "iters": 20,
    "agg iters": 1,
    "validation": 1,
    "graph": 0,
}
CONFIG_8_8G = {**CONFIG_32M_1G, "minBytes": 8, "maxBytes": 8589934592}

# Read from each file by hand. "row": (size, count, dtype, redop, root, out-of-place
# (time, algbw, busbw, wrong), in-place (...)) for one row; "sizes": every row's size in order.
FACTS = {
    "gcm-allreduce-1node-8xA100-80GB-nccl2.16.2.txt": {
        "ranks": 8,
        "hosts": {"{hostname}"},
        "gpu": A100_80,
        "bus_id": "0x00",
        "group": 0,
        "nccl_version": "2.16.2+cuda11.6",
        "sizes": SIZES_32M_1G,
        "row": (
            67108864,
            16777216,
            "float",
            "sum",
            -1,
            (557.4, 120.39, 210.68, 0),
            (556.2, 120.67, 211.17, 0),
        ),
        "avg": 210.99,
        "largest": 231.72,
        "out_of_bounds": 0,
        "complete": True,
        "config": CONFIG_32M_1G,
        "errors": [],
        "warnings": [],
    },
    # inter-node over IB; large times printed without decimals ("11013")
    "gcm-allreduce-2node-16xA100-80GB-nccl2.12.12.txt": {
        "ranks": 16,
        "hosts": {"{host1}", "{host2}"},
        "gpu": A100_80,
        "bus_id": "0x00",
        "group": 0,
        "nccl_version": "2.12.12+cuda11.6",
        "sizes": SIZES_32M_1G,
        "row": (
            1073741824,
            268435456,
            "float",
            "sum",
            -1,
            (11013.0, 97.50, 182.80, 0),
            (11099.0, 96.74, 181.39, 0),
        ),
        "avg": 150.209,
        "largest": 182.80,
        "out_of_bounds": 0,
        "complete": True,
        "config": CONFIG_32M_1G,
        "errors": [],
        "warnings": [],
    },
    # FAULT: Open MPI refused to start (no table at all)
    "gcm-allreduce-mpirun-not-enough-slots-error.txt": {
        "ranks": 0,
        "hosts": set(),
        "nccl_version": None,
        "sizes": [],
        "row": None,
        "avg": None,
        "largest": None,
        "out_of_bounds": None,
        "complete": False,
        "config": {},
        "errors": ["There are not enough slots available in the system to satisfy the 16"],
        "warnings": [],
    },
    # the poster's edit dropped the '#' of the first header lines
    "gcp-a3mega-allreduce-2node-16xH100-tcpxo.txt": {
        "ranks": 16,
        "hosts": {"ztan-mig-235z", "ztan-mig-gq73"},
        "gpu": "NVIDIA H100 80GB HBM3",
        "bus_id": "0000:04:00",
        "group": 0,
        "nccl_version": None,
        "sizes": SIZES_8_8G,
        "row": (
            2147483648,
            536870912,
            "float",
            "sum",
            -1,
            (12646.0, 169.81, 318.40, 0),
            (12641.0, 169.88, 318.52, 0),
        ),
        "avg": 70.742,
        "largest": 338.82,
        "out_of_bounds": 0,
        "complete": True,
        "config": CONFIG_8_8G,
        "errors": [],
        "warnings": [],
    },
    # FAULT: NCCL WARN NET/IB completion errors (status 12 = retry exceeded) on mlx5_10
    "nccl-issue1698-roce-mlx5_10-net-ib-completion-status12-vendor-err-129.txt": {
        "ranks": 0,
        "hosts": set(),
        "nccl_version": None,
        "sizes": [],
        "row": None,
        "avg": None,
        "largest": None,
        "out_of_bounds": None,
        "complete": False,
        "config": {},
        "errors": [],
        "warnings": [
            # (host, gpu, subsystem, hca, status, vendor_err, peer)
            ("mycl-g2", 6, "NET/IB", "mlx5_10", 12, 129, "192.168.3.5"),
            ("mycl-g2", 6, "NET/IB", "mlx5_10", 12, 129, "192.168.3.5"),
        ],
    },
    # FAULT, PARTIAL: rows without their table header, then the ranks abort
    "nccl-tests-issue322-allreduce-1G-16G-then-unhandled-cuda-error-test-failure-PARTIAL.txt": {
        "ranks": 0,
        "hosts": set(),
        "nccl_version": None,
        "sizes": [2**i for i in range(30, 35)],
        "row": (
            17179869184,
            4294967296,
            "float",
            "sum",
            -1,
            (93457.0, 183.83, 367.29, 0),
            (93420.0, 183.90, 367.44, 0),
        ),
        "avg": None,
        "largest": 367.44,
        "out_of_bounds": None,
        "complete": False,
        "config": {},
        "errors": [
            "HCA-128: Test NCCL failure common.cu:1204 'unhandled cuda error (run with "
            "NCCL_DEBUG=INFO for details) / '",
            ".. HCA-128 pid 757466: Test failure common.cu:915",
            "HCA-108: Test NCCL failure common.cu:1204 'unhandled cuda error (run with "
            "NCCL_DEBUG=INFO for details) / '",
            ".. HCA-108 pid 2753866: Test failure common.cu:915",
            "HCA-107: Test NCCL failure common.cu:1204 'unhandled cuda error (run with "
            "NCCL_DEBUG=INFO for details) / '",
            ".. HCA-107 pid 2750549: Test failure common.cu:915",
            "HCA-108: Test NCCL failure common.cu:1204 'unhandled cuda error (run with "
            "NCCL_DEBUG=INFO for details) / '",
            ".. HCA-108 pid 2753874: Test failure common.cu:915",
        ],
        "warnings": [],
    },
    # kubectl and ssh lines before the header; a dip at 512 MB
    "oci-oke-allreduce-2node-16xA100-40GB-roce-sriov.txt": {
        "ranks": 16,
        "hosts": {"nccl-allreduce-job0-mpiworker-0", "nccl-allreduce-job0-mpiworker-1"},
        "gpu": "NVIDIA A100-SXM4-40GB",
        "bus_id": "0x0f",
        "group": 0,
        "nccl_version": None,
        "sizes": SIZES_8_8G,
        "row": (
            536870912,
            134217728,
            "float",
            "sum",
            -1,
            (6436.0, 83.42, 156.41, 0),
            (6070.5, 88.44, 165.82, 0),
        ),
        "avg": 66.4834,
        "largest": 237.94,
        "out_of_bounds": 0,
        "complete": True,
        "config": CONFIG_8_8G,
        "errors": [],
        "warnings": [],
    },
    # old format: "error" column (N/A, validation 0), no root column, no Group, INFO line inside
    "superbench-allreduce-1node-8xA100-SXM4-40GB-old-format-error-column.txt": {
        "ranks": 8,
        "hosts": {"localhost"},
        "gpu": "A100-SXM4-40GB",
        "bus_id": "0x00",
        "group": None,
        "nccl_version": None,
        "sizes": [0, 0] + [2**i for i in range(2, 34)],
        "row": (
            4194304,
            1048576,
            "float",
            "sum",
            None,
            (112.0, 37.44, 65.52, None),
            (110.2, 38.06, 66.60, None),
        ),
        "avg": 68.4048,
        "largest": 235.26,
        "out_of_bounds": 0,
        "complete": True,
        "config": {
            "nThread": 1,
            "nGpus": 8,
            "minBytes": 1,
            "maxBytes": 8589934592,
            "step_factor": 2,
            "warmup iters": 5,
            "iters": 20,
            "validation": 0,
        },
        "errors": [],
        "warnings": [],
    },
}


def test_fixture_folder_present():
    assert FOLDER.is_dir(), (
        f"{FOLDER} is missing: the nccl-tests tests read the real captures in tests/fixtures"
    )


def test_every_capture_has_facts():
    missing = captures_without_facts(KIND, FACTS)
    assert not missing, f"captures without facts in {__file__}: {missing}"


def _side(side):
    return None if side is None else (side.time_us, side.algbw_gbps, side.busbw_gbps, side.wrong)


@pytest.mark.parametrize("name", capture_names(KIND))
def test_capture(name):
    text = read_capture(KIND, name)
    facts = FACTS.get(name)
    assert facts is not None, f"write the facts of {name} into FACTS"
    result = parse_nccl_tests(text)
    assert len(result.ranks) == facts["ranks"]
    assert [r.rank for r in result.ranks] == list(range(facts["ranks"]))
    assert {r.host for r in result.ranks} == facts["hosts"]
    if facts["ranks"]:
        assert {r.gpu for r in result.ranks} == {facts["gpu"]}
        assert result.ranks[0].bus_id == facts["bus_id"]
        assert {r.group for r in result.ranks} == {facts["group"]}
        per_host = {}
        for r in result.ranks:
            per_host.setdefault(r.host, []).append(r.device)
        assert all(devices == list(range(8)) for devices in per_host.values())
    assert result.nccl_version == facts["nccl_version"]
    assert [row.size_bytes for row in result.rows] == facts["sizes"]
    if facts["row"] is not None:
        size, count, dtype, redop, root, oop, inplace = facts["row"]
        row = next(r for r in result.rows if r.size_bytes == size)
        assert (row.count, row.dtype, row.redop, row.root) == (count, dtype, redop, root)
        assert _side(row.out_of_place) == oop
        assert _side(row.in_place) == inplace
    for row in result.rows:
        assert row.count * 4 == row.size_bytes  # float
    assert result.avg_bus_bandwidth_gbps == facts["avg"]
    assert result.busbw_at_largest() == facts["largest"]
    assert result.out_of_bounds == facts["out_of_bounds"]
    assert result.complete is facts["complete"]
    assert result.finished() is facts["complete"]  # every capture ends as nccl-tests ends one
    assert result.wrong_total == 0 and result.wrong_results() == []
    assert result.config == facts["config"]
    assert result.errors == facts["errors"]
    got = [
        (w.host, w.gpu, w.subsystem, w.hca, w.status, w.vendor_err, w.peer) for w in result.warnings
    ]
    assert got == facts["warnings"]
    assert result.runs == (1 if facts["config"] else 0)
    if facts["sizes"] or facts["errors"]:
        assert result.problems == []
    else:
        assert result.problems == ["no result rows in nccl-tests output"]


@pytest.mark.parametrize("name", capture_names(KIND))
def test_capture_truncated(name):
    """Cut anywhere, a capture still parses; without its last lines it is not complete."""
    text = read_capture(KIND, name)
    for cut in range(0, len(text), max(1, len(text) // 40)):
        partial = parse_nccl_tests(text[:cut])
        assert isinstance(partial.rows, list) and isinstance(partial.problems, list)
        assert len(partial.rows) <= len(parse_nccl_tests(text).rows)
    lines = text.splitlines()
    avg_at = [i for i, line in enumerate(lines) if "Avg bus bandwidth" in line]
    if avg_at:
        head = parse_nccl_tests("\n".join(lines[: avg_at[0]]))
        assert not head.complete and head.avg_bus_bandwidth_gbps is None
        assert head.rows == parse_nccl_tests(text).rows


ONE_NODE = "gcm-allreduce-1node-8xA100-80GB-nccl2.16.2.txt"  # 32 MiB..1 GiB, factor 2


def _without_avg(text: str, concluded: bool = True) -> str:
    """The capture without its Avg bus bandwidth line, ended as nccl-tests >= 2.14 ends a run."""
    lines = [line for line in text.splitlines() if "Avg bus bandwidth" not in line]
    return "\n".join(lines) + (
        "\n#\n# Collective test concluded: all_reduce_perf\n#\n" if concluded else "\n"
    )


def _drop(text: str, needle: str) -> str:
    return "\n".join(line for line in text.splitlines() if needle not in line) + "\n"


def test_a_concluded_run_with_a_complete_table_is_finished_without_the_average_line():
    text = _without_avg(read_capture(KIND, ONE_NODE))
    result = parse_nccl_tests(text)
    assert not result.complete and result.avg_bus_bandwidth_gbps is None
    assert result.concluded and result.out_of_bounds == 0 and result.table_complete()
    assert result.finished() and result.problems == []
    assert result.busbw_at_largest() == 231.72


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda t: _without_avg(t, concluded=False), id="not-concluded"),
        pytest.param(lambda t: _drop(_without_avg(t), "Out of bounds"), id="no-out-of-bounds"),
        pytest.param(lambda t: _drop(_without_avg(t), "  1073741824  "), id="last-row-missing"),
        pytest.param(lambda t: _drop(_without_avg(t), "# nThread"), id="no-sweep-header"),
        pytest.param(lambda t: _without_avg(t) + _without_avg(t), id="two-runs"),
    ],
)
def test_without_the_average_line_a_run_is_finished_only_with_all_three(damage):
    result = parse_nccl_tests(damage(read_capture(KIND, ONE_NODE)))
    assert not result.finished()


def test_a_table_cut_by_the_memory_limit_ends_at_the_reduced_max_bytes():
    text = _drop(_without_avg(read_capture(KIND, ONE_NODE)), "  1073741824  ")
    assert not parse_nccl_tests(text).finished()  # ends at 512 MiB of the announced 1 GiB
    reduced = text.replace(
        "# Using devices", "#\n# Reducing maxBytes to 1000000000 due to memory limitation\n"
        "# Using devices", 1
    )  # fmt: skip
    result = parse_nccl_tests(reduced)
    assert result.reduced_max_bytes == 1000000000 and result.finished()  # 512 MiB * 2 > 10^9


def test_old_format_info_line_and_zero_byte_rows():
    text = read_capture(
        KIND, "superbench-allreduce-1node-8xA100-SXM4-40GB-old-format-error-column.txt"
    )
    result = parse_nccl_tests(text)
    zero = [row for row in result.rows if row.size_bytes == 0]
    assert len(zero) == 2 and zero[0].out_of_place.time_us == 35.20
    assert zero[1].in_place.time_us == 33.50
    assert all(r.out_of_place.max_error is None and r.in_place.wrong is None for r in result.rows)


def test_two_runs_in_one_output_are_flagged():
    text = read_capture(KIND, "gcm-allreduce-1node-8xA100-80GB-nccl2.16.2.txt")
    result = parse_nccl_tests(text + text)
    assert result.runs == 2 and len(result.rows) == 12 and len(result.ranks) == 8
    assert any("independent runs" in p for p in result.problems)
    assert any("another 'Avg bus bandwidth'" in p for p in result.problems)


# nccl-tests >= 2.14 (util.cu): version line, test name, timestamp column, the bandwidth check,
# exponent notation in a narrow column, and the trailing "# error:" line.
NEW_FORMAT = """# nccl-tests version 2.17.6 nccl-headers=22807 nccl-library=22807
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 8 minBytes 1048576 maxBytes 2097152 step: 2(factor) warmup iters: 1 \
iters: 5 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid   4242 on     node01 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   4242 on     node01 device  1 [0000:2a:00] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       \
in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   \
algbw   busbw  #wrong           timestamp
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)   \
(GB/s)  (GB/s)           %Y-%m-%d %H:%M:%S
     1048576        262144     float     sum      -1    45.10   23.25   40.69       0    44.90   \
23.35   40.87       3  2025-06-01 12:00:01
     2097152        524288     float     sum      -1  1.2e+04    0.17    0.31       0    60.20   \
34.84   60.97       0  2025-06-01 12:00:02
# Out of bounds values : 3 FAILED
# Avg bus bandwidth    : 35.63 FAILED
#
# Collective test concluded: all_reduce_perf
# error: unhandled system error (run with NCCL_DEBUG=INFO for details)
"""


def test_new_format():
    result = parse_nccl_tests(NEW_FORMAT)
    assert result.test == "all_reduce_perf" and result.nccl_tests_version == "2.17.6"
    assert result.nccl_version == "2.28.7"  # from nccl-library=22807
    assert result.config["nGpus"] == 8 and result.config["unalign"] == 0
    assert [r.rank for r in result.ranks] == [0, 1] and result.ranks[1].bus_id == "0000:2a:00"
    assert [row.size_bytes for row in result.rows] == [1048576, 2097152]
    assert result.rows[1].out_of_place.time_us == 12000.0
    assert result.wrong_total == 3
    assert [row.size_bytes for row in result.wrong_results()] == [1048576]
    assert result.out_of_bounds == 3
    assert result.avg_bus_bandwidth_gbps == 35.63 and result.avg_check == "FAILED"
    assert result.complete
    assert result.errors == [
        "# error: unhandled system error (run with NCCL_DEBUG=INFO for details)"
    ]
    assert result.problems == []
    assert result.busbw_at_largest() == 60.97


def test_nccl_version_from_info_line():
    text = "node01:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
    assert parse_nccl_tests(text).nccl_version == "2.21.5+cuda12.4"


@pytest.mark.parametrize(
    "header, row, expected",
    [
        # old broadcast: root, no redop; "error" column with a max relative error
        (
            "#       size         count    type    root     time   algbw   busbw  error     time"
            "   algbw   busbw  error",
            "     1048576        262144   float       0    45.10   23.25   23.25  2e-07    44.90"
            "   23.35   23.35  0e+00",
            {"redop": None, "root": 0, "oop_error": 2e-07, "oop_wrong": None},
        ),
        # all_gather today: redop "none", root -1
        (
            "#       size         count      type   redop    root     time   algbw   busbw #wrong"
            "     time   algbw   busbw #wrong",
            "     1048576         32768     float    none      -1    45.10   23.25   21.80      0"
            "    44.90   23.35   21.89      0",
            {"redop": "none", "root": -1, "oop_error": None, "oop_wrong": 0},
        ),
        # no table header (a partial capture): broadcast-like row read by its width
        (
            "",
            "     1048576        262144     float       0    45.10   23.25   23.25      0    44.90"
            "   23.35   23.35      0",
            {"redop": None, "root": 0, "oop_error": None, "oop_wrong": 0},
        ),
        (
            "",
            "     1048576        262144     float     sum    45.10   23.25   23.25      0    44.90"
            "   23.35   23.35      0",
            {"redop": "sum", "root": None, "oop_error": None, "oop_wrong": 0},
        ),
    ],
)
def test_layouts(header, row, expected):
    result = parse_nccl_tests(header + "\n" + row + "\n")
    assert result.problems == [] and len(result.rows) == 1
    parsed = result.rows[0]
    assert (parsed.size_bytes, parsed.dtype) == (1048576, "float")
    assert parsed.redop == expected["redop"] and parsed.root == expected["root"]
    assert parsed.out_of_place.max_error == expected["oop_error"]
    assert parsed.out_of_place.wrong == expected["oop_wrong"]
    assert parsed.out_of_place.algbw_gbps == 23.25 and parsed.in_place.time_us == 44.90


@pytest.mark.parametrize(
    "line, hca, port, status, vendor_err, interface",
    [
        ("n1:1234:1300 [0] NCCL WARN NET/IB : mlx5_2:1 Got async event : port error",
         "mlx5_2", 1, None, None, None),
        ("n1:1234:1300 [3] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion from peer "
         "10.0.0.7<40123> with error 12, opcode 0, len 0, vendor err 129 (Send)",
         None, None, 12, 129, None),
        ("n1:7:7 [1] NCCL WARN NET/IB : Got completion from peer 10.0.0.7<1> with status=5 "
         "opcode=1 len=0 vendor err 249 (Recv) localGid ::ffff:10.0.0.1 remoteGids::ffff:10.0.0.7 "
         "hca mlx5_bond_0", "mlx5_bond_0", None, 5, 249, None),
        ("n1:7:7 [1] NCCL WARN NET/Socket : socket progress error on interface ib0",
         None, None, None, None, "ib0"),
    ],
)  # fmt: skip
def test_nccl_warn_lines(line, hca, port, status, vendor_err, interface):
    result = parse_nccl_tests(line)
    assert len(result.warnings) == 1 and result.errors == []
    warning = result.warnings[0]
    assert warning.source == "nccl" and warning.host == "n1"
    assert warning.subsystem in ("NET/IB", "NET/Socket")
    assert (warning.hca, warning.port, warning.status, warning.vendor_err) == (
        hca,
        port,
        status,
        vendor_err,
    )
    assert warning.interface == interface


def test_info_lines_are_not_warnings_and_reducing_max_bytes_is():
    result = parse_nccl_tests(
        "n1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>\n"
        "Reducing maxBytes to 27951912277 due to memory limitation\n"
    )
    assert [w.source for w in result.warnings] == ["nccl-tests"]
    assert "Reducing maxBytes" in result.warnings[0].text


@pytest.mark.parametrize(
    "output, needle",
    [
        ("Segmentation fault (core dumped)\n", "Segmentation fault"),
        ("srun: error: node01: task 3: Exited with exit code 1\n", "srun: error"),
        ("Invalid number of GPUs: 8 requested but only 4 were found.\n", "Invalid number"),
        ("n1: Test CUDA failure common.cu:892 'out of memory'\n", "Test CUDA failure"),
        (
            "-" * 74 + "\nmpirun noticed that process rank 3 with PID 0 on node n2 exited on signal"
            " 11 (Segmentation fault).\n" + "-" * 74 + "\n",
            "mpirun noticed",
        ),
        ("./all_reduce_perf: error while loading shared libraries: libnccl.so.2\n", "libnccl"),
    ],
)
def test_failures_become_errors(output, needle):
    result = parse_nccl_tests(output)
    assert any(needle in e for e in result.errors), result.errors
    assert not result.complete and result.rows == []


@pytest.mark.parametrize(
    "junk",
    [
        "",
        "\n\n",
        "\x00\x01\x02\xff garbage",
        "# Avg bus bandwidth : nan\n",
        "# nThread x nGpus y\n#  Rank  A Group\n",
        "1 2 3 4 5 6 7 8 9 10 11 12 13\n12 12 float sum -1 x y z 0 1 2 3 4\n",
        "#       size  count\n 1 2 float\n",
        "#       size count type time algbw busbw #wrong\n 8 2 float 1.0 2.0 3.0 -5\n",
        "#       size count type time algbw busbw #wrong\n 8 2 float 1.0 2.0 3.0 1e999\n",
        "#       size count type time algbw busbw error\n 8 2 float 1.0 2.0 3.0 1e999\n",
        "mlx5_" + "9" * 50_000 + " NCCL WARN hca",
        "A" * 100_000,
    ],
)
def test_garbage_never_raises(junk):
    result = parse_nccl_tests(junk)
    assert isinstance(result.problems, list)
    assert all(row.size_bytes >= 0 for row in result.rows)
    assert result.avg_bus_bandwidth_gbps is None


def test_empty_and_binary():
    assert parse_nccl_tests("").problems == ["empty nccl-tests output"]
    assert parse_nccl_tests(None).problems == ["empty nccl-tests output"]
    binary = parse_nccl_tests(bytes(range(256)) * 4)
    assert binary.rows == [] and binary.problems and not binary.complete


@settings(max_examples=150, deadline=None)
@given(st.text())
def test_any_text_never_raises(text):
    result = parse_nccl_tests(text)
    assert isinstance(result.rows, list)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.sampled_from([*NEW_FORMAT.splitlines(), "", "garbage", "NCCL WARN x", "1 2"]),
        max_size=40,
    )
)
def test_shuffled_nccl_lines_never_raise(lines):
    result = parse_nccl_tests("\n".join(lines))
    assert result.wrong_total >= 0
