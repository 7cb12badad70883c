"""Spark's `format("kafka")` (kafka-clients 3.9 inside the connector) over SASL_SSL with
SCRAM-SHA-512: a batch write and a batch read with the client settings passed as `kafka.*`
options, the server verified with a PEM truststore made in the run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from kcompat.testing import TEST_DEFAULTS, Broker, BrokerStartError, free_port, wait_until

from .kafka_io import create_topics, unique

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="spark" password="spark-secret";'


@pytest.fixture(scope="module")
def ca_pem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(the CA's certificate, the broker's key and certificate chain), both PEM."""
    d = tmp_path_factory.mktemp("spark-tls")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    ca.issue_cert("localhost", "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
        str(d / "server.pem")
    )
    yield d / "ca.pem", d / "server.pem"


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory, ca_pem: tuple[Path, Path]) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("kcompat-spark-sasl-ssl")
    props = {
        **TEST_DEFAULTS,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        "ssl.keystore.location": str(ca_pem[1]),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    }
    b = Broker(
        base / "data",
        base / "kcompat.log",
        overrides=props,
        listeners={"SASL_SSL": free_port()},
        args=["--add-scram", "SCRAM-SHA-512=[name=spark,password=spark-secret]"],
    )
    try:
        b.start()
    except BrokerStartError as exc:
        pytest.fail(str(exc), pytrace=False)
    yield b
    b.stop()


def kafka_options(broker: Broker, ca: Path) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": broker.address("SASL_SSL"),
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": JAAS,
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(ca),
    }


def test_batch_write_and_read_over_sasl_ssl_scram(
    spark: Any, secure_broker: Broker, ca_pem: tuple[Path, Path]
) -> None:
    topic = unique("spark-sasl-ssl")
    create_topics(secure_broker.bootstrap, 2, topic)  # the PLAINTEXT probe listener; Spark uses SASL_SSL only
    options = kafka_options(secure_broker, ca_pem[0])
    rows = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(40)]
    writer = (
        spark.createDataFrame(rows, "key binary, value binary").write.format("kafka").option("topic", topic)
    )
    for k, v in options.items():
        writer = writer.option(k, v)
    writer.save()

    reader = spark.read.format("kafka").option("subscribe", topic).option("startingOffsets", "earliest")
    for k, v in options.items():
        reader = reader.option(k, v)
    got = reader.load().select("key", "value", "partition").collect()
    assert sorted((bytes(r.key), bytes(r.value)) for r in got) == sorted(rows)
    assert {r.partition for r in got} == {0, 1}
    assert "failed authentication" not in secure_broker.logs()

    # the options are really used: a wrong password is the Java client's authentication error
    reader = spark.read.format("kafka").option("subscribe", topic)
    for k, v in {**options, "kafka.sasl.jaas.config": JAAS.replace("spark-secret", "wrong-pw")}.items():
        reader = reader.option(k, v)
    with pytest.raises(Exception, match="SaslAuthenticationException"):
        reader.load().collect()
    # the broker writes its line after the answer the client failed on: wait for it
    wait_until(lambda: "failed authentication with SCRAM-SHA-512 as spark" in secure_broker.logs(),
               "the broker's line about spark's refused login", timeout=10)  # fmt: skip
