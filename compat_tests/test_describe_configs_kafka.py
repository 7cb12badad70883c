"""DescribeConfigs answered as Apache Kafka 4.3.1 answers it.

One real Kafka 4.3.1 (single-node KRaft, from the jars of .deps/kafka) and one `kcompat serve`
get the same handful of broker properties (some from the properties file, some as --override for
kcompat); both are sent the same raw DescribeConfigs v4 (all configs, synonyms, documentation)
for the broker resource and for a topic with overrides, and every property both know is compared
on source, read_only, is_sensitive and config_type, and on its synonyms' names and sources.
Values are compared only for the properties the test set, since the rest hold node-specific
paths, ports and ids or different (documented) defaults. A last test layers per-broker and
cluster-wide dynamic values (IncrementalAlterConfigs) on both and compares again, the "" resource
included.
"""

from __future__ import annotations

import socket
import struct
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.brokers import KafkaBroker
from kcompat.testing import Broker, recv_exact
from kcompat.wire.messages.create_topics import CREATE_TOPICS
from kcompat.wire.messages.describe_configs import DESCRIBE_CONFIGS
from kcompat.wire.messages.incremental_alter_configs import INCREMENTAL_ALTER_CONFIGS
from kcompat.wire.protocol import decode_response, encode_request
from kcompat.wire.schema import Api

pytestmark = pytest.mark.timeout(300)

# Given to both brokers: in the properties file ...
FILE_PROPS = {
    "num.partitions": "3",
    "log.retention.ms": "86400000",
    "log.retention.hours": "72",
    "message.max.bytes": "2000000",
    "log.roll.hours": "48",  # without log.roll.ms: Kafka's segment.ms then lists no synonyms
}
# ... and on the command line (kcompat's --override; Kafka's own --override flag of kafka.Kafka).
OVERRIDE_PROPS = {
    "auto.create.topics.enable": "false",
    "log.segment.bytes": "536870912",
    "log.cleanup.policy": "delete",
}
TOPIC = "described"
TOPIC_CONFIGS = {"cleanup.policy": "compact", "retention.ms": "3600000", "max.message.bytes": "500000"}

# Properties where kcompat deliberately answers otherwise, and why. Every entry is checked to
# still differ (a fixed difference must leave this list).
_ELR = (
    "Kafka 4.3's KRaft controller writes a cluster-wide min.insync.replicas "
    "(DYNAMIC_DEFAULT_BROKER_CONFIG) when storage is formatted with eligible leader replicas "
    "(KIP-966) on; kcompat has no controller and no ELR, so its value is the DEFAULT_CONFIG one"
)
EXCLUDED: dict[str, dict[str, str]] = {
    "broker": {
        "node.id.synonyms": "kcompat has a default node.id (1) so that it runs without a properties "
        "file, and lists it as the DEFAULT_CONFIG synonym; Kafka's node.id has no default",
        "min.insync.replicas.source": _ELR,
        "min.insync.replicas.synonyms": _ELR,
    },
    "topic": {"min.insync.replicas.source": _ELR, "min.insync.replicas.synonyms": _ELR},
}

# Fewer would mean a property table lost entries (Kafka 4.3.1 reports 340 broker properties and 33
# topic configs; kcompat reports every one of them).
MIN_COMPARED = {"broker": 340, "topic": 33}


class _Kafka(KafkaBroker):
    def properties(self) -> dict[str, str]:
        return {**super().properties(), **FILE_PROPS}

    def command(self, properties: Path) -> list[str]:
        cmd = self._java(["-Xmx512m", "-Xms256m", "-XX:+UseSerialGC"], "kafka.Kafka", str(properties))
        for key, value in OVERRIDE_PROPS.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd


