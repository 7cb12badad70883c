"""DescribeClientQuotas and AlterClientQuotas against a real Broker (requests encoded and decoded as
on the wire): Kafka's validation and codes, the table kept across a restart, and produce/fetch
throttling with throttle_time_ms and the connection's mute (on a clock the test moves)."""

from __future__ import annotations

from typing import Any

from kcompat.kafka_uuid import ZERO_UUID
from kcompat.security.authorizer import STANDARD_AUTHORIZER
from kcompat.server.network.connection import Client
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.alter_client_quotas import ALTER_CLIENT_QUOTAS
from kcompat.wire.messages.create_topics import CREATE_TOPICS
from kcompat.wire.messages.delete_topics import DELETE_TOPICS
from kcompat.wire.messages.describe_client_quotas import DESCRIBE_CLIENT_QUOTAS
from kcompat.wire.messages.fetch import FETCH
from kcompat.wire.messages.metadata import METADATA
from kcompat.wire.messages.produce import PRODUCE
from kcompat.wire.protocol import decode_response
from tests.server.broker_harness import BrokerHarness, HarnessFactory, batch, flatten
from tests.server.test_handlers_fetch import fetch_body
from tests.server.test_handlers_produce import create

ALICE = Client("c-1", "10.0.0.7", 50000, "PLAINTEXT", "SASL_PLAINTEXT", principal="User:alice")


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def alter(
    h: BrokerHarness, entity: dict[str, str | None], ops: dict[str, float | None], validate_only: bool = False
) -> Any:
    body = {
        "entries": [
            {
                "entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
                "ops": [{"key": k, "value": v or 0.0, "remove": v is None} for k, v in ops.items()],
            }
        ],
        "validate_only": validate_only,
    }
    return h.call(ALTER_CLIENT_QUOTAS, 1, body).entries[0]


def describe(h: BrokerHarness, *components: tuple[str, int, str | None], strict: bool = False) -> Any:
    body = {
        "components": [{"entity_type": t, "match_type": m, "match": x} for t, m, x in components],
        "strict": strict,
    }
    return h.call(DESCRIBE_CLIENT_QUOTAS, 1, body)


def table(resp: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    assert resp.error_code == 0, resp
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
        for entry in resp.entries
    }


def test_alter_describe_and_restart(broker_harness: HarnessFactory) -> None:
    h = broker_harness()
    assert (
        alter(h, {"user": "alice"}, {"producer_byte_rate": 1024.0, "request_percentage": 50.0}).error_code
        == 0
    )
    assert alter(h, {"user": "alice", "client-id": None}, {"consumer_byte_rate": 2048.0}).error_code == 0
    assert (
        alter(h, {"client-id": "app"}, {"controller_mutation_rate": 2.5}, validate_only=True).error_code == 0
    )
    assert table(describe(h)) == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0, "request_percentage": 50.0},
        (("client-id", None), ("user", "alice")): {"consumer_byte_rate": 2048.0},
    }
    assert list(table(describe(h, ("user", 0, "alice"), strict=True))) == [(("user", "alice"),)]
    assert list(table(describe(h, ("client-id", 1, None)))) == [(("client-id", None), ("user", "alice"))]
    h.restart()  # saved before the answer: the same table after a restart
    assert len(table(describe(h))) == 2
    assert (
        alter(h, {"user": "alice"}, {"producer_byte_rate": None, "request_percentage": None}).error_code == 0
    )
    assert list(table(describe(h))) == [(("client-id", None), ("user", "alice"))]


