"""The lspci family: the ACS control of each PCIe bridge between a GPU and its HCA.

**What it plans** (level standard): ``lspci -vvv -s <BDF>`` (role ``lspci <BDF>``) for each
bridge peer traffic between an HCA and a GPU would cross below their common ancestor
(``ibdiag.facts.pcie.between``, from the sysfs paths read at level quick), at most
``MAX_BRIDGES``. One run per bridge rather than one ``lspci -vvv`` of the whole bus: a GPU
server's full listing is close to a megabyte (927 KB in gpud's H100 capture), past any sane
output cap, while a bridge's block is 3-4 KB; the runs are concurrent, each a few config-space
reads. Nothing is planned where no GPU shares a bridge with an HCA.

**What it gives**: ``Snapshot.facts["lspci_acs"]`` (``ibdiag.facts.lspci.LspciAcs``): each
bridge's ACSCtl bits, or why there are none: no ACS capability, ``<access denied>`` (not root:
extended capabilities are beyond what a user may read), or the run's outcome.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from ibdiag.facts.lspci import BridgeAcs, LspciAcs
from ibdiag.facts.outcome import NoData
from ibdiag.facts.pcie import GpuPaths, PcieChain, between
from ibdiag.families import Planned, Runs, Update, outcome_of
from ibdiag.model import Snapshot
from ibdiag.roles import Role

SOURCE = "lspci"
LEVEL = "standard"
FAMILY = "lspci"
MAX_BRIDGES = 64  # an 8-GPU, 8-HCA HGX board has about 16 switch downstream ports
ACCESS_DENIED = "capabilities <access denied>: lspci needs root to read extended capabilities"

_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_ACS_CTL = re.compile(r"^\s*ACSCtl:\s*(?P<bits>.*)$")
_BIT = re.compile(r"^(?P<name>[A-Za-z]+)(?P<on>[+-])$")


def role(bdf: str) -> Role:
    return Role(FAMILY, target=bdf)


def bridges(snap: Snapshot) -> List[str]:
    """The bridges between a GPU and an HCA of ``snap``, each once, in the HCAs' order."""
    gpus = snap.facts.get("pcie_gpus")
    if not isinstance(gpus, GpuPaths):
        return []
    found: Dict[str, None] = {}
    for dev in snap.devices:
        path = dev.facts.get("pcie_path")
        if not isinstance(path, PcieChain):
            continue
        for gpu in gpus.gpus:
            for bdf in between(path, gpu):
                found.setdefault(bdf, None)
    return list(found)


def plan(snap: Snapshot) -> List[Planned]:
    """One ``lspci -vvv -s BDF`` per bridge between a GPU and an HCA."""
    return [
        Planned(role(bdf), ["lspci", "-vvv", "-s", bdf])
        for bdf in bridges(snap)[:MAX_BRIDGES]
        if _BDF.match(bdf)
    ]


def interpret(snap: Snapshot, runs: Runs) -> Update:
    """The node's ``facts["lspci_acs"]``; nothing when lspci was not run."""
    found: Dict[str, BridgeAcs] = {}
    for run in runs.of(FAMILY):
        if run.role is None:
            continue
        bdf = run.role.target
        outcome = outcome_of(run)
        if outcome.no_data is not None:
            found[bdf] = BridgeAcs(bdf=bdf, outcome=outcome)
            continue
        denied, has_acs, bits, problems = parse(run.stdout)
        if not run.stdout.strip():
            outcome = outcome.model_copy(
                update={"no_data": NoData.GARBAGE, "reason": f"lspci printed nothing for {bdf}"}
            )
        found[bdf] = BridgeAcs(
            bdf=bdf,
            outcome=outcome,
            denied=denied,
            has_acs=has_acs,
            acs_ctl=bits,
            problems=problems,
        )
    if not found:
        return Update()
    return Update(node={"facts": {"lspci_acs": LspciAcs(bridges=found)}})


def parse(text: str) -> Tuple[bool, Optional[bool], Dict[str, bool], List[str]]:
    """(capabilities denied, has an ACS capability, ACSCtl bits, problems) of one device's
    ``lspci -vvv`` block. ``has_acs`` is None when it cannot be told (denied, or no text)."""
    denied = "Capabilities: <access denied>" in text
    problems: List[str] = []
    bits: Dict[str, bool] = {}
    seen_ctl = False
    for line in text.splitlines():
        match = _ACS_CTL.match(line)
        if match is None:
            continue
        seen_ctl = True
        for token in match.group("bits").split():
            bit = _BIT.match(token)
            if bit is None:
                problems.append(f"ACSCtl: not a flag: '{token[:40]}'")
                continue
            bits[bit.group("name")] = bit.group("on") == "+"
        break  # one device per run: its first ACSCtl line
    has_acs: Optional[bool]
    if seen_ctl:
        has_acs = True
    elif denied or not text.strip():
        has_acs = None
    else:
        has_acs = "Access Control Services" in text
        if has_acs:
            problems.append("an Access Control Services capability without an ACSCtl line")
    return denied, has_acs, bits, problems[:8]
