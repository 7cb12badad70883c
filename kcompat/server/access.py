"""The per-request questions handlers ask the authorizer (Kafka's AuthHelper), with the
connection's principal and address. Without an authorizer (authorizer.class.name empty) each is
one attribute test and True, so the hot paths pay nothing for ACLs they do not use.

    allowed(ctx, READ, TOPIC, "orders")        -> bool
    topic_error(ctx, WRITE, "orders")          -> None or TOPIC_AUTHORIZATION_FAILED
    group_error / cluster_error / transactional_id_error   likewise
"""

from __future__ import annotations

from kcompat.security.authorizer import CLUSTER_NAME as CLUSTER_NAME
from kcompat.security.authorizer import AclOperation, ResourceType
from kcompat.server.broker import RequestContext
from kcompat.wire.error_codes import ErrorCode

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


def enabled(ctx: RequestContext) -> bool:
    return ctx.broker.authorizer is not None


def allowed(ctx: RequestContext, operation: int, resource_type: int, name: str) -> bool:
    auth = ctx.broker.authorizer
    if auth is None:
        return True
    principal, host = _who(ctx)
    return auth.authorize(principal, host, operation, resource_type, name)


def allowed_any(ctx: RequestContext, operation: int, resource_type: int) -> bool:
    """May the principal do `operation` on some resource of the type (authorizeByResourceType)."""
    auth = ctx.broker.authorizer
    if auth is None:
        return True
    principal, host = _who(ctx)
    return auth.authorize_any(principal, host, operation, resource_type)


def topic_error(ctx: RequestContext, operation: int, topic: str) -> ErrorCode | None:
    if ctx.broker.authorizer is None or allowed(ctx, operation, TOPIC, topic):
        return None
    return ErrorCode.TOPIC_AUTHORIZATION_FAILED


def group_error(ctx: RequestContext, operation: int, group: str) -> ErrorCode | None:
    if ctx.broker.authorizer is None or allowed(ctx, operation, GROUP, group):
        return None
    return ErrorCode.GROUP_AUTHORIZATION_FAILED


def cluster_error(ctx: RequestContext, operation: int) -> ErrorCode | None:
    if ctx.broker.authorizer is None or allowed(ctx, operation, CLUSTER, CLUSTER_NAME):
        return None
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def transactional_id_error(ctx: RequestContext, operation: int, transactional_id: str) -> ErrorCode | None:
    if ctx.broker.authorizer is None or allowed(ctx, operation, TRANSACTIONAL_ID, transactional_id):
        return None
    return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def produce_error(ctx: RequestContext, topic: str, transactional_id: str | None) -> ErrorCode | None:
    """Produce: WRITE on the transactional id (when there is one), then WRITE on the topic."""
    if ctx.broker.authorizer is None:
        return None
    if transactional_id is not None and not allowed(ctx, WRITE, TRANSACTIONAL_ID, transactional_id):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return topic_error(ctx, WRITE, topic)


_NONE: frozenset[str] = frozenset()


def fetch_denied(ctx: RequestContext, topics: set[str], from_replica: bool) -> frozenset[str]:
    """Fetch: the topics to answer TOPIC_AUTHORIZATION_FAILED (a consumer needs READ on each; a
    replica needs CLUSTER_ACTION on the cluster, or is refused every topic)."""
    if ctx.broker.authorizer is None:
        return _NONE
    if from_replica:
        return _NONE if allowed(ctx, CLUSTER_ACTION, CLUSTER, CLUSTER_NAME) else frozenset(topics)
    return frozenset(t for t in topics if not allowed(ctx, READ, TOPIC, t))


def metadata_topic_error(ctx: RequestContext, topic: str, would_create: bool) -> ErrorCode | None:
    """Metadata of a named topic: DESCRIBE on it; auto-creating it also needs CREATE on the
    cluster or on the topic."""
    if ctx.broker.authorizer is None:
        return None
    if not allowed(ctx, DESCRIBE, TOPIC, topic):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if would_create and not (
        allowed(ctx, CREATE, CLUSTER, CLUSTER_NAME) or allowed(ctx, CREATE, TOPIC, topic)
    ):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return None


def _operation_bits(ctx: RequestContext, resource_type: int, name: str, all_bits: int) -> int:
    """The bit set of operations allowed (Kafka's authorized operations), from `all_bits` (what
    the resource type supports; all of them without an authorizer)."""
    if ctx.broker.authorizer is None:
        return all_bits
    return sum(
        1 << op
        for op in range(all_bits.bit_length())
        if all_bits >> op & 1 and allowed(ctx, op, resource_type, name)
    )


def topic_operations(ctx: RequestContext, topic: str, all_bits: int) -> int:
    return all_bits if all_bits < 0 else _operation_bits(ctx, TOPIC, topic, all_bits)


def cluster_operations(ctx: RequestContext, all_bits: int) -> int:
    return _operation_bits(ctx, CLUSTER, CLUSTER_NAME, all_bits)


def group_operations(ctx: RequestContext, group: str, all_bits: int) -> int:
    return all_bits if all_bits < 0 else _operation_bits(ctx, GROUP, group, all_bits)
