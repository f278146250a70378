"""A flap only the switch saw, end to end on the simulated fabric (tests/fabric_sim.py: ibsim +
opensm, the real smpquery/perfquery/ibportstate): the switch port at the far end of our cable is
disabled and re-enabled between two ``ibdiag check --level standard --history PATH`` runs while
our own port stays ACTIVE in sysfs (the flap was shorter than the gap between the runs), and the
history puts it on the cable from the far end's LinkDownedCounter.

The fabric: leaf switch ``leaf07`` ("MF0;leaf07:MQM9700/U1") with our node's mlx5_0 on port 21
(4X QDR), the subnet manager's HCA on port 36 (opensm attaches there: tools run as opensm's own
HCA made it crash under ibsim 0.10) and a management node's HCA on port 35, from which the admin
runs ``ibportstate`` (our node's only way to the switch is the port being disabled).

What the simulator does and what it leaves out (ibsim-utils 0.10, the same in 0.12's source):

* ``ibportstate LID 21 disable`` (a SubnSet(PortInfo) with PortPhysicalState Disabled, through
  umad2sim, as on a real fabric) is modelled as far as ibsim models a link: the port shows
  PhysLinkState Disabled and nothing crosses the cable any more (ibsim forwards no packet
  through a port that is not LinkUp: our node's perfquery of the switch port fails). ibsim does
  not carry the physical state to the cable's other end: our HCA's simulated port stays
  Active, as our sysfs tree does. ``ibportstate LID 21 enable`` (PortPhysicalState Polling) is
  modelled too.
* Link training is not: a port ibsim puts in Polling stays there; only a cable linked again
  (the console's ``ReLink``, after ``Unlink``) is LinkUp. So after ``enable`` the harness
  unlinks and relinks the cable as the training step, and opensm sweeps it back to Active.
* ibsim never counts a link down (``LinkDownedCounter`` changes only through the console's
  ``PerformanceSet``, ``Unlink``/``ReLink`` and PortInfo sets leave it alone), where a real
  switch's PMA counts the disable's link down once. So when the disable has taken the link
  down, the harness sets the switch port's counter to what it read before plus one, through the
  console - the one value this test supplies; what it asserts is read back with perfquery over
  the cable, as the check reads it.

Healthy looks like: the first run has no outage (``link.flaps`` passes, observed 0); after the
flap the second run's ``link.flaps`` warns for mlx5_0:1 with observed 1, naming the cable exactly
as ``link.partner`` names it in the same report and saying it was "seen by the far end's
LinkDowned", and the report's history holds one outage, source ``far-end``, whose downs are the
rise perfquery read on the switch port. The event and the far end's counter agree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest
from fabric_sim import Cable, Fabric, Hca, Switch, Topology, parse_dotted
from sysfs_builder import mlx5_node, write_node

LEAF = "leaf07"
LEAF_PORT = 21
DEVICE = "mlx5_0"
NODE_HCA = "node01-mlx5_0"
SM_HCA = "ufm01-mlx5_0"
ADMIN_HCA = "mgmt01-mlx5_0"
TOPOLOGY = Topology(
    [
        Hca(SM_HCA, 1, "ufm01 mlx5_0"),  # the first HCA cabled at port 1: opensm attaches here
        Switch(LEAF, 36, "MF0;leaf07:MQM9700/U1"),
        Hca(ADMIN_HCA, 1, "mgmt01 mlx5_0"),
        Hca(NODE_HCA, 1, f"node01 {DEVICE}"),
    ],
    [
        Cable(SM_HCA, 1, LEAF, 36),
        Cable(ADMIN_HCA, 1, LEAF, 35),
        Cable(NODE_HCA, 1, LEAF, LEAF_PORT),
    ],
)
CABLE = f"{DEVICE}:1<->{LEAF}/{LEAF_PORT}"
DEADLINE_S = 20.0
STATE_TIMEOUT_S = 15.0


class Node:
    """Our node: a sysfs tree with mlx5_0 ACTIVE at 4X QDR, PATH with the fabric's shims."""

    def __init__(self, root: Path, fabric: Fabric) -> None:
        self.fabric = fabric
        self.sysfs = root / "sys"
        hcas = mlx5_node(1, port=dict(rate="40 Gb/sec (4X QDR)"))
        write_node(str(self.sysfs), hcas)
        shims = fabric.shim_dir(root / "bin", {DEVICE: NODE_HCA}, tools=("smpquery", "perfquery"))
        self.env = dict(os.environ, PATH=f"{shims}{os.pathsep}{os.environ.get('PATH', '')}")

    def check(self, history: Path) -> dict:
        """``ibdiag check --level standard --json --history PATH``: the report."""
        argv = [sys.executable, "-m", "ibdiag", "check", "--level", "standard", "--json"]
        argv += ["--sysfs", str(self.sysfs), "--deadline", str(DEADLINE_S)]
        argv += ["--history", str(history)]
        done = subprocess.run(
            argv, env=self.env, capture_output=True, text=True, timeout=120, check=False
        )
        assert done.stdout, done.stderr
        assert all(p.poll() is None for p in self.fabric._opensm), "opensm died"
        return json.loads(done.stdout)

    def far_counters(self, lid: int) -> subprocess.CompletedProcess:
        """``perfquery -C mlx5_0 -P 1 LID 21`` through the shim: the switch port's counters,
        read over our cable as the check reads them."""
        argv = ["perfquery", "-C", DEVICE, "-P", "1", "-t", "200", str(lid), str(LEAF_PORT)]
        return subprocess.run(
            argv, env=self.env, capture_output=True, text=True, timeout=30, check=False
        )

    def far_link_downed(self, lid: int) -> int:
        done = self.far_counters(lid)
        assert done.returncode == 0, (done.stdout, done.stderr)
        return int(parse_dotted(done.stdout)["LinkDownedCounter"])


