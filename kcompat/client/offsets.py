"""ListOffsets: a partition's log start, its end (high watermark) or the first offset at a time.

Kafka's special timestamps: -2 earliest (log start offset), -1 latest (the high watermark, the
offset the next record gets). A timestamp past every record answers offset -1.
"""

from __future__ import annotations

from kcompat.client.cluster import Cluster, TopicInfo
from kcompat.client.errors import check

LIST_OFFSETS = 2
EARLIEST = -2
LATEST = -1
CONSUMER_REPLICA = -1  # what a client puts in replica_id


def list_offsets(
    cluster: Cluster, topic: TopicInfo, timestamp: int, partitions: list[int] | None = None
) -> dict[int, int]:
    """partition -> offset for `timestamp` (EARLIEST, LATEST or epoch ms), asked of each leader."""
    out: dict[int, int] = {}
    for node, parts in cluster.leaders(topic, partitions).items():
        body = {
            "replica_id": CONSUMER_REPLICA,
            "isolation_level": 0,
            "timeout_ms": int(cluster.timeout * 1000),
            "topics": [
                {
                    "name": topic.name,
                    "partitions": [
                        {"partition_index": p, "timestamp": timestamp, "current_leader_epoch": -1}
                        for p in parts
                    ],
                }
            ],
        }
        _, answer = cluster.node(node).request(LIST_OFFSETS, body)
        for t in answer.topics:
            for p in t.partitions:
                check(p.error_code, f"{t.name}[{p.partition_index}]: ListOffsets")
                out[p.partition_index] = p.offset  # ListOffsets v1+ (Kafka 4 dropped v0)
    return out


def watermarks(
    cluster: Cluster, topic: TopicInfo, partitions: list[int] | None = None
) -> dict[int, tuple[int, int]]:
    """partition -> (log start offset, high watermark)."""
    start = list_offsets(cluster, topic, EARLIEST, partitions)
    end = list_offsets(cluster, topic, LATEST, partitions)
    return {p: (start[p], end[p]) for p in sorted(start)}
