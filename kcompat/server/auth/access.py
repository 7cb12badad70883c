"""The per-request questions handlers ask the authorizer (Kafka's AuthHelper), with the
connection's principal and address. Without an authorizer (authorizer.class.name empty) each is
one attribute test and True, so the hot paths pay nothing for ACLs they do not use.

    allowed(ctx, READ, TOPIC, "orders")        -> bool
    topic_error(ctx, WRITE, "orders")          -> None or TOPIC_AUTHORIZATION_FAILED
    group_error / cluster_error / transactional_id_error   likewise
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from kcompat.security.authorizer import CLUSTER_NAME as CLUSTER_NAME
from kcompat.security.authorizer import AclOperation, ResourceType
from kcompat.server.context import RequestContext
from kcompat.server.log_throttle import LogThrottle
from kcompat.server.registry import HANDLERS
from kcompat.wire.error_codes import ErrorCode

_denials = LogThrottle(logging.getLogger("kcompat.authorizer"))

READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = (
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.CREATE,
    AclOperation.DELETE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
)
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = (
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
)


class _Group(Protocol):
    @property
    def group_id(self) -> str: ...


T = TypeVar("T", bound=_Group)
_NONE: frozenset[str] = frozenset()

TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
)


def _who(ctx: RequestContext) -> tuple[str, str]:
    client = ctx.client
    if client is None:
        return "User:ANONYMOUS", ""
    return client.principal, client.host


def _api_name(api_key: int) -> str:
    reg = HANDLERS.get(api_key)
    return reg.api.name if reg is not None else f"API key {api_key}"


def enabled(ctx: RequestContext) -> bool:
    return ctx.authorizer is not None


def allowed(
    ctx: RequestContext, operation: int, resource_type: int, name: str, *, quiet: bool = False
) -> bool:
    """`quiet`: a check that filters (listing all topics, authorized operations, an alternative
    right) is not logged when denied, as Kafka's logIfDenied=false."""
    auth = ctx.authorizer
    if auth is None:
        return True
    principal, host = _who(ctx)
    if auth.authorize(principal, host, operation, resource_type, name):
        return True
    if not quiet:
        # Kafka's kafka.authorizer.logger line, at most once per principal and operation per 10 s
        _denials.log(
            logging.INFO,
            f"{principal} {operation}",
            "Principal = %s is Denied operation = %s from host = %s on resource = %s:%s for request = %s",
            principal,
            AclOperation(operation).name,
            host,
            ResourceType(resource_type).name,
            name,
            _api_name(ctx.request.api_key),
        )
    return False


def allowed_any(ctx: RequestContext, operation: int, resource_type: int) -> bool:
    """May the principal do `operation` on some resource of the type (authorizeByResourceType)."""
    auth = ctx.authorizer
    if auth is None:
        return True
    principal, host = _who(ctx)
    return auth.authorize_any(principal, host, operation, resource_type)


def topic_error(ctx: RequestContext, operation: int, topic: str) -> ErrorCode | None:
    if ctx.authorizer is None or allowed(ctx, operation, TOPIC, topic):
        return None
    return ErrorCode.TOPIC_AUTHORIZATION_FAILED


def topic_filter(ctx: RequestContext, operation: int) -> Callable[[str], bool] | None:
    """With an authorizer, a test of `operation` on a topic for this connection's principal that
    outlives the request (a consumer group keeps it to resolve regexes); quiet, as a filter is."""
    auth = ctx.authorizer
    if auth is None:
        return None
    principal, host = _who(ctx)
    return lambda topic: auth.authorize(principal, host, operation, TOPIC, topic)


def topics_denied(ctx: RequestContext, operation: int, topics: Sequence[str]) -> frozenset[str]:
    """The names of `topics` the principal may not `operation` (Kafka's filterByAuthorized, negated)."""
    if ctx.authorizer is None:
        return _NONE
    return frozenset(t for t in set(topics) if not allowed(ctx, operation, TOPIC, t))


def group_error(ctx: RequestContext, operation: int, group: str) -> ErrorCode | None:
    if ctx.authorizer is None or allowed(ctx, operation, GROUP, group):
        return None
    return ErrorCode.GROUP_AUTHORIZATION_FAILED


def cluster_error(ctx: RequestContext, operation: int) -> ErrorCode | None:
    if ctx.authorizer is None or allowed(ctx, operation, CLUSTER, CLUSTER_NAME):
        return None
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def transactional_id_error(ctx: RequestContext, operation: int, transactional_id: str) -> ErrorCode | None:
    if ctx.authorizer is None or allowed(ctx, operation, TRANSACTIONAL_ID, transactional_id):
        return None
    return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def produce_error(ctx: RequestContext, topic: str, transactional_id: str | None) -> ErrorCode | None:
    """Produce: WRITE on the transactional id (when there is one), then WRITE on the topic."""
    if ctx.authorizer is None:
        return None
    if transactional_id is not None and not allowed(ctx, WRITE, TRANSACTIONAL_ID, transactional_id):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return topic_error(ctx, WRITE, topic)


def fetch_denied(
    ctx: RequestContext, reads: Sequence[tuple[Any, str | None, int, Any]], from_replica: bool
) -> frozenset[str]:
    """Fetch: the topics of `reads` (key, topic or None, partition, request) to answer
    TOPIC_AUTHORIZATION_FAILED (a consumer needs READ on each; a replica needs CLUSTER_ACTION on
    the cluster, or is refused every topic)."""
    if ctx.authorizer is None:
        return _NONE
    topics = {name for _, name, _, _ in reads if name is not None}
    if from_replica:
        return _NONE if allowed(ctx, CLUSTER_ACTION, CLUSTER, CLUSTER_NAME) else frozenset(topics)
    return frozenset(t for t in topics if not allowed(ctx, READ, TOPIC, t))


