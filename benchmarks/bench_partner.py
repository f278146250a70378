#!/usr/bin/env python3
"""What reading the far end of every cable costs a level-standard run: 8 ports, with and without.

Level standard reads the far end of each ACTIVE InfiniBand port (``ibdiag.families.partner``:
a chain of smpquery/perfquery runs per port over the direct route 0,1) alongside the node's own
commands. Issue 14's target: those chains run concurrently with the rest, so they add at most
30% to the run's wall time.

This script runs the real infiniband-diags tools against simulated fabrics (tests/fabric_sim.py:
Debian's ibsim + opensm). ibsim attaches at most 10 clients at once and one standard run starts
3 perfquery runs per port plus up to 3 tools of its far-end chain at once, so the HCAs are spread
over several fabrics (``--per-fabric``, default 1: 8 fabrics for 8 HCAs, each a leaf switch of
its own with an opensm); one PATH of dispatching shims (``fabric_sim.dispatch_shims``) sends
each tool run to the fabric of the device it names (``-C mlx5_N``). The node is a generated
sysfs tree of ``--hcas`` ConnectX-6 HCAs, one ACTIVE InfiniBand port each at 4X QDR (the
simulator's links), and this machine's /proc. Tree and fabrics live under ``--tmp`` (default
/dev/shm: umad2sim writes and removes a sysfs tree of its own there for every tool run, which on
a disk costs several times the CPU a tool run costs on tmpfs).

There is no command-line switch that leaves the far end out; the two variants differ only in
the ``needs`` of the collection: level standard's (``Pipeline.needs``, what its checks declare)
and the same less ``partner``. Same shims, tools, tree and grading. Two ways, all four
alternating round-robin (the first of each round rotates):

    in-process  ibdiag.collect.collect + ibdiag.grade.grade in this process (no start-up)
    cli         python -c WRAPPER {with|without} check --level standard --sysfs TREE, text to
                /dev/null: the wrapper patches Pipeline.__init__ to drop ``partner`` from the
                needs for "without" (both variants run the same wrapper), then calls ibdiag's
                entry point - a whole ``ibdiag check`` process, interpreter start-up included

Reported per variant: median, p90 and min wall time and the ratio of medians (the target is on
that ratio). In process, also the CPU seconds each run cost (every tool run with its shims, the
fabrics' ibsim and opensm, ibdiag itself) and how busy that kept the usable CPUs: concurrency
hides waiting, not work, so where the CPUs are saturated the wall time follows the CPU time.

Every run is verified (the CLI's through a few facts its wrapper writes after the collection):
with the far end, every port's ``partner.counters`` must have been read (else the figure would
time a chain that stopped early), and the node's own ``perfquery -x`` and ``-E`` runs must have
succeeded in both variants (a "sim_init: connect failed" would make a run cheaper; ``-X``,
PortXmitDataSL, is not simulated and fails in both - at once, but for the very first on a fresh
fabric, which waits a MAD timeout: the warm-up round takes it). The script exits 1 naming what
went wrong.

    python benchmarks/bench_partner.py                   # 8 HCAs, 9 runs of each
    python benchmarks/bench_partner.py --runs 15 --json benchmarks/results/partner.json

Needs ibsim-utils, opensm and infiniband-diags (Debian); runs as any user.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import inspect
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [REPO, HERE, os.path.join(REPO, "tests")]

from bench_quick import child_env, percentile, spawn  # noqa: E402
from fabric_sim import Cable, Fabric, Hca, Switch, Topology, dispatch_shims  # noqa: E402
from sysfs_builder import mlx5_node, write_node  # noqa: E402

TARGET_RATIO = 1.30
TOOLS = ("smpquery", "perfquery")
PACKAGES = ("ibsim-utils", "opensm", "infiniband-diags")
# The node's own perfquery runs that must succeed (-X is not simulated: module doc).
OWN_STEPS = ("perfquery-x", "perfquery-E")
FACTS_VARIABLE = "IBDIAG_BENCH_PARTNER_FACTS"
VARIANTS = ("with", "without")


def snapshot_facts(snap) -> dict:
    """What ``verify`` needs of a Snapshot, as JSON-able data (the CLI's wrapper writes it)."""
    ports = {}
    for dev in snap.devices:
        for port in dev.ports:
            partner = port.partner
            ports[f"{dev.name}:{port.number}"] = {
                "partner": partner is not None,
                "counters": partner is not None and partner.counters is not None,
            }
    runs = {str(run.role): run.failure() for run in snap.commands.values() if run.role}
    started = sum(1 for run in snap.commands.values() if not run.skipped)
    return {"ports": ports, "failures": runs, "commands": started}


WRAPPER = f"""
import json, os, sys
{inspect.getsource(snapshot_facts)}
variant = sys.argv.pop(1)
from ibdiag import pipeline
_init, _collect = pipeline.Pipeline.__init__, pipeline.Pipeline.collect
def _patched_init(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    if variant == "without":
        self.needs = frozenset(self.needs - {{"partner"}})
def _recording_collect(self, *args, **kwargs):
    snap = _collect(self, *args, **kwargs)
    with open(os.environ["{FACTS_VARIABLE}"], "w") as out:
        json.dump(snapshot_facts(snap), out)
    return snap
pipeline.Pipeline.__init__ = _patched_init
pipeline.Pipeline.collect = _recording_collect
from ibdiag.entry import main
sys.argv[0] = "ibdiag"
main()
"""


def verify(facts: dict, devices: Sequence[str], with_partner: bool) -> List[str]:
    """What makes this run's figure meaningless (empty: nothing)."""
    problems = []
    ports = facts["ports"]
    if sorted(ports) != sorted(f"{dev}:1" for dev in devices):
        problems.append(f"ports read: {sorted(ports)}")
    for target, port in sorted(ports.items()):
        for step in OWN_STEPS:
            role = f"{step} {target}"
            if role not in facts["failures"] or facts["failures"][role] is not None:
                problems.append(f"{role}: {facts['failures'].get(role, 'not run')}")
        if with_partner and not port["counters"]:
            why = facts["failures"].get(f"partner-nodeinfo {target}", "no nodeinfo run")
            problems.append(f"{target}: the far end's counters were not read (nodeinfo: {why})")
        if not with_partner and port["partner"]:
            problems.append(f"{target}: a far end was read without 'partner' in needs")
    return problems


def fabric_topologies(devices: Sequence[str], per_fabric: int) -> List[Topology]:
    """One leaf switch per ``per_fabric`` devices, device k's HCA on its port k + 1."""
    topologies = []
    for index, start in enumerate(range(0, len(devices), per_fabric)):
        leaf = f"leaf{index:02d}"
        group = devices[start : start + per_fabric]
        nodes = [Switch(leaf, 36, f"MF0;{leaf}:MQM9700/U1")]
        nodes += [Hca(f"node01-{dev}", 1, f"node01 {dev}") for dev in group]
        # Each fabric's leaf has the same GUID (ibsim numbers them alike), so each HCA takes
        # its own leaf port across fabrics: two ports claiming one far end are implausible.
        cables = [Cable(f"node01-{dev}", 1, leaf, port)
                  for port, dev in enumerate(group, start + 1)]  # fmt: skip
        topologies.append(Topology(nodes, cables))
    return topologies


def daemon_cpu_s(pids: Sequence[int]) -> float:
    """CPU seconds (user + system) the fabrics' ibsim and opensm processes have used so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = open(f"/proc/{pid}/stat", encoding="ascii").read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / ticks


def children_cpu_s() -> float:
    """CPU seconds of the waited-for children: every tool run (each shim execs the next)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_tool_run(path: str, device: str, times: int = 20) -> Dict[str, float]:
    """One simulated tool run alone (``smpquery nodeinfo 0,1`` through the dispatching shim,
    ``times`` runs one after another): its wall and CPU milliseconds (the shims, ibsim-run and
    the tool with umad2sim; ibsim's own share is not in it)."""
    argv = [os.path.join(path, "smpquery"), "-C", device, "-P", "1", "-t", "200"]
    argv += ["-D", "nodeinfo", "0,1"]
    before = children_cpu_s()
    begin = time.perf_counter()
    for _ in range(times):
        subprocess.run(argv, capture_output=True, check=True)
    wall = time.perf_counter() - begin
    return {"wall_ms": wall * 1000 / times, "cpu_ms": (children_cpu_s() - before) * 1000 / times}


def default_tmp() -> Optional[str]:
    """/dev/shm when it is a writable directory (tmpfs: umad2sim's trees cost no disk I/O)."""
    return "/dev/shm" if os.access("/dev/shm", os.W_OK | os.X_OK) else None


def machine() -> Dict[str, object]:
    versions = {}
    for package in PACKAGES:
        done = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Version}", package],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        versions[package] = done.stdout.strip() or "?"
    model = "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "python": platform.python_version(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "cpu": model,
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "load_before": os.getloadavg(),
        "packages": versions,
    }


