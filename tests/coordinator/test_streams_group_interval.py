"""Streams groups: `streams.assignment.interval.ms` (Kafka 4.3.1's canComputeNextTargetAssignment): a
new target at most once per interval; a heartbeat in between hears ASSIGNMENT_DELAYED "due to the
configured assignment interval" and stays on the last target; the first heartbeat after the interval
computes it (Kafka sets no timer for it). Times are the injected clock, in ms."""

from __future__ import annotations

import uuid

import pytest

from kcompat.coordinator import GroupCoordinator
from kcompat.coordinator.config import CoordinatorConfig
from kcompat.coordinator.streams_group import StreamsGroup
from kcompat.coordinator.streams_topology import ASSIGNMENT_DELAYED
from kcompat.wire.types import streams_group_heartbeat as sgh

from .harness import FAST
from .test_streams_group import APP, Streams, owned, tasks

INTERVAL = (ASSIGNMENT_DELAYED, "Assignment delayed due to the configured assignment interval.")
START = 100_000  # a clock that is not 0: Kafka takes a timestamp of 0 as "never assigned"
TARGET_METADATA = (20).to_bytes(2, "big")  # StreamsGroupTargetAssignmentMetadataKey


def with_interval(broker_ms: int = 1000, group_ms: str | None = None) -> Streams:
    overrides = {} if group_ms is None else {"streams.assignment.interval.ms": group_ms}
    config = CoordinatorConfig(**{**FAST.__dict__, "streams_assignment_interval_ms": broker_ms})
    s = Streams(overrides, config)
    for name in (f"{APP}-counts-changelog", f"{APP}-words-repartition"):  # the topology is ready
        s.topics[name] = (uuid.uuid4(), 3)
    s.now = START
    return s


def group(s: Streams) -> StreamsGroup:
    g = s.coordinator.groups[APP]
    assert isinstance(g, StreamsGroup)
    return g


def said(r: sgh.StreamsGroupHeartbeatResponse) -> list[tuple[int, str | None]]:
    return [(x.status_code, x.status_detail) for x in r.status or []]


def targets(s: Streams) -> int:
    """How many target assignments the coordinator wrote."""
    return sum(1 for k, v in s.records if k[:2] == TARGET_METADATA and v is not None)


def count(active: dict[str, list[int]]) -> int:
    return sum(len(ps) for ps in active.values())


def beat(
    s: Streams, member: str, r: sgh.StreamsGroupHeartbeatResponse, at: int
) -> sgh.StreamsGroupHeartbeatResponse:
    """A heartbeat at `at` that reports the tasks the member was last given, as Streams does."""
    s.now = at
    kw = {} if r.active_tasks is None else {"active_tasks": owned(tasks(r.active_tasks))}
    out, _ = s.hb(member, r.member_epoch, **kw)
    assert out.error_code == 0, out
    return (
        out
        if out.active_tasks is not None
        else sgh.StreamsGroupHeartbeatResponse(
            member_epoch=out.member_epoch, status=out.status, active_tasks=r.active_tasks
        )
    )


# broker's group.streams.assignment.interval.ms, the group's override -> is a join 500 ms after the
# last target delayed?
@pytest.mark.parametrize(
    ("broker_ms", "group_ms", "delayed"),
    [(1000, None, True), (1000, "400", False), (0, "800", True), (1000, "0", False), (0, None, False)],
)
def test_the_interval_comes_from_the_group_config_else_the_broker(
    broker_ms: int, group_ms: str | None, delayed: bool
) -> None:
    s = with_interval(broker_ms, group_ms)
    r1, _ = s.hb("m1", 0)
    assert said(r1) == [] and count(tasks(r1.active_tasks)) == 6 and targets(s) == 1
    s.now = START + 500
    r2, _ = s.hb("m2", 0)
    assert said(r2) == ([INTERVAL] if delayed else [])
    assert targets(s) == (1 if delayed else 2)
    assert group(s).assignment_timestamp == (START if delayed else START + 500)


