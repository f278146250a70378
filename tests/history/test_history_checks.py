"""link.flaps, link.drop and history.store, from samples through a real store to a verdict.

Each "run" is a Snapshot at a chosen time (the injected clock) handed to ``record_and_read``,
exactly what a live ``check`` does after collecting, then graded by the built-in checks.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta, timezone
from typing import Dict, List, Optional

import pytest
from snapshots import device, port, run, snapshot

from ibdiag.drain_reason import reason_of
from ibdiag.facts.history import Tombstone
from ibdiag.history.record import record_and_read
from ibdiag.history.store import HistoryStore
from ibdiag.model import Result, Snapshot
from ibdiag.thresholds import Thresholds

T0 = datetime(2026, 11, 26, 20, 0, tzinfo=timezone.utc)
GUID = "0c42:a103:0003:1a2b"
BOOT = "boot-1"
DOWN, ACTIVE = 1, 4


class Node:
    """One HCA port whose state and link_downed the test steps, run by run, into a store."""

    def __init__(self, store: str, name: str = "mlx5_3") -> None:
        self.store = store
        self.name = name
        self.boot = BOOT
        self.link_downed = 0

    def snap(self, at: datetime, state: int) -> Snapshot:
        counters = {"link_downed": self.link_downed, "symbol_error": 0}
        phys = 5 if state == ACTIVE else 2
        dev = device(
            self.name, [port(state=state, phys_state=phys, counters=counters)], node_guid=GUID
        )
        snap = snapshot([dev])
        return snap.model_copy(update={"collected_at": at, "boot_id": self.boot})

    def run(self, at: datetime, state: int, window_s: float = 43200) -> Snapshot:
        return record_and_read(self.snap(at, state), self.store, window_s, "check")

    def flap(self, down_at: datetime, down_s: float) -> None:
        """Seen down at ``down_at``, back ``down_s`` later (link_downed rises by one)."""
        self.run(down_at, DOWN)
        self.link_downed += 1
        self.run(down_at + timedelta(seconds=down_s), ACTIVE)


def clear(node: Node, at: datetime, reason: str) -> None:
    """``ibdiag history clear`` of the node's port, as root, at ``at``."""
    with HistoryStore(node.store) as store:
        store.clear(
            Tombstone(
                node_guid="0x0c42a10300031a2b",
                port=1,
                device=node.name,
                at=at,
                who="root",
                reason=reason,
            )
        )


def grade(snap: Snapshot, check_id: str, **settings: float) -> List[Result]:
    return run(check_id, snap, Thresholds(**settings))


def one(results: List[Result]) -> Result:
    assert len(results) == 1, results
    return results[0]


@pytest.fixture
def node(tmp_path) -> Node:
    node = Node(str(tmp_path / "state" / "history.db"))
    node.run(T0, ACTIVE)
    return node


def test_three_flaps_overnight_fail_the_morning_check_of_an_active_clean_port(node):
    for hour in (1, 3, 5):
        node.flap(T0 + timedelta(hours=hour), 30)
    morning = node.run(T0 + timedelta(hours=13), ACTIVE)  # 09:00, ACTIVE and clean
    result = one(grade(morning, "link.flaps"))
    assert result.status.value == "fail" and result.target == "mlx5_3:1"
    assert result.observed == 3 and result.subject == "3 in 12h"
    assert "last back ACTIVE at 2026-11-27 01:00:30Z after 30s down" in result.message
    assert reason_of([result]) == "ibdiag: mlx5_3:1 link.flaps 3 in 12h"


def test_one_short_flap_warns(node):
    node.flap(T0 + timedelta(hours=1), 2)
    result = one(grade(node.run(T0 + timedelta(hours=2), ACTIVE), "link.flaps"))
    assert result.status.value == "warn" and result.observed == 1


def test_flaps_expire_with_their_window(node):
    for hour in (1, 2, 3):
        node.flap(T0 + timedelta(hours=hour), 30)
    assert one(grade(node.run(T0 + timedelta(hours=14), ACTIVE), "link.flaps")).observed == 2
    later = one(grade(node.run(T0 + timedelta(hours=16), ACTIVE), "link.flaps"))
    assert later.status.value == "pass" and later.observed == 0


def test_a_shorter_window_and_count_from_the_config(node):
    for hour in (1, 2):
        node.flap(T0 + timedelta(hours=hour), 30)
    snap = node.run(T0 + timedelta(hours=3), ACTIVE)
    assert one(grade(snap, "link.flaps", flap_fail_count=2)).status.value == "fail"
    assert one(grade(snap, "link.flaps", flap_window_s=3600)).observed == 1
    assert one(grade(snap, "link.flaps", flap_min_down_s=60)).status.value == "pass"


