"""phy.ber and phy.optics: each port's cable module as mlxlink/mstlink reads it (BER after FEC,
Rx/Tx power and bias per lane against the module's own thresholds, LOS / CDR LOL, the module's
temperature against its own range)."""

from __future__ import annotations

from typing import Iterator, List, Optional, Tuple, Union

from ibdiag.facts.module import Bounds, ModuleReading
from ibdiag.model import Port, Result, Snapshot, Status
from ibdiag.outcome_results import skipped, symptom_result
from ibdiag.registry import check
from ibdiag.targets import graded_ports
from ibdiag.thresholds import Thresholds

_NOT_COLLECTED = "mlxlink/mstlink was not collected (level quick, or an older bundle)"
_BER_HINT = (
    "reseat, clean or replace the cable or optic (phy.optics names a weak lane); compare the far "
    "end (phy.fec); send the bundle with the cable's part and serial number"
)
_OPTICS_HINT = (
    "clean the fibre ends and reseat the module; a lane with LOS or low Rx power: the far end's "
    "transmitter or the fibre; low Tx power or bias out of range: this module; replace the "
    "module or cable named (vendor, part and serial in the report)"
)


def _reading(port: Port) -> Optional[ModuleReading]:
    value = port.facts.get("module")
    return value if isinstance(value, ModuleReading) else None


def _evidence(reading: ModuleReading) -> List[str]:
    return [reading.outcome.command] if reading.outcome.command else []


def _unread(target: str, reading: Optional[ModuleReading]) -> Optional[Result]:
    """The skip (or the warn of a hung/crashed tool) of a port with no reading."""
    if reading is None:
        return skipped(target, _NOT_COLLECTED, "module")
    outcome = reading.outcome
    if outcome.no_data is None:
        return None
    symptom = outcome.symptom()
    if symptom is not None:
        return symptom_result(target, outcome, symptom, f"port {target}",
                              "a module that does not answer its firmware")  # fmt: skip
    return skipped(target, outcome.reason or f"{outcome.tool} gave no data", outcome.command)


def _readings(snap: Snapshot, th: Thresholds) -> Iterator[Union[Result, Tuple[str, ModuleReading]]]:
    """Each graded port's (target, reading), or the Result saying why it has none."""
    for dev, port in graded_ports(snap, th):
        target = dev.target(port)
        reading = _reading(port)
        unread = _unread(target, reading)
        if unread is not None or reading is None:
            yield unread or skipped(target, _NOT_COLLECTED, "module")
        else:
            yield target, reading


