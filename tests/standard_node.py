"""The node ``ibdiag check --level standard`` runs on in the tests: a sysfs tree whose HCAs
sit at the PCI addresses the kernel-log captures name, a procfs, and stub tools (perfquery,
ethtool, dmesg, journalctl, ibstat, ibv_devinfo) alone on PATH; ``Run`` reads what a run
reported. Shared by tests/families/test_standard_level.py and tests/test_schema.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import stubs as S
from sysfs_builder import mlx5_node, write_node

DEADLINE = 3  # --deadline for the broken-tool runs
COMMAND_TIMEOUT = 1  # --command-timeout
SLACK_IN_PROCESS = 4.0  # seconds beyond the deadline: collection after it, grading, rendering
SLACK_SUBPROCESS = 6.0  # ... plus interpreter start-up and imports on a loaded machine

TOOLS = (
    "perfquery", "ethtool", "dmesg", "journalctl", "ibstat", "ibv_devinfo", "mlxlink", "mstlink",
    "devlink",
)  # fmt: skip
COMMAND_CHECKS = {
    "perfquery.errors",
    "perfquery.sl_traffic",
    "ethtool.errors",
    "ethtool.pause",
    "kernel.log",
    "hca.driver_inventory",
}
KERNEL_LOG = ["dmesg", "--kernel", "--nopager"]
# devlink -j health show of two healthy PFs (hand-made from iproute2: tests/captures/devlink)
DEVLINK_HEALTHY = os.path.join(
    os.path.dirname(os.path.abspath(__file__)),
    "captures",
    "devlink",
    "handmade-two-pfs-healthy.json",
)

# The qemu-devel capture: firmware internal error (synd 0x1) on 0000:0d:00.0 and its siblings.
FW_SYNDROME_BDF = "0000:0d:00.0"
HEALTHY_BDF = "0000:1a:00.0"  # named by no line of the fw-syndrome capture


class Node:
    """A node under tmp_path: sysfs, procfs, stubs; ``check``/``snapshot`` run the CLI on it."""

    def __init__(self, tmp_path: Path, run_cli, bdfs: Sequence[str] = (), netdevs=()) -> None:
        self.tmp = tmp_path
        self.run_cli = run_cli
        hcas = mlx5_node(max(2, len(bdfs)))
        for hca, bdf in zip(hcas, bdfs):
            hca.pci_address = bdf
        for hca, netdev in zip(hcas, netdevs):
            hca.ports[0].netdev = netdev
        self.hcas = hcas
        self.sysfs = str(tmp_path / "sys")
        write_node(self.sysfs, hcas)
        self.boot_time = time.time() - 3600  # booted an hour ago
        self.procfs = S.write_procfs(tmp_path / "proc", boot_time=self.boot_time)
        self.stubs = S.StubBin(tmp_path / "stubs")

    @property
    def devices(self) -> List[str]:
        return [hca.name for hca in self.hcas]

    # -- the stubs -------------------------------------------------------------------------

    def healthy_tools(self) -> None:
        """Every tool prints a real capture of a healthy HCA; dmesg is set per test."""
        self.stubs.add("perfquery", perfquery_stub())
        self.stubs.add("ethtool", S.prints(S.fixture(*S.ETHTOOL_S)))
        self.stubs.add("ibstat", S.prints(self.ibstat_listing(len(self.hcas))))
        self.stubs.add("ibv_devinfo", S.prints(self.ibv_devinfo_listing()))
        self.stubs.add("dmesg", S.prints(S.fixture(*S.DMESG_FW_SYNDROME)))
        self.stubs.add("journalctl", S.fails("journalctl: the stub should not have run", 1))
        self.stubs.add("mlxlink", S.prints(MLXLINK_HEALTHY))
        self.stubs.add("mstlink", S.fails("mstlink: the stub should not have run", 1))
        self.stubs.add("devlink", S.prints(DEVLINK_HEALTHY))

    def ibstat_listing(self, count: int) -> str:
        """A real ibstat capture (mlx5_0..mlx5_8) cut to its first ``count`` CAs."""
        return S.first_blocks(
            S.fixture("ibstat", "gpud-ibstat-a100-vm-9xMT4126-VF-hdr-all-active.txt"),
            "CA '",
            count,
            self.tmp / f"ibstat-{count}.txt",
        )

    def ibv_devinfo_listing(self) -> str:
        assert len(self.hcas) == 2, "the ibv_devinfo capture lists mlx5_0 and mlx5_1"
        return S.fixture("ibv_devinfo", "linux-rdma-2024-cx5-roce-two-pf-before-bonding.txt")

    # -- the CLI ---------------------------------------------------------------------------

    def check(self, *args: str, level: str = "standard") -> Run:
        argv = ["check", "--level", level, "--json", "--sysfs", self.sysfs]
        argv += ["--procfs", self.procfs, *args]
        started = time.monotonic()
        result = self.run_cli(*argv)
        wall = time.monotonic() - started
        return Run(result.exit_code, result.stdout, result.stderr, wall)

    def check_subprocess(self, *args: str) -> Run:
        argv = [sys.executable, "-m", "ibdiag", "check", "--level", "standard", "--json"]
        argv += ["--sysfs", self.sysfs, "--procfs", self.procfs, *args]
        started = time.monotonic()
        proc = subprocess.run(
            argv,
            env=self.stubs.env(),
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            cwd=S.REPO,
        )
        wall = time.monotonic() - started
        return Run(proc.returncode, proc.stdout, proc.stderr, wall)

    def snapshot(self, path: Path, *args: str) -> dict:
        result = self.run_cli(
            "snapshot", "--sysfs", self.sysfs, "--procfs", self.procfs, "-o", str(path), *args
        )
        assert result.exit_code == 0, result.stderr
        return json.loads(path.read_text())

    def set_sysfs_counter(self, device: str, name: str, value: int) -> None:
        path = Path(self.sysfs, "class", "infiniband", device, "ports", "1", "counters", name)
        path.write_text(f"{value}\n")


class Run:
    def __init__(self, code: int, stdout: str, stderr: str, wall: float) -> None:
        self.code, self.stdout, self.stderr, self.wall = code, stdout, stderr, wall
        self.context = f"exit {code} after {wall:.1f} s\n--- stderr:\n{stderr[-3000:]}"
        if not stdout.startswith("{"):
            self.context += f"\n--- stdout:\n{stdout[:3000]}"
        # Never a traceback, never "internal error" (the CLI's exit 3 for a crash).
        assert "Traceback" not in stderr and "internal error" not in stderr, self.context
        assert code in (0, 1, 2), self.context
        self.report = json.loads(stdout)
        crashed = [r for r in self.report["results"] if "crashed" in r["message"]]
        assert crashed == [], self.context

    @property
    def results(self) -> List[dict]:
        return self.report["results"]

    @property
    def commands(self) -> Dict[str, dict]:
        """The runs of the node's own tools. The far end's chain (roles ``partner-*``: smpquery,
        perfquery on the switch's LID) runs beside them and is tested on its own
        (tests/families/test_partner_chain.py, tests/families/test_partner_fabric.py)."""
        return {key: run for key, run in self.all_commands.items()
                if not str(run.get("role") or "").startswith("partner-")}  # fmt: skip

    @property
    def all_commands(self) -> Dict[str, dict]:
        return by_line(self.report["snapshot"]["commands"])

    def of(self, check_id: str, target: Optional[str] = None) -> List[dict]:
        return [
            r
            for r in self.results
            if r["check_id"] == check_id and (target is None or r["target"] == target)
        ]

    def command_results(self) -> List[dict]:
        return [r for r in self.results if r["check_id"] in COMMAND_CHECKS]

    def show(self) -> str:
        """For assertion messages: the command-based results and every non-pass one."""
        shown = [
            r for r in self.results if r["check_id"] in COMMAND_CHECKS or r["status"] != "pass"
        ]
        lines = [
            f"{r['status']:5} {r['check_id']:22} {r['target']:10} {r['message'][:200]}"
            for r in shown
        ]
        runs = [
            f"{key}: rc={c['rc']} timed_out={c['timed_out']} skipped={c['skipped']} "
            f"{c['duration_s']:.2f}s"
            for key, c in self.commands.items()
        ]
        return "\n".join([self.context, "--- results:", *lines, "--- commands:", *runs])


PERFQUERY_T_HEALTHY = os.path.join(
    S.TESTS_DIR, "captures", "perfquery-T", "handmade-T-extended-speeds-edr-hca.txt"
)


MLXLINK_HEALTHY = os.path.join(S.TESTS_DIR, "captures", "mlxlink", "mlxlink-ndr-osfp-healthy.json")


def perfquery_stub() -> str:
    """-x and plain print a healthy EDR HCA's capture, -E its error details, -X data per SL,
    -T its FEC per lane (hand-made: tests/captures/perfquery-T)."""
    return S.by_args(
        {
            "-x -C *": S.prints(S.fixture(*S.PERFQUERY_X_HEALTHY)),
            "-E -C *": S.prints(S.fixture(*S.PERFQUERY_E)),
            "-X -C *": S.prints_text(S.PERFQUERY_XMIT_SL),
            "-T -C *": S.prints(PERFQUERY_T_HEALTHY),  # phy.fec: FEC per lane
            # No plain (PortCounters) capture is recorded: the -x one stands in (same names).
            "-C *": S.prints(S.fixture(*S.PERFQUERY_X_HEALTHY)),
        }
    )


def by_line(commands: Dict[str, dict]) -> Dict[str, dict]:
    """Runs by their command line (a snapshot keys them by role: tests/test_family_* check the
    roles; here what ran is what counts)."""
    return {" ".join(run["argv"]): run for run in commands.values()}
