"""aiokafka (hand-written v0-era protocol classes, ApiVersions v0) against `kcompat serve`: produce/
consume with every codec, offsets by time, idempotence across a restart, admin, error cases."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import MessageSizeTooLargeError, UnknownTopicOrPartitionError

from compat_tests.client_data import BASE_TS, CODEC_IDS, CODECS, RECORDS, stored_codecs, unique

pytestmark = pytest.mark.timeout(120)


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


async def consume(
    bootstrap: str, topic: str, n: int, *, offset: int | None = None, wait_s: float = 10
) -> list[Any]:
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    await c.start()
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        if offset is not None:
            c.seek(tp, offset)
        got: list[Any] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while len(got) < n and loop.time() < deadline:
            for msgs in (await c.getmany(timeout_ms=300)).values():
                got += msgs
        return got
    finally:
        await c.stop()


@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume_every_codec(kcompat_session_broker: Any, codec: str) -> None:
    b = kcompat_session_broker
    topic = unique(f"ak-{codec}")

    async def scenario() -> tuple[list[Any], list[Any]]:
        p = AIOKafkaProducer(
            bootstrap_servers=b.bootstrap, compression_type=None if codec == "none" else codec, linger_ms=20
        )
        await p.start()
        try:
            futures = [await p.send(topic, key=r.key, value=r.value, headers=list(r.headers), timestamp_ms=r.timestamp, partition=0)
                       for r in RECORDS]  # fmt: skip
            metas = [await f for f in futures]
        finally:
            await p.stop()
        return metas, await consume(b.bootstrap, topic, len(RECORDS))

    metas, got = run(scenario())
    assert [m.offset for m in metas] == list(range(len(RECORDS)))
    assert [(m.offset, m.key, m.value, tuple(m.headers), m.timestamp) for m in got] == [
        (i, r.key, r.value, r.headers, r.timestamp) for i, r in enumerate(RECORDS)
    ]
    stored = stored_codecs(b.data_dir, topic)
    assert CODEC_IDS[codec] in stored and stored <= {0, CODEC_IDS[codec]}


def test_consume_from_earliest_latest_and_timestamp(kcompat_session_broker: Any) -> None:
    b = kcompat_session_broker
    topic = unique("ak-offsets")

    async def scenario() -> None:
        p = AIOKafkaProducer(bootstrap_servers=b.bootstrap)
        await p.start()
        for i in range(10):
            await p.send_and_wait(topic, value=b"%d" % i, timestamp_ms=BASE_TS + i * 1000, partition=0)
        await p.stop()
        c = AIOKafkaConsumer(
            bootstrap_servers=b.bootstrap, enable_auto_commit=False, auto_offset_reset="latest"
        )
        await c.start()
        try:
            tp = TopicPartition(topic, 0)
            assert await c.beginning_offsets([tp]) == {tp: 0}
            assert await c.end_offsets([tp]) == {tp: 10}
            found = (await c.offsets_for_times({tp: BASE_TS + 4_500}))[tp]
            assert (found.offset, found.timestamp) == (5, BASE_TS + 5_000)
            assert (await c.offsets_for_times({tp: BASE_TS + 60_000}))[tp] is None
            c.assign([tp])
            assert await c.position(tp) == 10
        finally:
            await c.stop()
        assert [m.value for m in await consume(b.bootstrap, topic, 5, offset=5)] == [
            b"%d" % i for i in range(5, 10)
        ]

    run(scenario())


def test_idempotent_producer_across_a_restart(kcompat_broker_factory: Any) -> None:
    b = kcompat_broker_factory()
    topic = unique("ak-idem")

    async def scenario() -> list[Any]:
        p = AIOKafkaProducer(
            bootstrap_servers=b.bootstrap,
            enable_idempotence=True,
            retry_backoff_ms=50,
            request_timeout_ms=10000,
        )
        await p.start()
        try:
            first = await p.send_and_wait(topic, value=b"one", partition=0)
            await asyncio.to_thread(b.restart)
            second = await p.send_and_wait(topic, value=b"two", partition=0)
        finally:
            await p.stop()
        assert (first.offset, second.offset) == (0, 1)
        return await consume(b.bootstrap, topic, 3, wait_s=3)

    got = run(scenario())
    assert [(m.offset, m.value) for m in got] == [(0, b"one"), (1, b"two")]


def test_admin_topics_configs_and_delete_records(kcompat_session_broker: Any) -> None:
    b = kcompat_session_broker
    topic = unique("ak-admin")

    async def scenario() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=b.bootstrap)
        await admin.start()
        try:
            resp = await admin.create_topics(
                [NewTopic(topic, 2, 1, topic_configs={"retention.ms": "3600000"})]
            )
            assert resp.topic_errors[0][1] == 0
            await admin.alter_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": "7200000"})]
            )
            (described,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
            entries = {e[0]: e[1] for e in described.resources[0][4]}
            assert entries["retention.ms"] == "7200000" and entries["cleanup.policy"] == "delete"

            p = AIOKafkaProducer(bootstrap_servers=b.bootstrap)
            await p.start()
            for i in range(6):
                await p.send_and_wait(topic, value=b"%d" % i, partition=0)
            await p.stop()
            tp = TopicPartition(topic, 0)
            assert await admin.delete_records({tp: RecordsToDelete(before_offset=4)}) == {tp: 4}
            assert [m.value for m in await consume(b.bootstrap, topic, 2)] == [b"4", b"5"]
            await admin.delete_topics([topic])
            assert topic not in await admin.list_topics()
        finally:
            await admin.close()

    run(scenario())


def test_unknown_topic_with_auto_create_off(kcompat_broker_factory: Any) -> None:
    b = kcompat_broker_factory(auto_create_topics_enable=False)

    async def scenario() -> None:
        p = AIOKafkaProducer(bootstrap_servers=b.bootstrap, request_timeout_ms=2000)
        await p.start()
        try:
            with pytest.raises(UnknownTopicOrPartitionError):
                await p.send_and_wait(unique("ak-missing"), value=b"x")
        finally:
            await p.stop()

    run(scenario())


def test_record_over_message_max_bytes(kcompat_broker_factory: Any) -> None:
    b = kcompat_broker_factory(message_max_bytes=2000)
    topic = unique("ak-big")

    async def scenario() -> None:
        p = AIOKafkaProducer(bootstrap_servers=b.bootstrap, max_request_size=1 << 20)
        await p.start()
        try:
            with pytest.raises(MessageSizeTooLargeError):
                await p.send_and_wait(topic, value=b"x" * 10_000, partition=0)
            assert (await p.send_and_wait(topic, value=b"small", partition=0)).offset == 0
        finally:
            await p.stop()

    run(scenario())


def test_transactional_offsets_into_a_group_with_a_live_member(kcompat_session_broker: Any) -> None:
    """faust's exactly_once: aiokafka commits with TxnOffsetCommit v0 (a bare group id, no member or
    generation) into the group its own consumer is a live member of; Kafka takes it."""
    b = kcompat_session_broker
    topic, group = unique("ak-txn-in"), unique("ak-txn-group")

    async def scenario() -> tuple[int | None, int]:
        p = AIOKafkaProducer(bootstrap_servers=b.bootstrap, transactional_id=unique("ak-txn"))
        await p.start()
        c = AIOKafkaConsumer(
            topic, bootstrap_servers=b.bootstrap, group_id=group, enable_auto_commit=False,
            auto_offset_reset="earliest", isolation_level="read_committed",
        )  # fmt: skip
        try:
            async with p.transaction():
                for i in range(3):
                    await p.send(topic, value=b"in-%d" % i, partition=0)
            await c.start()
            got: list[Any] = []
            while len(got) < 3:
                for msgs in (await c.getmany(timeout_ms=300)).values():
                    got += msgs
            tp = TopicPartition(topic, 0)
            async with p.transaction():
                await p.send(topic, value=b"out", partition=0)
                await p.send_offsets_to_transaction({tp: got[-1].offset + 1}, group)
            return await c.committed(tp), len(c.assignment())
        finally:
            await c.stop()
            await p.stop()

    committed, assigned = run(scenario())
    assert assigned == 1  # the member was live in the group while the commit went in
    assert committed == 3
