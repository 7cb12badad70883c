"""ACL checks of the KIP-848 consumer group APIs on topics, as Kafka 4's KafkaApis does, so that
a group is no way to learn of topics one may not describe (without an authorizer: nothing):

ConsumerGroupHeartbeat  READ on the group (else GROUP_AUTHORIZATION_FAILED), then DESCRIBE on
                        every topic of subscribed_topic_names: one refused fails the heartbeat
                        with TOPIC_AUTHORIZATION_FAILED before the coordinator sees it; a regex
                        resolves to the topics the heartbeating principal may describe
                        (access.topic_filter, kept by the group)
ConsumerGroupDescribe   DESCRIBE on the group (in the handler), then DESCRIBE on every topic of
                        the members' assignments and target assignments: one refused replaces
                        the group's description by TOPIC_AUTHORIZATION_FAILED and no members
"""

from __future__ import annotations

from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.types import consumer_group_describe as cgd
from kcompat.wire.types import consumer_group_heartbeat as cgh

_TOPIC_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)


def heartbeat_error(ctx: RequestContext, body: cgh.ConsumerGroupHeartbeatRequest) -> ErrorCode | None:
    if (denied := access.group_error(ctx, access.READ, body.group_id)) is not None:
        return denied
    names = body.subscribed_topic_names
    if not names or not access.topics_denied(ctx, access.DESCRIBE, names):
        return None
    return ErrorCode.TOPIC_AUTHORIZATION_FAILED


def _topics(g: cgd.DescribedGroup) -> set[str]:
    return {
        tp.topic_name
        for m in g.members
        for a in (m.assignment, m.target_assignment)
        for tp in a.topic_partitions
    }


def hide_refused_topics(
    ctx: RequestContext, answer: cgd.ConsumerGroupDescribeResponse
) -> cgd.ConsumerGroupDescribeResponse:
    if not access.enabled(ctx):
        return answer
    groups = answer.groups
    described = [g for g in groups if g.error_code == 0]
    denied = access.topics_denied(ctx, access.DESCRIBE, [t for g in described for t in _topics(g)])
    if not denied:
        return answer
    answer.groups = [
        cgd.DescribedGroup(
            group_id=g.group_id,
            error_code=_TOPIC_DENIED,
            error_message="The group has described topic(s) that the client is not authorized to describe.",
        )
        if g.error_code == 0 and not denied.isdisjoint(_topics(g))
        else g
        for g in groups
    ]
    return answer
