"""NCCL Inspector dump parsers, on every capture in
tests/fixtures/nccl_inspector.

Each capture has facts read from the file by hand (FACTS); a capture added to the folder fails
``test_every_capture_has_facts`` until someone writes its facts down.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FIXTURES_DIR, capture_names, captures_without_facts, read_capture
from hypothesis import given, settings
from hypothesis import strategies as st

from ibdiag.families.nccl_inspector.parser import (
    message_size_lower_bound,
    parse_inspector_file,
    parse_inspector_json,
    parse_inspector_prom,
)

FIXTURES = Path(FIXTURES_DIR)
KIND = "nccl_inspector"
FOLDER = FIXTURES / KIND

JSON_CAPTURE = (
    "nccl-readme-inspector-json-v4.4-dump_stats-coll_perf-allreduce-16GiB-and-verbose-"
    "reducescatter.txt"
)
PROM_CAPTURE = "nccl-readme-nvl72004-inspector-prom-allreduce-4-5GB-and-p2p-send.txt"

# Read from each file by hand. Each sample: kind, collective, message_bytes, bus GB/s,
# alg GB/s, exec us, gpu, host, comm, algo_proto.
FACTS = {
    # WARN: the dump_stats marker reports 4096 dropped collective records; it announces 1024
    # coll and 2 proxy records but the README excerpt holds 2 coll_perf records.
    JSON_CAPTURE: {
        "parser": "json",
        "format_version": "v4.4",
        "truncated": True,
        "samples": [
            (
                "coll",
                "AllReduce",
                17179869184,
                485.119099,
                277.210914,
                61974,
                "rank 2",
                "example-hostname",
                "0x7f8c496ae9f661",
                "RING_LL",
            ),
            (
                "coll",
                "ReduceScatter",
                2147483648,
                366.134533,
                418.439467,
                41057,
                "rank 2",
                "example-hostname",
                "0x7f8c496ae9f661",
                "RING_SIMPLE",
            ),
        ],
        "stats": {
            "coll_dropped_total": 4096,
            "coll_dropped_since_last_dump": 512,
            "proxy_ops_dropped_total": 3,
            "proxy_pxn_skipped_process_total": 5,
        },
        "dropped_records": 4096,
        "problems": ["coll_records: 2 of 1024, proxy_records: 0 of 2"],
        "extra": {
            "rank": 2,
            "nranks": 8,
            "n_nodes": 1,
            "timestamp_us": 1748030377748202,
            "seq": 1407,
            "labels": {"pid": "1639453", "coll_proto": "LL"},
        },
    },
    PROM_CAPTURE: {
        "parser": "prom",
        "format_version": "v5.1",
        "truncated": False,
        "samples": [
            (
                "coll",
                "AllReduce",
                4 * 2**30,
                678.263,
                None,
                9498.47,
                "GPU0",
                "nvl72004-T01",
                "DP Group 0",
                "Ring_ll",
            ),
            (
                "p2p",
                "Send",
                512 * 2**20,
                464.9,
                None,
                1154.87,
                "GPU0",
                "nvl72004-T01",
                "DP Group 0",
                None,
            ),
        ],
        "stats": {},
        "dropped_records": 0,
        "problems": [],
        "extra": {
            "rank": None,
            "nranks": 4,
            "n_nodes": 1,
            "timestamp_us": None,
            "seq": None,
            "labels": {"slurm_job_id": "unknown", "message_size": "4-5GB"},
        },
    },
}


def _parse(name, text):
    return (parse_inspector_json if FACTS[name]["parser"] == "json" else parse_inspector_prom)(text)


def _row(sample):
    return (
        sample.kind,
        sample.collective,
        sample.message_bytes,
        sample.bus_bw_gbytes,
        sample.alg_bw_gbytes,
        sample.exec_time_us,
        sample.gpu,
        sample.host,
        sample.comm,
        sample.algo_proto,
    )


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
    dump = _parse(name, text)
    assert dump.format == ("json" if facts["parser"] == "json" else "prometheus")
    assert dump.format_version == facts["format_version"]
    assert dump.truncated is facts["truncated"]
    assert [_row(s) for s in dump.samples] == facts["samples"]
    for sample in dump.samples:  # Gb/s = the Inspector's GB/s x 8
        assert sample.bus_bw_gbps == pytest.approx(sample.bus_bw_gbytes * 8)
        if sample.alg_bw_gbytes is not None:
            assert sample.alg_bw_gbps == pytest.approx(sample.alg_bw_gbytes * 8)
        else:
            assert sample.alg_bw_gbps is None
    first = dump.samples[0]
    for attribute, value in facts["extra"].items():
        if attribute == "labels":
            for key, label in value.items():
                assert first.labels[key] == label, key
        else:
            assert getattr(first, attribute) == value, attribute
    for stat, value in facts["stats"].items():
        assert dump.stats[stat] == value, stat
    assert dump.dropped_records == facts["dropped_records"]
    assert len(dump.problems) == len(facts["problems"]), dump.problems
    for needle, problem in zip(facts["problems"], dump.problems):
        assert needle in problem


@pytest.mark.parametrize("name", capture_names(KIND))
def test_capture_cut_anywhere_keeps_what_came_before(name):
    """The Inspector rewrites (Prometheus) or appends (JSON) in place: a reader sees prefixes."""
    text = read_capture(KIND, name)
    full = [_row(s) for s in _parse(name, text).samples]
    for cut in range(len(text)):
        partial = _parse(name, text[:cut])
        rows = [_row(s) for s in partial.samples]
        # samples read from a prefix are the full file's, minus a partly-read last one
        for got, expected in zip(rows[:-1], full):
            assert got == expected
        assert len(rows) <= len(full)
        if rows and rows[-1] != full[len(rows) - 1]:
            assert partial.truncated  # only a cut sample may differ
        if text[:cut].strip() and not text[:cut].endswith("\n"):
            assert partial.truncated or not partial.samples or FACTS[name]["parser"] == "json"


def test_prom_cut_mid_line_is_truncated():
    text = read_capture(KIND, PROM_CAPTURE)
    lines = text.splitlines(keepends=True)
    cut = "".join(lines[:2]) + lines[2][:60]
    dump = parse_inspector_prom(cut)
    assert dump.truncated
    assert [s.collective for s in dump.samples] == ["AllReduce"]
    assert dump.samples[0].exec_time_us == 9498.47
    assert any("no newline" in p for p in dump.problems)
    # cut between a bandwidth line and its exec-time line
    dump = parse_inspector_prom("".join(lines[:3]))
    assert dump.truncated
    assert dump.samples[1].bus_bw_gbytes == 464.9 and dump.samples[1].exec_time_us is None
    assert any("no exec-time line" in p for p in dump.problems)
    # cut at a pair boundary: complete, not truncated
    dump = parse_inspector_prom("".join(lines[:2]))
    assert not dump.truncated and dump.problems == [] and len(dump.samples) == 1
    # a value cut short ("678.2") is never taken for the real one
    dump = parse_inspector_prom(lines[0][: lines[0].index("678.2") + 5])
    assert dump.samples == [] and dump.truncated


def _as_json_lines(text):
    """The capture's pretty-printed README objects as the real file writes them: one a line."""
    decoder = json.JSONDecoder()
    objects, pos = [], 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return "".join(json.dumps(o) + "\n" for o in objects)
        value, pos = decoder.raw_decode(text, pos)
        objects.append(value)


