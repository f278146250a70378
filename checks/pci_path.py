"""The PCIe path of each HCA: AER errors on it and the bridges above it, the IOMMU domain of
the HCA's and GPUs' groups, and ACS redirect on the bridges between GPUs and HCAs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Iterator, List, Optional, Tuple

from ibdiag.facts.pcie import GpuPaths, PcieChain, PcieFunction, between
from ibdiag.model import Device, Result, Snapshot, Status
from ibdiag.registry import check
from ibdiag.targets import graded_devices
from ibdiag.thresholds import Thresholds

if TYPE_CHECKING:  # pci.acs runs at level standard: its facts are imported there
    from ibdiag.facts.lspci import BridgeAcs

# Correctable AER errors (receiver errors, bad TLPs/DLLPs the link layer replayed) faster than
# this per hour since the baseline warn. Module default until Thresholds has a setting for it.
AER_CORRECTABLE_WARN_PER_HOUR = 60.0
# The IOMMU domain the site expects ("passthrough", "translated", or None: report only).
EXPECT_IOMMU: Optional[str] = None
PASSTHROUGH_TYPES = ("identity",)
TRANSLATED_TYPES = ("DMA", "DMA-FQ")
NOT_READ = "PCIe path not read (a snapshot from an ibdiag before issue 25, or no PCI function)"
_SEVERITY_NAMES = {"fatal": "fatal", "nonfatal": "non-fatal", "correctable": "correctable"}
_RANK = {Status.PASS: 0, Status.SKIP: 0, Status.WARN: 1, Status.FAIL: 2}


def _setting(th: Thresholds, name: str, default):
    """A setting of ``th`` that may not exist yet (module default meanwhile)."""
    value = getattr(th, name, None)
    return default if value is None else value


def _path(dev: Device) -> Optional[PcieChain]:
    found = dev.facts.get("pcie_path")
    return found if isinstance(found, PcieChain) else None


def _where(function: PcieFunction, index: Optional[int]) -> str:
    """``the HCA 0000:01:00.0`` / ``the bridge 0000:00:01.0 above it``."""
    if index is None:
        return f"the HCA {function.bdf}"
    above = "above it" if index == 0 else f"{index + 1} levels above it"
    return f"the bridge {function.bdf} {above}"


def _evidence(dev: Device, path: PcieChain) -> List[str]:
    files = [f"{dev.path}/device/aer_dev_{{correctable,nonfatal,fatal}}"]
    files += [f"bus/pci/devices/{bridge.bdf}/aer_dev_*" for bridge in path.bridges]
    return files


def _increase(now: Dict[str, int], then: Dict[str, int]) -> str:
    """``BadTLP +3, RxErr +1``: the named errors that went up."""
    ups = [
        f"{name} +{count - then.get(name, 0)}"
        for name, count in sorted(now.items())
        if name != "TOTAL" and count > then.get(name, 0)
    ]
    return ", ".join(ups[:4])


def _named(counts: Dict[str, int]) -> str:
    ups = [f"{name} {count}" for name, count in sorted(counts.items()) if name != "TOTAL" and count]
    return ", ".join(ups[:4])


def _baseline_path(baseline: Optional[Snapshot], dev: Device) -> Optional[PcieChain]:
    if baseline is None:
        return None
    then = baseline.device(dev.name)
    return _path(then) if then is not None else None


def _grade_function(
    function: PcieFunction,
    where: str,
    then: Optional[PcieFunction],
    hours: Optional[float],
    reset: bool,
    rate_limit: float,
) -> List[Tuple[Status, str]]:
    """The findings on one function: (status, text) for each severity worth saying."""
    found: List[Tuple[Status, str]] = []
    for severity in ("fatal", "nonfatal", "correctable"):
        now = function.aer.get(severity)
        if now is None:
            continue
        label = _SEVERITY_NAMES[severity]
        old = then.aer.get(severity) if then is not None and not reset else None
        if old is not None and now["TOTAL"] < old.get("TOTAL", 0):
            old = None  # went down: the function was reset; graded as since the reset
        if old is not None:
            delta = now["TOTAL"] - old.get("TOTAL", 0)
            if delta <= 0:
                continue
            detail = _increase(now, old)
            detail = f" ({detail})" if detail else ""
            if severity != "correctable":
                found.append(
                    (Status.FAIL, f"{label} +{delta} since the baseline on {where}{detail}")
                )
                continue
            rate = delta / hours if hours else None
            if rate is not None and rate > rate_limit:
                found.append(
                    (
                        Status.WARN,
                        f"correctable +{delta} ({rate:.0f}/h > {rate_limit:g}/h) on "
                        f"{where}{detail}",
                    )
                )
            else:
                found.append((Status.PASS, f"correctable +{delta} on {where}{detail}"))
            continue
        total = now["TOTAL"]
        if total <= 0:
            continue
        detail = _named(now)
        detail = f" ({detail})" if detail else ""
        status = Status.PASS if severity == "correctable" else Status.WARN
        found.append((status, f"{label} {total} since boot on {where}{detail}"))
    return found


@check("pci.aer", title="No PCIe AER errors on the HCA or the bridges above it", needs={"sysfs"})
def pci_aer(snap: Snapshot, th: Thresholds, baseline: Optional[Snapshot]) -> Iterator[Result]:
    """Healthy: no fatal or non-fatal PCIe AER error counted on the HCA's PCI function or on
    any bridge above it (the kernel's `aer_dev_fatal`, `aer_dev_nonfatal`,
    `aer_dev_correctable` in sysfs) since the baseline, and correctable ones rare.

    Why it matters: an uncorrectable PCIe error (a malformed or poisoned TLP, a completion
    timeout, a data-link protocol error) loses a transaction between the HCA and host or GPU
    memory: the driver may reset the function or the job sees a fatal completion error. A
    stream of correctable errors (receiver errors, bad TLPs the link layer replays) is a
    marginal slot, riser or retimer that costs bandwidth first and fails later. The kernel's
    ABI notes an error may be counted at the link's other end, so the bridges above the HCA
    (its switch port, the root port) are read too, and the message says which one counted.

    With a baseline: fatal or non-fatal increases fail; correctable ones faster than
    AER_CORRECTABLE_WARN_PER_HOUR (60/h) warn. A count that went down or a reboot since the
    baseline (boot_id changed) is a reset, not an increase. Without a baseline: lifetime fatal
    or non-fatal counts warn ("since boot": they may be old), correctable ones are reported.
    No AER statistics (a kernel without CONFIG_PCIEAER, a VF, no AER capability) is a skip.

    What to do: reseat the HCA (and its riser or cable to a PCIe switch tray); check the
    slot's BIOS speed and retimer settings; `dmesg | grep -i aer` names the error and the
    function; a bridge that counts while the HCA does not points at the slot or the switch;
    send the bundle to the hardware vendor.
    """
    rate_limit = float(_setting(th, "aer_correctable_warn_per_hour", AER_CORRECTABLE_WARN_PER_HOUR))
    hours = None
    rebooted = False
    if baseline is not None:
        seconds = (snap.collected_at - baseline.collected_at).total_seconds()
        hours = seconds / 3600 if seconds > 0 else None
        rebooted = bool(snap.boot_id and baseline.boot_id and snap.boot_id != baseline.boot_id)
    for dev in graded_devices(snap, th):
        path = _path(dev)
        if path is None or path.function is None:
            why = path.unavailable if path is not None and path.unavailable else NOT_READ
            yield Result(target=dev.name, status=Status.SKIP, message=why)
            continue
        functions = [(path.function, None)] + [(b, i) for i, b in enumerate(path.bridges)]
        if all(not function.aer for function, _ in functions):
            problems = [p for function, _ in functions for p in function.problems]
            why = problems[0] if problems else path.function.aer_unavailable or "no AER data"
            yield Result(
                target=dev.name,
                status=Status.SKIP,
                message=f"{path.function.bdf}: {why}",
                evidence=_evidence(dev, path),
            )
            continue
        old_path = _baseline_path(baseline, dev)
        old = {}
        if old_path is not None:
            old = {f.bdf: f for f in [old_path.function, *old_path.bridges] if f is not None}
        findings: List[Tuple[Status, str]] = []
        for function, index in functions:
            then = old.get(function.bdf)
            where = _where(function, index)
            findings += _grade_function(function, where, then, hours, rebooted, rate_limit)
        worst = max((status for status, _ in findings), key=lambda s: _RANK[s], default=Status.PASS)
        shown = [text for status, text in findings if status == worst] or [
            text for _, text in findings
        ]
        count = len(functions)
        basis = "since the baseline" if old_path is not None and not rebooted else "since boot"
        if rebooted and old_path is not None:
            basis += " (rebooted since the baseline)"
        if not shown:
            message = f"no AER errors {basis} on {path.function.bdf} and {count - 1} bridge(s)"
        else:
            message = "; ".join(shown[:3]) + (f"; +{len(shown) - 3} more" if len(shown) > 3 else "")
        yield Result(
            target=dev.name,
            status=worst,
            message=message,
            observed=len([s for s, _ in findings if s == worst]) if shown else 0,
            expected=0,
            subject="pcie_aer",
            hint=None
            if worst == Status.PASS
            else "reseat the HCA/riser, check BIOS slot and retimer settings and "
            "`dmesg | grep -i aer`; a bridge counting points at the slot or switch",
            evidence=_evidence(dev, path),
        )


def _iommu_verdict(kind: Optional[str], expect: Optional[str]) -> Tuple[Status, str]:
    if expect is None:
        return Status.PASS, "reported only (no expect_iommu)"
    if expect == "passthrough":
        good = kind in PASSTHROUGH_TYPES
    else:
        good = kind in TRANSLATED_TYPES
    return (Status.PASS if good else Status.WARN), f"expected {expect}"


def _iommu_results(target: str, function: PcieFunction, expect: Optional[str], evidence: str):
    if function.iommu_group is None:
        bad = expect == "translated"
        return Result(
            target=target,
            status=Status.WARN if bad else Status.PASS,
            message=f"{function.bdf} is in no IOMMU group (IOMMU off)"
            + (", expected translated" if bad else ""),
            observed="none",
            expected=expect,
            evidence=[evidence],
        )
    if function.iommu_type is None:
        why = "; ".join(function.problems) or "no type file (a kernel before 5.11)"
        return Result(
            target=target,
            status=Status.SKIP,
            message=f"IOMMU group {function.iommu_group} of {function.bdf}: domain type "
            f"not read ({why})",
            evidence=[evidence],
        )
    status, said = _iommu_verdict(function.iommu_type, expect)
    return Result(
        target=target,
        status=status,
        message=f"IOMMU group {function.iommu_group} of {function.bdf} is "
        f"{function.iommu_type}, {said}",
        observed=function.iommu_type,
        expected=expect,
        subject="iommu",
        hint=None
        if status == Status.PASS
        else "boot with iommu=pt (intel_iommu=on iommu=pt / amd_iommu=on iommu=pt) or set "
        "the group's type to identity; see the NCCL troubleshooting guide on IOMMU",
        evidence=[evidence],
    )


@check("pci.iommu", title="IOMMU domain of the HCAs' and GPUs' groups", needs={"sysfs"})
def pci_iommu(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: the IOMMU domain type (`/sys/kernel/iommu_groups/<N>/type`) of each HCA's and
    each NVIDIA GPU's group is the one the site expects: `identity` (passthrough, `iommu=pt`)
    where `expect_iommu` is "passthrough", `DMA`/`DMA-FQ` where it is "translated". With no
    expectation the type is reported and passes.

    Why it matters: in a translated (`DMA`, `DMA-FQ`) domain every DMA of the HCA and every
    GPUDirect RDMA transfer is translated by the IOMMU, and peer traffic may be sent through
    the root complex: a public field note measured an H200 cluster with the IOMMU in DMA mode
    at about 100 GB/s NCCL bus bandwidth against about 337 GB/s expected. A function in no
    group (IOMMU off) passes unless a translated domain is expected; a kernel without the
    `type` file (before 5.11) is a skip. GPUs are graded when they were collected (level
    standard, source topology).

    What to do: boot with `iommu=pt` (with `intel_iommu=on` or `amd_iommu=on`) or set the
    group's type to `identity` before the driver binds; check the BIOS VT-d/AMD-Vi settings;
    `cat /sys/kernel/iommu_groups/*/type` shows the domains.
    """
    expect = _setting(th, "expect_iommu", EXPECT_IOMMU)
    for dev in graded_devices(snap, th):
        path = _path(dev)
        if path is None or path.function is None:
            why = path.unavailable if path is not None and path.unavailable else NOT_READ
            yield Result(target=dev.name, status=Status.SKIP, message=why)
            continue
        yield _iommu_results(dev.name, path.function, expect, f"{dev.path}/device/iommu_group")
    gpus = snap.facts.get("pcie_gpus")
    if isinstance(gpus, GpuPaths):
        for gpu in gpus.gpus:
            if gpu.function is None:
                continue
            bdf = gpu.function.bdf
            yield _iommu_results(f"gpu@{bdf}", gpu.function, expect, f"bus/pci/devices/{bdf}")


