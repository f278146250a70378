"""The support family's plan and interpreter (``ibdiag.families.support``) on a hand-built node
with runs of the real captures (tests/captures/support): one row per catalogue item and target
with the status of each outcome, the fallback rules (mstflint -> flint), the rows that do not
apply, the family rows, and the ``ofed``, ``modules`` and ``firmware`` facts."""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

import pytest
from snapshots import device, netdev, pci, port, snapshot, with_runs

from ibdiag.facts.pcie import GpuPaths, PcieChain, PcieFunction, PciePath
from ibdiag.facts.support import HcaFirmware, ItemRow, ItemStatus, SupportInventory
from ibdiag.families import Runs, support
from ibdiag.families import lspci as lspci_family
from ibdiag.families.support.catalogue import load
from ibdiag.model import CommandRun, Snapshot
from ibdiag.roles import Role

CAPTURES = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "captures", "support"
)
ETH_NETDEV = "enp202s0f0np0"  # the Dell OEM ethtool -i capture's interface (its bus 0000:ca:00.0)


def capture(folder: str, name: str) -> str:
    with open(os.path.join(CAPTURES, folder, name), encoding="utf-8") as handle:
        return handle.read()


def node(gpus: bool = False) -> Snapshot:
    """mlx5_0 and mlx5_1: the two PFs of the devlink capture (0000:08:00.0/.1), InfiniBand,
    ACTIVE, IPoIB ib0/ib1; mlx5_2: the Dell ConnectX-5 of the ethtool -i capture (0000:ca:00.0),
    Ethernet (RoCE), port 1 DOWN."""
    eth = netdev(ETH_NETDEV, type=1, mode=None)
    devices = [
        device("mlx5_0", [port(1, netdev=netdev("ib0"))], pci=pci("0000:08:00.0")),
        device("mlx5_1", [port(1, netdev=netdev("ib1"))], pci=pci("0000:08:00.1")),
        device(
            "mlx5_2",
            [port(1, state=1, phys_state=3, link_layer="Ethernet", netdev=eth)],
            pci=pci("0000:ca:00.0"),
        ),
    ]
    snap = snapshot(devices)
    if gpus:
        snap = snap.model_copy(update={"gpus": [pci("0000:09:00.0", vendor_id="0x10de")]})
    return snap


def item(item_id: str):
    found = load().get(item_id)
    assert found is not None, item_id
    return found


def ran(
    item_id: str,
    target: str = "",
    stdout: str = "",
    rc: Optional[int] = 0,
    fallback: bool = False,
    fill: Optional[Dict[str, str]] = None,
    **kwargs,
) -> CommandRun:
    """A run of the catalogue's ``item_id`` on ``target`` as the collector records it."""
    it = item(item_id)
    argv = it.argv(fill or _fill(target), fallback=fallback)
    return CommandRun(
        argv=argv, role=support.role(it, target, fallback), rc=rc, stdout=stdout, **kwargs
    )


_BDFS = {"mlx5_0": "0000:08:00.0", "mlx5_1": "0000:08:00.1", "mlx5_2": "0000:ca:00.0"}


def _fill(target: str) -> Dict[str, str]:
    hca, _, number = target.partition(":")
    return {"hca": hca, "bdf": _BDFS.get(hca, target), "port": number or "1", "netdev": target}


def absent(item_id: str, target: str = "", fallback: bool = False) -> CommandRun:
    return ran(item_id, target, rc=None, not_found=True, fallback=fallback)


def inventory(snap: Snapshot, *runs: CommandRun) -> SupportInventory:
    """``support.interpret`` alone, on ``runs`` recorded by role."""
    update = support.interpret(snap, Runs({run.key: run for run in runs}))
    found = update.node["facts"]["support"]
    assert isinstance(found, SupportInventory)
    return found


def rows(inv: SupportInventory) -> Dict[Tuple[str, str], ItemRow]:
    keyed: Dict[Tuple[str, str], ItemRow] = {}
    for row in inv.rows:
        assert (row.item, row.target) not in keyed, row
        keyed[(row.item, row.target)] = row
    return keyed


# -- the node's runs, from the captures ---------------------------------------------------------


