"""The error answer of a request forwarded to the controller that did not get the controller's
own (Kafka's AbstractRequest.getErrorResponse): the request's response type with the error in
every place it has one. A table, one builder per forwarded API."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.alter_client_quotas import ALTER_CLIENT_QUOTAS
from kcompat.wire.messages.alter_configs import ALTER_CONFIGS
from kcompat.wire.messages.alter_partition_reassignments import ALTER_PARTITION_REASSIGNMENTS
from kcompat.wire.messages.alter_user_scram_credentials import ALTER_USER_SCRAM_CREDENTIALS
from kcompat.wire.messages.create_acls import CREATE_ACLS
from kcompat.wire.messages.create_delegation_token import CREATE_DELEGATION_TOKEN
from kcompat.wire.messages.create_partitions import CREATE_PARTITIONS
from kcompat.wire.messages.create_topics import CREATE_TOPICS
from kcompat.wire.messages.delete_acls import DELETE_ACLS
from kcompat.wire.messages.delete_topics import DELETE_TOPICS
from kcompat.wire.messages.describe_quorum import DESCRIBE_QUORUM
from kcompat.wire.messages.elect_leaders import ELECT_LEADERS
from kcompat.wire.messages.expire_delegation_token import EXPIRE_DELEGATION_TOKEN
from kcompat.wire.messages.incremental_alter_configs import INCREMENTAL_ALTER_CONFIGS
from kcompat.wire.messages.list_partition_reassignments import LIST_PARTITION_REASSIGNMENTS
from kcompat.wire.messages.renew_delegation_token import RENEW_DELEGATION_TOKEN
from kcompat.wire.messages.unregister_broker import UNREGISTER_BROKER
from kcompat.wire.messages.update_features import UPDATE_FEATURES
from kcompat.wire.protocol import Request
from kcompat.wire.structs import Struct
from kcompat.wire.types import alter_client_quotas as acq
from kcompat.wire.types import alter_configs as ac
from kcompat.wire.types import alter_partition_reassignments as apr
from kcompat.wire.types import alter_user_scram_credentials as ausc
from kcompat.wire.types import create_acls as ca
from kcompat.wire.types import create_delegation_token as cdt
from kcompat.wire.types import create_partitions as cp
from kcompat.wire.types import create_topics as ct
from kcompat.wire.types import delete_acls as da
from kcompat.wire.types import delete_topics as dt
from kcompat.wire.types import describe_quorum as dq
from kcompat.wire.types import elect_leaders as el
from kcompat.wire.types import expire_delegation_token as edt
from kcompat.wire.types import incremental_alter_configs as iac
from kcompat.wire.types import list_partition_reassignments as lpr
from kcompat.wire.types import renew_delegation_token as rdt
from kcompat.wire.types import unregister_broker as ub
from kcompat.wire.types import update_features as uf


def _create_topics(b: Any, v: int, code: int, message: str | None) -> Struct:
    return ct.CreateTopicsResponse(
        throttle_time_ms=0,
        topics=[
            ct.CreatableTopicResult(name=t.name, error_code=code, error_message=message) for t in b.topics
        ],
    )


def _delete_topics(b: Any, v: int, code: int, message: str | None) -> Struct:
    if v >= 6:
        topics = [
            dt.DeletableTopicResult(name=t.name, topic_id=t.topic_id, error_code=code, error_message=message)
            for t in b.topics
        ]
    else:
        topics = [
            dt.DeletableTopicResult(name=name, error_code=code, error_message=message)
            for name in b.topic_names
        ]
    return dt.DeleteTopicsResponse(throttle_time_ms=0, responses=topics)


def _create_partitions(b: Any, v: int, code: int, message: str | None) -> Struct:
    return cp.CreatePartitionsResponse(
        throttle_time_ms=0,
        results=[
            cp.CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message)
            for t in b.topics
        ],
    )


def _alter_configs(b: Any, v: int, code: int, message: str | None) -> Struct:
    resources = [
        ac.AlterConfigsResourceResponse(
            error_code=code,
            error_message=message,
            resource_type=r.resource_type,
            resource_name=r.resource_name,
        )
        for r in b.resources
    ]
    return ac.AlterConfigsResponse(throttle_time_ms=0, responses=resources)


def _incremental_alter_configs(b: Any, v: int, code: int, message: str | None) -> Struct:
    resources = [
        iac.AlterConfigsResourceResponse(
            error_code=code,
            error_message=message,
            resource_type=r.resource_type,
            resource_name=r.resource_name,
        )
        for r in b.resources
    ]
    return iac.IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=resources)


def _elect_leaders(b: Any, v: int, code: int, message: str | None) -> Struct:
    results = [
        el.ReplicaElectionResult(
            topic=t.topic,
            partition_result=[
                el.PartitionResult(partition_id=p, error_code=code, error_message=message)
                for p in t.partitions
            ],
        )
        for t in b.topic_partitions or ()
    ]
    return el.ElectLeadersResponse(throttle_time_ms=0, error_code=code, replica_election_results=results)


def _alter_partition_reassignments(b: Any, v: int, code: int, message: str | None) -> Struct:
    responses = [
        apr.ReassignableTopicResponse(
            name=t.name,
            partitions=[
                apr.ReassignablePartitionResponse(
                    partition_index=p.partition_index, error_code=code, error_message=message
                )
                for p in t.partitions
            ],
        )
        for t in b.topics
    ]
    return apr.AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=code, error_message=message, responses=responses
    )


def _update_features(b: Any, v: int, code: int, message: str | None) -> Struct:
    features = [
        uf.UpdatableFeatureResult(feature=f.feature, error_code=code, error_message=message)
        for f in (b.feature_updates if v < 2 else ())
    ]
    return uf.UpdateFeaturesResponse(
        throttle_time_ms=0, error_code=code, error_message=message, results=features
    )


def _list_partition_reassignments(b: Any, v: int, code: int, message: str | None) -> Struct:
    return lpr.ListPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=code, error_message=message, topics=[]
    )


def _describe_quorum(b: Any, v: int, code: int, message: str | None) -> Struct:
    return dq.DescribeQuorumResponse(error_code=code, error_message=message, topics=[])


def _unregister_broker(b: Any, v: int, code: int, message: str | None) -> Struct:
    return ub.UnregisterBrokerResponse(throttle_time_ms=0, error_code=code, error_message=message)


def _create_acls(b: Any, v: int, code: int, message: str | None) -> Struct:
    return ca.CreateAclsResponse(
        throttle_time_ms=0,
        results=[ca.AclCreationResult(error_code=code, error_message=message) for _ in b.creations],
    )


def _delete_acls(b: Any, v: int, code: int, message: str | None) -> Struct:
    return da.DeleteAclsResponse(
        throttle_time_ms=0,
        filter_results=[
            da.DeleteAclsFilterResult(error_code=code, error_message=message, matching_acls=[])
            for _ in b.filters
        ],
    )


def _alter_client_quotas(b: Any, v: int, code: int, message: str | None) -> Struct:
    return acq.AlterClientQuotasResponse(
        throttle_time_ms=0,
        entries=[
            acq.AlterClientQuotasResponseEntryData(
                error_code=code,
                error_message=message,
                entity=[
                    acq.EntityData(entity_type=x.entity_type, entity_name=x.entity_name) for x in e.entity
                ],
            )
            for e in b.entries
        ],
    )


def _create_delegation_token(b: Any, v: int, code: int, message: str | None) -> Struct:
    return cdt.CreateDelegationTokenResponse(
        error_code=code, principal_type="User", principal_name="ANONYMOUS"
    )


def _renew_delegation_token(b: Any, v: int, code: int, message: str | None) -> Struct:
    return rdt.RenewDelegationTokenResponse(error_code=code)


def _expire_delegation_token(b: Any, v: int, code: int, message: str | None) -> Struct:
    return edt.ExpireDelegationTokenResponse(error_code=code)


def _alter_user_scram_credentials(b: Any, v: int, code: int, message: str | None) -> Struct:
    users = sorted({d.name for d in b.deletions} | {u.name for u in b.upsertions})
    return ausc.AlterUserScramCredentialsResponse(
        throttle_time_ms=0,
        results=[
            ausc.AlterUserScramCredentialsResult(user=user, error_code=code, error_message=message)
            for user in users
        ],
    )


# API key -> its error answer with every error field set, as AbstractRequest.getErrorResponse
_ERROR_RESPONSES: dict[int, Callable[[Any, int, int, str | None], Struct]] = {
    CREATE_TOPICS.key: _create_topics,
    DELETE_TOPICS.key: _delete_topics,
    CREATE_PARTITIONS.key: _create_partitions,
    ALTER_CONFIGS.key: _alter_configs,
    INCREMENTAL_ALTER_CONFIGS.key: _incremental_alter_configs,
    ELECT_LEADERS.key: _elect_leaders,
    ALTER_PARTITION_REASSIGNMENTS.key: _alter_partition_reassignments,
    UPDATE_FEATURES.key: _update_features,
    LIST_PARTITION_REASSIGNMENTS.key: _list_partition_reassignments,
    DESCRIBE_QUORUM.key: _describe_quorum,
    UNREGISTER_BROKER.key: _unregister_broker,
    CREATE_ACLS.key: _create_acls,
    DELETE_ACLS.key: _delete_acls,
    ALTER_CLIENT_QUOTAS.key: _alter_client_quotas,
    CREATE_DELEGATION_TOKEN.key: _create_delegation_token,
    RENEW_DELEGATION_TOKEN.key: _renew_delegation_token,
    EXPIRE_DELEGATION_TOKEN.key: _expire_delegation_token,
    ALTER_USER_SCRAM_CREDENTIALS.key: _alter_user_scram_credentials,
}


def error_response(request: Request[Any], error: ErrorCode, message: str | None = None) -> Struct:
    """The forwarded request's own error response (Kafka's AbstractRequest.getErrorResponse)."""
    build = _ERROR_RESPONSES.get(request.api_key)
    if build is None:
        raise ValueError(f"API key {request.api_key} is not forwarded")
    return build(request.body, request.api_version, int(error), message)
