"""Starting cluster mode for a started Broker: the KRaftBroker (registration, heartbeats, the
metadata follower), and what hangs off its images: the replica manager's deltas, the follower
fetchers, the ISR manager, and forwarding, producer-id blocks and auto topic creation through the
active controller. `ImageLog` says in the log what a new image changes for this broker."""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from typing import Any

from kcompat.metadata.image import MetadataImage
from kcompat.server.cluster.controller_channel import ControllerChannel, parse_bootstrap
from kcompat.server.cluster.group_shards import GroupShards
from kcompat.server.cluster.kraft_broker import KRaftBroker
from kcompat.server.cluster.replication.alter_partition import IsrManager
from kcompat.server.cluster.replication.replica_delta import ReplicaDeltaApplier
from kcompat.server.cluster.replication.replica_fetcher import FetcherSettings, ReplicaFetcherManager
from kcompat.server.cluster.txn_channels import BrokerChannels, TxnMarkerSender, TxnVerifier
from kcompat.server.cluster.txn_shards import TXN_LOG_APPEND_TIMEOUT_MS, TxnShards

log = logging.getLogger("kcompat.cluster")


def _names(value: Any) -> list[str]:
    if value is None:
        return []
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    return [str(v).strip() for v in items if str(v).strip()]


def _from_base64(text: str) -> uuid.UUID:

    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def start_cluster_member(config: Any, broker: Any) -> KRaftBroker:
    """Start registration, heartbeats and the metadata follower for a started Broker."""
    logs = broker.replicas.logs
    assert logs is not None, "start_cluster_member runs after broker.start()"
    directory_id = _from_base64(next(iter(logs.directory_ids.values())))
    listener = config.advertised_listeners[0]
    member = KRaftBroker(
        node_id=broker.node_id,
        cluster_id=broker.cluster_id,
        directory_id=directory_id,
        # Every advertised listener with its security protocol (the bound port where 0 was advertised).
        listeners=[
            (x.name, *broker.endpoints.get(x.name, (x.host, x.port)), x.security_protocol)
            for x in config.advertised_listeners
        ],
        bootstrap=(bootstrap := parse_bootstrap(_names(config.get("controller.quorum.bootstrap.servers")))),
        rack=config.get("broker.rack"),
        heartbeat_interval_ms=int(config.get("broker.heartbeat.interval.ms")),
        session_timeout_ms=int(config.get("broker.session.timeout.ms")),
    )
    inter_broker = config.get("inter.broker.listener.name") or listener.name
    fetchers = ReplicaFetcherManager(
        FetcherSettings(
            node_id=broker.node_id,
            cluster_id=broker.cluster_id,
            directory_id=directory_id,
            max_wait_ms=int(config.get("replica.fetch.wait.max.ms")),
            partition_max_bytes=int(config.get("replica.fetch.max.bytes")),
            backoff_ms=int(config.get("replica.fetch.backoff.ms")),
        ),
        broker_epoch=lambda: member.lifecycle.broker_epoch,
        topic_id=lambda name: member.image.topic_ids.get(name),
        now_ms=broker.now_ms,
        on_append=lambda p: None,
    )
    member.replica_fetchers = fetchers
    broker.replicas.isr_manager = member.isr_manager = IsrManager(
        node_id=broker.node_id,
        channel=ControllerChannel(
            member.bootstrap, client_id=f"kcompat-broker-{broker.node_id}-alter-partition"
        ),
        broker_epoch=lambda: member.lifecycle.broker_epoch,
        image=lambda: member.image,
        quorum_leader=lambda: member.raft_leader,
        partitions=broker.replicas.partitions,
        waiters=broker.replicas.fetch_waiters,
        lag_max_ms=int(config.get("replica.lag.time.max.ms")),
        now_ms=broker.now_ms,
    )
    member.isr_manager.start()
    applier = ReplicaDeltaApplier(
        broker.node_id,
        broker.metadata,
        broker.replicas,
        fetchers,
        str(inter_broker),
        broker.now_ms,
        caught_up=lambda image: image.offset + 1 >= member.loader.high_watermark > 0,
    )
    image_log = ImageLog(member.node_id)
    groups = broker.group_service
    groups.shards = shards = GroupShards(
        groups,
        partitions=broker.replicas.partitions,
        waiters=broker.replicas.fetch_waiters,
        topic=broker.metadata.topic,
        timeout_ms=lambda: int(broker.config.get("offsets.commit.timeout.ms")),
    )
    txns = broker.txn_service
    txns.shards = txn_shards = TxnShards(
        txns,
        partitions=broker.replicas.partitions,
        waiters=broker.replicas.fetch_waiters,
        topic=broker.metadata.topic,
        timeout_ms=lambda: TXN_LOG_APPEND_TIMEOUT_MS,
    )
    # Connections of their own for markers and for verification: a marker's answer waits for
    # replication, and a produce's check must not queue behind it.
    txns.markers = TxnMarkerSender(
        BrokerChannels(broker.metadata, str(inter_broker), broker.node_id),
        write_local=txns.write_marker,
        partitions=broker.replicas.partitions,
        waiters=broker.replicas.fetch_waiters,
    )
    txns.verifier = TxnVerifier(BrokerChannels(broker.metadata, str(inter_broker), broker.node_id))

    def publish(image: MetadataImage) -> None:
        image_log.publish(image)
        applier.apply(image)
        shards.on_image()  # group coordinators load and unload with __consumer_offsets leadership
        txn_shards.on_image()  # and transaction coordinators with __transaction_state's
        txns.set_transaction_version(image.features.get("transaction.version", 0))

    async def before_publish(image: MetadataImage) -> None:
        await broker.replicas.make_logs(applier.new_logs(image))  # off the event loop, before apply

    member.before_image = before_publish
    member.on_image = publish
    broker.quorum_leader = lambda: member.raft_leader
    _use_controller(member, broker, bootstrap)
    member.start()
    interval_s = int(config.get("replica.high.watermark.checkpoint.interval.ms")) / 1000
    member.service_tasks.append(
        asyncio.create_task(_checkpoint_high_watermarks(broker.replicas, interval_s), name="hw-checkpoint")
    )
    log.info(
        "cluster mode: broker %d of cluster %s joining the controllers at %s",
        member.node_id,
        member.cluster_id,
        ",".join(_names(config.get("controller.quorum.bootstrap.servers"))),
    )
    return member


