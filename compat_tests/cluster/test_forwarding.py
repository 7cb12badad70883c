"""Cluster mode, forwarding: admin requests sent to a kcompat broker reach Kafka's active controller
inside Envelope (key 58) and the controller's answer comes back to the client; producer ids come in
blocks from the controller (AllocateProducerIds); Metadata auto-creates topics through the
controller. The effect is checked where it lands: in the controller's metadata, as the kcompat
brokers' images log it, and through the controller itself (`--bootstrap-controller`).

One cluster for the module (the `kcompat_cluster` plugin fixture, = `kcompat dev-cluster`): one
Kafka 4.3 controller and two kcompat brokers.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from kafka.admin import KafkaAdminClient, NewPartitions
from support import kafka_tool

from compat_tests.crash.wire_client import WireClient
from kcompat.testing import wait_until
from kcompat.testing_cluster import DevCluster

INIT_PRODUCER_ID, METADATA, CREATE_TOPICS = 22, 3, 19
LEADER_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, INVALID_REPLICATION_FACTOR = 5, 14, 38


@pytest.fixture(scope="module")
def kcompat_cluster_brokers() -> int:
    return 2


def broker_log(cluster: DevCluster, node_id: int) -> str:
    return cluster.brokers[node_id - 1].log_file.read_text(errors="replace")


def in_image(cluster: DevCluster, text: str, node_id: int = 1) -> bool:
    return text in broker_log(cluster, node_id)


def wire(cluster: DevCluster, node_id: int) -> WireClient:
    b = cluster.brokers[node_id - 1]
    return WireClient("127.0.0.1", b.port)


def test_kafka_topics_create_and_admin_alter_delete_go_through_the_controller(
    kcompat_cluster: DevCluster,
) -> None:
    cluster = kcompat_cluster
    out = kafka_tool("kafka-topics", "--bootstrap-server", cluster.brokers[0].endpoint, "--create", "--topic", "fwd",
                     "--partitions", "2", "--replication-factor", "2").stdout  # fmt: skip
    assert "Created topic fwd." in out
    # the controller placed it on both brokers: each broker's image has both partitions, RF 2
    for node in (1, 2):
        for p in (0, 1):
            wait_until(lambda p=p, node=node: re.search(rf"metadata: fwd-{p} \w+: leader \d epoch 0, replicas \[\d, \d\]",
                                                      broker_log(cluster, node)) is not None, f"fwd-{p} in broker {node}'s image", timeout=40)  # fmt: skip

    # CreatePartitions and DeleteTopics from kafka-python, through the second broker
    admin = KafkaAdminClient(bootstrap_servers=cluster.brokers[1].endpoint, request_timeout_ms=30000)
    try:
        admin.create_partitions({"fwd": NewPartitions(total_count=3)})
        wait_until(
            lambda: in_image(cluster, "metadata: fwd-2 "), "the third partition in the image", timeout=40
        )
        admin.delete_topics(["fwd"])
    finally:
        admin.close()
    wait_until(
        lambda: in_image(cluster, "metadata: topic fwd removed"),
        "the topic's removal in the image",
        timeout=40,
    )
    wait_until(
        lambda: in_image(cluster, "metadata: topic fwd removed", 2),
        "the topic's removal in broker 2's image",
        timeout=40,
    )


def test_replication_factor_above_the_live_brokers_is_refused_by_the_controller(
    kcompat_cluster: DevCluster,
) -> None:
    cluster = kcompat_cluster
    result = kafka_tool("kafka-topics", "--bootstrap-server", cluster.brokers[0].endpoint, "--create", "--topic", "too-wide",
                        "--partitions", "1", "--replication-factor", "3", check=False)  # fmt: skip
    assert result.returncode != 0
    assert "InvalidReplicationFactorException" in result.stderr + result.stdout
    assert "only 2 broker(s) are registered" in result.stderr + result.stdout  # the controller's own words
    client = wire(cluster, 2)
    try:
        r = client.call(CREATE_TOPICS, 7, {
            "topics": [{"name": "too-wide", "num_partitions": 1, "replication_factor": 3, "assignments": [], "configs": []}],
            "timeout_ms": 10000, "validate_only": False,
        })  # fmt: skip
    finally:
        client.close()
    assert r.topics[0].error_code == INVALID_REPLICATION_FACTOR, r


def test_kafka_configs_alter_reaches_the_controller(kcompat_cluster: DevCluster) -> None:
    cluster = kcompat_cluster
    bootstrap = cluster.brokers[0].endpoint
    kafka_tool("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", "configured",
               "--partitions", "1", "--replication-factor", "1")  # fmt: skip
    out = kafka_tool("kafka-configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "topics",
                     "--entity-name", "configured", "--add-config", "retention.ms=123456").stdout  # fmt: skip
    assert "Completed updating config for topic configured." in out
    wait_until(
        lambda: in_image(cluster, "metadata: configs of topic 'configured': retention.ms=123456"),
        "the topic config in the image",
        timeout=40,
    )
    # A cluster-wide broker default, set through a kcompat broker, read back from the controller.
    kafka_tool("kafka-configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "brokers", "--entity-default",
               "--add-config", "log.cleaner.threads=2")  # fmt: skip
    described = kafka_tool("kafka-configs", "--bootstrap-controller", cluster.quorum.bootstrap_servers, "--describe",
                           "--entity-type", "brokers", "--entity-default").stdout  # fmt: skip
    assert "log.cleaner.threads=2" in described, described


def test_kafka_metadata_quorum_through_a_kcompat_broker(kcompat_cluster: DevCluster) -> None:
    cluster = kcompat_cluster
    out = kafka_tool(
        "kafka-metadata-quorum", "--bootstrap-server", cluster.brokers[1].endpoint, "describe", "--status"
    ).stdout
    fields = {
        k.strip(): v.strip() for k, v in (line.split(":", 1) for line in out.splitlines() if ":" in line)
    }
    assert fields["ClusterId"] == cluster.quorum.cluster_id
    assert fields["LeaderId"] == str(cluster.quorum.voter_ids[0])
    assert '"id": 1' in fields["CurrentObservers"] and '"id": 2' in fields["CurrentObservers"]


def test_api_versions_advertise_the_forwarded_apis(kcompat_cluster: DevCluster) -> None:
    client = wire(kcompat_cluster, 1)
    try:
        r = client.call(18, 3, {"client_software_name": "kcompat-test", "client_software_version": "1"})
    finally:
        client.close()
    keys = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
    # ElectLeaders, Alter/ListPartitionReassignments, DescribeQuorum, UpdateFeatures, UnregisterBroker:
    # with the controller's ranges, as they are forwarded to it
    assert {43, 45, 46, 55, 57, 64} <= set(keys), keys
    assert keys[19][1] == 7 and keys[55][1] >= 2


def init_producer_id(cluster: DevCluster, node_id: int) -> int:
    """An idempotent producer's id from broker `node_id` (retrying COORDINATOR_LOAD_IN_PROGRESS,
    the answer until the broker's first block arrives)."""
    client = wire(cluster, node_id)
    try:
        deadline = time.monotonic() + 20
        while True:
            r = client.call(INIT_PRODUCER_ID, 5, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                                  "producer_id": -1, "producer_epoch": -1})  # fmt: skip
            if r.error_code != COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    finally:
        client.close()
    assert r.error_code == 0, r
    return int(r.producer_id)


