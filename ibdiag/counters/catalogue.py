"""The counter catalogue: every InfiniBand port counter and mlx5 hw_counter ibdiag knows.

One table the whole product uses - check messages, ``ibdiag explain``, and later the HTML
tooltips and Prometheus HELP text. Each entry says what the counter means, its category, its
width where the IB specification fixes one (a counter stuck at 2**width - 1 is saturated and
cannot count any more), its unit, and its default grading rule with the reason for it.

Categories: ``error`` (should not move on a healthy port), ``congestion`` (moves under load;
reported), ``traffic`` (informative), ``config`` (a setting, not an event). A counter missing
from the table is still read and shown, as category ``unknown``, and never graded.

Sources: IBTA PortCounters/PortCountersExtended attributes (widths); the kernel's
drivers/infiniband/core/sysfs.c and mlx5 hw_counters (names); NVIDIA's mlx5 counter
documentation as summarised in ../shared/seeds/000 (meanings).
"""

from __future__ import annotations

import functools
import re
from typing import Dict, NamedTuple, Optional, Tuple

from ibdiag.thresholds import CounterRule, Thresholds


class CounterInfo(NamedTuple):  # immutable; made a tenth as fast as a frozen dataclass
    name: str
    directory: str  # counters, counters_ext or hw_counters
    category: str  # error, congestion, traffic, config, unknown
    meaning: str
    width: Optional[int] = None  # bits, where the IB spec fixes it
    unit: str = "events"  # events, packets, bytes, words (4 bytes: bytes = value x 4), ms
    on_increase: str = "info"  # default: what any increase since the baseline means
    rate_warn_per_hour: Optional[float] = None
    rate_fail_per_hour: Optional[float] = None
    reason: str = ""  # why the default rule is what it is
    action: str = ""  # what to do when it moves
    aliases: Tuple[str, ...] = ()  # the same counter as perfquery names it

    @property
    def saturated_value(self) -> Optional[int]:
        return 2**self.width - 1 if self.width else None

    def default_rule(self) -> CounterRule:
        return CounterRule.model_construct(
            on_increase=self.on_increase,  # type: ignore[arg-type]
            rate_warn_per_hour=self.rate_warn_per_hour,
            rate_fail_per_hour=self.rate_fail_per_hour,
            lifetime_limit=None,
        )


_BER_RULE = (
    "any increase warns; above 120 per hour fails: the bit-error-rate 1e-12 rule NVSentinel "
    "drains on"
)


