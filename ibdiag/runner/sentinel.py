"""The runner's sentinel: when ibdiag is gone, kill what its commands left running.

SIGKILL (the OOM killer, ``kill -9``, a job step's hard stop) runs no clean-up code in ibdiag.
``PR_SET_PDEATHSIG`` kills each command ibdiag started directly, but not what those commands
started. So the first command a process runs also starts this script, in a session of its own,
with ibdiag holding the only write end of the pipe on its stdin. When ibdiag ends - however it
ends - the pipe closes, the read below returns, and every process whose environment carries
this ibdiag's cookie (``IBDIAG_RUNNER=<pid>.<start time>.``, see ``proctree``) is SIGKILLed, in
rounds until none is left. After a normal exit the runner has already killed them all: the
scan finds nothing and the sentinel ends.

A standalone script (``python -I -S sentinel.py COOKIE``): it imports nothing of ibdiag, so it
works whatever the Python path, and it costs one small interpreter per ibdiag that runs
commands (level standard and full), never at level quick.
"""

from __future__ import annotations

import os
import signal
import sys
import time


def _marked(prefix: bytes, me: int) -> list:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue
        if environ.startswith(prefix) or b"\0" + prefix in environ:
            found.append(int(name))
    return found


def main(argv: list) -> int:
    if len(argv) != 2:
        return 2
    prefix = argv[1].encode()
    for stop in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(stop, signal.SIG_IGN)  # the clean-up must not be cut short
    try:
        while os.read(0, 4096):
            pass  # ibdiag never writes: EOF (or an error) means it has gone
    except OSError:
        pass
    me = os.getpid()
    for _ in range(50):
        marked = _marked(prefix, me)
        if not marked:
            break
        for pid in marked:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
