"""The node ``ibdiag collect`` gathers a support bundle on (issue 26): 8 HCAs, 8 GPUs, every
tool the support catalogue and the standard families run, each printing output of a real node's
size. Shared by tests/families/test_support_budget_slow.py and benchmarks/bench_collect.py.

**sysfs** (tests/sysfs_builder.py, tests/pcie_tree.py): 8 ConnectX-6 HCAs ``mlx5_0..7``, each
under its own root port and PCIe switch (``0000:00:0N.0/0000:X0:00.0/0000:X1:00.0/0000:X2:00.0``,
AER files, IOMMU groups), one ACTIVE InfiniBand port each with its IPoIB netdev ``ib0..7``, and an
NVIDIA H100 beside each HCA under the same switch (``0000:X4:00.0``): 8 GPUs.
**procfs**: hostname, boot_id, stat, modules (tests/stubs.write_procfs), version, cmdline.
**rootfs**: etc/os-release, etc/modprobe.d/mlnx.conf, etc/security/limits.conf, etc/nccl.conf
(no opensm.conf: this node runs no subnet manager). The catalogue's other sysfs files too:
module parameters, DMI identity, NUMA nodes' cpulists, each port's GIDs with gid_attrs.

**Tools** (``StubBin``, alone on PATH). Real captures where the repository has them, else a real
capture from /work/research-26.md (its §3, cited per constant below) repeated to a real tool's
size; hand-made only where no capture exists (said so). Per run on this node:

=========================  =========================================  ====================
tool (argv)                output                                     size (this node)
=========================  =========================================  ====================
ofed_info -s               DaoCloud-docs capture                      31 B
modinfo (6 modules)        skyao capture, its parm: lines repeated    ~4.2 KB a module, 25 KB
dkms status                hand-made (dkms's status line format)      130 B
mstflint/flint -d BDF q    ironic-python-agent capture (NVIDIA's)     560 B per HCA
mstconfig/mlxconfig -e q   nic-configuration-operator rows repeated   20 KB per HCA
devlink -j dev info        Jiri Pirko's capture as JSON, per PF       3.7 KB
devlink dev param show     mlx5.rst's shape, 12 params per PF         1 KB per HCA, 8 KB
devlink -j health show     tests/captures/devlink (hand-made)         0.9 KB
lspci -vvv -s BDF          HCA: tests/fixtures/lspci CX-7 block       4.9 KB per HCA
                           bridge: tests/captures/lspci Matisse       4.5 KB per bridge (24)
lscpu, numactl --hardware  Yu Zhao's capture                          0.9 KB, 210 B
rdma link / resource show  Yi Zhang's / Chien Tin Tung's line         ~60 B per port/HCA
ibdev2netdev -v            shared/fixtures/rdma_link -v line          180 B per port
ip -d -s link show         Kamal Heib's capture + ip -s counters      880 B per netdev, 7 KB
ip -d address show         the same + inet/inet6 lines                1.1 KB per netdev
ethtool -i / -S NETDEV     wenxu's capture / tests/fixtures/ethtool   250 B / 17 KB per netdev
sminfo / saquery -s        Open MPI list line / hand-made (saquery.c) 95 B / 170 B per port
nvidia-smi -q              gpud capture's GPU block repeated          ~10 KB per GPU, 83 KB
nvidia-smi topo -m         tests/fixtures/nvidia_smi_topo 8xH100      3.3 KB
perfquery, smpquery        tests/fixtures/perfquery, captures/ibsim-partner   1-2 KB per run
ibstat, ibv_devinfo        tests/fixtures (8 of 9 CAs; the 2-PF one)  2.9 KB, ~2 KB
dmesg, journalctl -k       tests/fixtures/dmesg gpud H100 boot        12 KB
mlxlink, mstlink           tests/captures/mlxlink NDR OSFP (JSON)     2.3 KB per port
=========================  =========================================  ====================

``SupportNode(root, delay=S)``: every stub sleeps S seconds before answering (the benchmark's
``--delay``); ``hang_all(mark)``, ``absent_all()``, ``floods(tool, mib)`` change every tool.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Dict, List, Optional

import stubs as S
from pcie_tree import behind_switch, switch_of, write_gpu, write_path
from standard_node import DEVLINK_HEALTHY, MLXLINK_HEALTHY, PERFQUERY_T_HEALTHY
from sysfs_builder import HcaSpec, mlx5_node, write_node

HCAS = 8
GPUS = 8

# Every tool the catalogue's command items and the standard families run on this node.
TOOLS = (
    "ofed_info", "modinfo", "dkms", "mstflint", "flint", "mstconfig", "mlxconfig", "devlink",
    "lspci", "lscpu", "numactl", "rdma", "ibdev2netdev", "ip", "ethtool", "sminfo", "saquery",
    "nvidia-smi", "perfquery", "smpquery", "ibstat", "ibv_devinfo", "dmesg", "journalctl",
    "mlxlink", "mstlink",
)  # fmt: skip

# -- real captures from /work/research-26.md §3 (source per constant) -----------------------------

# §3.1: DaoCloud/DaoCloud-docs docs/zh/docs/network/modules/spiderpool/install/ofed_driver.md.
OFED_INFO = "MLNX_OFED_LINUX-23.07-0.5.1.2:\n"

# §3.2: skyao/learning-computer-hardware @ 51b0227b, content/zh-cn/nic/cx5-huawei-sp350/driver/
# debian12/index.md (OFED 24.10, Debian 12): the lines shown, signature cut.
MODINFO_HEAD = """filename:       /lib/modules/6.1.0-31-amd64/updates/dkms/{name}.ko
alias:          auxiliary:mlx5_core.eth-rep
alias:          auxiliary:mlx5_core.eth
basedon:        Korg 6.8-rc4
version:        24.10-2.1.8
license:        Dual BSD/GPL
description:    Mellanox 5th generation network adapters (ConnectX series) core driver
author:         Eli Cohen <eli@mellanox.com>
srcversion:     78352976D87E8F24553D352
depends:        mlxdevm,mlx_compat,tls,pci-hyperv-intf,psample,mlxfw
retpoline:      Y
name:           {name}
vermagic:       6.1.0-31-amd64 SMP preempt mod_unload modversions
signer:         DKMS module signing key
"""
MODINFO_PARMS = """parm:           num_of_groups:Eswitch offloads number of big groups in FDB table. Valid range 1 - 1024. Default 15 (uint)
parm:           debug_mask:debug mask: 1 = dump cmd data, 2 = dump cmd exec time, 3 = both. Default=0 (uint)
parm:           prof_sel:profile selector. Valid range 0 - 4 (uint)
"""  # noqa: E501
SUPPORT_CAPTURES = os.path.join(S.TESTS_DIR, "captures", "support")  # with their SOURCES.md


def _support_capture(folder: str, name: str) -> str:
    with open(os.path.join(SUPPORT_CAPTURES, folder, name), encoding="utf-8") as handle:
        return handle.read()


MODULES = ("mlx5_core", "mlx5_ib", "ib_core", "ib_uverbs", "ib_umad", "ib_ipoib")

# §3.3: openstack/ironic-python-agent @ 119981a8 (Apache-2.0; NVIDIA's test data).
MSTFLINT_Q = _support_capture("mstflint", "ironic-running-differs.txt")

# §3.4: Mellanox/nic-configuration-operator @ 18d2933d pkg/nvconfig/utils_test.go (Apache-2.0).
MSTCONFIG_HEAD = """Device #1:
----------

