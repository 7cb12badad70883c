"""The controller's admin APIs, answered by a single node as a one-node Kafka answers them.

In cluster mode every one of these is forwarded to the active controller (forwarding_manager's
FORWARDED_APIS); these handlers run only on a broker alone, which is its own controller, quorum
and only replica. Versions are Kafka 4.3.1's.

* ElectLeaders (43) v0-2: this broker leads every partition, so every named one is
  ELECTION_NOT_NEEDED (v0, which has no such code: NONE); with no partitions named ("all"),
  Kafka leaves the not-needed ones out, so the answer lists the topics with no partitions.
  Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION with Kafka's message.
* AlterPartitionReassignments (45) v0-1: replicas [this broker] is where the partition already is
  (NONE); null (a cancel) finds no reassignment (NO_REASSIGNMENT_IN_PROGRESS); any other broker
  is INVALID_REPLICA_ASSIGNMENT, as Kafka's controller says of a broker not registered.
* ListPartitionReassignments (46) v0: nothing is ever being reassigned.
* DescribeQuorum (55) v0-2: a quorum of one voter, this broker, with its log dir's directory id
  (v2) and its advertised listeners as the node's endpoints (v2); no metadata log: offsets 0.
* UpdateFeatures (57) v0-2: levels within what this node supports, validated as Kafka's
  FeatureControlManager validates them, persisted (kcompat.storage.feature_store), and applied:
  transaction.version is the transaction coordinator's. A level kcompat cannot switch while
  running (group.version, share.version, eligible.leader.replicas.version) may only be kept.
* UnregisterBroker (64) v0: this broker's own id is registered (NONE: as a live Kafka broker,
  it stays); any other id: BROKER_ID_NOT_REGISTERED.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping

from kcompat.metadata.features import TRANSACTION_VERSION
from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.server.registry import handles
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.alter_partition_reassignments import ALTER_PARTITION_REASSIGNMENTS
from kcompat.wire.messages.describe_quorum import DESCRIBE_QUORUM
from kcompat.wire.messages.elect_leaders import ELECT_LEADERS
from kcompat.wire.messages.list_partition_reassignments import LIST_PARTITION_REASSIGNMENTS
from kcompat.wire.messages.unregister_broker import UNREGISTER_BROKER
from kcompat.wire.messages.update_features import UPDATE_FEATURES
from kcompat.wire.protocol import Request
from kcompat.wire.types import alter_partition_reassignments as apr
from kcompat.wire.types import describe_quorum as dq
from kcompat.wire.types import elect_leaders as el
from kcompat.wire.types import list_partition_reassignments as lpr
from kcompat.wire.types import unregister_broker as ub
from kcompat.wire.types import update_features as uf

METADATA_TOPIC = "__cluster_metadata"
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
# What a single node applies while it runs; the other features keep their start-up level.
CHANGEABLE = frozenset({TRANSACTION_VERSION})


def _partition_error(ctx: RequestContext, topic: str, partition: int) -> tuple[int, str | None]:
    t = ctx.metadata.topic(topic)
    if t is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic}"
    if not 0 <= partition < t.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-{partition}"
    return ErrorCode.NONE, None


@handles(ELECT_LEADERS, "0-2")
async def elect_leaders(
    ctx: RequestContext, request: Request[el.ElectLeadersRequest]
) -> el.ElectLeadersResponse:
    if (denied := access.cluster_error(ctx, access.ALTER)) is not None:
        return el.ElectLeadersResponse(
            throttle_time_ms=0, error_code=int(denied), replica_election_results=[]
        )
    body = request.body
    if body.topic_partitions is None:  # all: none needs an election, and Kafka lists none of those
        results = [
            el.ReplicaElectionResult(topic=t.name, partition_result=[]) for t in ctx.metadata.topics.all()
        ]
        return el.ElectLeadersResponse(throttle_time_ms=0, error_code=0, replica_election_results=results)
    not_needed = ErrorCode.ELECTION_NOT_NEEDED if request.api_version >= 1 else ErrorCode.NONE
    results = []
    for tp in body.topic_partitions:
        partitions = []
        for p in tp.partitions:
            code, message = _partition_error(ctx, tp.topic, p)
            partitions.append(
                el.PartitionResult(partition_id=p, error_code=int(code or not_needed), error_message=message)
            )
        results.append(el.ReplicaElectionResult(topic=tp.topic, partition_result=partitions))
    return el.ElectLeadersResponse(throttle_time_ms=0, error_code=0, replica_election_results=results)


@handles(ALTER_PARTITION_REASSIGNMENTS, "0-1")
async def alter_partition_reassignments(
    ctx: RequestContext, request: Request[apr.AlterPartitionReassignmentsRequest]
) -> apr.AlterPartitionReassignmentsResponse:
    body = request.body
    if (denied := access.cluster_error(ctx, access.ALTER)) is not None:
        return apr.AlterPartitionReassignmentsResponse(
            throttle_time_ms=0,
            allow_replication_factor_change=body.allow_replication_factor_change,
            error_code=int(denied),
            error_message=None,
            responses=[],
        )
    node = ctx.identity.node_id
    responses = []
    for t in body.topics:
        partitions = []
        for p in t.partitions:
            code, message = _partition_error(ctx, t.name, p.partition_index)
            if not code:
                code, message = _reassignment_error(node, p.replicas)
            partitions.append(
                apr.ReassignablePartitionResponse(
                    partition_index=p.partition_index, error_code=int(code), error_message=message
                )
            )
        responses.append(apr.ReassignableTopicResponse(name=t.name, partitions=partitions))
    return apr.AlterPartitionReassignmentsResponse(
        throttle_time_ms=0,
        allow_replication_factor_change=body.allow_replication_factor_change,
        error_code=0,
        error_message=None,
        responses=responses,
    )


def _reassignment_error(node: int, replicas: list[int] | None) -> tuple[int, str | None]:
    """Kafka's controller on a one-broker cluster: only this broker can hold a replica."""
    if replicas is None:  # a cancel
        return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None
    if not replicas:
        return (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        )
    if len(set(replicas)) != len(replicas):
        return (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment includes the broker {replicas[0]} more than once.",
        )
    other = next((r for r in replicas if r != node), None)
    if other is not None:
        return (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment includes broker {other}, but no broker with that ID is registered.",
        )
    return ErrorCode.NONE, None