def test_bad_input_gets_kafkas_codes(broker_harness: HarnessFactory) -> None:
    h = broker_harness()
    unknown_type = alter(h, {"group": "g"}, {"producer_byte_rate": 1.0})
    assert (unknown_type.error_code, unknown_type.error_message) == (
        ErrorCode.INVALID_REQUEST,
        "Unhandled client quota entity type: group",
    )
    negative = alter(h, {"user": "a"}, {"producer_byte_rate": -1.0})
    assert (negative.error_code, negative.error_message) == (
        ErrorCode.INVALID_REQUEST,
        "Quota producer_byte_rate must be greater than 0",
    )
    unknown_key = alter(h, {"user": "a"}, {"producer_bytes": 5.0})
    assert (unknown_key.error_code, unknown_key.error_message) == (
        ErrorCode.INVALID_REQUEST,
        "Invalid configuration key producer_bytes",
    )
    assert table(describe(h)) == {}
    bad = describe(h, ("group", 2, None))
    assert bad.error_code == ErrorCode.UNSUPPORTED_VERSION and bad.entries is None
    bad = describe(h, ("user", 0, None))
    assert bad.error_code == ErrorCode.INVALID_REQUEST


def call_as(h: BrokerHarness, client: Client, api: Any, version: int, body: Any) -> Any:
    frame = h.frame(api, version, body)
    chunks = h.run(h.broker.handle(memoryview(frame)[4:], client))
    return decode_response(api.key, version, flatten(chunks)[4:])[1]


def produce(h: BrokerHarness, client: Client, size: int) -> Any:
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch(b"x" * size)}]}]}  # fmt: skip
    return call_as(h, client, PRODUCE, 9, body)


def test_produce_over_quota_is_throttled_and_muted(broker_harness: HarnessFactory) -> None:
    clock = Clock()
    h = broker_harness(clock=clock)
    create(h, "t")
    assert produce(h, ALICE, 50_000).throttle_time_ms == 0  # no quota: never throttled
    assert not h.broker.quotas.mutes
    alter(h, {"user": "alice"}, {"producer_byte_rate": 10_000.0})
    # 50 kB within 10 windows of 1 s at 10 kB/s: within the quota
    assert produce(h, ALICE, 50_000).throttle_time_ms == 0
    clock.now += 0.01
    resp = produce(h, ALICE, 100_000)  # ~150 kB over 10 s: 15 kB/s, 5 s of throttle
    assert resp.responses[0].partition_responses[0].error_code == 0  # appended all the same
    assert 4_500 < resp.throttle_time_ms < 5_500
    assert h.broker.quotas.mutes[ALICE.connection_id] == resp.throttle_time_ms / 1000
    other = Client("c-2", "10.0.0.8", 50001, "PLAINTEXT", "SASL_PLAINTEXT", principal="User:bob")
    assert produce(h, other, 200_000).throttle_time_ms == 0  # bob has no quota


def test_request_percentage_throttles_and_mutes(broker_harness: HarnessFactory) -> None:
    """request_percentage charges each request's handler time; over it, throttle_time_ms (at most
    one window, ClientRequestQuotaManager's bound) and the connection muted; others untouched."""
    clock = Clock()
    h = broker_harness(clock=clock)
    create(h, "t")
    body = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    assert call_as(h, ALICE, METADATA, 12, body).throttle_time_ms == 0  # no quota: never throttled
    # A billionth of a thread: any request goes over it.
    alter(h, {"user": "alice"}, {"request_percentage": 1e-9})
    first = call_as(h, ALICE, METADATA, 12, body)
    assert 0 < first.throttle_time_ms <= 1000  # quota.window.size.seconds is 1
    assert h.broker.quotas.mutes[ALICE.connection_id] == first.throttle_time_ms / 1000
    assert produce(h, ALICE, 100).throttle_time_ms > 0  # Produce is charged too
    other = Client("c-2", "10.0.0.8", 50001, "PLAINTEXT", "SASL_PLAINTEXT", principal="User:bob")
    assert call_as(h, other, METADATA, 12, body).throttle_time_ms == 0  # bob has no quota
    assert other.connection_id not in h.broker.quotas.mutes
    alter(h, {"user": "alice"}, {"request_percentage": None})
    h.broker.quotas.mutes.clear()
    assert call_as(h, ALICE, METADATA, 12, body).throttle_time_ms == 0  # removed: free again


