"""OffsetCommit, OffsetFetch and OffsetDelete through Broker.handle, across versions, with restarts,
expiry and bad input."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from kcompat.coordinator.records import offsets_partition
from kcompat.storage.topic_store import CONSUMER_OFFSETS
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.messages.fetch import FETCH
from kcompat.wire.messages.join_group import JOIN_GROUP
from kcompat.wire.messages.offset_commit import OFFSET_COMMIT
from kcompat.wire.messages.offset_delete import OFFSET_DELETE
from kcompat.wire.messages.offset_fetch import OFFSET_FETCH
from tests.server.broker_harness import HarnessFactory
from tests.server.groups_harness import GroupHarness, join_body, join_new, sync


@pytest.fixture
def h(broker_harness: HarnessFactory) -> GroupHarness:
    harness = broker_harness(
        {"offsets.retention.minutes": "1", "offsets.retention.check.interval.ms": "1000"}, kind=GroupHarness
    )
    harness.create_topic("t", 6)
    harness.create_topic("u", 2)
    return harness


def commit(h: GroupHarness, group: str, offsets: dict[tuple[str, int], int], version: int = 9, generation: int = -1,
           member: str = "", **extra: Any) -> dict[tuple[str, int], int]:  # fmt: skip
    """{(topic, partition): error code} of a commit of these offsets."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, p), off in offsets.items():
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": p,
                "committed_offset": off,
                "committed_leader_epoch": 0,
                "committed_metadata": f"m{off}",
            }
        )
    body = {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()], **extra}  # fmt: skip
    r = h.call(OFFSET_COMMIT, version, body)
    return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}


def fetch(h: GroupHarness, group: str, wanted: dict[str, list[int]] | None, version: int = 9) -> tuple[int, dict[tuple[str, int], tuple[int, int, str | None, int]]]:  # fmt: skip
    """(group error, {(topic, partition): (offset, leader epoch, metadata, error)})."""
    topics = None if wanted is None else [{"name": t, "partition_indexes": ps} for t, ps in wanted.items()]
    if version >= 8:
        r = h.call(OFFSET_FETCH, version, {"groups": [{"group_id": group, "topics": topics}]})
        g = r.groups[0]
        error, got = g.error_code, g.topics
    else:
        r = h.call(OFFSET_FETCH, version, {"group_id": group, "topics": topics})
        error, got = r.error_code, r.topics
    return error, {(t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code)
                   for t in got for p in t.partitions}  # fmt: skip


@pytest.mark.parametrize("version", range(2, 10))  # Kafka 4 removed v0-1 (KIP-896)
def test_commit_and_fetch_every_version(h: GroupHarness, version: int) -> None:
    assert commit(h, "g", {("t", 0): 5, ("t", 3): 7}, version=version) == {("t", 0): 0, ("t", 3): 0}
    fetch_version = min(version, 9)
    error, got = fetch(h, "g", {"t": [0, 1, 3]}, version=fetch_version)
    epoch = 0 if version >= 6 else -1  # committed_leader_epoch is sent from v6 and returned from v5
    if fetch_version < 5:
        epoch = -1
    assert error == 0
    assert got == {("t", 0): (5, epoch, "m5", 0), ("t", 1): (-1, -1, "", 0), ("t", 3): (7, epoch, "m7", 0)}


def test_v10_names_topics_by_id(h: GroupHarness) -> None:
    t_id, u_id, nowhere = (
        h.broker.metadata.topic("t").topic_id,
        h.broker.metadata.topic("u").topic_id,
        uuid.uuid4(),
    )

    def part(p: int, off: int) -> dict[str, Any]:
        return {
            "partition_index": p,
            "committed_offset": off,
            "committed_leader_epoch": 0,
            "committed_metadata": "x",
        }

    body = {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
            "topics": [{"topic_id": t_id, "partitions": [part(0, 5), part(9, 1)]},
                       {"topic_id": nowhere, "partitions": [part(0, 1)]}]}  # fmt: skip
    r = h.call(OFFSET_COMMIT, 10, body)
    got = {(t.topic_id, p.partition_index): p.error_code for t in r.topics for p in t.partitions}
    assert got == {(t_id, 0): 0, (t_id, 9): E.UNKNOWN_TOPIC_OR_PARTITION, (nowhere, 0): E.UNKNOWN_TOPIC_ID}
    assert fetch(h, "g", {"t": [0]}, version=9)[1] == {("t", 0): (5, 0, "x", 0)}  # stored under the name
    commit(h, "g", {("u", 1): 7})

    def fetch10(topics: Any) -> dict[tuple[Any, int], tuple[int, int]]:
        (g,) = h.call(OFFSET_FETCH, 10, {"groups": [{"group_id": "g", "topics": topics}]}).groups
        assert g.error_code == 0
        return {
            (t.topic_id, p.partition_index): (p.committed_offset, p.error_code)
            for t in g.topics
            for p in t.partitions
        }

    wanted = [
        {"topic_id": t_id, "partition_indexes": [0, 1]},
        {"topic_id": nowhere, "partition_indexes": [2]},
    ]
    assert fetch10(wanted) == {(t_id, 0): (5, 0), (t_id, 1): (-1, 0), (nowhere, 2): (-1, E.UNKNOWN_TOPIC_ID)}
    assert fetch10(None) == {(t_id, 0): (5, 0), (u_id, 1): (7, 0)}


