"""CreateAcls, DescribeAcls, DeleteAcls and the checks of the APIs, against a real Broker
(requests encoded and decoded as on the wire), as an admin (a super user) and as alice."""

from __future__ import annotations

from typing import Any

import pytest

from kcompat.security.authorizer import STANDARD_AUTHORIZER
from kcompat.server.network.connection import Client
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.create_acls import CREATE_ACLS
from kcompat.wire.messages.create_topics import CREATE_TOPICS
from kcompat.wire.messages.delete_acls import DELETE_ACLS
from kcompat.wire.messages.describe_acls import DESCRIBE_ACLS
from kcompat.wire.messages.fetch import FETCH
from kcompat.wire.messages.metadata import METADATA
from kcompat.wire.messages.produce import PRODUCE
from kcompat.wire.protocol import decode_response
from tests.server.broker_harness import BrokerHarness, HarnessFactory, batch, flatten

TOPIC, GROUP, CLUSTER = 2, 3, 4
LITERAL, PREFIXED, ANY_PATTERN = 3, 4, 1
READ, WRITE, DESCRIBE, ALL, ANY_OP = 3, 4, 8, 2, 1
DENY, ALLOW, ANY_PERM = 2, 3, 1

ALICE = Client("c-1", "10.0.0.7", 50000, "PLAINTEXT", "SASL_PLAINTEXT", principal="User:alice")


@pytest.fixture
def h(broker_harness: HarnessFactory) -> BrokerHarness:
    return broker_harness(
        {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS;User:root"},
    )


def as_client(h: BrokerHarness, client: Client, api: Any, version: int, body: Any) -> Any:
    frame = h.frame(api, version, body)
    chunks = h.run(h.broker.handle(memoryview(frame)[4:], client))
    return decode_response(api.key, version, flatten(chunks)[4:])[1]


def creation(name: str, op: int, perm: int = ALLOW, *, rt: int = TOPIC, pattern: int = LITERAL,
             who: str = "User:alice", host: str = "*") -> dict[str, Any]:  # fmt: skip
    return {"resource_type": rt, "resource_name": name, "resource_pattern_type": pattern,
            "principal": who, "host": host, "operation": op, "permission_type": perm}  # fmt: skip


def any_filter(**kw: Any) -> dict[str, Any]:
    return {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": ANY_PATTERN,
            "principal_filter": None, "host_filter": None, "operation": ANY_OP, "permission_type": ANY_PERM,
            **kw}  # fmt: skip


def produce_error(h: BrokerHarness, client: Client | None, topic: str) -> int:
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 1000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch(b"v")}]}]}  # fmt: skip
    resp = as_client(h, client, PRODUCE, 9, body) if client else h.call(PRODUCE, 9, body)
    return int(resp.responses[0].partition_responses[0].error_code)


def fetch_error(h: BrokerHarness, client: Client, topic: str) -> int:
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0, "log_start_offset": -1,
                                                         "partition_max_bytes": 1 << 20, "current_leader_epoch": -1}]}]}  # fmt: skip
    return int(as_client(h, client, FETCH, 11, body).responses[0].partitions[0].error_code)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_create_describe_delete_and_restart(h: BrokerHarness, version: int) -> None:
    created = h.call(CREATE_ACLS, version, {"creations": [
        creation("orders", READ), creation("pay-", WRITE, pattern=PREFIXED),
        creation("orders", READ),  # again: success, no duplicate
        creation("", READ), creation("x", READ, rt=CLUSTER), creation("t", READ, who="alice"),
    ]}).results  # fmt: skip
    assert [r.error_code for r in created] == [0, 0, 0] + [int(ErrorCode.INVALID_REQUEST)] * 3
    described = h.call(DESCRIBE_ACLS, version, any_filter(resource_name_filter=None))
    assert described.error_code == 0
    assert [(r.resource_name, r.pattern_type, len(r.acls)) for r in described.resources] == [
        ("orders", LITERAL, 1), ("pay-", PREFIXED, 1)]  # fmt: skip
    match = h.call(DESCRIBE_ACLS, version, any_filter(resource_type_filter=TOPIC, resource_name_filter="pay-eu",
                                                       pattern_type_filter=2))  # fmt: skip
    assert [r.resource_name for r in match.resources] == ["pay-"]
    h.restart()  # durable
    assert len(h.call(DESCRIBE_ACLS, version, any_filter()).resources) == 2
    deleted = h.call(
        DELETE_ACLS, version, {"filters": [any_filter(operation=WRITE), any_filter(pattern_type_filter=0)]}
    )
    first, bad = deleted.filter_results
    assert [a.resource_name for a in first.matching_acls] == ["pay-"] and first.error_code == 0
    assert bad.error_code == int(ErrorCode.INVALID_REQUEST)
    h.restart()
    assert [r.resource_name for r in h.call(DESCRIBE_ACLS, version, any_filter()).resources] == ["orders"]


