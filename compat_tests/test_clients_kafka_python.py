"""kafka-python 3.x against `kcompat serve`: produce/consume with every codec, offsets by time,
idempotence across a restart, admin (topics, configs, delete records), error cases."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.errors import KafkaTimeoutError, MessageSizeTooLargeError, TopicAlreadyExistsError

from compat_tests.client_data import BASE_TS, CODEC_IDS, CODECS, RECORDS, stored_codecs, unique
from compat_tests.fetch_log import DebugBroker, assert_incremental_session, fetch_lines
from kcompat.testing import TEST_DEFAULTS

pytestmark = pytest.mark.timeout(120)


def producer(bootstrap: str, **kw: Any) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=bootstrap, **kw)


def consume(bootstrap: str, topic: str, n: int, *, offset: int | None = None, partition: int = 0,
            timeout: float = 15) -> list[Any]:  # fmt: skip
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    tp = TopicPartition(topic, partition)
    c.assign([tp])
    if offset is not None:
        c.seek(tp, offset)
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        for msgs in c.poll(timeout_ms=500).values():
            got += msgs
    c.close()
    return got


@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume_every_codec(kcompat_session_broker: Any, codec: str) -> None:
    b = kcompat_session_broker
    topic = unique(f"kp-{codec}")
    p = producer(b.bootstrap, compression_type=None if codec == "none" else codec, linger_ms=50)
    futures = [p.send(topic, key=r.key, value=r.value, headers=list(r.headers), timestamp_ms=r.timestamp, partition=0)
               for r in RECORDS]  # fmt: skip
    metas = [f.get(timeout=30) for f in futures]
    p.close()
    assert [m.offset for m in metas] == list(range(len(RECORDS)))
    got = consume(b.bootstrap, topic, len(RECORDS))
    assert [(m.offset, m.key, m.value, tuple(m.headers), m.timestamp, m.timestamp_type) for m in got] == [
        (i, r.key, r.value, r.headers, r.timestamp, 0) for i, r in enumerate(RECORDS)
    ]
    # kafka-python leaves a batch uncompressed when the codec would not shrink it; the big record's shrinks.
    stored = stored_codecs(b.data_dir, topic)
    assert CODEC_IDS[codec] in stored and stored <= {0, CODEC_IDS[codec]}


def test_consume_from_earliest_latest_and_timestamp(kcompat_session_broker: Any) -> None:
    b = kcompat_session_broker
    topic = unique("kp-offsets")
    p = producer(b.bootstrap)
    for i in range(10):
        p.send(topic, value=b"%d" % i, timestamp_ms=BASE_TS + i * 1000, partition=0).get(timeout=30)
    p.close()
    c = KafkaConsumer(bootstrap_servers=b.bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    assert c.beginning_offsets([tp]) == {tp: 0}
    assert c.end_offsets([tp]) == {tp: 10}
    found = c.offsets_for_times({tp: BASE_TS + 4_500})[tp]
    assert (found.offset, found.timestamp) == (5, BASE_TS + 5_000)
    assert c.offsets_for_times({tp: BASE_TS + 60_000})[tp] is None
    c.close()
    assert [m.value for m in consume(b.bootstrap, topic, 5, offset=5)] == [b"5", b"6", b"7", b"8", b"9"]
    latest = KafkaConsumer(
        bootstrap_servers=b.bootstrap, enable_auto_commit=False, auto_offset_reset="latest"
    )
    latest.assign([tp])
    assert latest.position(tp) == 10
    latest.close()


def test_idempotent_producer_across_a_restart(kcompat_broker_factory: Any) -> None:
    b = kcompat_broker_factory()
    topic = unique("kp-idem")
    p = producer(b.bootstrap, enable_idempotence=True, acks="all", retries=10, request_timeout_ms=5000,
                 reconnect_backoff_ms=50)  # fmt: skip
    assert p.send(topic, value=b"one", partition=0).get(timeout=30).offset == 0
    b.restart()
    assert p.send(topic, value=b"two", partition=0).get(timeout=60).offset == 1
    p.close()
    got = consume(b.bootstrap, topic, 2)
    assert [(m.offset, m.value) for m in got] == [(0, b"one"), (1, b"two")]
    assert consume(b.bootstrap, topic, 3, timeout=2)[2:] == []


def test_admin_topics_configs_and_delete_records(kcompat_session_broker: Any) -> None:
    b = kcompat_session_broker
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    topic = unique("kp-admin")
    admin.create_topics(
        [NewTopic(topic, num_partitions=2, replication_factor=1, topic_configs={"retention.ms": "3600000"})]
    )
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    assert topic in admin.list_topics()
    (described,) = admin.describe_topics([topic])
    assert len(described["partitions"]) == 2 and not described["is_internal"]

    admin.alter_configs(
        [
            ConfigResource(
                ConfigResourceType.TOPIC,
                topic,
                configs={"retention.ms": "7200000", "cleanup.policy": "compact"},
            )
        ]
    )
    res = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
    values = res["topic"][topic]
    assert (values["retention.ms"]["value"], values["retention.ms"]["config_source"]) == (
        "7200000",
        "DYNAMIC_TOPIC_CONFIG",
    )
    assert values["cleanup.policy"]["value"] == "compact"
    assert values["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"

    admin.create_partitions({topic: NewPartitions(total_count=3)})
    (described,) = admin.describe_topics([topic])
    assert len(described["partitions"]) == 3

    p = producer(b.bootstrap)
    for i in range(6):  # keyed: the topic is compacted now, and Kafka refuses keyless records there (KIP-467)
        p.send(topic, key=b"k%d" % i, value=b"%d" % i, partition=0).get(timeout=30)
    p.close()
    tp = TopicPartition(topic, 0)
    admin.delete_records({tp: 4})
    c = KafkaConsumer(bootstrap_servers=b.bootstrap, enable_auto_commit=False)
    assert c.beginning_offsets([tp]) == {tp: 4}
    c.close()
    assert [m.value for m in consume(b.bootstrap, topic, 2)] == [b"4", b"5"]

    admin.delete_topics([topic])
    deadline = time.monotonic() + 10
    while topic in admin.list_topics() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert topic not in admin.list_topics()
    admin.close()


def test_unknown_topic_with_auto_create_off(kcompat_broker_factory: Any) -> None:
    b = kcompat_broker_factory(auto_create_topics_enable=False)
    p = producer(b.bootstrap, max_block_ms=2000)
    with pytest.raises(KafkaTimeoutError):
        p.send(unique("kp-missing"), value=b"x").get(timeout=10)
    p.close()
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    assert not [t for t in admin.list_topics() if t.startswith("kp-missing")]
    admin.close()


def test_record_over_message_max_bytes(kcompat_broker_factory: Any) -> None:
    b = kcompat_broker_factory(message_max_bytes=2000)
    topic = unique("kp-big")
    p = producer(b.bootstrap, max_request_size=1 << 20)
    with pytest.raises(MessageSizeTooLargeError):
        p.send(topic, value=b"x" * 10_000, partition=0).get(timeout=30)
    p.close()
    p = producer(b.bootstrap)  # a fresh batch: kafka-python may add later records to the failed one
    assert p.send(topic, value=b"small", partition=0).get(timeout=30).offset == 0
    p.close()


def test_consumer_uses_incremental_fetch_sessions(tmp_path: Path) -> None:
    """kafka-python enables fetch sessions by default: one full fetch of the 3 partitions, then
    incremental ones naming fewer; every record is read."""
    broker = DebugBroker(tmp_path / "data", tmp_path / "kcompat.log", dict(TEST_DEFAULTS))
    broker.start()
    try:
        topic, n = unique("kp-sessions"), 3
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic(topic, num_partitions=n, replication_factor=1)])
        admin.close()
        p = producer(broker.bootstrap)
        sent = {(part, i): b"p%d-%d" % (part, i) for part in range(n) for i in range(20)}
        for (part, _), value in sent.items():
            p.send(topic, value=value, partition=part)
        p.flush()
        p.close()
        c = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=200)
        c.assign([TopicPartition(topic, part) for part in range(n)])
        c.seek_to_beginning()
        got: list[Any] = []
        deadline = time.monotonic() + 30
        linger_until = None
        while time.monotonic() < (linger_until or deadline):
            for msgs in c.poll(timeout_ms=200).values():
                got += msgs
            if len(got) >= len(sent) and linger_until is None:
                linger_until = time.monotonic() + 1.5  # a few more (idle, incremental) fetches
        c.close()
        assert sorted((m.partition, m.offset, m.value) for m in got) == sorted(
            (part, i, v) for (part, i), v in sent.items()
        )
        assert_incremental_session(fetch_lines(broker), n)
    finally:
        broker.stop()