def test_fetch_over_quota_answers_empty(broker_harness: HarnessFactory) -> None:
    clock = Clock()
    h = broker_harness(clock=clock)
    create(h, "t")
    for _ in range(4):
        produce(h, ALICE, 30_000)
    alter(h, {"client-id": None}, {"consumer_byte_rate": 10_000.0})
    first = call_as(h, ALICE, FETCH, 12, fetch_body([("t", 0, 0)], partition_max=200_000))
    data = first.responses[0].partitions[0].records
    assert first.throttle_time_ms == 0 and 60_000 < len(data) <= 100_000  # quota x 10 windows at most
    clock.now += 0.01
    second = call_as(h, ALICE, FETCH, 12, fetch_body([("t", 0, 2)], partition_max=200_000))
    assert second.throttle_time_ms > 0
    empty = second.responses[0].partitions[0].records
    assert (
        empty is not None and len(empty) == 0
    )  # throttled: nothing sent (not null: librdkafka), nothing counted


def create_topics(h: BrokerHarness, version: int, *topics: tuple[str, int]) -> Any:
    body = {
        "topics": [
            {"name": n, "num_partitions": p, "replication_factor": 1, "assignments": [], "configs": []}
            for n, p in topics
        ],
        "timeout_ms": 1000,
        "validate_only": False,
    }
    return h.call(CREATE_TOPICS, version, body)


def test_controller_mutation_rate_on_a_single_node(broker_harness: HarnessFactory) -> None:
    """KIP-599 as Kafka's ControllerMutationQuota: 2 partitions/s, a bucket of 11 x 1 s x 2 = 22.
    Strict (CreateTopics v6+, DeleteTopics v5+) refuses a topic once the bucket is below zero,
    with the time it takes to refill; permissive (older versions) applies and throttles."""
    clock = Clock()
    h = broker_harness(clock=clock)
    alter(h, {"client-id": "test"}, {"controller_mutation_rate": 2.0})
    resp = create_topics(h, 7, ("a", 20), ("b", 5), ("c", 1))
    codes = [(t.name, t.error_code, t.error_message) for t in resp.topics]
    assert codes[:2] == [("a", 0, None), ("b", 0, None)]  # 22 -> 2 -> -3: taken while not below zero
    assert codes[2] == ("c", ErrorCode.THROTTLING_QUOTA_EXCEEDED, "The throttling quota has been exceeded.")
    assert resp.throttle_time_ms == 1500  # 3 tokens at 2/s
    assert h.broker.quotas.mutes == {}  # no connection here (the harness's client is None)
    clock.now += 2.0  # -3 + 4 = 1
    assert create_topics(h, 7, ("c", 1)).topics[0].error_code == 0
    old = create_topics(h, 5, ("d", 4))  # permissive: made, then throttled
    assert old.topics[0].error_code == 0 and old.throttle_time_ms == 2000
    body = {"topics": [{"name": "a", "topic_id": ZERO_UUID}], "timeout_ms": 1000}
    deleted = h.call(DELETE_TOPICS, 6, body)
    assert deleted.responses[0].error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert h.broker.metadata.topic("a") is not None  # refused: still there


def test_acls_guard_quotas(broker_harness: HarnessFactory) -> None:
    """Describe needs DESCRIBE_CONFIGS on the cluster, Alter ALTER_CONFIGS, as in Kafka."""
    h = broker_harness({"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS"})
    assert alter(h, {"user": "bob"}, {"producer_byte_rate": 10.0}).error_code == 0  # a super user
    body = {
        "entries": [
            {
                "entity": [{"entity_type": "user", "entity_name": "bob"}],
                "ops": [{"key": "producer_byte_rate", "value": 20.0, "remove": False}],
            }
        ],
        "validate_only": False,
    }
    refused = call_as(h, ALICE, ALTER_CLIENT_QUOTAS, 1, body)
    assert refused.entries[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    described = call_as(h, ALICE, DESCRIBE_CLIENT_QUOTAS, 1, {"components": [], "strict": False})
    assert described.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and described.entries is None
    assert table(describe(h)) == {(("user", "bob"),): {"producer_byte_rate": 10.0}}  # unchanged
