"""Cluster mode's transaction coordinator shards (server/cluster/txn_shards.py) on a real broker without
sockets, as tests/server/test_group_shards.py does for groups: the broker's own
`__transaction_state` logs become cluster-mode Partitions whose leadership the test sets. A shard
loads (replaying the partition) when this broker becomes its leader and unloads when it stops;
transaction-state writes are answered only once a follower has them; a transaction the log holds in
PrepareCommit is completed (its markers written) by the next load."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from kcompat.coordinator.records import offsets_partition
from kcompat.coordinator.shards import ShardState
from kcompat.coordinator.transaction.log_records import transaction_partition
from kcompat.coordinator.transaction.state import TransactionState
from kcompat.server.cluster.group_shards import GroupShards
from kcompat.server.cluster.replication.partition import Partition, Registration
from kcompat.storage.topic_store import CONSUMER_OFFSETS, TRANSACTION_STATE
from kcompat.testing import wait_until
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.messages.add_offsets_to_txn import ADD_OFFSETS_TO_TXN
from kcompat.wire.messages.add_partitions_to_txn import ADD_PARTITIONS_TO_TXN
from kcompat.wire.messages.end_txn import END_TXN
from kcompat.wire.messages.offset_fetch import OFFSET_FETCH
from kcompat.wire.messages.produce import PRODUCE
from kcompat.wire.messages.txn_offset_commit import TXN_OFFSET_COMMIT
from kcompat.wire.messages.write_txn_markers import WRITE_TXN_MARKERS
from kcompat.wire.record_batch import read_header, split_batches
from tests.server.broker_harness import HarnessFactory, batch
from tests.server.cluster_txn_rig import FOLLOWER, follower_partitions, lead, replicated_txn_writes
from tests.server.groups_harness import GroupHarness, ShardsClock
from tests.server.test_transactions import add, end, init, produce

N = 3  # transaction.state.log.num.partitions


def txn_batch(h: GroupHarness, version: int, pid: int, seq: int, value: bytes) -> tuple[int, str | None]:
    """A transactional batch of "tx" (epoch 0) to t-0 with acks=1 (cluster mode answers acks=all
    later, which the harness's call does not wait for): its code and message."""
    r = h.call(PRODUCE, version, batch_body(pid, seq, value)).responses[0].partition_responses[0]
    return int(r.error_code), r.error_message


def batch_body(pid: int, seq: int, value: bytes) -> Any:
    records = batch(value, producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True)
    return {"transactional_id": "tx", "acks": 1, "timeout_ms": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}]}  # fmt: skip


def control_batches(h: GroupHarness, topic: str, partition: int) -> int:
    plog = h.broker.replicas.partition_log(topic, partition)
    data = memoryview(plog.read(0, 1 << 20).read_bytes())
    return sum(1 for pos, _ in split_batches(data) if read_header(data, pos).is_control)