def block_of(cluster: DevCluster, node_id: int) -> tuple[int, int]:
    m = re.search(r"producer id block \[(\d+), (\d+)\) from the controller", broker_log(cluster, node_id))
    assert m is not None, broker_log(cluster, node_id)[-2000:]
    return int(m.group(1)), int(m.group(2))


def test_producer_ids_come_from_controller_blocks(kcompat_cluster: DevCluster) -> None:
    cluster = kcompat_cluster
    first = [init_producer_id(cluster, 1) for _ in range(3)]
    second = init_producer_id(cluster, 2)
    lo1, hi1 = block_of(cluster, 1)
    lo2, hi2 = block_of(cluster, 2)
    assert first == list(range(first[0], first[0] + 3)) and all(lo1 <= pid < hi1 for pid in first)
    assert lo2 <= second < hi2
    assert hi1 <= lo2 or hi2 <= lo1  # two brokers, two blocks that do not overlap


def test_metadata_auto_creates_through_the_controller(kcompat_cluster: DevCluster) -> None:
    cluster = kcompat_cluster
    client = wire(cluster, 1)
    try:
        r = client.call(METADATA, 12, {"topics": [{"name": "auto-made", "topic_id": uuid.UUID(int=0)}],
                                       "allow_auto_topic_creation": True, "include_topic_authorized_operations": False})  # fmt: skip
    finally:
        client.close()
    assert r.topics[0].error_code == LEADER_NOT_AVAILABLE, (
        r
    )  # as Kafka answers while the controller creates it
    # one partition (num.partitions), placed by the controller on one of the two brokers
    wait_until(
        lambda: (
            in_image(cluster, "metadata: auto-made-0 ", 1) or in_image(cluster, "metadata: auto-made-0 ", 2)
        ),
        "the auto-created topic in an image",
        timeout=40,
    )
    assert "auto-created topic auto-made through the controller (1 partitions)" in broker_log(cluster, 1)


