"""KRaftMetadata: the MetadataView read from a KRaft image (brokers on a listener, partitions with
leader, ISR and offline replicas, topic configs that follow ConfigRecords)."""

from __future__ import annotations

import uuid
from typing import Any

from kcompat.config import BrokerConfig
from kcompat.metadata import records as r
from kcompat.metadata.loader import MetadataLoader
from kcompat.server.cluster.kraft_metadata import KRaftMetadata
from kcompat.wire.error_codes import ErrorCode
from tests.metadata.test_metadata_loader import D1, T1, batch, register, topic

UNFENCE = r.UNFENCE_BROKER


def partition(p: int, replicas: list[int], isr: list[int], leader: int) -> tuple[int, int, dict]:
    body = {"partition_id": p, "topic_id": T1, "replicas": replicas, "isr": isr, "removing_replicas": [],
            "adding_replicas": [], "leader": leader, "leader_epoch": 3, "partition_epoch": 0, "directories": [D1] * len(replicas)}  # fmt: skip
    return (r.PARTITION, 2, body)


def test_brokers_partitions_and_configs_from_the_image() -> None:
    loader = MetadataLoader()
    loader.append(batch(0, register(1, 10), register(2, 11), register(3, 12),
                        (UNFENCE, 0, {"id": 1, "epoch": 10}), (UNFENCE, 0, {"id": 2, "epoch": 11}),
                        topic("t", T1), partition(0, [1, 2, 3], [1, 2], 2), partition(1, [3, 1], [3], 3),
                        (r.CONFIG, 0, {"resource_type": 2, "resource_name": "t", "name": "min.insync.replicas", "value": "2"})))  # fmt: skip
    image = loader.advance(10)
    assert image is not None
    md = KRaftMetadata(BrokerConfig({"node.id": "1", "process.roles": "broker"}))
    md.set_image(image)
    assert [(b.node_id, b.port) for b in md.live_brokers("PLAINTEXT")] == [
        (1, 9001),
        (2, 9002),
    ]  # 3 is fenced
    assert md.live_brokers("OTHER") == []
    t = md.topic("t")
    assert t is not None and t.partitions == 2 and t.topic_id == T1 and md.topics.by_id(T1) == t
    assert md.leader_and_epoch(t, 0) == (2, 3)
    d0, d1 = md.describe_partition(t, 0, "PLAINTEXT"), md.describe_partition(t, 1, "PLAINTEXT")
    assert (d0.error_code, d0.replicas, d0.isr, d0.offline) == (0, [1, 2, 3], [1, 2], [3])
    assert d1.error_code == ErrorCode.LEADER_NOT_AVAILABLE and d1.offline == [3]  # its leader is fenced
    assert md.topic_config(t).get("min.insync.replicas") == 2

    loader.append(batch(10, (r.CONFIG, 0, {"resource_type": 2, "resource_name": "t", "name": "min.insync.replicas", "value": "3"})))  # fmt: skip
    image = loader.advance(11)
    assert image is not None
    md.set_image(image)
    assert md.topic_config(md.topic("t")).get("min.insync.replicas") == 3  # type: ignore[arg-type]
    assert md.topic("missing") is None and uuid.UUID(int=9) not in [t.topic_id for t in md.topics.all()]


def test_cached_metadata_entries_follow_every_image_change() -> None:
    """Metadata reuses a topic's encoded entry while partitions_stamp is equal: a leader/ISR change
    and a broker fenced (its replicas offline) must each give a new entry, an unrelated change not."""
    from types import SimpleNamespace

    from kcompat.server.handlers.metadata import described_topic, partitions_of
    from kcompat.wire.messages.metadata import METADATA
    from kcompat.wire.protocol import response_codec
    from kcompat.wire.types.metadata import MetadataResponse

    loader = MetadataLoader()
    loader.append(batch(0, register(1, 10), register(2, 11), (UNFENCE, 0, {"id": 1, "epoch": 10}),
                        (UNFENCE, 0, {"id": 2, "epoch": 11}), topic("t", T1), partition(0, [1, 2], [1, 2], 1)))  # fmt: skip
    md = KRaftMetadata(BrokerConfig({"node.id": "1", "process.roles": "broker"}))
    md.set_image(loader.advance(10))  # type: ignore[arg-type]
    ctx: Any = SimpleNamespace(metadata=md, listener="PLAINTEXT")

    def rows() -> list[tuple[int, int, int, list[int], list[int]]]:
        t = md.topic("t")
        assert t is not None
        got = [(p.error_code, p.leader_id, p.leader_epoch, p.isr_nodes, p.offline_replicas)
               for p in partitions_of(ctx, t)]  # fmt: skip
        for v in (12, 5):  # the encoded entry Metadata splices in follows the same changes
            codec = response_codec(METADATA.key)
            spliced = codec.decode(
                codec.encode(MetadataResponse(topics=[described_topic(ctx, t, v, 0)]), v), v
            )
            (topic,) = spliced.topics
            assert [(p.error_code, p.leader_id, p.leader_epoch if v >= 7 else got[i][2], p.isr_nodes,
                     p.offline_replicas) for i, p in enumerate(topic.partitions)] == got  # fmt: skip
        return got

    assert rows() == [(0, 1, 3, [1, 2], [])]
    first = described_topic(ctx, md.topic("t"), 12, 0)  # type: ignore[arg-type]
    loader.append(batch(10, (r.CONFIG, 0, {"resource_type": 2, "resource_name": "t", "name": "retention.ms", "value": "1"})))  # fmt: skip
    md.set_image(loader.advance(11))  # type: ignore[arg-type]
    assert described_topic(ctx, md.topic("t"), 12, 0) is first  # type: ignore[arg-type]  # unrelated: reused
    loader.append(
        batch(11, (r.PARTITION_CHANGE, 0, {"partition_id": 0, "topic_id": T1, "isr": [2], "leader": 2}))
    )
    md.set_image(loader.advance(12))  # type: ignore[arg-type]
    assert rows() == [(0, 2, 4, [2], [])]
    loader.append(batch(12, (r.FENCE_BROKER, 0, {"id": 1, "epoch": 10})))
    md.set_image(loader.advance(13))  # type: ignore[arg-type]
    assert rows() == [(0, 2, 4, [2], [1])]
    loader.append(batch(13, (r.FENCE_BROKER, 0, {"id": 2, "epoch": 11})))
    md.set_image(loader.advance(14))  # type: ignore[arg-type]
    assert rows()[0][0] == ErrorCode.LEADER_NOT_AVAILABLE
