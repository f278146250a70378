"""Which store a run uses (``ibdiag.history.store_path``)."""

from __future__ import annotations

from ibdiag.history import DEFAULT_PATH, store_path


def test_the_default_store_is_for_this_machines_own_ports():
    assert store_path(None, environ={}) == DEFAULT_PATH
    assert store_path(None, environ={}, sysfs_root="/sys/") == DEFAULT_PATH
    # another tree (a capture, a test, a host /sys mounted elsewhere): only a named store
    assert store_path(None, environ={}, sysfs_root="/tmp/capture/sys") is None
    assert store_path("/x/h.db", environ={}, sysfs_root="/tmp/capture/sys") == "/x/h.db"
    named = {"IBDIAG_HISTORY": "/x/env.db"}
    assert store_path(None, environ=named, sysfs_root="/host/sys") == "/x/env.db"


def test_the_flag_wins_over_the_environment_and_off_wins_over_all():
    assert store_path("/x/flag.db", environ={"IBDIAG_HISTORY": "/x/env.db"}) == "/x/flag.db"
    assert store_path(None, environ={"IBDIAG_HISTORY": "/x/env.db"}) == "/x/env.db"
    for off in ("off", "OFF", "none", "0", " no "):
        assert store_path(None, environ={"IBDIAG_HISTORY": off}) is None
    assert store_path("/x/flag.db", off=True, environ={}) is None
    assert store_path(None, environ={"IBDIAG_HISTORY": "  "}) == DEFAULT_PATH
