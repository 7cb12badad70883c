"""Share groups (KIP-932) with real clients against one `kcompat serve` (single node):

    confluent-kafka's ShareConsumer, implicit acknowledgement: two members share one group, each
        record reaches exactly one of them;
    explicit acknowledgement: RELEASE redelivers with the delivery count raised, REJECT archives,
        a record released as often as group.share.delivery.count.limit allows is archived;
    a member killed -9 holding acquired records: they come back to the other member with the count
        raised, at once (its connection closed: Kafka then ends its share session and releases
        them) rather than when the acquisition lock (group.share.record.lock.duration.ms) runs out;
    Java's KafkaShareConsumer 4.3.1 (Kafka's VerifiableShareConsumer) beside a confluent member,
        and in explicit mode (java/ShareConsumer.java): RELEASE, REJECT and the delivery-count limit;
    kafka-share-groups --describe --members / --state.

Share groups start at `latest` (share.auto.offset.reset), so each test first has its members
fetch: it produces a warm-up record to each partition until a member has seen one there.
"""

from __future__ import annotations

import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from groups_members import compile_java
from share_support import (
    JavaShareMember,
    share_beside_java,
    share_group_state,
    share_members,
    wait_all_acknowledged,
    wait_for_members,
)
from support import KAFKA_JARS, ROOT, java_classpath, java_executable, kafka_tool

from kcompat.testing import TEST_DEFAULTS, Broker

pytestmark = pytest.mark.timeout(240)

LOCK_MS = 3000
DELIVERY_LIMIT = 3
WARM = b"warm-up"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("share-broker")
    props = {
        **TEST_DEFAULTS,
        "group.share.record.lock.duration.ms": str(LOCK_MS),
        "group.share.min.record.lock.duration.ms": "1000",
        "group.share.delivery.count.limit": str(DELIVERY_LIMIT),
        "group.share.heartbeat.interval.ms": "500",
        "group.share.session.timeout.ms": "6000",
    }
    b = Broker(base / "data", base / "kcompat.log", overrides=props)
    b.start()
    yield b
    b.stop()


def topic(broker: Broker, name: str, partitions: int) -> str:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept until the result is in
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def share_consumer(broker: Broker, group: str, t: str, mode: str = "implicit") -> ShareConsumer:
    c = ShareConsumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, "share.acknowledgement.mode": mode}
    )
    c.subscribe([t])
    return c


def produce(broker: Broker, t: str, values: list[bytes], partitions: int) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i, v in enumerate(values):
        p.produce(t, value=v, partition=i % partitions)
    assert p.flush(30) == 0


def poll(c: ShareConsumer, timeout: float = 0.3, ack: Any = None) -> list[Any]:
    """The records of one poll (errors fail the test); explicit mode: each acknowledged with `ack`."""
    out = []
    for m in c.poll(timeout):
        assert m.error() is None, m.error()
        if ack is not None:
            c.acknowledge(m, ack)
        out.append(m)
    return out


def warm_up(
    broker: Broker,
    t: str,
    partitions: int,
    consumers: list[ShareConsumer],
    explicit: bool = False,
    java: JavaShareMember | None = None,
    each: bool = False,
) -> None:
    """Until every partition's share-partition is initialized (a warm-up record reached a member;
    with a Java member beside them it may take every warm-up, so what it gets counts too); with
    `each`, also until every consumer got one: members created together join one after the other,
    and the first may take every warm-up while it still holds every partition."""
    seen: set[int] = set()
    fed = [False] * len(consumers)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    deadline = time.time() + 60
    while len(seen) < partitions or (each and not all(fed)):
        missing = set(range(partitions)) - seen
        assert time.time() < deadline, f"no member fetched from partitions {missing}; fed {fed}"
        for part in missing or range(partitions):
            p.produce(t, value=WARM, partition=part)
        p.flush(10)
        for i, c in enumerate(consumers):
            for m in poll(c, 0.5, AcknowledgeType.ACCEPT if explicit else None):
                assert m.value() == WARM
                seen.add(m.partition())
                fed[i] = True
        if java is not None:
            seen |= java.warm_partitions
        if explicit:
            for c in consumers:
                c.commit_sync(10)


