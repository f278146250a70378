"""The character devices user space needs: a uverbs device per HCA, a umad device per
InfiniBand port (and an issm device per port where the site runs an SM on the node)."""

from __future__ import annotations

from typing import Dict, Iterator, List, Tuple

from ibdiag.check_results import about
from ibdiag.facts.char_devices import CLASS_MODULE, MAD_CLASS, VERBS_CLASS, CharDevices
from ibdiag.model import Device, Result, Snapshot, Status
from ibdiag.registry import check
from ibdiag.targets import graded_devices
from ibdiag.thresholds import Thresholds

# What a missing device costs.
_VERBS_COST = "verbs programs (NCCL, MPI, ib_write_bw) cannot open the HCA"
_MAD_COST = "MAD tools (perfquery, ibstat's queries, an SM) cannot reach the port"


@check(
    "hca.char_devices",
    title="Each HCA has its uverbs device and each InfiniBand port its umad device",
    needs={"sysfs"},
)
def char_devices(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: ``class/infiniband_verbs`` lists one ``uverbsN`` naming each HCA (its
    ``ibdev``), and ``class/infiniband_mad`` one ``umadN`` for each InfiniBand port (its
    ``ibdev`` and ``port``); with ``expect_issm``, one ``issmN`` for each InfiniBand port too.

    Why it matters: ``/dev/infiniband/uverbsN`` is what every verbs program opens. Without it
    the port reads ACTIVE/LinkUp and every job using the HCA fails (NVSentinel checks for
    this): ``ib_uverbs`` was not loaded, or the driver's registration failed half-way. A
    missing ``umadN`` breaks perfquery, ibstat's MADs and an SM on the node, not traffic
    (warn). ``issm`` only exists for an SM to claim the port: required only with
    ``expect_issm`` (NVSentinel once marked every GB300 node unhealthy for lacking it).
    A tree with neither class directory nor ``module/`` (a partial sysfs capture) is a skip.

    What to do: `modprobe ib_uverbs ib_umad` (and make them load at boot: rdma-core's
    rdma.service / `/etc/rdma/modules/`); a device still missing after that: dmesg for the
    driver's registration errors, then reload mlx5_ib.
    """
    found = snap.facts.get("char_devices")
    for dev in graded_devices(snap, th):
        result = about(dev.name, [VERBS_CLASS, MAD_CLASS])
        if not isinstance(found, CharDevices):
            yield result(status=Status.SKIP, message="character devices not read (older bundle?)")
            continue
        yield _graded(result, dev, found, th)


def _graded(result, dev: Device, found: CharDevices, th: Thresholds) -> Result:
    if len(found.missing) == 2 and found.modules is None:
        return result(
            status=Status.SKIP,
            message="neither class/infiniband_verbs nor class/infiniband_mad nor module/ is in "
            "this sysfs tree (a partial capture?)",
        )
    failures: List[str] = []
    warnings: List[str] = []
    module_missing = _modules_missing(found)
    verbs = found.serving("verbs", dev.name)
    if VERBS_CLASS in found.missing:
        failures.append(f"no {VERBS_CLASS} ({module_missing.get(VERBS_CLASS)}): {_VERBS_COST}")
    elif not verbs:
        failures.append(f"no uverbs device names {dev.name}: {_VERBS_COST}")
    elif len(verbs) > 1:
        warnings.append(f"{len(verbs)} uverbs devices name it ({_names(verbs)})")
    ib_ports = [port.number for port in dev.ports if port.is_infiniband]
    wanted: List[Tuple[str, str, str]] = [("mad", "umad", _MAD_COST)]
    if th.expect_issm:
        wanted.append(("issm", "issm", "the node's SM cannot claim the port"))
    for kind, prefix, cost in wanted:
        if MAD_CLASS in found.missing:
            if ib_ports:
                warnings.append(f"no {MAD_CLASS} ({module_missing.get(MAD_CLASS)}): {cost}")
            continue
        lacking = [str(n) for n in ib_ports if not found.serving(kind, dev.name, n)]
        if lacking:
            warnings.append(f"no {prefix} device for port {', '.join(lacking)}: {cost}")
    have = _names(verbs) or "no uverbs"
    if failures or warnings:
        return result(
            status=Status.FAIL if failures else Status.WARN,
            message="; ".join(failures + warnings),
            observed=have,
            expected="one uverbs per HCA, one umad per InfiniBand port",
            subject="no uverbs" if failures else "no umad",
            hint="modprobe ib_uverbs ib_umad (and load them at boot); still missing: dmesg for "
            "mlx5_ib registration errors, then reload mlx5_ib",
        )
    mads = [d for d in found.mad if d.ibdev == dev.name]
    return result(status=Status.PASS, message=f"{have}; {_names(mads) or 'no InfiniBand port'}")


def _modules_missing(found: CharDevices) -> Dict[str, str]:
    """For each missing class: what sysfs says about the module that makes it."""
    said = {}
    for directory in found.missing:
        module = CLASS_MODULE.get(directory, "?")
        if found.modules is None:
            said[directory] = f"{module}: no module/ directory to tell"
        elif found.modules.get(module):
            said[directory] = f"{module} is loaded all the same"
        else:
            said[directory] = f"{module} is not loaded"
    return said


def _names(devices) -> str:
    return ", ".join(d.name for d in devices)
