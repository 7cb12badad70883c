"""CreateTopics (key 19): v2-7.  DeleteTopics (key 20): v1-6.  CreatePartitions (key 37): v0-3.

CreateTopics v0-1 and DeleteTopics v0 were removed in Kafka 4 (KIP-896).

CreateTopics version notes:
* v0: name, partitions, replication factor, assignments, configs
* v1: validate_only; error_message
* v2: throttle_time_ms;  v3: no change
* v4: -1 partitions / replication factor mean num.partitions / default.replication.factor
* v5: flexible; the answer carries partitions, replication factor and every config of the topic
  (with an authorizer, only to a principal that may DESCRIBE_CONFIGS the topic; the others get
  topic_config_error_code TOPIC_AUTHORIZATION_FAILED, -1/-1 and no configs, as Kafka's controller)
* v6: no change;  v7: topic_id
Validation as Kafka's controller: legal name, no '.'/'_' collision, not an internal topic, not a
duplicate in the request (INVALID_REQUEST), partitions > 0 (INVALID_PARTITIONS), replication
factor 1 or -1 (one broker: anything above 1 is INVALID_REPLICATION_FACTOR), assignments only with
-1/-1 and naming this broker only, configs known and valid (INVALID_CONFIG). As Kafka's controller
(KAFKA-17870), a request that would create more than 10,000 partitions in all is refused whole with
POLICY_VIOLATION; CreatePartitions caps the partitions it adds the same way. Without the cap, one
request for a million partitions would hold the event loop for minutes.

DeleteTopics version notes:
* v0: names;  v1: throttle_time_ms;  v2-3: no change;  v4: flexible;  v5: error_message
* v6: topics by name or by topic id (unknown id: UNKNOWN_TOPIC_ID)
delete.topic.enable=false gives TOPIC_DELETION_DISABLED; internal topics cannot be deleted.

CreatePartitions version notes:
* v0: new total count, optional assignments, validate_only;  v1: no change;  v2: flexible
* v3: no change
"""

from __future__ import annotations

import uuid
from collections import Counter

from kcompat.kafka_uuid import ZERO_UUID
from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.server.errors import ApiError
from kcompat.server.quotas.client_quota_manager import MutationQuota
from kcompat.server.registry import handles
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.create_partitions import CREATE_PARTITIONS
from kcompat.wire.messages.create_topics import CREATE_TOPICS
from kcompat.wire.messages.delete_topics import DELETE_TOPICS
from kcompat.wire.protocol import Request
from kcompat.wire.types.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from kcompat.wire.types.create_topics import (
    CreatableTopic,
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from kcompat.wire.types.delete_topics import DeletableTopicResult, DeleteTopicsRequest, DeleteTopicsResponse

MAX_PARTITIONS_PER_REQUEST = 10_000


def _mutation(quota: MutationQuota | None, partitions: int) -> None:
    """controller_mutation_rate (KIP-599): a strict quota refuses the topic once exhausted."""
    if quota is not None and not quota.record(partitions):
        raise ApiError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, "The throttling quota has been exceeded.")


def _too_many_partitions() -> ApiError:
    return ApiError(ErrorCode.POLICY_VIOLATION, "Excessively large number of partitions per request.")


def _requested_partitions(ctx: RequestContext, ct: CreatableTopic) -> int:
    if ct.assignments:
        return len(ct.assignments)
    return ctx.metadata.default_partitions if ct.num_partitions == -1 else max(ct.num_partitions, 0)


@handles(CREATE_TOPICS, "2-7")
async def create_topics(ctx: RequestContext, request: Request[CreateTopicsRequest]) -> CreateTopicsResponse:
    body = request.body
    counts = Counter(t.name for t in body.topics)
    too_many = sum(_requested_partitions(ctx, ct) for ct in body.topics) > MAX_PARTITIONS_PER_REQUEST
    results: list[CreatableTopicResult] = []
    quotas = ctx.quotas
    mq = (
        quotas.mutation_quota(ctx.client, request.client_id, request.api_version >= 6)
        if quotas.controller_mutation.on
        else None
    )
    try:
        async with ctx.metadata.topic_batch():  # one save (one fsync) for all the topics of the request
            results.extend(
                [
                    await _create_one(ctx, ct, body.validate_only, counts[ct.name] > 1, too_many, mq)
                    for ct in body.topics
                ]
            )
    except ApiError as e:  # the batch could not be recorded: none of its topics exists
        for res in results:
            if res.error_code == 0:
                res.topic_id, res.num_partitions, res.replication_factor, res.configs = (
                    ZERO_UUID,
                    -1,
                    -1,
                    None,
                )
                res.error_code, res.error_message = int(e.error), e.message
    return CreateTopicsResponse(throttle_time_ms=quotas.mutated(ctx.client, mq), topics=results)