class Bench:
    """The fabrics, the node and the two ways of timing a variant."""

    def __init__(self, tmp: str, devices: Sequence[str], per_fabric: int, stack) -> None:
        from ibdiag.pipeline import Pipeline, PipelineOptions

        self.devices = list(devices)
        self.tree = os.path.join(tmp, "sys")
        write_node(self.tree, mlx5_node(len(devices), port=dict(rate="40 Gb/sec (4X QDR)")))
        started = time.perf_counter()
        shims: Dict[str, str] = {}
        self.daemons: List[int] = []
        self.topologies = fabric_topologies(devices, per_fabric)
        for index, topology in enumerate(self.topologies):
            fabric = stack.enter_context(Fabric(os.path.join(tmp, f"fabric{index}"), topology))
            self.daemons += fabric.pids
            hosts = {node.name[len("node01-") :]: node.name
                     for node in topology.nodes if isinstance(node, Hca)}  # fmt: skip
            bin_dir = fabric.shim_dir(os.path.join(tmp, f"bin{index}"), hosts, tools=TOOLS)
            shims.update({device: str(bin_dir) for device in hosts})
        self.setup_s = time.perf_counter() - started
        self.path = str(dispatch_shims(os.path.join(tmp, "bin"), shims, tools=TOOLS))
        os.environ["PATH"] = f"{self.path}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
        self.facts_path = os.path.join(tmp, "facts.json")
        self.env = {**child_env(), FACTS_VARIABLE: self.facts_path}
        self.pipeline = Pipeline.prepare(PipelineOptions(level="standard"))
        self.needs = {"with": frozenset(self.pipeline.needs)}
        self.needs["without"] = self.needs["with"] - {"partner"}
        if "partner" not in self.needs["with"]:
            raise SystemExit("level standard does not read the far end here: nothing to measure")
        self.verdict = "?"
        self.commands: Dict[str, int] = {}

    def in_process(self, variant: str) -> Dict[str, float]:
        from ibdiag.collect import collect
        from ibdiag.grade import grade

        th = self.pipeline.thresholds
        before = (children_cpu_s(), daemon_cpu_s(self.daemons), time.process_time())
        begin = time.perf_counter()
        snap = collect(self.tree, "/proc", self.needs[variant], {}, thresholds=th)
        report = grade(snap, self.pipeline.registry, th, "standard")
        wall = time.perf_counter() - begin
        after = (children_cpu_s(), daemon_cpu_s(self.daemons), time.process_time())
        tools, fabrics, ibdiag = (b - a for a, b in zip(before, after))
        self.verdict = report.verdict.value
        self._verify(f"in-process {variant}", snapshot_facts(snap), variant)
        return {"wall_s": wall, "cpu_s": tools + fabrics + ibdiag, "tools_cpu_s": tools,
                "fabrics_cpu_s": fabrics, "ibdiag_cpu_s": ibdiag}  # fmt: skip

    def cli(self, variant: str) -> Dict[str, float]:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.facts_path)
        argv = [sys.executable, "-c", WRAPPER, variant, "check", "--level", "standard"]
        sample = spawn([*argv, "--sysfs", self.tree], self.env)
        if sample["exit"] not in (0, 1, 2):
            raise SystemExit(f"cli {variant} exited {sample['exit']}: {' '.join(argv[3:])}")
        with open(self.facts_path, encoding="utf-8") as facts:
            self._verify(f"cli {variant}", json.load(facts), variant)
        return {"wall_s": sample["wall_s"], "maxrss_kb": sample["maxrss_kb"]}

    def _verify(self, what: str, facts: dict, variant: str) -> None:
        problems = verify(facts, self.devices, variant == "with")
        if problems:
            raise SystemExit(f"{what}: not a fair figure:\n  " + "\n  ".join(problems))
        self.commands[variant] = facts["commands"]