class Wire:
    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=30)
        self.correlation = 0

    def call(self, api: Api, version: int, body: Any) -> Any:
        self.correlation += 1
        self.sock.sendall(encode_request(api.key, version, self.correlation, body, client_id="describe-test"))
        (size,) = struct.unpack(">i", recv_exact(self.sock, 4))
        correlation, resp = decode_response(api.key, version, recv_exact(self.sock, size))
        assert correlation == self.correlation
        return resp

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Kafka]:
    why = KafkaBroker.available()
    if why is not None:
        pytest.skip(why)
    broker = _Kafka(tmp_path_factory.mktemp("kafka-describe"))
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def kcompat(kafka: _Kafka, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """kcompat with Kafka's own properties file: its listeners, advertised listeners and data
    directory its own (as --override), the KRaft settings accepted and ignored."""
    base = tmp_path_factory.mktemp("kcompat-describe")
    props = base / "server.properties"
    theirs = (kafka.workdir / "server.properties").read_text()
    mine = [
        line
        for line in theirs.splitlines()
        if line.split("=", 1)[0] not in ("listeners", "advertised.listeners", "log.dirs")
    ]
    props.write_text("\n".join(mine) + "\n")

    class _FromFile(Broker):
        def command(self) -> list[str]:
            cmd = super().command()  # python -m kcompat serve --override ...
            return [
                *cmd[:4],
                str(props),
                *cmd[4:],
                "--override",
                f"advertised.listeners=PLAINTEXT://{self.bootstrap}",
            ]

    broker = _FromFile(base / "data", base / "kcompat.log", overrides=OVERRIDE_PROPS, python=sys.executable)
    broker.start()
    yield broker
    broker.stop()


def _create_topic(wire: Wire) -> None:
    body = {
        "topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in TOPIC_CONFIGS.items()]}],
        "timeout_ms": 30000, "validate_only": False,
    }  # fmt: skip
    result = wire.call(CREATE_TOPICS, 7, body).topics[0]
    assert result.error_code in (0, 36), result  # 36: TOPIC_ALREADY_EXISTS (module-scoped brokers)


def _describe(host: str, port: int, resource_type: int, name: str) -> dict[str, Any]:
    wire = Wire(host, port)
    try:
        if resource_type == 2:
            _create_topic(wire)
        body = {"resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": None}],
                "include_synonyms": True, "include_documentation": True}  # fmt: skip
        # Kafka's broker may not have applied the new topic's records yet when its controller has
        # answered CreateTopics: UNKNOWN_TOPIC_OR_PARTITION (3) until it has.
        deadline = time.monotonic() + 30
        result = wire.call(DESCRIBE_CONFIGS, 4, body).results[0]
        while result.error_code == 3 and time.monotonic() < deadline:
            time.sleep(0.1)
            result = wire.call(DESCRIBE_CONFIGS, 4, body).results[0]
    finally:
        wire.close()
    assert result.error_code == 0, result
    return {c.name: c for c in result.configs}


def _shape(entry: Any) -> dict[str, Any]:
    return {
        "source": entry.config_source,
        "read_only": entry.read_only,
        "is_sensitive": entry.is_sensitive,
        "config_type": entry.config_type,
        "synonyms": [(s.name, s.source) for s in entry.synonyms],
    }


def _compare(kafka_rows: dict[str, Any], ours: dict[str, Any], resource: str) -> tuple[int, dict[str, str]]:
    common = sorted(set(kafka_rows) & set(ours))
    differences: dict[str, str] = {}
    for name in common:
        theirs, mine = _shape(kafka_rows[name]), _shape(ours[name])
        for field, value in theirs.items():
            if mine[field] != value:
                differences[f"{name}.{field}"] = f"kafka={value} kcompat={mine[field]}"
    print(f"\n{resource}: {len(common)} properties compared ({len(kafka_rows)} in Kafka, {len(ours)} in kcompat), "
          f"{len(differences)} fields differ")  # fmt: skip
    for key, what in sorted(differences.items()):
        print(f"  {key}: {what}")
    print(f"  only in kcompat: {sorted(set(ours) - set(kafka_rows))}")
    return len(common), differences


def _check(resource: str, compared: int, differences: dict[str, str]) -> None:
    excluded = EXCLUDED[resource]
    unexplained = {k: v for k, v in differences.items() if k not in excluded}
    assert not unexplained, f"{resource}: {unexplained}"
    no_longer = set(excluded) - set(differences)
    assert not no_longer, f"{resource}: {no_longer} now match Kafka: take them off EXCLUDED"
    assert compared >= MIN_COMPARED[resource]


def _check_listed(resource: str, theirs: dict[str, Any], ours: dict[str, Any]) -> None:
    """Every property Kafka describes, kcompat describes too (issue 29)."""
    assert set(theirs) - set(ours) == set(), f"{resource}: described by Kafka only"


