"""Known kernel-log signatures of HCA trouble, as data.

Each entry: a stable lower-case ``id`` (what a drain reason and the JSON name; never a
timestamp or line number), a Python ``regex`` searched in one log line's text (timestamp and
syslog prefix already removed), a ``severity`` (fail|warn|info), a ``title`` naming the
signature and a ``hint`` saying what to do.

How the table is used (``ibdiag.families.kernel_log.parser.classify``):

- Order matters: the first entry whose regex matches a line wins (one finding per line), so
  specific entries come before general ones (``mlx5.module_high_temp`` before
  ``mlx5.module_error``; the command-error entry before the health-report one, since both can
  say "syndrome").
- A plain entry only counts on a line that concerns an HCA: it names a known device, BDF or
  netdev, or is plainly about mlx4/mlx5/IB/IPoIB/RDMA. So "Link down" on an Intel NIC, AER on a
  GPU's BDF or "lost carrier" on eth0 (not an HCA netdev) give nothing.
- An entry with ``context`` (call traces, NULL dereferences, hung tasks: the header line never
  names the module) counts when ``context`` matches the line itself or one of the next
  ``context_lines`` lines (stopping at the next such header or an ``---[ end trace`` line),
  i.e. when a stack frame in an mlx/ib module follows.

Severities: ``fail`` = the HCA (or its driver) is not usable or data was lost: drain. ``warn`` =
degraded or suspicious, worth a look, not a drain on its own. ``info`` = a normal event kept as
evidence (link up, cable plugged) so the checks can count flaps or pair downs with ups.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

__all__ = [
    "IB_FRAME",
    "MLX5_FRAME",
    "SEVERITIES",
    "SIGNATURES",
    "KernelSignature",
    "signature_by_id",
]

SEVERITIES = ("fail", "warn", "info")

# A stack frame (or workqueue / RIP line) in an InfiniBand / mlx module:
# "mlx5_cmd_exec+0x54/0x80 [mlx5_core]", "RIP: 0010:port_pkey_list_insert+0x30/0x1a0 [ib_core]",
# "Workqueue: events mlx5e_tx_dim_work [mlx5_core]". "Modules linked in: ... mlx5_core ..."
# names every loaded module in every oops and deliberately does NOT match.
IB_FRAME = (
    r"\+0x[0-9a-f]+/0x[0-9a-f]+\s+\[(?:mlx[45]\w*|ib_\w+|rdma_\w+|iw_\w+|ipoib\w*|mlxfw"
    r"|nvidia_peermem)\]"
    r"|^Workqueue: .*\[(?:mlx[45]\w*|ib_\w+|rdma_\w+)\]"
)

# A frame that was running, in mlx5_core (not a speculative "? frame" left on the stack):
# "RIP: 0010:mlx5e_poll_ico_cq+0x8b/0x1a0 [mlx5_core]", "mlx5e_napi_poll+0x142/0x680
# [mlx5_core]" (the line as the parser leaves it: time stamp and indentation removed).
MLX5_FRAME = (
    r"^(?:RIP: [0-9a-f]{4}:)?(?:mlx5\w*|__mlx5\w*)\+0x[0-9a-f]+/0x[0-9a-f]+\s+\[mlx5_core\]"
)


@dataclass(frozen=True)
class KernelSignature:
    id: str
    regex: str
    severity: str
    title: str
    hint: str
    # Only for multi-line reports (see module doc): the regex that must match the line or one of
    # the next context_lines lines.
    context: Optional[str] = None
    context_lines: int = 0


SIGNATURES: Tuple[KernelSignature, ...] = (
    # --- firmware health -----------------------------------------------------------------------
    KernelSignature(
        id="mlx5.fw_fatal",
        # fail: the driver's health poller saw the firmware stop (fatal assert, missed health
        # counter) and moves the device to its error state; every command to it fails from then.
        regex=(
            r"(?i)fatal error \d+ detected|health compromised|health poll failed"
            r"|mlx5_enter_error_state|entering error state|health recovery flow aborted"
            r"|handle_bad_state|Internal error detected"
        ),
        severity="fail",
        title="mlx5 firmware fatal error / health compromised",
        hint=(
            "The HCA firmware stopped responding. Save the log (and `devlink health dump show` "
            "if available), drain the node, then reset the HCA (mlxfwreset or a reboot). If it "
            "recurs, update the firmware or reseat/replace the card."
        ),
    ),
    KernelSignature(
        id="mlx5.hw_unrecoverable",
        # fail: the firmware's health syndrome 0x8 (health.c ``hsynd_str``: "unrecoverable
        # hardware error"), printed by ``print_health_info`` whatever severity the buffer gives
        # ("Health issue observed, unrecoverable hardware error, severity(...)", or "synd 0x8:
        # unrecoverable hardware error" on older kernels). NVSentinel ``unrecoverable_err``.
        regex=r"(?i)unrecoverable hardware error",
        severity="fail",
        title="mlx5 unrecoverable hardware error (firmware health syndrome)",
        hint=(
            "The HCA reported an unrecoverable hardware error. Drain the node, save the log and "
            "`devlink health dump show <pci> reporter fw_fatal`, reset the HCA; replace the card "
            "if it recurs."
        ),
    ),
    KernelSignature(
        id="mlx5.fw_health_error",
        # fail: firmware's own health report with severity EMERG..ERR (0-3), e.g. "firmware
        # internal error, severity(3) ERROR".
        regex=r"(?i)Health issue observed,.*severity\(\s*[0-3]\s*\)",
        severity="fail",
        title="mlx5 firmware health issue (error severity)",
        hint=(
            "The HCA firmware reported an internal error. Note the syndrome (synd/ext_synd "
            "lines), drain the node and reset the HCA; open a vendor case with the syndrome if "
            "it repeats."
        ),
    ),
    KernelSignature(
        id="mlx5.access_reg_restricted",
        # info, never more: reading a restricted PF's port counters (DGX/HGX B200/B300 Fabric
        # Manager-managed "Limited PFs"; node_exporter #3434, #3823; gpud #1164) makes mlx5_ib
        # ask the firmware for the PPCNT register (ACCESS_REG, op_mod 1 = read), which that PF
        # refuses: "ACCESS_REG(0x805) op_mod(0x1) failed, status bad operation(0x2), syndrome
        # (0x9a6171), err(-22)", once per counter file read. The PF is fine; the reader is
        # not allowed. A timeout of ACCESS_REG is not this (mlx5.cmd_timeout), nor is another
        # status (mlx5.cmd_failed). NVSentinel ``access_reg_failed`` (non-fatal).
        regex=(
            r"ACCESS_REG\(0x805\)\s+op_mod\(0x[0-9a-fA-F]+\)\s+failed,\s+status bad operation"
            r"\(0x2\)"
        ),
        severity="info",
        title="restricted PF refused a register read (ACCESS_REG): not a fault",
        hint=(
            "A restricted (Fabric Manager-managed) PF refuses register reads; something read "
            "its port counters (node_exporter, gpud, an older ibdiag). Not a fault. If this PF "
            "carries no compute traffic, add it to ignore_hcas (config, or --ignore-hca): "
            "ibdiag then reads none of its counters and its lines are left out."
        ),
    ),
    KernelSignature(
        id="mlx5.cmd_failed",
        # info: a single firmware command returning a bad status (e.g. ACCESS_REG for a register
        # this function does not support) is common and usually harmless, notably on VFs; it
        # only matters next to timeouts or health events, which have their own entries.
        regex=r"mlx5_cmd_out_err|mlx5_cmd_check|cmd_status_err|failed, status [^,]*\(0x[0-9a-f]+\)",
        severity="info",
        title="mlx5 firmware command returned an error",
        hint=(
            "Usually benign (a register or feature this firmware/function does not support). "
            "Look further only if it repeats alongside command timeouts or health events."
        ),
    ),
    KernelSignature(
        id="mlx5.fw_health_report",
        # warn: the detail lines of a firmware health report (assert_var, synd, ext_synd); when
        # the report is fatal the fw_fatal / fw_health_error line beside it carries the fail.
        regex=(
            r"print_health_info|Health issue observed|assert_var\[|\bsynd 0x[0-9a-f]+"
            r"|\bext_synd 0x"
        ),
        severity="warn",
        title="mlx5 firmware health report (assert/syndrome)",
        hint=(
            "The firmware logged a health report. Check for a fatal/health-compromised line "
            "from the same device; keep the syndrome values for the vendor."
        ),
    ),
    # --- firmware command interface ------------------------------------------------------------
    KernelSignature(
        id="mlx5.cmd_timeout",
        # fail: the firmware did not answer a command within the driver's timeout; the command
        # slot is leaked and the device is usually wedged until reset.
        regex=(
            r"(?i)timeout\. Will cause a leak|wait_func\b.*\btimeout|cmd_work_handler\b.*"
            r"(?:timeout|canceled)|\bcommand timeout\b|cmd_exec\b.*\btimeout"
        ),
        severity="fail",
        title="mlx5 firmware command timeout",
        hint=(
            "The HCA firmware stopped answering commands. Drain the node and reset the HCA "
            "(reboot); check for firmware health events and update the firmware if it recurs."
        ),
    ),
    KernelSignature(
        id="mlx5.cmd_exhausted",
        # fail: no free command slot: earlier commands never completed, so new ones (and the
        # tasks issuing them) hang.
        regex=r"(?i)failed to alloc(?:ate)? command entry|cmd_work_handler",
        severity="fail",
        title="mlx5 command interface exhausted",
        hint=(
            "Firmware commands are stuck (no free command entry); tasks using the HCA will "
            "hang. Drain the node and reboot; report with the firmware version."
        ),
    ),
    # --- power, module, cable ------------------------------------------------------------------
    KernelSignature(
        id="mlx5.pcie_power_insufficient",
        # warn: the card runs, but the slot advertises less power than it wants (often a
        # platform that does not report slot power); active optics may be limited or throttled.
        regex=r"(?i)insufficient power on the PCIe slot",
        severity="warn",
        title="HCA reports insufficient PCIe slot power",
        hint=(
            "Check the slot's power rating and the server's slot-power settings against the "
            "card's needs; common and harmless on platforms that do not advertise slot power."
        ),
    ),
    # The port module events (mlx5_core events.c ``port_module``; port.c
    # ``mlx5_port_module_event`` before 5.0): "Port module event: module <n>, Cable plugged |
    # Cable unplugged [| Cable disabled]" at info, and "Port module event[error]: module <n>,
    # Cable error, <reason>" with one of: Power budget exceeded, Long Range for non MLNX
    # cable, Bus stuck(I2C or data shorted) (older: "Bus stuck (I2C ...)"), No EEPROM/retry
    # timeout, Enforce part number list, Unknown identifier, High Temperature, Bad or shorted
    # cable/module, "One or more network ports have been powered down due to
    # insufficient/unadvertised power on the PCIe slot" (older kernels, MLNX_OFED), Unknown
    # status/error. The line names the HCA (its BDF, mapped to the RDMA device) and the module
    # (= the port's cage: one module per PCI function). The reasons are matched by their own
    # words, so the error entries below also catch a line whose "Port module event[error]"
    # prefix was cut; specific reasons come before the catch-all ``mlx5.module_error``.
    KernelSignature(
        id="mlx5.module_high_temp",
        # fail: an overheated transceiver (Port module event ... High Temperature) or ASIC
        # (mlx5 temperature warning event: "High temperature on sensors with bit set ...") is
        # shut down by the firmware or errors; the link drops or degrades.
        regex=r"(?i)high temperature|over[- ]?temperature",
        severity="fail",
        title="HCA or cable module high temperature",
        hint=(
            "The HCA or its cable module (transceiver) overheated. Check airflow and fans, then "
            "reseat or replace the module/cable; a hot ASIC needs the chassis cooling fixed."
        ),
    ),
    KernelSignature(
        id="mlx5.module_power",
        # fail: the firmware keeps the module (or the ports) powered down: the module draws
        # more than the card's power budget for its cage, or the slot does not give (or
        # advertise) the power the ports need. No link until the power is fixed: reseating
        # the cable does not help, hence not mlx5.module_error's hint.
        regex=(
            r"(?i)power budget exceeded|ports have been powered down due to insufficient"
            r"|power slot exceeded"
        ),
        severity="fail",
        title="HCA port module powered down (power budget / PCIe slot power)",
        hint=(
            "The module needs more power than the card or slot gives it. Use a module within "
            "the card's power class (check the card's user manual), or a slot (and BIOS slot "
            "power setting) that gives the card its rated power."
        ),
    ),
    KernelSignature(
        id="mlx5.module_unsupported",
        # fail: the firmware refuses to enable the module: a long-range optic of another
        # vendor, a part not on the firmware's enforced part-number list, or an identifier it
        # does not know. The port stays down; reseating does not help, a supported part does.
        regex=(
            r"(?i)Long Range for non (?:MLNX|Mellanox) cable|Enforce part number list"
            r"|Port module event\[error\].*Unknown identifier"
        ),
        severity="fail",
        title="HCA port module not supported by the firmware",
        hint=(
            "The HCA firmware refuses this cable/transceiver. Replace it with a part the "
            "card supports (see the firmware release notes' cable list), or update the "
            "firmware if the part should be supported."
        ),
    ),
    KernelSignature(
        id="mlx5.module_error",
        # fail: the module is unusable as reported: bad or shorted cable, its I2C bus stuck,
        # its EEPROM unreadable, or an error the driver has no name for.
        regex=(
            r"Port module event\[error\]|(?i:cable error)|(?i:Bus stuck)"
            r"|(?i:Bad or shorted cable)|(?i:No EEPROM/retry timeout)"
        ),
        severity="fail",
        title="HCA port module (cable/transceiver) error",
        hint="Reseat the cable/transceiver; replace it if the error returns.",
    ),
    KernelSignature(
        id="mlx5.module_unplugged",
        # warn: no cable in a port; wrong if the port should be cabled (the port-state checks
        # give the verdict), right for a deliberately unused port.
        regex=r"(?i)cable unplugged|module absent|module (?:is )?not present",
        severity="warn",
        title="HCA port cable unplugged / module absent",
        hint="Check the cable is seated in this port (or that the port is meant to be unused).",
    ),
    KernelSignature(
        id="mlx5.module_disabled",
        # warn: the module was disabled (by configuration or the firmware), not failed: as for
        # an unplugged cable, the port-state checks say whether that port should be up.
        regex=r"(?i)Port module event: module \d+, Cable disabled",
        severity="warn",
        title="HCA port module disabled",
        hint=(
            "The cable/transceiver in this port was disabled. If the port should be up, check "
            "the port's configuration (mlxconfig / mlxlink) and the module; reseat it."
        ),
    ),
    KernelSignature(
        id="mlx5.module_plugged",
        # info: a cable was (re)inserted; evidence for module flaps.
        regex=r"(?i)\bcable plugged",
        severity="info",
        title="HCA port cable plugged",
        hint="Informational; repeated unplug/plug events point at a loose cable.",
    ),
    # --- PCIe AER on an HCA --------------------------------------------------------------------
    KernelSignature(
        id="pcie.aer_fatal",
        # fail: the link to the HCA failed; the device is reset or lost.
        regex=r"(?i)Uncorrect(?:ed|able) \(Fatal\)",
        severity="fail",
        title="PCIe fatal (uncorrectable) error on HCA",
        hint=(
            "The PCIe link to the HCA failed. Drain the node; reseat the card/riser, check the "
            "slot, and replace the HCA if it repeats."
        ),
    ),
    KernelSignature(
        id="pcie.aer_nonfatal",
        # fail: a transaction to/from the HCA was lost; the driver goes through error recovery
        # (device reset) and in-flight RDMA traffic is lost.
        regex=r"(?i)Uncorrect(?:ed|able) \(Non-Fatal\)",
        severity="fail",
        title="PCIe uncorrectable (non-fatal) error on HCA",
        hint=(
            "Data was lost on the PCIe link to the HCA. Drain the node; reseat the card/riser "
            "and check the slot; replace the HCA if it repeats."
        ),
    ),
    KernelSignature(
        id="pcie.aer_corrected",
        # warn: hardware corrected it, but a steady stream means a marginal link (riser, slot,
        # signal integrity) that can degrade to uncorrectable errors or a downtrained link.
        regex=r"(?i)AER: (?:Multiple )?Corrected error|severity=Corrected",
        severity="warn",
        title="PCIe corrected errors on HCA",
        hint=(
            "Occasional corrected errors are harmless; a steady rate means a marginal PCIe "
            "link: check the link speed/width and reseat the card or riser."
        ),
    ),
    # --- driver probe / init -------------------------------------------------------------------
    KernelSignature(
        id="mlx5.probe_failed",
        # fail: the driver could not bring the HCA up: no RDMA device, no netdev.
        regex=(
            r"probe of \S+ failed with error|mlx5_load_one failed|mlx5_init_one failed"
            r"|handle_hca_cap failed|mlx5_function_setup failed"
        ),
        severity="fail",
        title="HCA driver probe/initialisation failed",
        hint=(
            "The HCA did not initialise (no RDMA device). Check the firmware/driver versions "
            "are compatible, the card's PCIe link, then reload the driver or reboot."
        ),
    ),
    KernelSignature(
        id="mlx5.sriov_enable_failed",
        # warn: the PF works; only the requested virtual functions did not come up.
        regex=r"(?i)pci_enable_sriov failed|failed to enable sr-?iov|mlx5_sriov_enable\b.*fail",
        severity="warn",
        title="HCA SR-IOV enable failed",
        hint=(
            "Virtual functions could not be created: check SR-IOV/ARI and bus-number resources "
            "in the BIOS and NUM_OF_VFS in the firmware configuration."
        ),
    ),
    # --- link events ---------------------------------------------------------------------------
    KernelSignature(
        id="link.down",
        # warn: one down may be a deliberate event; the checks count downs (flapping) and the
        # port state gives the verdict on a link that stays down.
        regex=r"(?i)\blink (?:is )?down\b",
        severity="warn",
        title="HCA link down",
        hint="Repeated link down/up on one port is a flapping link: check cable and switch port.",
    ),
    KernelSignature(
        id="link.up",
        # info: evidence for flap counting.
        regex=r"(?i)\blink (?:is )?up\b|link becomes ready",
        severity="info",
        title="HCA link up",
        hint="Informational.",
    ),
    KernelSignature(
        id="link.carrier_lost",
        # warn: as link.down, for IPoIB/RoCE netdevs (systemd-networkd / NetworkManager wording).
        regex=r"(?i)\blost carrier\b",
        severity="warn",
        title="HCA netdev lost carrier",
        hint=(
            "Repeated lost/gained carrier on one interface is a flapping link: check the cable "
            "and the switch port, and the port's LinkDownedCounter."
        ),
    ),
    KernelSignature(
        id="link.carrier_gained",
        # info: evidence for flap counting.
        regex=r"(?i)\bgained carrier\b",
        severity="info",
        title="HCA netdev gained carrier",
        hint="Informational.",
    ),
    # --- kernel bugs in the IB stack (multi-line) ----------------------------------------------
    KernelSignature(
        id="kernel.soft_lockup_mlx5",
        # fail: a CPU stuck in the mlx5 driver (NAPI poll: mlx5e_napi_poll, mlx5e_poll_ico_cq)
        # for tens of seconds: the queue it serves is wedged. NVSentinel
        # ``mlx5_napi_soft_lockup``: "watchdog: BUG: soft lockup - CPU#94 stuck for 226906s!"
        # then a non-speculative mlx5_core frame (not "? mlx5e_...": a leftover on the stack).
        regex=r"\bBUG: soft lockup\b",
        severity="fail",
        title="CPU soft lockup in the mlx5 driver (NAPI poll)",
        hint=(
            "A CPU is stuck in the mlx5 driver's packet processing. Drain and reboot the node; "
            "check the kernel / driver (OFED) and firmware versions for a known fix."
        ),
        context=MLX5_FRAME,
        context_lines=60,
    ),
    KernelSignature(
        id="kernel.null_deref_ib",
        # fail: an oops in the IB/mlx stack; the driver state is undefined until reboot.
        regex=r"BUG: (?:unable to handle )?kernel NULL pointer dereference",
        severity="fail",
        title="kernel NULL pointer dereference in the IB/mlx stack",
        hint=(
            "A kernel oops in the RDMA stack. Drain and reboot the node; check the kernel / "
            "driver (OFED) versions for a known fix."
        ),
        context=IB_FRAME,
        context_lines=40,
    ),
    KernelSignature(
        id="kernel.hung_task_ib",
        # fail: a task stuck for minutes in mlx/ib code (typically waiting on a firmware
        # command): users of the HCA hang too.
        regex=r"blocked for more than \d+ seconds",
        severity="fail",
        title="task hung in the IB/mlx driver",
        hint=(
            "A task is stuck in the HCA driver (usually waiting on the firmware). Drain and "
            "reboot; check for firmware command timeouts and health events."
        ),
        context=IB_FRAME,
        context_lines=40,
    ),
    KernelSignature(
        id="kernel.call_trace_ib",
        # warn: a stack trace through IB/mlx modules can be a WARN_ON splat the driver survives;
        # the oops/hung-task entries above carry the fail when it is one of those.
        regex=r"(?i)\bCall Trace:",
        severity="warn",
        title="kernel call trace in the IB/mlx stack",
        hint=(
            "The kernel logged a stack trace through the RDMA stack. Look at the lines above it "
            "for the cause; check kernel/driver versions for a known fix."
        ),
        context=IB_FRAME,
        context_lines=40,
    ),
)

_BY_ID: Dict[str, KernelSignature] = {signature.id: signature for signature in SIGNATURES}


def signature_by_id(signature_id: str) -> Optional[KernelSignature]:
    """The built-in signature with this id (for its title and hint), or None."""
    return _BY_ID.get(signature_id)
