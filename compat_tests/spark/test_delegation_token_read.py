"""Spark's `format("kafka")` batch read authenticated with a Kafka delegation token, as Spark does
it (spark.kafka.clusters.<id>.*), against one `kcompat serve` with a SASL_PLAINTEXT listener
(SCRAM-SHA-512 user alice) and delegation.token.secret.key set.

Spark 4.0 asks for Kafka tokens only through HadoopDelegationTokenManager, which the scheduler
backends start when Hadoop security (Kerberos) is on and which obtains nothing unless the user has
Kerberos credentials; local mode starts none at all (docs/delegation-tokens.md). So the application
(token_read_app.py) shows the manager obtaining nothing, then calls Spark's own
KafkaDelegationTokenProvider, the step the manager would take: it creates the token over SCRAM as
alice and the read's consumers log in with it (ScramLoginModule tokenauth=true, set by Spark's
KafkaConfigUpdater; the read has no security option of its own). Once the token is removed, a new
read is refused and the broker's log names the token id as the user that failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from kcompat.testing import TEST_DEFAULTS, Broker, BrokerStartError, free_port

from .conftest import ROOT, spark_jars
from .kafka_io import create_topics, unique

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

ALICE_PASSWORD = "alice-secret"
APP = Path(__file__).with_name("token_read_app.py")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """This module's broker (named `broker` so a failure shows its log tail, see conftest.py)."""
    base = tmp_path_factory.mktemp("kcompat-spark-dtoken")
    props = {
        **TEST_DEFAULTS,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "delegation.token.secret.key": "kcompat-spark-token-secret",
    }
    b = Broker(
        base / "data",
        base / "kcompat.log",
        overrides=props,
        listeners={"SASL_PLAINTEXT": free_port()},
        args=["--add-scram", f"SCRAM-SHA-512=[name=alice,password={ALICE_PASSWORD}]"],
    )
    try:
        b.start()
    except BrokerStartError as exc:
        pytest.fail(str(exc), pytrace=False)
    yield b
    b.stop()


def run_app(broker: Broker, topic: str) -> dict[str, dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [
            sys.executable,
            str(APP),
            broker.address("SASL_PLAINTEXT"),
            ALICE_PASSWORD,
            topic,
            ",".join(spark_jars()),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    steps = {}
    for line in result.stdout.splitlines():
        if line.startswith('{"step"'):
            event = json.loads(line)
            steps[event.pop("step")] = event
    assert result.returncode == 0 and "reread" in steps, (result.stdout[-3000:], result.stderr[-5000:])
    return steps


def test_spark_reads_with_a_token_its_kafka_provider_obtained(broker: Broker) -> None:
    topic = unique("spark-dtoken")
    create_topics(broker.bootstrap, 2, topic)  # the PLAINTEXT probe listener; Spark uses SASL only
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    expected = []
    for i in range(20):
        producer.produce(topic, key=f"k{i}", value=f"v{i}", partition=i % 2)
        expected.append((f"k{i}", f"v{i}", i % 2))
    assert producer.flush(20) == 0

    steps = run_app(broker, topic)

    # Spark's manager, as local mode without Kerberos has it, obtains no token
    assert steps["manager"] == {"security_enabled": False, "kafka_provider_loaded": True, "tokens": 0}
    # Spark's Kafka provider obtained one from kcompat, owned by the user it logged in as
    token_id = steps["provider"]["token_id"]
    assert token_id and steps["provider"]["kind"] == "KAFKA_DELEGATION_TOKEN"
    assert {"id": token_id, "owner": "User:alice"} in steps["describe"]["tokens"]
    # the read, logged in with the token, got every record of both partitions
    assert [tuple(r) for r in steps["read"]["rows"]] == sorted(expected)
    # the token removed: a new read is refused at its SASL login, which used the token id
    assert "SaslAuthenticationException" in steps["reread"].get("error", ""), steps["reread"]
    assert f"failed authentication with SCRAM-SHA-512 as {token_id}" in broker.logs()
    assert token_id not in (broker.data_dir / "kcompat-delegation-tokens").read_text()
