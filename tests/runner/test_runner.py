"""The command runner against stub executables on a PATH of our own.

Each stub is a small /bin/sh script written into tmp_path: it prints a capture, hangs, ignores
SIGTERM, leaves a grandchild holding its stdout, fails, prints binary junk or too much. Every
case must end as data within its bounds - never a traceback, never a stray process.

Bounds are generous (a loaded 2-core CI machine) but each still separates "worked" from "waited
for the thing it should have killed".
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Dict, List

import pytest
from stubs import assert_no_strays, marker

from ibdiag.model import CommandRun, command_key
from ibdiag.runner import command_runner
from ibdiag.runner.command_runner import Runner

PERFQUERY_CAPTURE = """\
# Port extended counters: Lid 133 port 1 (CapMask: 0x5A00)
PortSelect:......................1
CounterSelect:...................0x0000
PortXmitData:....................1157823743925
PortRcvData:.....................1157850264829
PortXmitPkts:....................3262536283
PortRcvPkts:.....................3262604342
"""


def assert_round_trips(run: CommandRun) -> None:
    """Every run the runner records survives the JSON a snapshot or bundle is saved as."""
    again = CommandRun.model_validate_json(run.model_dump_json())
    assert again == run
    assert again.model_dump() == run.model_dump()


def test_prints_a_capture_and_passes_argv_verbatim(tmp_path, stubs, stub_path):
    capture = tmp_path / "capture.txt"
    capture.write_text(PERFQUERY_CAPTURE)
    stubs("perfquery", f"cat '{capture}'\n")
    stubs("show-args", "printf '<%s>\\n' \"$@\"\n")
    runner = Runner(path=stub_path)

    run = runner.run(["perfquery", "-x", "-C", "mlx5_0", "-P", "1"])
    assert run.rc == 0 and run.succeeded and run.failure() is None
    assert run.stdout == PERFQUERY_CAPTURE
    assert run.stderr == ""
    assert not (run.stdout_truncated or run.stderr_truncated or run.timed_out)
    assert not (run.not_found or run.permission_denied or run.skipped or run.error)
    assert 0 < run.duration_s < 5
    assert run.argv == ["perfquery", "-x", "-C", "mlx5_0", "-P", "1"]
    assert_round_trips(run)

    # No shell anywhere: metacharacters, spaces and empty arguments arrive as they were given.
    odd = ["a b", "$HOME", "; rm -rf /", "`id`", "'\"", "", "*"]
    run = runner.run(["show-args", *odd])
    assert run.rc == 0
    assert run.stdout == "".join(f"<{arg}>\n" for arg in odd)
    assert_round_trips(run)


def test_command_hanging_forever_is_killed_at_its_timeout(stubs, stub_path):
    mark = marker()
    stubs("hang", f"sleep {mark}\n")
    run = Runner(timeout_s=0.5, path=stub_path).run(["hang"])
    assert run.timed_out and run.rc is None
    assert 0.4 < run.duration_s < 3.0
    assert "timed out" in run.failure()
    assert_no_strays(mark)
    assert_round_trips(run)


def test_command_ignoring_sigterm_is_killed_with_its_children(stubs, stub_path):
    mark = marker()
    # The script and its child both ignore SIGTERM; the child also keeps stdout open.
    stubs("stubborn", f"trap '' TERM\necho started\nsleep {mark} &\nsleep {mark}\n")
    started = time.monotonic()
    run = Runner(timeout_s=0.5, path=stub_path).run(["stubborn"])
    assert time.monotonic() - started < 3.0
    assert run.timed_out and run.rc is None
    assert run.stdout == "started\n"  # what it printed before the kill is kept
    assert_no_strays(mark)
    assert_round_trips(run)


def test_grandchild_holding_stdout_does_not_keep_the_run_waiting(stubs, stub_path):
    mark = marker()
    stubs("leaves-grandchild", f"(sleep {mark} &) ; echo hi\n")
    run = Runner(timeout_s=30, path=stub_path).run(["leaves-grandchild"])
    assert run.rc == 0 and not run.timed_out
    assert run.stdout == "hi\n"
    # sh on its own would wait 2 s for the pipe's EOF, then leave the grandchild running.
    assert run.duration_s < 1.8
    assert_no_strays(mark)
    assert_round_trips(run)


def test_hanging_command_with_grandchild_holding_stdout_is_killed(stubs, stub_path):
    mark = marker()
    stubs("hang-both", f"(sleep {mark} &)\nsleep {mark}\n")
    run = Runner(timeout_s=0.5, path=stub_path).run(["hang-both"])
    assert run.timed_out and run.duration_s < 3.0
    assert_no_strays(mark)


def test_non_zero_exit_keeps_rc_and_both_outputs(stubs, stub_path):
    stubs("fails", "echo partial\necho 'ibwarn: MAD failure: no PMA' >&2\nexit 3\n")
    run = Runner(path=stub_path).run(["fails"])
    assert run.rc == 3 and not run.succeeded
    assert run.stdout == "partial\n"
    assert run.stderr == "ibwarn: MAD failure: no PMA\n"
    assert not (run.timed_out or run.not_found or run.permission_denied or run.error)
    assert run.failure() == "fails exited 3: ibwarn: MAD failure: no PMA"
    assert_round_trips(run)


def test_binary_junk_is_decoded_with_replacement(stubs, stub_path):
    stdout = "printf 'ok \\000\\377\\376 caf\\303\\251 \\200\\n'\n"
    stubs("junk", stdout + "printf '\\377err\\000' >&2\n")
    run = Runner(path=stub_path).run(["junk"])
    assert run.rc == 0
    assert run.stdout == "ok \x00\ufffd\ufffd caf\u00e9 \ufffd\n"
    assert run.stderr == "\ufffderr\x00"
    assert_round_trips(run)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_output_over_the_cap_keeps_the_tail_with_bounded_memory(stubs, stub_path):
    total = 50 * 1000 * 1000
    stubs(
        "floods",
        f"yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c {total}\n"
        "echo\necho TAIL-MARKER\n"
        "yes e | head -c 3000000 >&2\necho ERR-END >&2\n",
    )
    cap = 1 << 20
    runner = Runner(timeout_s=60, deadline_s=120, output_cap=cap, path=stub_path)

    # Sample the current RSS while the command runs: peak RSS (ru_maxrss) could be masked by
    # an earlier test's peak. Holding all 50 MB (as sh's own buffers would) shows as > 50 MB.
    samples: List[int] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            samples.append(_rss_bytes())
            time.sleep(0.005)

    baseline = _rss_bytes()
    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        run = runner.run(["floods"])
    finally:
        done.set()
        sampler.join()

    assert run.rc == 0 and not run.timed_out
    assert run.stdout_truncated and run.stderr_truncated
    assert run.stdout.endswith("\nTAIL-MARKER\n")
    assert run.stderr.endswith("e\nERR-END\n")
    assert len(run.stdout.encode()) <= cap and len(run.stderr.encode()) <= cap
    assert len(run.stdout.encode()) > cap - 100  # the whole tail, not a sliver of it
    # The tail starts on a whole line, not in the middle of one.
    assert run.stdout.startswith("0123456789abcdefghijklmnopqrstuvwxyz\n")
    assert max(samples) - baseline < 40 * 1000 * 1000, "the runner held the output in memory"
    assert_round_trips(run)


def test_small_cap_keeps_whole_lines_of_the_tail(stubs, stub_path):
    stubs("counts", "seq 1 1000\n")
    run = Runner(output_cap=100, path=stub_path).run(["counts"])
    assert run.stdout_truncated and not run.stderr_truncated
    lines = run.stdout.splitlines()
    assert lines[-1] == "1000"
    assert lines == [str(n) for n in range(1001 - len(lines), 1001)]
    assert len(run.stdout) <= 100
    run = Runner(output_cap=0, path=stub_path).run(["counts"])
    assert run.stdout == "" and run.stdout_truncated


def test_absent_binary_is_not_found(tmp_path, stub_path):
    runner = Runner(path=stub_path)
    run = runner.run(["ibdiag-test-absent-tool", "-x"])
    assert run.not_found and run.rc is None and not run.permission_denied
    assert run.failure() == "ibdiag-test-absent-tool is not installed (not found on PATH)"
    assert_round_trips(run)
    run = runner.run([str(tmp_path / "no" / "such" / "tool")])
    assert run.not_found
    assert_round_trips(run)


def test_non_executable_file_is_permission_denied(stubs, stub_path):
    path = stubs("not-executable", "echo should not run\n", mode=0o644)
    runner = Runner(path=stub_path)
    for argv in (["not-executable"], [path]):
        run = runner.run(argv)
        assert run.permission_denied and not run.not_found and run.rc is None
        assert run.failure() == f"{argv[0]}: permission denied"
        assert_round_trips(run)


def test_interpreter_not_executable_is_permission_denied(stubs, stub_path):
    interpreter = stubs("not-an-interpreter", "exit 0\n", mode=0o644)
    stubs("uses-it", "echo hi\n", shebang=f"#!{interpreter}\n")
    run = Runner(path=stub_path).run(["uses-it"])
    assert run.permission_denied and run.rc is None and not run.not_found
    assert_round_trips(run)


def test_bad_shebang_and_exec_format_error_are_errors(stubs, stub_path):
    stubs("bad-shebang", "echo hi\n", shebang="#!/nonexistent/ibdiag-interpreter\n")
    stubs("no-shebang", "echo hi\n", shebang="")
    stubs("junk-binary", "\x7fELF\x01\x01garbage", shebang="")
    runner = Runner(path=stub_path)

    run = runner.run(["bad-shebang"])
    assert run.error and "No such file or directory" in run.error
    assert not (run.not_found or run.permission_denied) and run.rc is None
    assert "\n" not in run.error
    assert_round_trips(run)

    for name in ("no-shebang", "junk-binary"):
        run = runner.run([name])
        assert run.error and "Exec format error" in run.error, run
        assert not (run.not_found or run.permission_denied) and run.rc is None
        assert run.failure() == f"{name}: {run.error}"
        assert_round_trips(run)


def test_environment_is_c_locale_with_our_path_and_stdin_is_dev_null(stubs, stub_path):
    stubs("show-env", "env\n")
    stubs("show-stdin", "readlink /proc/$$/fd/0\ncat\necho done\n")
    runner = Runner(path=stub_path)
    run = runner.run(["show-env"])
    env = dict(line.split("=", 1) for line in run.stdout.splitlines() if "=" in line)
    assert env["LC_ALL"] == "C" and env["LANG"] == "C"
    assert env["PATH"] == stub_path
    assert_round_trips(run)

    run = runner.run(["show-stdin"])  # `cat` of stdin ends at once: it is /dev/null
    assert run.rc == 0 and run.stdout == "/dev/null\ndone\n"


def test_path_defaults_to_the_process_path(monkeypatch, stubs, stub_path):
    stubs("on-default-path", "echo found\n")
    monkeypatch.setenv("PATH", stub_path)
    run = Runner().run(["on-default-path"])
    assert run.rc == 0 and run.stdout == "found\n"


def test_independent_commands_run_concurrently(stubs, stub_path):
    stubs("nap", 'sleep 0.5\necho "$1"\n')
    runner = Runner(max_workers=8, path=stub_path)
    argvs = [["nap", str(n)] for n in range(8)]
    started = time.monotonic()
    runs = runner.run_all(argvs)
    elapsed = time.monotonic() - started
    assert elapsed < 2.5, f"8 x 0.5 s took {elapsed:.2f} s: not concurrent"
    assert list(runs) == [command_key(argv) for argv in argvs]
    for n, argv in enumerate(argvs):
        run = runs[command_key(argv)]
        assert run.rc == 0 and run.stdout == f"{n}\n" and run.argv == argv
        assert_round_trips(run)


def test_global_deadline_times_out_running_and_skips_queued(stubs, stub_path):
    mark = marker(5)  # `sleep 5.<unique digits>`
    stubs("slow", f"sleep {mark}\n")
    runner = Runner(timeout_s=10, deadline_s=1.0, max_workers=2, path=stub_path)
    argvs = [["slow", str(n)] for n in range(4)]
    started = time.monotonic()
    runs = runner.run_all(argvs)
    elapsed = time.monotonic() - started
    assert elapsed < 3.0, f"the run took {elapsed:.2f} s past a 1 s deadline"

    timed_out = [run for run in runs.values() if run.timed_out]
    skipped = [run for run in runs.values() if run.skipped]
    assert len(timed_out) == 2 and len(skipped) == 2
    for run in timed_out:
        assert run.rc is None and 0.8 < run.duration_s < 3.0
    for run in skipped:
        assert "deadline of 1 s" in run.skipped
        assert run.rc is None and not run.timed_out and run.duration_s < 0.5
        assert run.failure() == f"slow not run: {run.skipped}"
    for run in runs.values():
        assert_round_trips(run)
    assert_no_strays(mark)


def test_deadline_already_passed_starts_nothing(tmp_path, stubs, stub_path):
    flag = tmp_path / "ran"
    stubs("touches", f"touch '{flag}'\n")
    run = Runner(deadline_s=0, path=stub_path).run(["touches"])
    assert run.skipped and "deadline" in run.skipped and run.rc is None
    assert not flag.exists()
    assert_round_trips(run)


def test_timeout_is_capped_by_the_time_left_before_the_deadline(stubs, stub_path):
    stubs("sleeps", "sleep 5\n")
    run = Runner(timeout_s=30, deadline_s=0.5, path=stub_path).run(["sleeps"])
    assert run.timed_out and run.duration_s < 2.5


def test_duplicate_argv_runs_once(tmp_path, stubs, stub_path):
    log = tmp_path / "calls.log"
    stubs("logs", f'echo "$@" >> \'{log}\'\necho "$@"\n')
    runs = Runner(path=stub_path).run_all(
        [["logs", "a"], ("logs", "b"), ["logs", "a"], ["logs", "c"], ["logs", "b"]]
    )
    assert list(runs) == ["logs a", "logs b", "logs c"]
    assert sorted(log.read_text().splitlines()) == ["a", "b", "c"]
    assert runs["logs b"].argv == ["logs", "b"]


def test_shell_strings_are_a_type_error(stub_path):
    runner = Runner(path=stub_path)
    with pytest.raises(TypeError, match="shell string"):
        runner.run("perfquery -x")
    with pytest.raises(TypeError):
        runner.run_all("perfquery -x")
    with pytest.raises(TypeError, match="shell string"):
        runner.run_all([["ethtool", "-S", "ib0"], "perfquery -x"])
    with pytest.raises(TypeError):
        runner.run(["perfquery", None])


def test_odd_argv_is_data_not_an_exception(stubs, stub_path):
    stubs("args", "printf '%s\\n' \"$@\"\n")
    runner = Runner(path=stub_path)
    run = runner.run([])
    assert run.error == "empty command line"
    assert_round_trips(run)
    run = runner.run(["args", "nul\0byte"])  # execve cannot pass it: the child reports why
    assert run.error and run.rc is None and "\n" not in run.error
    assert_round_trips(run)
    run = runner.run(["args", "-P", 1, Path("/x")])  # ints and paths are fine argv items
    assert run.rc == 0 and run.stdout == "-P\n1\n/x\n"
    assert run.argv == ["args", "-P", "1", "/x"]


def test_every_outcome_in_one_run_all_is_data(tmp_path, stubs, stub_path):
    mark = marker()
    stubs("ok", "echo ok\n")
    stubs("hang", f"sleep {mark}\n")
    stubs("fails", "echo no >&2\nexit 1\n")
    stubs("noexec", "echo no\n", mode=0o600)
    stubs("badexec", "echo hi\n", shebang="")
    runs: Dict[str, CommandRun] = Runner(timeout_s=0.5, path=stub_path).run_all(
        [["ok"], ["hang"], ["fails"], ["noexec"], ["badexec"], ["absent-ibdiag-tool"]]
    )
    assert runs["ok"].succeeded
    assert runs["hang"].timed_out
    assert runs["fails"].rc == 1
    assert runs["noexec"].permission_denied
    assert runs["badexec"].error
    assert runs["absent-ibdiag-tool"].not_found
    for run in runs.values():
        assert run.duration_s >= 0
        assert_round_trips(run)
        if not run.succeeded:
            assert run.failure()
    assert_no_strays(mark)


def interrupt_main_thread_once(*flags: Path) -> threading.Thread:
    """Send the test's (main) thread a real SIGINT once every flag file exists, as Ctrl-C would."""
    main = threading.main_thread().ident

    def wait_then_interrupt() -> None:
        end = time.monotonic() + 10
        while not all(flag.exists() for flag in flags):
            if time.monotonic() > end:
                return  # never interrupt whatever pytest runs later: the test fails instead
            time.sleep(0.01)
        signal.pthread_kill(main, signal.SIGINT)

    thread = threading.Thread(target=wait_then_interrupt, daemon=True)
    thread.start()
    return thread


