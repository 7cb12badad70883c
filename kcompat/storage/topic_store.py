"""The topic metadata store: names, topic ids, partition counts and per-topic config overrides.

In Kafka this lives in the KRaft metadata log; a single broker needs only a small JSON document,
`kcompat-topics.json` in the first log dir, rewritten whole (tmp file, fsync, rename, fsync of the
directory) on every change, so a crash leaves the old version or the new one:

    {"version": 1,
     "topics": [{"name": "orders", "topic_id": "8c1f...", "partitions": 3,
                 "configs": {"retention.ms": "3600000"}, "leader_epoch": 0}],
     "broker_configs": {"log.retention.ms": "1000"},      dynamic configs of this broker (AlterConfigs)
     "broker_default_configs": {}}                       ... and cluster-wide dynamic defaults

Leader epochs: kcompat is the only replica, so each partition keeps the epoch it was created
with (0). It is stored so that it can never go backwards across restarts (clients ignore metadata
whose epoch decreased). A deleted and re-created topic gets a new topic id, which clients take as
a new topic, so its epoch may start again at 0.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kcompat.kafka_uuid import random_uuid
from kcompat.log.log_files import atomic_write

FILE_NAME = "kcompat-topics.json"
FORMAT_VERSION = 1
MAX_NAME_LENGTH = 249  # Kafka's Topic.MAX_NAME_LENGTH: leaves room for "-<partition>" in a file name

CONSUMER_OFFSETS = "__consumer_offsets"
TRANSACTION_STATE = "__transaction_state"
SHARE_GROUP_STATE = "__share_group_state"
INTERNAL_TOPICS = frozenset({CONSUMER_OFFSETS, TRANSACTION_STATE, SHARE_GROUP_STATE})

_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


class InvalidTopic(ValueError):
    """A name Kafka would refuse (INVALID_TOPIC_EXCEPTION)."""


def validate_name(name: str) -> None:
    """Kafka's Topic.validate: legal characters, length, not '.' or '..'."""
    if not name:
        raise InvalidTopic("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopic('Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopic(
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}"
        )
    if not _LEGAL.match(name):
        raise InvalidTopic(
            f"Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        )


def collision_key(name: str) -> str:
    """'.' and '_' collide in metric names, so Kafka refuses a topic differing from another only by them."""
    return name.replace(".", "_")


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)  # overrides only; defaults come from the broker
    leader_epoch: int = 0

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "topic_id": str(self.topic_id),
            "partitions": self.partitions,
            "configs": dict(sorted(self.configs.items())),
            "leader_epoch": self.leader_epoch,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TopicInfo:
        return cls(
            name=str(d["name"]),
            topic_id=uuid.UUID(str(d["topic_id"])),
            partitions=int(d["partitions"]),
            configs={str(k): str(v) for k, v in dict(d.get("configs", {})).items()},
            leader_epoch=int(d.get("leader_epoch", 0)),
        )


class TopicStore:
    """All topics of the broker, persisted durably on every change."""

    def __init__(self, directory: Path, *, sync: bool = True) -> None:
        self.path = directory / FILE_NAME
        self._sync = sync
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        # Dynamic broker configs (AlterConfigs on a broker resource): this node's, and the cluster default.
        self._broker_node: dict[str, str] = {}
        self._broker_default: dict[str, str] = {}
        self._deferred: list[str] | None = None  # topics created inside deferred(), saved at its end

    # --- persistence ---

    def load(self) -> None:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(f"{self.path}: unknown format version {data.get('version')!r}")
        self._broker_node = {str(k): str(v) for k, v in data.get("broker_configs", {}).items()}
        self._broker_default = {str(k): str(v) for k, v in data.get("broker_default_configs", {}).items()}
        for d in data["topics"]:
            t = TopicInfo.from_json(d)
            self._topics[t.name] = t
            self._by_id[t.topic_id] = t

    @contextlib.contextmanager
    def deferred(self) -> Iterator[list[str]]:
        """Topics created inside are saved once, at the end (one fsync for a CreateTopics request
        of many topics, as Kafka's controller writes a request's records as one batch). When that
        save fails, they are forgotten again and the OSError is raised; the list names them."""
        if self._deferred is not None:
            yield []
            return
        created: list[str] = []
        self._deferred = created
        try:
            yield created
        finally:
            self._deferred = None
            if created:
                try:
                    self.save()
                except OSError:
                    for name in created:
                        t = self._topics.pop(name)
                        del self._by_id[t.topic_id]
                    raise

    def save(self) -> None:
        doc = {
            "version": FORMAT_VERSION,
            "topics": [t.to_json() for t in sorted(self._topics.values(), key=lambda t: t.name)],
            "broker_configs": dict(sorted(self._broker_node.items())),
            "broker_default_configs": dict(sorted(self._broker_default.items())),
        }
        atomic_write(self.path, json.dumps(doc, indent=1).encode(), sync=self._sync)

    # --- queries ---

    def get(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def names(self) -> list[str]:
        return sorted(self._topics)

    def all(self) -> list[TopicInfo]:
        return [self._topics[n] for n in sorted(self._topics)]

    def __contains__(self, name: object) -> bool:
        return name in self._topics

    def __len__(self) -> int:
        return len(self._topics)

    def colliding(self, name: str) -> str | None:
        """An existing topic whose name collides with `name` through '.' / '_', if any."""
        key = collision_key(name)
        for other in self._topics:
            if other != name and collision_key(other) == key:
                return other
        return None

    def broker_configs(self) -> tuple[dict[str, str], dict[str, str]]:
        """(this node's dynamic broker configs, the cluster-wide defaults)."""
        return dict(self._broker_node), dict(self._broker_default)

    # --- changes (each one persisted before it returns) ---

    def set_broker_configs(self, node: dict[str, str], default: dict[str, str]) -> None:
        old = self._broker_node, self._broker_default
        self._broker_node, self._broker_default = dict(node), dict(default)
        try:
            self.save()
        except OSError:
            self._broker_node, self._broker_default = old
            raise

    def create(self, name: str, partitions: int, configs: dict[str, str] | None = None) -> TopicInfo:
        if name in self._topics:
            raise KeyError(f"topic {name} already exists")
        topic_id = random_uuid()
        while topic_id in self._by_id:
            topic_id = random_uuid()
        t = TopicInfo(name, topic_id, partitions, dict(configs or {}))
        self._topics[name] = t
        self._by_id[topic_id] = t
        if self._deferred is not None:
            self._deferred.append(name)
            return t
        try:
            self.save()
        except OSError:
            del self._topics[name], self._by_id[topic_id]
            raise
        return t

    def delete(self, name: str) -> TopicInfo:
        t = self._topics.pop(name)
        del self._by_id[t.topic_id]
        try:
            self.save()
        except OSError:
            self._topics[name] = t
            self._by_id[t.topic_id] = t
            raise
        return t

    def set_partitions(self, name: str, count: int) -> None:
        t = self._topics[name]
        old = t.partitions
        t.partitions = count
        try:
            self.save()
        except OSError:
            t.partitions = old
            raise

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace the topic's overrides with `configs`."""
        t = self._topics[name]
        old = t.configs
        t.configs = dict(configs)
        try:
            self.save()
        except OSError:
            t.configs = old
            raise
