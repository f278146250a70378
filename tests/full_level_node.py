"""A node for ``ibdiag check --level full``: two HDR (200 Gb/s) HCAs in sysfs and a stub
``ib_write_bw`` acting as perftest does - without a host argument the server (waits, then
ends), with ``localhost`` the client printing a recorded run: the superbench HDR loopback
(``HEALTHY``, 201.8 Gb/s) unless a per-device, per-attempt file says otherwise (``HALF_RATE``:
OCI's 98.01 Gb/s run, half a 200 Gb/s port)."""

from __future__ import annotations

import json
from pathlib import Path

import stubs as S
from sysfs_builder import mlx5_node, write_node

HEALTHY = S.fixture(
    "perftest", "superbench-ib_write_bw-loopback-8M-azure-hdr-ib0-server-client-interleaved.txt"
)
HALF_RATE = S.fixture("perftest", "oci-oke-ib_write_bw-roce-mlx5_5-4qp-98gbps.txt")


def stub_ib_write_bw(state: Path) -> str:
    """The client prints ``state/<dev>.<attempt>.out`` (else ``<dev>.out``, else HEALTHY) or
    runs ``<dev>.<attempt>.sh``; the server waits a moment and ends, as after one client."""
    return f"""state={S._q(str(state))}
dev=""; prev=""; last=""
for arg in "$@"; do [ "$prev" = "-d" ] && dev="$arg"; prev="$arg"; last="$arg"; done
if [ "$last" != "localhost" ]; then
    echo "* Waiting for client to connect... *"
    sleep 2
    exit 0
fi
n=$(cat "$state/$dev.n" 2>/dev/null || echo 0); n=$((n + 1)); echo "$n" > "$state/$dev.n"
[ -f "$state/$dev.$n.sh" ] && exec sh "$state/$dev.$n.sh"
for f in "$state/$dev.$n.out" "$state/$dev.out" {S._q(HEALTHY)}; do
    [ -f "$f" ] && exec cat "$f"
done
"""


def full_level_node(tmp_path: Path, monkeypatch) -> dict:
    """Two HDR (200 Gb/s) HCAs, stub tools alone on PATH, ib_write_bw answering as set."""
    sys_root = tmp_path / "sys"
    write_node(str(sys_root), mlx5_node(2))
    bin_dir = S.StubBin(tmp_path / "bin")
    state = tmp_path / "perftest"
    state.mkdir()
    bin_dir.add("ib_write_bw", stub_ib_write_bw(state))
    monkeypatch.setenv("PATH", bin_dir.path)
    return {"sys": str(sys_root), "bin": bin_dir, "state": state, "tmp": tmp_path}


def full_check(run_cli, node, *extra):
    """`ibdiag check --level full --json` on the node; (exit code, results by check id)."""
    config = node["tmp"] / "ibdiag.toml"
    if not config.exists():
        config.write_text("perftest_duration_s = 1\n")
    result = run_cli(
        "check", "--level", "full", "--sysfs", node["sys"], "--config", str(config), "--json",
        *extra,
    )  # fmt: skip
    report = json.loads(result.stdout)
    by_check = {}
    for item in report["results"]:
        by_check.setdefault(item["check_id"], []).append(item)
    return result.exit_code, by_check, report