@handles(LIST_PARTITION_REASSIGNMENTS, "0")
async def list_partition_reassignments(
    ctx: RequestContext, request: Request[lpr.ListPartitionReassignmentsRequest]
) -> lpr.ListPartitionReassignmentsResponse:
    code = access.cluster_error(ctx, access.DESCRIBE) or ErrorCode.NONE
    return lpr.ListPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=int(code), error_message=None, topics=[]
    )


@handles(DESCRIBE_QUORUM, "0-2")
async def describe_quorum(
    ctx: RequestContext, request: Request[dq.DescribeQuorumRequest]
) -> dq.DescribeQuorumResponse:
    if (denied := access.cluster_error(ctx, access.DESCRIBE)) is not None:
        return dq.DescribeQuorumResponse(error_code=int(denied), error_message=None, topics=[], nodes=[])
    node, now = ctx.identity.node_id, ctx.now_ms
    logs = ctx.replicas.logs
    directory = next(iter(logs.directory_ids.values()), None) if logs is not None else None
    voter = dq.ReplicaState(
        replica_id=node,
        replica_directory_id=_uuid(directory),
        log_end_offset=0,
        last_fetch_timestamp=now,
        last_caught_up_timestamp=now,
    )
    partition = dq.DescribeQuorumResponsePartitionData(
        partition_index=0,
        error_code=0,
        error_message=None,
        leader_id=node,
        leader_epoch=1,
        high_watermark=0,
        current_voters=[voter],
        observers=[],
    )
    listeners = [
        dq.Listener(name=name, host=host, port=port) for name, (host, port) in ctx.identity.endpoints.items()
    ]
    return dq.DescribeQuorumResponse(
        error_code=0,
        error_message=None,
        topics=[dq.DescribeQuorumResponseTopicData(topic_name=METADATA_TOPIC, partitions=[partition])],
        nodes=[dq.Node(node_id=node, listeners=listeners)],
    )


