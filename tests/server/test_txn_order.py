"""Cluster mode's `__transaction_state` order (server/cluster/txn_writes.py): the next transaction's
Ongoing record must never land before the last one's CompleteCommit. A request for the id that
arrives while the CompleteCommit is being written (Kafka's pending transition) gets
CONCURRENT_TRANSACTIONS; otherwise a reload, which keeps the last record of each id, would forget
the open transaction and never write its markers."""

from __future__ import annotations

import asyncio
from typing import Any

from kcompat.coordinator.shards import ShardState
from kcompat.coordinator.transaction import TransactionCoordinator, TxnConfig, TxnResult
from kcompat.coordinator.transaction.log_records import transaction_partition
from kcompat.coordinator.transaction.state import TransactionState
from kcompat.server.transactions.txn_log import read_state_records
from kcompat.storage.topic_store import TRANSACTION_STATE
from kcompat.testing import wait_until
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.messages.end_txn import END_TXN
from tests.server.broker_harness import HarnessFactory
from tests.server.cluster_txn_rig import FOLLOWER, follower_partitions, lead, replicated_txn_writes
from tests.server.groups_harness import GroupHarness, ShardsClock
from tests.server.test_transactions import add, init

N = 3  # transaction.state.log.num.partitions


def test_next_transaction_never_precedes_the_last_ones_complete_commit(
    broker_harness: HarnessFactory,
) -> None:
    h = broker_harness(
        {"transaction.state.log.num.partitions": str(N), "offsets.topic.num.partitions": "1"},
        kind=GroupHarness,
    )
    h.create_topic("t", 1)
    broker = h.broker
    svc = broker.txn_service
    r = init(h)  # single node: creates __transaction_state and stores "tx"
    pid, epoch = r.producer_id, r.producer_epoch
    assert add(h, pid, epoch, [0]) == [0]
    p = transaction_partition("tx", N)

    # Cluster mode, as tests/server/test_txn_shards.py builds it: this broker leads t-0 alone and
    # the partition of "tx" with a follower in its ISR (a record is answered once it has it).
    svc.coordinator.unload(lambda _id: True)
    parts = follower_partitions(broker, [(TRANSACTION_STATE, i) for i in range(N)] + [("t", 0)])
    lead(broker, parts[("t", 0)], alone=True)
    rig = replicated_txn_writes(broker, parts, clock=ShardsClock())
    shards, markers, writes = rig.shards, rig.markers, rig.writes
    leader = parts[(TRANSACTION_STATE, p)]
    lead(broker, leader)

    async def publish() -> None:
        shards.on_image()

    def follower_fetches() -> None:
        leader.update_follower(FOLLOWER, leader.log.log_end_offset, 1, broker.now_ms())
        broker.replicas.fetch_waiters.notify((TRANSACTION_STATE, p))

    h.run(publish())
    wait_until(lambda: shards.table.shards[p][0] == ShardState.ACTIVE, "the load", sleep=h.sleep)
    assert svc.coordinator.txns["tx"].state is TransactionState.ONGOING

    def add_next() -> Any:
        return svc.run(
            lambda now: svc.coordinator.add_partitions("tx", pid, epoch, [("t", 0)], now), key="tx"
        )

    # The next transaction's first add (a Produce's implicit add, or AddPartitionsToTxn) arrives
    # in the same loop turn as the last marker's acknowledgement: its task runs before whatever
    # the marker sender starts afterwards.
    racing: list[asyncio.Task[TxnResult]] = []
    real_send = markers.send

    async def send(*args: Any) -> bool:
        done = await real_send(*args)
        racing.append(asyncio.ensure_future(add_next()))
        return bool(done)

    markers.send = send  # type: ignore[method-assign]
    task = h.start(END_TXN, 3, {"transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch,
                                "committed": True})  # fmt: skip

    def settled() -> bool:
        follower_fetches()
        return task.done() and bool(racing) and racing[0].done() and not writes._writes

    wait_until(settled, "the commit and the racing add", sleep=h.sleep)
    assert h.run(task).error_code == 0
    # Whatever the racing add was answered, the log says what the coordinator holds.
    assert reload(h, p).txns["tx"].state is svc.coordinator.txns["tx"].state
    # Kafka's answer while the CompleteCommit is written: retry later.
    assert racing[0].result().error == E.CONCURRENT_TRANSACTIONS
    assert svc.coordinator.txns["tx"].state is TransactionState.COMPLETE_COMMIT
    retried = asyncio.ensure_future(add_next(), loop=h.loop)
    wait_until(lambda: (follower_fetches(), retried.done())[1], "the retried add", sleep=h.sleep)
    assert retried.result().error == E.NONE
    assert svc.coordinator.txns["tx"].state is TransactionState.ONGOING

    # A coordinator that reloads the partition (a failover) finds the open transaction.
    m = reload(h, p).txns["tx"]
    assert m.state is TransactionState.ONGOING and m.partitions == {("t", 0)}


def reload(h: GroupHarness, p: int) -> TransactionCoordinator:
    """A new coordinator that replayed `__transaction_state` partition `p` (the last record wins)."""
    reloaded = TransactionCoordinator(TxnConfig(num_partitions=N))
    for key, value in read_state_records(h.broker.replicas.partition_log(TRANSACTION_STATE, p)):
        reloaded.replay(key, value)
    return reloaded
