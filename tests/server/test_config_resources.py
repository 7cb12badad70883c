"""Group configs (type 32), client-metrics (16) and broker loggers (8) on a single node:
DescribeConfigs, (Incremental)AlterConfigs and ListConfigResources as Kafka 4.3.1 answers them;
group configs survive a restart, and a consumer group (KIP-848) uses its overrides at once."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest

from kcompat.config.group_config import GROUP_CONFIGS
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.alter_configs import ALTER_CONFIGS
from kcompat.wire.messages.consumer_group_heartbeat import CONSUMER_GROUP_HEARTBEAT
from kcompat.wire.messages.describe_configs import DESCRIBE_CONFIGS
from kcompat.wire.messages.incremental_alter_configs import INCREMENTAL_ALTER_CONFIGS
from kcompat.wire.messages.list_config_resources import LIST_CONFIG_RESOURCES
from tests.conftest import HarnessFactory
from tests.server.broker_harness import BrokerHarness

GROUP, CLIENT_METRICS, BROKER_LOGGER = 32, 16, 8
SET, DELETE, APPEND = 0, 1, 2


@pytest.fixture
def h(broker_harness: HarnessFactory) -> BrokerHarness:
    return broker_harness()


def describe(h: BrokerHarness, rtype: int, name: str, keys: list[str] | None = None) -> Any:
    body = {"resources": [{"resource_type": rtype, "resource_name": name, "configuration_keys": keys}],
            "include_synonyms": True, "include_documentation": True}  # fmt: skip
    return h.call(DESCRIBE_CONFIGS, 4, body).results[0]


def incremental(h: BrokerHarness, rtype: int, name: str, *ops: tuple[str, int, str | None]) -> Any:
    configs = [{"name": n, "config_operation": op, "value": v} for n, op, v in ops]
    body = {
        "resources": [{"resource_type": rtype, "resource_name": name, "configs": configs}],
        "validate_only": False,
    }
    return h.call(INCREMENTAL_ALTER_CONFIGS, 1, body).responses[0]


def values(result: Any) -> dict[str, tuple[str | None, int]]:
    return {c.name: (c.value, c.config_source) for c in result.configs}


def test_describe_lists_every_group_config_with_kafkas_defaults(h: BrokerHarness) -> None:
    got = values(describe(h, GROUP, "g1"))
    assert len(got) == 17 and set(got) == set(GROUP_CONFIGS)
    assert got["consumer.session.timeout.ms"] == ("45000", 5)  # DEFAULT_CONFIG
    assert got["share.record.lock.duration.ms"] == ("30000", 5)
    assert got["share.auto.offset.reset"] == ("latest", 5)
    assert got["share.renew.acknowledge.enable"] == ("true", 5)


def test_alter_validate_persist_and_list(h: BrokerHarness) -> None:
    r = incremental(h, GROUP, "g1", ("consumer.session.timeout.ms", SET, "50000"),
                    ("share.auto.offset.reset", SET, "earliest"))  # fmt: skip
    assert r.error_code == 0, r.error_message
    d = describe(h, GROUP, "g1", ["consumer.session.timeout.ms"])
    [entry] = d.configs
    assert (entry.value, entry.config_source) == ("50000", 8)  # GROUP_CONFIG
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        ("consumer.session.timeout.ms", "50000", 8),
        ("group.consumer.session.timeout.ms", "45000", 5),
    ]
    assert h.broker.group_service.configs is not None
    assert dict(h.broker.group_service.configs.overrides("g1")) == {
        "consumer.session.timeout.ms": "50000",
        "share.auto.offset.reset": "earliest",
    }
    # Kafka's validation messages and codes.
    bad = {
        ("nope", "1"): (ErrorCode.INVALID_CONFIG, "Unknown group config name: nope"),
        ("consumer.session.timeout.ms", "1000"): (
            ErrorCode.INVALID_CONFIG,
            "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms",
        ),
        ("share.record.lock.duration.ms", "90000"): (
            ErrorCode.INVALID_CONFIG,
            "share.record.lock.duration.ms must be less than or equal to group.share.max.record.lock.duration.ms",
        ),
        ("consumer.heartbeat.interval.ms", "x"): (ErrorCode.INVALID_CONFIG, None),
    }
    for (name, value), (code, message) in bad.items():
        r = incremental(h, GROUP, "g1", (name, SET, value))
        assert r.error_code == code, (name, r.error_message)
        if message is not None:
            assert r.error_message == message
    assert (
        incremental(h, GROUP, "", ("consumer.session.timeout.ms", SET, "50000")).error_code
        == ErrorCode.INVALID_REQUEST
    )
    # AlterConfigs replaces the whole set.
    body = {"resources": [{"resource_type": GROUP, "resource_name": "g2", "configs": [
        {"name": "share.delivery.count.limit", "value": "7"}]}], "validate_only": False}  # fmt: skip
    assert h.call(ALTER_CONFIGS, 2, body).responses[0].error_code == 0
    listed = h.call(LIST_CONFIG_RESOURCES, 1, {"resource_types": [GROUP]})
    assert [(c.resource_name, c.resource_type) for c in listed.config_resources] == [("g1", 32), ("g2", 32)]
    h.restart()
    assert values(describe(h, GROUP, "g1", ["consumer.session.timeout.ms"])) == {
        "consumer.session.timeout.ms": ("50000", 8)
    }
    assert incremental(h, GROUP, "g1", ("consumer.session.timeout.ms", DELETE, None)).error_code == 0
    assert (
        values(describe(h, GROUP, "g1", ["consumer.session.timeout.ms"]))["consumer.session.timeout.ms"][1]
        == 5
    )


def test_consumer_group_uses_its_overrides_at_once(h: BrokerHarness) -> None:
    def heartbeat(member: str, epoch: int) -> Any:
        body = {"group_id": "cg", "member_id": member, "member_epoch": epoch, "rebalance_timeout_ms": 10_000,
                "subscribed_topic_names": ["t"], "server_assignor": None, "topic_partitions": []}  # fmt: skip
        return h.call(CONSUMER_GROUP_HEARTBEAT, 1, body)

    member = str(uuid.uuid4())
    first = heartbeat(member, 0)
    assert first.error_code == 0 and first.heartbeat_interval_ms == 5000
    assert incremental(h, GROUP, "cg", ("consumer.heartbeat.interval.ms", SET, "6000"),
                       ("consumer.session.timeout.ms", SET, "55000")).error_code == 0  # fmt: skip
    again = heartbeat(member, first.member_epoch)
    assert again.error_code == 0 and again.heartbeat_interval_ms == 6000  # the running group, next heartbeat
    g = h.broker.group_service.coordinator._store.groups["cg"]
    deadline = g.members[member].session_deadline
    assert deadline is not None and deadline - h.broker.now_ms() > 50_000


def test_client_metrics_resources(h: BrokerHarness) -> None:
    r = incremental(h, CLIENT_METRICS, "sub1", ("metrics", SET, "org.apache.kafka.producer."),
                    ("interval.ms", SET, "1000"), ("match", SET, "client_id=app.*"))  # fmt: skip
    assert r.error_code == 0, r.error_message
    assert values(describe(h, CLIENT_METRICS, "sub1")) == {
        "interval.ms": ("1000", 7), "match": ("client_id=app.*", 7), "metrics": ("org.apache.kafka.producer.", 7),
    }  # fmt: skip
    r = incremental(h, CLIENT_METRICS, "sub1", ("interval.ms", SET, "50"))
    assert r.error_code == ErrorCode.INVALID_REQUEST
    assert (
        r.error_message
        == "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 (1 hour)"
    )
    r = incremental(h, CLIENT_METRICS, "sub1", ("match", SET, "rack=x"))
    assert (r.error_code, r.error_message) == (
        ErrorCode.INVALID_CONFIG,
        "Illegal client matching pattern: rack=x",
    )
    assert incremental(h, CLIENT_METRICS, "sub1", ("bogus", SET, "1")).error_code == ErrorCode.INVALID_REQUEST
    assert (
        incremental(h, CLIENT_METRICS, "sub1", ("metrics", APPEND, "org.apache.kafka.consumer.")).error_code
        == 0
    )
    assert values(describe(h, CLIENT_METRICS, "sub1", ["metrics"]))["metrics"][0] == (
        "org.apache.kafka.producer.,org.apache.kafka.consumer."
    )
    listed = h.call(LIST_CONFIG_RESOURCES, 0, {})
    assert [c.resource_name for c in listed.config_resources] == ["sub1"]
    assert (
        h.call(LIST_CONFIG_RESOURCES, 1, {"resource_types": [99]}).error_code == ErrorCode.UNSUPPORTED_VERSION
    )


def test_broker_loggers_describe_and_alter_at_run_time(h: BrokerHarness) -> None:
    node = str(h.broker.config.node_id)
    target = logging.getLogger("kcompat.cluster")
    before = target.level
    try:
        got = values(describe(h, BROKER_LOGGER, node))
        assert got["root"][1] == 6 and "kcompat.cluster" in got  # DYNAMIC_BROKER_LOGGER_CONFIG
        assert incremental(h, BROKER_LOGGER, node, ("kcompat.cluster", SET, "DEBUG")).error_code == 0
        assert target.level == logging.DEBUG
        assert values(describe(h, BROKER_LOGGER, node, ["kcompat.cluster"]))["kcompat.cluster"][0] == "DEBUG"
        r = incremental(h, BROKER_LOGGER, node, ("kcompat.cluster", SET, "LOUD"))
        assert r.error_code == ErrorCode.INVALID_CONFIG and "not a supported log level" in r.error_message
        r = incremental(h, BROKER_LOGGER, node, ("no.such.logger", SET, "DEBUG"))
        assert (r.error_code, r.error_message) == (
            ErrorCode.INVALID_CONFIG,
            "Logger no.such.logger does not exist!",
        )
        assert (
            incremental(h, BROKER_LOGGER, node, ("root", DELETE, None)).error_code
            == ErrorCode.INVALID_REQUEST
        )
        assert (
            incremental(h, BROKER_LOGGER, "99", ("kcompat.cluster", SET, "INFO")).error_code
            == ErrorCode.INVALID_REQUEST
        )
        assert incremental(h, BROKER_LOGGER, node, ("kcompat.cluster", DELETE, None)).error_code == 0
        assert target.level == logging.NOTSET
    finally:
        target.setLevel(before)
