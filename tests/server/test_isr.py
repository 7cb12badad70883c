"""The leader's replication rules (kcompat/server/cluster/replication/isr.py): high watermark, caught-up time, ISR."""

from __future__ import annotations

import pytest

from kcompat.server.cluster.replication.isr import (
    FollowerState,
    caught_up,
    high_watermark,
    may_join_isr,
    out_of_sync,
)

LEADER = 1


def followers(**leos: int) -> dict[int, FollowerState]:
    return {int(k[1:]): FollowerState(log_end_offset=v) for k, v in leos.items()}


@pytest.mark.parametrize(
    ("isr", "leos", "min_isr", "expected"),
    [
        ((1, 2, 3), {"b2": 7, "b3": 9}, 2, 7),  # the slowest ISR member
        ((1, 2), {"b2": 9, "b3": 0}, 2, 9),  # replica 3 is out of the ISR: not waited for
        ((1, 2, 3), {"b2": 12, "b3": 12}, 2, 10),  # never past the leader's own log end
        ((1,), {"b2": 9, "b3": 9}, 2, 5),  # strict min-ISR: an ISR below min.insync.replicas holds it
        ((1,), {}, 1, 10),  # the leader alone with min.insync.replicas=1
        ((1, 2, 3), {"b2": 3, "b3": 9}, 2, 5),  # never backwards
        ((1, 2, 3), {"b2": 9, "b3": -1}, 2, 5),  # a member not heard from yet holds it
    ],
)
def test_high_watermark(isr, leos, min_isr, expected):
    assert high_watermark(5, 10, LEADER, isr, followers(**leos), min_isr) == expected


def test_caught_up_time_follows_kafkas_rule():
    f = FollowerState()
    caught_up(f, leader_leo=10, fetch_offset=10, now_ms=100)  # at the log end: caught up now
    assert (f.last_caught_up_ms, f.log_end_offset) == (100, 10)
    caught_up(f, leader_leo=20, fetch_offset=15, now_ms=200)  # behind, but past what the leader had at 100
    assert f.last_caught_up_ms == 100
    caught_up(
        f, leader_leo=30, fetch_offset=20, now_ms=300
    )  # reached the leader's end of the last fetch (200)
    assert f.last_caught_up_ms == 200
    caught_up(f, leader_leo=40, fetch_offset=25, now_ms=400)  # still behind the end of last time (30)
    assert f.last_caught_up_ms == 200


def test_out_of_sync_after_the_lag_time():
    fs = {2: FollowerState(last_caught_up_ms=1000), 3: FollowerState(last_caught_up_ms=20_000)}
    assert out_of_sync((1, 2, 3), LEADER, fs, now_ms=31_001, lag_max_ms=30_000) == [2]
    assert out_of_sync((1, 3), LEADER, fs, now_ms=31_001, lag_max_ms=30_000) == []


def test_may_join_isr_per_kip_903():
    f = FollowerState(log_end_offset=10, broker_epoch=5)
    ok = {"registered_epoch": 5, "fenced": False, "in_controlled_shutdown": False}
    assert may_join_isr(f, 10, 8, **ok)
    assert not may_join_isr(f, 11, 8, **ok)  # below the high watermark
    assert not may_join_isr(f, 10, 11, **ok)  # not yet into the leader's epoch
    assert not may_join_isr(f, 10, 8, **{**ok, "registered_epoch": 6})  # a stale incarnation fetched
    assert not may_join_isr(f, 10, 8, **{**ok, "registered_epoch": None})
    assert not may_join_isr(f, 10, 8, **{**ok, "fenced": True})
    assert not may_join_isr(f, 10, 8, **{**ok, "in_controlled_shutdown": True})
