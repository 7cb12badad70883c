"""What clients pushed (KIP-714 client telemetry) as /metrics families, read when scraped.

    kafka_server_client_metrics_instance_count            client instances known now (Kafka's gauge)
    kafka_server_client_metrics_throttle_total            requests refused THROTTLING_QUOTA_EXCEEDED
    kafka_server_client_metrics_unknown_subscription_request_total
    kcompat_client_telemetry_invalid_payloads_total       pushes whose metrics were not OTLP
    kcompat_client_telemetry_pushes_total{client...}      pushes accepted per client instance
    kcompat_client_telemetry_value{client..., metric, kind, attributes}
                                                          the last value of each series a client pushed

A client's OTLP metric names (org.apache.kafka.producer.record.send.rate) are not Prometheus names
and their attributes differ from metric to metric, so they are labels of one family: `metric` is
the name as pushed, `attributes` its data point's attributes as `k=v,k=v`. Bounded by the manager
(kcompat.telemetry.client_metrics): instances expire, and each keeps at most MAX_SERIES series.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from kcompat.telemetry.client_metrics import ClientMetricsManager

CLIENT_LABELS = ["client_instance_id", "client_id", "client_software_name", "client_software_version"]


def telemetry_metrics(manager: ClientMetricsManager, now_ms: int) -> Iterator[Metric]:
    live = manager.live(now_ms)
    count = GaugeMetricFamily(
        "kafka_server_client_metrics_instance_count", "Client telemetry instances the broker knows now."
    )
    count.add_metric([], len(live))
    yield count
    for name, doc, n in (
        ("throttle", "Telemetry requests refused for coming before the push interval.", manager.throttled),
        (
            "unknown_subscription_request",
            "Pushes naming a subscription id the client does not have.",
            manager.unknown_subscription,
        ),
    ):
        c = CounterMetricFamily(f"kafka_server_client_metrics_{name}", doc)
        c.add_metric([], n)
        yield c
    invalid = CounterMetricFamily(
        "kcompat_client_telemetry_invalid_payloads", "Pushes answered INVALID_RECORD: not OTLP metrics."
    )
    invalid.add_metric([], manager.invalid_payloads)
    yield invalid
    pushes = CounterMetricFamily(
        "kcompat_client_telemetry_pushes", "Telemetry pushes accepted from the client.", labels=CLIENT_LABELS
    )
    values = GaugeMetricFamily(
        "kcompat_client_telemetry_value",
        "The last value of each metric series the client pushed.",
        labels=[*CLIENT_LABELS, "metric", "kind", "attributes"],
    )
    for inst in live:
        who = [str(inst.instance_id)] + [str(inst.attributes.get(k) or "") for k in CLIENT_LABELS[1:]]
        pushes.add_metric(who, inst.pushes)
        for (metric, attributes), s in sorted(inst.series.items()):
            values.add_metric([*who, metric, s.kind, ",".join(f"{k}={v}" for k, v in attributes)], s.value)
    yield pushes
    yield values
