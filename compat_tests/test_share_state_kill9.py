"""__share_group_state survives kill -9: every WriteShareGroupState a `kcompat serve` answered is
read back after the broker is killed and started again.

kcompat's own client plays the share-partition leaders of three share-partitions (three groups,
so three partitions of __share_group_state; a ShareSnapshot every 4 ShareUpdates). Each write i
of a share-partition acknowledges offset i and moves the start offset to i - 20, so the state after
it is one ACKNOWLEDGED batch [start, i]. A thread writes round-robin while the broker is killed -9
at a random moment; after the restart each leader reads its state as a new leader would (a newer
leader epoch) and checks:

* the state is that of its last answered write, or of the one cut off by the kill (which a real
  leader retries, as this one then does); nothing answered is missing;
* the old leader epoch is fenced (the new leader's read was recorded before it was answered).

The cluster-mode Persister (NetworkSharePersister) is checked against the same broker as a remote
share coordinator: every Persister call crosses the wire as Kafka's inter-broker requests.

Rounds: KCOMPAT_SHARE_CRASH_ROUNDS (default 4); the slow layer runs KCOMPAT_SHARE_CRASH_SLOW_ROUNDS
(default 40).
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from kcompat.client.admin import create_topic
from kcompat.client.cluster import Cluster
from kcompat.client.connection import Connection
from kcompat.client.errors import CannotConnect
from kcompat.kafka_uuid import to_base64
from kcompat.server.cluster.share_persister import NetworkSharePersister
from kcompat.server.cluster.txn_channels import BrokerChannels
from kcompat.server.share.local_persister import LocalSharePersister
from kcompat.server.share.persister import PersisterStateBatch, SharePartitionKey, ShareStateWrite
from kcompat.storage.topic_store import SHARE_GROUP_STATE, TopicInfo
from kcompat.testing import TEST_DEFAULTS, Broker
from kcompat.wire.error_codes import ErrorCode

ROUNDS = int(os.environ.get("KCOMPAT_SHARE_CRASH_ROUNDS", "4"))
SLOW_ROUNDS = int(os.environ.get("KCOMPAT_SHARE_CRASH_SLOW_ROUNDS", "40"))
FIND_COORDINATOR, INITIALIZE, READ, WRITE = 10, 83, 84, 85
ACKNOWLEDGED = 2
WINDOW = 20  # the start offset trails the newest acknowledged offset by this much
GROUPS = ("sg-a", "sg-b", "sg-c")
pytestmark = pytest.mark.timeout(max(300, SLOW_ROUNDS * 15))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base: Path = tmp_path_factory.mktemp("share-kill9")
    b = Broker(
        data_dir=base / "data",
        log_path=base / "broker.log",
        overrides={
            **TEST_DEFAULTS,
            "share.coordinator.state.topic.num.partitions": "5",
            "share.coordinator.snapshot.update.records.per.snapshot": "4",
        },
    )
    b.start()
    try:
        yield b
    finally:
        b.stop()


@dataclass
class Leader:
    """One share-partition's leader: what it was told is stored, and what it sent last."""

    group: str
    topic_id: uuid.UUID
    leader_epoch: int = 0
    answered: int = -1  # the last offset a write acknowledged that was answered
    sent: int = -1  # the last offset a write was sent for (answered or cut off)

    def state_after(self, i: int) -> tuple[int, list[tuple[int, int, int, int]]]:
        start = max(0, i - WINDOW)
        return start, ([(start, i, ACKNOWLEDGED, 1)] if i >= 0 else [])

    def partition_body(self, **fields: Any) -> dict[str, Any]:
        return {
            "group_id": self.group,
            "topics": [{"topic_id": self.topic_id, "partitions": [{"partition": 0, **fields}]}],
        }

    def write_body(self, i: int, epoch: int | None = None) -> dict[str, Any]:
        return self.partition_body(
            state_epoch=0,
            leader_epoch=self.leader_epoch if epoch is None else epoch,
            start_offset=max(0, i - WINDOW),
            delivery_complete_count=i + 1,
            state_batches=[
                {"first_offset": i, "last_offset": i, "delivery_state": ACKNOWLEDGED, "delivery_count": 1}
            ],
        )


