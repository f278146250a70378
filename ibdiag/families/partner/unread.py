"""Why a step of the far end's chain gave nothing usable (``ibdiag.facts.partner.Unread``),
judged once, here, from the run as recorded - so the partner checks read a typed fact and never
a tool's text.

What any run's failure means is judged by ``ibdiag.families.outcome_of`` (never started, not
installed, no permission, a hang); this module judges further only what the far end alone
knows. The chain runs every tool with a MAD timeout (``-t``) well inside the command timeout,
so libibmad gives up by itself, in seconds, on a far end that does not answer. Hence:

- **a local hang** - the tool was killed at the command timeout (or by a signal, or could not
  be executed): the umad device, the MAD agent or the HCA firmware on this node is wedged. A
  symptom, named by the command, as our own port's hung perfquery is (``perfquery.errors``).
- **no answer** - the tool gave up itself (``_do_madrpc failed``, ``query failed``): on a
  physical function whose port is ACTIVE (the only ports the chain runs for) the far end must
  answer; that it does not (a hung switch port or SMA, a bad cable) is a symptom. So is a far
  end that answers the SMPs but not the PMA steps (``no-pma``): the InfiniBand architecture
  requires a PMA with PortCounters on every port, so its performance agent is hung or broken,
  and a far end whose error counters cannot be read must not pass. Not so on a virtual
  function (it cannot send SMPs off the node): a skip.
- **not possible from here** - the tools missing, the umad device missing (``ib_umad`` not
  loaded, a container without ``/dev/infiniband``) or refused (not root?), no subnet manager
  yet (LID 0), a step never started: skips, each with its own reason.
"""

from __future__ import annotations

import re
from typing import Optional

from ibdiag.facts.outcome import NoData, RunOutcome
from ibdiag.facts.partner import NEVER_RUN, PMA_STEPS, Unread
from ibdiag.families import outcome_of
from ibdiag.model import CommandRun

_NO_UMAD = re.compile(
    r"is ib_umad module loaded|can't read ABI version|No IB devices found", re.IGNORECASE
)
_UMAD_PORT = re.compile(r"can't open UMAD port|Failed to open '", re.IGNORECASE)
_NO_SM = re.compile(r"LID is 0|can't resolve destination port 0", re.IGNORECASE)
_NO_ANSWER = re.compile(r"_do_madrpc failed|query failed|timeout|timed out", re.IGNORECASE)
LOCAL_HANG = (
    "though its MAD timeout (-t) lets libibmad give up by itself in seconds: a local hang "
    "(the umad device, the MAD agent or the HCA firmware?)"
)
_WORDS = {member.value: member for member in NoData}


def judged(step: str, outcome: RunOutcome, kind: str, reason: str, symptom: bool = False) -> Unread:
    """The ``Unread`` of ``step`` saying ``kind`` and ``reason``, with its ``NoData``: the
    member of that word (``no-answer``, ``no-sm``...), else the run's own judgement (a hang's
    ``timed-out``, ``never-run``'s ``not-started``, ``no-access``'s ``no-permission``)."""
    no_data = _WORDS.get(kind, outcome.no_data)
    return Unread(step=step, kind=kind, no_data=no_data, symptom=symptom, reason=reason,
                  command=outcome.command)  # fmt: skip


def unread(
    step: str, run: CommandRun, target: str, *, virtual_function: bool, smp_answered: bool
) -> Optional[Unread]:
    """Why ``run`` (of ``step``, on our port ``target``) gave nothing usable; None when it
    succeeded. ``virtual_function``: our device is an SR-IOV VF; ``smp_answered``: the far end
    answered nodeinfo."""
    outcome = outcome_of(run)
    if outcome.no_data is None:
        return None
    command = outcome.command
    failure = outcome.reason or ""
    text = f"{run.stderr}\n{run.stdout}"

    def found(kind: str, why: str, is_symptom: bool = False) -> Unread:
        return judged(step, outcome, kind, why, is_symptom)

    if outcome.no_data == NoData.NOT_STARTED:
        return found(NEVER_RUN, failure)
    if outcome.cut_short:  # killed at the timeout, by a signal, or not executable
        hang = outcome.symptom()
        return found(
            outcome.symptom_kind(),
            f"`{command}` on ACTIVE port {target} {hang}, {LOCAL_HANG}",
            True,
        )
    if outcome.no_data == NoData.NOT_INSTALLED:
        return found("not-installed", f"the infiniband-diags tools are not installed: {failure}")
    if outcome.no_data == NoData.NO_PERMISSION:
        why = "the umad device cannot be opened as this user (not root?)"
        return found("no-access", f"{why}: {failure}")
    if _NO_UMAD.search(text):
        why = "no umad device here (the ib_umad module not loaded, or a container without it)"
        return found("no-umad", f"{why}: {failure}")
    if _UMAD_PORT.search(text):
        why = (
            f"the umad port of {target} could not be opened (not root, or no umad device for "
            "it here)"
        )
        return found("no-access", f"{why}: {failure}")
    if _NO_SM.search(text):
        why = "no subnet manager has configured the far end yet (LID 0)"
        return found("no-sm", f"{why}: {failure}")
    if _NO_ANSWER.search(text):
        if virtual_function:
            why = (
                f"{target} is a virtual function: it cannot query the far end (its PF's "
                "management agent does)"
            )
            return found("virtual-function", f"{why}: {failure}")
        if step in PMA_STEPS and smp_answered:
            why = (
                f"the far end of ACTIVE port {target} answers SMPs but not `{command}`: every "
                "InfiniBand port must answer PMA queries (PortCounters), so its performance "
                "agent is hung or broken and its error counters cannot be seen"
            )
            return found("no-pma", f"{why}: {failure}", True)
        why = (
            f"the far end of ACTIVE port {target} did not answer `{command}` (MAD timeout): a "
            "hung switch port or management agent, or a bad cable"
        )
        return found("no-answer", f"{why}: {failure}", True)
    return found("unread", f"the far end could not be read: {failure}")
