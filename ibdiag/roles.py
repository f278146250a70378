"""What each command run is for: the typed ``Role`` a run is planned with, run under and
recorded by (``Snapshot.commands`` is keyed by it).

A role names the purpose of a run and its target, never its program or argv: a site may run
nccl-tests through a wrapper script, numactl may prefix a loopback, perfquery may fall back to
its plain form: the role stays what the run was for. A family (``ibdiag.families``) builds its
roles when it plans, the runner records the role it was given, and the family finds its runs by
role when it interprets them; nothing reads an argv or parses a role back.

A role has one string form - how it is written into bundles and reports and read back
(``Role.parse``) - built only here::

    perfquery-x mlx5_0:1              family "perfquery", step "x", target "mlx5_0:1"
    partner-nodeinfo mlx5_0:1         family "partner", step "nodeinfo"
    ethtool-S ib0                     family "ethtool", step "S", target "ib0"
    kernel-log dmesg                  family "kernel-log", target "dmesg" (the tool)
    nccl-tests                        family "nccl-tests", nothing else
    loopback client mlx5_0:1 attempt 2 gpu 3
    loopback server mlx5_1:1 for mlx5_0:1 attempt 1 gpu 1

That is ``family[-step][ target]``, and the loopback's own form (its server, attempt and GPU).
A new family names itself with letters, digits and underscores (a dash separates the step).

This module imports nothing of ibdiag's, so a check may use it at no cost.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, NamedTuple, Optional

from pydantic import PlainSerializer, PlainValidator, WithJsonSchema

# perfquery modes: "x" extended PortCounters, "basic" plain PortCounters (the fallback when -x
# fails), "E" PortRcvErrorDetails, "X" PortXmitDataSL.
PERFQUERY_MODES = ("x", "basic", "E", "X")

# The far end of a port's cable (``ibdiag.families.partner``), in the order its chain runs them:
# who is there (nodeinfo), then its name, its port's PortInfo, the switch's port 0 (its LID) and
# our own port's PortInfo (the widths and speeds it supports, which sysfs does not show), then
# the partner port's PMA counters: "perfquery-x" (PortCountersExtended), "perfquery" (plain
# PortCounters: when -x failed or printed no error counters), "perfquery-E" (PortRcvErrorDetails).
# "local-portinfo", "perfquery" and "perfquery-E" run only where an earlier answer asks for them.
# "perfquery-T" (PortExtendedSpeedsCounters: FEC per lane) runs beside "perfquery-x".
PARTNER_STEPS = (
    "nodeinfo",
    "nodedesc",
    "portinfo",
    "portinfo0",
    "local-portinfo",
    "perfquery-x",
    "perfquery",
    "perfquery-E",
    "perfquery-T",
)

# Families whose own name holds a dash: their string form has no step.
_DASHED_FAMILIES = ("kernel-log", "gpu-topology", "nccl-tests")


class Role(NamedTuple):
    """What one run is for. ``family``: the command family that planned it; ``step``: which of
    the family's queries (perfquery's mode, the far end's step, the loopback's side); ``target``:
    the port, netdev or tool it is about. Loopback roles also name the ``server`` port a client
    writes to (in the server's role), the ``attempt`` and the ``--use_cuda`` ``gpu`` of this
    side (None: no GPUDirect RDMA)."""

    family: str
    step: str = ""
    target: str = ""
    server: Optional[str] = None
    attempt: Optional[int] = None
    gpu: Optional[int] = None

    def __str__(self) -> str:
        if self.family == "loopback":
            gpu = "" if self.gpu is None else f" gpu {self.gpu}"
            if self.step == "server":
                return (
                    f"loopback server {self.server} for {self.target} attempt {self.attempt}{gpu}"
                )
            return f"loopback client {self.target} attempt {self.attempt}{gpu}"
        head = f"{self.family}-{self.step}" if self.step else self.family
        return f"{head} {self.target}" if self.target else head

    @classmethod
    def parse(cls, text: str) -> Optional[Role]:
        """The role whose string form is ``text``; None for text no role prints."""
        if not isinstance(text, str) or not text:
            return None
        if text.startswith("loopback "):
            return _parse_loopback(text)
        head, _, target = text.partition(" ")
        if head in _DASHED_FAMILIES:
            family, step = head, ""
        else:
            family, _, step = head.partition("-")
        if not _NAME.fullmatch(family) or (step and not _STEP.fullmatch(step)):
            return None
        role = cls(family, step, target)  # a target is a name sysfs gave: anything goes
        return role if str(role) == text else None


def _role(value: Any) -> Role:
    if isinstance(value, Role):
        return value
    role = Role.parse(value) if isinstance(value, str) else None
    if role is None:
        raise ValueError(f"not a role: {str(value)[:80]!r}")
    return role


# A model field holding a role: in JSON its one string form, read back into the typed value.
RoleField = Annotated[
    Role,
    PlainValidator(_role),
    PlainSerializer(str, return_type=str),
    WithJsonSchema({"type": "string"}),
]

_NAME = re.compile(r"[a-z][a-z0-9_-]*")
_STEP = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


def perfquery(mode: str, target: str) -> Role:
    """``perfquery-x mlx5_0:1``: the perfquery of ``mode`` on one local port."""
    if mode not in PERFQUERY_MODES:
        raise ValueError(f"unknown perfquery mode {mode!r}; one of {PERFQUERY_MODES}")
    return Role("perfquery", mode, target)


def partner(step: str, target: str) -> Role:
    """``partner-nodeinfo mlx5_0:1``: one step of reading the far end of ``target``'s cable."""
    if step not in PARTNER_STEPS:
        raise ValueError(f"unknown partner step {step!r}; one of {PARTNER_STEPS}")
    return Role("partner", step, target)


def partner_step(role: Optional[Role]) -> Optional[str]:
    """The step of a far-end role (``partner-perfquery-x mlx5_0:1`` -> ``perfquery-x``); None
    for any other role."""
    if role is None or role.family != "partner" or role.step not in PARTNER_STEPS:
        return None
    return role.step


def ethtool_stats(netdev: str) -> Role:
    """``ethtool-S ib0``: the statistics of one netdev."""
    return Role("ethtool", "S", netdev)


KERNEL_LOG = Role("kernel-log", target="dmesg")
KERNEL_LOG_FALLBACK = Role("kernel-log", target="journalctl")  # when dmesg gave nothing usable
IBSTAT = Role("inventory", target="ibstat")
IBV_DEVINFO = Role("inventory", target="ibv_devinfo")
GPU_TOPOLOGY = Role("gpu-topology", target="nvidia-smi")
NCCL_TESTS = Role("nccl-tests")


def loopback_client(target: str, attempt: int, gpu: Optional[int] = None) -> Role:
    """``loopback client mlx5_0:1 attempt 2 gpu 3``: the ib_write_bw client sending from
    ``target``, with ``gpu`` its ``--use_cuda`` GPU (GPUDirect RDMA; no ``gpu`` part: none)."""
    return Role("loopback", "client", target, None, attempt, gpu)


def loopback_server(
    server: str, client_target: str, attempt: int, gpu: Optional[int] = None
) -> Role:
    """``loopback server mlx5_1:1 for mlx5_0:1 attempt 1 gpu 1``: the ib_write_bw server on
    ``server`` that ``client_target``'s attempt writes to, with the server's own GPU."""
    return Role("loopback", "server", client_target, server, attempt, gpu)


_PORT = r"\S+:\d{1,3}"  # mlx5_0:1, as Device.target names a port
_ATTEMPT = r"attempt (?P<attempt>\d{1,6})(?: gpu (?P<gpu>\d{1,6}))?"
_LOOPBACK_CLIENT = re.compile(rf"loopback client (?P<client>{_PORT}) {_ATTEMPT}")
_LOOPBACK_SERVER = re.compile(
    rf"loopback server (?P<server>{_PORT}) for (?P<client>{_PORT}) {_ATTEMPT}"
)


def _parse_loopback(text: str) -> Optional[Role]:
    for side, pattern in (("client", _LOOPBACK_CLIENT), ("server", _LOOPBACK_SERVER)):
        match = pattern.fullmatch(text)
        if match is not None:
            gpu = None if match["gpu"] is None else int(match["gpu"])
            server = match["server"] if side == "server" else None
            return Role("loopback", side, match["client"], server, int(match["attempt"]), gpu)
    return None