def _connect(broker: Broker) -> Connection:
    host, port = broker.bootstrap.rsplit(":", 1)
    return Connection(host, int(port), timeout=10)


def _one(answer: Any) -> Any:
    return answer.results[0].partitions[0]


def _write(conn: Connection, leader: Leader, i: int, epoch: int | None = None) -> int:
    _, answer = conn.request(WRITE, leader.write_body(i, epoch), version=1)
    return int(_one(answer).error_code)


def _writer(broker: Broker, leaders: list[Leader], stop: threading.Event, rng: random.Random) -> None:
    """Write round-robin until the broker goes away (the kill) or `stop`."""
    try:
        conn = _connect(broker)
    except CannotConnect:
        return
    try:
        while not stop.is_set():
            leader = rng.choice(leaders)
            i = leader.sent + 1
            leader.sent = i
            try:
                code = _write(conn, leader, i)
            except CannotConnect:
                return  # cut off: stored or not, the leader finds out by reading
            assert code == ErrorCode.NONE, f"{leader.group}: write {i} answered {ErrorCode(code).name}"
            leader.answered = i
    finally:
        conn.close()


def _recover(conn: Connection, leader: Leader) -> None:
    """Read as the new leader, check nothing answered is missing, and retry a write cut off."""
    leader.leader_epoch += 1
    _, answer = conn.request(READ, leader.partition_body(leader_epoch=leader.leader_epoch))
    p = _one(answer)
    assert p.error_code == 0, f"{leader.group}: read answered {ErrorCode(p.error_code).name}"
    got = (
        p.start_offset,
        [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches],
    )
    if got == leader.state_after(leader.sent):
        leader.answered = leader.sent  # the write cut off by the kill was stored
    else:
        assert got == leader.state_after(leader.answered), (
            f"{leader.group}: after kill -9 the state is {got}; the last answered write (offset "
            f"{leader.answered}) left {leader.state_after(leader.answered)}"
        )
        leader.sent = leader.answered
    # The old leader's epoch is fenced from now on, restart or not.
    assert (
        _write(conn, leader, leader.sent + 1, epoch=leader.leader_epoch - 1) == ErrorCode.FENCED_LEADER_EPOCH
    )


def _setup(broker: Broker) -> list[Leader]:
    with Cluster(broker.bootstrap) as cluster:
        create_topic(cluster, "share-kill9", 1)
        topic_id = cluster.topic("share-kill9").topic_id
        conn = cluster.bootstrap
        keys = [f"{g}:{to_base64(topic_id)}:0" for g in GROUPS]
        _, found = conn.request(FIND_COORDINATOR, {"key_type": 2, "coordinator_keys": keys}, version=6)
        assert [(c.error_code, c.port) for c in found.coordinators] == [
            (0, int(broker.bootstrap.rsplit(":", 1)[1]))
        ] * 3
        leaders = [Leader(g, topic_id) for g in GROUPS]
        for leader in leaders:
            _, answer = conn.request(INITIALIZE, leader.partition_body(state_epoch=0, start_offset=0))
            assert _one(answer).error_code == 0
    return leaders


def run_rounds(broker: Broker, rounds: int, seed: int) -> tuple[int, int]:
    rng = random.Random(seed)
    leaders = _setup(broker)
    cut_off_stored = 0
    for _ in range(rounds):
        stop = threading.Event()
        thread = threading.Thread(target=_writer, args=(broker, leaders, stop, rng), daemon=True)
        thread.start()
        time.sleep(rng.uniform(0.1, 0.8))
        broker.kill()
        thread.join(30)
        assert not thread.is_alive(), "a write did not return after the kill"
        time.sleep(rng.uniform(0, 0.2))
        broker.start()
        before = [leader.answered for leader in leaders]
        conn = _connect(broker)
        try:
            for leader in leaders:
                _recover(conn, leader)
        finally:
            conn.close()
        cut_off_stored += sum(leader.answered != b for leader, b in zip(leaders, before, strict=True))
    assert all(leader.answered > 0 for leader in leaders), "the writer never got going"
    return sum(leader.answered + 1 for leader in leaders), cut_off_stored


