"""contrib/grafana/ibdiag.json: a valid dashboard whose every PromQL expression runs against a
real Prometheus (Debian ``prometheus``) scraping ``ibdiag serve`` and returns series.

The sysfs tree has non-zero port and hw error counters (so the "non-zero" tables and the
non-passing checks table have rows) and ``make_report`` bumps traffic and error counters before
each collection (so rate() sees growing counters). The far end of mlx5_0's cable is read as at
level standard, through stub ``smpquery``/``perfquery`` printing the ibsim captures
(tests/captures/ibsim-partner: switch ``leaf07`` port 1), whose SymbolErrorCounter grows with
every collection. A missing ``prometheus`` fails the test, it never skips it. Everything listens
on loopback and is stopped in ``finally``. The Fleet row compares nodes: its expressions run in
tests/fleet/test_grafana_fleet.py, against five.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import List

import pytest
import stubs as S
from grafana_queries import (
    VARIABLES,
    dashboard_exprs,
    exprs_for,
    load_dashboard,
    panels,
    query,
)
from loopback import http_get, prometheus_tool, serve_in_thread, start_prometheus, stop
from sysfs_builder import bump_counter, mlx5_node, write_node

from ibdiag.collect import collect
from ibdiag.grade import grade
from ibdiag.registry import load_registry
from ibdiag.thresholds import Thresholds

# Error counters the test tree sets non-zero (the rest stay at the builder's 0).
PORT_ERRORS = {"symbol_error": 12, "port_rcv_errors": 3, "port_xmit_discards": 5}
HW_ERRORS = {
    "out_of_sequence": 40,
    "packet_seq_err": 2,
    "local_ack_timeout_err": 7,
    "req_transport_retries_exceeded": 1,
    "req_rnr_retries_exceeded": 1,
    "req_cqe_error": 4,
}
# Counters mlx5 exposes on some kernels that sysfs_builder's list lacks; the dashboard uses them.
EXTRA_HW = ("req_transport_retries_exceeded", "req_rnr_retries_exceeded")
GROWING = (("counters", "port_rcv_data"), ("counters", "port_xmit_data"),
           ("hw_counters", "rx_write_requests"))  # fmt: skip
# The far end's plain perfquery: the ibsim capture with SymbolErrorCounter 1234 and
# LinkDownedCounter 3, its SymbolErrorCounter grown by 7 at each run.
FAR_END_ERRORS = {"symbol_error", "link_downed"}


# --- shape -----------------------------------------------------------------------------------


def test_dashboard_shape() -> None:
    dashboard = load_dashboard()
    assert dashboard["title"]
    assert 36 <= dashboard["schemaVersion"] <= 41
    assert dashboard["uid"]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource"
    assert variables["DS_PROMETHEUS"]["query"] == "prometheus"
    assert variables["instance"]["type"] == "query"
    assert "label_values(ibdiag_verdict, instance)" in variables["instance"]["definition"]
    assert variables["ib_port"]["type"] == "query"
    assert ", ib_port)" in variables["ib_port"]["definition"]
    rows = [p["title"] for p in dashboard["panels"] if p["type"] == "row"]
    assert rows == [
        "Fleet",
        "IB Port Health",
        "Far end of each cable",
        "IB Hardware Counters",
        "ibdiag check status",
    ]
    ids = set()
    for panel in panels(dashboard):
        grid = panel["gridPos"]
        assert set(grid) >= {"h", "w", "x", "y"}, panel["title"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24, panel["title"]
        assert panel["id"] not in ids, f"duplicate panel id {panel['id']}"
        ids.add(panel["id"])
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}", panel["title"]
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            assert target["refId"] and target["expr"].strip(), panel["title"]
    titles = {p["title"] for p in panels(dashboard)}
    for title in (
        "Nodes by verdict",
        "Switches with the most failing far-end ports",
        "Far-end ports not passing",
        "Port rate per rail: min and median",
        "Loopback bandwidth per rail: min and median",
        "Ports below their rail's median rate",
        "Non-zero port error counters",
        "RX data rate",
        "TX data rate",
        "RX error rate",
        "Physical state",
        "Non-zero far-end error counters",
        "Far end (switch port) error counters",
        "Far end link state",
        "Non-zero hw error counters",
        "Retransmission / timeout rate",
        "Sequence / NAK error rate",
        "CQE / buffer error rate",
        "Remote access error rate",
        "RDMA operation rate",
        "Verdict per instance",
        "Non-passing checks",
    ):
        assert title in titles


# --- against a real Prometheus ---------------------------------------------------------------


def _far_end_tools(tmp_path: Path) -> S.StubBin:
    """smpquery/perfquery answering mlx5_0's far end as the ibsim captures do (switch leaf07,
    port 1); plain perfquery's SymbolErrorCounter grows by 7 at each run."""
    stubs = S.StubBin(tmp_path / "stubs")
    stubs.add("smpquery", S.by_args(S.partner_smpquery("switch-hdr")))
    errors = S.partner_capture("switch-hdr-errors-perfquery.txt")
    growing = S.grows(errors, "SymbolErrorCounter", 7, stubs.state)
    stubs.add("perfquery", S.by_args({**S.partner_perfquery(), "-C * -P * -t *": growing}))
    return stubs


