"""contrib/grafana/ibdiag.json's Fleet row against a real Prometheus (Debian ``prometheus``)
scraping a small fleet: every expression returns series, and the numbers a person reads there
are the fleet's.

Four nodes are ``ibdiag serve --level standard`` processes, each on its own port with its own
sysfs tree, procfs (its host name) and stub ``smpquery``/``perfquery`` answering for the far end
of each cable as the real tools did against ibsim (``fleet_nodes``); the fifth is what a node
running ``ibdiag export --level full`` from a maintenance job looks like: its textfile served by
a real ``prometheus-node-exporter`` (stub ``ib_write_bw`` printing real perftest captures, as
tests/full_level_node.py has it). Rail-aligned: HCA k of node n plugs into ``leaf0(7+k)`` port n.

- gpu001: healthy (OK);
- gpu002: mlx5_0 trained 1X, 50 Gb/s (the switch port says 1X too): link.rate and link.partner
  fail (CRITICAL) - the slow rail 0;
- gpu003: the far ends of both its cables (leaf07/3, leaf08/3) are Initialize: link.partner
  fails on each (CRITICAL);
- gpu004: leaf07/4's SymbolErrorCounter is stuck at 65535: counters.partner warns (WARNING);
- gpu005 (level full, far ends not read): loopback 201.8 Gb/s from mlx5_0, 98.0 Gb/s from
  mlx5_1 (half its rate: perftest.bandwidth fails, CRITICAL).

So: 1 OK, 1 WARNING, 3 CRITICAL, 0 UNKNOWN; rail 0's rate min 50 Gb/s and median 200, rail 1's
both 200; leaf07 (2 failing far-end ports) ranks above leaf08 (1); gpu002's mlx5_0:1 alone is
below its rail's median. A missing tool fails the test, it never skips it; everything listens
on loopback and is stopped in ``finally``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from conftest import REPO
from fleet_nodes import HDR_4X, Node, rail_aligned, write_fleet_node
from full_level_node import HALF_RATE, stub_ib_write_bw
from grafana_queries import (
    GBPS,
    VARIABLES,
    dashboard_exprs,
    exprs_for,
    load_dashboard,
    query,
    query_result,
    series_value,
)
from loopback import ServeProcess, free_port, prometheus_tool, start_prometheus, stop

REPO = str(Path(REPO))
SERVED = ("gpu001", "gpu002", "gpu003", "gpu004")


def _fleet() -> List[Node]:
    healthy = rail_aligned("gpu001", 1)
    narrowed = rail_aligned("gpu002", 2, ("50 Gb/sec (1X HDR)", HDR_4X))
    narrowed.far_ends[0].width = "1X"
    far_down = rail_aligned("gpu003", 3)
    for far in far_down.far_ends:
        far.link_state = "Initialize"
    stuck = rail_aligned("gpu004", 4)
    stuck.far_ends[0].counters = {"SymbolErrorCounter": 65535}
    return [healthy, narrowed, far_down, stuck]


def _full_node(tmp_path: Path) -> Path:
    """gpu005's textfile directory, written by ``ibdiag export --level full``."""
    root = tmp_path / "gpu005"
    node = Node(host="gpu005", rates=[HDR_4X, HDR_4X], far_ends=[None, None])
    sysfs, procfs, stubs = write_fleet_node(root, node)
    state = root / "perftest"
    state.mkdir()
    (state / "mlx5_1.out").write_text(Path(HALF_RATE).read_text())  # every attempt
    stubs.add("ib_write_bw", stub_ib_write_bw(state))
    config = root / "ibdiag.toml"
    config.write_text("perftest_duration_s = 1\n")
    textfiles = root / "textfile"
    textfiles.mkdir()
    argv = [sys.executable, "-m", "ibdiag", "export", "--level", "full", "--sysfs", sysfs,
            "--procfs", procfs, "--config", str(config),
            "--textfile", str(textfiles / "ibdiag.prom")]  # fmt: skip
    done = subprocess.run(
        argv, cwd=REPO, env=stubs.env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return textfiles


def _node_exporter(tmp_path: Path, textfiles: Path) -> Tuple[subprocess.Popen, int]:
    port = free_port()
    with open(tmp_path / "node_exporter.log", "wb") as log:  # the child keeps its own copy
        proc = subprocess.Popen(
            [prometheus_tool("prometheus-node-exporter"),
             f"--collector.textfile.directory={textfiles}",
             f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
             "--collector.textfile"],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    return proc, port


def _wait_for_fleet(prom_port: int, procs: List[subprocess.Popen], tmp_path: Path) -> None:
    """Until every target's samples are in: 5 verdicts, the 8 cables' statuses, 2 loopbacks."""
    want = (
        ("count(ibdiag_verdict)", 5),
        ("count(ibdiag_partner_status)", 8),
        ("count(ibdiag_port_loopback_bandwidth_bytes_per_second)", 2),
    )
    deadline = time.monotonic() + 90
    seen: Dict[str, float] = {}
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                pytest.fail(f"{proc.args[0]} exited with {proc.returncode}")
        try:
            for expr, _ in want:
                found = query(prom_port, expr).get("data", {}).get("result", [])
                seen[expr] = series_value(found[0]) if found else 0.0
        except (OSError, ValueError):
            seen.clear()
        if all(seen.get(expr) == count for expr, count in want):
            return
        time.sleep(0.5)
    print((tmp_path / "prometheus.log").read_text(errors="replace")[-4000:])
    pytest.fail(f"the fleet's samples did not all arrive within 90 s: {seen}")


def test_fleet_row_on_a_real_prometheus_scraping_five_nodes(tmp_path: Path) -> None:
    prometheus = prometheus_tool("prometheus")
    fleet = _fleet()
    textfiles = _full_node(tmp_path)
    exporter, exporter_port = _node_exporter(tmp_path, textfiles)
    servers: List[ServeProcess] = []
    proc = None
    try:
        for node in fleet:
            sysfs, procfs, stubs = write_fleet_node(tmp_path / node.host, node)
            argv = ["--level", "standard", "--sysfs", sysfs, "--procfs", procfs]
            servers.append(ServeProcess(argv, REPO, tmp_path, env=stubs.env()))
        for server in servers:
            server.ready()
        # Each node's answer names its host only through its instance: the test maps them.
        hosts = {f"127.0.0.1:{server.port}": node.host for server, node in zip(servers, fleet)}
        hosts[f"127.0.0.1:{exporter_port}"] = "gpu005"
        ports = [server.port for server in servers] + [exporter_port]
        proc, prom_port = start_prometheus(prometheus, tmp_path, *ports, interval_s=2)
        _wait_for_fleet(prom_port, [exporter, *(s.proc for s in servers), proc], tmp_path)

        dashboard = load_dashboard()
        exprs = dashboard_exprs(dashboard, rows=("Fleet",))
        assert len(exprs) == 11, exprs
        empty = [f"{where}: {expr}" for where, expr in exprs if not query_result(prom_port, expr)]
        assert not empty, "no series:\n" + "\n".join(empty)

        def panel(where: str) -> List[dict]:
            return query_result(prom_port, exprs_for(exprs, where))

        # Nodes by verdict.
        names = {"A": "OK", "B": "WARNING", "C": "CRITICAL", "D": "UNKNOWN"}
        verdicts = {
            name: series_value(panel(f"Nodes by verdict/{ref}")[0]) for ref, name in names.items()
        }
        assert verdicts == {"OK": 1, "WARNING": 1, "CRITICAL": 3, "UNKNOWN": 0}

        # Per rail: the ACTIVE ports' rate, min and median; the measured loopback.
        def by_rail(where: str) -> Dict[str, float]:
            return {s["metric"]["rail"]: series_value(s) for s in panel(where)}

        rate = "Port rate per rail: min and median"
        assert by_rail(f"{rate}/A") == {"0": 50 * GBPS, "1": 200 * GBPS}
        assert by_rail(f"{rate}/B") == {"0": 200 * GBPS, "1": 200 * GBPS}
        loopback = "Loopback bandwidth per rail: min and median"
        for ref in ("A", "B"):  # one node measured: its value is both
            found = by_rail(f"{loopback}/{ref}")
            assert found == {"0": pytest.approx(201.8 * GBPS, rel=1e-3),
                             "1": pytest.approx(98.0 * GBPS, rel=1e-3)}, found  # fmt: skip

        # The port below its rail's median: gpu002's narrowed mlx5_0:1, alone.
        slow = panel("Ports below their rail's median rate/A")
        assert [
            (
                hosts[s["metric"]["instance"]],
                s["metric"]["ib_port"],
                s["metric"]["rail"],
                series_value(s),
            )
            for s in slow
        ] == [("gpu002", "mlx5_0:1", "0", 50 * GBPS)], slow

        # Switches by failing far-end ports: leaf07 (gpu002's and gpu003's) above leaf08.
        top = panel("Switches with the most failing far-end ports/A")
        ranked = sorted(top, key=series_value, reverse=True)
        assert [(s["metric"]["peer_name"], series_value(s)) for s in ranked] == [
            ("leaf07", 2),
            ("leaf08", 1),
        ], top
        assert ranked[0]["metric"]["peer_guid"] == "0x0000000000200000"
        cables = panel("Far-end ports not passing/A")
        assert sorted(
            (hosts[s["metric"]["instance"]], s["metric"]["ib_port"],
             f"{s['metric']['peer_name']}/{s['metric']['peer_port']}", series_value(s))
            for s in cables
        ) == [
            ("gpu002", "mlx5_0:1", "leaf07/2", 2),
            ("gpu003", "mlx5_0:1", "leaf07/3", 2),
            ("gpu003", "mlx5_1:1", "leaf08/3", 2),
            ("gpu004", "mlx5_0:1", "leaf07/4", 1),
        ], cables  # fmt: skip

        # Picking instances in the variable narrows the fleet to them.
        two = "|".join(i for i, host in hosts.items() if host in ("gpu001", "gpu002"))
        for ref, expected in (("A", 1), ("B", 0), ("C", 1), ("D", 0)):
            expr = exprs_for(exprs, f"Nodes by verdict/{ref}").replace(
                f'instance=~"{VARIABLES["$instance"]}"', f'instance=~"{two}"'
            )
            assert [series_value(s) for s in query_result(prom_port, expr)] == [expected], expr
    finally:
        if proc is not None:
            stop(proc)
        for server in servers:
            server.stop()
        stop(exporter)