def drain(consumers: list[ShareConsumer], want: int, timeout: float = 60) -> list[list[Any]]:
    """Poll every consumer in turn until `want` non-warm-up records arrived in all."""
    got: list[list[Any]] = [[] for _ in consumers]
    deadline = time.time() + timeout
    while sum(map(len, got)) < want and time.time() < deadline:
        for i, c in enumerate(consumers):
            got[i] += [m for m in poll(c) if m.value() != WARM]
    return got


def test_two_members_share_a_group_each_record_once(broker: Broker) -> None:
    t = topic(broker, "share-two", 2)
    a, b = share_consumer(broker, "g-two", t), share_consumer(broker, "g-two", t)
    try:
        warm_up(broker, t, 2, [a, b], each=True)  # each must get some of what follows
        values = [f"r{i}".encode() for i in range(400)]
        produce(broker, t, values, 2)
        got = drain([a, b], len(values))
        seen = [m.value() for ms in got for m in ms]
        assert sorted(seen) == sorted(values), (
            f"{len(seen)} of {len(values)}, {len(seen) - len(set(seen))} twice"
        )
        assert all(len(ms) > 0 for ms in got), [len(ms) for ms in got]
        # implicit mode accepts what was delivered: nothing comes again
        assert drain([a, b], 1, timeout=LOCK_MS / 1000 + 2) == [[], []]
        offsets = kafka_tool("kafka-share-groups", "--bootstrap-server", broker.bootstrap,
                             "--describe", "--group", "g-two")  # fmt: skip
        rows = [line.split() for line in offsets.stdout.splitlines() if line.startswith("g-two")]
        # GROUP TOPIC PARTITION LEADER-EPOCH START-OFFSET LAG: all delivered and acknowledged
        assert sorted((r[1], r[2], r[-1]) for r in rows) == [(t, "0", "0"), (t, "1", "0")], offsets.stdout
    finally:
        a.close()
        b.close()
    # both left: the group is empty and can be deleted
    listed = kafka_tool("kafka-share-groups", "--bootstrap-server", broker.bootstrap, "--list")
    assert "g-two" in listed.stdout.split(), listed.stdout
    deleted = kafka_tool(
        "kafka-share-groups", "--bootstrap-server", broker.bootstrap, "--delete", "--group", "g-two"
    )
    assert "successful" in deleted.stdout, deleted.stdout
    listed = kafka_tool("kafka-share-groups", "--bootstrap-server", broker.bootstrap, "--list")
    assert "g-two" not in listed.stdout.split(), listed.stdout


def test_release_redelivers_reject_archives_and_the_delivery_limit(broker: Broker) -> None:
    t = topic(broker, "share-acks", 1)
    c = share_consumer(broker, "g-acks", t, mode="explicit")
    try:
        warm_up(broker, t, 1, [c], explicit=True)
        produce(broker, t, [b"release", b"reject", b"accept"], 1)
        counts: dict[bytes, list[int]] = {}
        deadline = time.time() + 60
        while time.time() < deadline and len(counts.get(b"release", [])) < DELIVERY_LIMIT:
            for m in poll(c):
                counts.setdefault(m.value(), []).append(m.delivery_count())
                verdict = {b"release": AcknowledgeType.RELEASE, b"reject": AcknowledgeType.REJECT}
                c.acknowledge(m, verdict.get(m.value(), AcknowledgeType.ACCEPT))
            c.commit_sync(10)
        # nothing more: released past the limit, rejected and accepted records are done
        end = time.time() + LOCK_MS / 1000 + 2
        while time.time() < end:
            for m in poll(c):
                counts.setdefault(m.value(), []).append(m.delivery_count())
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync(10)
        assert counts == {b"release": [1, 2, 3], b"reject": [1], b"accept": [1]}
    finally:
        c.close()


HOLDER = """
import sys, time
from confluent_kafka import ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                   "share.acknowledgement.mode": "explicit"})
c.subscribe([sys.argv[3]])
while True:
    ms = [m for m in c.poll(0.5) if m.error() is None]
    if ms:
        print(" ".join(f"{m.offset()}:{m.delivery_count()}" for m in ms), flush=True)
        break
time.sleep(600)  # holds the records, never acknowledges: killed -9 by the test
"""


