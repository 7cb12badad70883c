"""What a rule can match in a request: its header and connection, and the names in its body.

`RequestFacts` is what the injector is given, by the broker's dispatcher or by the proxy. The
names in the body (topics, partitions, group ids, transactional ids) are found by walking the
decoded body along its schema, once per request and only when a rule asks for them: a field
`group_id`, `transactional_id`, `topic`/`topic_name` (or `name` in an array of topics), a
partition field (`partition`, `partition_index`, `index`) inside a topic, and their list forms
(`topic_names`, `groups`, `transactional_ids`, `partition_indexes`). A topic named only by its
id (Fetch v13+, Produce v13+) is named through `topic_name`, the caller's lookup.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kcompat.wire.messages import APIS
from kcompat.wire.schema import F

TopicName = Callable[[uuid.UUID], str | None]
_TOPIC = frozenset({"topic", "topic_name"})
_PARTITION = frozenset({"partition", "partition_index", "index", "partition_id"})
_GROUP_LISTS = frozenset({"groups", "group_ids", "groups_names"})
_TOPIC_LISTS = frozenset({"topic_names", "topics"})


@dataclass(slots=True)
class Names:
    topics: set[str] = field(default_factory=set)
    partitions: set[int] = field(default_factory=set)
    group_ids: set[str] = field(default_factory=set)
    transactional_ids: set[str] = field(default_factory=set)


@dataclass(slots=True)
class RequestFacts:
    """One request as the rules see it; `body` is the decoded body (None: match without names)."""

    api_key: int
    api_version: int
    client_id: str | None
    principal: str = "User:ANONYMOUS"
    peer: str = ""
    broker: int = -1  # the node the request is for (the proxy: the upstream's id)
    body: Any = None
    topic_name: TopicName | None = None
    _names: Names | None = None

    @property
    def names(self) -> Names:
        if self._names is None:
            self._names = names_in(self.api_key, self.api_version, self.body, self.topic_name)
        return self._names


def names_in(api_key: int, version: int, body: Any, topic_name: TopicName | None = None) -> Names:
    names = Names()
    api = APIS.get(api_key)
    if api is not None and body is not None:
        _walk(api.request.fields, version, body, names, topic_name, in_topics=False)
    return names


def _walk(
    fields: tuple[F, ...],
    version: int,
    obj: Any,
    names: Names,
    topic_name: TopicName | None,
    *,
    in_topics: bool,
) -> None:
    named = False  # this entry's topic came by name (its topic_id, if any, is not looked up)
    for f in fields:
        if version not in f.versions:
            continue
        value = getattr(obj, f.name, None)
        if value is None:
            continue
        if f.is_struct:
            topics = in_topics or "topic" in f.name
            for item in value if f.is_array else (value,):
                _walk(f.fields, version, item, names, topic_name, in_topics=topics)
        elif f.type == "string":
            named |= _string(f.name, value, names, in_topics)
        elif f.type == "uuid" and f.name == "topic_id" and topic_name is not None and not named:
            found = topic_name(value)
            if found is not None:
                names.topics.add(found)
        elif f.type == "int32" and in_topics and f.name in _PARTITION:
            names.partitions.add(value)
        elif f.type == "[]string":
            _strings(f.name, value, names)
        elif f.type == "[]int32" and f.name in ("partition_indexes", "partitions"):
            names.partitions.update(value)


def _string(name: str, value: str, names: Names, in_topics: bool) -> bool:
    """Take a name; True when it is the entry's topic."""
    if name in _TOPIC or (in_topics and name == "name"):
        names.topics.add(value)
        return True
    if name == "group_id":
        names.group_ids.add(value)
    elif name == "transactional_id":
        names.transactional_ids.add(value)
    return False


def _strings(name: str, values: list[str], names: Names) -> None:
    if name in _TOPIC_LISTS:
        names.topics.update(values)
    elif name in _GROUP_LISTS:
        names.group_ids.update(values)
    elif name == "transactional_ids":
        names.transactional_ids.update(values)
