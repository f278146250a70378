"""The tree fuzzer (tests/fuzz_trees.py), bounded and seeded, as CI runs it.

150 generated hostile trees - odd names, FIFOs, sockets and device nodes, symlinks out of the
tree, garbage values - each through ``check --level quick`` and ``check --level standard``
(stub tools on PATH), every third also through ``collect --tarball`` and ``report BUNDLE``
(every other one of those with ``--redact all``). Not one traceback, hang, exit code outside
0-3, invalid JSON, secret from outside the tree in any output or bundle, or process left behind.
The line it prints at the end is the one ``benchmarks/fuzz_trees.py`` prints for its long runs.

The harness is tested too: a generated case is the same every time, the catalogue of mutations
is all used, and each thing it counts is counted when it happens.
"""

from __future__ import annotations

import json
import os
import time

import fuzz_trees as F
import pytest

SEED = 12
CASES = 150
ROUND_TRIP_EVERY = 3


def test_hostile_trees_never_crash_hang_leak_or_leave_processes(capsys):
    summary = F.run(
        SEED, range(CASES), workers=2, case_timeout=60, round_trip_every=ROUND_TRIP_EVERY
    )
    with capsys.disabled():
        print(f"\n{summary.line()}")
    assert summary.cases == CASES
    assert summary.runs >= CASES * 2 + (CASES // ROUND_TRIP_EVERY) * 2
    assert summary.clean, f"{summary.line()}\n{summary.details()}"


def test_a_case_is_the_same_tree_every_time(tmp_path):
    first = F.make_case(SEED, 7, str(tmp_path))
    second = F.make_case(SEED, 7, str(tmp_path))
    assert first.mutations == second.mutations and first.secret == second.secret
    assert first.directory != second.directory
    assert _tree(first) == _tree(second)


def _tree(case):
    """Every entry of a case's sysfs and procfs: its kind and, for a link, its target."""
    found = {}
    for top in (case.sysfs, case.procfs):
        for directory, dirs, files in os.walk(os.fsencode(top)):
            for name in dirs + files:
                path = os.path.join(directory, name)
                rel = os.path.relpath(path, os.fsencode(case.directory))
                kind = os.lstat(path).st_mode >> 12
                found[rel] = (kind, os.readlink(path) if os.path.islink(path) else None)
    return {
        rel: (kind, target.replace(os.fsencode(case.directory), b"") if target else None)
        for rel, (kind, target) in found.items()
    }


def test_the_ci_cases_use_every_mutation(tmp_path):
    """150 cases draw each kind of hostility more than once (or the CI run would test less
    than its docstring says)."""
    import random

    drawn = {}
    for index in range(CASES):
        rng = random.Random(f"{SEED}:{index}")  # noqa: S311 - as make_case draws them
        rng.getrandbits(64)
        hcas = F._hcas(rng)
        del hcas
        for _ in range(rng.randint(1, 5)):
            mutation = rng.choice(F.MUTATIONS)
            drawn[mutation.__name__] = drawn.get(mutation.__name__, 0) + 1
    assert sorted(drawn) == sorted(m.__name__ for m in F.MUTATIONS)
    assert min(drawn.values()) >= 10, drawn


def test_every_mutation_applies_to_a_fresh_node(tmp_path, monkeypatch):
    """Each mutation, alone on a fresh node, changes the tree (none is a silent no-op)."""
    for mutation in F.MUTATIONS:
        monkeypatch.setattr(F, "MUTATIONS", (mutation,))
        case = F.make_case(SEED, 0, str(tmp_path))
        assert case.mutations and all("not applied" not in m for m in case.mutations), (
            mutation.__name__,
            case.mutations,
        )


@pytest.mark.parametrize(
    "run, counted",
    [
        ((3, "", "Traceback (most recent call last):\n  ..."), "tracebacks"),
        ((3, "", "ibdiag: internal error: ValueError: x"), "tracebacks"),
        ((7, "{}", ""), "exit codes outside 0-3"),
        ((2, "IBDIAG CRITICAL", ""), "invalid JSON"),
        ((0, json.dumps({"results": [{"message": "check crashed: KeyError"}]}), ""), "tracebacks"),
        ((2, json.dumps({"leak": "SECRET"}), ""), "files outside the tree in output or bundle"),
    ],
)
def test_the_harness_counts_what_must_never_happen(tmp_path, monkeypatch, run, counted):
    case = F.make_case(SEED, 1, str(tmp_path))
    code, stdout, stderr = run
    stdout = stdout.replace("SECRET", case.secret)
    monkeypatch.setattr(F, "_invoke", lambda args, path: (code, stdout, stderr))
    outcome = F.run_case(case, round_trip=False)
    assert outcome.counts[counted] >= 1, outcome
    assert outcome.failures


def test_the_harness_counts_a_secret_in_a_bundle(tmp_path):
    import tarfile

    secret = b"SECRET0123"
    inner = tmp_path / "root" / "fw_ver"
    inner.parent.mkdir()
    inner.write_bytes(b"x " + secret + b"\n")
    bundle = tmp_path / "b.tar.gz"
    with tarfile.open(bundle, "w:gz") as tar:
        tar.add(inner, arcname="ibdiag-x/root/sys/fw_ver")
    assert F._holds(str(bundle), secret)
    assert not F._holds(str(bundle), b"SECRET9999")


def test_the_harness_counts_a_hang_and_goes_on():
    summary = F.run(SEED, [0, 1], workers=1, case_timeout=0.05)
    assert summary.cases == 2
    assert summary.counts["hangs"] == 2, summary.line()


def test_the_harness_counts_a_process_left_behind(tmp_path, monkeypatch):
    import subprocess

    case = F.make_case(SEED, 1, str(tmp_path))
    monkeypatch.setattr(F, "_invoke", lambda args, path: (0, "{}", ""))
    script = os.path.join(case.directory, "stubs", "bin", "stray")  # as a stub left running
    with open(script, "w") as handle:
        handle.write("sleep 60\n")
    stray = subprocess.Popen(["sh", script])
    try:
        for _ in range(500):  # until it has exec'd (its command line names the case)
            if F.S.processes_with(case.directory):
                break
            time.sleep(0.01)
        outcome = F.run_case(case, round_trip=False)
    finally:
        stray.kill()
        stray.wait()
    assert outcome.counts["processes left"] >= 1, outcome
