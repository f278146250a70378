"""What each command run is for: the ``role`` a run is planned with and recorded under.

A role names the purpose of a run and its target, never its program or argv: the interpreter
that turns runs into typed Snapshot fields (``ibdiag.sources.interpret``) and the checks that
say why a field is missing both find a run by its role (``Snapshot.run``). A site may run
nccl-tests through a wrapper script, numactl may prefix a loopback, perfquery may fall back to
its plain form: the role stays what the run was for.

Roles are plain, stable strings - they are written into bundles and read back - built only
here. This module imports nothing of ibdiag's, so a check may use it at no cost.
"""

from __future__ import annotations

import re
from typing import NamedTuple, Optional, Tuple

# perfquery modes: "x" extended PortCounters, "basic" plain PortCounters (the fallback when -x
# fails), "E" PortRcvErrorDetails, "X" PortXmitDataSL.
PERFQUERY_MODES = ("x", "basic", "E", "X")

KERNEL_LOG = "kernel-log dmesg"
KERNEL_LOG_FALLBACK = "kernel-log journalctl"  # when dmesg gave nothing usable
IBSTAT = "inventory ibstat"
IBV_DEVINFO = "inventory ibv_devinfo"
GPU_TOPOLOGY = "gpu-topology nvidia-smi"
NCCL_TESTS = "nccl-tests"


def perfquery(mode: str, target: str) -> str:
    """``perfquery-x mlx5_0:1``: the perfquery of ``mode`` on one local port."""
    if mode not in PERFQUERY_MODES:
        raise ValueError(f"unknown perfquery mode {mode!r}; one of {PERFQUERY_MODES}")
    return f"perfquery-{mode} {target}"


# The far end of a port's cable (``ibdiag.sources.partner``), in the order its chain runs them:
# who is there (nodeinfo), then its name, its port's PortInfo, the switch's port 0 (its LID) and
# our own port's PortInfo (the widths and speeds it supports, which sysfs does not show), then
# the partner port's PMA counters: "perfquery-x" (PortCountersExtended), "perfquery" (plain
# PortCounters: when -x failed or printed no error counters), "perfquery-E" (PortRcvErrorDetails).
# "local-portinfo", "perfquery" and "perfquery-E" run only where an earlier answer asks for them.
PARTNER_STEPS = (
    "nodeinfo",
    "nodedesc",
    "portinfo",
    "portinfo0",
    "local-portinfo",
    "perfquery-x",
    "perfquery",
    "perfquery-E",
)
PARTNER_PREFIX = "partner-"


def partner(step: str, target: str) -> str:
    """``partner-nodeinfo mlx5_0:1``: one step of reading the far end of ``target``'s cable."""
    if step not in PARTNER_STEPS:
        raise ValueError(f"unknown partner step {step!r}; one of {PARTNER_STEPS}")
    return f"{PARTNER_PREFIX}{step} {target}"


def partner_step(role: Optional[str]) -> Optional[str]:
    """The step of a far-end role (``partner-perfquery-x mlx5_0:1`` -> ``perfquery-x``); None
    for any other role."""
    head = (role or "").split(" ", 1)[0]
    step = head[len(PARTNER_PREFIX) :] if head.startswith(PARTNER_PREFIX) else None
    return step if step in PARTNER_STEPS else None


def ethtool_stats(netdev: str) -> str:
    """``ethtool-S ib0``: the statistics of one netdev."""
    return f"ethtool-S {netdev}"


def loopback_client(target: str, attempt: int, gpu: Optional[int] = None) -> str:
    """``loopback client mlx5_0:1 attempt 2 gpu 3``: the ib_write_bw client sending from
    ``target``, with ``gpu`` its ``--use_cuda`` GPU (GPUDirect RDMA; no ``gpu`` part: none)."""
    return f"loopback client {target} attempt {attempt}{_gpu(gpu)}"


def loopback_server(
    server: str, client_target: str, attempt: int, gpu: Optional[int] = None
) -> str:
    """``loopback server mlx5_1:1 for mlx5_0:1 attempt 1 gpu 1``: the ib_write_bw server on
    ``server`` that ``client_target``'s attempt writes to, with the server's own GPU."""
    return f"loopback server {server} for {client_target} attempt {attempt}{_gpu(gpu)}"


def _gpu(gpu: Optional[int]) -> str:
    return "" if gpu is None else f" gpu {gpu}"


class LoopbackRole(NamedTuple):
    """What a loopback role says: ``side`` "client" or "server", the client's port (the test's
    target), the server's port (None in a client's role: it does not name it), the attempt,
    and the ``--use_cuda`` GPU of this side (None: no GPUDirect RDMA, or a role recorded
    before roles named it)."""

    side: str
    client: str
    server: Optional[str]
    attempt: int
    gpu: Optional[int] = None


_PORT = r"\S+:\d{1,3}"  # mlx5_0:1, as Device.target names a port
_ATTEMPT = r"attempt (?P<attempt>\d{1,6})(?: gpu (?P<gpu>\d{1,6}))?"
_LOOPBACK_CLIENT = re.compile(rf"loopback client (?P<client>{_PORT}) {_ATTEMPT}")
_LOOPBACK_SERVER = re.compile(
    rf"loopback server (?P<server>{_PORT}) for (?P<client>{_PORT}) {_ATTEMPT}"
)


def read_loopback(role: Optional[str]) -> Optional[LoopbackRole]:
    """The parts of a role ``loopback_client``/``loopback_server`` built; None for any other."""
    if not role:
        return None
    match = _LOOPBACK_CLIENT.fullmatch(role)
    if match is not None:
        return LoopbackRole("client", match["client"], None, *_attempt_gpu(match))
    match = _LOOPBACK_SERVER.fullmatch(role)
    if match is not None:
        return LoopbackRole("server", match["client"], match["server"], *_attempt_gpu(match))
    return None


def _attempt_gpu(match: re.Match) -> Tuple[int, Optional[int]]:
    gpu = match["gpu"]
    return int(match["attempt"]), None if gpu is None else int(gpu)