def test_keyboard_interrupt_propagates_and_kills_the_group(tmp_path, stubs, stub_path):
    mark = marker()
    stubs("hang", f"touch '{tmp_path}/started'\nsleep {mark}\n")
    interrupter = interrupt_main_thread_once(tmp_path / "started")
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        Runner(timeout_s=30, path=stub_path).run(["hang"])
        interrupter.join()  # only reached if the run ended first: then it is interrupted here
    assert time.monotonic() - started < 12.0
    assert_no_strays(mark)


def test_keyboard_interrupt_while_the_command_starts_still_kills_it(
    monkeypatch, tmp_path, stubs, stub_path
):
    """Ctrl-C between the fork and the runner knowing the command: held back, then handled."""
    import subprocess

    mark = marker()
    flag = tmp_path / "started"
    stub = stubs("hang", f"touch '{flag}'\nsleep {mark}\n")
    real_popen = subprocess.Popen

    class SlowPopen(real_popen):  # it has forked; the runner cannot know the command yet
        def __init__(self, args, *rest, **kwargs):
            super().__init__(args, *rest, **kwargs)
            if kwargs.get("executable") != stub:
                return
            end = time.monotonic() + 10
            while not flag.exists() and time.monotonic() < end:
                time.sleep(0.01)
            time.sleep(0.3)  # the SIGINT arrives in here

    monkeypatch.setattr(subprocess, "Popen", SlowPopen)
    previous = signal.getsignal(signal.SIGINT)
    interrupter = interrupt_main_thread_once(flag)
    with pytest.raises(KeyboardInterrupt):
        Runner(timeout_s=30, path=stub_path).run(["hang"])
        interrupter.join()
    assert signal.getsignal(signal.SIGINT) is previous  # the handler was put back
    assert_no_strays(mark)


