"""Streams groups: `streams.initial.rebalance.delay.ms` (the first target of an empty group waits, so
members starting together get one assignment, as Kafka 4.3.1's GroupMetadataManager does), and the
answer to a source topic regex (Kafka 4.3.1 refuses it)."""

from __future__ import annotations

import uuid

import pytest

from kcompat.coordinator.config import CoordinatorConfig
from kcompat.coordinator.streams_group import StreamsGroup
from kcompat.coordinator.streams_topology import ASSIGNMENT_DELAYED
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.types import streams_group_heartbeat as sgh

from .harness import FAST
from .test_streams_group import APP, Streams, owned, statuses, tasks, topology

DELAYED = "Assignment delayed due to the configured initial rebalance delay."


def with_delay(broker_ms: int, group_ms: str | None = None) -> Streams:
    overrides = {} if group_ms is None else {"streams.initial.rebalance.delay.ms": group_ms}
    config = CoordinatorConfig(**{**FAST.__dict__, "streams_initial_rebalance_delay_ms": broker_ms})
    s = Streams(overrides, config)
    for name in (f"{APP}-counts-changelog", f"{APP}-words-repartition"):  # the topology is ready
        s.topics[name] = (uuid.uuid4(), 3)
    return s


def group(s: Streams) -> StreamsGroup:
    g = s.coordinator.groups[APP]
    assert isinstance(g, StreamsGroup)
    return g


def count(active: dict[str, list[int]]) -> int:
    return sum(len(ps) for ps in active.values())


# broker's group.streams.initial.rebalance.delay.ms, the group's override -> the first target's time
@pytest.mark.parametrize(
    ("broker_ms", "group_ms", "deadline"),
    [(3000, None, 3000), (3000, "500", 500), (0, "800", 800), (3000, "0", None), (0, None, None)],
)
def test_the_delay_comes_from_the_group_config_else_the_broker(
    broker_ms: int, group_ms: str | None, deadline: int | None
) -> None:
    s = with_delay(broker_ms, group_ms)
    r, _ = s.hb("m1", 0)
    assert group(s).initial_rebalance_deadline == deadline
    if deadline is None:
        assert r.status is None and r.member_epoch == 1 and count(tasks(r.active_tasks)) == 6
    else:
        assert [(x.status_code, x.status_detail) for x in r.status or []] == [(ASSIGNMENT_DELAYED, DELAYED)]
        # Epoch 1, not 0: Streams then heartbeats without its topology, which at epoch 0 is refused.
        assert r.member_epoch == 1 and tasks(r.active_tasks) == {}
        assert s.coordinator.next_deadline_ms() == deadline


def test_members_joining_during_the_delay_get_one_assignment() -> None:
    """Timer table: m1 joins at 0, m2 at 1000, both heartbeat at 2000 (still delayed); the timer
    at 3000 computes one target for both; each takes half of the tasks without revoking any."""
    s = with_delay(3000)
    r1, _ = s.hb("m1", 0)
    assert statuses(r1) == [ASSIGNMENT_DELAYED] and r1.member_epoch == 1
    s.now = 1000
    r2, _ = s.hb("m2", 0)
    assert statuses(r2) == [ASSIGNMENT_DELAYED] and r2.member_epoch == 1
    s.now = 2000
    for m in ("m1", "m2"):
        r, _ = s.hb(m, 1)
        assert statuses(r) == [ASSIGNMENT_DELAYED] and tasks(r.active_tasks) == {}
    assert group(s).assignment_epoch == 0 and group(s).state().value == "Assigning"
    assert s.coordinator.next_deadline_ms() == 3000  # the second join did not push it out
    s.coordinator.tick(2999)
    assert group(s).assignment_epoch == 0
    tick = s.coordinator.tick(3000)
    assert tick.records  # the target, written when the timer fires
    g = group(s)
    assert g.initial_rebalance_deadline is None and g.assignment_epoch == g.group_epoch
    s.now = 3000
    got: dict[str, dict[str, list[int]]] = {}
    for m in ("m1", "m2"):
        r, _ = s.hb(m, 1)
        assert r.status is None and r.member_epoch == g.group_epoch
        got[m] = tasks(r.active_tasks)
    assert count(got["m1"]) == count(got["m2"]) == 3
    assert all(not set(got["m1"].get(k, [])) & set(got["m2"].get(k, [])) for k in ("0", "1"))
    # Nothing to revoke: the next heartbeats keep the same tasks at the same epoch.
    r1, _ = s.hb("m1", g.group_epoch, active_tasks=owned(got["m1"]), standby_tasks=[], warmup_tasks=[])
    assert r1.member_epoch == g.group_epoch and r1.error_code == 0


