#!/usr/bin/env python3
"""End-to-end cost of `ibdiag check --level quick`, next to the floor of importing its libraries.

A Slurm prolog runs the quick check before every job, so its wall time is paid on every job
start. This script generates a healthy 8-HCA and 64-HCA mlx5 sysfs tree (tests/sysfs_builder.py),
then runs, as separate processes and round-robin so machine noise spreads evenly:

    floor      python -c "import click, pydantic"
    basemodel  python -c "import click; from pydantic import BaseModel"
    onemodel   the same, defining one model with a Field and validating it once: the least
               a click + pydantic tool that validates anything pays
    ibdiag-8   python -m ibdiag check --level quick --sysfs <8-HCA tree>
    ibdiag-64  python -m ibdiag check --level quick --sysfs <64-HCA tree>
    baseline-64  the same with --baseline <a snapshot of that tree> (counter deltas graded)
    history-8  (with --history) ibdiag-8 with --history <a store>: each run appends its sample
               and reads the 12 h window, as a prolog on a real node does with the default store

and reports median and p90 wall time and the child's peak RSS (ru_maxrss from wait4), plus the
ratios the project targets: ibdiag-8 / floor <= 1.5 and ibdiag-64 / ibdiag-8 < 2.0. It also
checks once (untimed) that the quick path imports neither jinja2, markupsafe nor sh.

    python benchmarks/bench_quick.py                  # 30 runs of each
    python benchmarks/bench_quick.py --runs 20 --json benchmarks/results/quick.json

Standard library only (plus the repository's tests/sysfs_builder.py); every run uses the
interpreter running this script, so run it from the venv ibdiag is installed in.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import textwrap
import time
from typing import Dict, List, Optional, Sequence

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
SOURCE = REPO  # the checkout whose ibdiag runs (--source): children run with it as cwd

from sysfs_builder import mlx5_node, write_node  # noqa: E402

# Modules that must stay out of the quick path (DESIGN: lazy imports for HTML and commands).
FORBIDDEN_TOP_LEVEL = ("jinja2", "markupsafe", "sh")
FORBIDDEN_IBDIAG = (
    "ibdiag.render.html",
    "ibdiag.runner.command_runner",
    "ibdiag.bundle",
    "ibdiag.bundle.write",
    "ibdiag.bundle.opener",
    "ibdiag.bundle.replay",
)

TARGET_FLOOR_RATIO = 1.5
TARGET_SCALE_RATIO = 2.0

ONE_MODEL = (
    "import click\nfrom pydantic import BaseModel, Field\n"
    "class M(BaseModel):\n    x: int = Field(default=0, ge=0)\nM(x=1)\n"
)

IMPORT_PROBE = textwrap.dedent(
    """
    import contextlib, io, json, sys
    sys.argv = ["ibdiag", "check", "--level", "quick", "--sysfs", sys.argv[1]]
    from ibdiag.entry import main  # what `ibdiag` and `python -m ibdiag` run
    code = None
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            main()
        except SystemExit as exc:
            code = exc.code
    print(json.dumps({"exit": code, "modules": sorted(sys.modules)}))
    """
)


PKEY_TABLE = ("0xffff",) + ("0x0000",) * 127


def build_tree(root: str, count: int) -> str:
    """A healthy node of ``count`` ConnectX-6 HCAs; returns the directory that plays /sys.
    Each port's partition table has the 128 slots an mlx5 InfiniBand port lists (the default
    key, then empty ones), as the quick check reads every slot."""
    hcas = mlx5_node(count, port=dict(pkeys=PKEY_TABLE))
    sys_root = os.path.join(root, f"hca{count}", "sys")
    write_node(sys_root, hcas)
    return sys_root


def take_snapshot(root: str, tree: str, env: Dict[str, str]) -> str:
    """An ``ibdiag snapshot`` of ``tree``, the baseline the baseline-64 case compares with."""
    import subprocess

    path = os.path.join(root, "baseline.json")
    subprocess.run(
        [sys.executable, "-m", "ibdiag", "snapshot", "--sysfs", tree, "-o", path],
        cwd=SOURCE, env=env, check=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return path


def child_env() -> Dict[str, str]:
    env = dict(os.environ)
    # An installed ibdiag has its bytecode compiled; without this a dev shell that sets
    # PYTHONDONTWRITEBYTECODE would recompile every module on every run and skew the numbers.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    return env


def spawn(argv: Sequence[str], env: Dict[str, str]) -> Dict[str, float]:
    """Run once with stdout/stderr to /dev/null: wall seconds, exit code, the child's peak RSS."""
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
    ]
    start = time.perf_counter()
    pid = os.posix_spawn(argv[0], list(argv), env, file_actions=actions)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    return {
        "wall_s": wall,
        "exit": os.waitstatus_to_exitcode(status),
        "maxrss_kb": usage.ru_maxrss,  # kilobytes on Linux
        "cpu_s": usage.ru_utime + usage.ru_stime,  # less disturbed than wall by a busy machine
    }