def metadata_topic_error(ctx: RequestContext, topic: str, would_create: bool) -> ErrorCode | None:
    """Metadata of a named topic: DESCRIBE on it; auto-creating it also needs CREATE on the
    cluster or on the topic."""
    if ctx.authorizer is None:
        return None
    if not allowed(ctx, DESCRIBE, TOPIC, topic):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if would_create and not (
        allowed(ctx, CREATE, CLUSTER, CLUSTER_NAME, quiet=True) or allowed(ctx, CREATE, TOPIC, topic)
    ):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return None


def _operation_bits(ctx: RequestContext, resource_type: int, name: str, all_bits: int) -> int:
    """The bit set of operations allowed (Kafka's authorized operations), from `all_bits` (what
    the resource type supports; all of them without an authorizer)."""
    if ctx.authorizer is None:
        return all_bits
    return sum(
        1 << op
        for op in range(all_bits.bit_length())
        if all_bits >> op & 1 and allowed(ctx, op, resource_type, name, quiet=True)
    )


def topic_operations(ctx: RequestContext, topic: str, all_bits: int) -> int:
    return all_bits if all_bits < 0 else _operation_bits(ctx, TOPIC, topic, all_bits)


def cluster_operations(ctx: RequestContext, all_bits: int) -> int:
    return _operation_bits(ctx, CLUSTER, CLUSTER_NAME, all_bits)


def group_operations(ctx: RequestContext, group: str, all_bits: int) -> int:
    return all_bits if all_bits < 0 else _operation_bits(ctx, GROUP, group, all_bits)


def coordinator_key_error(ctx: RequestContext, is_group: bool, key: str) -> ErrorCode | None:
    """FindCoordinator: DESCRIBE on the group, or on the transactional id."""
    if ctx.authorizer is None:
        return None
    if is_group:
        return group_error(ctx, DESCRIBE, key)
    return transactional_id_error(ctx, DESCRIBE, key)


def groups_denied(ctx: RequestContext, operation: int, groups: list[str]) -> dict[str, ErrorCode]:
    """The groups of `groups` the principal may not `operation`, with GROUP_AUTHORIZATION_FAILED."""
    if ctx.authorizer is None:
        return {}
    return {g: ErrorCode.GROUP_AUTHORIZATION_FAILED for g in groups if not allowed(ctx, operation, GROUP, g)}


def describable_groups(ctx: RequestContext, groups: list[T]) -> list[T]:
    """ListGroups: all of them with DESCRIBE on the cluster, else those the principal may describe."""
    if ctx.authorizer is None or allowed(ctx, DESCRIBE, CLUSTER, CLUSTER_NAME, quiet=True):
        return groups
    return [g for g in groups if allowed(ctx, DESCRIBE, GROUP, g.group_id, quiet=True)]


def create_topic_error(ctx: RequestContext, topic: str) -> ErrorCode | None:
    """CreateTopics: CREATE on the cluster or on the topic."""
    if ctx.authorizer is None or allowed(ctx, CREATE, CLUSTER, CLUSTER_NAME, quiet=True):
        return None
    return topic_error(ctx, CREATE, topic)


_CONFIG_TOPIC, _CONFIG_BROKER, _CONFIG_BROKER_LOGGER, _CONFIG_GROUP = 2, 4, 8, 32  # ConfigResource.Type


def config_error(ctx: RequestContext, operation: int, config_type: int, name: str) -> ErrorCode | None:
    """Describe/AlterConfigs: the operation on the topic or group, or on the cluster for a broker."""
    if ctx.authorizer is None:
        return None
    if config_type == _CONFIG_TOPIC:
        return topic_error(ctx, operation, name)
    if config_type == _CONFIG_GROUP:
        return group_error(ctx, operation, name)
    return cluster_error(ctx, operation)


def init_producer_id_error(ctx: RequestContext, transactional_id: str | None) -> ErrorCode | None:
    """InitProducerId: WRITE on the transactional id; an idempotent producer needs IDEMPOTENT_WRITE
    on the cluster or WRITE on some topic (Kafka 3+'s rule, KIP-679)."""
    if ctx.authorizer is None:
        return None
    if transactional_id is not None:
        return transactional_id_error(ctx, WRITE, transactional_id)
    if allowed(ctx, IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME, quiet=True) or allowed_any(ctx, WRITE, TOPIC):
        return None
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def txn_partitions_denied(
    ctx: RequestContext, transactional_id: str, partitions: list[tuple[str, int]]
) -> dict[tuple[str, int], ErrorCode]:
    """AddPartitionsToTxn: WRITE on the transactional id (else every partition fails), then
    WRITE on each topic; an empty dict when all may be added."""
    if ctx.authorizer is None:
        return {}
    if not allowed(ctx, WRITE, TRANSACTIONAL_ID, transactional_id):
        return dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    return {
        tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in partitions if not allowed(ctx, WRITE, TOPIC, tp[0])
    }


def txn_group_error(ctx: RequestContext, transactional_id: str, group: str) -> ErrorCode | None:
    """AddOffsetsToTxn, TxnOffsetCommit: WRITE on the transactional id, READ on the group."""
    if ctx.authorizer is None:
        return None
    return transactional_id_error(ctx, WRITE, transactional_id) or group_error(ctx, READ, group)