def test_json_one_object_per_line_and_cut_mid_record():
    text = _as_json_lines(read_capture(KIND, JSON_CAPTURE))
    assert len(text.splitlines()) == 3
    dump = parse_inspector_json(text)
    assert [_row(s) for s in dump.samples] == FACTS[JSON_CAPTURE]["samples"]
    cut = text[: text.index('"coll_busbw_gbs": 366')]
    dump = parse_inspector_json(cut)
    assert dump.truncated and [s.collective for s in dump.samples] == ["AllReduce"]
    assert any("file ends mid-record at line 3" in p for p in dump.problems)


def test_json_counts_match_the_marker():
    header = {"id": "0xabc", "comm_name": "DP Group 0", "rank": 1, "n_ranks": 2, "nnodes": 1}
    metadata = {"inspector_output_format_version": "v4.3", "hostname": "node0", "pid": 7}
    marker = {
        "header": header,
        "metadata": metadata,
        "dump_stats": {"coll_records": 1, "p2p_records": 1, "coll_dropped_total": 0},
    }
    coll = {
        "coll_perf": {
            "coll": "AllGather",
            "coll_algo": "RING",
            "coll_proto": "SIMPLE",
            "coll_sn": 3,
            "coll_msg_size_bytes": 1048576,
            "coll_exec_time_us": 40,
            "coll_timing_source": "kernel_gpu",
            "coll_algobw_gbs": 52.4,
            "coll_busbw_gbs": 26.2,
        }
    }
    p2p = {
        "p2p_perf": {
            "p2p": "Send",
            "p2p_sn": 8,
            "p2p_peer": 0,
            "p2p_msg_size_bytes": 524288,
            "p2p_exec_time_us": 50,
            "p2p_timing_source": "kernel_gpu",
            "p2p_algobw_gbs": 10.5,
            "p2p_busbw_gbs": 10.5,
        }
    }
    text = "".join(json.dumps(o) + "\n" for o in (marker, coll, p2p))
    dump = parse_inspector_json(text)
    assert dump.problems == [] and not dump.truncated and dump.dropped_records == 0
    assert dump.format_version == "v4.3"
    allgather, send = dump.samples
    assert allgather.comm == "DP Group 0" and allgather.comm_id == "0xabc"
    assert allgather.gpu == "rank 1" and allgather.host == "node0"
    assert allgather.bus_bw_gbps == pytest.approx(209.6)
    assert allgather.timing_source == "kernel_gpu" and allgather.algo_proto == "RING_SIMPLE"
    assert (send.kind, send.collective, send.peer, send.seq) == ("p2p", "Send", 0, 8)
    assert send.message_bytes == 524288 and send.bus_bw_gbps == pytest.approx(84.0)
    # a record short at the end: cut or still being written
    short = parse_inspector_json("".join(json.dumps(o) + "\n" for o in (marker, coll)))
    assert short.truncated and any("p2p_records: 0 of 1" in p for p in short.problems)
    # a new marker before the previous batch was complete: a problem, not a cut
    mixed = parse_inspector_json(
        "".join(json.dumps(o) + "\n" for o in (marker, coll, marker, coll, p2p))
    )
    assert not mixed.truncated and len(mixed.samples) == 3
    assert any("came before the previous dump" in p for p in mixed.problems)


