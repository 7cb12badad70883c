"""`ImageLog` says in the log what a new metadata image changes for this broker: its own fencing,
the partitions it hosts, removed topics and changed configs."""

from __future__ import annotations

import logging

from kcompat.metadata.image import MetadataImage

log = logging.getLogger("kcompat.cluster")

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
