"""MessageCodec.pre_encode: a struct encoded once and spliced into messages encoded later, by the
generated coders and the reference ones alike; a piece of another struct or version is refused."""

from __future__ import annotations

import uuid

import pytest

from kcompat.wire.codec import MessageCodec
from kcompat.wire.messages.metadata import METADATA
from kcompat.wire.types.metadata import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)


def topic(name: str, partitions: int) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=0, name=name, topic_id=uuid.UUID(int=7), is_internal=False, topic_authorized_operations=248,
        partitions=[MetadataResponsePartition(partition_index=i, leader_id=1, leader_epoch=i, replica_nodes=[1, 2],
                                              isr_nodes=[1], offline_replicas=[2]) for i in range(partitions)],
    )  # fmt: skip


@pytest.mark.parametrize("generated", [True, False])
def test_spliced_topics_encode_as_the_fields_do_in_every_version(generated: bool) -> None:
    codec = MessageCodec(METADATA.response, generated=generated)
    brokers = [MetadataResponseBroker(node_id=1, host="h", port=9092, rack=None)]
    a, b = topic("a", 3), topic("b", 200)
    for v in range(14):  # Metadata v0-13
        plain = codec.encode(MetadataResponse(brokers=brokers, topics=[a, b]), v)
        mixed = MetadataResponse(brokers=brokers, topics=[codec.pre_encode(a, v), b])
        assert codec.encode(mixed, v) == plain, v
        spliced = MetadataResponse(brokers=brokers, topics=[codec.pre_encode(a, v), codec.pre_encode(b, v)])
        assert codec.encode(spliced, v) == plain, v
        assert codec.decode(plain, v) == codec.decode(codec.encode(spliced, v), v)


@pytest.mark.parametrize("generated", [True, False])
def test_a_piece_of_another_version_or_struct_is_refused(generated: bool) -> None:
    codec = MessageCodec(METADATA.response, generated=generated)
    with pytest.raises(TypeError, match="encoded at v9"):
        codec.encode(MetadataResponse(topics=[codec.pre_encode(topic("a", 1), 9)]), 12)
    part = codec.pre_encode(MetadataResponsePartition(partition_index=0), 12)
    with pytest.raises(TypeError, match="MetadataResponsePartition"):
        codec.encode(MetadataResponse(topics=[part]), 12)
    with pytest.raises(TypeError, match="holds no"):
        MessageCodec(METADATA.request).pre_encode(topic("a", 1), 12)
