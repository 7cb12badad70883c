"""One member of a consumer group, run as its own process by test_groups_clients.py.

    python compat_tests/group_member.py CLIENT BOOTSTRAP TOPIC GROUP [key=value ...]

CLIENT is kafka-python, confluent or aiokafka; key=value pairs are client settings (the client's own
names). The member subscribes to TOPIC in GROUP, reads from the earliest offset when nothing is
committed, commits synchronously after every batch, and prints JSON lines on stdout, as
compat_tests/java/Consumer.java does for the Java client:

    {"ev": "assigned", "partitions": [0, 3], "t": ...}      whenever its assignment changed
    {"ev": "record", "p": 0, "o": 12, "v": "0-12", "t": ...}
    {"ev": "commit", "offsets": {"0": 13}, "t": ...}        after a commit succeeded
    {"ev": "closed", "t": ...}                              after a clean close on SIGTERM (LeaveGroup)

"t" is time.time(), so that events of different members can be put in one order. SIGKILL is the
crash case: no LeaveGroup, the broker finds out by the session timeout.
"""

from __future__ import annotations

import asyncio
import faulthandler
import json
import logging
import signal
import sys
import time
from typing import Any

stop = False


def emit(ev: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"ev": ev, **fields, "t": time.time()}) + "\n")
    sys.stdout.flush()


def on_term(*_: Any) -> None:
    global stop
    stop = True


def settings(pairs: list[str]) -> dict[str, str]:
    return dict(p.split("=", 1) for p in pairs)


class Tracker:
    def __init__(self) -> None:
        self.assigned: list[int] | None = None

    def assignment(self, partitions: list[int]) -> None:
        partitions = sorted(partitions)
        if partitions != self.assigned:
            self.assigned = partitions
            emit("assigned", partitions=partitions)


class PendingCommits:
    """Offsets read and not yet committed, by partition. A commit that fails (a rebalance under
    way) is tried again at the next poll, even if no new record comes, for the partitions still
    assigned; a revoked partition's offsets are dropped, so its next owner reads from what was
    really committed."""

    def __init__(self) -> None:
        self.offsets: dict[str, int] = {}

    def due(self, done: dict[str, int], assigned: list[int]) -> bool:
        self.offsets.update(done)
        self.offsets = {p: o for p, o in self.offsets.items() if int(p) in assigned}
        return bool(self.offsets)

    def committed(self) -> None:
        emit("commit", offsets=self.offsets)
        self.offsets = {}


def typed(value: str) -> Any:
    return int(value) if value.lstrip("-").isdigit() else value


def emit_batches(batches: dict[Any, list[Any]]) -> dict[str, int]:
    """Emit the records of a kafka-python or aiokafka poll; the offsets to commit, by partition."""
    done: dict[str, int] = {}
    for tp, msgs in batches.items():
        for m in msgs:
            emit("record", p=tp.partition, o=m.offset, v=m.value.decode())
            done[str(tp.partition)] = m.offset + 1
    return done


def run_kafka_python(bootstrap: str, topic: str, group: str, conf: dict[str, str]) -> None:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from kafka.errors import KafkaError

    assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                 "sticky": StickyPartitionAssignor}  # fmt: skip
    strategy = assignors[conf.pop("assignor", "range")]
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, partition_assignment_strategy=[strategy],
                      **{k: typed(v) for k, v in conf.items()})  # fmt: skip
    track = Tracker()
    pending = PendingCommits()
    while not stop:
        try:
            # Not less: with poll(timeout_ms=100) kafka-python 3.0.12's leader hangs now and then with its
            # JoinGroup/SyncGroup task finished unseen (about 1 run in 5; none in 20 at 1000 ms).
            batches = c.poll(timeout_ms=1000)
        except KafkaError as e:  # kafka-python 3.0 raises a refused connection (a broker restart) from poll
            emit("poll_failed", error=repr(e))
            time.sleep(0.2)
            continue
        assigned = [tp.partition for tp in c.assignment()]
        track.assignment(assigned)
        if pending.due(emit_batches(batches), assigned):
            try:
                c.commit()
                pending.committed()
            except Exception as e:  # a rebalance or a broker restart: tried again at the next poll
                emit("commit_failed", error=repr(e))
    c.close(autocommit=False)
    emit("closed")


def run_confluent(bootstrap: str, topic: str, group: str, conf: dict[str, str]) -> None:
    from confluent_kafka import Consumer, KafkaException

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, **conf})  # fmt: skip
    c.subscribe([topic])
    track = Tracker()
    pending = PendingCommits()
    while not stop:
        msgs = c.consume(num_messages=500, timeout=0.1)
        assigned = [tp.partition for tp in c.assignment()]
        track.assignment(assigned)
        done: dict[str, int] = {}
        for m in msgs:
            if m.error():
                continue
            emit("record", p=m.partition(), o=m.offset(), v=m.value().decode())
            done[str(m.partition())] = m.offset() + 1
        if pending.due(done, assigned):
            try:
                c.commit(asynchronous=False)
                pending.committed()
            except KafkaException as e:
                emit("commit_failed", error=str(e))
    c.close()
    emit("closed")


async def run_aiokafka(bootstrap: str, topic: str, group: str, conf: dict[str, str]) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.errors import KafkaError

    assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
    strategy = assignors[conf.pop("assignor", "range")]
    c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                         enable_auto_commit=False, partition_assignment_strategy=(strategy,),
                         **{k: typed(v) for k, v in conf.items()})  # fmt: skip
    await c.start()
    track = Tracker()
    pending = PendingCommits()
    while not stop:
        try:
            batches = await c.getmany(timeout_ms=100)
        except KafkaError as e:
            emit("poll_failed", error=repr(e))
            await asyncio.sleep(0.2)
            continue
        assigned = [tp.partition for tp in c.assignment()]
        track.assignment(assigned)
        if pending.due(emit_batches(batches), assigned):
            try:
                await c.commit()
                pending.committed()
            except Exception as e:
                emit("commit_failed", error=repr(e))
    await c.stop()
    emit("closed")


def main() -> None:
    client, bootstrap, topic, group, *rest = sys.argv[1:]
    # The clients' own account of joins and rebalances goes to stderr, shown when a test fails.
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    signal.signal(signal.SIGTERM, on_term)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # a stuck member's stacks, for a failing test
    conf = settings(rest)
    if client == "kafka-python":
        run_kafka_python(bootstrap, topic, group, conf)
    elif client == "confluent":
        run_confluent(bootstrap, topic, group, conf)
    elif client == "aiokafka":
        asyncio.run(run_aiokafka(bootstrap, topic, group, conf))
    else:
        raise SystemExit(f"unknown client {client}")


if __name__ == "__main__":
    main()