async def _create_one(
    ctx: RequestContext,
    ct: CreatableTopic,
    validate_only: bool,
    duplicate: bool,
    too_many: bool,
    mq: MutationQuota | None,
) -> CreatableTopicResult:
    res = CreatableTopicResult(
        name=ct.name,
        topic_id=ZERO_UUID,
        error_code=0,
        error_message=None,
        num_partitions=-1,
        replication_factor=-1,
        configs=None,
    )
    try:
        if duplicate:
            raise ApiError(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
        if (denied := access.create_topic_error(ctx, ct.name)) is not None:
            raise ApiError(denied, "Authorization failed.")
        if too_many:
            raise _too_many_partitions()
        partitions, rf = _layout(ctx, ct)
        if not validate_only:
            _mutation(mq, partitions)
        configs = {c.name: c.value for c in ct.configs}
        t = await ctx.metadata.create_topic(ct.name, partitions, configs, validate_only=validate_only)
    except ApiError as e:
        res.error_code, res.error_message = int(e.error), e.message
        return res
    if not validate_only:
        res.topic_id = t.topic_id
    if not access.allowed(ctx, access.DESCRIBE_CONFIGS, access.TOPIC, ct.name, quiet=True):
        # the controller's rule: created, but its layout and configs are not shown
        res.topic_config_error_code, res.configs = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), []
        return res
    res.num_partitions, res.replication_factor = t.partitions, rf
    res.configs = [
        CreatableTopicConfigs(
            name=e.name,
            value=e.value,
            read_only=e.read_only,
            config_source=int(e.source),
            is_sensitive=e.sensitive,
        )
        for e in ctx.metadata.describe_topic_configs(t)
    ]
    return res


def _layout(ctx: RequestContext, ct: CreatableTopic) -> tuple[int, int]:
    """(partition count, replication factor) of a CreatableTopic, checked as Kafka's controller does."""
    if ct.assignments:
        if ct.num_partitions != -1 or ct.replication_factor != -1:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                "A manual partition assignment was specified, but numPartitions or replicationFactor was not set to -1.",
            )
        indexes = sorted(a.partition_index for a in ct.assignments)
        if indexes != list(range(len(indexes))):
            raise ApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partitions must be numbered 0 to N-1 without gaps."
            )
        rf = len(ct.assignments[0].broker_ids)
        for a in ct.assignments:
            _check_replicas(ctx, a.broker_ids, a.partition_index)
            if len(a.broker_ids) != rf:
                raise ApiError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    "All partitions must have the same number of replicas.",
                )
        return len(indexes), rf
    partitions = ctx.metadata.default_partitions if ct.num_partitions == -1 else ct.num_partitions
    if partitions <= 0:
        raise ApiError(
            ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."
        )
    rf = ctx.metadata.default_replication_factor if ct.replication_factor == -1 else ct.replication_factor
    if rf <= 0:
        raise ApiError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        )
    if rf > 1:
        raise ApiError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be "
            "reached because only 1 broker(s) are registered.",
        )
    return partitions, rf


def _check_replicas(ctx: RequestContext, broker_ids: list[int], partition: int) -> None:
    node = ctx.identity.node_id
    if not broker_ids:
        raise ApiError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment for partition {partition} is empty.",
        )
    if len(set(broker_ids)) != len(broker_ids):
        raise ApiError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment for partition {partition} contains duplicates.",
        )
    for b in broker_ids:
        if b != node:
            raise ApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {b}, but no such broker is registered.",
            )


