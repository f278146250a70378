"""link.partner and counters.partner end to end: ``ibdiag check --level standard`` on a generated
sysfs tree whose mlx5 devices are played by HCAs of a simulated fabric (tests/fabric_sim.py:
ibsim + opensm, the real smpquery/perfquery through PATH shims).

The fabric: leaf switch ``leaf07`` ("MF0;leaf07:MQM9700/U1") with mlx5_3 on port 21 (4X QDR,
healthy), mlx5_1 on port 22 (a cable trained at 1X) and mlx5_2 on port 23 (trained at SDR).
Each run's sysfs tree holds one of those devices, its port ACTIVE at 4X QDR as the node's kernel
would say for a healthy cable (the far ends of mlx5_1 and mlx5_2 disagree): one port's chain
plus its own perfquery runs stay under ibsim's limit of 10 attached clients (three ports at
once made some tools fail with "sim_init: connect failed"). Only the partner checks' results
are asserted: the other standard checks meet a machine without InfiniBand hardware. Faults are
undone in ``finally``.

Not root is the one case the simulator cannot give: umad2sim answers the tools' open of
``/dev/infiniband/umad0`` itself and ibsim listens on an abstract socket, so as ``nobody`` the
tools read the fabric as root does (``test_the_simulator_lets_any_user_read_the_fabric`` keeps
that true). So the not-root run is a node of its own, built as root in a private mount namespace
(``unshare --mount``, as tests/cli/test_readme_node_install.py does): the sysfs tree bound over /sys
with the ``class/infiniband_mad`` entries libibumad reads, a /dev whose ``infiniband/umad0`` is
the char device 231:0 mode 0600 root, as on a node without a umad group; ``ibdiag check --level
standard`` runs there with the real smpquery and perfquery run as ``nobody`` (``setpriv``), so
the kernel refuses them the device.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
import stubs as S
from conftest import TESTS_DIR
from fabric_sim import (
    SIM_CA,
    Cable,
    Fabric,
    Hca,
    Switch,
    Topology,
    parse_dotted,
    sim_mtu_config,
)
from sysfs_builder import mlx5_node, write_node

LEAF = "leaf07"
DEVICES = {
    "mlx5_1": "node01-mlx5_1",
    "mlx5_2": "node01-mlx5_2",
    "mlx5_3": "node01-mlx5_3",
}
TOPOLOGY = Topology(
    [
        Switch(LEAF, 36, "MF0;leaf07:MQM9700/U1"),
        *(Hca(host, 1, f"node01 {device}") for device, host in DEVICES.items()),
    ],
    [
        Cable(DEVICES["mlx5_3"], 1, LEAF, 21),
        Cable(DEVICES["mlx5_1"], 1, LEAF, 22, width=1),
        Cable(DEVICES["mlx5_2"], 1, LEAF, 23, speed="SDR"),
    ],
)
HEALTHY = "mlx5_3:1<->leaf07/21"
NARROW = "mlx5_1:1<->leaf07/22"
SLOW = "mlx5_2:1<->leaf07/23"
DEADLINE_S = 20.0
PARTNER_CHECKS = ("link.partner", "counters.partner")


class Node:
    """The simulated node: a sysfs tree per set of devices, PATH (shims first), the fabric."""

    def __init__(self, root: Path, fabric: Fabric) -> None:
        self.root = root
        self.fabric = fabric
        # ibsim holds every link at MTU 2048: expected here, so link.mtu passes
        self.config = sim_mtu_config(root / "sim-mtu.toml")
        # smpquery and perfquery only: ibstat & co. stay the real ones (no hardware: a skip),
        # so fewer tools attach to ibsim at once
        shims = fabric.shim_dir(root / "bin", DEVICES, tools=("smpquery", "perfquery"))
        self.env = dict(os.environ, PATH=f"{shims}{os.pathsep}{os.environ.get('PATH', '')}")

    def sysfs(self, device: str) -> str:
        """A sysfs tree holding ``device`` alone, its port ACTIVE at 4X QDR."""
        tree = self.root / f"sys-{device}"
        if not tree.exists():
            hcas = mlx5_node(4, port=dict(rate="40 Gb/sec (4X QDR)"))
            write_node(str(tree), [hca for hca in hcas if hca.name == device])
        return str(tree)

    def check(self, device: str, *args: str, sm_must_live: bool = True) -> Dict[str, List[dict]]:
        """``ibdiag check --level standard --json`` on a node with ``device``: the partner
        checks' results by check id and target."""
        return self.check_verdict(device, *args, sm_must_live=sm_must_live)[0]

    def check_verdict(
        self, device: str, *args: str, sm_must_live: bool = True, env=None
    ) -> Tuple[Dict[str, List[dict]], str]:
        """``check``, and the report's verdict; ``env``: instead of the node's."""
        argv = [sys.executable, "-m", "ibdiag", "check", "--level", "standard", "--json"]
        argv += ["--sysfs", self.sysfs(device), "--deadline", str(DEADLINE_S), *args]
        argv += ["--config", str(self.config)]
        done = subprocess.run(
            argv, env=env or self.env, capture_output=True, text=True, timeout=120, check=False
        )
        assert done.stdout, done.stderr
        report = json.loads(done.stdout)
        found: Dict[str, List[dict]] = {}
        for result in report["results"]:
            if result["check_id"] in PARTNER_CHECKS:
                found.setdefault(f"{result['check_id']} {result['target']}", []).append(result)
        if sm_must_live:
            assert all(p.poll() is None for p in self.fabric._opensm), "opensm died"
        return found, report["verdict"]


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    root = tmp_path_factory.mktemp("partner-fabric")
    with Fabric(root / "fabric", TOPOLOGY) as fabric:
        yield Node(root, fabric)


