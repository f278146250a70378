"""The support family: what a support bundle gathers for the vendor beyond what the checks read
(the catalogue, ``catalogue.toml``: sysinfo-snapshot's and sos report's items, compared one by
one in the README).

**When**: only ``ibdiag collect`` asks for it (``PipelineOptions.support``), from level standard
on; no check needs it, so a prolog's ``check --level standard`` never runs these commands.

**What it plans**: each ``command`` item once per target of its ``per`` (the HCAs' PCI functions,
the bridges above them, the netdevs, the ACTIVE InfiniBand ports, once where GPUs are), role
``support-<item> <target>``, with the item's own timeout (capped by ``--command-timeout``), under
the collection's one runner and deadline, concurrently with the checks' commands. A fallback
(``flint`` for ``mstflint``, ``mlxconfig`` for ``mstconfig``) runs at once when the first gives
nothing. A name that may not go on a command line is planned refused. The bridges the lspci
family already reads (between a GPU and its HCA) are not read twice: their row points at its run.

**What it gives**: ``Snapshot.facts["support"]`` (``SupportInventory``): one row per item and
target (collected, absent, no permission, timed out, failed, not started, not applicable) for
the manifest table, and what the system section shows: the OFED release, the driver modules,
each HCA's firmware (running, stored, PSID). The catalogue's files are read with sysfs
(``ibdiag.sources.support_files``).
"""

from __future__ import annotations

from typing import Dict, Iterator, List, NamedTuple, Optional, Tuple

from ibdiag.facts.outcome import NoData, RunOutcome
from ibdiag.facts.pcie import PcieChain
from ibdiag.facts.support import (
    HcaFirmware,
    ItemRow,
    ItemStatus,
    SupportFiles,
    SupportInventory,
)
from ibdiag.families import Planned, Runs, Update, outcome_of
from ibdiag.families.support import parsers
from ibdiag.families.support.catalogue import Item, load
from ibdiag.model import CommandRun, Snapshot
from ibdiag.roles import Role
from ibdiag.sources import names
from ibdiag.sources.pcie import BDF

SOURCE = "support"
LEVEL = "standard"
ORDER = 90  # after the families whose runs its family rows count (they are all recorded by then)
FAMILY = "support"
FALLBACK = "fallback"

_STATUS = {
    NoData.NOT_STARTED: ItemStatus.NOT_STARTED,
    NoData.NOT_INSTALLED: ItemStatus.ABSENT,
    NoData.NO_PERMISSION: ItemStatus.NO_PERMISSION,
    NoData.TIMED_OUT: ItemStatus.TIMED_OUT,
}


class Target(NamedTuple):
    """One target of an item: its name in the role and the table, the placeholders it fills,
    why it may not go on a command line (None: it may), and the role of a run another family
    makes of the same command (the lspci family's bridges)."""

    name: str
    fill: Dict[str, str]
    refused: Optional[str] = None
    elsewhere: Optional[Role] = None


def role(item: Item, target: str, fallback: bool = False) -> Role:
    """``support-mstflint_query mlx5_0`` (``support-mstflint_query-fallback mlx5_0``)."""
    return Role(FAMILY, f"{item.id}-{FALLBACK}" if fallback else item.id, target)


def plan(snap: Snapshot) -> List[Planned]:
    """Each command item on each of its targets (module docstring)."""
    planned = []
    for item in load().of_kind("command"):
        for target in targets(item, snap):
            if target.elsewhere is not None:
                continue
            second = None
            if item.fallback is not None:
                second = Planned(
                    role(item, target.name, fallback=True), item.argv(target.fill, fallback=True),
                    timeout_s=item.timeout_s,
                )  # fmt: skip
            planned.append(
                Planned(
                    role(item, target.name),
                    item.argv(target.fill),
                    second,
                    refused=target.refused,
                    timeout_s=item.timeout_s,
                )
            )
    return planned


def targets(item: Item, snap: Snapshot) -> List[Target]:
    """The targets of ``item`` on this node, in the node's order (none: not applicable)."""
    per = item.per
    if per == "node":
        return [Target("", {})]
    if per == "gpus":
        return [Target("", {})] if snap.gpus else []
    if per == "hca":
        return [
            Target(
                dev.name,
                {"bdf": dev.pci.address, "hca": dev.name},
                names.device_name_problem(dev.name),
            )
            for dev in snap.devices
            if dev.pci is not None and BDF.fullmatch(dev.pci.address)
        ]
    if per == "pcie_path":
        return list(_pcie_targets(snap))
    if per in ("netdev", "ethernet_netdev"):
        seen: Dict[str, Target] = {}
        for dev in snap.devices:
            for port in dev.ports:
                netdev = port.netdev
                if netdev is None or (per == "ethernet_netdev" and port.link_layer != "Ethernet"):
                    continue
                problem = names.netdev_name_problem(netdev.name)
                seen.setdefault(netdev.name, Target(netdev.name, {"netdev": netdev.name}, problem))
        return list(seen.values())
    if per == "active_ib_port":
        return [
            Target(
                dev.target(port),
                {"hca": dev.name, "port": str(port.number)},
                names.device_name_problem(dev.name),
            )
            for dev in snap.devices
            for port in dev.ports
            if port.is_infiniband and port.state == 4
        ]
    return []


