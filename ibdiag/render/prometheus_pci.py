"""The PCIe path in Prometheus terms, from the typed facts of level quick (``pcie_path`` on each
HCA, ``pcie_gpus`` on the node):

- ``ibdiag_pcie_aer_errors_total`` (labels ``device``: the HCA, ``function``: ``hca`` or
  ``bridge``, ``bdf``, ``severity``: ``correctable``/``nonfatal``/``fatal``): the kernel's
  ``TOTAL_ERR_*`` of each function on the HCA's path, since boot;
- ``ibdiag_pcie_iommu_info`` (always 1; labels ``device`` (the HCA, or ``gpu``), ``bdf``,
  ``group``, ``type``): the IOMMU domain of each HCA's and GPU's group.

Healthy: fatal and non-fatal never move; the IOMMU type is the one the site expects. A value not
read is no sample (never a 0). Pure functions of the Report: no I/O, nothing decided.
"""

from __future__ import annotations

from ibdiag.facts.pcie import SEVERITIES, GpuPaths, PcieChain, PcieFunction
from ibdiag.model import Report
from ibdiag.render.inert import inert
from ibdiag.render.prometheus_family import Family, Labels, Samples


def add_pci(family: Family, report: Report) -> None:
    """Add the families above through ``family(name, kind, help)`` (``_Exposition.family``)."""
    errors = family(
        "ibdiag_pcie_aer_errors_total",
        "counter",
        "PCIe AER errors counted since boot on the HCA's function or a bridge above it "
        "(sysfs aer_dev_*, TOTAL_ERR_*).",
    )
    iommu = family(
        "ibdiag_pcie_iommu_info",
        "gauge",
        "The IOMMU group and domain type (identity, DMA, DMA-FQ...) of an HCA's or GPU's "
        "PCI function; always 1.",
    )
    for dev in report.snapshot.devices:
        path = dev.facts.get("pcie_path")
        if not isinstance(path, PcieChain) or path.function is None:
            continue
        for function in [path.function, *path.bridges]:
            for severity in SEVERITIES:
                total = function.total(severity)
                if total is not None:
                    labels: Labels = (
                        ("device", dev.name),
                        ("function", "hca" if function.kind == "hca" else "bridge"),
                        ("bdf", function.bdf),
                        ("severity", severity),
                    )
                    errors.add(labels, float(total))
        _iommu(iommu, dev.name, path.function)
    gpus = report.snapshot.facts.get("pcie_gpus")
    if isinstance(gpus, GpuPaths):
        for gpu in gpus.gpus:
            if gpu.function is not None:
                _iommu(iommu, "gpu", gpu.function)


def _iommu(samples: Samples, device: str, function: PcieFunction) -> None:
    if function.iommu_group is None:
        return
    labels: Labels = (
        ("device", device),
        ("bdf", function.bdf),
        ("group", function.iommu_group),
        ("type", inert(function.iommu_type or "")),
    )
    samples.add(labels, 1.0)
