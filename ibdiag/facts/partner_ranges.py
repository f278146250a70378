"""What a far end may answer: the ranges of its numbers and identities (``Partner``).

Everything the chain reads of the far end is the far end's word: a broken SMA, a forged node,
or a bad parse can print any number. Before an answer is graded or used to plan the next
command (``ibdiag.families.partner.chain``), and again when the runs are interpreted (a bundle may
hold anything), it is checked here. Healthy answers:

- LocalPort 1-254: port 0 is a switch's management port, never a cable's end; 255 is reserved
  (and means "all ports" to the PMA); at most the node's NumPorts;
- a LID (where the PMA answers) 1-0xBFFF: 0xC000 and up are multicast and the permissive LID,
  nothing beyond 16 bits exists; 0 means no subnet manager yet (a skip, not nonsense);
- a node GUID that is not one of this node's own HCAs, unless it names another ACTIVE port of
  it whose own far end names this port back (a loopback cable);
- one (node GUID, port) per cable: two local ports cannot both be plugged into it;
- a perfquery answer for the LID and port it was asked about (its header, and the PMA's own
  PortSelect).

Each function returns None for a healthy value, else one phrase saying what is wrong.
"""

from __future__ import annotations

import re
from typing import Optional

PORT_MAX = 254
UNICAST_LID_MAX = 0xBFFF


def local_port_problem(local_port: int, num_ports: Optional[int]) -> Optional[str]:
    """What is wrong with a nodeinfo's LocalPort (the far end's port the cable is in)."""
    if not 1 <= local_port <= PORT_MAX:
        return f"LocalPort {local_port} is no cable's port (1-{PORT_MAX})"
    if num_ports is not None and local_port > num_ports:
        return f"LocalPort {local_port} is beyond its NumPorts {num_ports}"
    return None


def lid_problem(lid: int) -> Optional[str]:
    """What is wrong with the far end's LID (0, no subnet manager yet, is judged apart)."""
    if lid == 0 or 1 <= lid <= UNICAST_LID_MAX:
        return None
    if 0 < lid <= 0xFFFF:
        return f"LID {lid} (0x{lid:04x}) is a multicast or the permissive LID, not a port's"
    return f"LID {lid} is not a 16-bit LID"


def guid_value(guid: Optional[str]) -> Optional[int]:
    """A GUID as a number, whichever way it is written (``0x0002c90300a1b2c3`` as smpquery
    prints it, ``0002:c903:00a1:b2c3`` as sysfs does); None when it is none."""
    text = (guid or "").strip().lower()
    text = text[2:] if text.startswith("0x") else text
    digits = text.replace(":", "")
    if not digits or len(digits) > 16 or not re.fullmatch(r"[0-9a-f]+", digits):
        return None
    return int(digits, 16) or None  # all zeros: no GUID (an unprogrammed function's)


def answer_problem(
    said_lid: Optional[int],
    said_port: Optional[int],
    port_select: Optional[int],
    lid: Optional[int],
    port: Optional[int],
) -> Optional[str]:
    """What is wrong with a perfquery answer asked about ``lid``/``port``: its header
    (``# Port counters: Lid 1 port 21``, what the tool says it asked) or its PortSelect (what
    the PMA says it answered for) names another."""
    if lid is None or port is None:
        return None
    if (said_lid is not None and said_lid != lid) or (said_port is not None and said_port != port):
        return (
            f"perfquery asked about LID {lid} port {port} printed counters of LID {said_lid} "
            f"port {said_port}"
        )
    if port_select is not None and port_select != port:
        return f"the PMA asked about port {port} answered for PortSelect {port_select}"
    return None
