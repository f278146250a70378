"""The kernel log's link down/up lines as outages (``ibdiag.history.kernel_outages``).

The messages are mlx5's own, verbatim from a real capture (tests/fixtures/dmesg/
gpud-h100-boot-mlx5-insufficient-pcie-power-cable-unplugged-link-down.txt, lines 90-93:
``mlx5_core 0000:9d:00.1 enp157s0f1np1: Link down``), behind the raw ``[seconds]`` stamps of
``dmesg --kernel`` as ibdiag runs it (the capture itself was taken with ISO stamps).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from snapshots import device, netdev, pci, port, snapshot, with_runs

from ibdiag import roles
from ibdiag.history.kernel_outages import kernel_outages
from ibdiag.model import CommandRun, Snapshot

BOOTED = datetime(2026, 11, 26, 6, 0, tzinfo=timezone.utc)
NOW = BOOTED + timedelta(hours=20)
DOWN = "mlx5_core 0000:9d:00.1 enp157s0f1np1: Link down"
UP = "mlx5_core 0000:9d:00.1 enp157s0f1np1: Link up"
OTHER_DOWN = "mlx5_core 0000:1b:00.1 enp27s0f1np1: Link down"


def node(lines: str, state: int = 4) -> Snapshot:
    devs = [
        device(
            "mlx5_5",
            [port(1, state=state, link_layer="Ethernet", netdev=netdev("enp157s0f1np1"))],
            pci=pci("0000:9d:00.1"),
            node_guid="b859:9f03:00d7:a3bc",
        ),
        device("mlx5_7", [port(1, link_layer="Ethernet")], pci=pci("0000:1b:00.1")),
    ]
    run = CommandRun(
        argv=["dmesg", "--kernel", "--nopager"], role=roles.KERNEL_LOG, rc=0, stdout=lines
    )
    snap = snapshot(devs).model_copy(
        update={"boot_time": BOOTED, "collected_at": NOW, "boot_id": "b1"}
    )
    return with_runs(snap, run)


def stamp(seconds: float, text: str) -> str:
    return f"[{seconds:12.6f}] {text}\n"


def test_a_down_and_its_up_are_one_outage_on_the_hcas_guid():
    hours = 3600.0
    snap = node(stamp(10 * hours, DOWN) + stamp(10 * hours + 42.5, UP))
    (outage,) = kernel_outages(snap)
    assert outage.node_guid == "0xb8599f0300d7a3bc" and outage.port == 1
    assert outage.device == "mlx5_5" and outage.source == "kernel-log"
    assert outage.start == BOOTED + timedelta(hours=10)
    assert outage.down_s(NOW) == 42.5 and not outage.bounded


def test_repeated_flaps_pair_in_order_and_other_hcas_stay_apart():
    text = "".join(stamp(start, DOWN) + stamp(start + 30, UP) for start in (1000.0, 5000.0, 9000.0))
    text += stamp(6000.0, OTHER_DOWN)
    outages = kernel_outages(node(text))
    mine = [o for o in outages if o.device == "mlx5_5"]
    assert [o.down_s(NOW) for o in mine] == [30.0, 30.0, 30.0]
    (other,) = [o for o in outages if o.device == "mlx5_7"]
    assert other.bounded and other.end == NOW  # ACTIVE now: back some time before the run


def test_a_down_with_no_up_on_a_port_still_down_stays_open():
    (outage,) = kernel_outages(node(stamp(100.0, DOWN), state=1))
    assert outage.end is None and outage.down_s(NOW) == 20 * 3600 - 100


def test_lines_older_than_the_window_are_left_out():
    old = stamp(60.0, DOWN) + stamp(90.0, UP)  # 06:01, more than 4 h before NOW
    assert kernel_outages(node(old), window_s=4 * 3600) == []
    assert len(kernel_outages(node(old))) == 1  # within the default 24 h


def test_no_boot_time_or_no_log_gives_nothing():
    snap = node(stamp(100.0, DOWN) + stamp(130.0, UP))
    assert kernel_outages(snap.model_copy(update={"boot_time": None})) == []
    assert kernel_outages(snap.model_copy(update={"kernel_log": None})) == []