def test_a_member_killed_holding_records_has_them_redelivered_after_the_lock(
    broker: Broker, tmp_path: Path
) -> None:
    t = topic(broker, "share-dies", 1)
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    holder = subprocess.Popen(
        [sys.executable, str(script), broker.bootstrap, "g-dies", t], stdout=subprocess.PIPE, text=True
    )
    other = None
    try:
        p = Producer({"bootstrap.servers": broker.bootstrap})
        line = ""
        deadline = time.time() + 60
        while not line:  # warm-up records until the holder has some (it starts at latest)
            assert time.time() < deadline and holder.poll() is None, "the holder got nothing"
            p.produce(t, value=WARM)
            p.flush(10)
            if select.select([holder.stdout], [], [], 0.5)[0]:
                assert holder.stdout is not None
                line = holder.stdout.readline().strip()
        acquired_at = time.time()
        held = {int(x.split(":")[0]) for x in line.split()}
        assert all(x.endswith(":1") for x in line.split())
        holder.kill()
        holder.wait(10)
        other = share_consumer(broker, "g-dies", t, mode="explicit")
        redelivered: dict[int, tuple[int, float]] = {}
        deadline = time.time() + 30
        while not held <= set(redelivered) and time.time() < deadline:
            for m in poll(other, ack=AcknowledgeType.ACCEPT):
                redelivered.setdefault(m.offset(), (m.delivery_count(), time.time()))
            other.commit_sync(10)
        assert held <= set(redelivered), f"held {sorted(held)}, redelivered {sorted(redelivered)}"
        for offset in held:
            count, when = redelivered[offset]
            assert count == 2
            assert when < acquired_at + LOCK_MS / 1000  # released on the close, not at lock expiry
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)
        if holder.stdout is not None:
            holder.stdout.close()
        if other is not None:
            other.close()


def test_java_share_consumer_beside_a_confluent_one_and_kafka_share_groups(
    broker: Broker, tmp_path: Path
) -> None:
    # one partition: the simple assignor gives it to both members, who share its records
    t = topic(broker, "share-java", 1)
    c = share_consumer(broker, "g-java", t)
    try:
        with JavaShareMember(broker.bootstrap, t, "g-java", tmp_path) as java:
            wait_for_members(broker.bootstrap, "g-java", t, 2, lambda: poll(c, 1.0), timeout=60)
            state = share_group_state(broker.bootstrap, "g-java")
            assert (state["STATE"], state["#MEMBERS"]) == ("Stable", "2"), state
            warm_up(broker, t, 1, [c], java=java)
            share_beside_java(broker.bootstrap, t, "g-java", c, java, lambda vs: produce(broker, t, vs, 1))
    finally:
        c.close()


def test_java_explicit_release_reject_and_the_delivery_limit(broker: Broker, tmp_path: Path) -> None:
    t = topic(broker, "share-java-acks", 1)
    classes = compile_java(
        tmp_path / "classes", KAFKA_JARS, ROOT / "compat_tests" / "java" / "ShareConsumer.java"
    )
    cp = f"{classes}:{java_classpath(KAFKA_JARS)}"
    cmd = [
        java_executable(),
        "-Xmx256m",
        "-cp",
        cp,
        "ShareConsumer",
        broker.bootstrap,
        "g-java-acks",
        t,
        "90",
    ]
    java = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(java.stdout or []), daemon=True)
    reader.start()
    try:
        p = Producer({"bootstrap.servers": broker.bootstrap})
        deadline = time.time() + 60
        while not any(line.startswith(WARM.decode()) for line in lines):  # it starts at latest
            assert time.time() < deadline and java.poll() is None, "the Java share consumer got nothing"
            p.produce(t, value=WARM)
            p.flush(10)
            time.sleep(0.5)
        p.produce(t, value=b"release-me")
        p.produce(t, value=b"reject-me")
        p.produce(t, value=b"accept-me")
        p.flush(10)

        def counts() -> dict[str, list[str]]:
            out: dict[str, list[str]] = {}
            for line in lines:
                value, _, count = line.strip().rpartition(" ")
                if value != WARM.decode():
                    out.setdefault(value, []).append(count)
            return out

        deadline = time.time() + 60
        while len(counts().get("release-me", [])) < DELIVERY_LIMIT and time.time() < deadline:
            time.sleep(0.2)
        time.sleep(LOCK_MS / 1000 + 2)  # nothing more may come
        assert counts() == {"release-me": ["1", "2", "3"], "reject-me": ["1"], "accept-me": ["1"]}
    finally:
        java.terminate()
        try:
            java.wait(30)
        except subprocess.TimeoutExpired:
            java.kill()
            java.wait(10)
        reader.join(10)
        if java.stdout is not None:
            java.stdout.close()


