"""A stand-in ``scontrol`` for the hook tests that need no slurmctld: one node in a JSON file.

It answers ``show node NAME`` in the multi-line form Slurm 22.05 prints (the reason stamped
"[user@time]") and applies ``update NodeName=N State=DRAIN Reason=...`` / ``State=RESUME``.
Every call is appended to ``calls.log``. ``hang()`` makes every later call sleep forever (a
hung slurmctld). tests/slurm/test_slurm_cluster.py runs the same hooks against a real Slurm.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import List, Optional

_SCRIPT = r"""#!{python}
import json, os, sys, time
folder = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(folder, "calls.log"), "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\n")
path = os.path.join(folder, "node.json")
with open(path) as handle:
    node = json.load(handle)
if node.get("hang"):
    time.sleep(3600)
args = sys.argv[1:]
if args[:2] == ["show", "node"]:
    if args[2:] != [node["name"]]:
        sys.stderr.write("Node %s not found\n" % " ".join(args[2:]))
        sys.exit(1)
    print("NodeName=%s Arch=x86_64 CoresPerSocket=1" % node["name"])
    print("   CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=0.05")
    print("   State=%s ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A" % node["state"])
    print("   Partitions=debug")
    if node.get("reason"):
        print("   Reason=%s [root@2026-11-21T17:00:00]" % node["reason"])
    sys.exit(0)
if args[:1] == ["update"]:
    fields = dict(arg.split("=", 1) for arg in args[1:])
    if fields.get("State") == "DRAIN":
        node["state"], node["reason"] = "IDLE+DRAIN", fields["Reason"]
    elif fields.get("State") == "RESUME":
        node["state"], node["reason"] = "IDLE", None
    with open(path, "w") as handle:
        json.dump(node, handle)
    sys.exit(0)
sys.stderr.write("fake scontrol: unsupported: %s\n" % " ".join(args))
sys.exit(1)
"""


class FakeScontrol:
    def __init__(self, folder: Path, node: str = "node1") -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.path = str(folder / "scontrol")
        Path(self.path).write_text(_SCRIPT.replace("{python}", sys.executable))
        os.chmod(self.path, 0o700)
        self.set("IDLE", None, name=node)

    def set(self, state: str, reason: Optional[str], name: Optional[str] = None) -> None:
        node = {"name": name or self.node()["name"], "state": state, "reason": reason}
        (self.folder / "node.json").write_text(json.dumps(node))

    def node(self) -> dict:
        return json.loads((self.folder / "node.json").read_text())

    def hang(self) -> None:
        node = self.node()
        node["hang"] = True
        (self.folder / "node.json").write_text(json.dumps(node))

    def calls(self) -> List[str]:
        log = self.folder / "calls.log"
        return log.read_text().splitlines() if log.exists() else []

    def updates(self) -> List[str]:
        return [call for call in self.calls() if call.startswith("update")]
