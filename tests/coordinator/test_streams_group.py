"""KIP-1071 streams groups: topology configuration, internal topics, epochs, revoke-before-assign,
standby tasks from the group config, Kafka's answers to bad heartbeats, and the other group APIs."""

from __future__ import annotations

import logging
import uuid

import pytest

from kcompat.coordinator import GroupCoordinator, OffsetCommitRequestPartition, OffsetCommitRequestTopic
from kcompat.coordinator.config import CoordinatorConfig
from kcompat.coordinator.records import Record
from kcompat.coordinator.streams_topology import (
    INCORRECTLY_PARTITIONED_TOPICS,
    MISSING_INTERNAL_TOPICS,
    MISSING_SOURCE_TOPICS,
)
from kcompat.server.groups.group_log import log_rebalances
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.types import streams_group_heartbeat as sgh

from .harness import FAST

APP = "app"


def topology(epoch: int = 0, source: str = "in") -> sgh.Topology:
    """Two subtopologies as Streams sends them: 0 reads `source` and writes the repartition topic,
    1 reads it into a store backed by a changelog."""
    return sgh.Topology(
        epoch=epoch,
        subtopologies=[
            sgh.Subtopology(subtopology_id="0", source_topics=[source], repartition_sink_topics=[f"{APP}-words-repartition"]),
            sgh.Subtopology(
                subtopology_id="1",
                repartition_source_topics=[
                    sgh.TopicInfo(name=f"{APP}-words-repartition", topic_configs=[sgh.KeyValue(key="cleanup.policy", value="delete")])
                ],
                state_changelog_topics=[
                    sgh.TopicInfo(name=f"{APP}-counts-changelog", topic_configs=[sgh.KeyValue(key="cleanup.policy", value="compact")])
                ],
            ),
        ],
    )  # fmt: skip


class Streams:
    def __init__(self, overrides: dict[str, str] | None = None, config: CoordinatorConfig = FAST) -> None:
        self.topics: dict[str, tuple[uuid.UUID, int]] = {"in": (uuid.uuid4(), 3)}
        self.now = 0
        self.records: list[tuple[bytes, bytes | None]] = []
        self.coordinator = GroupCoordinator(
            config, topic_metadata=lambda: self.topics, group_overrides=lambda g: overrides or {}
        )

    def hb(
        self, member: str, epoch: int, **kw: object
    ) -> tuple[sgh.StreamsGroupHeartbeatResponse, list[str]]:
        if epoch == 0:
            kw.setdefault("topology", topology())
            kw.setdefault("process_id", f"p-{member}")
            kw.setdefault("rebalance_timeout_ms", 30_000)
            kw.setdefault("active_tasks", [])
            kw.setdefault("standby_tasks", [])
            kw.setdefault("warmup_tasks", [])
        else:
            kw.setdefault("topology", None)
            if kw.get("active_tasks") is not None:  # Kafka: all task types or none
                kw.setdefault("standby_tasks", [])
                kw.setdefault("warmup_tasks", [])
        req = sgh.StreamsGroupHeartbeatRequest(group_id=APP, member_id=member, member_epoch=epoch, **kw)  # type: ignore[arg-type]
        result = self.coordinator.streams_group_heartbeat(self.now, req)
        assert result.response is not None
        self.records += [(r.key, r.value) for r in result.records]
        for t in result.response.create:
            self.topics[t.name] = (uuid.uuid4(), t.partitions)
        return result.response.response, [f"{t.name}:{t.partitions}" for t in result.response.create]


def tasks(ids: list[sgh.TaskIds] | None) -> dict[str, list[int]]:
    return {t.subtopology_id: list(t.partitions) for t in ids or []}


def owned(active: dict[str, list[int]]) -> list[sgh.TaskIds]:
    return [sgh.TaskIds(subtopology_id=s, partitions=ps) for s, ps in active.items()]


def statuses(r: sgh.StreamsGroupHeartbeatResponse) -> list[int]:
    return [s.status_code for s in r.status or []]