@check(
    "pci.acs",
    title="No ACS redirect between GPUs and their HCAs",
    needs={"sysfs", "topology", "lspci"},
    level="standard",
)
def pci_acs(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: on every PCIe bridge between a GPU and an HCA under the same PCIe switch (the
    bridges below their common ancestor, as on HGX boards), ACS redirect is off: `lspci -vvv`
    shows `ACSCtl: SrcValid- ... ReqRedir- CmpltRedir-`.

    Why it matters: with ACS request/completion redirect (or source validation) enabled on a
    switch port, peer-to-peer requests are sent up to the root complex instead of across the
    switch: GPUDirect RDMA between the GPU and the HCA slows sharply or hangs (NCCL's
    troubleshooting guide; gpud checks the same). An HCA that shares no switch with a GPU is
    a skip; lspci missing, or run without root (`Capabilities: <access denied>`) is a skip with
    the reason.

    What to do: disable ACS in the BIOS (or disable IO virtualization / VT-d where the board
    ties them), or clear it after each boot with `setpci -s <BDF> ECAP_ACS+0x6.w=0000` on the
    bridge named; keep it on only where VM isolation needs it.
    """
    gpus = snap.facts.get("pcie_gpus")
    if not isinstance(gpus, GpuPaths):
        yield Result(target="node", status=Status.SKIP, message="GPU PCIe paths not collected")
        return
    if not gpus.gpus:
        yield Result(target="node", status=Status.SKIP, message="no NVIDIA GPU on this node")
        return
    from ibdiag.facts.lspci import LspciAcs

    found = snap.facts.get("lspci_acs")
    bridges: Dict[str, BridgeAcs] = found.bridges if isinstance(found, LspciAcs) else {}
    for dev in graded_devices(snap, th):
        path = _path(dev)
        if path is None or path.function is None:
            yield Result(target=dev.name, status=Status.SKIP, message=NOT_READ)
            continue
        pairs = [(gpu, between(path, gpu)) for gpu in gpus.gpus]
        pairs = [(gpu, crossed) for gpu, crossed in pairs if crossed]
        if not pairs:
            yield Result(
                target=dev.name,
                status=Status.SKIP,
                message=f"no GPU shares a PCIe switch with {path.function.bdf}",
            )
            continue
        yield _acs_result(dev, path, pairs, bridges)


def _acs_result(dev: Device, path: PcieChain, pairs, bridges: Dict[str, BridgeAcs]) -> Result:
    redirected: List[str] = []
    unread: List[str] = []
    read = 0
    for gpu, crossed in pairs:
        for bdf in crossed:
            acs = bridges.get(bdf)
            if acs is None:
                unread.append(f"{bdf}: lspci not run")
            elif acs.outcome.no_data is not None:
                unread.append(f"{bdf}: {acs.outcome.reason or acs.outcome.no_data.value}")
            elif acs.denied:
                unread.append(f"{bdf}: capabilities <access denied> (lspci needs root)")
            else:
                read += 1
                bits = acs.redirects()
                if bits:
                    flags = " ".join(f"{bit}+" for bit in bits)
                    text = f"bridge {bdf} between {dev.name} ({path.function.bdf}) and GPU "  # type: ignore[union-attr]
                    redirected.append(f"{text}{gpu.function.bdf}: ACSCtl {flags}")
    evidence = [f"lspci -vvv -s {bdf}" for bdf in sorted({b for _, c in pairs for b in c})]
    if redirected:
        unique = list(dict.fromkeys(redirected))
        return Result(
            target=dev.name,
            status=Status.WARN,
            message="ACS redirect on "
            + "; ".join(unique[:2])
            + (f"; +{len(unique) - 2} more" if len(unique) > 2 else ""),
            observed="redirect",
            expected="off",
            subject="acs",
            hint="disable ACS in the BIOS, or `setpci -s <BDF> ECAP_ACS+0x6.w=0000` on the bridge",
            evidence=evidence,
        )
    if unread and not read:
        return Result(
            target=dev.name,
            status=Status.SKIP,
            message="ACS not read: " + "; ".join(list(dict.fromkeys(unread))[:2]),
            evidence=evidence,
        )
    gpus = ", ".join(dict.fromkeys(gpu.function.bdf for gpu, _ in pairs))
    return Result(
        target=dev.name,
        status=Status.PASS,
        message=f"ACS redirect off on the bridges between {dev.name} and GPU {gpus}"
        + (f" ({len(unread)} not read)" if unread else ""),
        observed="off",
        expected="off",
        evidence=evidence,
    )
