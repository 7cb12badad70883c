"""The cluster suite's group rows: how long a consumer group takes to become stable, and how long
its members go without a successful offset commit when the group coordinator's broker is killed -9.

  group/{protocol}/stable_s     three confluent-kafka consumers subscribe at once to a 6-partition
                                topic (classic: the eager protocol with
                                group.initial.rebalance.delay.ms 0 on both clusters; consumer:
                                KIP-848); seconds from the first subscribe to every partition
                                assigned, each to one member
  group/coordinator_failover_s  the same classic group consuming a steady stream and committing
                                synchronously every 200 ms; the coordinator's broker (FindCoordinator
                                through DescribeGroups) is killed -9; seconds from the kill to the
                                first commit any member has acknowledged after it
  group/redelivered             records received more than once by the group over the whole run
                                (the failover's at-least-once window; commits every 200 ms)
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

PARTITIONS = 6
MEMBERS = 3
COMMIT_EVERY_S = 0.2


@dataclass
class _Member:
    consumer: Any
    assigned: set[tuple[str, int]] = field(default_factory=set)
    commits: list[float] = field(default_factory=list)  # perf_counter of each acknowledged commit
    seen: list[bytes] = field(default_factory=list)


def _consumer(bootstrap: str, group: str, protocol: str) -> Any:
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "group.protocol": protocol}  # fmt: skip
    if protocol == "classic":
        conf.update({"session.timeout.ms": 10_000, "heartbeat.interval.ms": 500})
    return Consumer(conf)


def _run_member(member: _Member, topic: str, stop: threading.Event) -> None:
    def on_assign(_c: Any, parts: list[TopicPartition]) -> None:
        member.assigned |= {(p.topic, p.partition) for p in parts}

    def on_revoke(_c: Any, parts: list[TopicPartition]) -> None:
        member.assigned -= {(p.topic, p.partition) for p in parts}

    c = member.consumer
    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    last_commit = time.perf_counter()
    pending = False
    while not stop.is_set():
        msg = c.poll(0.05)
        if msg is not None and msg.error() is None:
            member.seen.append(msg.value())
            pending = True
        if pending and time.perf_counter() - last_commit >= COMMIT_EVERY_S:
            last_commit = time.perf_counter()
            try:
                c.commit(asynchronous=False)
            except KafkaException:
                continue  # the coordinator is gone or moving: the next round retries
            member.commits.append(time.perf_counter())
            pending = False
    c.close()


def _start_members(bootstrap: str, group: str, topic: str, protocol: str, stop: threading.Event
                   ) -> tuple[list[_Member], list[threading.Thread]]:  # fmt: skip
    members = [_Member(_consumer(bootstrap, group, protocol)) for _ in range(MEMBERS)]
    threads = [threading.Thread(target=_run_member, args=(m, topic, stop), daemon=True) for m in members]
    for t in threads:
        t.start()
    return members, threads


def _stable(members: list[_Member], topic: str) -> bool:
    owned = [p for m in members for p in m.assigned]
    return all(m.assigned for m in members) and sorted(owned) == [(topic, i) for i in range(PARTITIONS)]


def time_to_stable_group(bootstrap: str, topic: str, protocol: str, timeout: float = 120.0) -> float:
    """Seconds from three members subscribing to every partition assigned to exactly one of them."""
    stop = threading.Event()
    t0 = time.perf_counter()
    members, threads = _start_members(
        bootstrap, f"stable-{protocol}-{uuid.uuid4().hex[:6]}", topic, protocol, stop
    )
    try:
        while not _stable(members, topic):
            if time.perf_counter() - t0 > timeout:
                raise TimeoutError(f"{protocol} group not stable after {timeout} s")
            time.sleep(0.01)
        return time.perf_counter() - t0
    finally:
        stop.set()
        for t in threads:
            t.join(30)


def _coordinator_of(bootstrap: str, group: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group])[group].result(timeout=30)
    return int(description.coordinator.id)


def coordinator_failover(cluster: Any, topic: str, timeout: float = 120.0) -> dict[str, float]:
    """kill -9 of a classic group's coordinator while its members consume and commit."""
    bootstrap, group = cluster.bootstrap, f"failover-{uuid.uuid4().hex[:6]}"
    stop = threading.Event()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5})
    sent = 0

    def produce_some(n: int) -> None:
        nonlocal sent
        for _ in range(n):
            producer.produce(topic, str(sent).encode(), partition=sent % PARTITIONS)
            sent += 1
        producer.poll(0)

    members, threads = _start_members(bootstrap, group, topic, "classic", stop)
    try:
        t0 = time.perf_counter()
        while not (_stable(members, topic) and all(m.commits for m in members)):
            produce_some(20)
            time.sleep(0.01)
            if time.perf_counter() - t0 > timeout:
                raise TimeoutError("the group never committed before the kill")
        coordinator = _coordinator_of(bootstrap, group)
        killed_at = time.perf_counter()
        cluster.kill(coordinator)
        while True:
            produce_some(20)
            time.sleep(0.01)
            after = [t for m in members for t in m.commits if t > killed_at]
            if after:
                failover = min(after) - killed_at
                break
            if time.perf_counter() - killed_at > timeout:
                raise TimeoutError(f"no commit {timeout} s after killing the coordinator {coordinator}")
        time.sleep(2.0)  # let the members settle, then count what came again
        received = [v for m in members for v in m.seen]
        return {"coordinator_failover_s": failover, "redelivered": float(len(received) - len(set(received)))}
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        producer.flush(10)