def test_keyboard_interrupt_in_run_all_kills_running_and_starts_nothing_more(
    tmp_path, stubs, stub_path
):
    mark = marker()
    stubs("hang", f"touch '{tmp_path}'/started-$1\nsleep {mark}\n")
    interrupter = interrupt_main_thread_once(tmp_path / "started-0", tmp_path / "started-1")
    runner = Runner(timeout_s=30, max_workers=2, path=stub_path)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        runner.run_all([["hang", str(n)] for n in range(6)])
        interrupter.join()
    assert time.monotonic() - started < 12.0  # not the 30 s timeout of the running ones
    assert_no_strays(mark)
    # The two running were killed; the four queued were never started.
    assert sorted(path.name for path in tmp_path.glob("started-*")) == ["started-0", "started-1"]


def test_runner_failure_is_recorded_not_raised(monkeypatch, stubs, stub_path):
    stubs("ok", "echo ok\n")

    def broken(self, command, out, err, until):
        raise RuntimeError("something inside the runner broke")

    monkeypatch.setattr(Runner, "_pump", broken)
    run = Runner(path=stub_path).run(["ok"])
    assert run.error and "something inside the runner broke" in run.error
    assert_round_trips(run)


def test_tail_buffer_memory_stays_bounded():
    tail = command_runner._Tail(10)
    for _ in range(1000):
        tail.write(b"0123456789abcdef")
        assert len(tail.buf) <= 20 + 16
    assert tail.truncated and tail.total == 16000
    assert tail.text() == "6789abcdef"  # one long line: its last 10 bytes


