"""MetadataImage and MetadataDelta: the cluster as `__cluster_metadata` describes it (Kafka's
metadata/.../image/*).

An image is never changed in place: a MetadataDelta collects records on top of one and `apply()`
makes the next image, sharing every topic and broker the records did not touch. Kept so far:
topics and partitions, brokers and controllers, configs, feature levels, the producer-id block and
the ACLs (by record id, as Kafka's AclsImage), the client quotas (by entity, as
ClientQuotasImage), the delegation tokens (by token id, as DelegationTokenImage) and the SCRAM
credentials (by user and mechanism, as ScramImage).

Record semantics (metadata/.../PartitionRegistration.java#merge and the *Delta classes):
* PartitionChangeRecord: an absent tagged field leaves the value unchanged; Leader -2 means "no
  change", -1 "no leader". The leader epoch goes up by one when Leader is present, the partition
  epoch on every change. New replicas without Directories get the unassigned directory (zero uuid).
* BrokerRegistrationChangeRecord: Fenced -1 unfences, 1 fences, 0 leaves it; InControlledShutdown 1
  sets it. RegisterBrokerRecord replaces the whole registration (a new incarnation or epoch).
* ConfigRecord with a null value removes the key; FeatureLevelRecord at level 0 removes the feature.
* RemoveTopicRecord drops the topic and its configs; ClearElrRecord with an empty name clears all.
* UserScramCredentialRecord replaces the user's credential for its mechanism,
  RemoveUserScramCredentialRecord drops it (a user with none left is gone); an unknown mechanism
  id is skipped. A snapshot starts from an empty image, so what it does not hold is gone.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from kcompat.metadata import records as r
from kcompat.quotas.entities import Entity, entity_of
from kcompat.security.authorizer import AclBinding
from kcompat.security.delegation_tokens import TokenInformation
from kcompat.security.scram import MECHANISMS, ScramCredential

NO_LEADER = -1
NO_LEADER_CHANGE = -2
UNASSIGNED_DIRECTORY = uuid.UUID(int=0)
TOPIC_RESOURCE = 2  # ConfigResource.Type
BROKER_RESOURCE = 4


@dataclass(frozen=True)
class PartitionRegistration:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    directories: tuple[uuid.UUID, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = 0
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    @classmethod
    def from_record(cls, rec: Any) -> PartitionRegistration:
        return cls(
            replicas=tuple(rec.replicas),
            isr=tuple(rec.isr),
            leader=rec.leader,
            leader_epoch=rec.leader_epoch,
            partition_epoch=rec.partition_epoch,
            directories=tuple(rec.directories or ()),
            removing_replicas=tuple(rec.removing_replicas or ()),
            adding_replicas=tuple(rec.adding_replicas or ()),
            leader_recovery_state=rec.leader_recovery_state,
            elr=tuple(rec.eligible_leader_replicas or ()),
            last_known_elr=tuple(rec.last_known_elr or ()),
        )

    def merge(self, change: Any) -> PartitionRegistration:
        """This partition after a PartitionChangeRecord."""
        replicas = self.replicas if change.replicas is None else tuple(change.replicas)
        if change.directories is not None:
            directories = tuple(change.directories)
        elif replicas != self.replicas:
            kept = dict(zip(self.replicas, self.directories, strict=False))
            directories = tuple(kept.get(b, UNASSIGNED_DIRECTORY) for b in replicas)
        else:
            directories = self.directories
        leader, leader_epoch = self.leader, self.leader_epoch
        if change.leader != NO_LEADER_CHANGE:
            leader, leader_epoch = change.leader, self.leader_epoch + 1
        return PartitionRegistration(
            replicas=replicas,
            isr=self.isr if change.isr is None else tuple(change.isr),
            leader=leader,
            leader_epoch=leader_epoch,
            partition_epoch=self.partition_epoch + 1,
            directories=directories,
            removing_replicas=self.removing_replicas
            if change.removing_replicas is None
            else tuple(change.removing_replicas),
            adding_replicas=self.adding_replicas
            if change.adding_replicas is None
            else tuple(change.adding_replicas),
            leader_recovery_state=self.leader_recovery_state
            if change.leader_recovery_state == -1
            else change.leader_recovery_state,
            elr=self.elr
            if change.eligible_leader_replicas is None
            else tuple(change.eligible_leader_replicas),
            last_known_elr=self.last_known_elr
            if change.last_known_elr is None
            else tuple(change.last_known_elr),
        )


@dataclass(frozen=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: MappingProxyType[int, PartitionRegistration] = field(
        default_factory=lambda: MappingProxyType({})
    )


@dataclass(frozen=True)
class Endpoint:
    name: str
    host: str
    port: int
    security_protocol: int


@dataclass(frozen=True)
class BrokerRegistration:
    broker_id: int
    epoch: int
    incarnation_id: uuid.UUID
    endpoints: tuple[Endpoint, ...]
    features: MappingProxyType[str, tuple[int, int]]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool
    directories: tuple[uuid.UUID, ...] = ()


@dataclass(frozen=True)
class ControllerRegistration:
    controller_id: int
    incarnation_id: uuid.UUID
    endpoints: tuple[Endpoint, ...]


def _empty() -> MappingProxyType[Any, Any]:
    return MappingProxyType({})


@dataclass(frozen=True)
class MetadataImage:
    """The cluster at `offset` (the last applied `__cluster_metadata` offset; -1 when empty)."""

    offset: int = -1
    epoch: int = -1
    topics_by_id: MappingProxyType[uuid.UUID, TopicImage] = field(default_factory=_empty)
    topic_ids: MappingProxyType[str, uuid.UUID] = field(default_factory=_empty)
    brokers: MappingProxyType[int, BrokerRegistration] = field(default_factory=_empty)
    controllers: MappingProxyType[int, ControllerRegistration] = field(default_factory=_empty)
    configs: MappingProxyType[tuple[int, str], MappingProxyType[str, str]] = field(default_factory=_empty)
    features: MappingProxyType[str, int] = field(default_factory=_empty)
    next_producer_id: int = 0
    acls: MappingProxyType[uuid.UUID, AclBinding] = field(default_factory=_empty)
    # The quorum's kraft.version: a KRaftVersion control record, not a FeatureLevelRecord.
    kraft_version: int = 0
    # ClientQuotaRecords: entity -> {key: value}; a record with remove drops the key.
    client_quotas: MappingProxyType[Entity, MappingProxyType[str, float]] = field(default_factory=_empty)
    # DelegationTokenRecords by token id; RemoveDelegationTokenRecord drops one.
    delegation_tokens: MappingProxyType[str, TokenInformation] = field(default_factory=_empty)
    # UserScramCredentialRecords: user -> mechanism name -> credential.
    scram: MappingProxyType[str, MappingProxyType[str, ScramCredential]] = field(default_factory=_empty)

    def topic(self, name: str) -> TopicImage | None:
        topic_id = self.topic_ids.get(name)
        return None if topic_id is None else self.topics_by_id.get(topic_id)

    def partition(self, name: str, index: int) -> PartitionRegistration | None:
        t = self.topic(name)
        return None if t is None else t.partitions.get(index)


def _endpoints(rec: Any) -> tuple[Endpoint, ...]:
    return tuple(Endpoint(e.name, e.host, e.port, e.security_protocol) for e in rec.end_points)


class MetadataDelta:
    """Records on top of `image`; `apply(offset, epoch)` gives the image they make."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self._topics: dict[uuid.UUID, TopicImage] | None = None
        self._changed_partitions: dict[uuid.UUID, dict[int, PartitionRegistration]] = {}
        self._brokers: dict[int, BrokerRegistration] | None = None
        self._controllers: dict[int, ControllerRegistration] | None = None
        self._configs: dict[tuple[int, str], dict[str, str]] = {}
        self._removed_configs: set[tuple[int, str]] = set()
        self._features: dict[str, int] | None = None
        self._next_producer_id: int | None = None
        self._acls: dict[uuid.UUID, AclBinding] | None = None
        self._quotas: dict[Entity, dict[str, float]] | None = None
        self._tokens: dict[str, TokenInformation] | None = None
        self._scram: dict[str, dict[str, ScramCredential]] | None = None
        self.kraft_version: int | None = None  # set by the loader from a KRaftVersion control record
        self.records = 0

    # --- copy on first write ---

    def _topic_map(self) -> dict[uuid.UUID, TopicImage]:
        if self._topics is None:
            self._topics = dict(self.image.topics_by_id)
        return self._topics

    def _broker_map(self) -> dict[int, BrokerRegistration]:
        if self._brokers is None:
            self._brokers = dict(self.image.brokers)
        return self._brokers

    def _partitions(self, topic_id: uuid.UUID) -> dict[int, PartitionRegistration] | None:
        if topic_id not in self._topic_map():
            return None
        changed = self._changed_partitions.get(topic_id)
        if changed is None:
            changed = self._changed_partitions[topic_id] = dict(self._topic_map()[topic_id].partitions)
        return changed

    def _config(self, key: tuple[int, str]) -> dict[str, str]:
        got = self._configs.get(key)
        if got is None:
            base: Mapping[str, str] = {} if key in self._removed_configs else self.image.configs.get(key, {})
            got = self._configs[key] = dict(base)
        return got

    # --- records ---

    def replay(self, api_key: int, rec: Any) -> None:
        """Apply one decoded record (see kcompat.metadata.records)."""
        self.records += 1
        handler = _REPLAY.get(api_key)
        if handler is not None:
            handler(self, rec)

    def _acl_map(self) -> dict[uuid.UUID, AclBinding]:
        if self._acls is None:
            self._acls = dict(self.image.acls)
        return self._acls

    def _acl(self, rec: Any) -> None:
        self._acl_map()[rec.id] = AclBinding(
            rec.resource_type,
            rec.resource_name,
            rec.pattern_type,
            rec.principal,
            rec.host,
            rec.operation,
            rec.permission_type,
        )

    def _remove_acl(self, rec: Any) -> None:
        self._acl_map().pop(rec.id, None)

    def _client_quota(self, rec: Any) -> None:
        if self._quotas is None:
            self._quotas = {e: dict(v) for e, v in self.image.client_quotas.items()}
        entity = entity_of((e.entity_type, e.entity_name) for e in rec.entity)
        values = self._quotas.setdefault(entity, {})
        if rec.remove:
            values.pop(rec.key, None)
            if not values:
                del self._quotas[entity]
        else:
            values[rec.key] = rec.value

    def _token_map(self) -> dict[str, TokenInformation]:
        if self._tokens is None:
            self._tokens = dict(self.image.delegation_tokens)
        return self._tokens

    def _delegation_token(self, rec: Any) -> None:
        self._token_map()[rec.token_id] = TokenInformation(
            rec.token_id,
            rec.owner,
            rec.requester,
            tuple(rec.renewers),
            rec.issue_timestamp,
            rec.max_timestamp,
            rec.expiration_timestamp,
        )

    def _remove_delegation_token(self, rec: Any) -> None:
        self._token_map().pop(rec.token_id, None)

    def _scram_map(self) -> dict[str, dict[str, ScramCredential]]:
        if self._scram is None:
            self._scram = {user: dict(mechs) for user, mechs in self.image.scram.items()}
        return self._scram

    def _user_scram_credential(self, rec: Any) -> None:
        mechanism = MECHANISMS.get(rec.mechanism)
        if mechanism is not None:
            credential = ScramCredential(rec.salt, rec.stored_key, rec.server_key, rec.iterations)
            self._scram_map().setdefault(rec.name, {})[mechanism] = credential

    def _remove_user_scram_credential(self, rec: Any) -> None:
        users = self._scram_map()
        mechs = users.get(rec.name)
        if mechs is not None:
            mechs.pop(MECHANISMS.get(rec.mechanism, ""), None)
            if not mechs:
                del users[rec.name]

    def _topic(self, rec: Any) -> None:
        self._topic_map()[rec.topic_id] = TopicImage(rec.name, rec.topic_id)
        self._changed_partitions[rec.topic_id] = {}

    def _partition(self, rec: Any) -> None:
        parts = self._partitions(rec.topic_id)
        if parts is not None:
            parts[rec.partition_id] = PartitionRegistration.from_record(rec)

    def _partition_change(self, rec: Any) -> None:
        parts = self._partitions(rec.topic_id)
        if parts is not None and rec.partition_id in parts:
            parts[rec.partition_id] = parts[rec.partition_id].merge(rec)

    def _remove_topic(self, rec: Any) -> None:
        topic = self._topic_map().pop(rec.topic_id, None)
        self._changed_partitions.pop(rec.topic_id, None)
        if topic is not None:
            key = (TOPIC_RESOURCE, topic.name)
            self._configs.pop(key, None)
            self._removed_configs.add(key)

    def _clear_elr(self, rec: Any) -> None:
        for topic_id, topic in list(self._topic_map().items()):
            if rec.topic_name and topic.name != rec.topic_name:
                continue
            current = self._changed_partitions.get(topic_id, topic.partitions)
            if not any(p.elr or p.last_known_elr for p in current.values()):
                continue  # untouched topics stay shared with the previous image
            parts = self._partitions(topic_id)
            assert parts is not None
            for index, p in parts.items():
                if p.elr or p.last_known_elr:
                    parts[index] = replace(
                        p, elr=(), last_known_elr=(), partition_epoch=p.partition_epoch + 1
                    )

    def _config_record(self, rec: Any) -> None:
        config = self._config((rec.resource_type, rec.resource_name))
        if rec.value is None:
            config.pop(rec.name, None)
        else:
            config[rec.name] = rec.value

    def _feature_level(self, rec: Any) -> None:
        if self._features is None:
            self._features = dict(self.image.features)
        if rec.feature_level == 0:
            self._features.pop(rec.name, None)
        else:
            self._features[rec.name] = rec.feature_level

    def _register_broker(self, rec: Any) -> None:
        self._broker_map()[rec.broker_id] = BrokerRegistration(
            broker_id=rec.broker_id,
            epoch=rec.broker_epoch,
            incarnation_id=rec.incarnation_id,
            endpoints=_endpoints(rec),
            features=MappingProxyType(
                {f.name: (f.min_supported_version, f.max_supported_version) for f in rec.features}
            ),
            rack=rec.rack,
            fenced=rec.fenced,
            in_controlled_shutdown=rec.in_controlled_shutdown,
            directories=tuple(rec.log_dirs or ()),
        )

    def _unregister_broker(self, rec: Any) -> None:
        brokers = self._broker_map()
        if rec.broker_id in brokers and brokers[rec.broker_id].epoch == rec.broker_epoch:
            del brokers[rec.broker_id]

    def _change_broker(self, broker_id: int, epoch: int, **changes: Any) -> None:
        brokers = self._broker_map()
        b = brokers.get(broker_id)
        if b is not None and b.epoch == epoch and changes:
            brokers[broker_id] = replace(b, **changes)

    def _registration_change(self, rec: Any) -> None:
        changes: dict[str, Any] = {}
        if rec.fenced in (-1, 1):
            changes["fenced"] = rec.fenced == 1
        if rec.in_controlled_shutdown == 1:
            changes["in_controlled_shutdown"] = True
        if rec.log_dirs:
            changes["directories"] = tuple(rec.log_dirs)
        self._change_broker(rec.broker_id, rec.broker_epoch, **changes)

    def _register_controller(self, rec: Any) -> None:
        if self._controllers is None:
            self._controllers = dict(self.image.controllers)
        self._controllers[rec.controller_id] = ControllerRegistration(
            rec.controller_id, rec.incarnation_id, _endpoints(rec)
        )

    def _producer_ids(self, rec: Any) -> None:
        self._next_producer_id = rec.next_producer_id

    # --- the next image ---

    def apply(self, offset: int, epoch: int) -> MetadataImage:
        image = self.image
        topics = image.topics_by_id
        topic_ids = image.topic_ids
        if self._topics is not None:
            merged = dict(self._topics)
            for topic_id, parts in self._changed_partitions.items():
                if topic_id in merged:
                    merged[topic_id] = replace(merged[topic_id], partitions=MappingProxyType(parts))
            topics = MappingProxyType(merged)
            topic_ids = MappingProxyType({t.name: t.topic_id for t in merged.values()})
        configs = image.configs
        if self._configs or self._removed_configs:
            new_configs = {k: v for k, v in image.configs.items() if k not in self._removed_configs}
            for key, values in self._configs.items():
                if values:
                    new_configs[key] = MappingProxyType(values)
                else:
                    new_configs.pop(key, None)
            configs = MappingProxyType(new_configs)
        return MetadataImage(
            offset=offset,
            epoch=epoch,
            topics_by_id=topics,
            topic_ids=topic_ids,
            brokers=image.brokers if self._brokers is None else MappingProxyType(self._brokers),
            controllers=image.controllers
            if self._controllers is None
            else MappingProxyType(self._controllers),
            configs=configs,
            features=image.features if self._features is None else MappingProxyType(self._features),
            next_producer_id=image.next_producer_id
            if self._next_producer_id is None
            else self._next_producer_id,
            acls=image.acls if self._acls is None else MappingProxyType(self._acls),
            kraft_version=image.kraft_version if self.kraft_version is None else self.kraft_version,
            client_quotas=image.client_quotas
            if self._quotas is None
            else MappingProxyType({e: MappingProxyType(v) for e, v in self._quotas.items()}),
            delegation_tokens=image.delegation_tokens
            if self._tokens is None
            else MappingProxyType(self._tokens),
            scram=image.scram
            if self._scram is None
            else MappingProxyType({u: MappingProxyType(m) for u, m in self._scram.items()}),
        )


