"""The far end of each cable: each port's chain of read-only infiniband-diags runs.

For every ACTIVE InfiniBand port (a port that is not ACTIVE has no cable partner to ask), through
its own HCA and port (``-C DEV -P PORT``) and over the direct route ``0,1`` (out of that port,
one hop: whatever the cable plugs into), one chain of steps, each run recorded with its role
(``ibdiag.roles.partner``, planned here, recorded by the runner):

1. at once: ``smpquery -D nodeinfo 0,1`` - who is there: NodeType, node GUID, and LocalPort,
   the partner's port number the cable is in; ``smpquery -D nodedesc 0,1`` (its name) and
   ``smpquery -D portinfo 0,1 0`` (port 0: a switch's LID, where its PMA answers), neither of
   which needs LocalPort;
2. ``smpquery -D portinfo 0,1 LOCALPORT`` (its port's state, widths, speeds) and, for a switch
   (its LID known), beside it ``perfquery -x LID LOCALPORT`` and ``perfquery -T LID LOCALPORT``
   (PortExtendedSpeedsCounters: FEC per lane; optional, many PMAs answer that they cannot); for
   a CA (back to back: its LID is in that PortInfo, its port 0 was read for nothing) -x and -T
   after it;
3. only where it can matter, ``smpquery -D portinfo 0 PORT``: our own port's PortInfo (what it
   enables and supports, which sysfs does not say), needed for "could be 4X" only when the
   partner enables and supports more than the link runs at, or to know our width/speed when
   sysfs's ``rate`` did not say, or for ``link.mtu`` when the partner's NeighborMTU is below its
   MtuCap (only our MtuCap says whether our end holds the link down; our active MTU itself
   comes from ibv_devinfo, so a link at the switch port's cap costs no run)
   (``ibdiag.facts.partner.local_port_info_matters``); beside the next PMA step;
4. plain ``perfquery LID LOCALPORT`` when -x failed or printed no error counters (a PMA without
   the additional PortCountersExtended fields, e.g. the ibsim simulator's, or an older switch);
5. ``perfquery -E LID LOCALPORT`` (PortRcvErrorDetails) only when the counters read say
   PortRcvErrors or PortRcvSwitchRelayErrors is not 0 (or do not say): the details break those
   two down, so with both 0 they are all 0 (``ibdiag.facts.partner.rcv_error_details_matter``).

A step that was not needed (local-portinfo, the plain perfquery, -E) is not run and not
recorded: its absence is not a failure, and its fact stays None (``Partner``). A healthy
switch partner with the extended counters costs 6 tool runs in 2 dependent waves (nodeinfo,
nodedesc, portinfo0; portinfo, perfquery -x, perfquery -T).

Every port's chain runs in a thread of its own, all at once; each chain is sequential where a
step needs an earlier one's answer. They run through the collection's one ``Runner`` (its
deadline, per-command timeout, output budget), alongside the other read-only commands. Each
tool gets a MAD timeout (``-t``) well inside the command timeout: libibmad tries a query 3
times, and nodedesc and perfquery send two queries, so one unanswered partner costs at most
6 MAD timeouts, not the runner's kill.

An answer is range-checked before it plans the next step (``ibdiag.facts.partner_ranges``): a
LocalPort 0 or above 254 (or beyond NumPorts), a multicast or wider-than-16-bit LID is never put
on a command line; the steps that needed it are recorded as never started, naming what was
wrong.

A step whose prerequisite did not succeed is recorded as never started (``CommandRun.skipped``)
naming the step that failed and why, so a check can say why the far end is unknown; its argv
holds ``<LocalPort>``/``<LID>`` where the value it needed would have gone (the steps run only
on an earlier answer, ``CONDITIONAL_STEPS``, are not recorded then: nothing asked for them).
Whether the tools are there and may open the umad device is judged from their own result (not
found, exit 255 with ``can't open UMAD port``), never by testing ``/dev/infiniband/umad*``
first: under the simulator there is no such node, and distributions name it differently.

Read-only: nodeinfo, nodedesc, portinfo and perfquery without ``-r``/``-R`` only send Get MADs.
Never a Set, never a counter reset.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Dict, Iterator, List, NamedTuple, Optional, Tuple

from ibdiag import roles
from ibdiag.families import Planned, refused_run
from ibdiag.model import CommandRun, Device, LinkRate
from ibdiag.runner import interruptible
from ibdiag.sources import names

DIRECT_ROUTE = "0,1"  # out of the port the tool opens (-C/-P), one hop
LOCAL_ROUTE = "0"  # this node itself
MAD_TIMEOUT_MIN_MS = 50
MAD_TIMEOUT_MAX_MS = 1000  # libibmad's own default
MAD_TIMEOUTS_PER_COMMAND = 8  # 2 queries x 3 tries, and some room for starting the tool
LOCAL_PORT = "<LocalPort>"  # in the argv of a step never started: the value it lacked
LID = "<LID>"
# Run only when an earlier step's answer asks for them (module doc): never recorded otherwise.
CONDITIONAL_STEPS = ("local-portinfo", "perfquery", "perfquery-E")


class Step(NamedTuple):
    """One command of a port's chain: its step name (``roles.PARTNER_STEPS``) and argv."""

    step: str
    argv: List[str]


