"""The PCIe path in the HTML report: one row per HCA (and per GPU) with its path, AER totals
and IOMMU domain, and the worst ``pci.*`` result on it. The cells are plain text: the template
(autoescape on) escapes them. Pure functions of the Report."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ibdiag.facts.pcie import SEVERITIES, GpuPaths, PcieChain, PcieFunction
from ibdiag.model import Report, Result
from ibdiag.render.html_status import findings, worst

PCI_PREFIX = "pci."


def pci_rows(report: Report) -> List[Dict[str, Any]]:
    """Rows: ``target``, ``status`` (the worst pci.* result; "none"), ``findings`` (the warn /
    fail messages), ``path`` ("0000:00:01.0 > 0000:10:00.0 > 0000:12:00.0"), ``aer``
    ("fatal 0, non-fatal 2 (bridge 0000:11:00.0)"), ``iommu`` ("group 40: identity")."""
    results: Dict[str, List[Result]] = {}
    for result in report.results:
        if result.check_id.startswith(PCI_PREFIX):
            results.setdefault(result.target, []).append(result)
    chains: List[tuple] = []
    for dev in report.snapshot.devices:
        path = dev.facts.get("pcie_path")
        if isinstance(path, PcieChain) and path.function is not None:
            chains.append((dev.name, path))
    gpus = report.snapshot.facts.get("pcie_gpus")
    if isinstance(gpus, GpuPaths):
        chains += [(f"gpu@{g.function.bdf}", g) for g in gpus.gpus if g.function is not None]
    rows = []
    for target, chain in chains:
        found = results.get(target, [])
        rows.append(
            {
                "target": target,
                "status": worst(found),
                "findings": findings(found),
                "path": " > ".join(chain.path()),
                "aer": aer_text(chain),
                "iommu": iommu_text(chain.function),
            }
        )
    return rows


def aer_text(chain: PcieChain) -> Optional[str]:
    """The AER totals of the function, and of each bridge that counted any."""
    parts = []
    functions = [chain.function, *chain.bridges] if chain.function else []
    for function in functions:
        totals = {s: function.total(s) for s in SEVERITIES if function.total(s) is not None}
        if not totals:
            continue
        if function is chain.function or any(totals.values()):
            text = ", ".join(f"{s} {n}" for s, n in totals.items())
            parts.append(text if function is chain.function else f"{text} (bridge {function.bdf})")
    return "; ".join(parts) or None


def iommu_text(function: Optional[PcieFunction]) -> Optional[str]:
    if function is None or function.iommu_group is None:
        return None
    return f"group {function.iommu_group}: {function.iommu_type or 'type not read'}"