def test_broker_describe_configs_matches_kafka(kafka: _Kafka, kcompat: Broker) -> None:
    theirs = _describe(kafka.host, kafka.port, 4, "1")
    ours = _describe(kcompat.host, kcompat.port, 4, "1")
    compared, differences = _compare(theirs, ours, "broker")
    _check("broker", compared, differences)
    _check_listed("broker", theirs, ours)
    # The values the test set are reported as set, with Kafka's string form.
    for name, value in {**FILE_PROPS, **OVERRIDE_PROPS}.items():
        assert ours[name].value == theirs[name].value == value, name
        assert ours[name].config_source == 4  # STATIC_BROKER_CONFIG


def test_topic_describe_configs_matches_kafka(kafka: _Kafka, kcompat: Broker) -> None:
    theirs = _describe(kafka.host, kafka.port, 2, TOPIC)
    ours = _describe(kcompat.host, kcompat.port, 2, TOPIC)
    compared, differences = _compare(theirs, ours, "topic")
    _check("topic", compared, differences)
    _check_listed("topic", theirs, ours)
    for name in ("cleanup.policy", "retention.ms", "max.message.bytes", "segment.bytes", "segment.ms"):
        assert ours[name].value == theirs[name].value, name
        assert [(s.name, s.value, s.source) for s in ours[name].synonyms] == [
            (s.name, s.value, s.source) for s in theirs[name].synonyms
        ], name


DYNAMIC = {
    "1": {"log.retention.ms": "7200000", "log.cleaner.threads": "2"},
    "": {"log.retention.ms": "9000000", "message.max.bytes": "3000000"},
}


def _alter_dynamic(host: str, port: int) -> None:
    wire = Wire(host, port)
    try:
        body = {"resources": [{"resource_type": 4, "resource_name": name,
                               "configs": [{"name": k, "config_operation": 0, "value": v} for k, v in configs.items()]}
                              for name, configs in DYNAMIC.items()],
                "validate_only": False}  # fmt: skip
        for r in wire.call(INCREMENTAL_ALTER_CONFIGS, 1, body).responses:
            assert r.error_code == 0, r
    finally:
        wire.close()


def _wait_applied(host: str, port: int) -> None:
    """Kafka applies dynamic configs once its controller's records reach the broker: wait for them."""
    deadline = time.monotonic() + 30
    while True:
        mine, cluster = _describe(host, port, 4, "1"), _describe(host, port, 4, "")
        if all(mine[k].value == v for k, v in DYNAMIC["1"].items()) and all(
            k in cluster and cluster[k].value == v for k, v in DYNAMIC[""].items()
        ):
            return
        assert time.monotonic() < deadline, "dynamic configs not applied within 30 s"
        time.sleep(0.2)


def test_dynamic_layers_match_kafka(kafka: _Kafka, kcompat: Broker) -> None:
    """Per-broker and cluster-wide dynamic values (IncrementalAlterConfigs) over the static ones:
    sources and synonym layers of the broker "1", the cluster default "" and a topic resource."""
    _alter_dynamic(kafka.host, kafka.port)
    _alter_dynamic(kcompat.host, kcompat.port)
    _wait_applied(kafka.host, kafka.port)
    _wait_applied(kcompat.host, kcompat.port)
    for resource_type, name, resource in ((4, "1", "broker"), (2, TOPIC, "topic")):
        theirs = _describe(kafka.host, kafka.port, resource_type, name)
        ours = _describe(kcompat.host, kcompat.port, resource_type, name)
        compared, differences = _compare(theirs, ours, resource)
        _check(resource, compared, differences)
        row = "retention.ms" if resource == "topic" else "log.retention.ms"
        assert [(s.name, s.value, s.source) for s in ours[row].synonyms] == [
            (s.name, s.value, s.source) for s in theirs[row].synonyms
        ], row
    theirs = _describe(kafka.host, kafka.port, 4, "")
    ours = _describe(kcompat.host, kcompat.port, 4, "")
    print(f"\ncluster default: kafka {sorted(theirs)} kcompat {sorted(ours)}")
    # min.insync.replicas: the cluster-wide value Kafka's controller wrote itself (_ELR).
    assert sorted(ours) == sorted(set(theirs) - {"min.insync.replicas"}) == sorted(DYNAMIC[""])
    assert theirs["min.insync.replicas"].config_source == 3
    for key in ours:
        assert (_shape(ours[key]), ours[key].value) == (_shape(theirs[key]), theirs[key].value), key