def test_a_heartbeat_after_the_deadline_assigns_even_before_the_timer_fires() -> None:
    s = with_delay(1000)
    s.hb("m1", 0)
    s.now = 1000
    r, _ = s.hb("m1", 1)
    assert r.status is None and count(tasks(r.active_tasks)) == 6


def test_a_lone_member_gets_every_task_when_the_timer_fires() -> None:
    s = with_delay(1000)
    r, _ = s.hb("m1", 0)
    s.coordinator.tick(1000)
    assert group(s).assignment_epoch == group(s).group_epoch == 1
    s.now = 1000
    r, _ = s.hb("m1", r.member_epoch)  # epoch 1 already: the tasks come at the same epoch
    assert (r.member_epoch, r.status, count(tasks(r.active_tasks))) == (1, None, 6)


def test_a_member_leaving_during_the_delay_computes_nothing_and_an_empty_group_skips_it() -> None:
    s = with_delay(2000)
    s.hb("m1", 0)
    s.hb("m2", 0)
    s.now = 500
    s.hb("m2", -1)
    assert group(s).assignment_epoch == 0 and group(s).target == {}
    s.hb("m1", -1)
    s.coordinator.tick(2000)
    g = group(s)
    assert g.initial_rebalance_deadline is None and g.assignment_epoch < g.group_epoch
    # The group is empty again: the next member waits anew.
    s.now = 5000
    r, _ = s.hb("m3", 0)
    assert statuses(r) == [ASSIGNMENT_DELAYED] and group(s).initial_rebalance_deadline == 7000


def test_a_member_joining_a_running_group_is_not_delayed() -> None:
    s = with_delay(1000)
    s.hb("m1", 0)
    s.coordinator.tick(1000)
    s.now = 1000
    r1, _ = s.hb("m1", 1)
    assert count(tasks(r1.active_tasks)) == 6
    s.now = 1500
    r2, _ = s.hb("m2", 0)
    assert r2.status is None and tasks(r2.active_tasks) == {}  # waits for m1's revocation, not a delay
    assert group(s).initial_rebalance_deadline is None and group(s).assignment_epoch == 2


def test_a_source_topic_regex_is_refused_as_kafka_refuses_it() -> None:
    s = Streams()
    t = topology()
    t.subtopologies[0].source_topics = []
    t.subtopologies[0].source_topic_regex = ["in-.*"]
    r, created = s.hb("m1", 0, topology=t)
    assert (r.error_code, r.error_message) == (
        E.INVALID_REQUEST,
        "Regular expressions for source topics are not supported yet.",
    )
    assert created == [] and APP not in s.coordinator.groups
    # An empty regex list is no regex (the client sends one with every subtopology).
    t.subtopologies[0].source_topics = ["in"]
    t.subtopologies[0].source_topic_regex = []
    ok, _ = s.hb("m1", 0, topology=t)
    assert ok.error_code == 0


def test_a_regex_is_checked_before_the_other_fields() -> None:
    s = Streams()
    t = topology()
    t.subtopologies[0].source_topic_regex = ["x"]
    r, _ = s.hb("m1", 0, topology=t, rebalance_timeout_ms=-1)
    assert r.error_message == "Regular expressions for source topics are not supported yet."
    assert isinstance(r, sgh.StreamsGroupHeartbeatResponse)
