"""The controller's admin APIs on a single node (handlers/single_node_admin.py): the answers the
Kafka tools do not show (v0's codes, a broker that is not there, validate_only, v2's top-level
error, the feature level surviving a restart)."""

from __future__ import annotations

from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.messages.alter_partition_reassignments import ALTER_PARTITION_REASSIGNMENTS
from kcompat.wire.messages.api_versions import API_VERSIONS
from kcompat.wire.messages.create_topics import CREATE_TOPICS
from kcompat.wire.messages.elect_leaders import ELECT_LEADERS
from kcompat.wire.messages.update_features import UPDATE_FEATURES
from tests.server.broker_harness import BrokerHarness, HarnessFactory


def create(h: BrokerHarness, name: str, partitions: int = 2) -> None:
    h.call(CREATE_TOPICS, 7, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                                          "configs": []}], "timeout_ms": 100})  # fmt: skip


def test_elect_leaders_codes_by_version(broker_harness: HarnessFactory) -> None:
    h = broker_harness()
    create(h, "t")
    body = {"election_type": 0, "topic_partitions": [{"topic": "t", "partitions": [0, 5]}], "timeout_ms": 100}
    v0 = h.call(ELECT_LEADERS, 0, body).replica_election_results[0].partition_result
    v2 = h.call(ELECT_LEADERS, 2, body).replica_election_results[0].partition_result
    assert [(p.partition_id, p.error_code) for p in v0] == [(0, E.NONE), (5, E.UNKNOWN_TOPIC_OR_PARTITION)]
    assert [(p.partition_id, p.error_code) for p in v2] == [
        (0, E.ELECTION_NOT_NEEDED),
        (5, E.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert v2[1].error_message == "No such partition as t-5"


def test_reassignment_to_another_broker_is_refused_as_kafkas_controller_refuses_it(
    broker_harness: HarnessFactory,
) -> None:
    h = broker_harness()
    create(h, "t")

    def alter(replicas: list[int] | None) -> tuple[int, str | None]:
        r = h.call(ALTER_PARTITION_REASSIGNMENTS, 1, {"timeout_ms": 100, "allow_replication_factor_change": True,
                   "topics": [{"name": "t", "partitions": [{"partition_index": 0, "replicas": replicas}]}]})  # fmt: skip
        p = r.responses[0].partitions[0]
        return p.error_code, p.error_message

    assert alter([1]) == (E.NONE, None)
    assert alter(None) == (E.NO_REASSIGNMENT_IN_PROGRESS, None)
    assert alter([1, 2]) == (
        E.INVALID_REPLICA_ASSIGNMENT,
        "The manual partition assignment includes broker 2, but no broker with that ID is registered.",
    )
    assert alter([])[0] == E.INVALID_REPLICA_ASSIGNMENT


def finalized(h: BrokerHarness) -> tuple[dict[str, int], int]:
    r = h.call(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    return {f.name: f.max_version_level for f in r.finalized_features}, r.finalized_features_epoch


def test_update_features_validate_only_v2_error_and_restart(broker_harness: HarnessFactory) -> None:
    h = broker_harness()

    def update(version: int, level: int, upgrade_type: int, validate_only: bool = False) -> object:
        return h.call(UPDATE_FEATURES, version, {"timeout_ms": 100, "validate_only": validate_only,
                      "feature_updates": [{"feature": "transaction.version", "max_version_level": level,
                                           "allow_downgrade": upgrade_type != 1, "upgrade_type": upgrade_type}]})  # fmt: skip

    r = update(1, 1, 2, validate_only=True)
    assert r.results[0].error_code == E.NONE  # type: ignore[attr-defined]
    assert finalized(h) == ({"transaction.version": 2, "share.version": 1, "eligible.leader.replicas.version": 1,
                             "streams.version": 1, "group.version": 1}, 0)  # fmt: skip
    r = update(2, 1, 1)  # a downgrade sent as an upgrade: v2 has only the top-level error
    assert r.error_code == E.INVALID_UPDATE_VERSION and r.results == []  # type: ignore[attr-defined]
    assert "without setting the upgrade type" in r.error_message  # type: ignore[attr-defined]
    assert update(2, 1, 2).error_code == E.NONE  # type: ignore[attr-defined]
    assert finalized(h)[0]["transaction.version"] == 1 and finalized(h)[1] == 1
    assert h.broker.txn_service.transaction_version == 1
    h.restart()
    assert finalized(h)[0]["transaction.version"] == 1
    assert h.broker.txn_service.transaction_version == 1