def only(found: Dict[str, List[dict]], key: str) -> dict:
    assert key in found and len(found[key]) == 1, (key, found)
    return found[key][0]


def test_healthy_cable_passes_both_checks(node):
    found = node.check("mlx5_3")
    link = only(found, f"link.partner {HEALTHY}")
    assert link["status"] == "pass", link
    assert "4X QDR" in link["message"]
    counters = only(found, f"counters.partner {HEALTHY}")
    assert counters["status"] == "pass", counters
    assert "no baseline" in counters["message"]


def test_slowed_cable_fails_link_partner_naming_both_ends(node):
    slow = only(node.check("mlx5_2"), f"link.partner {SLOW}")
    assert slow["status"] == "fail", slow
    assert slow["observed"] == "4X SDR" and "speed" in slow["message"]


def test_narrowed_cable_fails_link_partner_naming_both_ends(tmp_path):
    """On a fabric of its own: a standard run against the 1X-trained cable made opensm crash
    (SIGSEGV) under ibsim 0.10, which would break the module's fabric for the other tests."""
    with Fabric(tmp_path / "fabric", TOPOLOGY) as fabric:
        found = Node(tmp_path, fabric).check("mlx5_1", sm_must_live=False)
    narrow = only(found, f"link.partner {NARROW}")
    assert narrow["status"] == "fail", narrow
    assert narrow["observed"] == "1X QDR" and "width" in narrow["message"]


def test_symbol_errors_on_the_switch_port_fail_counters_partner_with_state(node, tmp_path):
    state = str(tmp_path / "state.json")
    first = node.check("mlx5_3", "--state", state)
    assert only(first, f"counters.partner {HEALTHY}")["status"] == "pass"
    try:
        node.fabric.set_counter(LEAF, 21, "SymbolErrorCounter", 500)
        second = node.check("mlx5_3", "--state", state)
    finally:
        node.fabric.set_counter(LEAF, 21, "SymbolErrorCounter", 0)
    failed = only(second, f"counters.partner {HEALTHY}")
    assert failed["status"] == "fail", failed
    assert failed["subject"] == "symbol_error" and failed["observed"] == 500
    assert failed["message"].startswith("symbol_error +500 since the baseline")


def test_a_switch_port_that_does_not_answer_warns_within_the_deadline(node):
    """The switch port drops every MAD: libibmad gives up by itself (-t) and smpquery exits
    255. Our port is ACTIVE on a physical function, so its far end must answer: link.partner
    warns naming the command (no-answer), counters.partner skips naming it - never OK."""
    try:
        node.fabric.set_error_rate(LEAF, 21, 100)
        started = time.monotonic()
        found, verdict = node.check_verdict("mlx5_3")
        took = time.monotonic() - started
    finally:
        node.fabric.set_error_rate(LEAF, 21, 0)
    assert took < DEADLINE_S + 15, took
    link = only(found, "link.partner mlx5_3:1")
    assert link["status"] == "warn", link
    assert link["observed"] == "no-answer", link
    assert "did not answer" in link["message"] and "smpquery" in link["message"]
    assert "nodeinfo 0,1" in link["message"]
    counters = only(found, "counters.partner mlx5_3:1")
    assert counters["status"] == "skip" and counters["observed"] == "no-answer", counters
    assert verdict == "WARNING"


