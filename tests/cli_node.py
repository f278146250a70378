"""A node the CLI runs on, whose counters a test moves: a builder mlx5 tree in tmp_path (2
healthy ConnectX-6 HCAs, with the mlx5 hwmon temperatures of a kernel 6.5 or later) and a
procfs with a fixed hostname (``HOST``) and boot id (``BOOT_ID``, hostname and boot_id only);
``Node.check``/``snapshot`` run ``ibdiag`` on it in-process (the ``run_cli`` fixture), and
``by_check``/``not_passing``/``load_snapshot`` read what it wrote."""

from __future__ import annotations

import json
import os
from typing import Dict, List

from hwmon_tree import ASIC, MODULE0, write_hwmon
from pcie_tree import write_path
from stubs import write_procfs
from sysfs_builder import bump_counter, mlx5_node, write_node

from ibdiag.model import Snapshot

HOST = "node001"
BOOT_ID = "6f1e8a52-3c55-4b8e-9d8e-2a7c0c8f4b11"


class Node:
    """A sysfs tree and procfs in tmp_path, with helpers to move counters and run ibdiag."""

    def __init__(self, tmp_path, run_cli):
        self.tmp = tmp_path
        self.sys = str(tmp_path / "sys")
        self.proc = str(tmp_path / "proc")
        self._run = run_cli
        hcas = mlx5_node(2)
        write_node(self.sys, hcas)
        for hca in hcas:  # a kernel of 6.5 or later: each HCA's mlx5 hwmon temperatures
            write_hwmon(self.sys, hca.pci_address, ASIC, MODULE0)
            write_path(self.sys, hca)
        write_procfs(self.proc, hostname=HOST, boot_id=BOOT_ID, boot_time=None, modules=None)

    @staticmethod
    def write(path: str, text: str) -> None:
        with open(path, "w") as handle:
            handle.write(text + "\n")

    def set_boot_id(self, boot_id: str) -> None:
        self.write(os.path.join(self.proc, "sys", "kernel", "random", "boot_id"), boot_id)

    def counter_path(self, dev: str, name: str, directory: str = "counters") -> str:
        return os.path.join(self.sys, "class", "infiniband", dev, "ports", "1", directory, name)

    def read_counter(self, dev: str, name: str, directory: str = "counters") -> int:
        with open(self.counter_path(dev, name, directory)) as handle:
            return int(handle.read())

    def bump(self, dev: str, name: str, by: int, directory: str = "counters") -> None:
        bump_counter(self.sys, dev, name, by, directory)

    def check(self, *args: str):
        # an empty site config: the run never depends on this machine's /etc/ibdiag/ibdiag.toml
        config = os.path.join(str(self.tmp), "site.toml")
        if not os.path.exists(config):
            self.write(config, "")
        return self._run(
            "check", "--sysfs", self.sys, "--procfs", self.proc, "--config", config, *args
        )

    def check_json(self, *args: str):
        result = self.check("--json", *args)
        assert "Traceback" not in result.stdout + result.stderr
        assert result.stdout.startswith("{"), (result.exit_code, result.stderr)
        return result, json.loads(result.stdout)

    def snapshot(self, *args: str):
        return self._run("snapshot", "--sysfs", self.sys, "--procfs", self.proc, *args)


def by_check(report: dict, check_id: str) -> List[dict]:
    return [r for r in report["results"] if r["check_id"] == check_id]


def not_passing(report: dict) -> Dict[str, List[dict]]:
    found: Dict[str, List[dict]] = {}
    for result in report["results"]:
        if result["status"] != "pass":
            found.setdefault(result["check_id"], []).append(result)
    return found


def load_snapshot(path: str) -> Snapshot:
    with open(path, encoding="utf-8") as handle:
        return Snapshot.model_validate_json(handle.read())