def captured_runs() -> List[CommandRun]:
    devlink_json = capture("devlink", "handmade-cx7-two-pfs-dev-info.json")
    modinfo = capture("modinfo", "skyao-debian12-ofed-24.10-mlx5_core.txt") + capture(
        "modinfo", "handmade-builtin-ib_core.txt"
    )
    return [
        ran("ofed_info", stdout=capture("ofed_info", "daocloud-23.07-colon.txt"), duration_s=0.2),
        ran(  # modinfo names the module it lacks and prints the others: collected, exit noted
            "modinfo", stdout=modinfo, rc=1, stderr=capture("modinfo", "handmade-not-found.stderr")
        ),
        ran("mstflint_query", "mlx5_0", capture("mstflint", "ironic-running-differs.txt")),
        absent("mstflint_query", "mlx5_1"),
        absent("mstflint_query", "mlx5_1", fallback=True),
        ran("mstflint_query", "mlx5_2", rc=1, stderr="-E- Cannot open Device: 0000:ca:00.0\n"),
        ran("mstconfig_query", "mlx5_0", rc=None, permission_denied=True),
        ran("devlink_dev_info", stdout=devlink_json),
        ran(
            "devlink_dev_param", stdout=capture("devlink", "handmade-param-flow-steering-smfs.txt")
        ),
        ran("lscpu", stdout=capture("lscpu", "yuzhao-neoverse-n1-lscpu.txt")),
        absent("numactl"),
        ran("rdma_link", stdout=capture("rdma", "blktests-rdma-link.txt")),
        ran("rdma_resource", stdout=capture("rdma", "linux-rdma-max-qp-resource.txt")),
        ran("ip_link", stdout=capture("ip", "kheib-ipoib-child-ip-d-link.txt")),
        ran("ethtool_driver", ETH_NETDEV, capture("ethtool", "notes-cx5-dell-oem-psid-driver.txt")),
        ran("ethtool_module", ETH_NETDEV, capture("ethtool", "ice-qsfp28-mellanox-dac-module.txt")),
        ran("ethtool_fec", ETH_NETDEV, capture("ethtool", "notes-cx7-fec.txt")),
        ran("sminfo", "mlx5_0:1", capture("sminfo", "notes-one-line-master.txt")),
        ran("sminfo", "mlx5_1:1", rc=None, timed_out=True, duration_s=5.0),
        ran("saquery_sm", "mlx5_0:1", capture("saquery", "handmade-two-sms.txt")),
    ]


@pytest.fixture(scope="module")
def collected() -> SupportInventory:
    return inventory(node(), *captured_runs())


# -- rows: one per item and target, the status of each outcome ----------------------------------


def test_one_row_per_command_item_and_target_and_one_per_family_item(collected):
    catalogue = load()
    snap = node()
    expected = []
    for it in catalogue.item:
        if it.kind == "command":
            found = support.targets(it, snap)
            expected += [(it.id, t.name) for t in found] if found else [(it.id, "")]
        elif it.kind == "family":
            expected.append((it.id, ""))
    assert [(row.item, row.target) for row in collected.rows] == expected


def test_collected_row_names_its_command_time_and_size(collected):
    row = rows(collected)[("ofed_info", "")]
    assert row.status is ItemStatus.COLLECTED and row.reason is None
    assert row.source == "ofed_info -s" and row.duration_s == 0.2
    assert row.size == len("MLNX_OFED_LINUX-23.07-0.5.1.2:\n")


def test_modinfo_partial_output_is_collected_with_the_exit_noted(collected):
    row = rows(collected)[("modinfo", "")]
    assert row.status is ItemStatus.COLLECTED
    assert row.reason == "exited 1: modinfo exited 1: modinfo: ERROR: Module ib_ipoib not found."


@pytest.mark.parametrize(
    "key, status, reason",
    [
        (("numactl", ""), ItemStatus.ABSENT, "numactl is not installed (not found on PATH)"),
        (("mstconfig_query", "mlx5_0"), ItemStatus.NO_PERMISSION, "mstconfig: permission denied"),
        (("sminfo", "mlx5_1:1"), ItemStatus.TIMED_OUT,
         "sminfo timed out after 5.0 s and was killed"),
        (("mstflint_query", "mlx5_2"), ItemStatus.FAILED,
         "mstflint exited 1: -E- Cannot open Device: 0000:ca:00.0"),
        (("mstconfig_query", "mlx5_1"), ItemStatus.NOT_STARTED, "was not run"),
        (("dkms", ""), ItemStatus.NOT_STARTED, "was not run"),
    ],
)  # fmt: skip
def test_each_outcome_has_its_status_and_reason(collected, key, status, reason):
    row = rows(collected)[key]
    assert (row.status, row.reason) == (status, reason)


def test_a_non_partial_item_with_output_and_a_non_zero_exit_failed():
    run = ran("lscpu", stdout=capture("lscpu", "yuzhao-neoverse-n1-lscpu.txt"), rc=2)
    row = rows(inventory(node(), run))[("lscpu", "")]
    assert row.status is ItemStatus.FAILED
    assert row.reason == "lscpu exited 2:   NUMA node1 CPU(s):    64-127"  # its last line