def test_without_authorizer_security_disabled(broker_harness: HarnessFactory) -> None:
    h = broker_harness()
    assert h.call(DESCRIBE_ACLS, 3, any_filter()).error_code == int(ErrorCode.SECURITY_DISABLED)
    r = h.call(CREATE_ACLS, 3, {"creations": [creation("t", READ)]}).results[0]
    assert r.error_code == int(ErrorCode.SECURITY_DISABLED)
    r = h.call(DELETE_ACLS, 3, {"filters": [any_filter()]}).filter_results[0]
    assert r.error_code == int(ErrorCode.SECURITY_DISABLED)
    assert produce_error(h, ALICE, "free") == 0  # and nothing is checked


def test_acl_apis_need_cluster_rights(h: BrokerHarness) -> None:
    assert as_client(h, ALICE, DESCRIBE_ACLS, 3, any_filter()).error_code == int(
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    )
    r = as_client(h, ALICE, CREATE_ACLS, 3, {"creations": [creation("t", ALL)]}).results[0]
    assert r.error_code == int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    h.call(CREATE_ACLS, 3, {"creations": [creation("kafka-cluster", DESCRIBE, rt=CLUSTER)]})
    assert as_client(h, ALICE, DESCRIBE_ACLS, 3, any_filter()).error_code == 0


def test_produce_fetch_metadata_checks(h: BrokerHarness) -> None:
    h.call(CREATE_TOPICS, 7, {"topics": [{"name": n, "num_partitions": 1, "replication_factor": -1}
                                         for n in ("orders", "pay-eu", "secret")], "timeout_ms": 1000})  # fmt: skip
    assert produce_error(h, None, "orders") == 0  # the super user
    assert produce_error(h, ALICE, "orders") == int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    assert fetch_error(h, ALICE, "orders") == int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    h.call(CREATE_ACLS, 3, {"creations": [creation("orders", READ), creation("pay-", ALL, pattern=PREFIXED),
                                          creation("pay-eu", WRITE, DENY, host="10.0.0.7")]})  # fmt: skip
    assert fetch_error(h, ALICE, "orders") == 0
    assert produce_error(h, ALICE, "orders") == int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)  # READ is not WRITE
    assert produce_error(h, ALICE, "pay-eu") == int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)  # DENY wins
    assert fetch_error(h, ALICE, "pay-eu") == 0  # the prefixed ALL
    listed = as_client(h, ALICE, METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})
    assert sorted(t.name for t in listed.topics) == ["orders", "pay-eu"]  # secret is hidden
    named = as_client(
        h, ALICE, METADATA, 12, {"topics": [{"name": "secret"}], "allow_auto_topic_creation": True}
    )
    assert named.topics[0].error_code == int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    ops = as_client(h, ALICE, METADATA, 12, {"topics": [{"name": "orders"}], "allow_auto_topic_creation": False,
                                              "include_topic_authorized_operations": True}).topics[0]  # fmt: skip
    assert ops.topic_authorized_operations == (1 << READ) | (1 << DESCRIBE)