def _entries():
    port = "counters"
    hw = "hw_counters"
    ext = "counters_ext"
    pma = "perfquery"
    eth = "ethtool"
    yield from (
        # --- IB port counters (PortCounters; widths from the IB specification) -------------
        CounterInfo("symbol_error", port, "error",
                    "Symbol errors detected on the physical lanes: bit errors on the wire, "
                    "from a dirty or damaged cable or transceiver.",
                    width=16, on_increase="warn", rate_fail_per_hour=120, reason=_BER_RULE),
        CounterInfo("link_error_recovery", port, "error",
                    "Times the link retrained successfully after errors (the link survived).",
                    width=8, on_increase="warn",
                    reason="each retrain stalls traffic on the port; any increase warns"),
        CounterInfo("link_downed", port, "error",
                    "Times the link failed to recover from errors and went down.",
                    width=8, on_increase="fail",
                    reason="any increase fails: every job on the port lost its connections"),
        CounterInfo("port_rcv_errors", port, "error",
                    "Received packets with errors (malformed, bad CRC/ICRC, length).",
                    width=16, on_increase="warn", rate_fail_per_hour=120,
                    reason="corrupt packets are dropped and retransmitted; any increase warns, "
                    "above 120 per hour (the BER 1e-12 order) fails"),
        CounterInfo("port_rcv_remote_physical_errors", port, "error",
                    "Received packets marked bad (EBP) by an upstream link: the fault is "
                    "on another link of the path, not this cable.",
                    width=16, on_increase="warn", rate_fail_per_hour=120,
                    reason="the fabric is damaging packets upstream; any increase warns, above "
                    "120 per hour fails"),
        CounterInfo("port_rcv_switch_relay_errors", port, "error",
                    "Received packets a switch could not forward (switch ports only).",
                    width=16, on_increase="warn",
                    reason="always zero on an HCA; any increase warns"),
        CounterInfo("port_xmit_discards", port, "error",
                    "Outbound packets discarded: the port was down or the fabric could not "
                    "take them (congestion, head-of-line timeout).",
                    width=16, on_increase="warn", rate_fail_per_hour=1000,
                    reason="discards come in bursts when a peer goes down; any increase warns, "
                    "a sustained 1000 per hour means packets are being lost continuously"),
        CounterInfo("port_rcv_constraint_errors", port, "error",
                    "Received packets dropped by partition (P_Key) or raw-packet filtering.",
                    width=8, on_increase="warn", rate_fail_per_hour=120,
                    reason="usually a partition misconfiguration; any increase warns, above 120 "
                    "per hour fails"),
        CounterInfo("port_xmit_constraint_errors", port, "error",
                    "Outbound packets dropped by partition (P_Key) or raw-packet filtering.",
                    width=8, on_increase="warn", rate_fail_per_hour=120,
                    reason="usually a partition misconfiguration; any increase warns, above 120 "
                    "per hour fails"),
        CounterInfo("local_link_integrity_errors", port, "error",
                    "Times the local physical errors exceeded the link's integrity threshold.",
                    width=4, on_increase="fail",
                    reason="any increase fails: the link is failing its own integrity check"),
        CounterInfo("excessive_buffer_overrun_errors", port, "error",
                    "Times consecutive flow-control buffer overruns exceeded the threshold: "
                    "the peer ignores credits.",
                    width=4, on_increase="fail",
                    reason="any increase fails: flow control between the two ports is broken"),
        CounterInfo("VL15_dropped", port, "error",
                    "Subnet-management (VL15) packets dropped for lack of buffer space.",
                    width=16, on_increase="info",
                    reason="informative: an SM sweeping faster than the HCA answers, not a "
                    "data-path fault"),
        CounterInfo("port_rcv_discards", port, "error",
                    "Received packets discarded (mlx4 extension).",
                    on_increase="warn", reason="any increase warns"),
        CounterInfo("port_xmit_wait", port, "congestion",
                    "Ticks the port had data to send but no flow-control credits: "
                    "back-pressure from a congested fabric.",
                    width=32, reason="reported, not graded: it grows with load"),
        CounterInfo("port_xmit_data", port, "traffic",
                    "Data transmitted, in 4-byte words (32-bit on HCAs without extended "
                    "counters).", width=32, unit="words"),
        CounterInfo("port_rcv_data", port, "traffic",
                    "Data received, in 4-byte words (32-bit on HCAs without extended "
                    "counters).", width=32, unit="words"),
        CounterInfo("port_xmit_packets", port, "traffic", "Packets transmitted.",
                    width=32, unit="packets"),
        CounterInfo("port_rcv_packets", port, "traffic", "Packets received.",
                    width=32, unit="packets"),
        CounterInfo("unicast_xmit_packets", port, "traffic", "Unicast packets transmitted.",
                    unit="packets"),
        CounterInfo("unicast_rcv_packets", port, "traffic", "Unicast packets received.",
                    unit="packets"),
        CounterInfo("multicast_xmit_packets", port, "traffic", "Multicast packets transmitted.",
                    unit="packets"),
        CounterInfo("multicast_rcv_packets", port, "traffic", "Multicast packets received.",
                    unit="packets"),
        # --- mlx4 counters_ext: 64-bit PortCountersExtended ---------------------------------
        CounterInfo("port_xmit_data_64", ext, "traffic",
                    "Data transmitted (64-bit), in 4-byte words.", unit="words"),
        CounterInfo("port_rcv_data_64", ext, "traffic",
                    "Data received (64-bit), in 4-byte words.", unit="words"),
        CounterInfo("port_xmit_packets_64", ext, "traffic", "Packets transmitted (64-bit).",
                    unit="packets"),
        CounterInfo("port_rcv_packets_64", ext, "traffic", "Packets received (64-bit).",
                    unit="packets"),
        CounterInfo("port_unicast_xmit_packets", ext, "traffic", "Unicast packets transmitted.",
                    unit="packets"),
        CounterInfo("port_unicast_rcv_packets", ext, "traffic", "Unicast packets received.",
                    unit="packets"),
        CounterInfo("port_multicast_xmit_packets", ext, "traffic",
                    "Multicast packets transmitted.", unit="packets"),
        CounterInfo("port_multicast_rcv_packets", ext, "traffic", "Multicast packets received.",
                    unit="packets"),
        # --- mlx5 hw_counters: transport errors ---------------------------------------------
        CounterInfo("duplicate_request", hw, "error",
                    "Received requests already executed: the requester retransmitted because "
                    "an ACK was lost.", on_increase="warn",
                    reason="lost ACKs mean loss in the fabric; any increase warns"),
        CounterInfo("implied_nak_seq_err", hw, "error",
                    "ACKs for RDMA read/response with a PSN beyond the expected one: the "
                    "responder skipped a packet.", on_increase="warn",
                    reason="sequence errors force retransmission; any increase warns"),
        CounterInfo("local_ack_timeout_err", hw, "error",
                    "Times a QP's ACK timer expired (RC/XRC/DCT): the peer was unreachable or "
                    "the path dropped packets.", on_increase="warn", rate_fail_per_hour=100,
                    reason="each timeout stalls the collective for the retransmit timeout; any "
                    "increase warns, above 100 per hour fails"),
        CounterInfo("out_of_buffer", hw, "error",
                    "Drops because the receive queue had no posted WQE: the application did "
                    "not post receives fast enough.", on_increase="warn",
                    reason="an application or tuning issue more than a link fault; any increase "
                    "warns"),
        CounterInfo("out_of_sequence", hw, "error",
                    "Packets received with an unexpected PSN: drops or reordering in the "
                    "fabric.", on_increase="warn",
                    reason="sequence errors force retransmission; any increase warns"),
        CounterInfo("packet_seq_err", hw, "error",
                    "NAK-sequence-error packets received: the responder saw a gap.",
                    on_increase="warn",
                    reason="sequence errors force retransmission; any increase warns"),
        CounterInfo("req_cqe_error", hw, "error",
                    "Requester completions with error status: a send failed in hardware.",
                    on_increase="warn", reason="any increase warns: a job saw an I/O error"),
        CounterInfo("resp_cqe_error", hw, "error",
                    "Responder completions with error status.",
                    on_increase="warn", reason="any increase warns: a job saw an I/O error"),
        CounterInfo("req_cqe_flush_error", hw, "error",
                    "Requester work requests flushed because their QP went to the error state "
                    "(QP teardown).", reason="informative: every job end flushes QPs"),
        CounterInfo("resp_cqe_flush_error", hw, "error",
                    "Responder work requests flushed because their QP went to the error state "
                    "(QP teardown).", reason="informative: every job end flushes QPs"),
        CounterInfo("resp_local_length_error", hw, "error",
                    "Incoming data longer than the posted receive buffer.", on_increase="warn",
                    reason="an application bug or mismatch; any increase warns"),
        CounterInfo("req_remote_access_errors", hw, "error",
                    "The remote side rejected an RDMA operation: memory not registered or no "
                    "access right.", on_increase="warn", reason="any increase warns"),
        CounterInfo("resp_remote_access_errors", hw, "error",
                    "This side rejected a remote RDMA operation (bad key or rights).",
                    on_increase="warn", reason="any increase warns"),
        CounterInfo("req_remote_invalid_request", hw, "error",
                    "The remote side received a malformed or unsupported operation.",
                    on_increase="warn", reason="any increase warns"),
        CounterInfo("req_transport_retries_exceeded", hw, "error",
                    "Times a requester gave up after its transport retries (default 7): the "
                    "peer was unreachable and the connection broke.",
                    on_increase="warn", rate_fail_per_hour=10,
                    reason="each one broke a connection (a job error); any increase warns, "
                    "above 10 per hour fails"),
        CounterInfo("req_rnr_retries_exceeded", hw, "error",
                    "Times a requester gave up after Receiver-Not-Ready retries.",
                    on_increase="warn", rate_fail_per_hour=10,
                    reason="each one broke a connection; any increase warns, above 10 per hour "
                    "fails"),
        CounterInfo("rnr_nak_retry_err", hw, "error",
                    "RNR NAKs received beyond the retry limit.",
                    on_increase="warn", rate_fail_per_hour=10,
                    reason="each one broke a connection; any increase warns, above 10 per hour "
                    "fails"),
        CounterInfo("rx_icrc_encapsulated", hw, "error",
                    "RoCE packets received with a bad ICRC.", on_increase="warn",
                    reason="corrupt packets; any increase warns"),
        # --- mlx5 hw_counters: RoCE congestion control ---------------------------------------
        CounterInfo("np_cnp_sent", hw, "congestion",
                    "CNPs sent by this notification point after ECN-marked packets arrived.",
                    reason="reported, not graded: DCQCN at work"),
        CounterInfo("np_ecn_marked_roce_packets", hw, "congestion",
                    "RoCE packets received with an ECN congestion mark.",
                    reason="reported, not graded: DCQCN at work"),
        CounterInfo("rp_cnp_handled", hw, "congestion",
                    "CNPs handled by this reaction point (it slowed down).",
                    reason="reported, not graded: DCQCN at work"),
        CounterInfo("rp_cnp_ignored", hw, "congestion",
                    "CNPs received and ignored by this reaction point.",
                    reason="reported, not graded"),
        CounterInfo("roce_adp_retrans", hw, "congestion",
                    "Adaptive retransmissions of RoCE traffic.",
                    reason="reported, not graded: grows with loss and congestion"),
        CounterInfo("roce_adp_retrans_to", hw, "congestion",
                    "Adaptive-retransmission timeouts of RoCE traffic.", reason="reported"),
        CounterInfo("roce_slow_restart", hw, "congestion",
                    "Times RoCE slow restart was used.", reason="reported"),
        CounterInfo("roce_slow_restart_cnps", hw, "congestion",
                    "CNPs generated by RoCE slow restart.", reason="reported"),
        CounterInfo("roce_slow_restart_trans", hw, "congestion",
                    "Times RoCE slow restart moved to the slow state.", reason="reported"),
        # --- mlx5 hw_counters: informative ---------------------------------------------------
        CounterInfo("lifespan", hw, "config",
                    "Maximum age in milliseconds of a cached counter read: a setting.",
                    unit="ms"),
        CounterInfo("rx_atomic_requests", hw, "traffic", "RDMA atomic requests received."),
        CounterInfo("rx_dct_connect", hw, "traffic", "DCT connection requests received."),
        CounterInfo("rx_read_requests", hw, "traffic", "RDMA Read requests received."),
        CounterInfo("rx_write_requests", hw, "traffic",
                    "RDMA Write requests received: climbs on every port during an NCCL "
                    "all-reduce."),
        # --- perfquery only: QP1 and PortRcvErrorDetails (perfquery -E) ----------------------
        CounterInfo("QP1Dropped", pma, "error",
                    "Management (QP1/GSI) packets dropped.",
                    reason="informative: management traffic, not the data path"),
        CounterInfo("PortLocalPhysicalErrors", pma, "error",
                    "Receive errors from the local physical layer (the detail behind "
                    "port_rcv_errors): the cable or transceiver of this link.",
                    on_increase="warn", rate_fail_per_hour=120,
                    reason="bit errors on this link; any increase warns, above 120 per hour "
                    "fails"),
        CounterInfo("PortMalformedPktErrors", pma, "error",
                    "Received packets that were malformed.", on_increase="warn",
                    reason="any increase warns"),
        CounterInfo("PortBufferOverrunErrors", pma, "error",
                    "Received packets dropped because the receive buffer overran.",
                    on_increase="warn", reason="any increase warns: flow control trouble"),
        CounterInfo("PortDLIDMappingErrors", pma, "error",
                    "Received packets whose destination LID could not be mapped.",
                    on_increase="warn", reason="any increase warns: routing or LID trouble"),
        CounterInfo("PortVLMappingErrors", pma, "error",
                    "Received packets whose SL could not be mapped to a VL.",
                    on_increase="warn", reason="any increase warns: SL-to-VL configuration"),
        CounterInfo("PortLoopingErrors", pma, "error",
                    "Received packets dropped because they looped.",
                    on_increase="warn", reason="any increase warns: a routing loop"),
        # --- ethtool -S on mlx5 netdevs (RoCE and IPoIB): the physical port's view -----------
        CounterInfo("link_down_events_phy", eth, "error",
                    "Times the physical link went down.", on_increase="fail",
                    reason="any increase fails: every flow on the port was interrupted"),
        CounterInfo("rx_symbol_err_phy", eth, "error",
                    "Symbol errors on the physical lanes.", on_increase="warn",
                    rate_fail_per_hour=120, reason=_BER_RULE),
        CounterInfo("rx_pcs_symbol_err_phy", eth, "error",
                    "Symbol errors seen by the PCS layer (after FEC).", on_increase="warn",
                    rate_fail_per_hour=120, reason=_BER_RULE),
        CounterInfo("rx_crc_errors_phy", eth, "error",
                    "Frames received with a bad CRC.", on_increase="warn",
                    rate_fail_per_hour=120,
                    reason="corrupt frames; any increase warns, above 120 per hour fails"),
        CounterInfo("rx_discards_phy", eth, "error",
                    "Frames the port dropped for lack of receive buffer (congestion or PFC "
                    "off on a lossless class).", on_increase="warn", rate_fail_per_hour=1000,
                    reason="RoCE needs a lossless fabric; any increase warns, a sustained 1000 "
                    "per hour fails"),
        CounterInfo("tx_discards_phy", eth, "error",
                    "Frames dropped on transmit.", on_increase="warn", rate_fail_per_hour=1000,
                    reason="any increase warns, a sustained 1000 per hour fails"),
        CounterInfo("rx_out_of_buffer", eth, "error",
                    "Packets dropped because the receive queue had no buffer posted.",
                    on_increase="warn", reason="any increase warns (an application or tuning "
                    "issue more than a link fault)"),
        CounterInfo("tx_pause_storm_warning_events", eth, "error",
                    "Times the port sent pause frames continuously past the warning threshold.",
                    on_increase="warn", reason="a pause storm starting: any increase warns"),
        CounterInfo("tx_pause_storm_error_events", eth, "error",
                    "Times the pause-storm watchdog stopped the port from sending pause frames.",
                    on_increase="fail", reason="a pause storm: any increase fails"),
        CounterInfo("rx_corrected_bits_phy", eth, "congestion",
                    "Bits corrected by FEC: a healthy link corrects some; a rising rate is an "
                    "early sign of a degrading cable.", reason="reported, not graded"),
        CounterInfo("rx_pause_ctrl_phy", eth, "congestion", "Pause frames received.",
                    reason="reported, not graded: flow control at work"),
        CounterInfo("tx_pause_ctrl_phy", eth, "congestion", "Pause frames sent.",
                    reason="reported, not graded: flow control at work"),
        CounterInfo("rx_buffer_passed_thres_phy", eth, "congestion",
                    "Times the receive buffer passed its congestion threshold.",
                    reason="reported, not graded"),
        CounterInfo("rx_bytes_phy", eth, "traffic", "Bytes received by the physical port.",
                    unit="bytes"),
        CounterInfo("tx_bytes_phy", eth, "traffic", "Bytes sent by the physical port.",
                    unit="bytes"),
    )  # fmt: skip