def mad_timeout_ms(command_timeout_s: float) -> int:
    """The ``-t`` (ms) for the chain's tools: an eighth of the command timeout (module doc),
    between 50 ms and libibmad's default of 1 s."""
    wanted = int(command_timeout_s * 1000 / MAD_TIMEOUTS_PER_COMMAND)
    return max(MAD_TIMEOUT_MIN_MS, min(MAD_TIMEOUT_MAX_MS, wanted))


def _smpquery(device: str, number: int, mad_ms: int, *query: str) -> List[str]:
    return ["smpquery", "-C", device, "-P", str(number), "-t", str(mad_ms), "-D", *query]


def _perfquery(device: str, number: int, mad_ms: int, flags: Tuple[str, ...], lid, port):
    return ["perfquery", "-C", device, "-P", str(number), "-t", str(mad_ms), *flags,
            str(lid), str(port)]  # fmt: skip


_PERFQUERY_FLAGS = {
    "perfquery-x": ("-x",),
    "perfquery": (),
    "perfquery-E": ("-E",),
    "perfquery-T": ("-T",),
}


def steps(device: str, number: int, mad_ms: int, local_port=LOCAL_PORT, lid=LID) -> Dict[str, Step]:
    """Every step of ``device``/``number``'s chain by name; ``local_port`` and ``lid`` are the
    partner's (their placeholders while unknown). The names are vetted by the caller."""
    found = {
        "nodeinfo": _smpquery(device, number, mad_ms, "nodeinfo", DIRECT_ROUTE),
        "local-portinfo": _smpquery(device, number, mad_ms, "portinfo", LOCAL_ROUTE, str(number)),
        "nodedesc": _smpquery(device, number, mad_ms, "nodedesc", DIRECT_ROUTE),
        "portinfo": _smpquery(device, number, mad_ms, "portinfo", DIRECT_ROUTE, str(local_port)),
        "portinfo0": _smpquery(device, number, mad_ms, "portinfo", DIRECT_ROUTE, "0"),
    }
    for step, flags in _PERFQUERY_FLAGS.items():
        found[step] = _perfquery(device, number, mad_ms, flags, lid, local_port)
    return {step: Step(step, argv) for step, argv in found.items()}


def ports(devices: List[Device]) -> Iterator[Tuple[Device, int, Optional[str]]]:
    """(device, port number, why no command may name it or None) for every ACTIVE InfiniBand
    port, as ``ibdiag.families.perfquery`` vets the ports it runs for."""
    for dev, number, _, why in _ports(devices):
        yield dev, number, why


_Vetted = Tuple[Device, int, Optional[LinkRate], Optional[str]]


