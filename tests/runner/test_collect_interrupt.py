"""A stop signal while level standard waits on a command chain (a command and its fallback, run
in a thread of their own) kills every running command at once: leaving the thread pool must not
wait for a command that ignores SIGTERM to end by itself (``ibdiag.collect._run_commands``)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from ibdiag import collect, families
from ibdiag.families import Planned
from ibdiag.roles import Role


def test_a_stop_signal_while_only_a_chain_runs_kills_it_at_once(tmp_path, monkeypatch):
    started = tmp_path / "started"
    stub = tmp_path / "stub"
    stub.write_text(f"#!/bin/sh\ntouch {started}\ntrap '' TERM\nsleep 30\n")
    stub.chmod(0o755)
    chained = Planned(
        Role("perfquery", "x", "mlx5_0:1"),
        [str(stub)],
        fallback=Planned(Role("perfquery", "plain", "mlx5_0:1"), ["true"]),
    )
    monkeypatch.setattr(families, "plan", lambda snap, needs, level="standard": [chained])
    monkeypatch.setattr(families, "collectors", lambda needs, level="standard": [])

    def stop_when_started() -> None:
        end = time.monotonic() + 20
        while not started.exists() and time.monotonic() < end:
            time.sleep(0.02)
        time.sleep(0.2)  # the main thread now waits on the chain, nothing else
        os.kill(os.getpid(), signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=stop_when_started, daemon=True).start()
        began = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            collect._run_commands(None, {"perfquery"}, {"timeout_s": 60, "deadline_s": 60}, None)
        took = time.monotonic() - began
    finally:
        signal.signal(signal.SIGINT, previous)
    assert started.exists()
    assert took < 10, f"the interrupted run waited {took:.1f} s for its command"