def percentile(values: Sequence[float], fraction: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), for small samples."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    position = (len(ordered) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _python_json(code: str, args: Sequence[str], env: Dict[str, str]) -> dict:
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=SOURCE,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"import probe failed (exit {proc.returncode}):\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def probe_imports(tree: str, env: Dict[str, str]) -> Dict[str, object]:
    """What a quick run imports (untimed, in-process): forbidden modules, and beyond the floor."""
    data = _python_json(IMPORT_PROBE, [tree], env)
    modules: List[str] = data["modules"]
    floor_code = (
        "import click, pydantic, json, sys; print(json.dumps({'modules': list(sys.modules)}))"
    )
    floor = set(_python_json(floor_code, [], env)["modules"])
    beyond_floor = sorted(
        {m.split(".")[0] for m in modules if m not in floor and m.split(".")[0] != "ibdiag"}
    )
    forbidden = sorted(
        m
        for m in modules
        if m.split(".")[0] in FORBIDDEN_TOP_LEVEL
        or any(m == name or m.startswith(name + ".") for name in FORBIDDEN_IBDIAG)
    )
    return {
        "exit": data["exit"],
        "module_count": len(modules),
        "forbidden": forbidden,
        "ibdiag_modules": [m for m in modules if m == "ibdiag" or m.startswith("ibdiag.")],
        "subprocess_imported": "subprocess" in modules,
        "subprocess_in_floor": "subprocess" in floor,
        "beyond_floor": beyond_floor,  # top-level names imported beyond the floor, not ibdiag's
    }


