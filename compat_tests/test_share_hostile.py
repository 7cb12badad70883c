"""Hostile share-group input against one `kcompat serve`: Kafka's error codes, while a confluent
ShareConsumer in another group keeps being served, and nothing acknowledged is lost.

A raw member (kcompat's own client, the wire requests by hand) joins group `raw` and acquires
records, then sends what a broken or malicious client would:

    ShareAcknowledge for offsets it never acquired, for offsets already accepted,
        for offsets another member holds                     -> INVALID_RECORD_STATE (per partition)
    ShareFetch / ShareAcknowledge with a stale session epoch -> INVALID_SHARE_SESSION_EPOCH
    ShareAcknowledge with no session (a member never seen)   -> SHARE_SESSION_NOT_FOUND
    ShareGroupHeartbeat of an unknown member (epoch > 0)     -> UNKNOWN_MEMBER_ID
    ShareFetch for a topic id that does not exist            -> UNKNOWN_TOPIC_ID (per partition)
    kafka-configs --entity-type groups, share.record.lock.duration.ms past its bounds: refused

and afterwards the records it accepted never come again, the ones it held come back once it
closes its session, and the bystander group consumed everything produced to it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from support import kafka_tool

from kcompat.client.cluster import Cluster
from kcompat.client.connection import Connection
from kcompat.testing import TEST_DEFAULTS, Broker
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.types import share_acknowledge as sa
from kcompat.wire.types import share_fetch as sf
from kcompat.wire.types import share_group_heartbeat as sh

pytestmark = pytest.mark.timeout(180)

HEARTBEAT, SHARE_FETCH, SHARE_ACK = 76, 78, 79
ACCEPT, RELEASE = 1, 2
RAW, BYSTANDER = "raw", "bystander"
RECORD_LIMIT = 1  # ShareAcquireMode (ShareFetch v2)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("share-hostile")
    b = Broker(base / "data", base / "kcompat.log", overrides=dict(TEST_DEFAULTS))
    b.start()
    yield b
    b.stop()


def earliest(broker: Broker, group: str) -> None:
    kafka_tool("kafka-configs", "--bootstrap-server", broker.bootstrap, "--alter", "--entity-type",
               "groups", "--entity-name", group, "--add-config", "share.auto.offset.reset=earliest")  # fmt: skip


class RawMember:
    def __init__(self, broker: Broker, topic_id: uuid.UUID, member_id: str | None = None) -> None:
        host, port = broker.bootstrap.rsplit(":", 1)
        self.conn = Connection(host, int(port), timeout=15)
        self.topic_id = topic_id
        self.member_id = member_id or str(uuid.uuid4())
        self.epoch = 0

    def heartbeat(self, member_epoch: int, topics: list[str] | None) -> Any:
        return self.conn.request(
            HEARTBEAT,
            sh.ShareGroupHeartbeatRequest(
                group_id=RAW,
                member_id=self.member_id,
                member_epoch=member_epoch,
                subscribed_topic_names=topics,
            ),
            version=1,
        )[1]

    def fetch(
        self,
        acks: Sequence[tuple[int, int, int]] = (),
        epoch: int | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> Any:
        body = sf.ShareFetchRequest(
            group_id=RAW,
            member_id=self.member_id,
            share_session_epoch=self.epoch if epoch is None else epoch,
            max_wait_ms=200,
            min_bytes=1,
            max_bytes=1 << 20,
            max_records=5,
            batch_size=5,
            share_acquire_mode=RECORD_LIMIT,  # five at a time: a second member finds records left
            topics=[
                sf.FetchTopic(
                    topic_id=topic_id or self.topic_id,
                    partitions=[
                        sf.FetchPartition(
                            partition_index=0,
                            acknowledgement_batches=[
                                sf.AcknowledgementBatch(
                                    first_offset=f, last_offset=last, acknowledge_types=[t]
                                )
                                for f, last, t in acks
                            ],
                        )
                    ],
                )
            ],
        )
        answer = self.conn.request(SHARE_FETCH, body, version=2)[1]
        if epoch is None and answer.error_code == 0:
            self.epoch = self.epoch + 1 if self.epoch >= 0 else self.epoch
        return answer

    def ack(self, acks: list[tuple[int, int, int]], epoch: int | None = None) -> Any:
        body = sa.ShareAcknowledgeRequest(
            group_id=RAW,
            member_id=self.member_id,
            share_session_epoch=self.epoch if epoch is None else epoch,
            topics=[
                sa.AcknowledgeTopic(
                    topic_id=self.topic_id,
                    partitions=[
                        sa.AcknowledgePartition(
                            partition_index=0,
                            acknowledgement_batches=[
                                sa.AcknowledgementBatch(
                                    first_offset=f, last_offset=last, acknowledge_types=[t]
                                )
                                for f, last, t in acks
                            ],
                        )
                    ],
                )
            ],
        )
        answer = self.conn.request(SHARE_ACK, body, version=1)[1]
        if epoch is None and answer.error_code == 0:
            self.epoch += 1
        return answer

    def acquire(self) -> list[int]:
        """Fetch until some records are acquired: their offsets."""
        deadline = time.time() + 20
        while time.time() < deadline:
            answer = self.fetch()
            assert answer.error_code == 0, ErrorCode(answer.error_code).name
            offsets = [
                o
                for t in answer.responses
                for p in t.partitions
                for a in p.acquired_records
                for o in range(a.first_offset, a.last_offset + 1)
            ]
            if offsets:
                return offsets
        raise AssertionError("the raw member acquired nothing")


def partition_ack_error(answer: Any) -> int:
    assert answer.error_code == 0, ErrorCode(answer.error_code).name
    return int(answer.responses[0].partitions[0].error_code)


def fetch_ack_error(answer: Any) -> int:
    assert answer.error_code == 0, ErrorCode(answer.error_code).name
    return int(answer.responses[0].partitions[0].acknowledge_error_code)


def bystander(broker: Broker, t: str, got: list[bytes], stop: threading.Event) -> None:
    c = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": BYSTANDER})
    c.subscribe([t])
    try:
        while not stop.is_set():
            got += [m.value() for m in c.poll(0.3) if m.error() is None]
    finally:
        c.close()


def test_hostile_share_input_gets_kafkas_errors_and_others_are_served(broker: Broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for name in ("hostile", "hostile-by"):
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    earliest(broker, RAW)
    earliest(broker, BYSTANDER)
    # A lock duration out of bounds is refused, as Kafka refuses it.
    refused = kafka_tool("kafka-configs", "--bootstrap-server", broker.bootstrap, "--alter",
                         "--entity-type", "groups", "--entity-name", RAW, "--add-config",
                         "share.record.lock.duration.ms=999999999", check=False)  # fmt: skip
    assert refused.returncode != 0, refused.stdout
    assert "share.record.lock.duration.ms" in refused.stderr, refused.stderr
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(40):
        p.produce("hostile", value=f"h{i}".encode(), partition=0)
    assert p.flush(30) == 0

    got: list[bytes] = []
    stop = threading.Event()
    by = threading.Thread(target=bystander, args=(broker, "hostile-by", got, stop))
    by.start()
    sent: list[bytes] = []

    def feed(k: int) -> None:  # the bystander's records arrive between the hostile requests
        for i in range(k):
            v = f"b{len(sent)}-{i}".encode()
            p.produce("hostile-by", value=v)
            sent.append(v)
        p.flush(10)

    with Cluster(broker.bootstrap) as cluster:
        topic_id = cluster.topic("hostile").topic_id
    raw = RawMember(broker, topic_id)
    try:
        joined = raw.heartbeat(0, ["hostile"])
        assert joined.error_code == 0, ErrorCode(joined.error_code).name
        feed(20)
        held = raw.acquire()
        first = held[0]
        # accept the first record acquired; keep the rest
        assert partition_ack_error(raw.ack([(first, first, ACCEPT)])) == 0
        feed(20)
        # offsets never acquired (past the end), already accepted: INVALID_RECORD_STATE, all or nothing
        assert partition_ack_error(raw.ack([(10_000, 10_005, ACCEPT)])) == ErrorCode.INVALID_RECORD_STATE
        assert partition_ack_error(raw.ack([(first, first, RELEASE)])) == ErrorCode.INVALID_RECORD_STATE
        mixed = [(held[1], held[1], ACCEPT), (10_000, 10_000, ACCEPT)] if len(held) > 1 else []
        if mixed:
            assert partition_ack_error(raw.ack(mixed)) == ErrorCode.INVALID_RECORD_STATE
        # ... piggy-backed on a ShareFetch too
        assert fetch_ack_error(raw.fetch([(10_000, 10_000, ACCEPT)])) == ErrorCode.INVALID_RECORD_STATE
        feed(20)
        # a stale session epoch, on ShareFetch and ShareAcknowledge: the session stays as it was
        stale = raw.epoch - 1
        assert raw.fetch(epoch=stale).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        assert raw.ack([(held[-1], held[-1], ACCEPT)], epoch=stale).error_code == (
            ErrorCode.INVALID_SHARE_SESSION_EPOCH
        )
        assert raw.fetch(epoch=raw.epoch + 5).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        # an unknown member: no session, not in the group
        stranger = RawMember(broker, raw.topic_id)
        stranger.epoch = 1
        assert stranger.ack([(held[-1], held[-1], ACCEPT)]).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
        assert stranger.heartbeat(5, None).error_code == ErrorCode.UNKNOWN_MEMBER_ID
        # ... that opens a session anyway (membership is the coordinator's business, as in Kafka):
        # it acquires records of its own but cannot acknowledge what the raw member holds
        stranger.epoch = 0
        taken = stranger.acquire()
        assert stranger.ack([(held[-1], held[-1], ACCEPT)]).responses[0].partitions[0].error_code == (
            ErrorCode.INVALID_RECORD_STATE
        )
        # its connection closes: its session ends and what it acquired is released at once, as
        # Kafka does, not when the acquisition lock (30 s here) runs out
        stranger.conn.close()
        stranger_gone = time.time()
        # a topic id that does not exist
        nowhere = uuid.uuid4()
        unknown = raw.fetch(topic_id=nowhere)
        assert unknown.error_code == 0
        codes = {t.topic_id: [p.error_code for p in t.partitions] for t in unknown.responses}
        assert codes[nowhere] == [ErrorCode.UNKNOWN_TOPIC_ID], codes
        feed(20)
        # the raw member's session still works: it closes it, releasing what it holds
        closed = raw.fetch(epoch=-1)
        assert closed.error_code == 0, ErrorCode(closed.error_code).name
    finally:
        raw.conn.close()
    # A new member of the raw group gets everything but the accepted record: the held ones came
    # back, none of what the hostile requests named was acknowledged.
    again = RawMember(broker, raw.topic_id)
    try:
        assert again.heartbeat(0, ["hostile"]).error_code == 0
        seen: dict[int, float] = {}
        deadline = time.time() + 20
        while len(seen) < 39 and time.time() < deadline:
            offsets = again.acquire()
            seen |= dict.fromkeys(offsets, time.time())
            assert partition_ack_error(again.ack([(o, o, ACCEPT) for o in offsets])) == 0
        assert first not in seen
        assert set(seen) == set(range(40)) - {first}, sorted(set(range(40)) - {first} - set(seen))
        late = {o: round(seen[o] - stranger_gone, 1) for o in taken if seen[o] > stranger_gone + 10}
        assert not late, f"released only at lock expiry, seconds after the close: {late}"
    finally:
        again.conn.close()
    deadline = time.time() + 30
    while len(got) < len(sent) and time.time() < deadline:
        time.sleep(0.2)
    stop.set()
    by.join(30)
    assert sorted(got) == sorted(sent), (len(got), len(sent))