def test_group_topic_admin_and_producer_id_checks(h: BrokerHarness) -> None:
    from kcompat.wire.messages.describe_user_scram_credentials import DESCRIBE_USER_SCRAM_CREDENTIALS
    from kcompat.wire.messages.init_producer_id import INIT_PRODUCER_ID
    from kcompat.wire.messages.join_group import JOIN_GROUP
    from kcompat.wire.messages.offset_commit import OFFSET_COMMIT

    h.call(CREATE_TOPICS, 7, {"topics": [{"name": "orders", "num_partitions": 1, "replication_factor": -1}],
                              "timeout_ms": 1000})  # fmt: skip
    join = {"group_id": "g1", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}  # fmt: skip
    assert as_client(h, ALICE, JOIN_GROUP, 9, join).error_code == int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    create = {"topics": [{"name": "new", "num_partitions": 1, "replication_factor": -1}], "timeout_ms": 1000}
    assert as_client(h, ALICE, CREATE_TOPICS, 7, create).topics[0].error_code == int(
        ErrorCode.TOPIC_AUTHORIZATION_FAILED
    )
    idempotent = {
        "transactional_id": None,
        "transaction_timeout_ms": 60000,
        "producer_id": -1,
        "producer_epoch": -1,
    }
    assert as_client(h, ALICE, INIT_PRODUCER_ID, 4, idempotent).error_code == int(
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    )
    scram = as_client(h, ALICE, DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None})
    assert scram.error_code == int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    h.call(CREATE_ACLS, 3, {"creations": [creation("g", READ, rt=GROUP, pattern=PREFIXED), creation("new", 5),
                                          creation("other", WRITE)]})  # fmt: skip
    assert as_client(h, ALICE, CREATE_TOPICS, 7, create).topics[0].error_code == 0  # CREATE on the topic
    assert as_client(h, ALICE, INIT_PRODUCER_ID, 4, idempotent).error_code == 0  # WRITE on some topic
    commit = {"group_id": "g1", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
              "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                            "committed_leader_epoch": -1, "committed_metadata": ""}]}]}  # fmt: skip
    (t,) = as_client(h, ALICE, OFFSET_COMMIT, 8, commit).topics
    assert t.partitions[0].error_code == int(
        ErrorCode.TOPIC_AUTHORIZATION_FAILED
    )  # the group is allowed, not the topic
    h.call(CREATE_ACLS, 3, {"creations": [creation("orders", READ)]})
    (t,) = as_client(h, ALICE, OFFSET_COMMIT, 8, commit).topics
    assert t.partitions[0].error_code == 0
    assert as_client(h, ALICE, JOIN_GROUP, 9, join).error_code == int(
        ErrorCode.MEMBER_ID_REQUIRED
    )  # past the ACLs


def test_transaction_admin_and_markers_checks(h: BrokerHarness) -> None:
    from kcompat.wire.messages.describe_producers import DESCRIBE_PRODUCERS
    from kcompat.wire.messages.describe_transactions import DESCRIBE_TRANSACTIONS
    from kcompat.wire.messages.write_txn_markers import WRITE_TXN_MARKERS

    h.call(CREATE_TOPICS, 7, {"topics": [{"name": "orders", "num_partitions": 1, "replication_factor": -1}],
                              "timeout_ms": 1000})  # fmt: skip
    producers = as_client(
        h, ALICE, DESCRIBE_PRODUCERS, 0, {"topics": [{"name": "orders", "partition_indexes": [0]}]}
    )
    assert producers.topics[0].partitions[0].error_code == int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    assert (
        h.call(DESCRIBE_PRODUCERS, 0, {"topics": [{"name": "orders", "partition_indexes": [0]}]})
        .topics[0]
        .partitions[0]
        .error_code
        == 0
    )
    txn = as_client(h, ALICE, DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["tx"]}).transaction_states[0]
    assert txn.error_code == int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    markers = {"markers": [{"producer_id": 5, "producer_epoch": 0, "transaction_result": False, "coordinator_epoch": 0,
                            "topics": [{"name": "orders", "partition_indexes": [0]}]}]}  # fmt: skip
    answer = as_client(h, ALICE, WRITE_TXN_MARKERS, 1, markers).markers[0].topics[0].partitions[0]
    assert answer.error_code == int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)


def test_denials_are_logged_once_per_principal_and_operation(
    h: BrokerHarness, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import logging

    from kcompat.server.auth import access
    from kcompat.server.log_throttle import LogThrottle

    # a fresh 10 s window: the earlier tests' denials of alice are in the module's one
    monkeypatch.setattr(access, "_denials", LogThrottle(logging.getLogger("kcompat.authorizer")))
    caplog.set_level(logging.INFO, logger="kcompat.authorizer")
    h.call(CREATE_TOPICS, 7, {"topics": [{"name": "orders", "num_partitions": 1, "replication_factor": -1}],
                              "timeout_ms": 1000})  # fmt: skip
    for _ in range(3):
        assert produce_error(h, ALICE, "orders") == int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    as_client(
        h, ALICE, METADATA, 12, {"topics": None, "allow_auto_topic_creation": False}
    )  # filtering: quiet
    lines = [r.getMessage() for r in caplog.records if r.name == "kcompat.authorizer"]
    assert lines == [
        "Principal = User:alice is Denied operation = WRITE from host = 10.0.0.7 on resource = TOPIC:orders "
        "for request = Produce"
    ]


def test_metadata_follows_acl_changes_with_encoded_topics(h: BrokerHarness) -> None:
    """Metadata splices each topic's entry encoded once: listing and authorized operations must
    still follow every ACL change, per principal, while the super user's answer stays whole."""
    h.call(CREATE_TOPICS, 7, {"topics": [{"name": n, "num_partitions": 3, "replication_factor": -1}
                                         for n in ("orders", "secret")], "timeout_ms": 1000})  # fmt: skip
    every = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": True}

    def listed(client: Client | None) -> dict[str, tuple[int, int]]:
        resp = as_client(h, client, METADATA, 12, every) if client else h.call(METADATA, 12, every)
        return {t.name: (len(t.partitions), t.topic_authorized_operations) for t in resp.topics}

    full = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))  # a super user may do everything
    assert listed(None) == {"orders": (3, full), "secret": (3, full)}
    assert listed(ALICE) == {}
    h.call(CREATE_ACLS, 3, {"creations": [creation("orders", READ)]})
    assert listed(ALICE) == {"orders": (3, (1 << READ) | (1 << DESCRIBE))}
    h.call(CREATE_ACLS, 3, {"creations": [creation("orders", WRITE)]})
    assert listed(ALICE) == {"orders": (3, (1 << READ) | (1 << WRITE) | (1 << DESCRIBE))}
    h.call(DELETE_ACLS, 3, {"filters": [any_filter(resource_name_filter="orders")]})
    assert listed(ALICE) == {}
    assert listed(None) == {"orders": (3, full), "secret": (3, full)}