def test_a_run_that_printed_nothing_is_collected_and_says_so():
    row = rows(inventory(node(), ran("dkms", stdout="")))[("dkms", "")]
    assert (row.status, row.reason) == (ItemStatus.COLLECTED, "printed nothing")


# -- the fallback rules (mstflint -> flint) -----------------------------------------------------


FLINT_Q = capture("mstflint", "ironic-no-running.txt")


def test_mstflint_absent_and_flint_collected_is_collected_from_flint():
    inv = inventory(
        node(),
        absent("mstflint_query", "mlx5_0"),
        ran("mstflint_query", "mlx5_0", FLINT_Q, fallback=True),
    )
    row = rows(inv)[("mstflint_query", "mlx5_0")]
    assert (row.status, row.reason) == (ItemStatus.COLLECTED, None)
    assert row.source == "flint -d 0000:08:00.0 q"
    (fw,) = inv.firmware
    assert (fw.hca, fw.psid, fw.running) == ("mlx5_0", "MT_0000000228", "20.35.1012")


def test_mstflint_failed_and_flint_absent_is_mstflints_failure():
    inv = inventory(
        node(),
        ran("mstflint_query", "mlx5_0", rc=3, stderr="-E- Failed to open device\n"),
        absent("mstflint_query", "mlx5_0", fallback=True),
    )
    row = rows(inv)[("mstflint_query", "mlx5_0")]
    assert (row.status, row.source) == (ItemStatus.FAILED, "mstflint -d 0000:08:00.0 q")
    assert row.reason == "mstflint exited 3: -E- Failed to open device"


def test_neither_mstflint_nor_flint_installed(collected):
    row = rows(collected)[("mstflint_query", "mlx5_1")]
    assert row.status is ItemStatus.ABSENT
    assert row.reason == "neither mstflint nor flint is installed"


def test_mstflint_failed_and_flint_failed_is_mstflints_failure():
    inv = inventory(
        node(),
        ran("mstflint_query", "mlx5_0", rc=3, stderr="-E- mstflint: no\n"),
        ran("mstflint_query", "mlx5_0", rc=4, stderr="-E- flint: no\n", fallback=True),
    )
    row = rows(inv)[("mstflint_query", "mlx5_0")]
    assert (row.status, row.reason) == (ItemStatus.FAILED, "mstflint exited 3: -E- mstflint: no")


# -- not applicable, family rows ----------------------------------------------------------------


def test_no_ethernet_port_and_no_gpu_are_not_applicable():
    ib_only = snapshot([device("mlx5_0", pci=pci("0000:08:00.0"))])
    found = rows(inventory(ib_only, ran("ofed_info", stdout="MLNX_OFED_LINUX-24.10-1.1.4.0\n")))
    for item_id, reason in [
        ("ethtool_module", "no Ethernet (RoCE) port"),
        ("ethtool_fec", "no Ethernet (RoCE) port"),
        ("nvidia_smi_query", "no NVIDIA GPU on the PCI bus"),
    ]:
        row = found[(item_id, "")]
        assert (row.status, row.reason) == (ItemStatus.NOT_APPLICABLE, reason)


def test_no_active_infiniband_port_and_no_hca():
    found = rows(inventory(snapshot([]), ran("ofed_info", stdout="")))
    assert found[("sminfo", "")].reason == "no ACTIVE InfiniBand port"
    assert found[("mstflint_query", "")].reason == "no HCA with a PCI address"
    assert found[("ethtool_driver", "")].reason == "no HCA port has a netdev"


def test_a_gpu_node_plans_and_rows_nvidia_smi():
    smi = capture("nvidia_smi", "gpud-rtx4090-535-first-gpu.txt")
    row = rows(inventory(node(gpus=True), ran("nvidia_smi_query", stdout=smi)))[
        ("nvidia_smi_query", "")
    ]
    assert (row.status, row.source, row.size) == (ItemStatus.COLLECTED, "nvidia-smi -q", len(smi))


def _family_run(step: str, rc: Optional[int], stdout: str = "", **kwargs) -> CommandRun:
    return CommandRun(
        argv=["perfquery", f"-{step}"], role=Role("perfquery", step, "mlx5_0:1"), rc=rc,
        stdout=stdout, duration_s=0.5, **kwargs,
    )  # fmt: skip


