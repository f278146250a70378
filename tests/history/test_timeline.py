"""``step``: what two samples of one port mean (ibdiag/history/timeline.py).

Healthy is ACTIVE every time with link_downed unchanged: nothing. Each other case below is one
way a port's past can be misread - a reboot or a counter reset taken for a flap, an unreadable
state taken for the port coming back, a clock stepped back giving an outage that ends before it
starts, a renamed HCA taken for a new port.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from ibdiag.history.timeline import ACTIVE, PortSample, Step, step

T0 = datetime(2026, 11, 27, 12, 0, tzinfo=timezone.utc)
DOWN = 1
GUID = "0x0002c90300a1b2c3"


def at(seconds: float, state=ACTIVE, link_downed=0, boot="boot-a", device="mlx5_0"):
    return PortSample(
        node_guid=GUID,
        port=1,
        device=device,
        at=T0 + timedelta(seconds=seconds),
        boot_id=boot,
        state=state,
        link_downed=link_downed,
    )


def test_healthy_port_steps_to_nothing():
    assert step(at(0), at(60), open_outage=False) == Step()


def test_a_first_sample_opens_nothing_active_or_down():
    """Down at the first sample ever: never seen ACTIVE, so no flap (link.state grades it)."""
    assert step(None, at(0), open_outage=False) == Step()
    assert step(None, at(0, state=DOWN), open_outage=False) == Step()


def test_down_after_a_reboot_is_the_subnet_manager_not_a_flap():
    """The first sample of a new boot finds the port INIT until the SM brings it up."""
    init = at(100, state=2, boot="boot-b")
    assert step(at(0), init, open_outage=False) == Step()
    assert step(init, at(130, boot="boot-b"), open_outage=False) == Step()
    # and once ACTIVE on the new boot, going down is an outage again
    assert step(at(130, boot="boot-b"), at(200, state=DOWN, boot="boot-b"), False).opened


def test_leaving_active_opens_and_coming_back_closes():
    found = step(at(0), at(60, state=DOWN, link_downed=1), open_outage=False)
    assert found.opened is not None
    assert found.opened.start == T0 + timedelta(seconds=60)
    assert (found.opened.node_guid, found.opened.port, found.opened.device) == (GUID, 1, "mlx5_0")
    assert not found.closes and found.unseen is None
    back = step(at(60, state=DOWN, link_downed=1), at(120, link_downed=1), open_outage=True)
    assert back == Step(closes=True)


def test_still_down_opens_nothing_more():
    assert step(at(60, state=DOWN), at(120, state=DOWN), open_outage=True) == Step()


def test_unreadable_state_keeps_the_outage_open():
    unreadable = at(120, state=None)
    assert step(at(60, state=DOWN), unreadable, open_outage=True) == Step()
    assert step(at(0), unreadable, open_outage=False) == Step()


def test_reboot_resets_counters_without_an_outage():
    before = at(0, link_downed=7, boot="boot-a")
    after = at(600, link_downed=0, boot="boot-b")
    assert step(before, after, open_outage=False) == Step()
    # a new boot's counter rising from 0 is not compared with the old boot's
    assert step(before, at(600, link_downed=9, boot="boot-b"), open_outage=False) == Step()


def test_reboot_closes_an_outage_left_open():
    assert step(at(0, state=DOWN), at(600, boot="boot-b"), open_outage=True) == Step(closes=True)


def test_counter_reset_on_the_same_boot_is_nothing():
    """``perfquery -r`` (or a driver reload) sets link_downed back: the new value is the new
    reference, and a later rise is counted from it."""
    assert step(at(0, link_downed=5), at(60, link_downed=0), open_outage=False) == Step()
    found = step(at(60, link_downed=0), at(120, link_downed=2), open_outage=False)
    assert found.unseen is not None and found.unseen.downs == 2


def test_link_downed_rise_while_active_is_a_bounded_counter_outage():
    found = step(at(0, link_downed=3), at(60, link_downed=6), open_outage=False)
    outage = found.unseen
    assert outage is not None and found.opened is None and not found.closes
    assert outage.source == "counter" and outage.bounded and outage.downs == 3
    assert (outage.start, outage.end) == (T0, T0 + timedelta(seconds=60))


def test_unknown_counter_is_no_rise():
    assert step(at(0, link_downed=None), at(60, link_downed=4), open_outage=False) == Step()
    assert step(at(0, link_downed=4), at(60, link_downed=None), open_outage=False) == Step()


def test_clock_stepped_back_still_gives_start_before_end():
    found = step(at(60, link_downed=1), at(-3600, link_downed=2), open_outage=False)
    assert found.unseen is not None
    assert found.unseen.start <= found.unseen.end
    assert found.unseen.start == T0 - timedelta(seconds=3600)


def test_renamed_hca_is_the_same_port():
    before = at(0, link_downed=1, device="mlx5_3")
    after = at(60, link_downed=2, device="mlx5_5")
    assert before.key == after.key
    found = step(before, after, open_outage=False)
    assert found.unseen is not None and found.unseen.device == "mlx5_5"
    assert found.unseen.key == before.key
    assert after.differs(before)
    assert not at(60).differs(at(0))  # only the time differs: not worth logging


def test_a_rise_after_an_unreadable_sample_still_counts():
    """The state could not be read last time, link_downed could: its rise is still an outage
    between the two samples."""
    found = step(at(0, state=None, link_downed=1), at(60, link_downed=2), open_outage=False)
    assert found.unseen is not None and found.unseen.downs == 1 and found.unseen.bounded
