"""``ibdiag collect --redact all`` on the support catalogue's whole node (tests/support_node.py: 8
HCAs, 8 GPUs, every tool answering with real captures): no identifying value any tool printed is
left in the bundle, and the redacted bundle still grades. Slow: a collect on 8 HCAs (~10 s)."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path
from typing import Set

import pytest
from support_node import SupportNode

from ibdiag.bundle.redact import KINDS

# Identifying values as each tool labels them (written independently of
# ibdiag.bundle.redact_fields, so that a label both miss cannot hide a leak).
HARVEST = [
    r"Serial number: (\S+)",  # lspci VPD [SN]
    r"\[V[U3]\] Vendor specific: (\S+)",  # lspci VPD: the function UID, the board UUID
    r"\"(?:serial_number|board\.serial_number|function\.uid)\": \"([^\"]+)\"",  # devlink -j
    r"GPU UUID\s+: GPU-(\S+)",  # nvidia-smi -q
    r"Serial Number\s+: (\d\S+)",  # nvidia-smi -q (N/A is no serial)
    r"Base GUID:\s+(\S+)",  # mstflint q
    r"Base MAC:\s+(\S+)",
    r"\"Vendor Serial Number\" : \"([^\"]+)\"",  # mlxlink --json
    r"link/infiniband \S{36}(\S{23})",  # the port GUID in the IPoIB address
    r"inet (\d+\.\d+\.\d+\.\d+)/",
    r"sm guid (0x[0-9a-f]+)",  # sminfo
]


def harvest(text: str) -> Set[str]:
    found: Set[str] = set()
    for pattern in HARVEST:
        found.update(re.findall(pattern, text))
    return found


@pytest.fixture
def node(tmp_path, monkeypatch):
    made = SupportNode(tmp_path / "node")
    monkeypatch.setenv("PATH", made.stubs.path)
    monkeypatch.delenv("IBDIAG_DEBUG", raising=False)
    return made


def test_collect_redact_all_on_the_whole_node_leaves_no_value_any_tool_printed(
    node, tmp_path, run_cli
):
    printed = "".join(
        path.read_text(errors="replace") for path in node.outputs.iterdir() if path.is_file()
    )
    printed += Path(node.stubs.path, "mlxlink").read_text()  # cat <path>: follow it
    mlxlink = re.search(r"cat '?([^'\n]+mlxlink[^'\n]+\.json)", printed)
    assert mlxlink is not None
    printed += Path(mlxlink.group(1)).read_text()
    originals = harvest(printed)
    expected = {"MT2340J88735", "e4397f872caeed218000846daa7d2f49", "043f720300f04c46"}
    assert expected | {"CWJH05025502589", "0x2c90200259201"} <= originals, originals
    out = tmp_path / "out"
    result = run_cli(*node.argv("--tarball", "--redact", "all", out=str(out)))
    assert result.exit_code == 0, result.stdout + result.stderr
    (tarball,) = out.glob("ibdiag-*.tar.gz")
    extracted = tmp_path / "extracted"
    with tarfile.open(tarball) as tar:
        tar.extractall(extracted)  # noqa: S202 - our own bundle, written just now
    files = [path for path in extracted.rglob("*") if path.is_file()]
    assert len(files) > 100
    texts = {path: path.read_text(errors="replace").lower() for path in files}
    names = " ".join(str(path) for path in extracted.rglob("*")).lower()
    left = {
        value: sorted(p.name for p, text in texts.items() if value.lower() in text)
        for value in originals
        if value.lower() in names or any(value.lower() in text for text in texts.values())
    }
    assert not left, left
    manifest = json.loads(next(p for p in files if p.name == "manifest.json").read_text())
    assert set(manifest["redaction"]["replaced"]) == set(KINDS)
    report = run_cli("report", str(tarball), "--json")
    assert report.exit_code in (0, 1, 2), report.stdout + report.stderr
    support = json.loads(report.stdout)["snapshot"]["facts"]["support"]
    assert all(re.fullmatch(r"serial-\d+", fw["board_serial"]) for fw in support["firmware"])
    assert len(support["firmware"]) == 8
