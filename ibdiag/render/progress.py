"""A one-line status on a terminal while level full's active tests run (they take minutes).

``[ 12 s] ib_write_bw attempt 1: mlx5_0:1, mlx5_1:1`` is rewritten in place every second on
stderr; the line is cleared when the run ends. Nothing at all is printed when stderr is not a
terminal (a prolog, cron, a pipe): logs get no carriage-return noise.
"""

from __future__ import annotations

import shutil
import threading
import time
from typing import Optional, TextIO


class StatusLine:
    """``with StatusLine(stream) as status: collect(..., progress=status.say)``."""

    def __init__(self, stream: TextIO, interval_s: float = 1.0) -> None:
        self.stream = stream
        self.enabled = bool(getattr(stream, "isatty", lambda: False)())
        self.interval_s = interval_s
        self.started = time.monotonic()
        self.message = ""
        self._stop = threading.Event()
        self._ticker: Optional[threading.Thread] = None
        self._lock = threading.Lock()

    def say(self, message: str) -> None:
        """Show ``message`` (what is running now) from now on."""
        self.message = message
        self._draw()

    def __enter__(self) -> StatusLine:
        if self.enabled:
            self._ticker = threading.Thread(target=self._tick, name="ibdiag-status", daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        if self.enabled and self.message:
            with self._lock:
                self.stream.write("\r\033[K")
                self.stream.flush()

    def _tick(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._draw()

    def _draw(self) -> None:
        if not self.enabled or not self.message:
            return
        elapsed = time.monotonic() - self.started
        # One terminal row: "\r" and erase-line redraw only the row the cursor is on.
        width = shutil.get_terminal_size(fallback=(80, 24)).columns - 1
        line = f"[{elapsed:4.0f} s] {self.message}"[: max(20, width)]
        with self._lock:
            self.stream.write(f"\r\033[K{line}")
            self.stream.flush()
