"""Topic administration: CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
IncrementalAlterConfigs, DeleteRecords and DescribeLogDirs, each answered per topic or resource.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kcompat.client.cluster import Cluster, TopicInfo
from kcompat.client.errors import check

CREATE_TOPICS = 19
DELETE_TOPICS = 20
DELETE_RECORDS = 21
DESCRIBE_CONFIGS = 32
DESCRIBE_LOG_DIRS = 35
CREATE_PARTITIONS = 37
INCREMENTAL_ALTER_CONFIGS = 44
ZERO_UUID = uuid.UUID(int=0)  # "by name" in requests that take a name or an id

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
ALTER_OPS = {"set": 0, "delete": 1, "append": 2, "subtract": 3}  # IncrementalAlterConfigs' operations

# DescribeConfigs' config_source values, named as Kafka's ConfigSource enum names them.
CONFIG_SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: str
    read_only: bool
    sensitive: bool


def _timeout(cluster: Cluster) -> int:
    return int(cluster.timeout * 1000)


def create_topic(
    cluster: Cluster,
    name: str,
    partitions: int = -1,
    replication_factor: int = -1,
    configs: dict[str, str] | None = None,
    *,
    validate_only: bool = False,
) -> None:
    """-1 partitions or replication factor: the broker's default (CreateTopics v4+)."""
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": replication_factor,
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
            }
        ],
        "timeout_ms": _timeout(cluster),
        "validate_only": validate_only,
    }
    _, answer = cluster.bootstrap.request(CREATE_TOPICS, body)
    for t in answer.topics:
        check(t.error_code, f"topic {t.name}: CreateTopics", getattr(t, "error_message", None))


def delete_topics(cluster: Cluster, names: list[str]) -> dict[str, int]:
    """topic -> error code (0 deleted)."""
    conn = cluster.bootstrap
    version = conn.version_for(DELETE_TOPICS)
    body = {
        "topics": [{"name": n, "topic_id": ZERO_UUID} for n in names],
        "topic_names": names,
        "timeout_ms": _timeout(cluster),
    }
    _, answer = conn.request(DELETE_TOPICS, body, version)
    return {r.name: r.error_code for r in answer.responses}


def add_partitions(cluster: Cluster, name: str, total: int) -> None:
    body = {
        "topics": [{"name": name, "count": total, "assignments": None}],
        "timeout_ms": _timeout(cluster),
        "validate_only": False,
    }
    _, answer = cluster.bootstrap.request(CREATE_PARTITIONS, body)
    for r in answer.results:
        check(r.error_code, f"topic {r.name}: CreatePartitions", r.error_message)


def describe_configs(cluster: Cluster, resource_type: int, name: str) -> list[ConfigEntry]:
    body = {
        "resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": False,
        "include_documentation": False,
    }
    conn = cluster.node(int(name)) if resource_type == BROKER_RESOURCE and name else cluster.bootstrap
    version, answer = conn.request(DESCRIBE_CONFIGS, body)
    out = []
    for r in answer.results:
        check(r.error_code, f"{name}: DescribeConfigs", r.error_message)
        for c in r.configs:
            if version == 0:
                source = 5 if c.is_default else (1 if resource_type == TOPIC_RESOURCE else 4)
            else:
                source = c.config_source
            out.append(
                ConfigEntry(
                    c.name, c.value, CONFIG_SOURCES.get(source, str(source)), c.read_only, c.is_sensitive
                )
            )
    return sorted(out, key=lambda e: e.name)


def alter_topic_configs(cluster: Cluster, name: str, changes: list[tuple[str, str, str | None]]) -> None:
    """changes: (operation in ALTER_OPS, config name, value)."""
    alter_configs(cluster, TOPIC_RESOURCE, name, changes)


def alter_configs(
    cluster: Cluster, resource_type: int, name: str, changes: list[tuple[str, str, str | None]]
) -> None:
    """A topic's or a broker's configs ('' names the cluster-wide broker default); a broker's own
    go to that broker, as Kafka's admin client sends them."""
    body = {
        "resources": [
            {
                "resource_type": resource_type,
                "resource_name": name,
                "configs": [
                    {"name": k, "config_operation": ALTER_OPS[op], "value": v} for op, k, v in changes
                ],
            }
        ],
        "validate_only": False,
    }
    conn = cluster.node(int(name)) if resource_type == BROKER_RESOURCE and name else cluster.bootstrap
    _, answer = conn.request(INCREMENTAL_ALTER_CONFIGS, body)
    what = "topic" if resource_type == TOPIC_RESOURCE else "broker"
    for r in answer.responses:
        check(
            r.error_code, f"{what} {r.resource_name or 'default'}: IncrementalAlterConfigs", r.error_message
        )


def delete_records(cluster: Cluster, topic: TopicInfo, before: dict[int, int]) -> dict[int, int]:
    """Delete every record below before[partition] (-1: up to the high watermark); partition -> new log start."""
    out: dict[int, int] = {}
    for node, parts in cluster.leaders(topic, sorted(before)).items():
        body = {
            "topics": [
                {
                    "name": topic.name,
                    "partitions": [{"partition_index": p, "offset": before[p]} for p in parts],
                }
            ],
            "timeout_ms": _timeout(cluster),
        }
        _, answer = cluster.node(node).request(DELETE_RECORDS, body)
        for t in answer.topics:
            for p in t.partitions:
                check(p.error_code, f"{t.name}[{p.partition_index}]: DeleteRecords")
                out[p.partition_index] = p.low_watermark
    return out


def partition_sizes(cluster: Cluster, topic: TopicInfo) -> dict[int, int]:
    """partition -> bytes on disk, from DescribeLogDirs on each leader (summed over its log dirs)."""
    sizes: dict[int, int] = {}
    for node, parts in cluster.leaders(topic).items():
        body = {"topics": [{"topic": topic.name, "partitions": parts}]}
        _, answer = cluster.node(node).request(DESCRIBE_LOG_DIRS, body)
        check(getattr(answer, "error_code", 0), f"topic {topic.name}: DescribeLogDirs")
        for d in answer.results:
            if d.error_code:
                continue  # an offline log dir holds none of the leader's partitions
            for t in d.topics:
                for p in t.partitions:
                    if not p.is_future_key:
                        sizes[p.partition_index] = sizes.get(p.partition_index, 0) + p.partition_size
    return sizes