def test_txn_shards_follow_leadership_replicate_writes_and_complete_prepared(
    broker_harness: HarnessFactory,
) -> None:
    h = broker_harness(
        {"transaction.state.log.num.partitions": str(N), "offsets.topic.num.partitions": "1"},
        kind=GroupHarness,
    )
    h.create_topic("t", 1)
    broker = h.broker
    node, svc = broker.node_id, broker.txn_service
    r = init(h)  # single node: creates __transaction_state, stores "tx" at once
    assert r.error_code == 0
    pid, epoch = r.producer_id, r.producer_epoch
    assert add(h, pid, epoch, [0]) == [0]
    p = transaction_partition("tx", N)

    # From here on, a cluster-mode broker that leads none of __transaction_state yet (t-0 it leads alone).
    svc.coordinator.unload(lambda _id: True)
    parts = follower_partitions(broker, [(TRANSACTION_STATE, i) for i in range(N)] + [("t", 0)])
    clock = ShardsClock()  # a wait for replication times out only inside clock.timing_out
    rig = replicated_txn_writes(broker, parts, clock=clock)
    shards, writes, data = rig.shards, rig.writes, parts[("t", 0)]

    async def publish() -> None:
        shards.on_image()

    def follower_fetches(part: Partition) -> None:
        assert part.update_follower(FOLLOWER, part.log.log_end_offset, 1, broker.now_ms())
        broker.replicas.fetch_waiters.notify((part.topic, part.index))

    h.run(publish())
    assert init(h).error_code == E.NOT_COORDINATOR
    assert end(h, pid, epoch, True) == E.NOT_COORDINATOR

    # Elected: the shard loads the partition's log; "tx" is back, Ongoing with t-0.
    leader = parts[(TRANSACTION_STATE, p)]
    lead(broker, leader)
    h.run(publish())
    assert shards.table.shards[p] == (ShardState.LOADING, 1)
    wait_until(lambda: shards.table.shards[p][0] == ShardState.ACTIVE, "the load", sleep=h.sleep)
    m = svc.coordinator.txns["tx"]
    assert m.state is TransactionState.ONGOING and m.partitions == {("t", 0)}

    # EndTxn is answered once the follower has the PrepareCommit, not before. Its marker cannot
    # be written to t-0 while this broker only follows it: retried, it stays in PrepareCommit.
    task = h.start(END_TXN, 3, {"transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch,
                                "committed": True})  # fmt: skip
    h.run(asyncio.sleep(0.05))
    assert not task.done()
    follower_fetches(leader)
    assert h.run(task).error_code == 0
    h.run(asyncio.sleep(0.3))  # a few rounds of retries
    assert svc.coordinator.txns["tx"].state is TransactionState.PREPARE_COMMIT
    assert control_batches(h, "t", 0) == 0 and ("tx", 1) in writes._sending

    # Not replicated within the timeout: COORDINATOR_NOT_AVAILABLE, as Kafka maps it.
    other = next(f"x{i}" for i in range(100) if transaction_partition(f"x{i}", N) == p)
    assert clock.timing_out(lambda: init(h, other)).error_code == E.COORDINATOR_NOT_AVAILABLE

    # Resigned: the shard's ids go, and their requests get NOT_COORDINATOR.
    leader.make_follower(Registration(FOLLOWER, 2, 2, (node, FOLLOWER), (node, FOLLOWER)))
    h.run(publish())
    assert p not in shards.table.shards and "tx" not in svc.coordinator.txns
    wait_until(
        lambda: not writes._sending, "the marker sender to give up", sleep=h.sleep
    )  # not its transaction now
    assert init(h).error_code == E.NOT_COORDINATOR

    # WriteTxnMarkers to a partition this broker follows: NOT_LEADER_OR_FOLLOWER, nothing appended.
    marker = {"producer_id": pid, "producer_epoch": epoch, "transaction_result": False, "coordinator_epoch": 0,
              "topics": [{"name": "t", "partition_indexes": [0]}]}  # fmt: skip
    r = h.call(WRITE_TXN_MARKERS, 1, {"markers": [marker]})
    assert r.markers[0].topics[0].partitions[0].error_code == E.NOT_LEADER_OR_FOLLOWER
    assert control_batches(h, "t", 0) == 0

    # This broker now leads t-0 (alone) and is elected again for "tx": the load finds the
    # PrepareCommit and completes it, the COMMIT marker in t-0, CompleteCommit once replicated.
    lead(broker, data, alone=True)
    leader.make_leader(Registration(node, 3, 3, (node, FOLLOWER), (node, FOLLOWER)), now_ms=broker.now_ms())
    h.run(publish())
    wait_until(lambda: shards.table.shards[p][0] == ShardState.ACTIVE, "the second load", sleep=h.sleep)
    wait_until(lambda: control_batches(h, "t", 0) == 1, "the COMMIT marker", sleep=h.sleep)
    wait_until(
        lambda: leader.high_watermark < leader.log.log_end_offset, "the CompleteCommit record", sleep=h.sleep
    )
    wait_until(
        lambda: len(writes._writes) == 1, "the marker task to end", sleep=h.sleep
    )  # the CompleteCommit's write waits
    follower_fetches(leader)
    wait_until(lambda: not writes._writes, "CompleteCommit replicated", sleep=h.sleep)
    assert leader.high_watermark == leader.log.log_end_offset
    assert svc.coordinator.txns["tx"].state is TransactionState.COMPLETE_COMMIT

    # Produce verification with the coordinator on another broker and no way to ask it (no
    # endpoint for its broker): the retriable NOT_ENOUGH_REPLICAS, nothing appended.
    end_before = data.log.log_end_offset
    leader.make_follower(Registration(FOLLOWER, 4, 4, (node, FOLLOWER), (node, FOLLOWER)))
    h.run(publish())
    assert produce(h, pid, epoch, 0, b"v").error_code == E.NOT_ENOUGH_REPLICAS
    assert data.log.log_end_offset == end_before


def test_cluster_mode_follows_the_images_transaction_version(broker_harness: HarnessFactory) -> None:
    """The coordinator writes the record format of the image's transaction.version (assembly.py
    sets it); ApiVersions reads the image itself (tests/server/test_features.py)."""
    h = broker_harness(kind=GroupHarness)
    svc = h.broker.txn_service
    svc.set_transaction_version(0)
    assert svc.coordinator.config.transaction_version == 0
    svc.set_transaction_version(2)
    assert svc.coordinator.config.transaction_version == 2


