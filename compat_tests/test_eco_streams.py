"""Python stream processors in exactly-once mode against `kcompat serve`: a faust-streaming app
(processing_guarantee="exactly_once", aiokafka underneath) and a quixstreams app
(processing_guarantee="exactly-once", librdkafka underneath), each upper-casing an input topic
into an output topic (compat_tests/eco_apps/).

Both pin client libraries that conflict with the test extra's, so they run as subprocesses with
the python of .deps/eco-venv (tools/setup-test-deps.sh builds it). Half the input is there when an
app starts, half comes while it runs, so its output spans several transactions. Checked: the
output topic read with read_committed holds every input record exactly once, transformed, in
order; the app's group committed (inside its transactions) the whole input; the app is still up.
faust's first transactional offset commit (TxnOffsetCommit v0 from aiokafka, no member id or
generation, into a group with members) is what crashed it before kcompat exempted transactional
commits from the member checks, as Kafka does.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from eco_support import eco_python, env_without_kafka, module_broker, read_committed, wait_for

from kcompat.testing import Broker

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

APPS = Path(__file__).resolve().parent / "eco_apps"
RECORDS = 2000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    yield from module_broker(tmp_path_factory.mktemp("eco-streams"))


def produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for key, value in records:
        producer.produce(topic, value, key, partition=0)
    assert producer.flush(30) == 0


def committed(bootstrap: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        (tp,) = consumer.committed([TopicPartition(topic, 0)], timeout=10)
    finally:
        consumer.close()
    return int(tp.offset)


def run_exactly_once(broker: Broker, name: str, group: str, command: list[str], log: Path) -> None:
    started = time.monotonic()
    source, sink = f"{name}-in", f"{name}-out"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(source, 1, 1), NewTopic(sink, 1, 1)]).values():
        future.result(timeout=30)
    records = [(f"k{i:05d}".encode(), f"{name}-value-{i:05d}".encode()) for i in range(RECORDS)]
    produce(broker.bootstrap, source, records[: RECORDS // 2])

    with open(log, "wb") as out:
        app = subprocess.Popen(
            [eco_python(), *command], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env=env_without_kafka(), cwd=log.parent,
        )  # fmt: skip

    def tail() -> str:
        return "\n".join(log.read_text(errors="replace").splitlines()[-60:])

    try:
        wait_for(
            f"{name}: the first half transformed",
            lambda: (
                app.poll() is None
                and len(read_committed(broker.bootstrap, sink, 1, RECORDS // 2, 1)) >= RECORDS // 2
            ),
            90,
            lambda: f"{name} exited with {app.poll()}\n{tail()}" if app.poll() is not None else tail(),
        )
        produce(broker.bootstrap, source, records[RECORDS // 2 :])
        got = read_committed(broker.bootstrap, sink, 1, RECORDS, timeout=60)
        want = [(0, key, value.upper()) for key, value in records]
        assert len(got) == len(want), f"{name}: {len(got)} committed outputs for {RECORDS} inputs\n{tail()}"
        assert got == want, (
            f"{name}: first difference at {next(i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b)}"
        )
        wait_for(
            f"{name}: the group's committed offset at the input's end",
            lambda: committed(broker.bootstrap, group, source) == RECORDS,
            30,
            lambda: f"committed {committed(broker.bootstrap, group, source)}\n{tail()}",
        )
        assert app.poll() is None, f"{name} exited with {app.returncode}\n{tail()}"
        print(f"\neco-streams {name}: {RECORDS} records exactly once in {time.monotonic() - started:.1f}s")
    finally:
        if app.poll() is None:
            app.terminate()
            try:
                app.wait(timeout=20)
            except subprocess.TimeoutExpired:
                app.kill()
                app.wait()


def test_faust_exactly_once(broker: Broker, tmp_path: Path) -> None:
    app = APPS / "faust_upper.py"
    command = [str(app), broker.bootstrap, "faust-in", "faust-out", "worker", "--loglevel", "info"]
    run_exactly_once(broker, "faust", "eco-faust", command, tmp_path / "faust.log")


def test_quixstreams_exactly_once(broker: Broker, tmp_path: Path) -> None:
    app = APPS / "quix_upper.py"
    command = [str(app), broker.bootstrap, "quix-in", "quix-out", str(tmp_path / "state")]
    run_exactly_once(broker, "quix", "eco-quix", command, tmp_path / "quix.log")