Device type:    ConnectX4
Configurations:                              Default         Current         Next Boot
"""
MSTCONFIG_ROWS = """*        KEEP_IB_LINK_UP_P2                  False(0)        True(1)         True(1)
         KEEP_LINK_UP_ON_BOOT_P2             False(0)        False(0)        False(0)
         ESWITCH_HAIRPIN_DESCRIPTORS         Array[0..7]     Array[0..7]     Array[0..7]
*        MEMIC_SIZE_LIMIT                    _256KB(1)       _256KB(1)       DISABLED(0)
"""  # noqa: E501
MSTCONFIG_TAIL = "The '*' shows parameters with next value different from default/current value.\n"

# §3.5: Jiri Pirko, netdev 2025-03-18 (20250318153627.95030-1-jiri@resnulli.us), ConnectX-7.
DEV_INFO_ONE = {
    "driver": "mlx5_core",
    "serial_number": "e4397f872caeed218000846daa7d2f49",
    "board.serial_number": "MT2314XZ00YA",
    "versions": {
        "fixed": {"fw.psid": "MT_0000000894"},
        "running": {"fw.version": "28.41.1000", "fw": "28.41.1000"},
        "stored": {"fw.version": "28.41.1000", "fw": "28.41.1000"},
    },
}

# §3.6: the healthy shape of mlx5.rst (a doc example), one block per parameter.
DEVLINK_PARAMS = (
    "flow_steering_mode", "enable_roce", "esw_port_metadata", "fdb_large_groups", "io_eq_size",
    "event_eq_size", "max_macs", "enable_eth", "enable_rdma", "enable_vnet", "enable_iwarp",
    "esw_multiport",
)  # fmt: skip

# §3.7, §3.8: Yi Zhang (linux-block 2022-10-12); Chien Tin Tung (linux-rdma 2022-06-27).
RDMA_LINK = "link {hca}/1 state ACTIVE physical_state LINK_UP netdev {netdev}\n"
RDMA_RESOURCE = "{index}: {hca}: pd 3 cq 27 qp 261933 cm_id 0 mr 0 ctx 1 srq 0\n"

# §3.15 and shared/fixtures/rdma_link (mixed-host ... -v): the ConnectX-6 VPI line.
IBDEV2NETDEV_V = (
    "{bdf} {hca} (MT4123 - MCX654105A-HCAT) ConnectX-6 VPI adapter card, HDR IB (200Gb/s) and "
    "200GbE, single-port QSFP56, Socket Direct fw 20.30.1004 port 1 (ACTIVE) ==> {netdev} (Up)\n"
)

# §3.9: Kamal Heib, linux-rdma 2020-09-29 (20200929060438.GA73375@kheib-workstation), with the
# counter lines ip -s adds (iproute2's print_link_stats64 layout).
IP_LINK = """{index}: {netdev}: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 4092 qdisc mq state UP mode DEFAULT group default qlen 256
    link/infiniband 00:00:1f:e3:fe:80:00:00:00:00:00:00:24:8a:07:03:00:a3:19:64 brd 00:ff:ff:ff:ff:12:40:1b:80:01:00:00:00:00:00:00:ff:ff:ff:ff promiscuity 0 minmtu 68 maxmtu 65520
    ipoib pkey  0xffff mode  datagram umcast  0000 addrgenmode eui64 numtxqueues 256 numrxqueues 256 gso_max_size 65536 gso_max_segs 65535
    altname ibp{index}s0
    RX:  bytes packets errors dropped  missed   mcast
    9837712934 22831911      0       0       0    1204
    RX errors:  length    crc   frame    fifo overrun
                     0      0       0       0       0
    TX:  bytes packets errors dropped carrier collsns
    9912377104 23001877      0       0       0       0
    TX errors: aborted   fifo  window heartbt transns
                     0      0       0       0       2