class GatedShards(GroupShards):
    """GroupShards whose load, once it has read the partition, waits for `gate`: the test acts
    while the shard is LOADING with the log already read, as a load racing a marker can be."""

    gate = threading.Event()

    def _read(self, p: int) -> Any:
        loaded = super()._read(p)
        assert self.gate.wait(10), "the test never opened the gate"
        return loaded


def test_offsets_marker_waits_for_the_group_shard_to_load(broker_harness: HarnessFactory) -> None:
    """The CI failure of the Streams kill -9 test, pinned: the COMMIT marker of a transaction's
    offsets reaches the new leader of their __consumer_offsets partition while its group shard is
    still loading. Appended then, it fell after what the load read: the offsets came back pending
    and stayed so, and the producer's next (aborted) transaction took them away, so the group
    fell back to older offsets and a consumer reprocessed input whose output was committed. Now
    the marker is refused (NOT_LEADER_OR_FOLLOWER, which the transaction coordinator retries)
    until the shard is loaded, as Kafka's group coordinator refuses it."""
    h = broker_harness({"transaction.state.log.num.partitions": "1"}, kind=GroupHarness)
    h.create_topic("t", 1)
    broker = h.broker
    node, groups = broker.node_id, broker.group_service
    pid = init(h).producer_id
    assert h.call(ADD_OFFSETS_TO_TXN, 3, {"transactional_id": "tx", "producer_id": pid, "producer_epoch": 0,
                                          "group_id": "g"}).error_code == 0  # fmt: skip

    def txn_commit(offset: int) -> Any:
        return {"transactional_id": "tx", "group_id": "g", "producer_id": pid, "producer_epoch": 0,
                "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                         "committed_metadata": ""}]}]}  # fmt: skip

    assert h.call(TXN_OFFSET_COMMIT, 3, txn_commit(42)).topics[0].partitions[0].error_code == 0
    # From here on the group side is cluster mode's: a broker that follows every __consumer_offsets partition.
    groups.coordinator.unload(lambda _g: True)
    parts = follower_partitions(broker, [(CONSUMER_OFFSETS, i) for i in range(N)])
    groups.shards = shards = GatedShards(groups, partitions=parts, waiters=broker.replicas.fetch_waiters,
                                         topic=broker.metadata.topic, timeout_ms=lambda: 30_000)  # fmt: skip
    groups.offsets_topic.leader_epoch = shards.leader_epoch
    p = offsets_partition("g", N)
    leader = parts[(CONSUMER_OFFSETS, p)]

    def marker(commit: bool) -> int:
        m = {"producer_id": pid, "producer_epoch": 0, "transaction_result": commit, "coordinator_epoch": 0,
             "topics": [{"name": CONSUMER_OFFSETS, "partition_indexes": [p]}]}  # fmt: skip
        return int(
            h.call(WRITE_TXN_MARKERS, 1, {"markers": [m]}).markers[0].topics[0].partitions[0].error_code
        )

    def replicated() -> None:
        leader.update_follower(FOLLOWER, leader.log.log_end_offset, 1, broker.now_ms())  # False: no news
        broker.replicas.fetch_waiters.notify((CONSUMER_OFFSETS, p))

    async def on_image() -> None:
        shards.on_image()

    def offsets_now() -> Any:
        task = h.start(OFFSET_FETCH, 7, {"group_id": "g", "require_stable": True,
                                         "topics": [{"name": "t", "partition_indexes": [0]}]})  # fmt: skip
        part = answered(task).topics[0].partitions[0]
        return part.error_code, part.committed_offset

    def answered(task: Any) -> Any:
        """`task`'s answer, the follower fetching whatever it waits for meanwhile (a loaded machine
        may take a while to append)."""

        def done() -> bool:
            replicated()
            return bool(task.done())

        wait_until(done, "the answer", sleep=h.sleep)
        return task.result()

    # Elected leader of the group's partition: the shard loads, its read done, not yet replayed.
    GatedShards.gate.clear()
    leader.make_leader(Registration(node, 1, 1, (node, FOLLOWER), (node, FOLLOWER)), now_ms=broker.now_ms())
    h.run(on_image())
    assert shards.table.shards[p] == (ShardState.LOADING, 1)
    end_before = leader.log.log_end_offset
    # Its groups' writes wait too, offsets in a transaction as any other.
    loading = h.start(TXN_OFFSET_COMMIT, 3, txn_commit(45))
    h.settle()
    assert (
        loading.done()
        and loading.result().topics[0].partitions[0].error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    )
    first = marker(True)
    GatedShards.gate.set()
    wait_until(lambda: shards.table.shards[p][0] == ShardState.ACTIVE, "the load", sleep=h.sleep)
    while first != E.NONE:  # the transaction coordinator's retries
        h.run(asyncio.sleep(0.1))
        first = marker(True)
    assert offsets_now() == (0, 42)

    # The producer's next offsets, aborted: the committed ones stay.
    assert answered(h.start(TXN_OFFSET_COMMIT, 3, txn_commit(50))).topics[0].partitions[0].error_code == 0
    assert marker(False) == E.NONE
    assert offsets_now() == (0, 42)
    # ... and the marker refused while loading was never appended: one COMMIT, one ABORT.
    assert control_batches(h, CONSUMER_OFFSETS, p) == 2 and leader.log.log_end_offset > end_before


def test_a_batch_while_the_last_markers_are_written_gets_the_retriable_code(
    broker_harness: HarnessFactory,
) -> None:
    """Issue 26, fault 1: a committed transaction whose markers are still being written (one of
    its partitions has no leader here yet) stays PrepareCommit; a transactional batch of that
    producer on a partition led by the coordinator's own broker then gets NOT_ENOUGH_REPLICAS
    (CONCURRENT_TRANSACTIONS through the verification, retriable), as from a remote coordinator
    and as Kafka's leader answers: never INVALID_TXN_STATE (fatal for the producer), and the
    implicit add of Produce v12 not a bare CONCURRENT_TRANSACTIONS either."""
    h = broker_harness(
        {"transaction.state.log.num.partitions": "1", "offsets.topic.num.partitions": "1"}, kind=GroupHarness
    )
    h.create_topic("t", 2)
    broker = h.broker
    node, svc = broker.node_id, broker.txn_service
    pid = init(h).producer_id  # single node: creates __transaction_state with "tx"
    parts = follower_partitions(broker, [(TRANSACTION_STATE, 0), ("t", 0), ("t", 1)])
    state, t0, t1 = parts[(TRANSACTION_STATE, 0)], parts[("t", 0)], parts[("t", 1)]
    lead(broker, state)
    lead(broker, t0, alone=True)  # t-1: followed
    shards = replicated_txn_writes(broker, parts).shards

    async def publish() -> None:
        shards.on_image()

    def replicated(call: Any) -> Any:
        """`call` in flight, answered once the follower fetched what it stored."""
        task = h.start(*call)

        def done() -> bool:
            state.update_follower(FOLLOWER, state.log.log_end_offset, 1, broker.now_ms())  # False: no news
            broker.replicas.fetch_waiters.notify((TRANSACTION_STATE, 0))
            return bool(task.done())

        wait_until(done, "the answer", sleep=h.sleep)
        return task.result()

    h.run(publish())
    wait_until(lambda: shards.table.shards[0][0] == ShardState.ACTIVE, "the load", sleep=h.sleep)
    add_body = {"v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": 0, "v3_and_below_topics": [{"name": "t", "partitions": [0, 1]}]}  # fmt: skip
    assert replicated((ADD_PARTITIONS_TO_TXN, 3, add_body)).results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0  # fmt: skip
    assert txn_batch(h, 9, pid, 0, b"a") == (0, None)
    end_body = {"transactional_id": "tx", "producer_id": pid, "producer_epoch": 0, "committed": True}
    assert replicated((END_TXN, 3, end_body)).error_code == 0
    h.run(asyncio.sleep(0.2))  # the marker to t-1 is refused and retried: still PrepareCommit
    assert svc.coordinator.txns["tx"].state is TransactionState.PREPARE_COMMIT

    retriable = (
        E.NOT_ENOUGH_REPLICAS,
        "Unable to verify the partition has been added to the transaction. Underlying error: CONCURRENT_TRANSACTIONS",
    )
    assert txn_batch(h, 9, pid, 1, b"b") == retriable  # verification (Produce v9)
    assert txn_batch(h, 12, pid, 1, b"b") == retriable  # the implicit add (Produce v12)
    assert t0.log.log_end_offset == 2  # "a" and its COMMIT marker; nothing of the refused batches

    # The marker reaches t-1 once it is led here: CompleteCommit, and the next batch joins at once.
    t1.make_leader(Registration(node, 1, 1, (node,), (node,)), now_ms=broker.now_ms())
    wait_until(lambda: t1.log.log_end_offset == 1, "the COMMIT marker on t-1", sleep=h.sleep)

    def completed() -> bool:
        state.update_follower(FOLLOWER, state.log.log_end_offset, 1, broker.now_ms())
        broker.replicas.fetch_waiters.notify((TRANSACTION_STATE, 0))
        return svc.coordinator.txns["tx"].state is TransactionState.COMPLETE_COMMIT

    wait_until(completed, "CompleteCommit", sleep=h.sleep)
    assert (
        replicated((PRODUCE, 12, batch_body(pid, 1, b"b"))).responses[0].partition_responses[0].error_code
        == 0
    )
    assert svc.coordinator.txns["tx"].state is TransactionState.ONGOING