def test_kill9_loses_no_answered_share_state_write(
    broker: Broker, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = int(os.environ.get("KCOMPAT_CRASH_SEED", str(random.randrange(1 << 30))))
    writes, stored = run_rounds(broker, ROUNDS, seed)
    with capsys.disabled():
        print(
            f"\nshare state kill -9: {ROUNDS} rounds, {writes} writes read back (seed {seed}); "
            f"writes cut off by the kill but stored: {stored}"
        )


@pytest.mark.slow
def test_kill9_share_state_many_rounds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = Broker(
        data_dir=tmp_path / "data",
        log_path=tmp_path / "broker.log",
        overrides={
            **TEST_DEFAULTS,
            "share.coordinator.state.topic.num.partitions": "5",
            "share.coordinator.snapshot.update.records.per.snapshot": "4",
        },
    )
    b.start()
    try:
        seed = int(os.environ.get("KCOMPAT_CRASH_SEED", str(random.randrange(1 << 30))))
        writes, stored = run_rounds(b, SLOW_ROUNDS, seed)
    finally:
        b.stop()
    with capsys.disabled():
        print(
            f"\nshare state kill -9: {SLOW_ROUNDS} rounds, {writes} writes read back (seed {seed}); "
            f"writes cut off by the kill but stored: {stored}"
        )


class _OneRemoteCoordinator:
    """The metadata NetworkSharePersister reads, naming the test's broker (node 1) as the leader of
    every __share_group_state partition; this side is node 2."""

    node_id = 2

    def __init__(self, broker: Broker, partitions: int) -> None:
        self._broker = broker
        self._partitions = partitions

    def topic(self, name: str) -> TopicInfo | None:
        return TopicInfo(name, uuid.uuid4(), self._partitions) if name == SHARE_GROUP_STATE else None

    def leader_and_epoch(self, t: TopicInfo, partition: int) -> tuple[int, int]:
        return 1, 0

    def broker_endpoint(self, node_id: int, listener: str) -> Any:
        host, port = self._broker.bootstrap.rsplit(":", 1)
        return SimpleNamespace(host=host, port=int(port))

    async def auto_create_topic(self, name: str) -> TopicInfo:
        raise AssertionError("the topic exists")


def test_network_persister_against_a_real_coordinator(broker: Broker) -> None:
    with Cluster(broker.bootstrap) as cluster:
        create_topic(cluster, "share-net", 2)
        topic_id = cluster.topic("share-net").topic_id
        key = f"net:{to_base64(topic_id)}:1"
        _, found = cluster.bootstrap.request(
            FIND_COORDINATOR, {"key_type": 2, "coordinator_keys": [key]}, version=6
        )
        assert found.coordinators[0].error_code == 0  # __share_group_state exists now

    async def run() -> None:
        metadata = _OneRemoteCoordinator(broker, 5)
        local = LocalSharePersister(cast(Any, None))  # never called: the coordinator is remote
        persister = NetworkSharePersister(
            local, BrokerChannels(metadata, "PLAINTEXT", 2), metadata, clock=time.monotonic, timeout_s=5
        )
        try:
            spk = SharePartitionKey("net", topic_id.bytes, 1)
            assert await persister.initialize_state(spk, 0, 5) == 0
            batches = (PersisterStateBatch(5, 7, ACKNOWLEDGED, 1), PersisterStateBatch(8, 8, 0, 2))
            assert await persister.write_state(spk, ShareStateWrite(0, 3, 5, 3, batches)) == 0
            got = await persister.read_state(spk, 3)
            assert (got.error_code, got.state_epoch, got.start_offset, got.state_batches) == (
                0,
                0,
                5,
                batches,
            )
            summary = await persister.read_summary(spk, 3)
            assert (summary.error_code, summary.leader_epoch, summary.delivery_complete_count) == (0, 3, 3)
            stale = ShareStateWrite(0, 2, 5, 3, ())
            assert await persister.write_state(spk, stale) == ErrorCode.FENCED_LEADER_EPOCH
            unknown = SharePartitionKey("net", uuid.uuid4().bytes, 0)
            assert await persister.initialize_state(unknown, 0, 0) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert (
                await persister.read_state(unknown, 0)
            ).error_code == ErrorCode.INVALID_REQUEST  # not initialized
            assert await persister.delete_state(spk) == 0
            assert (await persister.read_state(spk, 3)).error_code == ErrorCode.INVALID_REQUEST
        finally:
            persister.close()

    asyncio.run(run())