def test_a_tombstone_ends_the_finding_and_later_flaps_count_again(node):
    for hour in (1, 2, 3):
        node.flap(T0 + timedelta(hours=hour), 30)
    clear(node, T0 + timedelta(hours=4), "cable replaced")
    assert one(grade(node.run(T0 + timedelta(hours=5), ACTIVE), "link.flaps")).observed == 0
    node.flap(T0 + timedelta(hours=6), 30)
    assert one(grade(node.run(T0 + timedelta(hours=7), ACTIVE), "link.flaps")).observed == 1


def test_a_reboot_resets_link_downed_without_a_false_flap(tmp_path):
    node = Node(str(tmp_path / "history.db"))
    node.link_downed = 7  # its past before the store existed
    node.run(T0 + timedelta(hours=1), ACTIVE)
    node.boot, node.link_downed = "boot-2", 0  # counters start again from zero
    node.run(T0 + timedelta(hours=2), ACTIVE)
    node.link_downed = 1  # the link trained once after the reboot: counted on the new boot
    assert one(grade(node.run(T0 + timedelta(hours=3), ACTIVE), "link.flaps")).observed == 1


def test_a_reset_counter_is_not_a_flap(tmp_path):
    node = Node(str(tmp_path / "history.db"))
    node.link_downed = 5
    node.run(T0 + timedelta(hours=1), ACTIVE)
    node.link_downed = 0  # perfquery -r on the same boot
    node.run(T0 + timedelta(hours=2), ACTIVE)
    assert one(grade(node.run(T0 + timedelta(hours=3), ACTIVE), "link.flaps")).observed == 0


def test_a_renamed_hca_keeps_its_past(node):
    node.run(T0 + timedelta(hours=1), DOWN)
    node.name = "mlx5_5"  # the driver renumbered it at reboot; same node GUID
    node.link_downed += 1
    node.run(T0 + timedelta(hours=1, seconds=40), ACTIVE)
    result = one(grade(node.run(T0 + timedelta(hours=2), ACTIVE), "link.flaps"))
    assert result.target == "mlx5_5:1" and result.observed == 1
    assert "after 40s down" in result.message


def test_an_unseen_outage_counts_by_link_downed(node):
    node.link_downed = 2  # went down and came back twice between two runs
    snap = node.run(T0 + timedelta(hours=1), ACTIVE)
    result = one(grade(snap, "link.flaps"))
    assert result.observed == 2 and "seen by link_downed" in result.message
    # its length is not known: with a least outage length it is not a flap
    assert one(grade(snap, "link.flaps", flap_min_down_s=25)).observed == 0


def test_a_clock_stepped_back_still_gives_an_ordered_outage(node):
    node.run(T0 + timedelta(hours=2), ACTIVE)
    node.link_downed = 1
    snap = node.run(T0 + timedelta(hours=1), ACTIVE)  # NTP stepped the clock back an hour
    assert one(grade(snap, "link.flaps")).observed == 1
    outage = snap.history.outages[0]
    assert outage.start <= outage.end


def test_a_long_drop_fails_link_drop_while_the_port_is_active_again(node):
    node.flap(T0 + timedelta(hours=1), 300)
    result = one(grade(node.run(T0 + timedelta(hours=2), ACTIVE), "link.drop"))
    assert result.status.value == "fail"
    assert result.message.startswith("down 5m from 2026-11-26 21:00:00Z to 2026-11-26 21:05:00Z")
    assert reason_of([result]) == "ibdiag: mlx5_3:1 link.drop drop in 12h"


def test_a_short_outage_is_no_drop_and_a_port_still_down_is(node):
    node.flap(T0 + timedelta(hours=1), 200)
    assert one(grade(node.run(T0 + timedelta(hours=2), ACTIVE), "link.drop")).status.value == "pass"
    node.run(T0 + timedelta(hours=3), DOWN)
    result = one(grade(node.run(T0 + timedelta(hours=3, minutes=5), DOWN), "link.drop"))
    assert result.status.value == "fail" and "(still down)" in result.message


def test_history_off_gives_no_result_at_all():
    snap = snapshot([device("mlx5_0")])  # history None: --no-history, or an older recording
    for check_id in ("link.flaps", "link.drop", "history.store"):
        assert grade(snap, check_id) == []


def test_a_locked_store_warns_and_the_run_still_grades(tmp_path):
    path = str(tmp_path / "history.db")
    node = Node(path)
    node.run(T0, ACTIVE)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        snap = record_and_read(node.snap(T0, ACTIVE), path, 43200, "check", busy_s=0.2)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    store = one(grade(snap, "history.store"))
    assert store.status.value == "warn" and path in store.message and "locked" in store.message
    assert one(grade(snap, "link.flaps")).status.value == "skip"
    assert one(grade(snap, "link.state")).status.value == "pass"