def test_fetch_all_committed_and_several_groups(h: GroupHarness) -> None:
    commit(h, "a", {("t", 1): 10, ("u", 0): 3})
    commit(h, "b", {("t", 2): 20})
    assert fetch(h, "a", None, version=2)[1] == {("t", 1): (10, -1, "m10", 0), ("u", 0): (3, -1, "m3", 0)}
    assert fetch(h, "a", None, version=7)[1] == {("t", 1): (10, 0, "m10", 0), ("u", 0): (3, 0, "m3", 0)}
    r = h.call(
        OFFSET_FETCH,
        8,
        {
            "groups": [
                {"group_id": "a", "topics": [{"name": "t", "partition_indexes": [1]}]},
                {"group_id": "b", "topics": None},
                {"group_id": "none", "topics": None},
            ],
            "require_stable": True,
        },
    )
    got = {g.group_id: [(t.name, p.partition_index, p.committed_offset) for t in g.topics for p in t.partitions]
           for g in r.groups}  # fmt: skip
    assert got == {"a": [("t", 1, 10)], "b": [("t", 2, 20)], "none": []}


def test_commit_for_a_topic_that_does_not_exist(h: GroupHarness) -> None:
    result = commit(h, "g", {("nope", 0): 1, ("t", 0): 4, ("t", 6): 9})
    assert result == {
        ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
        ("t", 0): 0,
        ("t", 6): E.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert h.broker.metadata.topic("nope") is None  # a commit never creates a topic
    assert fetch(h, "g", None)[1] == {("t", 0): (4, 0, "m4", 0)}


def test_member_commits_are_checked(h: GroupHarness) -> None:
    mid = join_new(h, "g")
    j = h.call(JOIN_GROUP, 9, join_body("g", mid))
    gen = j.generation_id
    # Between JoinGroup and SyncGroup a commit would use an assignment about to change.
    assert commit(h, "g", {("t", 0): 1}, generation=gen, member=mid) == {("t", 0): E.REBALANCE_IN_PROGRESS}
    sync(h, "g", mid, gen)
    assert commit(h, "g", {("t", 0): 1}, generation=gen, member=mid) == {("t", 0): 0}
    assert commit(h, "g", {("t", 0): 2}, generation=gen, member="stranger") == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert commit(h, "g", {("t", 0): 2}, generation=gen - 1, member=mid) == {("t", 0): E.ILLEGAL_GENERATION}
    assert commit(h, "g", {("t", 0): 2}, version=2, generation=gen + 1, member=mid) == {
        ("t", 0): E.ILLEGAL_GENERATION
    }
    # A simple commit (no generation, no member) into a group with members is refused.
    assert commit(h, "g", {("t", 0): 2}, version=2) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert commit(h, "nogroup", {("t", 0): 2}, generation=3, member="m") == {("t", 0): E.GROUP_ID_NOT_FOUND}
    assert commit(h, "nogroup", {("t", 0): 2}, version=8, generation=3, member="m") == {
        ("t", 0): E.ILLEGAL_GENERATION
    }
    assert fetch(h, "g", {"t": [0]})[1][("t", 0)][0] == 1


def test_old_fetch_puts_the_group_error_on_each_partition(h: GroupHarness) -> None:
    r = h.call(OFFSET_FETCH, 1, {"group_id": "", "topics": [{"name": "t", "partition_indexes": [0, 1]}]})
    assert [(p.partition_index, p.committed_offset, p.error_code) for p in r.topics[0].partitions] == [
        (0, -1, E.INVALID_GROUP_ID),
        (1, -1, E.INVALID_GROUP_ID),
    ]
    v2 = h.call(OFFSET_FETCH, 2, {"group_id": "", "topics": [{"name": "t", "partition_indexes": [0]}]})
    assert (v2.error_code, v2.topics) == (E.INVALID_GROUP_ID, [])


def test_offset_metadata_too_large(h: GroupHarness) -> None:
    body = {
        "group_id": "g",
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {"partition_index": 0, "committed_offset": 1, "committed_metadata": "x" * 5000}
                ],
            }
        ],
    }
    r = h.call(OFFSET_COMMIT, 8, body)
    assert r.topics[0].partitions[0].error_code == E.OFFSET_METADATA_TOO_LARGE


def test_offsets_survive_a_restart(h: GroupHarness) -> None:
    commit(h, "g", {("t", p): 100 + p for p in range(6)})
    commit(h, "g", {("t", 2): 200})  # the later commit wins on replay
    h.restart()
    _, got = fetch(h, "g", None)
    assert {tp: v[0] for tp, v in got.items()} == {("t", 0): 100, ("t", 1): 101, ("t", 2): 200, ("t", 3): 103,
                                                   ("t", 4): 104, ("t", 5): 105}  # fmt: skip