@check("phy.ber", title="Effective (post-FEC) bit error rate", needs={"module"}, level="standard")
def phy_ber(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: the port's effective physical BER (after FEC, mlxlink's "Effective Physical
    BER") is at most ber_warn (1e-12); the raw (pre-FEC) BER is reported, not graded - PAM4
    links (HDR, NDR, XDR) run with a raw BER around 1e-8..1e-5 by design and rely on FEC.

    Why it matters: a cable or optic going bad shows as a rising BER before the link flaps.
    1e-12: "The InfiniBand specification requires less than one-bit error per 10^12 bits
    transmitted" (NVIDIA DGX SuperPOD cabling design guide, "Mixing Widths and Rates"), the
    default threshold of ibdiagnet's BER test (`--ber_test`, "default threshold=10^-12",
    ibdiagnet user manual, "Bit Error Rate (BER)"), and IEEE 802.3's BER objective for
    10-100 Gb/s Ethernet. ber_fail (1e-9) is ibdiag's own choice, not a standard's: three
    decades past the objective, where links visibly retrain and lose packets. Above ber_fail
    fails, above ber_warn warns. mlxlink prints "15E-255" when no error was counted since the
    last clear (its floor): a pass. No reading (mlxlink/mstlink not installed, a virtual
    function - mlxlink needs the PF -, no access to the device, no cable, a link down: BER
    "N/A") is a skip with the reason.

    What to do: reseat, clean or replace the cable or optic named (vendor, part, serial in the
    report); compare phy.optics and phy.fec at both ends; send the bundle.
    """
    for found in _readings(snap, th):
        if isinstance(found, Result):
            yield found
            continue
        target, reading = found
        ber = reading.effective_ber
        raw = f" (raw BER {reading.raw_ber:.1e})" if reading.raw_ber is not None else ""
        if ber is None:
            why = f"{reading.tool} printed no effective BER"
            if reading.status_code:
                why += f" (status {reading.status_code}: {reading.status_message or '?'})"
            elif reading.state and reading.state.lower() != "active":
                why += f" (port {reading.state})"
            yield skipped(target, why, reading.outcome.command)
            continue
        if ber > th.ber_fail:
            status, bound = Status.FAIL, f"<= {th.ber_fail:.0e} (fail above)"
        elif ber > th.ber_warn:
            status, bound = Status.WARN, f"<= {th.ber_warn:.0e}"
        else:
            status, bound = Status.PASS, f"<= {th.ber_warn:.0e}"
        yield Result(
            target=target, status=status,
            message=f"effective BER {ber:.1e}{raw}, expected {bound}",
            observed=ber, expected=th.ber_warn, subject=_subject(reading),
            hint=None if status == Status.PASS else _BER_HINT, evidence=_evidence(reading),
        )  # fmt: skip


def _subject(reading: ModuleReading) -> Optional[str]:
    """The cable's part number, for a drain reason and the fleet's grouping."""
    identity = reading.identity
    return identity.part_number if identity is not None else None


@check(
    "phy.optics",
    title="Module optics and temperature inside the module's own thresholds",
    needs={"module"},
    level="standard",
)
def phy_optics(snap: Snapshot, th: Thresholds) -> Iterator[Result]:
    """Healthy: on every lane of the port's module, Rx power, Tx power and Tx bias inside the
    module's own alarm thresholds (and its warning thresholds, where the tool prints them), no
    loss of signal (LOS) and no CDR loss of lock (LOL), and the module's temperature inside its
    own range (mlxlink/mstlink `-m`: "Temperature [C]: 54 [-5..75]").

    Why it matters: a dirty or damaged fibre, a failing laser or a module overheating loses
    light margin long before the link drops; LOS or LOL on a lane is a lane that carries
    nothing. A value outside the alarm range, or LOS/LOL on a lane, fails naming the lane; a
    value outside a warning range warns. A passive copper cable has no optics: the check
    passes it on its temperature (or says there is nothing to grade). No reading is a skip with
    the reason (not installed, a virtual function, no access, no cable).

    What to do: clean the fibre ends and reseat the module; low Rx power or LOS on a lane
    points at the far end's transmitter or the fibre, low Tx power or bias at this module;
    replace the module or cable named (vendor, part and serial in the report).
    """
    for found in _readings(snap, th):
        yield found if isinstance(found, Result) else _grade_optics(*found)


def _grade_optics(target: str, reading: ModuleReading) -> Result:
    fails: List[str] = []
    warns: List[str] = []
    copper = reading.copper
    if not copper:
        for lane in reading.lanes:
            name = f"lane {lane.lane}"
            if lane.los:
                fails.append(f"{name} Rx LOS")
            if lane.tx_los:
                fails.append(f"{name} Tx LOS")
            if lane.cdr_lol:
                fails.append(f"{name} Rx CDR LOL")
            if lane.tx_cdr_lol:
                fails.append(f"{name} Tx CDR LOL")
            if lane.tx_fault:
                fails.append(f"{name} Tx fault")
            for value, alarm, warning, what, unit in (
                (lane.rx_power_dbm, reading.rx_power_alarm_dbm, reading.rx_power_warning_dbm,
                 "Rx power", "dBm"),
                (lane.tx_power_dbm, reading.tx_power_alarm_dbm, reading.tx_power_warning_dbm,
                 "Tx power", "dBm"),
                (lane.tx_bias_ma, reading.tx_bias_alarm_ma, reading.tx_bias_warning_ma,
                 "Tx bias", "mA"),
            ):  # fmt: skip
                _judge(value, alarm, warning, f"{name} {what}", unit, fails, warns)
    _judge(reading.temperature_c, reading.temperature_alarm_c, reading.temperature_warning_c,
           "module temperature", "C", fails, warns)  # fmt: skip
    optics = any(
        value is not None
        for lane in reading.lanes
        for value in (lane.rx_power_dbm, lane.tx_power_dbm, lane.tx_bias_ma)
    )
    graded = reading.temperature_c is not None or (not copper and optics)
    if fails or warns:
        status = Status.FAIL if fails else Status.WARN
        found = fails or warns
        more = f" (+{len(found) - 3} more)" if len(found) > 3 else ""
        return Result(
            target=target, status=status,
            message="; ".join(found[:3]) + more + ", expected inside the module's thresholds",
            observed=len(found), subject=_subject(reading), hint=_OPTICS_HINT,
            evidence=_evidence(reading),
        )  # fmt: skip
    if not graded:
        what = (
            "a copper cable without optics"
            if copper
            else "no optical power, bias or temperature read (N/A)"
        )
        return skipped(target, f"{reading.tool}: {what}", reading.outcome.command)
    lanes = "no optics (copper)" if copper else f"{len(reading.lanes)} lanes"
    temperature = (
        f", {reading.temperature_c:g} C in {reading.temperature_alarm_c}"
        if reading.temperature_c is not None and reading.temperature_alarm_c is not None
        else ""
    )
    return Result(
        target=target, status=Status.PASS,
        message=f"{lanes} inside the module's thresholds, no LOS/LOL{temperature}",
        subject=_subject(reading), evidence=_evidence(reading),
    )  # fmt: skip


def _judge(
    value: Optional[float], alarm: Optional[Bounds], warning: Optional[Bounds], what: str,
    unit: str, fails: List[str], warns: List[str],
) -> None:  # fmt: skip
    if value is None:
        return
    if alarm is not None:
        side = alarm.outside(value)
        if side is not None:
            fails.append(f"{what} {value:g} {unit} {side} alarm {alarm}")
            return
    if warning is not None:
        side = warning.outside(value)
        if side is not None:
            warns.append(f"{what} {value:g} {unit} {side} warning {warning}")
