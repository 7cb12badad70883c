"""GetTelemetrySubscriptions and PushTelemetry (KIP-714) on a single node, as Kafka 4.3.1's
ClientMetricsManager answers them: subscriptions from the client-metrics config resources, a
client matched by its attributes, Kafka's error codes for pushes it refuses, and the values
accepted pushes carry kept per client for /metrics."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from prometheus_client.core import Metric

from kcompat.kafka_uuid import ZERO_UUID
from kcompat.server.admin.telemetry_metrics import telemetry_metrics
from kcompat.server.registry import registration
from kcompat.telemetry.client_metrics import DEFAULT_INTERVAL_MS
from kcompat.wire.compression import compress
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.get_telemetry_subscriptions import GET_TELEMETRY_SUBSCRIPTIONS
from kcompat.wire.messages.incremental_alter_configs import INCREMENTAL_ALTER_CONFIGS
from kcompat.wire.messages.push_telemetry import PUSH_TELEMETRY
from tests.conftest import HarnessFactory
from tests.server.broker_harness import BrokerHarness
from tests.telemetry.otlp_encode import metric, metrics_data, number_point

CLIENT_METRICS, SET, DELETE = 16, 0, 1
GZIP, ZSTD = 1, 4
PAYLOAD = metrics_data(
    metric("org.apache.kafka.producer.record.send.rate", "gauge", number_point(12.5)),
    metric("org.apache.kafka.producer.topic.record.send.total", "sum", number_point(40, {"topic": "t"})),
)


class Clock:
    """Whole milliseconds (half a millisecond on top, so that the broker's int(s * 1000) is exact)."""

    def __init__(self) -> None:
        self.ms = 1_700_000_000_000

    def __call__(self) -> float:
        return (self.ms + 0.5) / 1000

    def advance(self, ms: int) -> None:
        self.ms += ms


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def h(broker_harness: HarnessFactory, clock: Clock) -> BrokerHarness:
    return broker_harness({"telemetry.max.bytes": "2000"}, clock=clock)


def subscribe(h: BrokerHarness, name: str, **configs: str | None) -> Any:
    ops = [
        {"name": k.replace("_", "."), "config_operation": SET if v is not None else DELETE, "value": v}
        for k, v in configs.items()
    ]
    body = {"resources": [{"resource_type": CLIENT_METRICS, "resource_name": name, "configs": ops}],
            "validate_only": False}  # fmt: skip
    return h.call(INCREMENTAL_ALTER_CONFIGS, 1, body).responses[0]


def get(h: BrokerHarness, instance: uuid.UUID = ZERO_UUID) -> Any:
    return h.call(GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": instance})


def push(h: BrokerHarness, sub: Any, payload: bytes = PAYLOAD, codec: int = ZSTD, **kw: Any) -> int:
    body = {"client_instance_id": sub.client_instance_id, "subscription_id": sub.subscription_id,
            "terminating": False, "compression_type": codec, "metrics": compress(codec, payload)} | kw  # fmt: skip
    return int(h.call(PUSH_TELEMETRY, 0, body).error_code)


def scrape(h: BrokerHarness) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    families: list[Metric] = list(telemetry_metrics(h.broker.telemetry, h.broker.now_ms()))
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}


def test_advertised_always_and_empty_subscription_without_one(h: BrokerHarness) -> None:
    for key in (71, 72):
        reg = registration(key)
        assert reg is not None and (reg.min_version, reg.max_version) == (0, 0)
    r = get(h)
    assert r.error_code == 0 and r.client_instance_id != ZERO_UUID
    assert r.requested_metrics == [] and r.push_interval_ms == DEFAULT_INTERVAL_MS
    assert r.accepted_compression_types == [4, 3, 1, 2]  # Kafka's: zstd, lz4, gzip, snappy
    assert (r.telemetry_max_bytes, r.delta_temporality) == (2000, True)
    # Asking again before the interval is THROTTLING_QUOTA_EXCEEDED; after it, the same subscription.
    assert get(h, r.client_instance_id).error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    h.clock.advance(DEFAULT_INTERVAL_MS)
    again = get(h, r.client_instance_id)
    assert (again.error_code, again.subscription_id) == (0, r.subscription_id)


def test_subscription_matched_pushed_and_shown(h: BrokerHarness, clock: Clock) -> None:
    assert subscribe(h, "mine", metrics="org.apache.kafka.producer.", interval_ms="1000",
                     match="client_id=te.*").error_code == 0  # fmt: skip
    assert subscribe(h, "other", metrics="*", match="client_id=nobody").error_code == 0
    r = get(h)
    assert (r.requested_metrics, r.push_interval_ms) == (["org.apache.kafka.producer."], 1000)
    # The first push may come before the interval (clients start at 0.5-1.5 x it).
    clock.advance(500)
    assert push(h, r) == 0
    got = scrape(h)
    who = (("client_id", "test"), ("client_instance_id", str(r.client_instance_id)),
           ("client_software_name", ""), ("client_software_version", ""))  # fmt: skip
    assert got[("kcompat_client_telemetry_pushes_total", who)] == 1
    rate = (
        *who,
        ("attributes", ""),
        ("kind", "gauge"),
        ("metric", "org.apache.kafka.producer.record.send.rate"),
    )
    total = (*who, ("attributes", "topic=t"), ("kind", "sum"),
             ("metric", "org.apache.kafka.producer.topic.record.send.total"))  # fmt: skip
    assert got[("kcompat_client_telemetry_value", tuple(sorted(rate)))] == 12.5
    assert got[("kcompat_client_telemetry_value", tuple(sorted(total)))] == 40
    assert got[("kafka_server_client_metrics_instance_count", ())] == 1
    # The next push too early: THROTTLING_QUOTA_EXCEEDED; on time (gzip now): the last value replaced.
    clock.advance(999)
    assert push(h, r) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert scrape(h)[("kafka_server_client_metrics_throttle_total", ())] == 1
    clock.advance(1)
    newer = metrics_data(metric("org.apache.kafka.producer.record.send.rate", "gauge", number_point(3.0)))
    assert push(h, r, newer, GZIP) == 0
    assert scrape(h)[("kcompat_client_telemetry_value", tuple(sorted(rate)))] == 3.0
    # A subscription change: the client's next request gets the new one (a new subscription id),
    # and a push naming the old id is UNKNOWN_SUBSCRIPTION_ID.
    assert subscribe(h, "mine", metrics="org.apache.kafka.", interval_ms="2000").error_code == 0
    clock.advance(1000)
    assert push(h, r) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    changed = get(h, r.client_instance_id)
    assert changed.error_code == 0 and changed.subscription_id != r.subscription_id
    assert (changed.requested_metrics, changed.push_interval_ms) == (["org.apache.kafka."], 2000)
    # Instances and what they pushed expire max(60 s, 3 x interval) after their last request.
    clock.advance(59_999)
    assert scrape(h)[("kafka_server_client_metrics_instance_count", ())] == 1
    clock.advance(1)
    got = scrape(h)
    assert got[("kafka_server_client_metrics_instance_count", ())] == 0
    assert not [k for k in got if k[0] == "kcompat_client_telemetry_value"]


def test_refused_pushes_get_kafkas_errors(h: BrokerHarness, clock: Clock) -> None:
    assert subscribe(h, "all", metrics="*", interval_ms="100").error_code == 0
    r = get(h)
    assert r.requested_metrics == ["*"]

    def step() -> None:
        clock.advance(100)

    assert push(h, r, subscription_id=r.subscription_id + 1) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    step()
    big = metrics_data(*(metric(f"m{i}", "gauge", number_point(float(i))) for i in range(200)))
    assert push(h, r, codec=0, metrics=big) == ErrorCode.TELEMETRY_TOO_LARGE  # over telemetry.max.bytes
    step()
    assert push(h, r, compression_type=7) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    step()
    assert push(h, r, codec=0, metrics=b"\x0a\xff\xff\x03junk") == ErrorCode.INVALID_RECORD
    step()
    assert push(h, r, codec=GZIP, metrics=b"not gzip") == ErrorCode.INVALID_RECORD
    assert scrape(h)[("kcompat_client_telemetry_invalid_payloads_total", ())] == 2
    for reserved in (ZERO_UUID, uuid.UUID(int=1)):
        assert push(h, r, client_instance_id=reserved) == ErrorCode.INVALID_REQUEST
    # A terminating push is taken even early; nothing after it is.
    assert push(h, r, terminating=True) == 0
    step()
    assert push(h, r) == ErrorCode.INVALID_REQUEST
    # A push from an instance the broker never saw: a new instance, whose id the client cannot know.
    stranger = type("Sub", (), {"client_instance_id": uuid.uuid4(), "subscription_id": r.subscription_id})
    assert push(h, stranger) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    assert scrape(h)[("kafka_server_client_metrics_unknown_subscription_request_total", ())] == 2


def test_match_on_software_name_and_subscription_removed(h: BrokerHarness) -> None:
    assert subscribe(h, "java", metrics="org.apache.kafka.", match="client_software_name=apache-kafka-java")
    r = get(h)  # the harness sends no ApiVersions: no software name, no match
    assert r.requested_metrics == []
    mgr = h.broker.telemetry
    mgr.client_information("", "apache-kafka-java", "4.3.1")  # what ApiVersions v3+ records
    mgr.connection_closed("")  # ... on a new connection: the instance starts afresh
    mgr.client_information("", "apache-kafka-java", "4.3.1")
    assert get(h, r.client_instance_id).requested_metrics == ["org.apache.kafka."]
    # Every config of the subscription deleted: it is gone, the client gets the empty one again.
    assert subscribe(h, "java", metrics=None, match=None).error_code == 0
    h.clock.advance(DEFAULT_INTERVAL_MS)
    assert get(h, r.client_instance_id).requested_metrics == []