def _ports(devices: List[Device]) -> Iterator[_Vetted]:
    """``ports``, with each port's sysfs rate."""
    for dev in devices:
        for port in dev.ports:
            if port.state == 4 and port.is_infiniband:
                why = names.device_name_problem(dev.name) or names.port_problem(port.number)
                yield dev, port.number, port.rate, why


def read_partners(runner, devices: List[Device]) -> Dict[str, CommandRun]:
    """Every ACTIVE InfiniBand port's chain, all at once, through ``runner`` (an
    ``ibdiag.runner.command_runner.Runner``); the runs by ``CommandRun.key``. Ports whose
    names may not go on a command line are left to ``refused``."""
    mad_ms = mad_timeout_ms(runner.timeout_s)
    todo = [(dev.name, number, rate) for dev, number, rate, why in _ports(devices) if why is None]
    if not todo:
        return {}
    runs: Dict[str, CommandRun] = {}
    pool = ThreadPoolExecutor(max_workers=len(todo), thread_name_prefix="ibdiag-partner")
    try:
        chains = [
            pool.submit(read_partner, runner, name, number, mad_ms, rate)
            for name, number, rate in todo
        ]
        for chain in chains:
            runs.update({run.key: run for run in interruptible.result(chain)})
    except BaseException:  # KeyboardInterrupt: start nothing more, kill what runs, re-raise
        runner.stop()
        raise
    finally:
        pool.shutdown(wait=True)
    return runs


def refused(devices: List[Device]) -> List[Planned]:
    """The chain of each ACTIVE InfiniBand port whose name may not go on a command line,
    planned refused with the reason (recorded as never started)."""
    found: List[Planned] = []
    for dev, number, why in ports(devices):
        if why is not None:
            target = f"{dev.name}:{number}"
            for step in steps(dev.name, number, MAD_TIMEOUT_MAX_MS).values():
                if step.step not in CONDITIONAL_STEPS:  # only ever run on an earlier answer
                    found.append(_planned(step, target, why))
    return found


def read_partner(
    runner, device: str, number: int, mad_ms: int, rate: Optional[LinkRate] = None
) -> List[CommandRun]:
    """One port's chain (module doc), every step it needed recorded: run, or never started
    with why. ``rate``: our port's sysfs rate (None: unknown - our own PortInfo is then read
    whenever the partner's port is)."""
    from ibdiag.facts.partner import (
        ERROR_COUNTER,
        local_port_info_matters,
        our_width_speed,
        rcv_error_details_matter,
    )
    from ibdiag.facts.partner_ranges import local_port_problem
    from ibdiag.families.partner.readings import output, pma_counters, port_info_of
    from ibdiag.families.partner.smpquery import parse_nodeinfo
    from ibdiag.families.perfquery import reading

    target = f"{device}:{number}"
    chain = _Chain(runner, target)
    planned = steps(device, number, mad_ms)
    nodeinfo, _, port0 = chain.run(planned["nodeinfo"], planned["nodedesc"], planned["portinfo0"])
    who = parse_nodeinfo(output(nodeinfo)) if nodeinfo.succeeded else None
    why = chain.failed("nodeinfo", nodeinfo)
    if why is None and (who is None or who.local_port is None or who.node_type is None):
        why = chain.unusable("nodeinfo", "it named no LocalPort or NodeType")
    wrong = None
    if why is None and who is not None and who.local_port is not None:
        wrong = local_port_problem(who.local_port, who.num_ports)
    if wrong is not None:  # nonsense is never used to plan the next command
        why = chain.unusable("nodeinfo", f"its answer cannot be: {wrong}")
    if why is not None or who is None:
        for step in ("portinfo", "perfquery-x", "perfquery-T"):
            chain.never_started(planned[step], why or "")
        return chain.runs

    planned = steps(device, number, mad_ms, local_port=who.local_port)
    extended_run: Optional[CommandRun] = None
    if who.node_type == "Switch":  # its LID is port 0's, read already: -x beside portinfo
        lid, why = _lid(chain, "portinfo0", port0)
        if why is None:
            planned = steps(device, number, mad_ms, local_port=who.local_port, lid=lid)
            info, extended_run, _ = chain.run(
                planned["portinfo"], planned["perfquery-x"], planned["perfquery-T"]
            )
        else:
            (info,) = chain.run(planned["portinfo"])
    else:  # a CA's LID is in the PortInfo of its port
        (info,) = chain.run(planned["portinfo"])
        lid, why = _lid(chain, "portinfo", info)
        planned = steps(device, number, mad_ms, local_port=who.local_port, lid=lid or LID)
    # steps that wait for nothing more: they go with the next wave the chain runs anyway
    pending: List[Step] = []
    if local_port_info_matters(port_info_of(info), *our_width_speed(rate)):
        pending.append(planned["local-portinfo"])
    if why is not None:
        chain.never_started(planned["perfquery-x"], why)
        chain.never_started(planned["perfquery-T"], why)
        chain.run(*pending)
        return chain.runs

    if extended_run is None:
        extended_run = chain.run(planned["perfquery-x"], planned["perfquery-T"], *pending)[0]
        pending = []
    extended = reading(extended_run)
    basic = None
    if extended is None or ERROR_COUNTER not in extended.counters:
        basic = reading(chain.run(planned["perfquery"], *pending)[0])
        pending = []
    counters = pma_counters(extended, basic)
    if counters is not None and rcv_error_details_matter(counters.counters):
        pending.append(planned["perfquery-E"])
    chain.run(*pending)
    return chain.runs


