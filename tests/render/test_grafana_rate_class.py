"""The Fleet row's "Ports below their rail's median rate" on a mixed HDR/NDR fleet, against a
real Prometheus (Debian ``prometheus``) scraping ``ibdiag serve`` on six nodes.

A cluster grown in two generations: gpu011 and gpu012 have ConnectX-6 HCAs at 4X HDR (200
Gb/s), gpu013 to gpu016 ConnectX-7 at 4X NDR (400 Gb/s); gpu016's mlx5_0 trained 2X, 200 Gb/s.
Rail 0's median over all six is 300 Gb/s, so comparing every port of a rail flags both healthy
HDR ports with the sick one. Ports are compared with the ports of their rate class - the HCA
model, as link.rate compares a port with the other ports of its model - so gpu016's mlx5_0:1
is the one port listed: 200 against the ConnectX-7 median of 400. A missing tool fails the test,
it never skips it; everything listens on loopback and is stopped in ``finally``.
"""

from __future__ import annotations

from pathlib import Path
from typing import List

from conftest import REPO
from fleet_nodes import HDR_4X, Node, write_fleet_node
from grafana_queries import (
    GBPS,
    dashboard_exprs,
    exprs_for,
    load_dashboard,
    query,
    query_result,
    series_value,
)
from loopback import ServeProcess, prometheus_tool, start_prometheus, stop

REPO = str(Path(REPO))
NDR_4X = "400 Gb/sec (4X NDR)"
NDR_2X = "200 Gb/sec (2X NDR)"
CX7 = "MT4129"  # ConnectX-7 (sysfs_builder's default is a ConnectX-6, MT4123)
PANEL = "Ports below their rail's median rate/A"


def _fleet(tmp_path: Path) -> List[tuple]:
    """(host, sysfs, procfs, stubs) of each node; the ConnectX-7 nodes' hca_type rewritten."""
    nodes = [Node(host=f"gpu01{n}", rates=[HDR_4X, HDR_4X], far_ends=[None, None])
             for n in (1, 2)]  # fmt: skip
    nodes += [Node(host=f"gpu01{n}", rates=[NDR_4X, NDR_4X], far_ends=[None, None])
              for n in (3, 4, 5)]  # fmt: skip
    nodes.append(Node(host="gpu016", rates=[NDR_2X, NDR_4X], far_ends=[None, None]))
    written = []
    for node in nodes:
        sysfs, procfs, stubs = write_fleet_node(tmp_path / node.host, node)
        if node.rates[1] == NDR_4X:
            for hca_type in Path(sysfs).glob("devices/*/*/infiniband/*/hca_type"):
                hca_type.write_text(CX7 + "\n")
        written.append((node.host, sysfs, procfs, stubs))
    return written


def _wait(prom_port: int, procs, count: int) -> None:
    import time

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        for proc in procs:
            assert proc.poll() is None, f"{proc.args[0]} exited with {proc.returncode}"
        try:
            found = query(prom_port, "count(ibdiag_port_rail_info)").get("data", {})
            if [float(s["value"][1]) for s in found.get("result", [])] == [count]:
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.5)
    raise AssertionError(f"the fleet's {count} ports did not all arrive within 90 s")


def test_below_the_rail_median_compares_ports_of_one_rate_class(tmp_path: Path) -> None:
    prometheus = prometheus_tool("prometheus")
    servers: List[ServeProcess] = []
    proc = None
    try:
        fleet = _fleet(tmp_path)
        for _host, sysfs, procfs, stubs in fleet:
            argv = ["--level", "quick", "--sysfs", sysfs, "--procfs", procfs]
            servers.append(ServeProcess(argv, REPO, tmp_path, env=stubs.env()))
        for server in servers:
            server.ready()
        hosts = {f"127.0.0.1:{server.port}": node[0] for server, node in zip(servers, fleet)}
        proc, prom_port = start_prometheus(
            prometheus, tmp_path, *(server.port for server in servers), interval_s=2
        )
        _wait(prom_port, [proc, *(server.proc for server in servers)], 2 * len(fleet))

        slow = query_result(
            prom_port, exprs_for(dashboard_exprs(load_dashboard(), rows=("Fleet",)), PANEL)
        )
        found = sorted(
            (
                hosts[s["metric"]["instance"]],
                s["metric"]["ib_port"],
                s["metric"]["rail"],
                series_value(s),
            )
            for s in slow
        )
        assert found == [("gpu016", "mlx5_0:1", "0", 200 * GBPS)], slow
    finally:
        if proc is not None:
            stop(proc)
        for server in servers:
            server.stop()


def test_each_ports_rail_info_names_its_hca_model() -> None:
    """The rate class the panels group by: the model link.rate groups by (``model_key``), the
    driver's hca_type when the model is not one ibdiag knows."""
    from prometheus_text import parse, promtool_check
    from snapshots import CX7, device, port, snapshot

    from ibdiag.grade import grade
    from ibdiag.registry import load_registry
    from ibdiag.render import prometheus
    from ibdiag.render.options import RenderOptions
    from ibdiag.thresholds import Thresholds

    devs = [device("mlx5_0", [port(1)]), device("mlx5_1", [port(1)], hca_type=CX7),
            device("mlx5_2", [port(1)], hca_type="MT9999", pci=None)]  # fmt: skip
    report = grade(snapshot(devs), load_registry([]), Thresholds(), "quick")
    text = prometheus.render(report, RenderOptions(duration_s=0.1))
    promtool_check(text)
    models = {
        dict(labels)["ib_port"]: (dict(labels)["rail"], dict(labels)["hca_model"])
        for (name, labels), _ in parse(text).items()
        if name == "ibdiag_port_rail_info"
    }
    assert models == {"mlx5_0:1": ("0", "ConnectX-6"), "mlx5_1:1": ("1", "ConnectX-7"),
                      "mlx5_2:1": ("2", "MT9999")}  # fmt: skip
