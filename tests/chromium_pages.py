"""Pages loaded for real in headless Chromium (the ``chromium`` fixture, tests/conftest.py):
``assert_self_contained`` (nothing in the page could make a browser fetch anything) and
``assert_renders_in_chromium`` (the DOM shows the banner, a screenshot is drawn, and the page
requested nothing: every host name unresolvable, every connection sent to the discard port).
``HOSTILE``: the text every page must show inert."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import List, Tuple

CHROMIUM_TIMEOUT_S = 90
HOSTILE = "<script>alert(1)</script>\"'&"

# Chromium's flags: headless, no sandbox (CI runs as root), none of its own services, every host
# name unresolvable and every connection sent to a proxy on the discard port, so a request would
# fail - and be recorded in the net log - instead of leaving the machine.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--proxy-server=127.0.0.1:9",
    "--window-size=1280,1600",
)


def _page_requests(net_log: Path) -> List[str]:
    """URLs of the requests the page started (not Chromium's own background traffic)."""
    log = json.loads(net_log.read_text(encoding="utf-8"))
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = []
    for event in log["events"]:
        params = event.get("params") or {}
        if event["type"] != start_job or "url" not in params:
            continue
        if params.get("initiator") == "not an origin" or params["url"].startswith("file:"):
            continue  # Chromium's own (update checks, time, accounts) or the page itself
        urls.append(params["url"])
    return urls


def load(chromium: str, page: Path, tmp: Path, action: str) -> Tuple[str, List[str]]:
    """Open ``page`` in Chromium with ``--dump-dom`` or ``--screenshot=FILE``; return stdout and
    the URLs the page requested."""
    profile = tmp / f"profile-{action.strip('-').split('=')[0]}"
    net_log = tmp / f"netlog-{profile.name}.json"
    argv = [
        chromium,
        *CHROMIUM_FLAGS,
        f"--user-data-dir={profile}",
        f"--log-net-log={net_log}",
        action,
        page.resolve().as_uri(),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT_S)
    assert done.returncode == 0, f"chromium exited {done.returncode}: {done.stderr[-2000:]}"
    assert net_log.is_file(), f"chromium wrote no net log: {done.stderr[-2000:]}"
    return done.stdout, _page_requests(net_log)


def assert_self_contained(text: str) -> None:
    """Nothing in the page could make a browser fetch anything."""
    for pattern in (
        r"https?://",
        r"<script",
        r"<link",
        r"<img",
        r"<iframe",
        r"<object",
        r"<embed",
        r"@import",
        r"url\(",
        r"\bsrc\s*=",
        r"\bhref\s*=",
        r"\baction\s*=",
    ):
        assert not re.search(pattern, text, re.IGNORECASE), f"page contains {pattern!r}"


def assert_renders_in_chromium(chromium: str, page: Path, tmp: Path, banner: str) -> str:
    dom, requested = load(chromium, page, tmp, "--dump-dom")
    assert requested == [], f"the page made network requests: {requested}"
    assert banner in dom, f"verdict banner {banner!r} not in the rendered DOM"
    shot = tmp / "screenshot.png"
    _, requested = load(chromium, page, tmp, f"--screenshot={shot}")
    assert requested == [], f"the page made network requests: {requested}"
    assert shot.is_file(), "chromium wrote no screenshot"
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "the screenshot is not a PNG"
    assert len(data) > 20_000, f"the screenshot is nearly empty ({len(data)} bytes)"
    return dom
