"""contrib/grafana/ibdiag.json's expressions and the answers a real Prometheus gives them:
the dashboard loaded, every panel target's expression with Grafana's template variables
substituted (``dashboard_exprs``), and instant queries against Prometheus's HTTP API."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from loopback import http_get

DASHBOARD = Path(__file__).resolve().parent.parent / "contrib" / "grafana" / "ibdiag.json"
VARIABLES = {
    "${DS_PROMETHEUS}": "",
    "$__rate_interval": "1m",
    "$__interval": "30s",
    "$instance": ".*",
    "$ib_port": ".*",
}


def load_dashboard() -> dict:
    with open(DASHBOARD) as handle:
        return json.load(handle)


def panels(dashboard: dict) -> Iterator[dict]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def row_of(dashboard: dict) -> Dict[int, str]:
    """Panel id -> the title of the row it is under (an open row's panels follow it)."""
    rows, current = {}, ""
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            current = panel["title"]
        for inner in (panel, *panel.get("panels", [])):
            rows[inner["id"]] = current if inner is panel else panel["title"]
    return rows


def dashboard_exprs(
    dashboard: dict, rows: Optional[Sequence[str]] = None, without: Sequence[str] = ()
) -> List[Tuple[str, str]]:
    """(panel title/refId, expression with template variables substituted) for every target
    of the panels under ``rows`` (all when None) but not under ``without``."""
    found = []
    under = row_of(dashboard)
    for panel in panels(dashboard):
        row = under[panel["id"]]
        if (rows is not None and row not in rows) or row in without:
            continue
        for target in panel.get("targets", []):
            expr = target["expr"]
            for name in sorted(VARIABLES, key=len, reverse=True):
                expr = expr.replace(name, VARIABLES[name])
            assert "$" not in expr, f"unsubstituted variable in {expr!r}"
            found.append((f"{panel['title']}/{target['refId']}", expr))
    return found


def query(prom_port: int, expr: str) -> Dict:
    url = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        return json.loads(http_get(url))
    except urllib.error.HTTPError as error:  # 400/422: a bad expression, with its reason
        return json.loads(error.read().decode())


def exprs_for(exprs: List[Tuple[str, str]], where: str) -> str:
    return next(expr for name, expr in exprs if name == where)


GBPS = 1e9 / 8  # bytes per second in one Gb/s


def query_result(prom_port: int, expr: str) -> List[dict]:
    answer = query(prom_port, expr)
    assert answer.get("status") == "success", f"{expr}: {answer.get('error')}"
    return answer["data"]["result"]


def series_value(series: dict) -> float:
    return float(series["value"][1])