"""  # noqa: E501
IP_ADDR_EXTRA = """    inet 10.{index}.0.1/16 brd 10.{index}.255.255 scope global {netdev}
       valid_lft forever preferred_lft forever
    inet6 fe80::268a:703:a3:1964/64 scope link
       valid_lft forever preferred_lft forever
"""

# §3.10: wenxu, netdev 2020-07-31 (616cd09a-c0ba-68e1-5d72-96b0f9abd2e4@ucloud.cn).
ETHTOOL_I = """driver: mlx5_core
version: 5.0-0
firmware-version: 22.28.1002 (MT_0000000430)
expansion-rom-version:
bus-info: {bdf}
supports-statistics: yes
supports-test: yes
supports-eeprom-access: no
supports-register-dump: no
supports-priv-flags: yes
"""

# §3.13: Open MPI users list 2008-11-20 (single-line form).
SMINFO = "sminfo: sm lid 2 sm guid 0x2c90200259201, activity count 6881 priority 0 state 3 SMINFO_MASTER\n"  # noqa: E501
# §3.14: no capture exists: hand-made from infiniband-diags saquery.c dump_portinfo_record.
SAQUERY_S = """PortInfoRecord dump:
\tEndPortLid..............2
\tPortNum.................0
\tbase_lid................0x2
\tmaster_sm_base_lid......0x2
\tcapability_mask.........0x2510084A
"""

# §3.16: leptonai/gpud @ 4446606e pkg/nvidia-query/testdata/nvidia-smi-query.535.154.05.out.1.valid
# (Apache-2.0): the head and the first GPU block's lines shown there.
NVSMI_HEAD = """
==============NVSMI LOG==============