# Counters that come in numbered families (per priority, per SL): one entry serves them all.
_FAMILIES: Tuple[Tuple[str, CounterInfo], ...] = (
    (r"rx_prio\d+_pause", CounterInfo("rx_prioN_pause", "ethtool", "congestion",
                                      "PFC pause frames received for one priority.",
                                      reason="reported, not graded: PFC at work")),
    (r"tx_prio\d+_pause", CounterInfo("tx_prioN_pause", "ethtool", "congestion",
                                      "PFC pause frames sent for one priority.",
                                      reason="reported, not graded: PFC at work")),
    (r"rx_prio\d+_discards", CounterInfo("rx_prioN_discards", "ethtool", "error",
                                         "Frames of one priority dropped on receive.",
                                         on_increase="warn",
                                         reason="drops on a lossless class; any increase warns")),
    (r"Port(Xmit|Rcv)DataSL\d+", CounterInfo("PortXmitDataSLN", "perfquery", "traffic",
                                             "Data per service level (perfquery -X/-S), in "
                                             "4-byte words.", unit="words")),
)  # fmt: skip


_PHYSICAL = (
    "reseat or replace the cable/transceiver; check the peer switch port's counters "
    "(ibqueryerrors) and mlxlink for the link's eye and BER"
)
_FABRIC = (
    "look at the path, not only this node: the peer nodes' ports, switch counters "
    "(ibqueryerrors) and congestion; a single bad link upstream shows here"
)
_PARTITION = "check the partition (P_Key) configuration of the SM and this port"
_APPLICATION = "an application or QP-tuning issue more than a fabric fault: check the job's logs"
_HCA = "hardware completion errors: check dmesg for mlx5 errors and the HCA's firmware version"
_LOSSLESS = (
    "RoCE needs a lossless class: check PFC/ECN on the host (mlnx_qos) and the switch port, and "
    "whether the port is congested"
)
_ACTIONS = {
    **dict.fromkeys(
        (
            "symbol_error link_error_recovery link_downed port_rcv_errors "
            "local_link_integrity_errors excessive_buffer_overrun_errors rx_icrc_encapsulated "
            "PortLocalPhysicalErrors link_down_events_phy rx_symbol_err_phy "
            "rx_pcs_symbol_err_phy rx_crc_errors_phy"
        ).split(),
        _PHYSICAL,
    ),
    **dict.fromkeys(
        (
            "port_rcv_remote_physical_errors port_rcv_switch_relay_errors port_xmit_discards "
            "port_rcv_discards duplicate_request implied_nak_seq_err local_ack_timeout_err "
            "out_of_sequence packet_seq_err req_transport_retries_exceeded "
            "PortMalformedPktErrors PortBufferOverrunErrors PortDLIDMappingErrors "
            "PortVLMappingErrors PortLoopingErrors"
        ).split(),
        _FABRIC,
    ),
    **dict.fromkeys("port_rcv_constraint_errors port_xmit_constraint_errors".split(), _PARTITION),
    **dict.fromkeys(
        (
            "out_of_buffer resp_local_length_error "
            "req_remote_access_errors resp_remote_access_errors req_remote_invalid_request "
            "req_rnr_retries_exceeded rnr_nak_retry_err"
        ).split(),
        _APPLICATION,
    ),
    **dict.fromkeys("req_cqe_error resp_cqe_error".split(), _HCA),
    **dict.fromkeys(
        (
            "rx_discards_phy tx_discards_phy rx_prioN_discards tx_pause_storm_warning_events "
            "tx_pause_storm_error_events"
        ).split(),
        _LOSSLESS,
    ),
    "rx_out_of_buffer": _APPLICATION,
}