def _serving(tmp_path: Path):
    sys_root = str(tmp_path / "sys")
    far_end = _far_end_tools(tmp_path)
    hcas = mlx5_node(2)
    port = hcas[0].ports[0]
    port.counters.update(PORT_ERRORS)
    for hca in hcas:
        for name in EXTRA_HW:
            hca.ports[0].hw_counters.setdefault(name, 0)
    port.hw_counters.update(HW_ERRORS)
    # The second HCA's link is down: a failing check for the non-passing checks table.
    hcas[1].ports[0].state = "1: DOWN"
    hcas[1].ports[0].phys_state = "2: Polling"
    write_node(sys_root, hcas)
    registry = load_registry()

    def make_report():
        start = time.monotonic()
        for hca in hcas:
            for directory, name in GROWING:
                bump_counter(sys_root, hca.name, name, 250_000, directory)
        bump_counter(sys_root, hcas[0].name, "out_of_sequence", 1, "hw_counters")
        options = {"path": far_end.path, "timeout_s": 5.0, "deadline_s": 10.0}
        snapshot = collect(sys_root, "/nonexistent-proc", {"sysfs", "partner"}, options)
        report = grade(snapshot, registry, Thresholds(), "quick")
        return report, time.monotonic() - start

    return serve_in_thread(make_report)


def _label_values(prom_port: int, definition: str) -> List[str]:
    """What Grafana's label_values(selector, label) asks Prometheus for."""
    inner = definition[len("label_values(") : -1]
    selector, label = (part.strip() for part in inner.rsplit(",", 1))
    for name, value in VARIABLES.items():
        selector = selector.replace(name, value)
    url = f"http://127.0.0.1:{prom_port}/api/v1/label/{label}/values?" + urllib.parse.urlencode(
        {"match[]": selector}
    )
    answer = json.loads(http_get(url))
    assert answer["status"] == "success", answer
    return answer["data"]


def test_every_expression_returns_series_from_real_prometheus(tmp_path: Path) -> None:
    binary = prometheus_tool("prometheus")
    dashboard = load_dashboard()
    # One node: the fleet row's comparisons across nodes are test_grafana_fleet's.
    exprs = dashboard_exprs(dashboard, without=("Fleet",))
    assert len(exprs) >= 20
    server, thread, port = _serving(tmp_path)
    proc, prom_port = start_prometheus(binary, tmp_path, port)
    try:
        # At least 3 scrapes stored: every rate() over 1m has two or more samples.
        deadline = time.monotonic() + 60
        scrapes = 0.0
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"prometheus exited with {proc.returncode}")
            try:
                answer = query(prom_port, "count_over_time(ibdiag_verdict[1m])")
                result = answer.get("data", {}).get("result", [])
                scrapes = float(result[0]["value"][1]) if result else 0.0
            except (OSError, ValueError):
                scrapes = 0.0
            if scrapes >= 3:
                break
            time.sleep(0.3)
        else:
            print((tmp_path / "prometheus.log").read_text(errors="replace")[-4000:])
            pytest.fail(f"fewer than 3 scrapes within 60 s ({scrapes})")

        failures = []
        for where, expr in exprs:
            answer = query(prom_port, expr)
            if answer.get("status") != "success":
                failures.append(f"{where}: {expr}\n  error: {answer.get('error')}")
            elif not answer["data"]["result"]:
                failures.append(f"{where}: {expr}\n  no series")
        assert not failures, "\n".join(failures)

        # The rate panels really see traffic, and the "non-zero" tables list our counters.
        rx = query(prom_port, exprs_for(exprs, "RX data rate/A"))["data"]["result"]
        assert all(float(series["value"][1]) > 0 for series in rx), rx
        table = query(prom_port, exprs_for(exprs, "Non-zero hw error counters/A"))
        names = {series["metric"]["__name__"] for series in table["data"]["result"]}
        assert names == {f"ibdiag_port_hw_{name}_total" for name in HW_ERRORS}, names
        # The far end: its symbol errors grow, the non-zero table names the cable's counters,
        # the link state table has both ends' rates.
        far = "Far end (switch port) error counters/A"
        symbols = query(prom_port, exprs_for(exprs, far))["data"]["result"]
        assert [series["metric"] for series in symbols] == [
            {
                "instance": f"127.0.0.1:{port}",
                "ib_port": "mlx5_0:1",
                "peer_name": "leaf07",
                "peer_port": "1",
            }
        ], symbols
        assert float(symbols[0]["value"][1]) > 0, symbols
        table = query(prom_port, exprs_for(exprs, "Non-zero far-end error counters/A"))
        names = {series["metric"]["__name__"] for series in table["data"]["result"]}
        assert names == {f"ibdiag_partner_{name}_total" for name in FAR_END_ERRORS}, names
        for ref, value in (("A", 4), ("B", 5), ("C", 4), ("D", 25e9), ("E", 25e9)):
            found = query(prom_port, exprs_for(exprs, f"Far end link state/{ref}"))
            assert [float(s["value"][1]) for s in found["data"]["result"]] == [value], found
        checks = query(prom_port, exprs_for(exprs, "Non-passing checks/A"))["data"]["result"]
        assert any(series["metric"]["target"] == "mlx5_1:1" for series in checks), checks

        # The template variables' queries give the values the panels filter on.
        variables = {v["name"]: v for v in dashboard["templating"]["list"]}
        assert _label_values(prom_port, variables["instance"]["definition"]) == [
            f"127.0.0.1:{port}"
        ]
        assert _label_values(prom_port, variables["ib_port"]["definition"]) == [
            "mlx5_0:1",
            "mlx5_1:1",
        ]
        # Picking one port in the variable narrows every per-port panel to it.
        one = exprs_for(exprs, "RX data rate/A").replace('ib_port=~".*"', 'ib_port=~"mlx5_1:1"')
        picked = query(prom_port, one)["data"]["result"]
        assert [series["metric"]["ib_port"] for series in picked] == ["mlx5_1:1"], picked
    finally:
        stop(proc)
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