def results(report: dict, check_id: str) -> List[dict]:
    return [r for r in report["results"] if r["check_id"] == check_id]


def only(report: dict, check_id: str) -> dict:
    found = results(report, check_id)
    assert len(found) == 1, (check_id, found)
    return found[0]


def switch_port(fabric: Fabric) -> Dict[str, str]:
    """leaf07 port 21's PortInfo, read from the management node (DR path 0,1)."""
    return fabric.portinfo(ADMIN_HCA, 1, path="0,1", port_number=LEAF_PORT)


def ibportstate(fabric: Fabric, lid: int, operation: str) -> subprocess.CompletedProcess:
    """``ibportstate -t 200 LID 21 OPERATION`` run on the management node."""
    done = fabric.run(ADMIN_HCA, "ibportstate", "-t", "200", str(lid), str(LEAF_PORT), operation)
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done


@pytest.fixture()
def node(tmp_path):
    with Fabric(tmp_path / "fabric", TOPOLOGY) as fabric:
        yield Node(tmp_path, fabric)


def test_a_switch_port_disabled_and_enabled_between_runs_is_a_flap_on_the_cable(node, tmp_path):
    fabric = node.fabric
    history = tmp_path / "h.db"
    lid = fabric.switch_lid(NODE_HCA)

    first = node.check(history)
    flaps = only(first, "link.flaps")
    assert (flaps["target"], flaps["status"], flaps["observed"]) == (f"{DEVICE}:1", "pass", 0)
    assert first["snapshot"]["history"]["outages"] == []
    # the far end's PMA was read over the cable: this run's sample holds its LinkDownedCounter
    assert only(first, "counters.partner")["status"] == "pass"
    before = node.far_link_downed(lid)

    # the admin disables the switch port: the link goes down, nothing crosses the cable
    assert "Disable may be irreversible" in ibportstate(fabric, lid, "disable").stdout
    fabric.wait_for(
        lambda: switch_port(fabric).get("PhysLinkState") == "Disabled",
        STATE_TIMEOUT_S,
        "leaf07[21] PhysLinkState Disabled",
    )
    fabric.wait_for(
        lambda: node.far_counters(lid).returncode != 0,
        STATE_TIMEOUT_S,
        "perfquery of leaf07[21] over the disabled cable failing",
    )
    # what the switch's PMA counts for that link down (ibsim counts none itself)
    fabric.set_counter(LEAF, LEAF_PORT, "LinkDownedCounter", before + 1)

    # the admin enables it again (Polling); the link trains (ReLink) and the SM makes it Active
    ibportstate(fabric, lid, "enable")
    assert switch_port(fabric).get("PhysLinkState") == "Polling"
    fabric.unlink(LEAF, LEAF_PORT)
    fabric.relink(LEAF, LEAF_PORT)
    fabric.wait_port_state(NODE_HCA, 1, "Active", timeout=STATE_TIMEOUT_S)
    fabric.wait_for(
        lambda: switch_port(fabric).get("LinkState") == "Active",
        STATE_TIMEOUT_S,
        "leaf07[21] Active again",
    )
    after = node.far_link_downed(lid)
    rise = after - before
    assert rise == 1, (before, after)

    second = node.check(history)
    partner = only(second, "link.partner")
    assert partner["target"] == CABLE and partner["status"] == "pass", partner
    flaps = only(second, "link.flaps")
    assert flaps["target"] == f"{DEVICE}:1", flaps
    assert flaps["status"] == "warn" and flaps["observed"] == 1, flaps
    assert f" on {partner['target']} " in flaps["message"], flaps["message"]
    assert "seen by the far end's LinkDowned" in flaps["message"], flaps["message"]
    outages = second["snapshot"]["history"]["outages"]
    assert len(outages) == 1, outages
    (outage,) = outages
    assert (outage["source"], outage["downs"]) == ("far-end", rise), outage
    assert (outage["device"], outage["port"]) == (DEVICE, 1), outage