def test_family_rows_count_the_families_runs(collected):
    assert rows(collected)[("perfquery", "")].status is ItemStatus.NOT_APPLICABLE
    assert rows(collected)[("perfquery", "")].reason == "the checks planned nothing for it here"
    both = inventory(
        node(),
        ran("ofed_info", stdout="x\n"),
        _family_run("x", 0, "PortSelect:......................1\n"),
        _family_run("E", None, not_found=True),
    )
    row = rows(both)[("perfquery", "")]
    assert (row.status, row.source, row.duration_s) == (ItemStatus.COLLECTED, "perfquery", 1.0)
    assert row.reason == "1 of 2 runs: perfquery is not installed (not found on PATH)"
    none = inventory(node(), ran("ofed_info", stdout="x\n"), _family_run("x", None, timed_out=True))
    assert rows(none)[("perfquery", "")].status is ItemStatus.TIMED_OUT


def test_nothing_of_the_family_ran_gives_no_inventory():
    assert support.interpret(node(), Runs({})).node == {}


# -- the system section's facts -----------------------------------------------------------------


def test_ofed_release_and_modules_from_the_captures(collected):
    assert collected.ofed == "MLNX_OFED_LINUX-23.07-0.5.1.2"
    assert [(m.name, m.version, m.inbox) for m in collected.modules] == [
        ("mlx5_core", "24.10-2.1.8", False),
        ("ib_core", None, True),
    ]


def test_firmware_psid_running_stored_and_pending_per_hca(collected):
    assert collected.firmware == [
        HcaFirmware(
            hca="mlx5_0", bdf="0000:08:00.0", psid="MT_0000000228", running="20.34.1002",
            stored="20.35.1012", board_serial="MT2314XZ00YA", security=None,
            sources=["mstflint q", "devlink dev info"],
        ),
        HcaFirmware(
            hca="mlx5_1", bdf="0000:08:00.1", psid="MT_0000000894", running="28.41.1000",
            stored="28.41.1000", board_serial="MT2314XZ00YA", sources=["devlink dev info"],
        ),
        HcaFirmware(
            hca="mlx5_2", bdf="0000:ca:00.0", psid="DEL0000000016", running="16.32.2004",
            sources=["ethtool -i"],
        ),
    ]  # fmt: skip
    assert [fw.pending for fw in collected.firmware] == [True, False, False]


def test_devlink_stored_differing_is_pending_without_mstflint():
    devlink_json = capture("devlink", "handmade-cx7-stored-differs.json")
    inv = inventory(node(), ran("devlink_dev_info", stdout=devlink_json))
    by_hca = {fw.hca: fw for fw in inv.firmware}
    assert (by_hca["mlx5_1"].running, by_hca["mlx5_1"].stored) == ("28.41.1000", "28.43.1014")
    assert by_hca["mlx5_1"].pending


def test_a_failed_stored_query_is_no_pending_update():
    devlink_json = capture("devlink", "handmade-cx7-stored-query-failed.json")
    inv = inventory(node(), ran("devlink_dev_info", stdout=devlink_json))
    by_hca = {fw.hca: fw for fw in inv.firmware}
    assert by_hca["mlx5_0"].stored is None and not by_hca["mlx5_0"].pending


def test_the_whole_interpretation_path_sets_the_same_inventory(collected):
    snap = with_runs(node(), *captured_runs())
    assert not any(key.startswith("interpret.") for key in snap.problems), snap.problems
    assert snap.facts["support"] == collected


# -- plan ---------------------------------------------------------------------------------------


def planned(snap: Snapshot) -> Dict[str, Tuple[List[str], Optional[List[str]], Optional[str]]]:
    """{role: (argv, fallback argv, refused)}"""
    return {
        str(p.role): (p.argv, p.fallback.argv if p.fallback else None, p.refused)
        for p in support.plan(snap)
    }


def test_plan_argv_per_target():
    found = planned(node(gpus=True))
    assert found["support-ofed_info"] == (["ofed_info", "-s"], None, None)
    assert found["support-mstflint_query mlx5_1"] == (
        ["mstflint", "-d", "0000:08:00.1", "q"], ["flint", "-d", "0000:08:00.1", "q"], None,
    )  # fmt: skip
    assert found["support-mstconfig_query mlx5_2"][:2] == (
        ["mstconfig", "-d", "0000:ca:00.0", "-e", "q"],
        ["mlxconfig", "-d", "0000:ca:00.0", "-e", "q"],
    )
    assert found["support-lspci 0000:08:00.0"][0] == ["lspci", "-vvv", "-s", "0000:08:00.0"]
    assert found["support-ethtool_driver ib0"][0] == ["ethtool", "-i", "ib0"]
    assert found[f"support-ethtool_driver {ETH_NETDEV}"][0] == ["ethtool", "-i", ETH_NETDEV]
    assert found[f"support-ethtool_module {ETH_NETDEV}"][0] == ["ethtool", "-m", ETH_NETDEV]
    assert "support-ethtool_module ib0" not in found  # IPoIB: no Ethernet module page
    assert found["support-sminfo mlx5_0:1"][0] == ["sminfo", "-C", "mlx5_0", "-P", "1"]
    assert found["support-saquery_sm mlx5_1:1"][0] == ["saquery", "-s", "-C", "mlx5_1", "-P", "1"]
    assert "support-sminfo mlx5_2:1" not in found  # Ethernet, and DOWN
    assert found["support-nvidia_smi_query"][0] == ["nvidia-smi", "-q"]
    assert "support-nvidia_smi_query" not in planned(node())


