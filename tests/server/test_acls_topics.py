"""The ACL checks on topics that TxnOffsetCommit, the KIP-848 group APIs, OffsetFetch v1-7 and
CreateTopics make as Kafka 4.3's KafkaApis and controller do, against a real Broker (requests
encoded and decoded as on the wire), as a super user and as alice."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kcompat.security.authorizer import STANDARD_AUTHORIZER
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.consumer_group_describe import CONSUMER_GROUP_DESCRIBE
from kcompat.wire.messages.consumer_group_heartbeat import CONSUMER_GROUP_HEARTBEAT
from kcompat.wire.messages.create_acls import CREATE_ACLS
from kcompat.wire.messages.create_topics import CREATE_TOPICS
from kcompat.wire.messages.offset_fetch import OFFSET_FETCH
from kcompat.wire.messages.txn_offset_commit import TXN_OFFSET_COMMIT
from tests.server.broker_harness import BrokerHarness, HarnessFactory
from tests.server.test_acls import ALICE, DESCRIBE, GROUP, PREFIXED, READ, WRITE, as_client, creation

TRANSACTIONAL_ID, DESCRIBE_CONFIGS, CREATE = 5, 10, 5
TOPIC_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
GROUP_DENIED = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)


@pytest.fixture
def h(broker_harness: HarnessFactory) -> BrokerHarness:
    harness = broker_harness(
        {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS;User:root"},
    )
    for name in ("orders", "audit"):
        harness.call(CREATE_TOPICS, 7, {"topics": [{"name": name, "num_partitions": 2, "replication_factor": -1}],
                                        "timeout_ms": 1000})  # fmt: skip
    return harness


def allow(h: BrokerHarness, *creations: dict[str, Any]) -> None:
    assert all(r.error_code == 0 for r in h.call(CREATE_ACLS, 3, {"creations": list(creations)}).results)


def test_txn_offset_commit_needs_read_on_each_topic(h: BrokerHarness) -> None:
    def commit() -> dict[str, list[int]]:
        body = {"transactional_id": "tx", "group_id": "g1", "producer_id": 7, "producer_epoch": 0,
                "generation_id": -1, "member_id": "", "group_instance_id": None,
                "topics": [{"name": t, "partitions": [{"partition_index": p, "committed_offset": 5,
                                                       "committed_leader_epoch": -1, "committed_metadata": ""}
                                                      for p in (0, 1)]} for t in ("orders", "audit")]}  # fmt: skip
        resp = as_client(h, ALICE, TXN_OFFSET_COMMIT, 3, body)
        return {t.name: [p.error_code for p in t.partitions] for t in resp.topics}

    tx_denied = int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    assert commit() == {"orders": [tx_denied] * 2, "audit": [tx_denied] * 2}
    allow(h, creation("tx", WRITE, rt=TRANSACTIONAL_ID))
    assert commit() == {"orders": [GROUP_DENIED] * 2, "audit": [GROUP_DENIED] * 2}
    allow(h, creation("g1", READ, rt=GROUP))
    # no READ on either topic: refused by the broker, the coordinator is not asked
    assert commit() == {"orders": [TOPIC_DENIED] * 2, "audit": [TOPIC_DENIED] * 2}
    allow(h, creation("orders", READ))
    # orders reaches the transaction coordinator (which knows no producer 7); audit stays refused
    no_mapping = int(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    assert commit() == {"orders": [no_mapping] * 2, "audit": [TOPIC_DENIED] * 2}


def heartbeat(h: BrokerHarness, client: Any, topics: list[str]) -> Any:
    body = {"group_id": "g1", "member_id": str(uuid.uuid4()), "member_epoch": 0, "rebalance_timeout_ms": 10_000,
            "subscribed_topic_names": topics, "server_assignor": None, "topic_partitions": []}  # fmt: skip
    if client is None:
        return h.call(CONSUMER_GROUP_HEARTBEAT, 1, body)
    return as_client(h, client, CONSUMER_GROUP_HEARTBEAT, 1, body)


def test_consumer_group_heartbeat_and_describe_hide_refused_topics(h: BrokerHarness) -> None:
    assert heartbeat(h, ALICE, ["orders"]).error_code == GROUP_DENIED
    allow(h, creation("g1", READ, rt=GROUP), creation("audit", DESCRIBE))
    assert heartbeat(h, ALICE, ["orders", "audit"]).error_code == TOPIC_DENIED  # orders is not describable
    assert heartbeat(h, ALICE, ["audit"]).error_code == 0
    assert heartbeat(h, None, ["orders"]).error_code == 0  # a super user's member is assigned orders

    def describe() -> Any:
        body = {"group_ids": ["g1"], "include_authorized_operations": False}
        (g,) = as_client(h, ALICE, CONSUMER_GROUP_DESCRIBE, 1, body).groups
        return g

    g = describe()
    assert (g.error_code, g.members) == (TOPIC_DENIED, [])
    assert (
        g.error_message == "The group has described topic(s) that the client is not authorized to describe."
    )
    allow(h, creation("orders", DESCRIBE))
    g = describe()
    assert g.error_code == 0 and len(g.members) == 2
    assert {tp.topic_name for m in g.members for tp in m.target_assignment.topic_partitions} == {
        "orders",
        "audit",
    }


@pytest.mark.parametrize("version", [1, 2, 7])
def test_offset_fetch_refused_group_single_group_versions(h: BrokerHarness, version: int) -> None:
    body = {
        "group_id": "g1",
        "topics": [{"name": "orders", "partition_indexes": [0, 1]}],
        "require_stable": False,
    }
    resp = as_client(h, ALICE, OFFSET_FETCH, version, body)
    if version < 2:  # no top-level error code: each requested partition carries it
        (t,) = resp.topics
        assert [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions] == [
            (0, -1, GROUP_DENIED),
            (1, -1, GROUP_DENIED),
        ]
    else:
        assert (resp.error_code, resp.topics) == (GROUP_DENIED, [])
    allow(h, creation("g", DESCRIBE, rt=GROUP, pattern=PREFIXED), creation("orders", DESCRIBE))
    resp = as_client(h, ALICE, OFFSET_FETCH, version, body)
    assert [p.error_code for t in resp.topics for p in t.partitions] == [0, 0]
    assert [p.committed_offset for t in resp.topics for p in t.partitions] == [-1, -1]


def test_create_topics_hides_configs_without_describe_configs(h: BrokerHarness) -> None:
    def create(name: str) -> Any:
        body = {"topics": [{"name": name, "num_partitions": 3, "replication_factor": -1,
                            "configs": [{"name": "retention.ms", "value": "60000"}]}], "timeout_ms": 1000}  # fmt: skip
        (t,) = as_client(h, ALICE, CREATE_TOPICS, 7, body).topics
        return t

    allow(h, creation("new-", CREATE, pattern=PREFIXED))
    t = create("new-a")
    assert t.error_code == 0 and t.topic_id != uuid.UUID(int=0)
    assert (t.topic_config_error_code, t.num_partitions, t.replication_factor, t.configs) == (
        TOPIC_DENIED,
        -1,
        -1,
        [],
    )
    allow(h, creation("new-", DESCRIBE_CONFIGS, pattern=PREFIXED))
    t = create("new-b")
    assert (t.error_code, t.topic_config_error_code, t.num_partitions, t.replication_factor) == (0, 0, 3, 1)
    assert {c.name: c.value for c in t.configs}["retention.ms"] == "60000"


def test_a_regex_resolves_to_the_topics_the_principal_may_describe(h: BrokerHarness) -> None:
    allow(h, creation("g1", READ, rt=GROUP), creation("audit", DESCRIBE))
    member = str(uuid.uuid4())

    def beat(epoch: int) -> Any:
        body = {"group_id": "g1", "member_id": member, "member_epoch": epoch, "rebalance_timeout_ms": 10_000,
                "subscribed_topic_names": None, "subscribed_topic_regex": "orders|audit", "server_assignor": None,
                "topic_partitions": []}  # fmt: skip
        r = as_client(h, ALICE, CONSUMER_GROUP_HEARTBEAT, 1, body)
        assert r.error_code == 0
        return r.member_epoch

    def target() -> set[str]:
        (g,) = h.call(
            CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": ["g1"], "include_authorized_operations": False}
        ).groups
        return {tp.topic_name for m in g.members for tp in m.target_assignment.topic_partitions}

    epoch = beat(0)
    assert target() == {"audit"}  # orders matches, but alice may not describe it
    allow(h, creation("orders", DESCRIBE))
    beat(epoch)
    assert target() == {"orders", "audit"}
