"""Stopping a real component the tests started in its own process group (Slurm, ibsim, opensm)."""

from __future__ import annotations

import os
import signal
import subprocess


def terminate_group(process: subprocess.Popen, grace: float) -> None:
    """SIGTERM the group, then SIGKILL, each given ``grace`` seconds; then SIGKILL whatever is
    left in the group once its leader is gone (a daemon's children outlive it otherwise)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass
        try:
            process.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
