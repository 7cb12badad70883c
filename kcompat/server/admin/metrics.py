"""Prometheus /metrics: the broker's counters and state, turned into metric families at scrape time.

prometheus-client writes the exposition format (and its OpenMetrics variant) and owns the naming
rules; a custom Collector reads kcompat's plain counters (broker_stats.py) and the logs and groups
as they stand when scraped, so serving a record never touches a Prometheus object. Imported only
when the admin listener is on.

Names are the ones a Kafka operator already graphs:
  * Kafka's JMX metrics as the Prometheus JMX exporter names them:
      kafka_server_brokertopicmetrics_{messagesin,bytesin,bytesout}_total{topic}
      kafka_network_requestmetrics_{requests,errors,cancelled}_total, ..._totaltimems{quantile},
      ..._totaltime_seconds (a histogram): see request_metrics.py
      kafka_server_socketservermetrics_connection_count, ..._connection_creation_total
      kafka_log_log_{size,logstartoffset,logendoffset,numlogsegments}{topic,partition}
  * the consumer groups as kafka_exporter names them, computed now (lag = log end - committed):
      kafka_consumergroup_current_offset{consumergroup,topic,partition}
      kafka_consumergroup_lag{consumergroup,topic,partition}, kafka_consumergroup_lag_sum{consumergroup,topic}
      kafka_consumergroup_members{consumergroup}
      kafka_topic_partitions{topic}, kafka_topic_partition_{current,oldest}_offset{topic,partition}
  * what clients push (KIP-714 client telemetry): see telemetry_metrics.py
  * cluster mode only, Kafka's ReplicaManager gauges and meters for the replicas this broker hosts:
      kafka_server_replicamanager_{partitioncount,leadercount,underreplicatedpartitions,
        underminisrpartitioncount,atminisrpartitioncount,offlinereplicacount}
      kafka_server_replicamanager_{isrshrinks,isrexpands}_total   ISR changes this leader committed
      kafka_controller_kafkacontroller_offlinepartitionscount     partitions without a leader in the
        metadata image (the controller's gauge, as every broker's image shows it)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from kcompat.capture import CaptureEngine
from kcompat.faults import FaultEngine
from kcompat.metadata.image import MetadataImage
from kcompat.server.admin.request_metrics import RecentCounts, request_metrics
from kcompat.server.admin.telemetry_metrics import telemetry_metrics
from kcompat.storage.topic_store import CONSUMER_OFFSETS

if TYPE_CHECKING:
    from kcompat.server.broker import Broker

CONTENT_TYPE = CONTENT_TYPE_LATEST


class BrokerCollector:
    """Everything /metrics shows, read from the broker when scraped."""

    def __init__(self, broker: Broker, connections: Callable[[], int], accepted: Callable[[], int]) -> None:
        self.broker = broker
        self.connections = connections
        self.accepted = accepted
        self.recent = RecentCounts()

    def collect(self) -> Iterator[Metric]:
        yield from self._topic_counters()
        yield from self._requests()
        count = GaugeMetricFamily(
            "kafka_server_socketservermetrics_connection_count", "Client connections open now."
        )
        count.add_metric([], self.connections())
        yield count
        created = CounterMetricFamily(
            "kafka_server_socketservermetrics_connection_creation",
            "Client connections accepted since start-up.",
        )
        created.add_metric([], self.accepted())
        yield created
        yield from self._logs()
        yield from self._groups()
        yield from fault_metrics(self.broker.faults)
        yield from capture_metrics(self.broker.captures)
        yield from telemetry_metrics(self.broker.telemetry, self.broker.now_ms())
        if self.broker.replicas.cluster_mode:
            yield from replica_manager_metrics(self.broker)

    def _topic_counters(self) -> Iterator[Metric]:
        prefix = "kafka_server_brokertopicmetrics_"
        families = {
            "messages_in": CounterMetricFamily(
                prefix + "messagesin", "Records produced to the topic.", labels=["topic"]
            ),
            "bytes_in": CounterMetricFamily(
                prefix + "bytesin", "Record batch bytes produced to the topic.", labels=["topic"]
            ),
            "bytes_out": CounterMetricFamily(
                prefix + "bytesout", "Record batch bytes consumers fetched from the topic.", labels=["topic"]
            ),
            "replication_bytes_out": CounterMetricFamily(
                prefix + "replicationbytesout",
                "Record batch bytes followers fetched from the topic.",
                labels=["topic"],
            ),
        }
        exists = self.broker.metadata.topic
        for name, stats in sorted(self.broker.stats.topics.items()):
            if exists(name) is None:
                continue  # deleted: its counters are no longer shown (Kafka removes them too)
            for attr, family in families.items():
                family.add_metric([name], getattr(stats, attr))
        yield from families.values()

    def _requests(self) -> Iterator[Metric]:
        yield from request_metrics(self.broker.stats.requests, self.recent)

    def _logs(self) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of the partition's log on disk.", labels=labels)
        start = GaugeMetricFamily(
            "kafka_log_log_logstartoffset", "The partition's log start offset.", labels=labels
        )
        end = GaugeMetricFamily(
            "kafka_log_log_logendoffset", "The partition's log end offset.", labels=labels
        )
        segments = GaugeMetricFamily(
            "kafka_log_log_numlogsegments", "Segments of the partition's log.", labels=labels
        )
        current = GaugeMetricFamily(
            "kafka_topic_partition_current_offset", "The partition's high watermark.", labels=labels
        )
        oldest = GaugeMetricFamily(
            "kafka_topic_partition_oldest_offset", "The partition's log start offset.", labels=labels
        )
        partitions = GaugeMetricFamily("kafka_topic_partitions", "Partitions of the topic.", labels=["topic"])
        for t in sorted(self.broker.metadata.topics.all(), key=lambda t: t.name):
            partitions.add_metric([t.name], t.partitions)
        logs = self.broker.replicas.logs
        for plog in sorted(logs.logs() if logs is not None else (), key=lambda p: (p.topic, p.partition)):
            tp = [plog.topic, str(plog.partition)]
            size.add_metric(tp, plog.size)
            start.add_metric(tp, plog.log_start_offset)
            end.add_metric(tp, plog.log_end_offset)
            segments.add_metric(tp, len(plog.segments))
            if plog.topic != CONSUMER_OFFSETS:
                current.add_metric(tp, plog.high_watermark)
                oldest.add_metric(tp, plog.log_start_offset)
        yield from (size, start, end, segments, partitions, current, oldest)

    def _groups(self) -> Iterator[Metric]:
        labels = ["consumergroup", "topic", "partition"]
        committed = GaugeMetricFamily(
            "kafka_consumergroup_current_offset", "The group's committed offset.", labels=labels
        )
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag", "Log end offset minus the group's committed offset.", labels=labels
        )
        lag_sum = GaugeMetricFamily(
            "kafka_consumergroup_lag_sum",
            "The group's lag summed over the topic's partitions.",
            labels=["consumergroup", "topic"],
        )
        members = GaugeMetricFamily(
            "kafka_consumergroup_members", "Members of the group.", labels=["consumergroup"]
        )
        read = self.broker.group_service.snapshot()
        for group_id, group in sorted(read.groups.items()):
            members.add_metric([group_id], len(group.members))
        for group_id, offsets in sorted(read.committed.items()):
            sums: dict[str, int] = {}
            for (topic, partition), offset in sorted(offsets.items()):
                end = self._log_end(topic, partition)
                if end is None:
                    continue  # the topic was deleted; kafka_exporter shows only what it can describe
                behind = max(end - offset, 0)
                committed.add_metric([group_id, topic, str(partition)], offset)
                lag.add_metric([group_id, topic, str(partition)], behind)
                sums[topic] = sums.get(topic, 0) + behind
            for topic, total in sums.items():
                lag_sum.add_metric([group_id, topic], total)
        yield from (committed, lag, lag_sum, members)

    def _log_end(self, topic: str, partition: int) -> int | None:
        logs = self.broker.replicas.logs
        plog = logs.get(topic, partition) if logs is not None else None
        return plog.high_watermark if plog is not None else None


def replica_manager_metrics(broker: Broker) -> Iterator[Metric]:
    """Kafka's ReplicaManager metrics: under-replicated = led here with an ISR shorter than the
    replicas; offline replicas = hosted here on an offline log dir (kcompat stops on a failed dir, so
    a running broker has none)."""
    replicas = broker.replicas
    led = [p for p in replicas.partitions.values() if p.is_leader]
    prefix = "kafka_server_replicamanager_"
    gauges = {
        "partitioncount": ("Replicas this broker hosts.", len(replicas.partitions)),
        "leadercount": ("Partitions this broker leads.", len(led)),
        "underreplicatedpartitions": (
            "Partitions led here whose ISR is smaller than their replicas.",
            sum(len(p.state.isr) < len(p.state.replicas) for p in led),
        ),
        "underminisrpartitioncount": (
            "Partitions led here whose ISR is below min.insync.replicas.",
            sum(len(p.state.isr) < p.min_isr for p in led),
        ),
        "atminisrpartitioncount": (
            "Partitions led here whose ISR is exactly min.insync.replicas.",
            sum(len(p.state.isr) == p.min_isr for p in led),
        ),
        "offlinereplicacount": ("Replicas hosted here on an offline log dir.", 0),
    }
    for name, (doc, value) in gauges.items():
        g = GaugeMetricFamily(prefix + name, doc)
        g.add_metric([], value)
        yield g
    isr = replicas.isr_manager
    for name, doc, value in (
        ("isrshrinks", "ISR shrinks this leader committed.", 0 if isr is None else isr.isr_shrinks),
        ("isrexpands", "ISR expands this leader committed.", 0 if isr is None else isr.isr_expands),
    ):
        c = CounterMetricFamily(prefix + name, doc)
        c.add_metric([], value)
        yield c
    offline = GaugeMetricFamily(
        "kafka_controller_kafkacontroller_offlinepartitionscount",
        "Partitions without a leader, as the metadata image shows them.",
    )
    image = broker.cluster.image()
    offline.add_metric([], 0 if image is None else offline_partitions(image))
    yield offline


def offline_partitions(image: MetadataImage) -> int:
    return sum(p.leader < 0 for t in image.topics_by_id.values() for p in t.partitions.values())


def fault_metrics(engine: FaultEngine) -> Iterator[Metric]:
    """The fault rules set now, and how often each fired (by action: kept after a rule is cleared)."""
    rules = GaugeMetricFamily("kcompat_fault_rules", "Fault rules set now, by state.", labels=["state"])
    for state in ("armed", "spent"):
        rules.add_metric([state], sum(1 for s in engine.rules.values() if s.state == state))
    fired = CounterMetricFamily(
        "kcompat_fault_fired", "Requests a fault rule acted on since start-up, by action.", labels=["action"]
    )
    for action, n in sorted(engine.fired_by_action.items()):
        fired.add_metric([action], n)
    by_rule = CounterMetricFamily(
        "kcompat_fault_rule_fired", "Requests each fault rule set now acted on.", labels=["rule", "action"]
    )
    for rule_id, s in engine.rules.items():
        by_rule.add_metric([str(rule_id), s.rule.action.kind], s.fired)
    yield from (rules, fired, by_rule)


def capture_metrics(engine: CaptureEngine) -> Iterator[Metric]:
    """Each traffic capture's matched exchanges, what it kept (records, or log lines written) and
    what it dropped (over max_records, or lines its writer's queue had no room for)."""
    labels = ["capture", "kind"]
    seen = GaugeMetricFamily("kcompat_capture_seen", "Requests each capture matched.", labels=labels)
    kept = GaugeMetricFamily("kcompat_capture_kept", "Records kept or log lines written.", labels=labels)
    dropped = GaugeMetricFamily("kcompat_capture_dropped", "Records or log lines dropped.", labels=labels)
    for c in engine.listing():
        key = [str(c["id"]), c["kind"]]
        seen.add_metric(key, c["seen"])
        kept.add_metric(key, c.get("captured", c.get("written", 0)))
        dropped.add_metric(key, c["dropped"])
    yield from (seen, kept, dropped)


def metrics_page(collector: BrokerCollector) -> Callable[[dict[str, list[str]]], tuple[bytes, str]]:
    """The /metrics body and its content type, from a registry holding only `collector`."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    # process_* (memory, CPU, open files), python_info and python_gc_*, as any Python exporter has.
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)

    def render(query: dict[str, list[str]]) -> tuple[bytes, str]:
        return generate_latest(registry), CONTENT_TYPE

    return render