_REPLAY = {
    r.TOPIC: MetadataDelta._topic,
    r.PARTITION: MetadataDelta._partition,
    r.PARTITION_CHANGE: MetadataDelta._partition_change,
    r.REMOVE_TOPIC: MetadataDelta._remove_topic,
    r.CLEAR_ELR: MetadataDelta._clear_elr,
    r.CONFIG: MetadataDelta._config_record,
    r.FEATURE_LEVEL: MetadataDelta._feature_level,
    r.REGISTER_BROKER: MetadataDelta._register_broker,
    r.UNREGISTER_BROKER: MetadataDelta._unregister_broker,
    r.BROKER_REGISTRATION_CHANGE: MetadataDelta._registration_change,
    r.FENCE_BROKER: lambda d, rec: d._change_broker(rec.id, rec.epoch, fenced=True),
    r.UNFENCE_BROKER: lambda d, rec: d._change_broker(rec.id, rec.epoch, fenced=False),
    r.REGISTER_CONTROLLER: MetadataDelta._register_controller,
    r.PRODUCER_IDS: MetadataDelta._producer_ids,
    r.ACCESS_CONTROL_ENTRY: MetadataDelta._acl,
    r.REMOVE_ACCESS_CONTROL_ENTRY: MetadataDelta._remove_acl,
    r.CLIENT_QUOTA: MetadataDelta._client_quota,
    r.DELEGATION_TOKEN: MetadataDelta._delegation_token,
    r.REMOVE_DELEGATION_TOKEN: MetadataDelta._remove_delegation_token,
    r.USER_SCRAM_CREDENTIAL: MetadataDelta._user_scram_credential,
    r.REMOVE_USER_SCRAM_CREDENTIAL: MetadataDelta._remove_user_scram_credential,
}