def test_offset_delete(h: GroupHarness) -> None:
    commit(h, "g", {("t", 0): 1, ("t", 1): 2, ("u", 0): 3})
    r = h.call(
        OFFSET_DELETE,
        0,
        {
            "group_id": "g",
            "topics": [
                {"name": "t", "partitions": [{"partition_index": 0}]},
                {"name": "nope", "partitions": [{"partition_index": 0}]},
            ],
        },
    )
    assert r.error_code == 0
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in r.topics] == [
        ("t", [(0, 0)]),
        ("nope", [(0, E.UNKNOWN_TOPIC_OR_PARTITION)]),
    ]
    missing = h.call(
        OFFSET_DELETE,
        0,
        {"group_id": "other", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]},
    )
    assert missing.error_code == E.GROUP_ID_NOT_FOUND
    h.restart()  # the tombstone is replayed too
    assert set(fetch(h, "g", None)[1]) == {("t", 1), ("u", 0)}


def test_offset_delete_of_a_subscribed_topic(h: GroupHarness) -> None:
    mid = join_new(h, "g")
    gen = h.call(JOIN_GROUP, 9, join_body("g", mid, topics=("t",))).generation_id
    sync(h, "g", mid, gen)
    commit(h, "g", {("t", 0): 1, ("u", 0): 1}, generation=gen, member=mid)
    r = h.call(
        OFFSET_DELETE,
        0,
        {
            "group_id": "g",
            "topics": [
                {"name": "t", "partitions": [{"partition_index": 0}]},
                {"name": "u", "partitions": [{"partition_index": 0}]},
            ],
        },
    )
    assert [t.partitions[0].error_code for t in r.topics] == [E.GROUP_SUBSCRIBED_TO_TOPIC, 0]


def test_offsets_of_an_empty_group_expire(h: GroupHarness) -> None:
    commit(h, "g", {("t", 0): 1})
    h.advance(30_000)
    assert fetch(h, "g", {"t": [0]})[1][("t", 0)][0] == 1
    h.advance(31_000)  # offsets.retention.minutes=1 has passed; the check runs every second
    assert fetch(h, "g", {"t": [0]})[1][("t", 0)][0] == -1
    h.restart()
    assert fetch(h, "g", {"t": [0]})[1][("t", 0)][0] == -1


def test_retention_time_of_v2_to_v4(h: GroupHarness) -> None:
    commit(h, "g", {("t", 0): 1}, version=2, retention_time_ms=5_000)
    h.advance(6_000)
    assert fetch(h, "g", {"t": [0]})[1][("t", 0)][0] == -1


def test_offset_metadata_max_bytes(broker_harness: HarnessFactory) -> None:
    h = broker_harness({"offset.metadata.max.bytes": "2"}, kind=GroupHarness)
    h.create_topic("t", 1)
    # commit() stores metadata "m<offset>": "m5" fits in 2 bytes, "m10" does not
    assert commit(h, "g", {("t", 0): 5}) == {("t", 0): E.NONE}
    assert commit(h, "g", {("t", 0): 10}) == {("t", 0): E.OFFSET_METADATA_TOO_LARGE}


def test_a_commit_wakes_a_fetch_parked_on_the_offsets_partition(h: GroupHarness) -> None:
    """The group service's appends wake parked fetches, as a Produce does: a reader of
    __consumer_offsets sees a commit at once, not after its fetch's max wait."""
    assert commit(h, "g", {("t", 0): 1}) == {("t", 0): E.NONE}  # creates __consumer_offsets
    p = offsets_partition("g", 3)
    end = h.broker.replicas.partition_log(CONSUMER_OFFSETS, p).log_end_offset
    body = {
        "replica_id": -1,
        "max_wait_ms": 5000,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "topics": [
            {
                "topic": CONSUMER_OFFSETS,
                "partitions": [{"partition": p, "fetch_offset": end, "partition_max_bytes": 1 << 20}],
            }
        ],
    }

    async def scenario() -> tuple[Any, float]:
        t0 = time.monotonic()
        fetching = asyncio.ensure_future(h.call_async(FETCH, 12, body))
        await asyncio.sleep(0.05)
        assert not fetching.done() and h.broker.replicas.fetch_waiters.parked() == 1
        await h.call_async(OFFSET_COMMIT, 9, {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
                                              "topics": [{"name": "t", "partitions": [
                                                  {"partition_index": 0, "committed_offset": 2}]}]})  # fmt: skip
        resp = await asyncio.wait_for(fetching, 4)
        return resp, time.monotonic() - t0

    resp, elapsed = h.run(scenario())
    assert elapsed < 2.5, f"the fetch waited {elapsed:.1f}s: the commit did not wake it"
    assert len(resp.responses[0].partitions[0].records) > 0
