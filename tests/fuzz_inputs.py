"""Hostile site configurations and drop-in check directories, generated from a seed.

Shared by tests/sources/test_fuzz_inputs.py (a bounded, seeded run in CI) and
benchmarks/fuzz_inputs.py (the long run). Each case is a site config file and a drop-in
directory, written into a fresh directory; ``run_case`` runs a real
``python -m ibdiag check --json`` over a healthy captured node with them and ``Tally``
counts what must never happen:

- a traceback on stderr, or a hang (no exit within the time limit);
- an exit code outside the Nagios 0-3;
- stdout that is not one valid JSON report when ibdiag graded (exit 0-2), or not empty when it
  refused (exit 3);
- a refusal (exit 3 with nothing on stdout) whose stderr is not one ``ibdiag:`` line, last
  (what a drop-in printed at import comes before it).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TESTS_DIR)
GOOD = os.path.join(TESTS_DIR, "scenarios", "gcm-8xCX6-HDR-good", "root", "sys")
TIME_LIMIT_S = 60.0

_KEYS = [
    "profile", "expect_hcas", "expect_hca_names", "expect_rate_gbps", "ignore_hcas",
    "ignore_ethernet", "expect_ipoib_mtu", "perftest_size", "nccl_tests", "nccl_launcher",
    "nccl_launcher_args", "straggler_fraction", "no_such_key", "counters",
]  # fmt: skip
_VALUES = [
    "8", "-1", "0", "1e308", "inf", "nan", "100000000000000000000000000", '"8"', '""', "true",
    "[]", '["mlx5_*"]', "[1, 2]", '"../../etc/passwd"', '"azure-ndv5"', '"/dev/zero"',
    "{}", "{ a = 1 }", '"\\u0000"', '"' + "x" * 5000 + '"', "1979-05-27T07:32:00Z",
    '"mlx5_0\\nIBDIAG OK"', '"\\u001b]0;x\\u0007"',
]  # fmt: skip


def _config(rng: random.Random) -> bytes:
    kind = rng.randrange(10)
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))  # binary junk
    if kind == 1:
        return b"[a]\n" * rng.randrange(1, 3) + b"x = [" * rng.randrange(1, 3000)  # deep / dup
    if kind == 2:
        return b""
    if kind == 3:
        name = rng.choice(["symbol_error", "link_downed", "no_such_counter", "x" * 300])
        field_ = rng.choice(["on_increase", "rate_fail_per_hour", "lifetime_limit", "bogus"])
        return f"[counters.{name}]\n{field_} = {rng.choice(_VALUES)}\n".encode()
    lines = [f"{rng.choice(_KEYS)} = {rng.choice(_VALUES)}" for _ in range(rng.randrange(1, 6))]
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")


_DROPIN_HEADER = (
    "import sys\nfrom ibdiag.model import Result, Status\nfrom ibdiag.registry import check\n"
)


def _check(check_id: str, signature: str, body: str) -> str:
    return (
        _DROPIN_HEADER
        + textwrap.dedent(
            f'''
        @check("{check_id}", title="fuzzed", needs={{"sysfs"}}, level="quick")
        def fuzzed({signature}):
            """Healthy: fuzzed."""
        '''
        )
        + textwrap.indent(textwrap.dedent(body), "    ")
    )


_BODIES = [
    "yield Result(target='node', status=Status.PASS, message='ok')\n",
    "raise RuntimeError('boom')\n",
    "sys.exit(7)\n",
    "raise GeneratorExit\n",
    "raise SystemExit('bye')\n",
    "return [1, 2, 3]\n",
    "print('x' * 100000)\nyield Result(target='node', status=Status.WARN, message='w')\n",
    "yield Result(target='node\\nIBDIAG OK', status=Status.FAIL, message='\\x1b[2J forged')\n",
    "return None\n",
    "yield from (Result(target=f'n{i}', status=Status.PASS, message='m') for i in range(5000))\n",
]
_AT_IMPORT = [
    "",
    "sys.exit(42)\n",
    "raise GeneratorExit\n",
    "import no_such_module_zz\n",
    "print('printed at import')\n",
    "def broken(:\n",
    "raise KeyboardInterrupt\n",
]


def _dropins(rng: random.Random, directory: Path) -> None:
    for index in range(rng.randrange(0, 4)):
        check_id = rng.choice(["site.a", "site.b", "Bad Id", "site.a", "link.state", "x"])
        signature = rng.choice(["snap, th", "snap", "snap, th, baseline", "*args", "", "**kw"])
        source = _check(check_id, signature, rng.choice(_BODIES)) + rng.choice(_AT_IMPORT)
        name = rng.choice([f"site{index}.py", f"_helper{index}.py", f"site{index}.txt"])
        if rng.random() < 0.1:
            (directory / name).mkdir(exist_ok=True)  # a directory named like a module
        elif rng.random() < 0.1:
            (directory / name).write_bytes(b"\xff\xfe\x00junk")
        else:
            (directory / name).write_text(source)


@dataclass
class Case:
    seed: int
    config: Path
    dropins: Path


def make_case(root: Path, seed: int) -> Case:
    rng = random.Random(seed)  # noqa: S311 - reproducible test cases, not secrets
    case_dir = root / f"case-{seed}"
    dropins = case_dir / "checks.d"
    dropins.mkdir(parents=True)
    config = case_dir / "ibdiag.toml"
    if seed % 2:  # a hostile config (the drop-ins would not be reached: a config error is first)
        config.write_bytes(_config(rng))
    else:  # hostile drop-ins under a valid, empty config
        config.write_bytes(b"")
        _dropins(rng, dropins)
    return Case(seed, config, dropins)


ZERO_KINDS = (
    "tracebacks",
    "hangs",
    "exit codes outside 0-3",
    "invalid JSON",
    "refusals not one line",
)


@dataclass
class Tally:
    cases: int = 0
    exit_codes: Dict[int, int] = field(default_factory=dict)
    bad: Dict[str, List[Tuple[int, str]]] = field(
        default_factory=lambda: {kind: [] for kind in ZERO_KINDS}
    )

    def zero_counts(self) -> Dict[str, int]:
        return {kind: len(found) for kind, found in self.bad.items()}

    def summary(self) -> str:
        counts = ", ".join(f"{kind}: {n}" for kind, n in self.zero_counts().items())
        codes = ", ".join(f"{code}: {n}" for code, n in sorted(self.exit_codes.items()))
        return f"{self.cases} cases (exit codes {codes}); {counts}"


def run_case(case: Case, tally: Tally) -> None:
    argv = [sys.executable, "-m", "ibdiag", "check", "--json", "--sysfs", GOOD, "--config",
            str(case.config), "--checks-dir", str(case.dropins)]  # fmt: skip
    env = {key: value for key, value in os.environ.items() if key != "IBDIAG_DEBUG"}
    tally.cases += 1
    try:
        done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True,
                              errors="replace", timeout=TIME_LIMIT_S, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        tally.bad["hangs"].append((case.seed, f"no exit within {TIME_LIMIT_S:g} s"))
        return
    code = done.returncode
    tally.exit_codes[code] = tally.exit_codes.get(code, 0) + 1
    if "Traceback" in done.stderr:
        tally.bad["tracebacks"].append((case.seed, done.stderr[-300:]))
    if code not in (0, 1, 2, 3):
        tally.bad["exit codes outside 0-3"].append((case.seed, f"{code}: {done.stderr[-200:]}"))
        return
    if done.stdout:
        try:
            report = json.loads(done.stdout)
            assert isinstance(report, dict) and "verdict" in report
        except (ValueError, AssertionError):
            tally.bad["invalid JSON"].append((case.seed, done.stdout[:200]))
    elif code != 3:
        tally.bad["invalid JSON"].append((case.seed, f"exit {code} with nothing on stdout"))
    else:  # ibdiag's own lines: one, last (a drop-in may print to stderr before it)
        own = [line for line in done.stderr.splitlines() if line.startswith("ibdiag: ")]
        if len(own) != 1 or not done.stderr.endswith(own[0] + "\n"):
            tally.bad["refusals not one line"].append((case.seed, done.stderr[:300]))


def run(
    root: Path, seed: int, cases: int, progress: Optional[Callable[[str], None]] = None
) -> Tally:
    tally = Tally()
    started = time.monotonic()
    for offset in range(cases):
        run_case(make_case(root, seed + offset), tally)
        if progress and (offset + 1) % 50 == 0:
            progress(f"{offset + 1} cases, {time.monotonic() - started:.0f} s: {tally.summary()}")
    return tally