Timestamp                                 : Mon Jul  8 08:11:21 2024
Driver Version                            : 535.154.05
CUDA Version                              : 12.2

Attached GPUs                             : {count}
"""
NVSMI_GPU = """GPU {bdf}
    Product Name                          : NVIDIA GeForce RTX 4090
    Product Brand                         : GeForce
    Product Architecture                  : Ada Lovelace
    Display Mode                          : Disabled
    Display Active                        : Disabled
    Persistence Mode                      : Enabled
    Addressing Mode                       : None
    MIG Mode
        Current                           : N/A
        Pending                           : N/A
    Accounting Mode                       : Disabled
    Accounting Mode Buffer Size           : 4000
    Driver Model
        Current                           : N/A
        Pending                           : N/A
    Serial Number                         : N/A
    GPU UUID                              : GPU-370465f5-30e0-6877-b85c-16729f41b90f
    Minor Number                          : 3
    VBIOS Version                         : 95.02.18.C0.09
    MultiGPU Board                        : No
    Board ID                              : 0x100
    Board Part Number                     : N/A
    GPU Part Number                       : 2684-300-A1
    FRU Part Number                       : N/A
    Module ID                             : 1
    Inforom Version
        Image Version                     : G002.0000.00.03
        OEM Object                        : 2.0
        ECC Object                        : 6.16
        Power Management Object           : N/A
