"""The topic ids a virtual cluster may use: learnt from the answers that pair an id with one of the
tenant's topics, checked in every request that names a topic by id.

Produce v13, Fetch v13+, ShareFetch, ShareAcknowledge, Metadata v10+, OffsetCommit v10,
OffsetFetch v10 and DeleteTopics v6 name topics by id only: there is no
name to prefix, and an id another tenant's client logged or leaked would otherwise reach that
tenant's topic. A request naming an id the tenant has not been shown is answered here with
UNKNOWN_TOPIC_ID, as Kafka answers an id it does not know; the client refreshes its metadata
(through the proxy, which learns the ids of the tenant's topics from that answer) and retries, so
a restarted proxy costs a client one refresh, never a record.

Ids are learnt from Metadata, CreateTopics and DescribeTopicPartitions answers (the entries the
name filter kept, whose names are the tenant's) and from the assignments of the tenant's
consumer and share groups (whose subscriptions are the tenant's topics only).
"""

from __future__ import annotations

import uuid
from typing import Any

from kcompat.kafka_uuid import ZERO_UUID

# API key -> the paths of the topic ids a request names (tests/proxy/test_tenant_ids.py walks the
# specs: every request topic id of an API a tenant may send is here).
ID_REQUESTS: dict[int, tuple[tuple[str, ...], ...]] = {
    0: (("topic_data", "topic_id"),),
    1: (("topics", "topic_id"), ("forgotten_topics_data", "topic_id")),
    3: (("topics", "topic_id"),),
    8: (("topics", "topic_id"),),
    9: (("groups", "topics", "topic_id"),),
    20: (("topics", "topic_id"),),
    78: (("topics", "topic_id"), ("forgotten_topics_data", "topic_id")),
    79: (("topics", "topic_id"),),
}

# Request topic ids left unchecked, with why.
ID_NOT_CHECKED: dict[int, str] = {
    68: "ConsumerGroupHeartbeat's owned partitions: the coordinator only compares them with its own "
    "assignment of the tenant's group (an error there would fail the member after a proxy restart)",
}

# API key -> (path to the entries, the id field, the name field or None: every id is the tenant's)
ID_ANSWERS: dict[int, tuple[tuple[tuple[str, ...], str, str | None], ...]] = {
    3: ((("topics",), "topic_id", "name"),),
    19: ((("topics",), "topic_id", "name"),),
    75: ((("topics",), "topic_id", "name"),),
    68: ((("assignment", "topic_partitions"), "topic_id", None),),
    76: ((("assignment", "topic_partitions"), "topic_id", None),),
}


def _walk(value: Any, path: tuple[str, ...]) -> list[Any]:
    """The structs (or values) at `path` below `value`, lists flattened, None skipped."""
    items = [value]
    for name in path:
        nxt: list[Any] = []
        for item in items:
            v = getattr(item, name, None)
            if isinstance(v, list):
                nxt.extend(v)
            elif v is not None:
                nxt.append(v)
        items = nxt
    return items


class TopicIds:
    """The topic ids one virtual cluster has been shown (shared by its connections)."""

    __slots__ = ("known",)

    def __init__(self) -> None:
        self.known: set[uuid.UUID] = set()

    def unknown(self, api_key: int, body: Any) -> list[uuid.UUID]:
        """The ids a request names that the tenant has not been shown."""
        return [
            topic_id
            for path in ID_REQUESTS.get(api_key, ())
            for topic_id in _walk(body, path)
            if isinstance(topic_id, uuid.UUID) and topic_id != ZERO_UUID and topic_id not in self.known
        ]

    def learn(self, api_key: int, body: Any, prefix: str) -> None:
        """Record the tenant's ids an answer shows (before its names are stripped)."""
        for path, id_field, name_field in ID_ANSWERS.get(api_key, ()):
            for entry in _walk(body, path):
                topic_id = getattr(entry, id_field, None)
                if not isinstance(topic_id, uuid.UUID) or topic_id == ZERO_UUID:
                    continue
                name = getattr(entry, name_field, None) if name_field is not None else prefix
                if isinstance(name, str) and name.startswith(prefix):
                    self.known.add(topic_id)
