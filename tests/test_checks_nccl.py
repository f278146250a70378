"""The straggler finder of checks/nccl.py: per collective and message size, a GPU far below the
median of its peers."""

from __future__ import annotations

import sys

import pytest
from conftest import read_capture
from snapshots import builtin_registry

from ibdiag.sources.parsers.nccl_inspector import InspectorSample, parse_inspector_prom

KIND = "nccl_inspector"
PROM_CAPTURE = "nccl-readme-nvl72004-inspector-prom-allreduce-4-5GB-and-p2p-send.txt"

# checks/nccl.py as the registry loaded it (checks are files, not a package)
NCCL = sys.modules[builtin_registry().get("nccl.inspector").func.__module__]
stragglers = NCCL.stragglers


def _sample(gpu, bus_gbytes, host="n1", collective="AllReduce", size=2**30, kind="coll"):
    return InspectorSample(
        kind=kind,
        collective=collective,
        message_bytes=size,
        bus_bw_gbps=None if bus_gbytes is None else bus_gbytes * 8,
        alg_bw_gbps=None,
        gpu=gpu,
        host=host,
        comm="c",
        timestamp_us=None,
    )


def test_stragglers_flags_the_slow_gpu():
    samples = [_sample(f"GPU{n}", 45.0 + n * 0.1) for n in range(8)]
    samples[5] = _sample("GPU5", 30.0)
    samples.append(_sample("GPU5", 31.0))  # its best sample counts
    samples += [_sample(f"GPU{n}", 10.0, size=2**20) for n in range(3)]  # all equal: fine
    found = stragglers(samples)
    assert len(found) == 1
    (slow,) = found
    assert (slow.gpu, slow.host, slow.collective, slow.message_bytes) == (
        "GPU5",
        "n1",
        "AllReduce",
        2**30,
    )
    assert slow.observed_gbps == pytest.approx(248.0)
    assert slow.median_gbps == pytest.approx(8 * 45.3)
    assert slow.peers == 7 and slow.kind == "coll"
    assert stragglers(samples, fraction=0.5) == []


def test_stragglers_needs_two_peers_and_a_bandwidth():
    assert stragglers([_sample("GPU0", 50.0), _sample("GPU1", 5.0)]) == []
    three = [_sample("GPU0", 50.0), _sample("GPU1", 50.0), _sample("GPU2", 5.0)]
    assert [s.gpu for s in stragglers(three)] == ["GPU2"]
    unknown = [*three[:2], _sample("GPU2", None), _sample("GPU3", 0.0), _sample(None, 1.0)]
    assert stragglers(unknown) == []


def test_stragglers_keeps_hosts_and_groups_apart():
    samples = [_sample("GPU0", 50.0, host=h) for h in ("a", "b", "c")]
    samples += [_sample("GPU0", 20.0, host="d")]
    samples += [_sample("GPU0", 5.0, host=h, collective="Send", kind="p2p") for h in "ab"]
    found = stragglers(samples)
    assert [(s.host, s.gpu, s.peers) for s in found] == [("d", "GPU0", 3)]


@pytest.mark.parametrize("fraction", [0, -1, 1.5, "0.8", True])
def test_stragglers_rejects_a_bad_fraction(fraction):
    with pytest.raises(ValueError):
        stragglers([], fraction=fraction)


def test_stragglers_on_parsed_prometheus_files():
    text = read_capture(KIND, PROM_CAPTURE)
    samples = []
    for n, factor in enumerate((1.0, 1.01, 0.99, 0.5)):
        gpu_text = text.replace('gpu="GPU0"', f'gpu="GPU{n}"').replace(
            "} 678.263", f"}} {678.263 * factor}"
        )
        samples += parse_inspector_prom(gpu_text).samples
    found = stragglers(samples)
    assert [(s.gpu, s.collective, s.message_bytes) for s in found] == [
        ("GPU3", "AllReduce", 4 * 2**30)
    ]
    assert found[0].median_gbps == pytest.approx(678.263 * 8)