def _pcie_targets(snap: Snapshot) -> Iterator[Target]:
    """Each HCA's function and the bridges above it, root port first, each once; a bridge the
    lspci family reads already (ACS, between a GPU and its HCA) names that run instead."""
    from ibdiag.families import lspci

    theirs = set(lspci.bridges(snap))
    seen = set()
    for dev in snap.devices:
        path = dev.facts.get("pcie_path")
        bdfs = path.path() if isinstance(path, PcieChain) else []
        if not bdfs and dev.pci is not None:
            bdfs = [dev.pci.address]
        for bdf in bdfs:
            if bdf in seen or not BDF.fullmatch(bdf):
                continue
            seen.add(bdf)
            yield Target(bdf, {"bdf": bdf}, None, lspci.role(bdf) if bdf in theirs else None)


# -- interpreting ------------------------------------------------------------------------------


def interpret(snap: Snapshot, runs: Runs) -> Update:
    """The node's ``facts["support"]``; nothing when no support item was run (a check's run)."""
    if not runs.of(FAMILY):
        return Update()
    rows: List[ItemRow] = []
    for item in load().item:
        if item.kind == "command":
            rows.extend(_command_rows(item, snap, runs))
        elif item.kind == "family":
            rows.append(_family_row(item, runs))
    inventory = SupportInventory(
        rows=rows,
        ofed=_ofed(runs),
        modules=_modules(runs),
        firmware=_firmware(snap, runs),
    )
    return Update(node={"facts": {"support": inventory}})


def _command_rows(item: Item, snap: Snapshot, runs: Runs) -> Iterator[ItemRow]:
    found = targets(item, snap)
    files = snap.facts.get("support_files")
    uid = files.collector_uid if isinstance(files, SupportFiles) else None
    if not found:
        yield ItemRow(
            item=item.id, status=ItemStatus.NOT_APPLICABLE, source=" ".join(item.command or []),
            reason=_NOT_APPLICABLE.get(item.per or "", "nothing to run it on"),
        )  # fmt: skip
        return
    for target in found:
        if target.elsewhere is not None:
            run = runs.get(target.elsewhere)
            yield _row(item, target.name, run, f"left to the run {target.elsewhere}", uid=uid)
            continue
        run = runs.get(role(item, target.name))
        second = runs.get(role(item, target.name, fallback=True))
        if second is not None and (_usable(second, item) or run is None or run.not_found):
            yield _row(item, target.name, second, None, first=run, uid=uid)
        else:  # the first tool's own failure says more than its fallback's absence
            yield _row(item, target.name, run, "was not run", uid=uid)


_NOT_APPLICABLE = {
    "hca": "no HCA with a PCI address",
    "pcie_path": "no HCA with a PCI address",
    "netdev": "no HCA port has a netdev",
    "ethernet_netdev": "no Ethernet (RoCE) port",
    "active_ib_port": "no ACTIVE InfiniBand port",
    "gpus": "no NVIDIA GPU on the PCI bus",
}


def _usable(run: CommandRun, item: Item) -> bool:
    """What the collector's fallback rule calls usable: exited 0 with output (for an item
    with ``partial_output``, any output it ended by itself)."""
    return _gave_output(run) and (run.succeeded or item.partial_output)


def _gave_output(run: CommandRun) -> bool:
    """Printed something and ended by itself (not killed at its timeout or by a signal)."""
    return bool(run.stdout.strip()) and not run.timed_out and not (run.rc or 0) < 0


def _row(
    item: Item,
    target: str,
    run: Optional[CommandRun],
    missing: Optional[str],
    first: Optional[CommandRun] = None,
    uid: Optional[int] = None,
) -> ItemRow:
    """The row of one run: collected when it exited 0 with output (or, for an item with
    ``partial_output``, any output: modinfo naming one module it lacks, the exit noted). A
    root-only item (``root``) that failed when the collector was not root (``uid``) is "no
    permission": what it printed (mstflint's "cannot open device", sminfo's "can't open UMAD
    port") is what a tool that may not reach the device says."""
    if run is None:
        return ItemRow(item=item.id, target=target, status=ItemStatus.NOT_STARTED, reason=missing)
    outcome = outcome_of(run)
    status, reason = _status(run, outcome, item.partial_output)
    if item.root and status is ItemStatus.FAILED and uid not in (None, 0):
        status, reason = ItemStatus.NO_PERMISSION, f"needs root (collected as uid {uid}): {reason}"
    if first is not None and status is ItemStatus.ABSENT:
        first_outcome = outcome_of(first)
        if first_outcome.no_data is NoData.NOT_INSTALLED:
            reason = f"neither {first_outcome.tool} nor {outcome.tool} is installed"
    return ItemRow(
        item=item.id, target=target, status=status, source=outcome.command, reason=reason,
        duration_s=run.duration_s, size=len(run.stdout.encode("utf-8", "surrogatepass")),
    )  # fmt: skip