async def _checkpoint_high_watermarks(replicas: Any, interval_s: float) -> None:
    """Kafka's highwatermark-checkpoint task; the last one is written by the logs' close."""
    while True:
        await asyncio.sleep(interval_s)
        await replicas.checkpoint_high_watermarks()


def _use_controller(member: KRaftBroker, broker: Any, bootstrap: list[tuple[str, int]]) -> None:
    """Forwarding, producer-id blocks and auto topic creation, all through the active controller."""
    from kcompat.server.cluster.auto_topic_creation import AutoTopicCreationManager
    from kcompat.server.cluster.forwarding_manager import ForwardingManager
    from kcompat.server.cluster.producer_id_manager import ControllerProducerIds

    def leader() -> tuple[str, int] | None:
        return member.raft_leader

    forwarding = ForwardingManager(bootstrap, node_id=member.node_id, leader=leader)
    producer_ids = ControllerProducerIds(
        bootstrap, node_id=member.node_id, leader=leader, broker_epoch=lambda: member.lifecycle.broker_epoch
    )
    auto_create = AutoTopicCreationManager(
        forwarding, lambda key: broker.config.get(key)
    )  # the config in force now
    broker.dispatcher.forwarder = forwarding
    broker.metadata.use_controller(producer_ids, auto_create.create)
    member.services = [forwarding, producer_ids, auto_create]
    member.service_tasks.append(
        asyncio.create_task(forwarding.learn_controller_versions(), name="controller-api-versions")
    )


CONFIG_KINDS = {2: "topic", 4: "broker"}  # ConfigResource.Type codes


class ImageLog:
    """Logs what a new image changes for this broker: its own fencing, and partitions it hosts."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.previous = MetadataImage()

    def publish(self, image: MetadataImage) -> None:
        old, new = self.previous.brokers.get(self.node_id), image.brokers.get(self.node_id)
        if new is not None and (old is None or old.fenced != new.fenced):
            log.info(
                "metadata: broker %d is %s (epoch %d)",
                self.node_id,
                "fenced" if new.fenced else "unfenced",
                new.epoch,
            )
        for topic_id, topic in image.topics_by_id.items():
            before = self.previous.topics_by_id.get(topic_id)
            if before is topic:
                continue
            for index, p in sorted(topic.partitions.items()):
                if self.node_id not in p.replicas or (
                    before is not None and before.partitions.get(index) == p
                ):
                    continue
                role = "leader" if p.leader == self.node_id else "follower"
                log.info(
                    "metadata: %s-%d %s: leader %d epoch %d, replicas %s, isr %s (offset %d)",
                    topic.name,
                    index,
                    role,
                    p.leader,
                    p.leader_epoch,
                    list(p.replicas),
                    list(p.isr),
                    image.offset,
                )
        for topic_id, topic in self.previous.topics_by_id.items():
            if topic_id not in image.topics_by_id:
                log.info("metadata: topic %s removed (offset %d)", topic.name, image.offset)
        if image.configs is not self.previous.configs:
            for (kind, name), values in image.configs.items():
                if self.previous.configs.get((kind, name)) != values:
                    log.info(
                        "metadata: configs of %s %r: %s",
                        CONFIG_KINDS.get(kind, kind),
                        name,
                        ", ".join(f"{k}={v}" for k, v in sorted(values.items())),
                    )
        self.previous = image
