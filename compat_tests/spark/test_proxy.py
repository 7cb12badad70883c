"""Spark's Kafka batch sink and source through `kcompat proxy` in front of a 3-broker kcompat
cluster under a real Kafka 4.3.1 controller (issue 27): a batch write with acks=all and a batch
read round-trip exact records, the driver and executors knowing only the proxy's endpoints; every
answer the proxy sent is decoded and none names an upstream address."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from compat_tests.cluster.test_replication import BROKER_IDS, Cluster
from compat_tests.proxy.checks import assert_no_upstream_address
from compat_tests.proxy.harness import ProxyThread
from kcompat.testing_cluster import ControllerQuorum

from .kafka_io import consume_all, spark_rows_to_recs
from .support import kafka_reader, with_millis
from .test_cluster import PARTITIONS, create_topic, records

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def cluster(kraft_quorum: ControllerQuorum, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(kraft_quorum, tmp_path_factory.mktemp("spark-proxy-upstream"))
    with c.running(BROKER_IDS):
        yield c


@pytest.fixture(scope="module")
def proxy(cluster: Cluster) -> Iterator[ProxyThread]:
    with ProxyThread(cluster.bootstrap) as p:
        yield p


def test_batch_write_and_read_through_the_proxy(spark: Any, cluster: Cluster, proxy: ProxyThread) -> None:
    topic = create_topic(cluster, "spark-proxy-batch")
    sent = records(topic, 40)
    rows = spark.sparkContext.parallelize([(r.key, r.value, r.partition) for r in sent], PARTITIONS)
    df = spark.createDataFrame(rows, "key binary, value binary, partition int")
    (
        df.write.format("kafka")
        .option("kafka.bootstrap.servers", proxy.bootstrap)
        .option("kafka.acks", "all")
        .option("topic", topic)
        .save()
    )
    # Read back directly from the upstream: the proxy wrote each record once, where Spark said.
    got = consume_all(cluster.bootstrap, topic, PARTITIONS)
    assert [(r.partition, r.key, r.value) for r in got] == [(r.partition, r.key, r.value) for r in sent]
    read_rows = with_millis(
        kafka_reader(
            spark, proxy.bootstrap, subscribe=topic, startingOffsets="earliest", includeHeaders="true"
        ).load()
    ).collect()
    read = spark_rows_to_recs(read_rows)
    assert [(r.partition, r.offset, r.key, r.value) for r in read] == [
        (r.partition, r.offset, r.key, r.value) for r in got
    ]
    assert {r.partition: r.offset for r in read} == dict.fromkeys(range(PARTITIONS), 39)
    assert_no_upstream_address(proxy, {b.port for b in cluster.brokers.values()})