def _status(
    run: CommandRun, outcome: RunOutcome, partial_output: bool = False
) -> Tuple[ItemStatus, Optional[str]]:
    if _gave_output(run) and (not run.rc or partial_output):
        reason = f"exited {run.rc}: {run.failure()}" if run.rc else None
        return ItemStatus.COLLECTED, reason
    if outcome.no_data is None:
        return ItemStatus.COLLECTED, None if run.stdout.strip() else "printed nothing"
    status = _STATUS.get(outcome.no_data, ItemStatus.FAILED)
    return status, outcome.reason or outcome.no_data.value


def _family_row(item: Item, runs: Runs) -> ItemRow:
    """One row for what an ibdiag family ran: collected when any of its runs gave output."""
    done = runs.of(item.family or "")
    tools = sorted({run.argv[0] for run in done if run.argv})
    source = ", ".join(tools)
    if not done:
        return ItemRow(
            item=item.id, status=ItemStatus.NOT_APPLICABLE, source=item.family or "",
            reason="the checks planned nothing for it here",
        )  # fmt: skip
    statuses = [_status(run, outcome_of(run)) for run in done]
    collected = sum(1 for status, _ in statuses if status is ItemStatus.COLLECTED)
    duration = round(sum(run.duration_s or 0.0 for run in done), 6)
    size = sum(len(run.stdout.encode("utf-8", "surrogatepass")) for run in done)
    if collected == len(done):
        status, reason = ItemStatus.COLLECTED, None
    else:
        failed = [(status, why) for status, why in statuses if status is not ItemStatus.COLLECTED]
        status = ItemStatus.COLLECTED if collected else failed[0][0]
        reason = f"{len(done) - collected} of {len(done)} runs: {failed[0][1]}"
    return ItemRow(
        item=item.id, status=status, source=source, reason=reason, duration_s=duration, size=size
    )


# -- the system section's facts -----------------------------------------------------------------


def _output(runs: Runs, item_id: str, target: str = "") -> Optional[str]:
    """The output of an item's run (or of its fallback) on ``target``, when it gave any."""
    item = load().get(item_id)
    if item is None:
        return None
    for candidate in (role(item, target), role(item, target, fallback=True)):
        run = runs.get(candidate)
        if run is not None and _usable(run, item):
            return run.stdout
    return None


def _ofed(runs: Runs) -> Optional[str]:
    text = _output(runs, "ofed_info")
    return parsers.parse_ofed_info(text) if text is not None else None


def _modules(runs: Runs):
    text = _output(runs, "modinfo")
    return parsers.parse_modinfo(text) if text is not None else []


def _firmware(snap: Snapshot, runs: Runs) -> List[HcaFirmware]:
    """Each HCA's firmware identity, from mstflint/flint q, devlink dev info and ethtool -i of
    its netdevs: the first source that names a field gives it."""
    devlink_text = _output(runs, "devlink_dev_info")
    devlink = parsers.parse_devlink_dev_info(devlink_text) if devlink_text else {}
    by_bdf: Dict[str, Dict[str, Optional[str]]] = {}
    for dev in snap.devices:
        for port in dev.ports:
            text = _output(runs, "ethtool_driver", port.netdev.name) if port.netdev else None
            if text:
                parsed = parsers.parse_ethtool_driver(text)
                if parsed["bdf"]:
                    by_bdf.setdefault(parsed["bdf"], parsed)
    found = []
    for dev in snap.devices:
        bdf = dev.pci.address.lower() if dev.pci is not None else None
        sources: List[Tuple[str, Dict[str, Optional[str]]]] = []
        flint_text = _output(runs, "mstflint_query", dev.name)
        if flint_text:
            sources.append(("mstflint q", parsers.parse_flint_query(flint_text)))
        if bdf in devlink:
            sources.append(("devlink dev info", devlink[bdf]))
        if bdf in by_bdf:
            sources.append(("ethtool -i", by_bdf[bdf]))
        if not sources:
            continue
        fields = {}
        for key in ("psid", "running", "stored", "board_serial", "security"):
            fields[key] = next((got[key] for _, got in sources if got.get(key)), None)
        found.append(
            HcaFirmware(hca=dev.name, bdf=bdf, sources=[name for name, _ in sources], **fields)
        )
    return found