def _uuid(directory_id: str | None) -> uuid.UUID:
    if directory_id is None:
        return uuid.UUID(int=0)
    return uuid.UUID(bytes=base64.urlsafe_b64decode(directory_id + "=="))


@handles(UPDATE_FEATURES, "0-2")
async def update_features(
    ctx: RequestContext, request: Request[uf.UpdateFeaturesRequest]
) -> uf.UpdateFeaturesResponse:
    body, v = request.body, request.api_version
    if (denied := access.cluster_error(ctx, access.ALTER)) is not None:
        results = [
            uf.UpdatableFeatureResult(feature=u.feature, error_code=int(denied), error_message=None)
            for u in body.feature_updates
        ]
        return uf.UpdateFeaturesResponse(
            throttle_time_ms=0, error_code=int(denied), error_message=None, results=results
        )
    features = ctx.metadata.features()
    changes: dict[str, int] = {}
    errors: dict[str, str] = {}
    for u in body.feature_updates:
        upgrade_type = u.upgrade_type if v >= 1 else (SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE)
        error = _validate(
            ctx, features.supported, features.finalized, u.feature, u.max_version_level, upgrade_type
        )
        if error is None:
            changes[u.feature] = u.max_version_level
        else:
            errors[u.feature] = error
    if errors and v >= 2:  # v2 answers with the first failure only, and changes nothing
        message = next(iter(errors.values()))
        return uf.UpdateFeaturesResponse(
            throttle_time_ms=0,
            error_code=int(ErrorCode.INVALID_UPDATE_VERSION),
            error_message=message,
            results=[],
        )
    if changes and not body.validate_only and not errors:
        ctx.metadata.update_features(changes)
        if TRANSACTION_VERSION in changes:
            ctx.transactions.set_transaction_version(changes[TRANSACTION_VERSION])
    results = [
        uf.UpdatableFeatureResult(
            feature=u.feature,
            error_code=int(ErrorCode.INVALID_UPDATE_VERSION) if u.feature in errors else 0,
            error_message=errors.get(u.feature),
        )
        for u in body.feature_updates
    ]
    return uf.UpdateFeaturesResponse(throttle_time_ms=0, error_code=0, error_message=None, results=results)


def _validate(
    ctx: RequestContext,
    supported: Mapping[str, tuple[int, int]],
    finalized: Mapping[str, int],
    name: str,
    level: int,
    upgrade_type: int,
) -> str | None:
    """Kafka's FeatureControlManager.updateFeature checks, in its order and words."""

    def invalid(reason: str) -> str:
        return f"Invalid update version {level} for feature {name}. {reason}"

    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return invalid("Unknown upgrade type.")
    lo, hi = supported.get(name, (0, 0))
    if not lo <= level <= hi:
        return invalid(f"Local controller {ctx.identity.node_id} only supports versions {lo}-{hi}")
    current = finalized.get(name, 0)
    if level < current and upgrade_type == UPGRADE:
        return invalid(
            "Can't downgrade the version of this feature without setting the upgrade type to either "
            "safe or unsafe downgrade."
        )
    if level > current and upgrade_type != UPGRADE:
        return invalid("Can't downgrade to a newer version.")
    if level != current and name not in CHANGEABLE:
        return invalid(f"kcompat applies {name} only at start-up; it stays at {current} on this node.")
    return None


@handles(UNREGISTER_BROKER, "0")
async def unregister_broker(
    ctx: RequestContext, request: Request[ub.UnregisterBrokerRequest]
) -> ub.UnregisterBrokerResponse:
    if (denied := access.cluster_error(ctx, access.ALTER)) is not None:
        return ub.UnregisterBrokerResponse(throttle_time_ms=0, error_code=int(denied), error_message=None)
    broker_id = request.body.broker_id
    if broker_id == ctx.identity.node_id:
        return ub.UnregisterBrokerResponse(throttle_time_ms=0, error_code=0, error_message=None)
    return ub.UnregisterBrokerResponse(
        throttle_time_ms=0,
        error_code=int(ErrorCode.BROKER_ID_NOT_REGISTERED),
        error_message=f"Broker ID {broker_id} is not currently registered",
    )