def summarise(samples: List[Dict[str, float]], cpus: int) -> Dict[str, float]:
    walls = [s["wall_s"] for s in samples]
    summary = {
        "median_s": statistics.median(walls),
        "p90_s": percentile(walls, 0.9),
        "min_s": min(walls),
    }
    if "cpu_s" in samples[0]:
        for part in ("cpu", "tools_cpu", "fabrics_cpu", "ibdiag_cpu"):
            summary[f"{part}_median_s"] = statistics.median(s[f"{part}_s"] for s in samples)
        summary["busy"] = statistics.median(s["cpu_s"] / s["wall_s"] for s in samples) / cpus
    return summary


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9, help="timed runs of each case")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    parser.add_argument("--hcas", type=int, default=8, help="HCAs (one ACTIVE IB port each)")
    parser.add_argument(
        "--per-fabric", type=int, default=1, metavar="N",
        help="HCAs per simulated fabric (ibsim's 10 clients: 1 is safe, 2 may be refused)",
    )  # fmt: skip
    parser.add_argument(
        "--tmp", metavar="DIR", default=default_tmp(),
        help="where the tree and the fabrics live; umad2sim writes a sysfs tree there per tool "
        "run (default: /dev/shm, a tmpfs, when writable)",
    )  # fmt: skip
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.hcas < 1 or args.per_fabric < 1 or args.warmup < 0:
        parser.error("--runs, --hcas and --per-fabric must be at least 1, --warmup not negative")

    info = machine()
    cpus = int(info["cpus_usable"])
    devices = [f"mlx5_{index}" for index in range(args.hcas)]
    cases = [(way, variant) for way in ("in-process", "cli") for variant in VARIANTS]
    samples: Dict[str, List[Dict[str, float]]] = {f"{w} {v}": [] for w, v in cases}
    os.chdir(REPO)  # the CLI's children import this checkout's ibdiag
    with tempfile.TemporaryDirectory(prefix="ibdiag-bench-partner-", dir=args.tmp) as tmp:
        with contextlib.ExitStack() as stack:
            bench = Bench(tmp, devices, args.per_fabric, stack)
            alone = one_tool_run(bench.path, devices[0])
            for round_index in range(args.warmup + args.runs):
                shift = round_index % len(cases)
                for way, variant in cases[shift:] + cases[:shift]:
                    time_it = bench.in_process if way == "in-process" else bench.cli
                    sample = time_it(variant)
                    if round_index >= args.warmup:
                        samples[f"{way} {variant}"].append(sample)
    info["load_after"] = os.getloadavg()
    summary = {name: summarise(rows, cpus) for name, rows in samples.items()}
    ratios = {}
    for way in ("in-process", "cli"):
        with_, without = summary[f"{way} with"], summary[f"{way} without"]
        ratios[way] = {"median": with_["median_s"] / without["median_s"],
                       "p90": with_["p90_s"] / without["p90_s"]}  # fmt: skip
    ratios["cpu"] = {"median": summary["in-process with"]["cpu_median_s"]
                     / summary["in-process without"]["cpu_median_s"]}  # fmt: skip

    print(f"python {info['python']} ({info['executable']}), {cpus} of {info['cpus']} CPUs usable: "
          f"{info['cpu']}")  # fmt: skip
    print(f"{info['platform']}; " + ", ".join(f"{k} {v}" for k, v in info["packages"].items()))
    print(
        f"{args.hcas} HCAs on {len(bench.topologies)} simulated fabrics ({args.per_fabric} per "
        f"fabric, set up in {bench.setup_s:.1f} s) under {args.tmp or tempfile.gettempdir()};"
    )
    print(f"{args.runs} runs of each case (+{args.warmup} warm-up rounds), round-robin")
    print(f"load average before {info['load_before'][0]:.2f}, after {info['load_after'][0]:.2f}")
    print(f"commands per run: with the far end {bench.commands['with']}, "
          f"without {bench.commands['without']}")  # fmt: skip
    print()
    print(f"{'case':<20} {'median s':>9} {'p90 s':>7} {'min s':>7} {'CPU s':>6} {'tools':>6} "
          f"{'fabrics':>8} {'ibdiag':>7} {'CPUs busy':>10}")  # fmt: skip
    for name, s in summary.items():
        line = f"{name:<20} {s['median_s']:>9.3f} {s['p90_s']:>7.3f} {s['min_s']:>7.3f}"
        if "busy" in s:
            line += (f" {s['cpu_median_s']:>6.2f} {s['tools_cpu_median_s']:>6.2f} "
                     f"{s['fabrics_cpu_median_s']:>8.2f} {s['ibdiag_cpu_median_s']:>7.2f} "
                     f"{s['busy']:>10.0%}")  # fmt: skip
        print(line)
    print("(CPU s, medians: tools - every tool run with its shims; fabrics - ibsim and opensm; "
          "ibdiag - this process. CPUs busy: CPU s / wall / usable CPUs)")  # fmt: skip
    print(f"one simulated tool run alone (smpquery nodeinfo, 20 in a row): "
          f"{alone['wall_ms']:.1f} ms wall, {alone['cpu_ms']:.1f} ms CPU")  # fmt: skip
    print()
    target = f"target <= {(TARGET_RATIO - 1) * 100:.0f}%"
    for way in ("in-process", "cli"):
        ratio = ratios[way]["median"]
        met = "met" if ratio <= TARGET_RATIO else "NOT met"
        print(f"{way:<10} with / without (medians): {ratio:.3f} (p90s: {ratios[way]['p90']:.3f});"
              f" the far end adds {(ratio - 1) * 100:+.0f}% ({target}: {met})")  # fmt: skip
    print(f"in-process CPU seconds with / without (medians): {ratios['cpu']['median']:.3f}")
    print(f"every run with the far end read all {args.hcas} ports' partner counters; "
          f"verdict of the last in-process run: {bench.verdict}")  # fmt: skip

    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        result = {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": info,
            "runs": args.runs,
            "warmup": args.warmup,
            "hcas": args.hcas,
            "fabrics": len(bench.topologies),
            "per_fabric": args.per_fabric,
            "tmp": args.tmp,
            "commands": bench.commands,
            "one_tool_run": alone,
            "summary": summary,
            "ratios": ratios,
            "target_ratio": TARGET_RATIO,
            "samples": samples,
        }
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(result, out, indent=2)
            out.write("\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