# --- a far-end tool that hangs -----------------------------------------------------------------
# The chain runs its tools with -t (MAD timeout), so the real ones give up by themselves in
# seconds; a kill at the command timeout is a local hang (the umad device, the MAD agent). It is
# played by a wrapper first on PATH that sleeps past the command timeout for one step and runs
# the fabric's shim (the real tool on ibsim) for every other.

COMMAND_TIMEOUT_S = 3.0


def hanging(node: Node, tmp_path: Path, tool: str, pattern: str, mark: str) -> Dict[str, str]:
    """node's environment with ``tool`` hanging (``sleep mark``) when its arguments match the
    sh glob ``pattern``; the real tool on the fabric otherwise."""
    wrappers = tmp_path / "hang"
    wrappers.mkdir(exist_ok=True)
    real = Path(node.env["PATH"].split(os.pathsep)[0]) / tool  # the fabric's shim
    wrapper = wrappers / tool
    wrapper.write_text(
        f'#!/bin/sh\ncase "$*" in\n{pattern}) exec sleep {mark} ;;\nesac\nexec {real} "$@"\n'
    )
    wrapper.chmod(0o755)
    return dict(node.env, PATH=f"{wrappers}{os.pathsep}{node.env['PATH']}")


@pytest.mark.parametrize(
    "tool, pattern, check_id, step",
    [
        ("smpquery", "*nodeinfo*", "link.partner", "nodeinfo 0,1"),
        ("smpquery", "*nodedesc*", "link.partner", "nodedesc 0,1"),
        ("perfquery", "*-x*", "counters.partner", "-x "),
    ],
)
def test_a_far_end_tool_killed_at_the_command_timeout_warns_naming_it(
    node, tmp_path, tool, pattern, check_id, step
):
    """Today a hung nodeinfo reads as a skip ('MAD timeout', node OK) and a hung nodedesc or
    -x as a pass: each is a warn naming the command, and the node is not OK."""
    mark = S.marker()
    env = hanging(node, tmp_path, tool, pattern, mark)
    found, verdict = node.check_verdict(
        "mlx5_3", "--command-timeout", str(COMMAND_TIMEOUT_S), env=env
    )
    assert S.wait_no_strays(mark) == []
    results = [r for key, rs in found.items() if key.startswith(check_id) for r in rs]
    warns = [r for r in results if r["status"] == "warn"]
    assert len(warns) == 1, results
    warn = warns[0]
    assert warn["observed"] == "timed-out", warn
    assert f"{tool} -C mlx5_3 -P 1" in warn["message"] and step in warn["message"], warn
    assert "timed out after" in warn["message"] and "local hang" in warn["message"], warn
    assert not [r for r in results if r["status"] == "skip" and "MAD timeout" in r["message"]]
    assert verdict == "WARNING"
    if step != "nodeinfo 0,1":  # what the hung step did not stop is still graded
        assert [r["status"] for r in results if r["status"] != "warn"] == ["pass"], results


# --- not root -------------------------------------------------------------------------------

NOBODY = ("--reuid=65534", "--regid=65534", "--clear-groups")
CAPTURES = Path(TESTS_DIR) / "captures" / "ibsim-partner"

# As root, in the private mount namespace: the node's /dev and /sys, a probe of the device as
# nobody (its stderr to $3), then argv.
_NOT_ROOT_NODE = r"""
set -eu
dev=$1 sys=$2 probe=$3
shift 3
mount -t tmpfs -o mode=0755 ibdiag-test-dev "$dev"
for name in null zero full random urandom tty; do
    : > "$dev/$name"
    mount --bind "/dev/$name" "$dev/$name"
done
ln -s /proc/self/fd "$dev/fd"
mkdir "$dev/infiniband"
mknod -m 600 "$dev/infiniband/umad0" c 231 0
mount --rbind "$dev" /dev
mount --bind "$sys" /sys
setpriv --reuid=65534 --regid=65534 --clear-groups sh -c 'exec 3<> /dev/infiniband/umad0' \
    2> "$probe" || true
exec "$@"
"""