def test_missing_source_topic_then_internal_topics_then_all_tasks() -> None:
    s = Streams()
    s.topics.clear()
    r, created = s.hb("m1", 0)
    assert r.error_code == 0 and statuses(r) == [MISSING_SOURCE_TOPICS] and created == []
    assert r.member_epoch == 1 and tasks(r.active_tasks) == {}
    s.topics["in"] = (uuid.uuid4(), 3)
    # The repartition topic gets its writer's input partitions; the changelog its subtopology's tasks.
    r, created = s.hb("m1", 1)
    assert statuses(r) == [MISSING_INTERNAL_TOPICS]
    assert created == [f"{APP}-counts-changelog:3", f"{APP}-words-repartition:3"]
    r, created = s.hb("m1", r.member_epoch)
    assert r.error_code == 0 and r.status is None and created == []
    assert tasks(r.active_tasks) == {"0": [0, 1, 2], "1": [0, 1, 2]}
    [g] = s.coordinator.list_groups(s.now).response or []
    assert (g.group_type, g.protocol_type, g.group_state) == ("streams", "streams", "Stable")


def test_an_internal_topic_with_the_wrong_partition_count_is_reported() -> None:
    s = Streams()
    s.topics[f"{APP}-counts-changelog"] = (uuid.uuid4(), 5)
    r, created = s.hb("m1", 0)
    assert created == [f"{APP}-words-repartition:3"]
    r, _ = s.hb("m1", r.member_epoch)
    assert statuses(r) == [INCORRECTLY_PARTITIONED_TOPICS]
    assert f"{APP}-counts-changelog" in (r.status or [])[0].status_detail
    assert tasks(r.active_tasks) == {}


def test_a_second_member_gets_tasks_only_once_the_first_revoked_them() -> None:
    s = Streams()
    r, _ = s.hb("m1", 0)
    r, _ = s.hb("m1", r.member_epoch)
    all_tasks = tasks(r.active_tasks)
    assert sum(len(p) for p in all_tasks.values()) == 6
    r2, _ = s.hb("m2", 0)
    assert tasks(r2.active_tasks) == {}  # everything is still m1's
    r1, _ = s.hb("m1", r.member_epoch)
    kept = tasks(r1.active_tasks)
    assert sum(len(p) for p in kept.values()) == 3 and r1.member_epoch == r.member_epoch  # revoking
    r2, _ = s.hb("m2", r2.member_epoch)
    assert tasks(r2.active_tasks) == {}  # m1 has not confirmed yet
    r1, _ = s.hb("m1", r1.member_epoch, active_tasks=owned(kept), standby_tasks=[], warmup_tasks=[])
    assert r1.member_epoch == 3
    r2, _ = s.hb("m2", r2.member_epoch)
    got = tasks(r2.active_tasks)
    assert r2.member_epoch == 3 and sum(len(p) for p in got.values()) == 3
    assert all(not set(got.get(k, [])) & set(kept.get(k, [])) for k in ("0", "1"))


def test_standby_replicas_from_the_group_config_go_to_the_other_process() -> None:
    s = Streams({"streams.num.standby.replicas": "1"})
    r1, _ = s.hb("m1", 0)
    r2, _ = s.hb("m2", 0)
    for _ in range(3):
        r1, _ = s.hb(
            "m1",
            r1.member_epoch,
            active_tasks=owned(tasks(r1.active_tasks)) if r1.active_tasks is not None else None,
        )
        r2, _ = s.hb(
            "m2",
            r2.member_epoch,
            active_tasks=owned(tasks(r2.active_tasks)) if r2.active_tasks is not None else None,
        )
    g = s.coordinator.groups[APP]
    m1, m2 = g.target["m1"], g.target["m2"]  # type: ignore[union-attr]
    for sub in ("0", "1"):
        assert m1.active.get(sub, set()) | m2.active.get(sub, set()) == {0, 1, 2}
    # only the stateful subtopology (1, with a changelog) gets standbys, as in Kafka 4.3.1
    assert "0" not in m1.standby and "0" not in m2.standby
    assert m1.standby["1"] == m2.active["1"] and m2.standby["1"] == m1.active["1"]


def test_bad_heartbeats_get_kafkas_answers() -> None:
    s = Streams()
    r, _ = s.hb("m1", 0)
    changed, _ = s.hb("m2", 0, topology=topology(source="other"))
    assert (changed.error_code, changed.error_message) == (
        E.INVALID_REQUEST,
        "Topology updates are not supported yet.",
    )
    unknown, _ = s.hb("nobody", 1)
    assert unknown.error_code == E.UNKNOWN_MEMBER_ID
    no_process, _ = s.hb("m3", 0, process_id=None)
    assert no_process.error_code == E.INVALID_REQUEST
    ahead, _ = s.hb("m1", r.member_epoch + 5)
    assert ahead.error_code == E.FENCED_MEMBER_EPOCH
    for bad, message in (
        ({"9": [0]}, "Subtopology 9 does not exist in the topology."),
        ({"0": [5]}, "Task 5 for subtopology 0 is invalid. Number of tasks for this subtopology: 3"),
    ):
        refused, _ = s.hb("m1", r.member_epoch, active_tasks=owned(bad))
        assert (refused.error_code, refused.error_message) == (E.INVALID_REQUEST, message)
    late, _ = s.hb("m1", r.member_epoch, topology=topology())
    assert (late.error_code, late.error_message) == (
        E.INVALID_REQUEST,
        "Topology can only be provided when (re-)joining.",
    )