def test_a_corrupt_store_is_moved_aside_said_once_and_started_afresh(tmp_path):
    path = tmp_path / "history.db"
    path.write_bytes(b"not sqlite at all " * 200)
    snap = Node(str(path)).run(T0, ACTIVE)
    store = one(grade(snap, "history.store"))
    assert store.status.value == "warn" and "corrupt" in store.message
    assert any(name.name.startswith("history.db.corrupt-") for name in tmp_path.iterdir())
    assert one(grade(snap, "link.flaps")).status.value == "pass"


def test_a_replayed_snapshot_grades_as_it_did_on_the_day(node):
    for hour in (1, 2, 3):
        node.flap(T0 + timedelta(hours=hour), 30)
    taken = node.run(T0 + timedelta(hours=4), ACTIVE)
    replayed = Snapshot.model_validate_json(taken.model_dump_json())
    assert one(grade(replayed, "link.flaps")).status.value == "fail"
    assert replayed.history == taken.history


def _statuses(snap: Snapshot, check_id: str) -> Dict[str, Optional[str]]:
    return {result.target: result.status.value for result in grade(snap, check_id)}


def test_two_hcas_sharing_a_guid_never_mix_their_past(tmp_path):
    path = str(tmp_path / "history.db")

    def snap(at: datetime, first: int) -> Snapshot:
        devs = [
            device("mlx5_0", [port(state=first)], node_guid=GUID),
            device("mlx5_1", [port(state=ACTIVE)], node_guid=GUID),  # a copied GUID
        ]
        return snapshot(devs).model_copy(update={"collected_at": at})

    record_and_read(snap(T0, ACTIVE), path, 43200, "check")
    record_and_read(snap(T0 + timedelta(minutes=1), DOWN), path, 43200, "check")
    later = record_and_read(snap(T0 + timedelta(minutes=2), ACTIVE), path, 43200, "check")
    assert _statuses(later, "link.flaps") == {"mlx5_0:1": "warn", "mlx5_1:1": "pass"}


class FarNode(Node):
    """A Node whose port's far end (leaf07 port 21) was read, with its LinkDownedCounter."""

    def __init__(self, store: str) -> None:
        super().__init__(store)
        self.far_link_downed = 10

    def snap(self, at: datetime, state: int) -> Snapshot:
        from partner_builders import counters, partner

        snap = super().snap(at, state)
        dev = snap.devices[0]
        far = partner(counters=counters(LinkDownedCounter=self.far_link_downed))
        ports = [dev.ports[0].model_copy(update={"partner": far})]
        return snap.model_copy(update={"devices": [dev.model_copy(update={"ports": ports})]})


def test_the_far_ends_linkdowned_puts_an_unseen_flap_on_the_cable(tmp_path):
    node = FarNode(str(tmp_path / "h.db"))
    node.run(T0, ACTIVE)
    node.far_link_downed += 1  # only the switch's end counted it (our counter was cleared)
    snap = node.run(T0 + timedelta(hours=1), ACTIVE)
    result = one(grade(snap, "link.flaps"))
    assert result.observed == 1
    assert result.message.startswith("1 flap on mlx5_3:1<->leaf07/21 in 12h")
    assert "seen by the far end's LinkDowned" in result.message
    with HistoryStore(node.store) as store:
        (last,) = store.last_samples()  # the far end's counters are in each sample
    assert (last.far_link_downed, last.far_link_error_recovery, last.far_symbol_error) == (
        11,
        None,
        0,
    )


def test_both_ends_counting_one_outage_is_one_flap_and_one_event(tmp_path):
    node = FarNode(str(tmp_path / "h.db"))
    node.run(T0, ACTIVE)
    node.link_downed += 1
    node.far_link_downed += 1
    snap = node.run(T0 + timedelta(hours=1), ACTIVE)
    assert {o.source for o in snap.history.outages} == {"counter", "far-end"}
    assert one(grade(snap, "link.flaps")).observed == 1
    assert snap.history.down_events == {"0x0c42a10300031a2b/1": 1}


def test_our_reboot_is_no_flap_at_the_far_end(tmp_path):
    node = FarNode(str(tmp_path / "h.db"))
    node.run(T0, ACTIVE)
    node.boot, node.link_downed = "boot-2", 0
    node.far_link_downed += 1  # the switch saw our port go down for the reboot
    snap = node.run(T0 + timedelta(hours=1), ACTIVE)
    assert one(grade(snap, "link.flaps")).observed == 0 and snap.history.outages == []


