"""Cluster mode's group coordinator shards (server/cluster/group_shards.py) on a real broker without
sockets: the broker's own `__consumer_offsets` logs become cluster-mode Partitions whose leadership
the test sets, as images would. A shard loads when this broker becomes the partition's leader and
unloads when it stops; groups of other partitions get NOT_COORDINATOR; commits are answered, and
offsets shown, only once the high watermark (a follower's fetch) passes them."""

from __future__ import annotations

import threading

import pytest

from kcompat.coordinator.records import offsets_partition
from kcompat.coordinator.shards import ShardState
from kcompat.server.cluster.group_shards import GroupShards
from kcompat.server.cluster.replication.partition import Partition, Registration
from kcompat.storage.topic_store import CONSUMER_OFFSETS
from kcompat.testing import wait_until
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.messages.join_group import JOIN_GROUP
from kcompat.wire.messages.offset_commit import OFFSET_COMMIT
from tests.server.broker_harness import HarnessFactory
from tests.server.groups_harness import GroupHarness, ShardsClock, heartbeat, join_body, join_new, sync
from tests.server.test_groups_offsets import commit, fetch

N = 3  # the harness's offsets.topic.num.partitions
FOLLOWER = 2


def publish(h: GroupHarness, shards: GroupShards) -> None:
    """An image published: on the broker's event loop, as cluster/assembly.py calls it."""

    async def on_loop() -> None:
        shards.on_image()

    h.run(on_loop())


def test_shards_follow_leadership_and_answer_only_replicated_writes(broker_harness: HarnessFactory) -> None:
    h = broker_harness(kind=GroupHarness)
    h.create_topic("t", 2)
    group = "g"
    p = offsets_partition(group, N)
    elsewhere = next(g for g in (f"x{i}" for i in range(100)) if offsets_partition(g, N) != p)
    assert commit(h, group, {("t", 0): 5}) == {("t", 0): 0}  # single node: stored at once
    broker = h.broker
    node, svc = broker.node_id, broker.group_service
    # From here on, a cluster-mode broker that leads nothing yet: no state, every partition followed.
    svc.coordinator.unload(lambda _g: True)
    # cluster mode's hosted replicas, which its assembly would hand the replica manager
    parts: dict[tuple[str, int], Partition] = {}
    broker.replicas.partitions = parts
    for i in range(N):
        plog = broker.replicas.partition_log(CONSUMER_OFFSETS, i)
        part = Partition(CONSUMER_OFFSETS, i, node, plog, Registration(-1, -1, -1, (), ()))
        part.make_follower(Registration(FOLLOWER, 0, 0, (node, FOLLOWER), (node, FOLLOWER)))
        parts[(CONSUMER_OFFSETS, i)] = part
    clock = ShardsClock()  # a wait for replication times out only inside clock.timing_out
    # The service's shards become cluster mode's, as cluster/assembly.py builds them (with the
    # leader epoch __consumer_offsets appends stamp).
    svc.shards = shards = GroupShards(svc, partitions=parts, waiters=broker.replicas.fetch_waiters,
                                      topic=broker.metadata.topic, timeout_ms=lambda: 30_000,
                                      clock=clock)  # fmt: skip
    svc.offsets_topic.leader_epoch = shards.leader_epoch
    publish(h, shards)
    assert fetch(h, group, {"t": [0]})[0] == E.NOT_COORDINATOR

    # Elected: the shard loads the partition's log (COORDINATOR_LOAD_IN_PROGRESS meanwhile).
    leader = parts[(CONSUMER_OFFSETS, p)]
    leader.make_leader(Registration(node, 1, 1, (node, FOLLOWER), (node, FOLLOWER)), now_ms=broker.now_ms())
    publish(h, shards)
    assert shards.table.shards[p] == (ShardState.LOADING, 1)
    wait_until(lambda: shards.table.shards[p][0] == ShardState.ACTIVE, "the load", sleep=h.sleep)
    assert group in svc.coordinator.offsets
    # The commit is in the leader's log but no follower has it: not shown yet.
    assert clock.timing_out(lambda: fetch(h, group, {"t": [0]}))[0] == E.COORDINATOR_NOT_AVAILABLE
    assert leader.update_follower(FOLLOWER, leader.log.log_end_offset, 1, broker.now_ms())
    assert fetch(h, group, {"t": [0]}) == (0, {("t", 0): (5, 0, "m5", 0)})
    assert commit(h, elsewhere, {("t", 0): 1}) == {("t", 0): E.NOT_COORDINATOR}

    # A commit is answered once the follower has fetched it, not before.
    body = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "topics": [
        {"name": "t", "partitions": [{"partition_index": 1, "committed_offset": 9,
                                      "committed_leader_epoch": 0, "committed_metadata": ""}]}]}  # fmt: skip
    task = h.start(OFFSET_COMMIT, 9, body)
    h.settle()
    assert not task.done()
    end = leader.log.log_end_offset
    assert leader.update_follower(FOLLOWER, end, 1, broker.now_ms())
    broker.replicas.fetch_waiters.notify((CONSUMER_OFFSETS, p))
    assert h.run(task).topics[0].partitions[0].error_code == 0
    # Not replicated within offsets.commit.timeout.ms: COORDINATOR_NOT_AVAILABLE, as Kafka maps it.
    assert clock.timing_out(lambda: commit(h, group, {("t", 1): 10})) == {
        ("t", 1): E.COORDINATOR_NOT_AVAILABLE
    }

    # The ISR shrinks below min.insync.replicas: refused as Kafka's acks=all append is
    # (COORDINATOR_NOT_AVAILABLE), and the shard reloaded, so the refused commit is not kept.
    leader.min_isr = 2
    leader.make_leader(Registration(node, 1, 2, (node, FOLLOWER), (node,)), now_ms=broker.now_ms())
    assert commit(h, group, {("t", 1): 11}) == {("t", 1): E.COORDINATOR_NOT_AVAILABLE}
    wait_until(lambda: shards.table.shards[p][0] == ShardState.ACTIVE, "the reload", sleep=h.sleep)
    assert svc.coordinator.offsets[group][("t", 1)].offset == 10  # the timed-out one is in the log

    # Resigned: the shard's state goes, and the group's requests get NOT_COORDINATOR.
    leader.make_follower(Registration(FOLLOWER, 2, 2, (node, FOLLOWER), (node, FOLLOWER)))
    publish(h, shards)
    assert p not in shards.table.shards and group not in svc.coordinator.offsets
    assert fetch(h, group, {"t": [0]})[0] == E.NOT_COORDINATOR