def test_json_old_per_record_format_and_array_document():
    record = {
        "header": {"id": "0x1", "rank": 3, "n_ranks": 4, "nnodes": 2},
        "metadata": {"inspector_output_format_version": "v4.1", "hostname": "h1", "pid": 1},
        "coll_perf": {
            "coll": "AllReduce",
            "coll_sn": 9,
            "coll_msg_size_bytes": 8388608,
            "coll_exec_time_us": 100,
            "coll_algobw_gbs": 83.9,
            "coll_busbw_gbs": 146.8,
        },
    }
    lines = parse_inspector_json(json.dumps(record) + "\n" + json.dumps(record) + "\n")
    assert lines.problems == [] and len(lines.samples) == 2
    assert lines.samples[0].gpu == "rank 3" and lines.samples[0].comm == "0x1"
    assert lines.samples[0].n_nodes == 2 and lines.format_version == "v4.1"
    array = parse_inspector_json(json.dumps([record, record]))
    assert [_row(s) for s in array.samples] == [_row(s) for s in lines.samples]


def test_json_garbage_between_records_is_skipped():
    good = _as_json_lines(read_capture(KIND, JSON_CAPTURE)).splitlines()
    text = "\n".join([good[0], '{"coll_perf": {"coll": "AllRed', good[1], "not json", good[2]])
    dump = parse_inspector_json(text + "\n")
    assert [s.collective for s in dump.samples] == ["AllReduce", "ReduceScatter"]
    assert any("unparseable record at line 2" in p for p in dump.problems)


def test_prom_comments_stats_timestamps_and_escapes():
    labels = (
        'version="v5.1",slurm_job_id="42",node="n1",gpu="GPU3",comm_name="TP \\"a\\", b}",'
        'n_nodes="2",nranks="16",collective="AllGather",message_size="1-2MB",'
        'algo_proto="Ring_simple"'
    )
    device = 'version="v5.1",slurm_job_id="42",node="n1",gpu="GPU3"'
    text = (
        "# HELP nccl_bus_bandwidth_gbs NCCL bus bandwidth\n"
        "# TYPE nccl_bus_bandwidth_gbs gauge\n"
        f"nccl_bus_bandwidth_gbs{{{labels}}} 44.5 1700000000000\n"
        f"nccl_collective_exec_time_microseconds{{{labels}}} 1.5e+02\n"
        f"nccl_collectives_total{{{device}}} 1000\n"
        f"nccl_collectives_dropped_total{{{device}}} 12\n"
        f"nccl_p2p_total{{{device}}} 10\n"
        f"nccl_p2p_dropped_total{{{device}}} 1\n"
    )
    dump = parse_inspector_prom(text)
    assert dump.problems == [] and not dump.truncated
    (sample,) = dump.samples
    assert sample.comm == 'TP "a", b}' and sample.gpu == "GPU3"
    assert sample.message_bytes == 2**20 and sample.message_size == "1-2MB"
    assert sample.exec_time_us == 150.0 and sample.timestamp_us == 1700000000000000
    assert sample.bus_bw_gbps == pytest.approx(356.0)
    assert dump.stats == {
        "nccl_collectives_total": 1000,
        "nccl_collectives_dropped_total": 12,
        "nccl_p2p_total": 10,
        "nccl_p2p_dropped_total": 1,
    }
    assert dump.dropped_records == 13