@handles(DELETE_TOPICS, "1-6")
async def delete_topics(ctx: RequestContext, request: Request[DeleteTopicsRequest]) -> DeleteTopicsResponse:
    topics = ctx.metadata.topics
    assert topics is not None
    body = request.body
    if request.api_version >= 6:
        wanted: list[tuple[str | None, uuid.UUID]] = [(t.name, t.topic_id) for t in body.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in body.topic_names]
    counts = Counter(n if n is not None else i for n, i in wanted)
    quotas = ctx.quotas
    mq = (
        quotas.mutation_quota(ctx.client, request.client_id, request.api_version >= 5)
        if quotas.controller_mutation.on
        else None
    )
    results = []
    for name, topic_id in wanted:
        res = DeletableTopicResult(name=name, topic_id=topic_id, error_code=0, error_message=None)
        results.append(res)
        try:
            if counts[name if name is not None else topic_id] > 1:
                raise ApiError(ErrorCode.INVALID_REQUEST, "Duplicate topic in the request.")
            if name is None:
                t = topics.by_id(topic_id)
                if t is None:
                    raise ApiError(ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
            else:
                t = topics.get(name)
                if t is None or (topic_id != ZERO_UUID and t.topic_id != topic_id):
                    raise ApiError(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        "This server does not host this topic-partition.",
                    )
            if (denied := access.topic_error(ctx, access.DELETE, t.name)) is not None:
                raise ApiError(denied, "Authorization failed.")
            res.name, res.topic_id = t.name, t.topic_id
            _mutation(mq, t.partitions)
            await ctx.metadata.delete_topic(t.name)
            ctx.stats.forget_topic(t.name)  # a topic made again under the name starts from 0
        except ApiError as e:
            res.error_code, res.error_message = int(e.error), e.message
    return DeleteTopicsResponse(throttle_time_ms=quotas.mutated(ctx.client, mq), responses=results)


@handles(CREATE_PARTITIONS, "0-3")
async def create_partitions(
    ctx: RequestContext, request: Request[CreatePartitionsRequest]
) -> CreatePartitionsResponse:
    body = request.body
    counts = Counter(t.name for t in body.topics)
    quotas = ctx.quotas
    mq = (
        quotas.mutation_quota(ctx.client, request.client_id, request.api_version >= 3)
        if quotas.controller_mutation.on
        else None
    )
    added = 0
    results = []
    for ct in body.topics:
        res = CreatePartitionsTopicResult(name=ct.name, error_code=0, error_message=None)
        results.append(res)
        try:
            if counts[ct.name] > 1:
                raise ApiError(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
            if (denied := access.topic_error(ctx, access.ALTER, ct.name)) is not None:
                raise ApiError(denied, "Authorization failed.")
            t = ctx.metadata.topic(ct.name)
            if t is None:
                raise ApiError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
                )
            if ct.count < t.partitions:
                raise ApiError(
                    ErrorCode.INVALID_PARTITIONS,
                    f"The topic {t.name} currently has {t.partitions} partition(s); {ct.count} would not be an increase.",
                )
            if ct.count == t.partitions:
                raise ApiError(
                    ErrorCode.INVALID_PARTITIONS, f"Topic already has {t.partitions} partition(s)."
                )
            if added + ct.count - t.partitions > MAX_PARTITIONS_PER_REQUEST:
                raise _too_many_partitions()
            added += ct.count - t.partitions
            if ct.assignments is not None:
                if len(ct.assignments) != ct.count - t.partitions:
                    raise ApiError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Attempted to add {ct.count - t.partitions} additional partition(s), but only "
                        f"{len(ct.assignments)} assignment(s) were specified.",
                    )
                for i, a in enumerate(ct.assignments):
                    _check_replicas(ctx, a.broker_ids, t.partitions + i)
            if not body.validate_only:
                _mutation(mq, ct.count - t.partitions)
                await ctx.metadata.add_partitions(t.name, ct.count)
        except ApiError as e:
            res.error_code, res.error_message = int(e.error), e.message
    return CreatePartitionsResponse(throttle_time_ms=quotas.mutated(ctx.client, mq), results=results)