def test_a_classic_group_is_known_again_after_its_shard_loads(
    broker_harness: HarnessFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stable classic group, then its coordinator moves here (a kill -9 elsewhere): while the
    shard loads, a heartbeat gets NONE (Kafka answers blindly, so the member keeps its id and its
    partitions), JoinGroup COORDINATOR_LOAD_IN_PROGRESS; once loaded, the members and generation of
    the GroupMetadata record are the group's, so the same heartbeat is NONE and nobody is
    UNKNOWN_MEMBER_ID (issue 26, fault 2)."""
    h = broker_harness(kind=GroupHarness)
    h.create_topic("t", 2)
    group = "g"
    p = offsets_partition(group, N)
    member = join_new(h, group)
    joined = h.call(JOIN_GROUP, 9, join_body(group, member))
    assert joined.error_code == 0 and joined.leader == member
    generation = joined.generation_id
    assert sync(h, group, member, generation, {member: b"plan"}).error_code == 0
    broker = h.broker
    node, svc = broker.node_id, broker.group_service
    svc.coordinator.unload(lambda _g: True)  # a cluster-mode broker that leads nothing yet
    parts: dict[tuple[str, int], Partition] = {}
    broker.replicas.partitions = parts
    for i in range(N):
        plog = broker.replicas.partition_log(CONSUMER_OFFSETS, i)
        part = Partition(CONSUMER_OFFSETS, i, node, plog, Registration(-1, -1, -1, (), ()))
        part.make_follower(Registration(FOLLOWER, 0, 0, (node, FOLLOWER), (node, FOLLOWER)))
        parts[(CONSUMER_OFFSETS, i)] = part
    svc.shards = shards = GroupShards(svc, partitions=parts, waiters=broker.replicas.fetch_waiters,
                                      topic=broker.metadata.topic, timeout_ms=lambda: 30_000,
                                      clock=ShardsClock())  # fmt: skip
    svc.offsets_topic.leader_epoch = shards.leader_epoch
    publish(h, shards)
    assert heartbeat(h, group, member, generation) == E.NOT_COORDINATOR  # not here (yet)

    gate = threading.Event()
    read = shards._read
    monkeypatch.setattr(shards, "_read", lambda q: gate.wait(10) and read(q))
    parts[(CONSUMER_OFFSETS, p)].make_leader(
        Registration(node, 1, 1, (node, FOLLOWER), (node, FOLLOWER)), now_ms=broker.now_ms()
    )
    publish(h, shards)
    assert shards.table.shards[p] == (ShardState.LOADING, 1)
    assert heartbeat(h, group, member, generation) == E.NONE  # blindly, as Kafka
    assert h.call(JOIN_GROUP, 9, join_body(group, member)).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    gate.set()
    wait_until(lambda: shards.table.shards[p][0] == ShardState.ACTIVE, "the load", sleep=h.sleep)
    assert heartbeat(h, group, member, generation) == E.NONE  # known from the GroupMetadata record
    assert heartbeat(h, group, "stranger", generation) == E.UNKNOWN_MEMBER_ID
