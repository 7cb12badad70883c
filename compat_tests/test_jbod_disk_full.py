"""A log dir whose disk fills up under a running `kcompat serve`: a real ENOSPC from a 4 MiB tmpfs
(mounted here: the test needs root, as CI has). The full dir is taken offline, its partition
answers KAFKA_STORAGE_ERROR to a real producer, kafka-log-dirs reports the dir with
KafkaStorageException, and the other dir serves on: every record acknowledged there is read back
and the broker keeps running."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaStorageError
from support import kafka_tool

from compat_tests.jbod_wire import dir_errors, placement
from kcompat.testing import Broker


@pytest.fixture(scope="module")
def small_disk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Broker, Path, Path]]:
    base = tmp_path_factory.mktemp("jbod-full")
    big, small = base / "big", base / "small"
    small.mkdir()
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(small)], capture_output=True
    )
    if mount.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs (this test needs root): {mount.stderr.decode().strip()}")
    broker = Broker(
        data_dir=big,
        log_path=base / "broker.log",
        overrides={"log.dirs": f"{big},{small}", "num.partitions": "2"},
    )
    try:
        broker.start()
        yield broker, big, small
    finally:
        broker.stop()
        subprocess.run(["umount", str(small)], check=False)


def test_a_full_dir_goes_offline_and_the_other_serves(small_disk: tuple[Broker, Path, Path]) -> None:
    broker, big, small = small_disk
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("fill", 2, 1)])["fill"].result(timeout=30)
    where = placement(broker.bootstrap, "fill")
    on_small = next(p for (p, _), d in where.items() if d == str(small))
    on_big = 1 - on_small
    assert where[(on_big, False)] == str(big)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", retries=0, linger_ms=0)
    error = None
    for i in range(200):  # 200 x 64 KiB: far more than 4 MiB
        try:
            producer.send("fill", b"%08d" % i + b"x" * 65_536, partition=on_small).get(timeout=30)
        except KafkaStorageError as e:
            error = e
            break
    assert error is not None, "the 4 MiB disk never filled"
    # The other dir serves on.
    acked_big = [
        producer.send("fill", b"%08d" % i, partition=on_big).get(timeout=30).offset for i in range(50)
    ]
    with pytest.raises(KafkaStorageError):  # offline from then on, even for a small record
        producer.send("fill", b"small", partition=on_small).get(timeout=30)
    producer.close()
    assert dir_errors(broker.bootstrap) == {str(big): 0, str(small): 56}  # KAFKA_STORAGE_ERROR
    out = kafka_tool("kafka-log-dirs", "--bootstrap-server", broker.bootstrap, "--describe").stdout
    (described,) = json.loads(next(x for x in out.splitlines() if x.startswith("{")))["brokers"]
    errors = {d["logDir"]: d["error"] for d in described["logDirs"]}
    assert errors == {str(big): None, str(small): "org.apache.kafka.common.errors.KafkaStorageException"}
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    consumer.assign([TopicPartition("fill", on_big)])
    consumer.seek_to_beginning()
    read: list[tuple[int, bytes]] = []
    while len(read) < len(acked_big):
        batches = consumer.poll(timeout_ms=5000)
        assert batches, f"read {len(read)} of {len(acked_big)}"
        read += [(r.offset, r.value) for rs in batches.values() for r in rs]
    consumer.close()
    assert read == [(o, b"%08d" % i) for i, o in enumerate(acked_big)] and broker.running
    log = broker.log_path.read_text()
    assert f"log dir {small} is offline" in log and "Traceback" not in log