"""

# §3.17: Yu Zhao's lscpu and numactl -H (arm64 Neoverse-N1).
LSCPU = _support_capture("lscpu", "yuzhao-neoverse-n1-lscpu.txt")
NUMACTL_H = _support_capture("numactl", "yuzhao-two-nodes.txt")

# Hand-made (dkms's own status line format; no capture recorded).
DKMS_STATUS = """mlnx-ofed-kernel/24.10.OFED.24.10.2.1.8.1, 6.1.0-31-amd64, x86_64: installed
nvidia/535.154.05, 6.1.0-31-amd64, x86_64: installed
"""

OS_RELEASE = """PRETTY_NAME="Ubuntu 22.04.4 LTS"
NAME="Ubuntu"
VERSION_ID="22.04"
VERSION="22.04.4 LTS (Jammy Jellyfish)"
ID=ubuntu
ID_LIKE=debian
"""
MLNX_CONF = "options mlx5_core prof_sel=2\noptions ib_ipoib ipoib_enhanced=0\n"
LIMITS_CONF = "* soft memlock unlimited\n* hard memlock unlimited\n"
NCCL_CONF = "NCCL_IB_HCA=mlx5\nNCCL_NET_GDR_LEVEL=PIX\n"
# The catalogue's sysfs files beyond the HCAs': module parameters (the modinfo capture's parm:
# names), the server's DMI identity (no serials), two NUMA nodes (the lscpu capture's), GIDs.
MODULE_PARAMETERS = {
    "mlx5_core": {"num_of_groups": "15", "debug_mask": "0", "prof_sel": "2"},
    "ib_ipoib": {"ipoib_enhanced": "0", "recv_queue_size": "512", "send_queue_size": "256"},
    "ib_core": {"netns_mode": "Y"},
}
DMI = {
    "sys_vendor": "Supermicro", "product_name": "SYS-821GE-TNHR", "product_version": "0123456789",
    "board_vendor": "Supermicro", "board_name": "X13DEG-OAD", "bios_vendor": "American Megatrends",
    "bios_version": "2.1", "bios_date": "03/15/2024",
}  # fmt: skip

LSPCI_HCA = ("lspci", "gpud-h100-lspci-vvv-mellanox-8xcx7-2xcx6dx-blocks.txt")
LSPCI_BRIDGE = os.path.join(
    S.TESTS_DIR, "captures", "lspci", "kvm-2023-amd-matisse-switch-downstream-acs-redirect.txt"
)
IBSTAT = ("ibstat", "gpud-ibstat-a100-vm-9xMT4126-VF-hdr-all-active.txt")
IBV_DEVINFO = ("ibv_devinfo", "linux-rdma-2024-cx5-roce-two-pf-before-bonding.txt")
NVIDIA_TOPO = ("nvidia_smi_topo", "sglang-issue30401-8xH100-8xmlx5-PIX-rail.txt")


def repeat_to(head: str, body: str, size: int, tail: str = "") -> str:
    """``head``, ``body`` repeated until the text is at least ``size`` bytes, ``tail``."""
    text = head
    while len(text) + len(tail) < size:
        text += body
    return text + tail


class SupportNode:
    """sysfs, procfs, rootfs and every tool of an 8-HCA, 8-GPU node under ``root``."""

    def __init__(self, root, hcas: int = HCAS, gpus: int = GPUS, delay: float = 0.0) -> None:
        self.root = Path(root)
        self.delay = delay
        self.hcas = behind_switch(mlx5_node(hcas))
        self.sysfs = str(self.root / "sys")
        write_node(self.sysfs, self.hcas)
        self.gpus: List[str] = []
        for index, hca in enumerate(self.hcas):
            write_path(self.sysfs, hca, group=40 + index)
            if index < gpus:
                bus = int(hca.pci_address.split("/")[1].split(":")[1], 16)
                gpu = f"0000:{bus + 4:02x}:00.0"
                write_gpu(self.sysfs, switch_of(hca), gpu, group=80 + index)
                self.gpus.append(gpu)
        write_sysfs_files(self.sysfs, self.hcas)
        self.procfs = S.write_procfs(self.root / "proc", boot_time=time.time() - 3600)
        proc = Path(self.procfs)
        (proc / "version").write_text(
            "Linux version 6.1.0-31-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian "
            "12.2.0-14) 12.2.0, GNU ld (GNU Binutils for Debian) 2.40) #1 SMP PREEMPT_DYNAMIC "
            "Debian 6.1.128-1 (2025-02-07)\n"
        )
        (proc / "cmdline").write_text("BOOT_IMAGE=/vmlinuz-6.1.0-31-amd64 ro quiet iommu=pt\n")
        self.rootfs = str(self.root / "rootfs")
        for rel, text in (
            ("etc/os-release", OS_RELEASE),
            ("etc/modprobe.d/mlnx.conf", MLNX_CONF),
            ("etc/security/limits.conf", LIMITS_CONF),
            ("etc/nccl.conf", NCCL_CONF),
        ):
            path = Path(self.rootfs, rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        self.outputs = self.root / "outputs"
        self.outputs.mkdir(parents=True, exist_ok=True)
        self.stubs = S.StubBin(self.root / "stubs")
        self.answer_all()

    # -- the node's names ------------------------------------------------------------------------

    @property
    def bdfs(self) -> List[str]:
        return [hca.pci_address.split("/")[-1] for hca in self.hcas]

    @property
    def netdevs(self) -> List[str]:
        return [hca.ports[0].netdev or "" for hca in self.hcas]

    @property
    def pcie_functions(self) -> List[str]:
        """Every HCA's function and the bridges above it (lspci's targets), each once."""
        seen: Dict[str, None] = {}
        for hca in self.hcas:
            for bdf in hca.pci_address.split("/"):
                seen.setdefault(bdf)
        return list(seen)

    def argv(self, *args: str, out: Optional[str] = None) -> List[str]:
        """``collect`` on this node (the CLI's arguments after ``ibdiag``)."""
        argv = ["collect", "--sysfs", self.sysfs, "--procfs", self.procfs, "--rootfs", self.rootfs]
        return argv + (["-o", out] if out else []) + list(args)

    def env(self, base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        return self.stubs.env(base)

    # -- outputs ---------------------------------------------------------------------------------

    def _file(self, name: str, text: str) -> str:
        path = self.outputs / name
        path.write_text(text)
        return str(path)

    def _prints(self, name: str, text: str) -> str:
        return S.prints(self._file(name, text), delay=self.delay)

    def _fixture(self, *parts: str) -> str:
        return S.prints(S.fixture(*parts), delay=self.delay)

    def answer_all(self) -> None:
        """Every tool answers, after ``delay`` seconds, with output of a real node's size."""
        add, put, fix = self.stubs.add, self._prints, self._fixture
        hcas, bdfs, netdevs = [h.name for h in self.hcas], self.bdfs, self.netdevs
        add("ofed_info", S.by_args({"-s": put("ofed_info", OFED_INFO)}))
        modinfo = "".join(
            repeat_to(MODINFO_HEAD.format(name=name), MODINFO_PARMS, 4096) for name in MODULES
        )
        add("modinfo", put("modinfo", modinfo))
        add("dkms", S.by_args({"status": put("dkms", DKMS_STATUS)}))
        for tool in ("mstflint", "flint"):
            add(tool, S.by_args({"-d * q": put("mstflint", MSTFLINT_Q)}))
        nvconfig = repeat_to(MSTCONFIG_HEAD, MSTCONFIG_ROWS, 20 * 1024, MSTCONFIG_TAIL)
        for tool in ("mstconfig", "mlxconfig"):
            add(tool, S.by_args({"-d * -e q": put("mstconfig", nvconfig)}))
        dev_info = {"info": {f"pci/{bdf}": DEV_INFO_ONE for bdf in bdfs}}
        params = "".join(
            f"pci/{bdf}:\n"
            + "".join(
                f"  name {name} type driver-specific\n    values:\n      cmode runtime value "
                f"{'dmfs' if name == 'flow_steering_mode' else 'true'}\n"
                for name in DEVLINK_PARAMS
            )
            for bdf in bdfs
        )
        add(
            "devlink",
            S.by_args(
                {
                    "-j dev info": put("devlink-dev-info", json.dumps(dev_info, indent=2)),
                    "dev param show": put("devlink-dev-param", params),
                    "-j health show": S.prints(DEVLINK_HEALTHY, delay=self.delay),
                }
            ),
        )
        lspci = {f"-vvv -s {bdf}": self._lspci_hca(bdf) for bdf in bdfs}
        add("lspci", S.by_args(lspci, S.prints(LSPCI_BRIDGE, delay=self.delay)))
        add("lscpu", put("lscpu", LSCPU))
        add("numactl", S.by_args({"--hardware": put("numactl", NUMACTL_H)}))
        links = "".join(RDMA_LINK.format(hca=h, netdev=n) for h, n in zip(hcas, netdevs))
        resources = "".join(RDMA_RESOURCE.format(index=i, hca=h) for i, h in enumerate(hcas))
        add(
            "rdma",
            S.by_args(
                {
                    "link show": put("rdma-link", links),
                    "resource show": put("rdma-resource", resources),
                }
            ),
        )
        v = "".join(
            IBDEV2NETDEV_V.format(bdf=b, hca=h, netdev=n) for b, h, n in zip(bdfs, hcas, netdevs)
        )
        add("ibdev2netdev", S.by_args({"-v": put("ibdev2netdev", v)}))
        link_blocks = [IP_LINK.format(index=i + 2, netdev=n) for i, n in enumerate(netdevs)]
        addr = "".join(
            block + IP_ADDR_EXTRA.format(index=i + 2, netdev=netdevs[i])
            for i, block in enumerate(link_blocks)
        )
        add(
            "ip",
            S.by_args(
                {
                    "-d -s link show": put("ip-link", "".join(link_blocks)),
                    "-d address show": put("ip-address", addr),
                }
            ),
        )
        ethtool = {
            f"-i {n}": put(f"ethtool-i-{n}", ETHTOOL_I.format(bdf=b)) for b, n in zip(bdfs, netdevs)
        }
        add("ethtool", S.by_args({**ethtool, "-S *": fix(*S.ETHTOOL_S)}))
        add("sminfo", S.by_args({"-C * -P *": put("sminfo", SMINFO)}))
        add("saquery", S.by_args({"-s -C * -P *": put("saquery", SAQUERY_S)}))
        gpus = NVSMI_HEAD.format(count=len(self.gpus)) + "".join(
            repeat_to(NVSMI_GPU.format(bdf=f"0000{gpu}"), NVSMI_GPU.split("\n", 1)[1], 9 * 1024)
            for gpu in self.gpus
        )
        nvsmi = {"-q": put("nvidia-smi-q", gpus), "topo -m": fix(*NVIDIA_TOPO)}
        add("nvidia-smi", S.by_args(nvsmi))
        d = self.delay
        add(
            "perfquery",
            S.by_args(
                {
                    **{k: _delayed(v, d) for k, v in S.partner_perfquery("switch-hdr").items()},
                    "-x -C *": fix(*S.PERFQUERY_X_HEALTHY),
                    "-E -C *": fix(*S.PERFQUERY_E),
                    "-X -C *": S.prints_text(S.PERFQUERY_XMIT_SL, delay=d),
                    "-T -C *": S.prints(PERFQUERY_T_HEALTHY, delay=d),
                    "-C *": fix(*S.PERFQUERY_X_HEALTHY),
                }
            ),
        )
        partner = {k: _delayed(v, d) for k, v in S.partner_smpquery("switch-hdr").items()}
        add("smpquery", S.by_args(partner))
        listing = S.first_blocks(S.fixture(*IBSTAT), "CA '", len(hcas), self.outputs / "ibstat")
        add("ibstat", S.prints(listing, delay=d))
        add("ibv_devinfo", fix(*IBV_DEVINFO))
        add("dmesg", fix(*S.DMESG_PCIE_POWER))
        add("journalctl", fix(*S.DMESG_PCIE_POWER))
        add("mlxlink", S.prints(MLXLINK_HEALTHY, delay=d))
        add("mstlink", S.prints(MLXLINK_HEALTHY, delay=d))

    def _lspci_hca(self, bdf: str) -> str:
        """The first CX-7 block of the gpud capture (4.9 KB), its address made this HCA's."""
        text = Path(S.fixture(*LSPCI_HCA)).read_text()
        block = text.split("\n\n")[0].rstrip("\n") + "\n"
        return self._prints(f"lspci-{bdf}", f"{bdf[5:]} {block.split(' ', 1)[1]}")

    # -- other behaviours ------------------------------------------------------------------------

    def hang_all(self, mark: str) -> None:
        """Every tool prints a line, then never finishes (``stubs.hangs``)."""
        for tool in TOOLS:
            self.stubs.add(tool, S.hangs(mark))

    def absent_all(self) -> None:
        """No tool at all: the stub directory stays on PATH, empty."""
        for tool in TOOLS:
            path = self.stubs.bin / tool
            if path.exists():
                path.unlink()

    def floods(self, tool: str, mib: int) -> None:
        """``tool`` prints ``mib`` MiB of text whatever its arguments, then exits 0."""
        self.stubs.add(tool, f"head -c {int(mib) << 20} /dev/zero | tr '\\0' 'x'\necho\nexit 0\n")


def write_sysfs_files(sys_root: str, hcas: List[HcaSpec]) -> None:
    """The catalogue's other sysfs files: module parameters, DMI, NUMA nodes, each port's GIDs
    (a link-local IB GID from the node GUID, with its gid_attrs)."""
    files: Dict[str, str] = {}
    for module, params in MODULE_PARAMETERS.items():
        for name, value in params.items():
            files[f"module/{module}/parameters/{name}"] = value
    for name, value in DMI.items():
        files[f"class/dmi/id/{name}"] = value
    files["devices/system/node/node0/cpulist"] = "0-63"
    files["devices/system/node/node1/cpulist"] = "64-127"
    for hca in hcas:
        port = f"class/infiniband/{hca.name}/ports/1"
        files[f"{port}/gids/0"] = "fe80:0000:0000:0000:" + hca.node_guid
        files[f"{port}/gids/1"] = "0000:0000:0000:0000:0000:0000:0000:0000"
        files[f"{port}/gid_attrs/types/0"] = "IB/RoCE v1"
        files[f"{port}/gid_attrs/ndevs/0"] = hca.ports[0].netdev or ""
    for rel, value in files.items():
        path = os.path.join(sys_root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(value + "\n")


def _delayed(body: str, delay: float) -> str:
    """A ``prints`` body from tests/stubs with ``delay`` seconds before it."""
    return (f"sleep {delay:g}\n" if delay else "") + body