@pytest.mark.parametrize(
    "label, expected",
    [("0B", 0), ("8-9KB", 8192), ("4-5GB", 4 * 2**30), ("512-513MB", 2**29), ("1-2TB", 2**40)],
)
def test_message_size_buckets(label, expected):
    assert message_size_lower_bound(label) == expected


@pytest.mark.parametrize("label", ["", "big", "4GB", "4-5PB", "-1-2KB"])
def test_odd_message_size_buckets(label):
    assert message_size_lower_bound(label) is None


def test_parse_file_dispatches_and_takes_the_uuid():
    prom = read_capture(KIND, PROM_CAPTURE)
    uuid = "GPU-3a2b1c0d-1111-2222-3333-444455556666"
    dump = parse_inspector_file(f"/var/lib/nx/nccl_inspector_metrics_{uuid}.prom", prom)
    assert dump.format == "prometheus" and len(dump.samples) == 2
    assert {s.gpu_uuid for s in dump.samples} == {uuid}
    text = read_capture(KIND, JSON_CAPTURE)
    for name in ("node1-pid42.log", "dump.json", "dump.jsonl"):
        dump = parse_inspector_file(name, text)
        assert dump.format == "json" and len(dump.samples) == 2
        assert all(s.gpu_uuid is None for s in dump.samples)
    sniffed = parse_inspector_file("mystery", text)
    assert sniffed.format == "json" and "unknown extension" in sniffed.problems[0]
    sniffed = parse_inspector_file("", prom)
    assert sniffed.format == "prometheus" and len(sniffed.samples) == 2


@pytest.mark.parametrize(
    "junk",
    [
        "",
        "\n\n",
        "\x00\x01\x02\xff garbage",
        "nccl_bus_bandwidth_gbs{",
        'nccl_bus_bandwidth_gbs{gpu="GPU0"} NaN\n',
        'nccl_bus_bandwidth_gbs{collective="AllReduce",message_size="x"} -Inf\n',
        'nccl_bus_bandwidth_gbs{collective="AllReduce"} 1e400\nfoo 1\nfoo{a=b} 1\n',
        "nccl_collectives_total 1e30\nnccl_p2p_total -3\n",
        "{",
        "[1, 2, {}]",
        '{"coll_perf": {"coll": 5, "coll_busbw_gbs": "fast"}}',
        '{"coll_perf": {"coll": "AllReduce", "coll_busbw_gbs": 1e999, "coll_exec_time_us": '
        + "9" * 400
        + "}}",
        '{"dump_stats": 3}\n{"dump_stats": {"coll_records": -1}}\n{"p2p_perf": {}}',
        "[" * 100_000,
        '{"coll_perf": {"coll": "AllReduce", "coll_busbw_gbs": 1}}\n' * 2000,
    ],
)
def test_garbage_never_raises(junk):
    for parse in (parse_inspector_prom, parse_inspector_json):
        dump = parse(junk)
        assert isinstance(dump.problems, list) and len(dump.problems) <= 51
        for sample in dump.samples:
            assert sample.bus_bw_gbps is None or sample.bus_bw_gbps >= 0
    parse_inspector_file("x.prom", junk)
    parse_inspector_file("x.json", junk)


def test_empty_and_binary():
    for parse in (parse_inspector_prom, parse_inspector_json):
        empty = parse("")
        assert empty.samples == [] and not empty.truncated and "empty" in empty.problems[0]
        assert parse(None).samples == []
        binary = parse(bytes(range(256)) * 4)
        assert binary.samples == [] and binary.problems


@settings(max_examples=150, deadline=None)
@given(st.text())
def test_any_text_never_raises(text):
    for parse in (parse_inspector_prom, parse_inspector_json):
        dump = parse(text)
        assert isinstance(dump.samples, list)
    parse_inspector_file("nccl_inspector_metrics_x.prom", text)


def test_a_label_number_with_a_control_character_int_does_not_strip_never_raises():
    """Hypothesis found it: re's \\s matches \\x1c, int() does not strip it."""
    line = (
        'nccl_bus_bandwidth_gbs{gpu="GPU0",comm_name="c",n_nodes="1",nranks="\x1c4",'
        'collective="AllReduce",message_size="4-5GB",algo_proto="Ring_ll"} 678.2\n'
    )
    dump = parse_inspector_prom(line)
    assert [sample.nranks for sample in dump.samples] == [4]


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=0), st.binary(max_size=40))
def test_capture_with_junk_spliced_in_never_raises(position, junk):
    for name in (PROM_CAPTURE, JSON_CAPTURE):
        text = read_capture(KIND, name).encode()
        cut = position % (len(text) + 1)
        dump = _parse(name, text[:cut] + junk + text[cut:])
        assert isinstance(dump.problems, list)