def test_plan_timeouts_are_the_catalogues():
    timeouts = {str(p.role): p.timeout_s for p in support.plan(node())}
    assert timeouts["support-mstflint_query mlx5_0"] == 10
    assert timeouts["support-ofed_info"] == 5


def test_plan_refuses_a_hostile_netdev_name():
    evil = "ib0;reboot"
    snap = snapshot([device("mlx5_0", [port(1, netdev=netdev(evil))], pci=pci("0000:08:00.0"))])
    _, _, refused = planned(snap)[f"support-ethtool_driver {evil}"]
    assert refused is not None and "not safe on a command line" in refused
    row = rows(inventory(snap, ran("ofed_info", stdout="x\n")))[("ethtool_driver", evil)]
    assert row.status is ItemStatus.NOT_STARTED


def test_plan_refuses_a_hostile_hca_name_for_every_hca_and_port_item():
    evil = "mlx5_0 --help"
    snap = snapshot([device(evil, pci=pci("0000:08:00.0"))])
    found = planned(snap)
    for role in (f"support-mstflint_query {evil}", f"support-sminfo {evil}:1"):
        assert found[role][2] is not None and "not safe on a command line" in found[role][2]
    assert found["support-lspci 0000:08:00.0"][2] is None  # a BDF is no name


def _chain(kind: str, bdf: str, *bridges: str) -> PcieChain:
    """A function and its bridges, nearest first (the root port last)."""
    return PcieChain(
        function=PcieFunction(bdf=bdf, kind=kind),  # type: ignore[arg-type]
        bridges=[PcieFunction(bdf=b, kind="bridge") for b in bridges],
    )


def _pcie_node() -> Snapshot:
    """mlx5_0 under root port 00:01.0 -> switch 05:00.0 -> 06:00.0, a GPU under the same switch
    (06:04.0): the lspci family reads 06:00.0 and 06:04.0 (ACS between the GPU and the HCA)."""
    hca = _chain("hca", "0000:08:00.0", "0000:06:00.0", "0000:05:00.0", "0000:00:01.0")
    gpu = _chain("gpu", "0000:09:00.0", "0000:06:04.0", "0000:05:00.0", "0000:00:01.0")
    dev = device("mlx5_0", pci=pci("0000:08:00.0"))
    dev = dev.model_copy(update={"facts": {"pcie_path": PciePath(**hca.model_dump())}})
    snap = snapshot([dev])
    return snap.model_copy(update={"facts": {**snap.facts, "pcie_gpus": GpuPaths(gpus=[gpu])}})


def test_plan_reads_each_hop_once_and_skips_the_bridges_the_lspci_family_reads():
    snap = _pcie_node()
    assert lspci_family.bridges(snap) == ["0000:06:00.0", "0000:06:04.0"]
    lspci = [p.argv[-1] for p in support.plan(snap) if p.role.step == "lspci"]
    assert lspci == ["0000:00:01.0", "0000:05:00.0", "0000:08:00.0"]


def test_the_bridge_the_lspci_family_read_points_at_its_run():
    snap = _pcie_node()
    theirs = CommandRun(
        argv=["lspci", "-vvv", "-s", "0000:06:00.0"], role=lspci_family.role("0000:06:00.0"),
        rc=0, stdout="06:00.0 PCI bridge: ...\n",
    )  # fmt: skip
    found = rows(inventory(snap, ran("ofed_info", stdout="x\n"), theirs))
    assert found[("lspci", "0000:06:00.0")].status is ItemStatus.COLLECTED
    assert found[("lspci", "0000:06:00.0")].source == "lspci -vvv -s 0000:06:00.0"
    unread = found[("lspci", "0000:00:01.0")]
    assert (unread.status, unread.reason) == (ItemStatus.NOT_STARTED, "was not run")
    without = rows(inventory(snap, ran("ofed_info", stdout="x\n")))[("lspci", "0000:06:00.0")]
    assert without.reason == "left to the run lspci 0000:06:00.0"