@pytest.mark.parametrize(
    ("cap", "text"),
    [
        (100, "one\ntwo\nthree\n"),  # under the cap: all of it
        (10, "two\nthree\n"),  # the cut falls just after a newline: "two" is whole
        (9, "three\n"),  # the cut falls inside "two": from the next whole line
        (6, "three\n"),
        (5, "hree\n"),  # no whole line left: the bytes kept
    ],
)
def test_tail_text_starts_on_a_whole_line(cap, text):
    written = b"one\ntwo\nthree\n"
    tail = command_runner._Tail(cap)
    for byte in range(len(written)):  # byte by byte: trimming happens along the way
        tail.write(written[byte : byte + 1])
    assert tail.text() == text
    assert tail.truncated == (len(written) > cap)


def test_tail_of_one_long_line_does_not_start_inside_a_utf8_character():
    tail = command_runner._Tail(3)
    tail.write("x\u00e9\u00e9".encode())  # x, then two 2-byte characters: 5 bytes
    assert tail.text() == "\u00e9"


def test_the_run_keeps_at_most_its_total_cap_beyond_each_streams_floor(stubs, stub_path):
    """Issue 12 item 10: what is kept is bounded by the caps (per stream and in all), not by
    what the tools print; every stream still keeps the tail of its own output."""
    stubs("floods", 'yes 123456789 | head -c 200000\necho "END-$1"\n')
    runner = Runner(
        output_cap=100_000, total_output_cap=300_000, output_floor=10_000, max_workers=8,
        path=stub_path,
    )  # fmt: skip
    runs = runner.run_all([["floods", str(n)] for n in range(20)])
    kept = [len(run.stdout.encode()) for run in runs.values()]
    assert sum(kept) <= 300_000 + 20 * (10_000 + 1), kept
    assert max(kept) > 10_000, kept  # the shared budget was used, not only the floors
    for n in range(20):
        run = runs[f"floods {n}"]
        assert run.rc == 0 and run.stdout_truncated, run.stdout[-100:]
        assert run.stdout.endswith(f"END-{n}\n"), run.stdout[-100:]
        assert len(run.stdout.encode()) <= 100_000


def test_one_budget_can_be_shared_by_several_runners(stubs, stub_path):
    from ibdiag.runner.command_runner import OutputBudget

    stubs("floods", "head -c 50000 /dev/zero | tr '\\000' y\n")
    budget = OutputBudget(60_000)
    first = Runner(output_cap=40_000, output_floor=1_000, budget=budget, path=stub_path)
    second = Runner(output_cap=40_000, output_floor=1_000, budget=budget, path=stub_path)
    runs = [first.run(["floods"]), second.run(["floods"]), second.run(["floods", "again"])]
    kept = [len(run.stdout) for run in runs]
    assert kept == [40_000, 1_000 + 21_000, 1_000], kept  # the floor, plus what is left
    assert all(run.stdout_truncated for run in runs)
    assert budget.left == 0
