"""perftest parser (and the ib_*_bw argv families/loopback/traffic.py builds), on every capture in
tests/fixtures/perftest.

Each capture has facts read from the file by hand (FACTS); a capture added to the folder fails
``test_every_capture_has_facts`` until someone writes its facts down.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES_DIR, capture_names, captures_without_facts, read_capture
from hypothesis import given, settings
from hypothesis import strategies as st

from ibdiag.families.loopback.parser import (
    UNIT_TO_GBPS,
    parse_perftest,
    parse_perftest_runs,
    to_gbps,
)
from ibdiag.families.loopback.traffic import (
    BW_TOOLS,
    DEFAULT_TCP_PORT,
    ib_write_bw_argv,
    perftest_bw_argv,
)

FIXTURES = Path(FIXTURES_DIR)
KIND = "perftest"
FOLDER = FIXTURES / KIND
MIB = 8 * 1048576 / 1e9  # MiB/s -> Gb/s

POW2_SIZES = [2**i for i in range(1, 24)]  # -a: 2 B .. 8 MiB

# Read from each file by hand. bw/lat rows: (size, iterations, values...) for the rows named;
# "sizes": every size in order.
FACTS = {
    # ib_atomic_bw then ib_atomic_lat in one file, CPU-frequency warnings inside the tables
    "mlx4-connectx3-qdr-ib_atomic_bw-and-ib_atomic_lat-cpu-freq-warning.txt": {
        "test": "Atomic FETCH_AND_ADD BW Test",
        "tests": ["Atomic FETCH_AND_ADD BW Test", "Atomic FETCH_AND_ADD Latency Test"],
        "device": "mlx4_0",
        "transport": "IB",
        "connection": "RC",
        "link_type": "IB",
        "mtu": 2048,
        "qps": 1,
        "unit": "MB/sec",
        "bw_sizes": [8],
        "lat_sizes": [8],
        "bw": {8: (20000, 18.79, 18.67, 2.446776)},
        "lat": {8: (20000, 2.27, 14.36, 2.34, 2.37, 0.31, 2.56, 10.20)},
        "warnings": 3,
        "duplicates": 0,
        "average_gbps": 18.67 * MIB,
        "header": {"Outstand reads": "16", "TX depth": "128", "Data ex. method": "Ethernet"},
        "runs": 2,
    },
    "mlx4-connectx3-qdr-ib_send_bw-a-20000iter.txt": {
        "test": "Send BW Test",
        "tests": ["Send BW Test"],
        "device": "mlx4_0",
        "transport": "IB",
        "connection": "RC",
        "link_type": "IB",
        "mtu": 2048,
        "qps": 1,
        "unit": "MB/sec",
        "bw_sizes": POW2_SIZES,
        "lat_sizes": [],
        "bw": {
            2: (20000, 10.17, 9.90, 5.189724),
            1024: (20000, 3191.34, 3039.98, 3.112943),
            8388608: (20000, 3662.23, 3661.76, 0.000458),  # irregular spacing, verbatim
        },
        "lat": {},
        "warnings": 0,
        "duplicates": 0,
        "average_gbps": 3661.76 * MIB,  # ~30.7 Gb/s on QDR (32 Gb/s data rate)
        "header": {"Max inline data": "0[B]", "Using SRQ": "OFF", "CQ Moderation": "100"},
        "runs": 1,
    },
    # the shell prompt with the command line comes first
    "mlx4-connectx3-qdr-ib_write_lat-a-20000iter.txt": {
        "test": "RDMA_Write Latency Test",
        "tests": ["RDMA_Write Latency Test"],
        "device": "mlx4_0",
        "transport": "IB",
        "connection": "RC",
        "link_type": "IB",
        "mtu": 2048,
        "qps": 1,
        "unit": None,
        "bw_sizes": [],
        "lat_sizes": POW2_SIZES,
        "bw": {},
        "lat": {
            2: (20000, 0.88, 6.84, 0.98, 1.03, 0.20, 1.21, 5.42),
            4096: (20000, 3.56, 49.03, 3.74, 3.80, 0.29, 4.16, 8.70),
            8388608: (20000, 2296.01, 2345.48, 2302.01, 2304.98, 6.43, 2327.01, 2335.48),
        },
        "warnings": 0,
        "duplicates": 0,
        "average_gbps": None,
        "header": {"Max inline data": "220[B]", "TX depth": "1"},
        "runs": 1,
    },
    # RoCE (Link type Ethernet), rdma_cm, 4 QPs, --report_gbits, tabs in header and row
    "oci-oke-ib_write_bw-roce-mlx5_5-4qp-98gbps.txt": {
        "test": "RDMA_Write BW Test",
        "tests": ["RDMA_Write BW Test"],
        "device": "mlx5_5",
        "transport": "IB",
        "connection": "RC",
        "link_type": "Ethernet",
        "mtu": 4096,
        "qps": 4,
        "unit": "Gb/sec",
        "bw_sizes": [65536],
        "lat_sizes": [],
        "bw": {65536: (20000, 98.01, 98.01, 0.186932)},
        "lat": {},
        "warnings": 0,
        "duplicates": 0,
        "average_gbps": 98.01,
        "header": {
            "GID index": "3",
            "rdma_cm QPs": "ON",
            "Data ex. method": "rdma_cm",
            "TOS": "41",
            "Using SRQ": "OFF",
        },
        "runs": 1,
    },
    # loopback: the client's block, then the server's (same row printed again)
    "superbench-ib_write_bw-loopback-8M-azure-hdr-ib0-server-client-interleaved.txt": {
        "test": "RDMA_Write BW Test",
        "tests": ["RDMA_Write BW Test"],
        "device": "ib0",
        "transport": "IB",
        "connection": "RC",
        "link_type": "IB",
        "mtu": 4096,
        "qps": 1,
        "unit": "MB/sec",
        "bw_sizes": [8388608],
        "lat_sizes": [],
        "bw": {8388608: (20000, 24056.74, 24056.72, 0.003007)},
        "lat": {},
        "warnings": 0,
        "duplicates": 1,
        "average_gbps": 24056.72 * MIB,  # ~201.8 Gb/s (loopback does not cross the wire)
        "header": {"PCIe relax order": "ON", "CQ Moderation": "1"},
        "runs": 1,
    },
    # both sides line-interleaved: headers twice, the last row printed twice
    "superbench-ib_write_bw-loopback-all-sizes-azure-hdr-interleaved.txt": {
        "test": "RDMA_Write BW Test",
        "tests": ["RDMA_Write BW Test"],
        "device": "ib0",
        "transport": "IB",
        "connection": "RC",
        "link_type": "IB",
        "mtu": 4096,
        "qps": 1,
        "unit": "MB/sec",
        "bw_sizes": POW2_SIZES,
        "lat_sizes": [],
        "bw": {
            2: (2000, 5.32, 5.30, 2.778732),
            8192: (2000, 18620.51, 12782.56, 1.636168),
            8388608: (2000, 23240.68, 23240.68, 0.002905),
        },
        "lat": {},
        "warnings": 0,
        "duplicates": 1,
        "average_gbps": 23240.68 * MIB,
        "header": {"ibv_wr* API": "ON", "PCIe relax order": "ON", "TX depth": "128"},
        "runs": 1,
    },
}


def test_fixture_folder_present():
    assert FOLDER.is_dir(), (
        f"{FOLDER} is missing: the perftest tests read the real captures in tests/fixtures"
    )


def test_every_capture_has_facts():
    missing = captures_without_facts(KIND, FACTS)
    assert not missing, f"captures without facts in {__file__}: {missing}"


@pytest.mark.parametrize("name", capture_names(KIND))
def test_capture(name):
    text = read_capture(KIND, name)
    facts = FACTS.get(name)
    assert facts is not None, f"write the facts of {name} into FACTS"
    result = parse_perftest(text)
    assert result.errors == []
    assert result.complete
    for attribute in ("test", "tests", "device", "transport", "connection", "link_type"):
        assert getattr(result, attribute) == facts[attribute], attribute
    assert result.mtu == facts["mtu"] and result.qps == facts["qps"]
    assert result.unit == facts["unit"]
    assert [row.size_bytes for row in result.bw_rows] == facts["bw_sizes"]
    assert [row.size_bytes for row in result.lat_rows] == facts["lat_sizes"]
    by_size = {row.size_bytes: row for row in result.bw_rows}
    for size, (iterations, peak, average, rate) in facts["bw"].items():
        row = by_size[size]
        assert (row.iterations, row.bw_peak, row.bw_average, row.msg_rate_mpps) == (
            iterations,
            peak,
            average,
            rate,
        )
        assert row.unit == facts["unit"] and row.extra == {}
    lat_by_size = {row.size_bytes: row for row in result.lat_rows}
    for size, values in facts["lat"].items():
        row = lat_by_size[size]
        assert (
            row.iterations,
            row.t_min,
            row.t_max,
            row.t_typical,
            row.t_avg,
            row.t_stdev,
            row.p99,
            row.p99_9,
        ) == values
        assert row.unit == "usec"
    assert len(result.warnings) == facts["warnings"]
    assert all("CPU Frequency is not max" in w for w in result.warnings)
    assert result.duplicate_rows == facts["duplicates"]
    if facts["average_gbps"] is None:
        assert result.average_gbps is None and result.peak_gbps is None
    else:
        assert result.average_gbps == pytest.approx(facts["average_gbps"])
        assert result.peak_gbps >= result.average_gbps
    for key, value in facts["header"].items():
        assert result.header[key] == value, key
    if facts["runs"] == 1:
        assert result.problems == []
    else:
        assert len(result.problems) == 1 and "parse_perftest_runs" in result.problems[0]


@pytest.mark.parametrize("name", capture_names(KIND))
def test_capture_runs(name):
    text = read_capture(KIND, name)
    facts = FACTS.get(name)
    assert facts is not None, f"write the facts of {name} into FACTS"
    runs = parse_perftest_runs(text)
    assert [run.test for run in runs] == facts["tests"]
    assert all(run.problems == [] and run.complete and run.errors == [] for run in runs)
    assert sum(len(run.bw_rows) for run in runs) == len(facts["bw_sizes"])
    assert sum(len(run.lat_rows) for run in runs) == len(facts["lat_sizes"])
    for run in runs:
        assert run.kind == ("bw" if run.bw_rows else "lat")
        assert not (run.bw_rows and run.lat_rows)


@pytest.mark.parametrize("name", capture_names(KIND))
def test_capture_bandwidth_agrees_with_message_rate(name):
    """size x MsgRate gives the bytes/s behind BW average: that is how the captures prove the
    unit conversion (perftest's "MB/sec" is 2^20 bytes, not 10^6)."""
    result = parse_perftest(read_capture(KIND, name))
    for row in result.bw_rows:
        from_rate = row.size_bytes * row.msg_rate_mpps * 1e6 * 8 / 1e9
        assert row.average_gbps == pytest.approx(from_rate, rel=0.02), row


@pytest.mark.parametrize("name", capture_names(KIND))
def test_capture_truncated(name):
    """Cut anywhere, a capture still parses; cut before the closing dashes, it is incomplete."""
    text = read_capture(KIND, name)
    for cut in range(0, len(text), max(1, len(text) // 40)):
        partial = parse_perftest(text[:cut])
        assert isinstance(partial.bw_rows, list) and isinstance(partial.problems, list)
        parse_perftest_runs(text[:cut])
    lines = text.rstrip().splitlines()
    last_row = max(i for i, line in enumerate(lines) if line.split() and line.split()[0].isdigit())
    head = parse_perftest("\n".join(lines[: last_row + 1]))
    full = parse_perftest(text)
    assert not head.complete
    assert len(head.bw_rows) + len(head.lat_rows) == len(full.bw_rows) + len(full.lat_rows)


# The loopback excerpt of seed 001 (run_perftest_loopback 0 1 ib_write_bw -s 1000): both sides'
# headers interleave line by line, the row is printed by the client and again by the server.
LOOPBACK = """************************************
* Waiting for client to connect... *
************************************
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF          Device         : mlx5_ib0
 Number of qps   : 1            Transport type : IB
 Connection type : RC           Using SRQ      : OFF
 PCIe relax order: ON
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF          Device         : mlx5_ib0
 Number of qps   : 1            Transport type : IB
 Connection type : RC           Using SRQ      : OFF
 PCIe relax order: ON
 ibv_wr* API     : ON
 ibv_wr* API     : ON
 CQ Moderation   : 100
 TX depth        : 128
 Mtu             : 4096[B]
 CQ Moderation   : 100
 Link type       : IB
 Mtu             : 4096[B]
 Max inline data : 0[B]
 Link type       : IB
 rdma_cm QPs     : OFF
 Max inline data : 0[B]
 Data ex. method : Ethernet
 rdma_cm QPs     : OFF
---------------------------------------------------------------------------------------
 Data ex. method : Ethernet
---------------------------------------------------------------------------------------
 local address: LID 0x29b QPN 0x013c PSN 0x5cd491 RKey 0x040500 VAddr 0x0055ae3cf1c000
 local address: LID 0x29b QPN 0x013b PSN 0xb8cbdb RKey 0x040600 VAddr 0x00560ad0c50000
 remote address: LID 0x29b QPN 0x013b PSN 0xb8cbdb RKey 0x040600 VAddr 0x00560ad0c50000
 remote address: LID 0x29b QPN 0x013c PSN 0x5cd491 RKey 0x040500 VAddr 0x0055ae3cf1c000
---------------------------------------------------------------------------------------
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]
 #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]
Conflicting CPU frequency values detected: 1846.550000 != 2596.396000. CPU Frequency is not max.
 1000       5000             4104.91            4020.54              4.215846
---------------------------------------------------------------------------------------
 1000       5000             4104.91            4020.54              4.215846
---------------------------------------------------------------------------------------
"""


def test_interleaved_loopback_keeps_each_row_once():
    result = parse_perftest(LOOPBACK)
    assert result.device == "mlx5_ib0" and result.mtu == 4096 and result.link_type == "IB"
    assert result.unit == "MiB/sec"
    assert len(result.bw_rows) == 1 and result.duplicate_rows == 1
    row = result.bw_rows[0]
    assert (row.size_bytes, row.iterations, row.bw_average) == (1000, 5000, 4020.54)
    assert result.average_gbps == pytest.approx(4020.54 * 8 * 1048576 / 1e9)  # 33.73 Gb/s
    assert result.complete and result.errors == [] and result.problems == []
    assert len(result.warnings) == 1


def test_units():
    assert to_gbps(98.01, "Gb/sec") == 98.01
    assert to_gbps(1000.0, "MiB/sec") == pytest.approx(8.388608)
    assert to_gbps(1000.0, "MB/sec") == pytest.approx(8.388608)
    assert to_gbps(1000.0, "furlongs") is None and to_gbps(None, "Gb/sec") is None
    assert set(UNIT_TO_GBPS) == {"Gb/sec", "MiB/sec", "MB/sec"}


DASHES = "-" * 87
CLIENT_HEAD = f"""{DASHES}
                    RDMA_Write BW Test
 Dual-port       : OFF\t\tDevice         : mlx5_0
 Number of qps   : 1\t\tTransport type : IB
 Connection type : RC\t\tUsing SRQ      : OFF
 Mtu             : 4096[B]
 Link type       : IB
{DASHES}
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
"""


@pytest.mark.parametrize(
    "output, needles, rows",
    [
        # client started before the server (or a firewall)
        (
            " Couldn't connect to 10.0.0.2:18515\n Unable to init the socket connection\n",
            ["Couldn't connect to 10.0.0.2:18515", "Unable to init the socket connection"],
            0,
        ),
        (" Unable to find the Infiniband/RoCE device\n", ["Infiniband/RoCE device"], 0),
        ("IB device mlx5_9 not found\n", ["mlx5_9 not found"], 0),
        (
            " Did not detect devices \n If device exists, check if driver is up\n",
            ["Did not detect devices"],
            0,
        ),
        (
            "ethernet_read_keys: Couldn't read remote address\n"
            " Unable to read to socket/rdma_cm\n"
            " Failed to exchange data between server and clients\n",
            ["ethernet_read_keys", "Failed to exchange data"],
            0,
        ),
        (
            "Failed to modify QP 1234 to RTR\n Unable to Connect the HCA's through the link\n",
            ["Failed to modify QP", "Unable to Connect the HCA's"],
            0,
        ),
        ("Couldn't allocate MR\n Couldn't create IB resources\n", ["Couldn't allocate MR"], 0),
        ("Can't produce a report\n", ["Can't produce a report"], 0),
        # the link or the peer went away mid-run: rows so far, then the retry-exceeded error
        (
            CLIENT_HEAD + " 65536      5000             97.10              96.93\t\t   0.184883\n"
            " Completion with error at client\n"
            " Failed status 12: wr_id 0 syndrom 0x81\n"
            "scnt=128, ccnt=0\n"
            " Failed to complete run_iter_bw function successfully\n",
            ["Completion with error at client", "Failed status 12", "scnt=128"],
            1,
        ),
        # mlx5's CQE dump after a completion error is error context, not result rows
        (
            CLIENT_HEAD + "mlx5: node01: got completion with error:\n"
            "00000000 00000000 00000000 00000000\n"
            "00000000 00000000 00000000 00000000\n"
            "00000000 00008813 08000131 0000c7d2\n"
            " Completion with error at client\n",
            ["got completion with error", "00000000 00008813 08000131 0000c7d2"],
            0,
        ),
    ],
)
def test_failures_become_errors(output, needles, rows):
    result = parse_perftest(output)
    for needle in needles:
        assert any(needle in error for error in result.errors), (needle, result.errors)
    assert len(result.bw_rows) == rows
    assert not result.complete
    assert not any("size 0" in p for p in result.problems), result.problems


def test_rows_then_error_keep_rows_and_the_header():
    output = (
        CLIENT_HEAD
        + " 65536      5000             97.10              96.93\t\t   0.184883\n"
        + " Completion with error at client\n"
    )
    result = parse_perftest(output)
    assert result.device == "mlx5_0" and result.unit == "Gb/sec"
    assert result.average_gbps == 96.93 and result.errors and not result.complete


def test_extra_columns_and_duration_latency():
    bw = parse_perftest(
        " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
        "    CPU_Util[%]\n"
        " 65536      1000000          0.00               97.50              0.185966\t    12.34\n"
        "---------------------------------------------------------------------------------------\n"
    )
    row = bw.bw_rows[0]
    assert row.extra == {"cpu_util": 12.34} and row.peak_gbps == 0.0 and row.average_gbps == 97.5
    assert bw.complete and bw.problems == []
    lat = parse_perftest(
        " #bytes        #iterations       t_avg[usec]\n"
        " 2             2345678            1.05\n"
        "---------------------------------------------------------------------------------------\n"
    )
    assert lat.lat_rows[0].t_avg == 1.05 and lat.lat_rows[0].t_min is None
    assert lat.lat_rows[0].iterations == 2345678 and lat.complete


def test_row_width_mismatch_is_a_problem_not_a_crash():
    result = parse_perftest(CLIENT_HEAD + " 65536      5000             97.10\n")
    assert result.bw_rows[0].bw_average is None
    assert any("3 values for 5 columns" in p for p in result.problems), result.problems


@pytest.mark.parametrize(
    "junk",
    [
        "",
        "\n\n",
        "\x00\x01\x02\xff garbage",
        " #bytes     #iterations    BW peak[furlongs]\n 1 2 3\n",
        " 1 2 3 4 5\n",
        " #bytes #iterations t_min[usec]\n 1.5 x 2\n -1 -1 -1\n 1 1 nan\n",
        "RDMA_Write BW Test\n Mtu : lots\n Number of qps : many\n",
        "Device : " + "x" * 500 + "\n" + "A" * 100_000,
        "#" * 50_000 + " ib_write_bw",
    ],
)
def test_garbage_never_raises(junk):
    result = parse_perftest(junk)
    assert isinstance(result.problems, list) and result.errors == []
    assert result.mtu is None and result.qps is None
    assert not result.complete
    parse_perftest_runs(junk)


def test_empty_and_binary():
    empty = parse_perftest("")
    assert empty.problems == ["empty perftest output"] and parse_perftest_runs("") == []
    assert parse_perftest(None).problems == ["empty perftest output"]
    binary = parse_perftest(bytes(range(256)) * 4)
    assert binary.bw_rows == [] and binary.problems


@settings(max_examples=150, deadline=None)
@given(st.text())
def test_any_text_never_raises(text):
    result = parse_perftest(text)
    assert isinstance(result.bw_rows, list)
    parse_perftest_runs(text)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([*LOOPBACK.splitlines(), "", "garbage", "99 99"]), max_size=60))
def test_shuffled_perftest_lines_never_raise(lines):
    result = parse_perftest("\n".join(lines))
    assert all(row.size_bytes >= 1 for row in result.bw_rows)


def test_ib_write_bw_argv():
    assert ib_write_bw_argv("mlx5_0", 1, 18515) == [
        "ib_write_bw", "-d", "mlx5_0", "-i", "1", "-p", "18515", "--report_gbits",
        "-s", "65536", "-D", "5", "-q", "1", "-F",
    ]  # fmt: skip
    client = ib_write_bw_argv(
        "mlx5_ib3", 2, 20000, size=1048576, duration_s=10, qps=4, use_cuda=3, server="localhost"
    )
    assert client == [
        "ib_write_bw", "-d", "mlx5_ib3", "-i", "2", "-p", "20000", "--report_gbits",
        "-s", "1048576", "-D", "10", "-q", "4", "-F", "--use_cuda=3", "localhost",
    ]  # fmt: skip
    assert ib_write_bw_argv("mlx5_0", 1)[6] == str(DEFAULT_TCP_PORT) == "18515"
    positional = ib_write_bw_argv("mlx5_1", 1, 18516, 4096, 2, 2, None, "node02")
    assert positional[positional.index("-s") : positional.index("-q") + 2] == [
        "-s", "4096", "-D", "2", "-q", "2",
    ]  # fmt: skip
    assert positional[-1] == "node02" and not any(a.startswith("--use_cuda") for a in positional)


def test_other_bw_tools():
    for tool in BW_TOOLS:
        argv = perftest_bw_argv(tool, "mlx5_0", 1, 18515, server="10.0.0.2")
        assert argv[0] == tool and argv[-1] == "10.0.0.2"
        assert ("-s" in argv) == (tool != "ib_atomic_bw")


@pytest.mark.parametrize(
    "setting",
    [
        {"perftest_size": 0},
        {"perftest_size": 1},
        {"perftest_size": 2**31},
        {"perftest_duration_s": 0},
        {"perftest_duration_s": 3600},
        {"perftest_qps": 0},
        {"perftest_qps": True},
        {"perftest_qps": "1"},
        {"perftest_base_port": 80},
        {"perftest_base_port": 70000},
    ],
)
def test_the_config_refuses_what_the_argv_builder_used_to(setting):
    """ib_write_bw_argv only builds; the perftest values it takes from Thresholds are refused
    once, by the config (one line, exit 3: tests/test_config.py)."""
    from ibdiag.config import ConfigError, load_effective

    (key,) = setting
    with pytest.raises(ConfigError) as info:
        load_effective(None, None, setting)
    assert str(info.value).startswith(f"command line: {key}: expected")


@pytest.mark.parametrize("name", ["", "-d", "mlx5 0", "mlx5_0;reboot", "x" * 65])
def test_a_device_name_the_builder_used_to_refuse_is_refused_at_plan_time(name):
    """A device name goes on ib_write_bw's command line only when names.py passed it; a
    device with a name problem gets no loopback test planned."""
    from ibdiag.families.loopback.traffic import plan_loopback
    from ibdiag.model import Device, Port
    from ibdiag.sources.names import device_name_problem
    from ibdiag.thresholds import Thresholds

    assert device_name_problem(name) is not None
    port = Port(number=1, path="p", state=4, link_layer="InfiniBand")
    devices = [Device(name=name, path="a", ports=[port]), Device(name="mlx5_1", path="b",
               ports=[port])]  # fmt: skip
    tests = plan_loopback(devices, Thresholds(), lambda d: True, lambda n: None, lambda n: [])
    assert [test.client_device for test in tests] == ["mlx5_1"]


def test_port_numbers_and_gpu_indexes_are_what_the_builder_used_to_require():
    """ib_port: a port directory names.py reads as 1..254; use_cuda: a GPU nvidia-smi named
    GPU<digits>, never negative."""
    from ibdiag.facts.topology import GpuNic
    from ibdiag.sources.names import port_number

    assert [port_number(name) for name in ("0", "1", "254", "255", "01", "-1")] == [
        None, 1, 254, None, None, None,
    ]  # fmt: skip
    assert [GpuNic(gpu=g, nic="mlx5_0", link="PIX").gpu_index for g in ("GPU3", "GPU-1")] == [
        3,
        None,
    ]