def verdict_of(argv: Sequence[str], env: Dict[str, str]) -> str:
    import subprocess

    proc = subprocess.run(
        list(argv), cwd=SOURCE, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode not in (0, 1, 2) or not lines:
        raise SystemExit(
            f"{' '.join(argv)} exited {proc.returncode} without a verdict:\n"
            f"{proc.stdout}\n{proc.stderr}"
        )
    return lines[-1]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="timed runs of each command")
    parser.add_argument("--warmup", type=int, default=2, help="untimed rounds first")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument(
        "--source", default=REPO, help="checkout whose ibdiag/ runs (e.g. a git archive of main)"
    )
    parser.add_argument(
        "--history",
        action="store_true",
        help="also time history-8: the 8-HCA check with a history store (issue 23)",
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    global SOURCE
    SOURCE = os.path.abspath(args.source)
    if args.json:
        args.json = os.path.abspath(args.json)  # the runs chdir to SOURCE

    env = child_env()
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="ibdiag-bench-") as tmp:
        tree8 = build_tree(tmp, 8)
        tree64 = build_tree(tmp, 64)
        cases = {
            "floor": [py, "-c", "import click, pydantic"],
            "basemodel": [py, "-c", "import click; from pydantic import BaseModel"],
            "onemodel": [py, "-c", ONE_MODEL],
            "ibdiag-8": [py, "-m", "ibdiag", "check", "--level", "quick", "--sysfs", tree8],
            "ibdiag-64": [py, "-m", "ibdiag", "check", "--level", "quick", "--sysfs", tree64],
            "baseline-64": [
                *(py, "-m", "ibdiag", "check", "--level", "quick", "--sysfs", tree64),
                *("--baseline", take_snapshot(tmp, tree64, env)),
            ],
        }
        if args.history:
            store = os.path.join(tmp, "history.db")
            cases["history-8"] = [*cases["ibdiag-8"], "--history", store]
        verdicts = {
            name: verdict_of(cmd, env) for name, cmd in cases.items() if name.startswith("ibdiag")
        }
        imports = probe_imports(tree8, env)

        os.chdir(SOURCE)  # `python -m ibdiag` finds the checkout even when it is not installed
        names = list(cases)
        samples: Dict[str, List[Dict[str, float]]] = {name: [] for name in names}
        for round_index in range(args.warmup + args.runs):
            shift = round_index % len(names)  # rotate who goes first, too
            for name in names[shift:] + names[:shift]:
                sample = spawn(cases[name], env)
                if sample["exit"] not in (0, 1, 2):
                    raise SystemExit(f"{name} exited {sample['exit']}: {' '.join(cases[name])}")
                if round_index >= args.warmup:
                    samples[name].append(sample)

    summary = {}
    for name in names:
        walls = [s["wall_s"] for s in samples[name]]
        rss = [s["maxrss_kb"] for s in samples[name]]
        cpus = [s["cpu_s"] for s in samples[name]]
        summary[name] = {
            "median_ms": statistics.median(walls) * 1000,
            "cpu_median_ms": statistics.median(cpus) * 1000,
            "p90_ms": percentile(walls, 0.9) * 1000,
            "min_ms": min(walls) * 1000,
            "peak_rss_mb": max(rss) / 1024,
            "median_rss_mb": statistics.median(rss) / 1024,
        }
    med = {name: summary[name]["median_ms"] for name in names}
    cpu = {name: summary[name]["cpu_median_ms"] for name in names}
    ratios = {
        "ibdiag-8 / floor": med["ibdiag-8"] / med["floor"],
        "ibdiag-64 / ibdiag-8": med["ibdiag-64"] / med["ibdiag-8"],
        "ibdiag-8 / basemodel": med["ibdiag-8"] / med["basemodel"],
        "onemodel / floor": med["onemodel"] / med["floor"],
        "baseline-64 / ibdiag-64": med["baseline-64"] / med["ibdiag-64"],
        "cpu: ibdiag-8 / floor": cpu["ibdiag-8"] / cpu["floor"],
        "cpu: ibdiag-64 / ibdiag-8": cpu["ibdiag-64"] / cpu["ibdiag-8"],
    }
    if "history-8" in med:
        ratios["history-8 / ibdiag-8"] = med["history-8"] / med["ibdiag-8"]
        ratios["cpu: history-8 / ibdiag-8"] = cpu["history-8"] / cpu["ibdiag-8"]
    targets = {
        "ibdiag-8 / floor": ("<=", TARGET_FLOOR_RATIO),
        "ibdiag-64 / ibdiag-8": ("<", TARGET_SCALE_RATIO),
    }

    print(f"python {platform.python_version()} ({py}), {os.cpu_count()} CPUs, ", end="")
    print(f"{args.runs} runs each (+{args.warmup} warm-up rounds), round-robin")
    print()
    print(
        f"{'command':<12} {'median ms':>10} {'p90 ms':>8} {'min ms':>8} {'cpu ms':>7} "
        f"{'peak RSS MB':>12}"
    )
    for name in names:
        s = summary[name]
        print(
            f"{name:<12} {s['median_ms']:>10.1f} {s['p90_ms']:>8.1f} {s['min_ms']:>8.1f} "
            f"{s['cpu_median_ms']:>7.1f} {s['peak_rss_mb']:>12.1f}"
        )
    print()
    for label, value in ratios.items():
        if label in targets:
            op, limit = targets[label]
            met = value <= limit if op == "<=" else value < limit
            goal = f"target {op} {limit}: {'met' if met else 'NOT met'}"
        elif "history" in label:
            goal = "cost of appending the sample and reading the window (the history store)"
        elif label.startswith("baseline"):
            goal = "cost of loading and grading against a 64-HCA baseline"
        elif label.startswith("onemodel"):
            goal = "what any click + pydantic tool that validates a model pays"
        elif label.startswith("cpu"):
            goal = "the same in CPU time (user + system): steadier on a shared machine"
        else:
            goal = "pydantic model machinery included in the reference"
        print(f"{label:<26} {value:5.2f}   ({goal})")
    per_hca = (med["ibdiag-64"] - med["ibdiag-8"]) / 56
    print(f"{'cost per extra HCA':<26} {per_hca:5.2f} ms")
    print()
    for name, line in verdicts.items():
        print(f"{name}: {line}")
    forbidden = imports["forbidden"]
    print(
        f"quick path imports: {imports['module_count']} modules; "
        f"jinja2/markupsafe/sh/HTML/commands: {', '.join(forbidden) if forbidden else 'none'}; "
        f"subprocess: {'yes' if imports['subprocess_imported'] else 'no'}"
        f"{' (the floor imports it too)' if imports['subprocess_in_floor'] else ''}"
    )
    print(f"imported beyond the floor, besides ibdiag: {', '.join(imports['beyond_floor'])}")

    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        result = {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "python": platform.python_version(),
            "executable": py,
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "runs": args.runs,
            "warmup": args.warmup,
            "source": SOURCE,
            "commands": {name: cases[name][1:] for name in names},
            "summary": summary,
            "ratios": ratios,
            "verdicts": verdicts,
            "imports": imports,
            "samples": samples,
        }
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(result, out, indent=2)
            out.write("\n")
        print(f"wrote {args.json}")
    return 1 if forbidden else 0


if __name__ == "__main__":
    sys.exit(main())