def test_session_timeout_removes_the_member_and_offsets_need_its_epoch() -> None:
    s = Streams({"streams.session.timeout.ms": "1000"})
    r, _ = s.hb("m1", 0)
    commit = s.coordinator.commit_offsets(
        s.now, group_id=APP, topics=[OffsetCommitRequestTopic("in", [OffsetCommitRequestPartition(0, 5)])],
        generation_id_or_member_epoch=r.member_epoch - 1, member_id="m1",
    ).response  # fmt: skip
    assert commit is not None and commit[0].partitions[0].error_code == E.STALE_MEMBER_EPOCH
    deleted = s.coordinator.delete_groups(s.now, [APP]).response
    assert deleted is not None and deleted[0].error_code == E.NON_EMPTY_GROUP
    assert s.coordinator.groups[APP].is_subscribed_to("in")  # offsets of a running group stay
    s.coordinator.tick(1001)
    assert s.coordinator.groups[APP].members == {}
    assert not s.coordinator.groups[APP].is_subscribed_to("in")  # an empty group's may expire
    deleted = s.coordinator.delete_groups(1001, [APP]).response
    assert deleted is not None and deleted[0].error_code == E.NONE


def test_the_group_is_rebuilt_from_its_records() -> None:
    s = Streams({"streams.num.standby.replicas": "1"})
    r1, _ = s.hb("m1", 0)
    r2, _ = s.hb("m2", 0)
    for _ in range(3):
        r1, _ = s.hb(
            "m1",
            r1.member_epoch,
            active_tasks=owned(tasks(r1.active_tasks)) if r1.active_tasks is not None else None,
        )
        r2, _ = s.hb(
            "m2",
            r2.member_epoch,
            active_tasks=owned(tasks(r2.active_tasks)) if r2.active_tasks is not None else None,
        )
    s.hb("m3", 0)
    s.hb("m3", -1)  # joined and left: tombstones
    before = s.coordinator.groups[APP]
    again = GroupCoordinator(FAST, topic_metadata=lambda: s.topics)
    again.load(s.records, 0)
    after = again.groups[APP]
    assert isinstance(after, type(before))
    assert (after.group_epoch, after.assignment_epoch, after.topology) == (
        before.group_epoch, before.assignment_epoch, before.topology,  # type: ignore[union-attr]
    )  # fmt: skip
    assert after.target == before.target and sorted(after.members) == ["m1", "m2"]  # type: ignore[union-attr]
    for mid, m in after.members.items():
        was = before.members[mid]
        assert (m.member_epoch, m.assigned, m.process_id, m.state) == (
            was.member_epoch,
            was.assigned,
            was.process_id,
            was.state,
        )  # type: ignore[union-attr]
    # The members carry on from their epochs, to the replayed target: no new rebalance.
    s.coordinator = again
    r1b, _ = s.hb("m1", r1.member_epoch)
    assert (r1b.error_code, r1b.member_epoch) == (0, after.assignment_epoch)
    assert after.group_epoch == before.group_epoch
    # Deleting the group leaves nothing to replay.
    s.hb("m1", -1)
    s.hb("m2", -1)
    deleted = again.delete_groups(0, [APP])
    assert deleted.response is not None and deleted.response[0].error_code == E.NONE
    third = GroupCoordinator(FAST, topic_metadata=lambda: s.topics)
    third.load(s.records + [(r.key, r.value) for r in deleted.records], 0)
    assert APP not in third.groups


def test_a_new_target_is_one_info_line(caplog: pytest.LogCaptureFixture) -> None:
    s = Streams()
    r, _ = s.hb("m1", 0)
    before = len(s.records)
    s.hb("m1", r.member_epoch)  # the internal topics exist now: all 6 tasks to m1
    with caplog.at_level(logging.INFO, logger="kcompat.server.groups"):
        log_rebalances([Record(k, v) for k, v in s.records[before:]])
    assert caplog.messages == [
        "streams group app assignment epoch 2: 1 member(s) with a new target, active tasks 6"
    ]