def test_down_events_only_grow_and_count_each_outage_once(node):
    node.flap(T0 + timedelta(hours=1), 30)
    node.link_downed += 2  # two more, unseen
    snap = node.run(T0 + timedelta(hours=2), ACTIVE)
    assert snap.history.down_events == {"0x0c42a10300031a2b/1": 3}
    later = node.run(T0 + timedelta(days=8), ACTIVE)  # the outages have left the window
    assert later.history.outages == [] and later.history.down_events == {"0x0c42a10300031a2b/1": 3}


def test_the_default_store_a_user_may_not_write_is_a_skip_not_a_warning(tmp_path):
    """As a user who is not root, /var/lib/ibdiag is not writable: every run would warn. The
    default store is then not tried (a skip naming it); a store named by --history still warns.
    /proc/self stands in for the unwritable folder (root may not write there either)."""
    node = Node(str(tmp_path / "unused.db"))
    unwritable = "/proc/self/ibdiag/history.db"
    snap = record_and_read(node.snap(T0, ACTIVE), unwritable, 43200, "check", chosen=False)
    store = one(grade(snap, "history.store"))
    assert store.status.value == "skip" and "not writable by this user" in store.message
    assert "--history PATH" in store.message
    assert one(grade(snap, "link.flaps")).status.value == "skip"
    named = record_and_read(node.snap(T0, ACTIVE), unwritable, 43200, "check", chosen=True)
    assert one(grade(named, "history.store")).status.value == "warn"


def test_the_monitors_samples_keep_what_a_run_read_of_the_far_end(tmp_path):
    """ibdiag watch reads no far end: its samples between two runs must not erase the far
    end's LinkDowned the first run read, or the second run would see no rise."""
    from ibdiag.history.timeline import PortSample

    node = FarNode(str(tmp_path / "h.db"))
    node.run(T0, ACTIVE)
    with HistoryStore(node.store) as store:
        for minutes in (5, 10):  # the monitor's heartbeats: our end only
            at = T0 + timedelta(minutes=minutes)
            store.record([PortSample("0x0c42a10300031a2b", 1, "mlx5_3", at, BOOT, 4, 5)])
    node.far_link_downed += 3
    result = one(grade(node.run(T0 + timedelta(hours=1), ACTIVE), "link.flaps"))
    assert result.observed == 3 and "the far end's LinkDowned" in result.message


def test_a_cable_moved_to_another_switch_port_is_no_flap(tmp_path):
    """leaf07/21 had counted 10 link downs, leaf07/22 has counted 40: not 30 flaps."""
    from partner_builders import counters, partner

    class Moved(FarNode):
        far_port = 21

        def snap(self, at: datetime, state: int) -> Snapshot:
            snap = Node.snap(self, at, state)
            dev = snap.devices[0]
            far = partner(
                port=self.far_port, counters=counters(LinkDownedCounter=self.far_link_downed)
            )
            ports = [dev.ports[0].model_copy(update={"partner": far})]
            return snap.model_copy(update={"devices": [dev.model_copy(update={"ports": ports})]})

    node = Moved(str(tmp_path / "h.db"))
    node.run(T0, ACTIVE)
    node.far_port, node.far_link_downed = 22, 40
    snap = node.run(T0 + timedelta(hours=1), ACTIVE)
    assert one(grade(snap, "link.flaps")).observed == 0 and snap.history.outages == []
    node.far_link_downed = 41  # now the new port counts one: that is a flap
    assert one(grade(node.run(T0 + timedelta(hours=2), ACTIVE), "link.flaps")).observed == 1


def test_a_kernel_log_down_read_while_the_port_was_down_is_ended_by_a_later_run(tmp_path):
    """A run at level standard during an outage stores the kernel log's down with no end; the
    run after the link came back reads its up: the outage ends there (not 'still down')."""
    from test_kernel_outages import BOOTED, stamp
    from test_kernel_outages import DOWN as DOWN_LINE
    from test_kernel_outages import UP as UP_LINE
    from test_kernel_outages import node as kernel_node

    path = str(tmp_path / "h.db")
    during = kernel_node(stamp(3600.0, DOWN_LINE), state=DOWN)
    during = during.model_copy(update={"collected_at": BOOTED + timedelta(hours=1, minutes=1)})
    first = record_and_read(during, path, 43200, "check")
    assert [o.end for o in first.history.outages] == [None]
    after = kernel_node(stamp(3600.0, DOWN_LINE) + stamp(3630.0, UP_LINE))
    after = after.model_copy(update={"collected_at": BOOTED + timedelta(hours=2)})
    second = record_and_read(after, path, 43200, "check")
    (outage,) = second.history.outages
    assert outage.down_s(after.collected_at) == 30.0
    drops = {r.target: r.status.value for r in grade(second, "link.drop")}
    assert drops["mlx5_5:1"] == "pass"  # 30 s is no drop, and no longer "still down"
    assert [r.observed for r in grade(second, "link.flaps") if r.target == "mlx5_5:1"] == [1]