def _lid(chain: _Chain, step: str, run: CommandRun) -> Tuple[Optional[int], Optional[str]]:
    """(the partner's LID, None) from ``run`` of ``step`` (portinfo0 for a switch, portinfo
    for a CA); (None, why the PMA steps cannot run) when it failed or named no LID."""
    from ibdiag.facts.partner_ranges import lid_problem
    from ibdiag.families.partner.readings import output
    from ibdiag.families.partner.smpquery import parse_portinfo

    why = chain.failed(step, run)
    lid = parse_portinfo(output(run)).lid if why is None else None
    wrong = lid_problem(lid) if lid is not None else None
    if why is None and wrong is not None:
        why = chain.unusable(step, f"its answer cannot be: {wrong}")
    elif why is None and not lid:
        why = chain.unusable(
            step,
            "its LID is 0: no subnet manager has configured it yet"
            if lid == 0
            else "it named no LID",
        )
    return (lid, None) if why is None else (None, why)


def _planned(step: Step, target: str, refused: Optional[str] = None) -> Planned:
    return Planned(roles.partner(step.step, target), step.argv, refused=refused)


class _Chain:
    """The runs of one port's chain, in the order they were started."""

    def __init__(self, runner, target: str) -> None:
        self.runner = runner
        self.target = target
        self.runs: List[CommandRun] = []

    def run(self, *wanted: Step) -> List[CommandRun]:
        """Run ``wanted`` at once; their runs, in that order, recorded with their roles."""
        if not wanted:
            return []
        planned = [_planned(step, self.target) for step in wanted]
        by_role = self.runner.run_planned([(item.role, item.argv) for item in planned])
        done = [by_role[str(item.role)] for item in planned]
        self.runs.extend(done)
        return done

    def never_started(self, step: Step, why: str) -> None:
        self.runs.append(refused_run(_planned(step, self.target, why)))

    def failed(self, step: str, run: CommandRun) -> Optional[str]:
        """Why the steps after ``step`` cannot run, when ``run`` did not succeed."""
        failure = run.failure()
        if failure is None:
            return None
        return f"needs {roles.partner(step, self.target)}, which did not succeed: {failure}"

    def unusable(self, step: str, what: str) -> str:
        return f"needs {roles.partner(step, self.target)}, which succeeded but {what}"