# perfquery's names for the sysfs counters: the same PMA counters, read through a MAD.
_PERFQUERY_NAMES = {
    "symbol_error": "SymbolErrorCounter",
    "link_error_recovery": "LinkErrorRecoveryCounter",
    "link_downed": "LinkDownedCounter",
    "port_rcv_errors": "PortRcvErrors",
    "port_rcv_remote_physical_errors": "PortRcvRemotePhysicalErrors",
    "port_rcv_switch_relay_errors": "PortRcvSwitchRelayErrors",
    "port_xmit_discards": "PortXmitDiscards",
    "port_rcv_constraint_errors": "PortRcvConstraintErrors",
    "port_xmit_constraint_errors": "PortXmitConstraintErrors",
    "local_link_integrity_errors": "LocalLinkIntegrityErrors",
    "excessive_buffer_overrun_errors": "ExcessiveBufferOverrunErrors",
    "VL15_dropped": "VL15Dropped",
    "port_xmit_wait": "PortXmitWait",
    "port_xmit_data": "PortXmitData",
    "port_rcv_data": "PortRcvData",
    "port_xmit_packets": "PortXmitPkts",
    "port_rcv_packets": "PortRcvPkts",
    "unicast_xmit_packets": "PortUnicastXmitPkts",
    "unicast_rcv_packets": "PortUnicastRcvPkts",
    "multicast_xmit_packets": "PortMulticastXmitPkts",
    "multicast_rcv_packets": "PortMulticastRcvPkts",
}