def _program(name: str) -> str:
    path = shutil.which(name, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
    assert path, f"{name} not found (install infiniband-diags / util-linux)"
    return path


def test_the_simulator_lets_any_user_read_the_fabric(node, tmp_path):
    """Why the not-root run below is not on the fabric: as nobody the simulated tool reads the
    far end as root does; its only failure is umad2sim's own scratch tree (./sys-PID) in a
    working directory nobody may write, which says nothing about the umad device."""
    assert os.geteuid() == 0, "runs a tool as nobody: run as root"
    argv = [_program("setpriv"), *NOBODY, _program("ibsim-run"), _program("smpquery")]
    argv += ["-C", SIM_CA, "-P", "1", "-t", "200", "-D", "nodeinfo", "0,1"]
    env = {**node.fabric.env, "SIM_HOST": DEVICES["mlx5_3"]}
    writable = tmp_path / "writable"
    writable.mkdir(mode=0o777)
    writable.chmod(0o777)
    done = subprocess.run(argv, env=env, cwd=writable, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done
    assert parse_dotted(done.stdout)["LocalPort"] == "21"
    kept = tmp_path / "kept"
    kept.mkdir(mode=0o755)
    done = subprocess.run(argv, env=env, cwd=kept, capture_output=True, text=True, timeout=30)
    assert done.returncode != 0
    assert "Failed to make directory <./sys-" in done.stderr, done.stderr


def test_not_root_skips_both_partner_checks_with_no_access(tmp_path):
    assert os.geteuid() == 0, "binds over /sys and /dev in a mount namespace: run as root"
    sys_root = tmp_path / "sys"
    # the builder writes the class entries libibumad reads (infiniband_mad/umad0: mlx5_0 port 1)
    write_node(str(sys_root), mlx5_node(1, port=dict(rate="40 Gb/sec (4X QDR)")))
    umad = sys_root / "class" / "infiniband_mad"
    assert (umad / "umad0" / "ibdev").read_text() == "mlx5_0\n"
    shims = tmp_path / "bin"
    shims.mkdir()
    for tool in ("smpquery", "perfquery"):  # the real tools, as nobody
        shim = shims / tool
        shim.write_text(
            f'#!/bin/sh\nexec {_program("setpriv")} {" ".join(NOBODY)} {_program(tool)} "$@"\n'
        )
        shim.chmod(0o755)
    (tmp_path / "dev").mkdir()
    probe = tmp_path / "probe.stderr"
    argv = [sys.executable, "-m", "ibdiag", "check", "--level", "standard", "--json"]
    argv += ["--deadline", str(DEADLINE_S)]  # --sysfs: the default /sys, this node's
    done = subprocess.run(
        [_program("unshare"), "--mount", "--propagation", "private", "sh", "-c", _NOT_ROOT_NODE,
         "not-root-node", str(tmp_path / "dev"), str(sys_root), str(probe), *argv],
        env=dict(os.environ, PATH=f"{shims}{os.pathsep}{os.environ.get('PATH', '')}"),
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    # the node is as described: the kernel refuses nobody the umad device
    assert "/dev/infiniband/umad0: Permission denied" in probe.read_text(), probe.read_text()
    assert done.stdout, done.stderr
    report = json.loads(done.stdout)
    partner = [r for r in report["results"] if r["check_id"] in PARTNER_CHECKS]
    assert sorted((r["check_id"], r["target"]) for r in partner) == [
        ("counters.partner", "mlx5_0:1"),
        ("link.partner", "mlx5_0:1"),
    ], partner
    for result in partner:
        assert result["status"] == "skip", result
        assert result["observed"] == "no-access", result
        assert "not root" in result["message"], result
        assert "smpquery exited 255" in result["message"], result
        assert "can't open UMAD port (mlx5_0:1)" in result["message"], result
    # what the tool said is what tests/captures/ibsim-partner/notroot-nodeinfo.* recorded
    runs = report["snapshot"]["commands"].values()
    nodeinfo = next(r for r in runs if r["role"] == "partner-nodeinfo mlx5_0:1")
    assert nodeinfo["rc"] == int((CAPTURES / "notroot-nodeinfo.rc").read_text())
    stdout = nodeinfo["stdout"].replace(_program("smpquery"), "smpquery")  # the shim's argv[0]
    assert stdout == (CAPTURES / "notroot-nodeinfo.txt").read_text()
    stderr = re.sub(r"\[\d+\]", "[PID]", nodeinfo["stderr"])
    assert stderr == (CAPTURES / "notroot-nodeinfo.stderr").read_text()
