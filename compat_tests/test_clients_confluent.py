"""confluent-kafka (librdkafka) against `kcompat serve`: produce/consume with every codec, offsets
by time, idempotence across a restart, admin (topics, configs, delete records), error cases."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from compat_tests.client_data import BASE_TS, CODEC_IDS, CODECS, RECORDS, Rec, stored_codecs, unique
from compat_tests.fetch_log import DebugBroker, fetch_lines
from kcompat.testing import TEST_DEFAULTS

pytestmark = pytest.mark.timeout(120)


def produce_all(bootstrap: str, topic: str, records: Any, **conf: Any) -> list[Any]:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, **conf})
    reports: list[Any] = []
    for r in records:
        p.produce(topic, key=r.key, value=r.value, headers=list(r.headers), timestamp=r.timestamp, partition=0,
                  on_delivery=lambda err, msg: reports.append((err, msg)))  # fmt: skip
    assert p.flush(30) == 0
    return reports


def consume(
    bootstrap: str, topic: str, n: int, *, offset: int = OFFSET_BEGINNING, timeout: float = 15, **conf: Any
) -> list[Any]:
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique("g"), "enable.auto.commit": False, **conf}
    )
    c.assign([TopicPartition(topic, 0, offset)])
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.3)
        if m is None:
            continue
        assert m.error() is None, m.error()
        got.append(m)
    c.close()
    return got


@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume_every_codec(kcompat_session_broker: Any, codec: str) -> None:
    b = kcompat_session_broker
    topic = unique(f"ck-{codec}")
    reports = produce_all(b.bootstrap, topic, RECORDS, **{"compression.type": codec})
    assert [(err, msg.offset()) for err, msg in reports] == [(None, i) for i in range(len(RECORDS))]
    got = consume(b.bootstrap, topic, len(RECORDS), **{"check.crcs": True})
    assert [(m.offset(), m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()) for m in got] == [
        (i, r.key, r.value, r.headers, (1, r.timestamp)) for i, r in enumerate(RECORDS)
    ]
    # librdkafka sends a batch uncompressed when the codec would not shrink it (a batch split off by
    # linger timing under load, say); the big record's batch always shrinks, so the codec must show.
    stored = stored_codecs(b.data_dir, topic)
    assert CODEC_IDS[codec] in stored and stored <= {0, CODEC_IDS[codec]}


def test_consume_from_earliest_latest_and_timestamp(kcompat_session_broker: Any) -> None:
    b = kcompat_session_broker
    topic = unique("ck-offsets")
    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(10):
        p.produce(topic, value=b"%d" % i, timestamp=BASE_TS + i * 1000, partition=0)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": unique("g")})
    assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 10)
    (found,) = c.offsets_for_times([TopicPartition(topic, 0, BASE_TS + 4_500)], timeout=10)
    assert found.offset == 5
    (missing,) = c.offsets_for_times([TopicPartition(topic, 0, BASE_TS + 60_000)], timeout=10)
    assert missing.offset == -1  # OFFSET_END: no record at or after the time
    c.close()
    assert [m.value() for m in consume(b.bootstrap, topic, 5, offset=5)] == [b"%d" % i for i in range(5, 10)]
    assert consume(b.bootstrap, topic, 1, offset=OFFSET_END, timeout=1.5) == []
    assert [m.offset() for m in consume(b.bootstrap, topic, 10)] == list(range(10))


def test_idempotent_producer_across_a_restart(kcompat_broker_factory: Any) -> None:
    b = kcompat_broker_factory()
    topic = unique("ck-idem")
    p = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    reports: list[Any] = []
    p.produce(topic, value=b"one", partition=0, on_delivery=lambda e, m: reports.append((e, m.offset())))
    assert p.flush(30) == 0
    b.restart()
    p.produce(topic, value=b"two", partition=0, on_delivery=lambda e, m: reports.append((e, m.offset())))
    assert p.flush(60) == 0
    assert reports == [(None, 0), (None, 1)]
    # Both read back, however long a fresh consumer takes to start on a loaded machine (the read
    # used to give up after 4 s, the two expected records included); a duplicate moves the log end.
    got = consume(b.bootstrap, topic, 2)
    assert [(m.offset(), m.value()) for m in got] == [(0, b"one"), (1, b"two")]
    ends = Consumer({"bootstrap.servers": b.bootstrap, "group.id": unique("g")})
    try:
        assert ends.get_watermark_offsets(TopicPartition(topic, 0), timeout=30, cached=False) == (0, 2)
    finally:
        ends.close()


def test_admin_topics_configs_and_delete_records(kcompat_session_broker: Any) -> None:
    b = kcompat_session_broker
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    topic = unique("ck-admin")
    admin.create_topics([NewTopic(topic, 2, 1, config={"retention.ms": "3600000"})])[topic].result(10)
    with pytest.raises(KafkaException) as exc:
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    assert exc.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    md = admin.list_topics(timeout=10)
    assert len(md.topics[topic].partitions) == 2

    res = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ],
    )
    admin.incremental_alter_configs([res])[res].result(10)
    (described,) = admin.describe_configs([ConfigResource("topic", topic)]).values()
    cfg = described.result(10)
    assert cfg["retention.ms"].value == "7200000"
    assert cfg["cleanup.policy"].value == "delete,compact"
    assert cfg["segment.bytes"].is_default

    broker_res = ConfigResource("broker", "1")
    (broker_cfg,) = admin.describe_configs([broker_res]).values()
    assert broker_cfg.result(10)["num.partitions"].value == "1"

    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(10)
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 3

    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(6):  # keyed: the topic is compacted now, which refuses records without a key
        p.produce(topic, key=b"k%d" % i, value=b"%d" % i, partition=0)
    assert p.flush(30) == 0
    (deleted,) = admin.delete_records([TopicPartition(topic, 0, 4)]).values()
    assert deleted.result(10).low_watermark == 4
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": unique("g")})
    assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (4, 6)
    c.close()

    admin.delete_topics([topic])[topic].result(10)
    assert topic not in admin.list_topics(timeout=10).topics


def test_unknown_topic_with_auto_create_off(kcompat_broker_factory: Any) -> None:
    b = kcompat_broker_factory(auto_create_topics_enable=False)
    topic = unique("ck-missing")
    p = Producer({"bootstrap.servers": b.bootstrap, "message.timeout.ms": 3000})
    errors: list[Any] = []
    p.produce(topic, value=b"x", on_delivery=lambda e, m: errors.append(e))
    p.flush(10)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() in (
        KafkaError._UNKNOWN_TOPIC,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._MSG_TIMED_OUT,
    )
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    assert topic not in admin.list_topics(timeout=10).topics


def test_record_over_message_max_bytes(kcompat_broker_factory: Any) -> None:
    b = kcompat_broker_factory(message_max_bytes=2000)
    topic = unique("ck-big")
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    p = Producer({"bootstrap.servers": b.bootstrap, "message.max.bytes": 1_000_000})
    results: list[Any] = []
    p.produce(topic, value=b"x" * 10_000, partition=0, on_delivery=lambda e, m: results.append(e))
    p.flush(30)  # its own batch: the small record must not share the refused one
    p.produce(topic, value=b"small", partition=0, on_delivery=lambda e, m: results.append(e))
    p.flush(30)
    assert results[0] is not None and results[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert results[1] is None


def test_consumer_never_uses_fetch_sessions(tmp_path: Path) -> None:
    """librdkafka always sends sessionless full fetches (session 0, epoch -1): every partition in
    every request, every one answered, and no session is opened."""
    broker = DebugBroker(tmp_path / "data", tmp_path / "kcompat.log", dict(TEST_DEFAULTS))
    broker.start()
    try:
        topic, n = unique("ck-sessions"), 3
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=n, replication_factor=1)])[topic].result(30)
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        sent = {(part, i): b"p%d-%d" % (part, i) for part in range(n) for i in range(20)}
        for (part, _), value in sent.items():
            p.produce(topic, value=value, partition=part)
        assert p.flush(30) == 0
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("g"), "enable.auto.commit": False,
                      "fetch.wait.max.ms": 100})  # fmt: skip
        c.assign([TopicPartition(topic, part, OFFSET_BEGINNING) for part in range(n)])
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < len(sent) and time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is not None and not m.error():
                got.append((m.partition(), m.offset(), m.value()))
        c.close()
        assert sorted(got) == sorted((part, i, v) for (part, i), v in sent.items())
        lines = fetch_lines(broker)
        assert lines, "no Fetch was logged"
        assert all(
            (f.session_id, f.epoch, f.kind, f.response_session_id) == (0, -1, "sessionless", 0) for f in lines
        )
        assert all(f.requested == f.read == f.answered for f in lines), lines
    finally:
        broker.stop()


def test_keyless_record_on_a_compacted_topic_is_invalid_record(kcompat_broker_factory: Any) -> None:
    b = kcompat_broker_factory()
    topic = unique("ck-compacted")
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})])[topic].result(10)
    reports = produce_all(b.bootstrap, topic, [Rec(None, b"v", (), 0)])
    ((err, _),) = reports
    assert err is not None and err.code() == KafkaError.INVALID_RECORD, err
    future = int(time.time() * 1000) + 2 * 3_600_000
    ((err, _),) = produce_all(b.bootstrap, topic, [Rec(b"k", b"v", (), future)])
    assert err is not None and err.code() == KafkaError.INVALID_TIMESTAMP, err
    assert produce_all(b.bootstrap, topic, [Rec(b"k", b"v", (), 0)])[0][0] is None
    assert [m.key() for m in consume(b.bootstrap, topic, 1)] == [b"k"]  # only the good record was written
