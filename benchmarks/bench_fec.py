#!/usr/bin/env python3
"""What ``perfquery -T`` (phy.fec, issue 24) adds to a level-standard run, per port.

Each ACTIVE InfiniBand port gains two tool runs: ``perfquery -T`` of the local port (beside
-x/-E/-X, all concurrent) and ``perfquery -T LID PORT`` of the far end (beside the far end's -x,
in the same wave: no extra dependent step). This script times one of each against the real
infiniband-diags tools on a simulated fabric (tests/fabric_sim.py: ibsim + opensm, the PATH
shims), alternating with ``perfquery -x`` of the same port as the yardstick, and times phy.fec's
grading on a generated 64-port node (pure Python: the check reads typed facts only).

    python benchmarks/bench_fec.py --runs 30

The simulator implements no PortExtendedSpeedsCounters, so its -T fails at once ("cannot query
PortExtendedSpeedsCounters") after the same ClassPortInfo query -x makes: the figure is a tool
start plus two MADs, as a real PMA's answer costs. Not a test: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [REPO, os.path.join(REPO, "tests")]

from fabric_sim import Cable, Fabric, Hca, Switch, Topology  # noqa: E402

DEVICE, HOST = "mlx5_3", "node01-mlx5_3"
TOPOLOGY = Topology(
    [Switch("leaf07", 36, "MF0;leaf07:MQM9700/U1"), Hca(HOST, 1, f"node01 {DEVICE}")],
    [Cable(HOST, 1, "leaf07", 21)],
)


def _time(argv, env) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, capture_output=True, check=False, timeout=30)
    return time.perf_counter() - started


def tools(runs: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp, Fabric(os.path.join(tmp, "f"), TOPOLOGY) as fabric:
        shims = fabric.shim_dir(os.path.join(tmp, "bin"), {DEVICE: HOST},
                                tools=("perfquery", "smpquery"))  # fmt: skip
        env = dict(os.environ, PATH=f"{shims}{os.pathsep}{os.environ.get('PATH', '')}")
        port0 = subprocess.run(
            ["smpquery", "-C", DEVICE, "-P", "1", "-D", "portinfo", "0,1", "0"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        lid = re.search(r"^Lid:\.*(\d+)$", port0, re.M).group(1)  # the switch's
        far = ["perfquery", "-C", DEVICE, "-P", "1", "-t", "125"]
        cases = {
            "local -x": ["perfquery", "-x", "-C", DEVICE, "-P", "1"],
            "local -T": ["perfquery", "-T", "-C", DEVICE, "-P", "1"],
            "far -x": [*far, "-x", lid, "21"],
            "far -T": [*far, "-T", lid, "21"],
        }
        samples = {name: [] for name in cases}
        for _ in range(runs):
            for name, argv in cases.items():
                samples[name].append(_time(argv, env))
    return {name: statistics.median(values) for name, values in samples.items()}


def grading(runs: int, ports: int = 64) -> float:
    from snapshots import builtin_registry, device, port, snapshot

    from ibdiag.families.perfquery_fec import parse_fec
    from ibdiag.grade import run_check
    from ibdiag.thresholds import Thresholds

    with open(os.path.join(REPO, "tests", "captures", "perfquery-T",
                           "handmade-T-rs-fec-hdr-switch-port21.txt")) as handle:  # fmt: skip
        reading = parse_fec(handle.read())
    devices = [
        device(f"mlx5_{n}", ports=[port(1).model_copy(update={"facts": {"fec": reading}})])
        for n in range(ports)
    ]
    snap = snapshot(devices)
    spec = builtin_registry().get("phy.fec")
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        run_check(spec, snap, Thresholds(), baseline=snap)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="timed runs of each case")
    args = parser.parse_args()
    for name, seconds in tools(args.runs).items():
        print(f"{name:10s} median {seconds * 1000:7.1f} ms per tool run")
    print(f"phy.fec grading, 64 ports with a baseline: median {grading(args.runs) * 1000:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