@pytest.mark.slow  # ~15 s: a controller of its own; the default layer runs DevCluster through kcompat_cluster
def test_dev_cluster_command_starts_prints_and_stops_everything(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "kcompat", "dev-cluster", "--brokers", "1", "--dir", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        while not any(line.startswith("logs and data in") for line in lines):
            line = proc.stdout.readline()
            assert line, "dev-cluster ended early:\n" + "".join(lines)
            lines.append(line)
        text = "".join(lines)
        bootstrap = re.search(r"bootstrap servers: (\S+)", text)
        pids_line = re.search(r"processes: ([\d ]+)", text)
        assert bootstrap is not None and pids_line is not None, text
        pids = [int(p) for p in pids_line.group(1).split()]
        assert len(pids) == 2  # the controller and the broker
        out = kafka_tool(
            "kafka-metadata-quorum", "--bootstrap-server", bootstrap.group(1), "describe", "--status"
        ).stdout
        assert '"id": 1' in out
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists(), f"process {pid} of the dev cluster is still there"


def test_leader_election_reassignments_and_features_are_answered_by_the_controller(
    kcompat_cluster: DevCluster,
) -> None:
    cluster = kcompat_cluster
    bootstrap = cluster.brokers[0].endpoint
    kafka_tool("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", "elect",
               "--partitions", "1", "--replication-factor", "2")  # fmt: skip
    # ElectLeaders: the preferred replica already leads, which only the controller knows here
    election = kafka_tool("kafka-leader-election", "--bootstrap-server", bootstrap, "--election-type", "PREFERRED",
                          "--topic", "elect", "--partition", "0", check=False)  # fmt: skip
    assert "Valid replica already elected for partitions elect-0" in election.stdout + election.stderr, (
        election
    )
    # ListPartitionReassignments
    listed = kafka_tool("kafka-reassign-partitions", "--bootstrap-server", bootstrap, "--list").stdout
    assert "No partition reassignments found." in listed, listed
    # UpdateFeatures (validate only): the controller checks the level against the registered brokers
    features = kafka_tool("kafka-features", "--bootstrap-server", bootstrap, "upgrade", "--feature", "group.version=1",
                          "--dry-run", check=False)  # fmt: skip
    assert "group.version can be upgraded to 1." in features.stdout, features
    # UnregisterBroker: forwarded, so the controller's registry answers for an id never registered
    gone = kafka_tool(
        "kafka-cluster", "unregister", "--bootstrap-server", bootstrap, "--id", "99", check=False
    )
    assert "Broker ID 99 is not currently registered" in gone.stdout + gone.stderr, gone


def test_each_dev_cluster_broker_serves_a_console_listing_the_cluster(kcompat_cluster: DevCluster) -> None:
    """`kcompat dev-cluster` gives every broker its own admin listener: each console's Brokers page
    lists both brokers from the image and the controller, marked active once the broker knows it."""
    import http.client

    urls = kcompat_cluster.console_urls
    assert len(urls) == 2
    controller_port = kcompat_cluster.quorum.controllers[0].port

    def brokers_page(url: str) -> str:
        conn = http.client.HTTPConnection(url.removeprefix("http://"), timeout=10)
        conn.request("GET", "/brokers")
        body = conn.getresponse().read().decode()
        conn.close()
        return body

    for url in urls:
        wait_until(
            lambda url=url: "active controller (quorum leader)" in brokers_page(url),
            "the active controller",
            timeout=40,
        )
        html = brokers_page(url)
        for b in kcompat_cluster.brokers:
            assert (
                f'<tr data-node="{b.node_id}"><td class="num">{b.node_id}</td><td>127.0.0.1</td><td class="num">{b.port}</td>'
                in html
            )
        assert html.count('<td class="state">unfenced</td>') == 2, html
        assert f'<td class="num">{controller_port}</td><td>active controller (quorum leader)</td>' in html, (
            html
        )