CATALOGUE: Dict[str, CounterInfo] = {
    info.name: info._replace(
        action=_ACTIONS.get(info.name, ""),
        aliases=(_PERFQUERY_NAMES[info.name],) if info.name in _PERFQUERY_NAMES else (),
    )
    for info in _entries()
}


_BY_ALIAS: Dict[str, CounterInfo] = {
    alias: info for info in CATALOGUE.values() for alias in info.aliases
}


@functools.lru_cache(maxsize=4096)  # entries are frozen; renderers ask per sample, per scrape
def lookup(name: str, directory: str = "counters") -> CounterInfo:
    """The catalogue entry (by name, perfquery alias or numbered family), or an ``unknown``
    entry: the counter is shown, never graded."""
    info = CATALOGUE.get(name) or _BY_ALIAS.get(name)
    if info is not None:
        return info
    for pattern, family in _FAMILIES:
        if re.fullmatch(pattern, name):
            return family._replace(action=_ACTIONS.get(family.name, ""))
    return CounterInfo(name, directory, "unknown", "Not in ibdiag's catalogue; shown as read.")


def catalogue_name(name: str) -> str:
    """The catalogue's name for a counter perfquery names otherwise (``SymbolErrorCounter`` ->
    ``symbol_error``); any other name as it is. The far end's counters (``checks/partner.py``,
    the Prometheus renderer) are named this way, so they read as our own port's."""
    info = lookup(name)
    return info.name if name in info.aliases else name


def rule_for(name: str, thresholds: Thresholds) -> CounterRule:
    """The catalogue's default rule for ``name`` with the thresholds' overrides on top.

    An override of ``symbol_error`` also applies to perfquery's ``SymbolErrorCounter``.
    """
    info, default = _default_rule(name)
    override = thresholds.counters.get(info.name) or thresholds.counters.get(name)
    if override is None:
        return default
    fields = {key: getattr(override, key) for key in override.model_fields_set}
    return default.model_copy(update=fields)


@functools.lru_cache(maxsize=4096)
def _default_rule(name: str) -> Tuple[CounterInfo, CounterRule]:
    """``lookup(name)`` and its default rule, made once (CounterRule is frozen: shared safely)."""
    info = lookup(name)
    return info, info.default_rule()