def test_kafka_share_groups_reset_offsets_then_a_consumer_reads_from_there(broker: Broker) -> None:
    t = topic(broker, "share-reset", 1)
    values = [f"old{i}".encode() for i in range(20)]
    produce(broker, t, values, 1)
    reset = kafka_tool("kafka-share-groups", "--bootstrap-server", broker.bootstrap, "--reset-offsets",
                       "--to-earliest", "--execute", "--group", "g-reset", "--topic", t)  # fmt: skip
    assert "g-reset" in reset.stdout, reset.stdout
    c = share_consumer(broker, "g-reset", t)
    try:
        # from the earliest offset, not from the end (share.auto.offset.reset's latest)
        got = [m.value() for ms in drain([c], len(values), timeout=30) for m in ms]
        assert sorted(got) == sorted(values), got
        # and what it acknowledged is stored: the reset's state epoch does not fence the writes
        wait_all_acknowledged(broker.bootstrap, "g-reset", 1, lambda: poll(c, 0.5))
    finally:
        c.close()
    gone = kafka_tool("kafka-share-groups", "--bootstrap-server", broker.bootstrap, "--delete-offsets",
                      "--group", "g-reset", "--topic", t)  # fmt: skip
    assert "Successful" in gone.stdout or "successful" in gone.stdout, gone.stdout


@pytest.mark.parametrize("clean", [True, False], ids=["sigterm", "kill9"])
def test_the_group_epoch_continues_across_a_broker_restart(
    broker: Broker, tmp_path: Path, clean: bool
) -> None:
    """A Java and a confluent member; the broker stopped (SIGTERM, or kill -9) and started again: the
    group comes back from its records in __consumer_offsets with its epoch, the members go on with
    theirs (no rejoin at a new epoch), and no record acknowledged before the restart comes again."""
    name = "sigterm" if clean else "kill9"
    t = topic(broker, f"share-restart-{name}", 1)
    group = f"g-restart-{name}"
    c = share_consumer(broker, group, t)
    late: list[bytes] = []  # what the confluent member got between the restart and the next round
    try:
        with JavaShareMember(broker.bootstrap, t, group, tmp_path) as java:
            wait_for_members(broker.bootstrap, group, t, 2, lambda: poll(c, 1.0), timeout=60)
            # a third member joins and leaves: an epoch the group has only from its own records
            extra = share_consumer(broker, group, t)
            wait_for_members(
                broker.bootstrap, group, t, 3, lambda: (poll(c, 0.5), poll(extra, 0.5)), timeout=60
            )
            extra.close()
            warm_up(broker, t, 1, [c], java=java)
            share_beside_java(
                broker.bootstrap, t, group, c, java, lambda vs: produce(broker, t, vs, 1), prefix="before"
            )
            wait_all_acknowledged(broker.bootstrap, group, 1, lambda: poll(c, 0.5))
            before = share_group_state(broker.bootstrap, group)
            epochs = {m["MEMBER-EPOCH"] for m in share_members(broker.bootstrap, group)}
            assert epochs == {before["GROUP-EPOCH"]} and int(before["GROUP-EPOCH"]) >= 4, (before, epochs)
            java_seen = len(java.values)

            broker.restart(clean=clean)
            wait_for_members(
                broker.bootstrap,
                group,
                t,
                2,
                lambda: late.extend(m.value() for m in poll(c, 1.0)),
                timeout=60,
            )
            after = share_group_state(broker.bootstrap, group)
            assert after["GROUP-EPOCH"] == before["GROUP-EPOCH"], (before, after)
            members = share_members(broker.bootstrap, group)
            assert {m["MEMBER-EPOCH"] for m in members} == {before["GROUP-EPOCH"]}, members
            share_beside_java(
                broker.bootstrap, t, group, c, java, lambda vs: produce(broker, t, vs, 1), prefix="after"
            )
            # the members went on with their epochs: no rejoin bumped the group's
            assert share_group_state(broker.bootstrap, group)["GROUP-EPOCH"] == before["GROUP-EPOCH"]
            again = [v for v in late if v.startswith(b"before")]
            again += [v for v in java.values[java_seen:] if v.startswith("before")]
            assert again == [], again
    finally:
        c.close()