def test_a_target_at_most_once_per_interval() -> None:
    """Timer table (interval 1000): m1 joins at +0 (target 1); m2 joins at +300 and m1 heartbeats at
    +600 and +999: delayed, m1 keeps its 6 tasks, m2 gets none at the assignment epoch; m1's heartbeat
    at +1000 computes target 2 (m1 gives up 3); m3 joins at +1200: delayed until +2000."""
    s = with_interval()
    r1, _ = s.hb("m1", 0)
    assert count(tasks(r1.active_tasks)) == 6 and group(s).assignment_epoch == 1
    s.now = START + 300
    r2, _ = s.hb("m2", 0)
    assert said(r2) == [INTERVAL] and r2.member_epoch == 1 and tasks(r2.active_tasks) == {}
    assert group(s).group_epoch == 2 and group(s).assignment_epoch == 1
    for at in (START + 600, START + 999):
        r1 = beat(s, "m1", r1, at)
        assert said(r1) == [INTERVAL] and count(tasks(r1.active_tasks)) == 6 and r1.member_epoch == 1
    assert targets(s) == 1 and group(s).state().value == "Assigning"
    assert s.coordinator.next_deadline_ms() != START + 1000  # no timer: a heartbeat computes it
    r1 = beat(s, "m1", r1, START + 1000)
    assert said(r1) == [] and targets(s) == 2 and group(s).assignment_epoch == 2
    assert count(tasks(r1.active_tasks)) == 3  # the other 3 are revoked for m2
    assert group(s).assignment_timestamp == START + 1000
    s.now = START + 1200
    r3, _ = s.hb("m3", 0)
    assert said(r3) == [INTERVAL] and tasks(r3.active_tasks) == {} and r3.member_epoch == 2
    r2 = beat(s, "m2", r2, START + 1999)
    assert said(r2) == [INTERVAL] and targets(s) == 2
    r2 = beat(s, "m2", r2, START + 2000)
    assert said(r2) == [] and targets(s) == 3 and group(s).assignment_epoch == 3


def test_a_member_leaving_during_the_interval_waits_for_the_next_heartbeat() -> None:
    """A leave inside the interval bumps the group epoch but computes no target; one after it does."""
    s = with_interval()
    r1, _ = s.hb("m1", 0)
    s.now = START + 1500
    r2, _ = s.hb("m2", 0)  # interval over: target 2 at +1500
    assert said(r2) == [] and targets(s) == 2
    s.now = START + 1800
    assert s.hb("m2", -1)[0].error_code == 0
    assert targets(s) == 2 and group(s).group_epoch == 3 and group(s).assignment_epoch == 2
    r1 = beat(s, "m1", r1, START + 2499)
    assert said(r1) == [INTERVAL]
    r1 = beat(s, "m1", r1, START + 2500)
    assert said(r1) == [] and targets(s) == 3 and count(tasks(r1.active_tasks)) == 6
    s.now = START + 9000
    s.hb("m3", 0)  # target 4
    s.now = START + 10_000
    assert s.hb("m3", -1)[0].error_code == 0  # an interval after the last target: computed at once
    assert targets(s) == 5 and group(s).assignment_epoch == group(s).group_epoch


def test_the_timestamp_is_in_the_records_and_replayed() -> None:
    """Kafka 4.3's AssignmentTimestamp (tag 0 of StreamsGroupTargetAssignmentMetadataValue): a group
    loaded on another coordinator keeps the interval of its last target."""
    s = with_interval()
    s.hb("m1", 0)
    again = GroupCoordinator(
        CoordinatorConfig(**{**FAST.__dict__, "streams_assignment_interval_ms": 1000}),
        topic_metadata=lambda: s.topics,
    )
    again.load(s.records, START + 100)
    loaded = again.groups[APP]
    assert isinstance(loaded, StreamsGroup) and loaded.assignment_timestamp == START
    s.coordinator = again
    s.now = START + 200
    r2, _ = s.hb("m2", 0)
    assert said(r2) == [INTERVAL]
