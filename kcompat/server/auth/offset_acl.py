"""ACL checks of OffsetCommit and OffsetFetch (called only with an authorizer), as KafkaApis does:

OffsetCommit  READ on the group (else every partition GROUP_AUTHORIZATION_FAILED), then READ
              on each topic (else its partitions TOPIC_AUTHORIZATION_FAILED); refused topics
              are taken out of the request before the coordinator sees it
OffsetFetch   DESCRIBE on each group (else the group's error GROUP_AUTHORIZATION_FAILED and no
              topics; v1-7's one group is checked by the handler first), DESCRIBE on each topic: a named one is answered TOPIC_AUTHORIZATION_FAILED,
              and "all topics" leaves it out
"""

from __future__ import annotations

from typing import Any

from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.protocol import Request
from kcompat.wire.types import offset_commit as oc
from kcompat.wire.types import offset_fetch as of

_TOPIC_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
_GROUP_DENIED = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)


def _name(ctx: RequestContext, t: Any, by_id: bool) -> str | None:
    if not by_id:
        return str(t.name)
    topics = ctx.metadata.topics
    info = topics.by_id(t.topic_id) if topics is not None else None
    return info.name if info is not None else None  # an unknown id is answered UNKNOWN_TOPIC_ID later


def commit_refusals(
    ctx: RequestContext, body: oc.OffsetCommitRequest, *, by_id: bool
) -> list[oc.OffsetCommitResponseTopic]:
    """The refused topics' answers; `body.topics` keeps only those the coordinator may commit."""

    def refused(t: oc.OffsetCommitRequestTopic, code: int) -> oc.OffsetCommitResponseTopic:
        return oc.OffsetCommitResponseTopic(
            name=t.name,
            topic_id=t.topic_id,
            partitions=[
                oc.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
                for p in t.partitions
            ],
        )

    if access.group_error(ctx, access.READ, body.group_id) is not None:
        out = [refused(t, _GROUP_DENIED) for t in body.topics]
        body.topics = []
        return out
    kept, out = [], []
    for t in body.topics:
        name = _name(ctx, t, by_id)
        if name is not None and not access.allowed(ctx, access.READ, access.TOPIC, name):
            out.append(refused(t, _TOPIC_DENIED))
        else:
            kept.append(t)
    body.topics = kept
    return out


def _filter_topics(ctx: RequestContext, topics: list[Any], named: bool, by_id: bool) -> list[Any]:
    kept = []
    for t in topics:
        name = _name(ctx, t, by_id)
        if name is None or access.allowed(ctx, access.DESCRIBE, access.TOPIC, name, quiet=not named):
            kept.append(t)
        elif named:
            for p in t.partitions:
                p.committed_offset, p.metadata, p.error_code = -1, "", _TOPIC_DENIED
            kept.append(t)
    return kept


def filter_fetched(
    ctx: RequestContext, request: Request[of.OffsetFetchRequest], answer: of.OffsetFetchResponse
) -> None:
    body = request.body
    v = request.api_version
    if v < 8:  # the group was checked before the coordinator was asked (handlers/offsets.py)
        answer.topics = _filter_topics(ctx, answer.topics, body.topics is not None, False)
        return
    asked = {g.group_id: g.topics is not None for g in body.groups}
    for g in answer.groups:
        if access.group_error(ctx, access.DESCRIBE, g.group_id) is not None:
            g.error_code, g.topics = _GROUP_DENIED, []
        else:
            g.topics = _filter_topics(ctx, g.topics, asked.get(g.group_id, False), v >= 10)
